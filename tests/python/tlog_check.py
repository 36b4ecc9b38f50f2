"""Checks a weft Group's transparency log with aics-tlog, a C2SP implementation nobody at weft
wrote (issue #45). Runs under Python >= 3.12 (aics-tlog's floor), from `scripts/test`'s
second venv (WEFT_PYTHON_TLOG).

Usage: tlog_check.py DIR, where DIR holds what the server served for one Group:
  checkpoint   the signed note of GET /v1/groups/{g}/tlog/checkpoint
  vkey         the Authority's verifier key under the log's origin (name+id+base64)
  origin       the origin line the checkpoint must carry
  tile/...     every hash tile and entry bundle of that tree, at its C2SP path
  proofs.json  {"inclusion": [{sequence, treeSize, leafIndex, hashes}],
                "consistency": [{from, treeSize, hashes}]} as the API served them

Checks: the note's signature and origin; every tile and bundle authenticated against the
checkpoint's root (audit_tiles); every inclusion proof verifies the entry the bundles hold
and equals the proof aics-tlog derives from the tiles; every consistency proof verifies
against the older root aics-tlog computes from the tiles. Then a copy with one byte of one
tile flipped, and a note with one byte changed, must fail. Prints "ok <counts>" or exits 1.
"""

import base64
import json
import shutil
import sys
import tempfile
from pathlib import Path

from aics_tlog import (
    FileSystemTileReader,
    TileVerificationError,
    VerifiedTileReader,
    audit_tiles,
    consistency_proof_from_tiles,
    inclusion_proof_from_tiles,
    parse_note,
    parse_vkey,
    tree_root_from_tiles,
    verify_checkpoint,
    verify_consistency,
    verify_leaf_inclusion,
)


def fail(why: str) -> None:
    print(f"FAIL: {why}", file=sys.stderr)
    sys.exit(1)


def head(root: Path) -> tuple[int, bytes]:
    note = parse_note((root / "checkpoint").read_bytes())
    result = verify_checkpoint(
        note,
        parse_vkey((root / "vkey").read_text().strip()),
        expected_origin=(root / "origin").read_text().strip(),
    )
    if not result.ok:
        raise ValueError(f"checkpoint does not verify: {result.error}")
    return result.size, result.root


def main() -> None:
    root = Path(sys.argv[1])
    size, tree_root = head(root)
    reader = FileSystemTileReader(root)
    report = audit_tiles(reader, size, tree_root, entries=True)
    verified = VerifiedTileReader(reader, size, tree_root)
    proofs = json.loads((root / "proofs.json").read_text())
    for p in proofs["inclusion"]:
        index, tree_size = p["leafIndex"], p["treeSize"]
        if index != p["sequence"] - 1 or tree_size != size:
            fail(f"inclusion proof of Event {p['sequence']}: index {index}, size {tree_size}")
        hashes = [base64.b64decode(h) for h in p["hashes"]]
        entry = verified.entry(index)
        if not verify_leaf_inclusion(entry, index, size, hashes, tree_root):
            fail(f"inclusion proof of Event {p['sequence']} does not verify")
        if hashes != inclusion_proof_from_tiles(reader, index, size):
            fail(f"inclusion proof of Event {p['sequence']} is not the tiles' proof")
    for p in proofs["consistency"]:
        old = p["from"]
        hashes = [base64.b64decode(h) for h in p["hashes"]]
        old_root = tree_root_from_tiles(reader, old, size) if old else hashlib_empty()
        if old and not verify_consistency(old, size, old_root, tree_root, hashes):
            fail(f"consistency proof {old} -> {size} does not verify")
        if old and old < size and hashes != consistency_proof_from_tiles(reader, old, size):
            fail(f"consistency proof {old} -> {size} is not the tiles' proof")

    # Tampering must be caught: one byte of one tile, one byte of the note.
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / "log"
        shutil.copytree(root, copy)
        tile = sorted(p for p in (copy / "tile").rglob("*") if p.is_file())[0]
        data = bytearray(tile.read_bytes())
        data[len(data) // 2] ^= 0x01
        tile.write_bytes(bytes(data))
        try:
            audit_tiles(FileSystemTileReader(copy), size, tree_root, entries=True)
            fail(f"a flipped byte in {tile.relative_to(copy)} went unnoticed")
        except TileVerificationError:
            pass
        note = bytearray((copy / "checkpoint").read_bytes())
        note[note.index(b"\n") + 1] ^= 0x01  # a digit of the tree size
        (copy / "checkpoint").write_bytes(bytes(note))
        try:
            head(copy)
            fail("a changed checkpoint verified")
        except ValueError:
            pass
    print(
        f"ok size={size} tiles={report.tiles} bundles={report.bundles} "
        f"inclusion={len(proofs['inclusion'])} consistency={len(proofs['consistency'])}"
    )


def hashlib_empty() -> bytes:
    import hashlib

    return hashlib.sha256(b"").digest()


if __name__ == "__main__":
    main()
