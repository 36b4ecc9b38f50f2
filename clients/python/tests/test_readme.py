"""The package README's quick start runs as written: its ``setup`` shell block (the CLI,
against a server this test starts in a temporary working directory that stands in for the
reader's: ``weft-data`` is the server's data directory, ``target/release/weft`` links to the
binary under test, ``examples/`` to the repository's) and then its ``run`` Python block, in
one shell, so the Python sees the ``WEFT_HOME`` the shell exported."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import weft
from conftest import weft_binary

PACKAGE = Path(__file__).resolve().parent.parent
REPOSITORY = PACKAGE.parent.parent


def blocks(markdown: str) -> list[tuple[str, str]]:
    """(directive, body) of each fenced block marked ``<!-- py-readme-test: … -->``."""
    found = re.findall(
        r"<!-- py-readme-test: (\w+)[^>]*-->\n```(\w+)\n(.*?)```", markdown, flags=re.S
    )
    return [(directive, body) for directive, _, body in found]


def test_the_quick_start_runs_as_written(tmp_path: Path) -> None:
    marked = blocks((PACKAGE / "README.md").read_text(encoding="utf-8"))
    setup = [body for directive, body in marked if directive == "setup"]
    run = [body for directive, body in marked if directive == "run"]
    assert len(setup) == 1 and len(run) == 1, marked
    assert len([line for line in run[0].splitlines() if line.strip()]) < 10, "under ten lines"
    work = tmp_path / "work"
    (work / "target" / "release").mkdir(parents=True)
    (work / "target" / "release" / "weft").symlink_to(weft_binary())
    (work / "examples").symlink_to(REPOSITORY / "examples")
    home = tmp_path / "home"
    home.mkdir()
    server = subprocess.Popen(
        [weft_binary(), "serve", "--data-dir", "weft-data", "--listen", "127.0.0.1:0"],
        cwd=work,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip().removeprefix("listening on ")
        script = (
            "{\n" + setup[0] + "} </dev/null\n"
            + f'"{sys.executable}" - <<\'PYTHON_BLOCK\'\n' + run[0] + "PYTHON_BLOCK\n"
        )
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(home),
            "WEFT_SERVER": url,
            "PYTHONPATH": str(Path(weft.__file__).resolve().parent.parent),
        }
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stdout + done.stderr
    finally:
        server.terminate()
        server.wait(timeout=30)
