"""The API reference (``docs/API.md``) is what ``docs/gen_api.py`` makes of the docstrings."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent


def test_the_api_reference_is_current() -> None:
    done = subprocess.run(
        [sys.executable, str(PACKAGE / "docs" / "gen_api.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
