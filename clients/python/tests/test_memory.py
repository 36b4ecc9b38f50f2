"""Flat memory: a 96 MiB upload (resumable: over the 64 MiB threshold) and its verified
download grow a fresh interpreter's peak RSS by less than 32 MiB (the chunk is 8 MiB)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import weft
from conftest import World

CHILD = r"""
import json, resource, sys
import weft
spec = json.loads(sys.argv[1])
client = weft.Client(spec["url"], agent_id=spec["agent"], group_id=spec["group"],
                     key=weft.AgentKey.load(spec["key"]))
client.open_session()
client.start(spec["workItem"])
idle = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
published = client.put(spec["file"], work_item=spec["workItem"])
client.get(published["artifact"], spec["file"] + ".copy")
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"idle": idle, "peak": peak}))
"""


def test_a_large_upload_and_download_keep_memory_flat(world: World, tmp_path: Path) -> None:
    work_item = world.work_item()
    world.worker.checkpoint(work_item, note="the child process starts it again")
    key_file = world.worker_key.save(tmp_path / "agent.key")
    data = tmp_path / "large.bin"
    block = os.urandom(1 << 20)
    with data.open("wb") as out:
        for _ in range(96):
            out.write(block)
    spec = {
        "url": world.server.url,
        "agent": world.worker.agent_id,
        "group": world.group,
        "key": str(key_file),
        "workItem": work_item,
        "file": str(data),
    }
    env = {**os.environ, "PYTHONPATH": str(Path(weft.__file__).resolve().parent.parent)}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(spec)], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr
    rss = json.loads(done.stdout)
    grown_mib = (rss["peak"] - rss["idle"]) / 1024
    assert grown_mib < 32, f"peak RSS grew by {grown_mib:.0f} MiB"
    assert (tmp_path / "large.bin.copy").read_bytes() == data.read_bytes()
