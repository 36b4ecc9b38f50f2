"""Writes ``docs/API.md``, the API reference, from the package's docstrings and signatures.

    PYTHONPATH=src python docs/gen_api.py          # rewrite docs/API.md
    PYTHONPATH=src python docs/gen_api.py --check  # exit 1 if docs/API.md is out of date

``tests/test_docs.py`` runs the check, so the reference never drifts from the code.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

import weft

OUT = Path(__file__).resolve().parent / "API.md"


def _doc(thing: object) -> str:
    return inspect.cleandoc(inspect.getdoc(thing) or "").strip()


def _signature(thing: object) -> str:
    try:
        return str(inspect.signature(thing))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "(…)"


def render() -> str:
    lines = [
        "# weft-client API reference",
        "",
        "Generated from the docstrings by `docs/gen_api.py`; do not edit by hand.",
        "",
        _doc(weft),
        "",
    ]
    for name in sorted(weft.__all__, key=lambda n: (not inspect.isclass(getattr(weft, n)), n)):
        thing = getattr(weft, name)
        if inspect.isclass(thing):
            bases = ", ".join(base.__name__ for base in thing.__bases__ if base is not object)
            lines += [f"## class `{name}`" + (f" ({bases})" if bases else ""), "", _doc(thing), ""]
            members = []
            for klass in reversed(thing.__mro__):
                if klass.__module__.startswith("weft"):
                    members += [m for m in vars(klass) if not m.startswith("_")]
            for member in sorted(dict.fromkeys(members)):
                value = inspect.getattr_static(thing, member)
                if isinstance(value, property):
                    lines += [f"- `{member}` (property): {_doc(value) or '—'}"]
                elif callable(value) or isinstance(value, (classmethod, staticmethod)):
                    function = getattr(thing, member)
                    doc = _doc(function).replace("\n", " ")
                    lines += [f"- `{member}{_signature(function)}`" + (f": {doc}" if doc else "")]
            lines.append("")
        elif callable(thing):
            lines += [f"## `{name}{_signature(thing)}`", "", _doc(thing), ""]
    return "\n".join(lines).rstrip() + "\n"


def main() -> int:
    text = render()
    if "--check" in sys.argv:
        if OUT.read_text(encoding="utf-8") != text:
            print(f"{OUT} is out of date: run python docs/gen_api.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
