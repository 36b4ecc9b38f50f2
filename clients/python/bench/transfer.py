"""Transfer benchmark for the Python client (issue #48): a large upload's peak memory, and
download speed against the Rust CLI's ``weft get`` on the same artifact in the same run.

    WEFT_BIN=target/release/weft PYTHONPATH=clients/python/src \\
        python clients/python/bench/transfer.py --size-mib 2048

It starts its own ``weft serve`` (release build recommended: a debug build flatters the
ratio), publishes one artifact of ``--size-mib`` MiB through ``Client.put`` (resumable above
64 MiB), then downloads it ``--rounds`` times alternately with ``Client.get`` and ``weft get``
and prints MiB/s for each and the ratio of the medians. The upload runs in a child process so
its peak RSS is its own (``ru_maxrss`` of that process), printed with the baseline of an
idle interpreter that has imported the package.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

UPLOAD = r"""
import json, os, resource, sys, time
import weft
spec = json.loads(sys.argv[1])
idle = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
key = weft.AgentKey.load(spec["key"])
client = weft.Client(spec["url"], agent_id=spec["agent"], group_id=spec["group"], key=key)
client.open_session()
client.authorize(spec["workItem"], spec["mission"], spec["contract"])
client.offer(spec["workItem"], [spec["agent"]])
client.accept_offer(spec["workItem"])
client.start(spec["workItem"])
started = time.perf_counter()
published = client.put(spec["file"], work_item=spec["workItem"])
elapsed = time.perf_counter() - started
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"artifact": published["artifact"], "seconds": elapsed, "idleKiB": idle, "peakKiB": peak}))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mib", type=int, default=2048)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    binary = os.environ.get("WEFT_BIN") or shutil.which("weft")
    if not binary:
        sys.exit("set WEFT_BIN to the weft binary")
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from conftest import BUDGET, contract

    import weft

    root = Path(tempfile.mkdtemp(prefix="weft-bench-"))
    server = subprocess.Popen(
        [binary, "serve", "--data-dir", str(root / "data"), "--listen", "127.0.0.1:0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip().removeprefix("listening on ")
        admin = weft.Admin.from_data_dir(url, root / "data")
        admin.create_group("bench")
        home = root / "home"
        key = weft.AgentKey.generate()
        key.save(home / "agent.key")
        admin.register_agent("py-bench", key)
        admin.set_membership("bench", "py-bench", ["worker", "coordinator", "auditor"])
        setup = weft.Client(url, agent_id="py-bench", group_id="bench", key=key)
        setup.open_session()
        setup.create_mission("mb", "bench", BUDGET)
        data = root / "data.bin"
        block = os.urandom(1 << 20)
        with data.open("wb") as out:
            for _ in range(args.size_mib):
                out.write(block)
        spec = {
            "url": url, "agent": "py-bench", "group": "bench", "key": str(home / "agent.key"),
            "mission": "mb", "workItem": "wb", "contract": contract(), "file": str(data),
        }
        env = {**os.environ, "PYTHONPATH": str(Path(weft.__file__).resolve().parent.parent)}
        done = subprocess.run(
            [sys.executable, "-c", UPLOAD, json.dumps(spec)], capture_output=True, text=True, env=env
        )
        if done.returncode != 0:
            sys.exit(done.stderr)
        upload = json.loads(done.stdout)
        mib = args.size_mib
        print(f"upload   {mib} MiB in {upload['seconds']:.1f} s = {mib / upload['seconds']:.0f} MiB/s; "
              f"peak RSS {upload['peakKiB'] / 1024:.0f} MiB (idle interpreter with weft imported: "
              f"{upload['idleKiB'] / 1024:.0f} MiB)")
        cli_home = {**os.environ, "WEFT_HOME": str(home), "WEFT_SERVER": url}
        subprocess.run([binary, "login", "--agent-id", "py-bench", "--group", "bench"],
                       env=cli_home, check=True, capture_output=True)
        reader = weft.Client.from_home(home)
        python_rates, cli_rates = [], []
        for _ in range(args.rounds):
            target = root / "py.bin"
            started = time.perf_counter()
            reader.get(upload["artifact"], target)
            python_rates.append(mib / (time.perf_counter() - started))
            target.unlink()
            target = root / "cli.bin"
            started = time.perf_counter()
            subprocess.run([binary, "get", upload["artifact"], "-o", str(target)],
                           env=cli_home, check=True, capture_output=True)
            cli_rates.append(mib / (time.perf_counter() - started))
            target.unlink()
        py, cli = statistics.median(python_rates), statistics.median(cli_rates)
        print(f"download Python {py:.0f} MiB/s, weft get {cli:.0f} MiB/s (medians of {args.rounds}): "
              f"{py / cli:.2f}x the CLI")
    finally:
        server.terminate()
        server.wait(timeout=60)
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
