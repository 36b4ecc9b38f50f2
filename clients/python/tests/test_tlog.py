"""The transparency log, checked by the client (``weft.tlog``, issue #45): RFC 6962/9162 proofs
against transparency-dev's probes, then checkpoints, inclusion and consistency against the
real server, and the refusals a lying server meets (another key, a forked or shorter tree, an
altered Event).

Policy, as ``api/tests/tlog_vectors.rs``: a hash that is not exactly 32 bytes is refused, so
``consistency/additional/sizes-are-equal-one-and-proof-is-empty.json`` (12-byte "roots") is
refused where the probe would accept it."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

import weft
from conftest import World
from weft import tlog

VECTORS = (
    Path(__file__).resolve().parents[3] / "fixtures/vectors/transparency-dev-merkle/testdata"
)


def b64(text: str) -> bytes:
    return base64.b64decode(text)


def probes(kind: str) -> list[tuple[str, dict[str, object]]]:
    found = sorted((VECTORS / kind).rglob("*.json"))
    assert len(found) > 90, f"{len(found)} {kind} vectors under {VECTORS}"
    return [(str(path.relative_to(VECTORS)), json.loads(path.read_text())) for path in found]


def test_inclusion_proofs_agree_with_transparency_devs_probes() -> None:
    for name, probe in probes("inclusion"):
        head = tlog.TreeHead(int(probe["treeSize"]), b64(str(probe["root"])))  # type: ignore[call-overload]
        proof = [b64(str(h)) for h in probe["proof"] or []]  # type: ignore[attr-defined]
        leaf = b64(str(probe["leafHash"]))
        try:
            tlog.check_inclusion(leaf, int(probe["leafIdx"]), proof, head)  # type: ignore[call-overload]
            refused = False
        except weft.IntegrityError:
            refused = True
        assert refused == bool(probe.get("wantErr")), name


def test_consistency_proofs_agree_with_transparency_devs_probes() -> None:
    for name, probe in probes("consistency"):
        old = tlog.TreeHead(int(probe["size1"]), b64(str(probe["root1"])))  # type: ignore[call-overload]
        new = tlog.TreeHead(int(probe["size2"]), b64(str(probe["root2"])))  # type: ignore[call-overload]
        proof = [b64(str(h)) for h in probe["proof"] or []]  # type: ignore[attr-defined]
        try:
            tlog.check_consistency(old, new, proof)
            refused = False
        except weft.IntegrityError:
            refused = True
        want = bool(probe.get("wantErr")) or name.endswith("sizes-are-equal-one-and-proof-is-empty.json")
        assert refused == want, name


def authority_key(world: World) -> bytes:
    keys = list(world.worker.authority_keys().values())
    assert len(keys) == 1
    return keys[0]


def test_checkpoints_proofs_and_the_whole_log_verify(world: World) -> None:
    key = authority_key(world)
    world.work_item()
    first = world.worker.tlog_checkpoint(key)
    assert first.size > 0
    assert world.worker.verify_log(checkpoint=first) >= first.size
    for event in world.worker.events(0, 1000)[: first.size]:
        world.worker.tlog_prove(event, first)
    world.work_item()
    second = world.worker.tlog_checkpoint(key, seen=first)
    assert second.size > first.size
    world.worker.tlog_extends(first, second)
    assert world.worker.verify_log(checkpoint=second) >= second.size


def test_what_a_lying_server_shows_is_refused(world: World) -> None:
    key = authority_key(world)
    world.work_item()
    head = world.worker.tlog_checkpoint(key)
    # Signed by another key, or under another Group's origin.
    with pytest.raises(weft.IntegrityError) as refused:
        world.worker.tlog_checkpoint(bytes(32 * [7]))
    assert refused.value.code.startswith("tlog_")
    note = world.worker._t.request(
        "GET", f"/v1/groups/{world.worker.session.group_id}/tlog/checkpoint"
    ).text
    with pytest.raises(weft.IntegrityError, match="tlog_origin"):
        tlog.open_checkpoint(note, key, tlog.origin(key, "another-group"))
    # A byte of the signed text changed.
    forged = note.replace("\n", "\n1", 1)
    with pytest.raises(weft.IntegrityError):
        tlog.open_checkpoint(forged, key, tlog.origin(key, world.worker.session.group_id))
    # A tree seen before that the current one does not extend: an older one with another
    # root (a fork), a larger one (a cut tail).
    world.work_item()
    for seen, code in [
        (dataclasses.replace(head, root=bytes(32)), "tlog_fork"),
        (dataclasses.replace(head, size=head.size + 10_000), "tlog_shrunk"),
    ]:
        with pytest.raises(weft.IntegrityError, match=code):
            world.worker.tlog_checkpoint(key, seen=seen)
    # An Event altered on the way: its inclusion proof does not verify.
    event = world.worker.events(0, 1)[0]
    altered = dataclasses.replace(event, _payload_text='{"altered":true}')
    with pytest.raises(weft.IntegrityError, match="tlog_proof"):
        world.worker.tlog_prove(altered, head)
    world.worker.tlog_prove(event, head)


def signed(text: str, *, key: Ed25519PrivateKey, name: str) -> tuple[str, bytes]:
    """A note of ``text`` signed by ``key`` under ``name``, and the key's raw public bytes."""
    public = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    key_id = hashlib.sha256(name.encode() + b"\n\x01" + public).digest()[:4]
    signature = key.sign(text.encode())
    line = f"\u2014 {name} {base64.b64encode(key_id + signature).decode()}\n"
    return text + "\n" + line, public


def test_notes_are_parsed_as_strictly_as_signed_note_asks() -> None:
    key = Ed25519PrivateKey.generate()
    root = base64.b64encode(bytes(range(32))).decode()
    name = "weft/0123456789abcdef/g1"
    good, public = signed(f"{name}\n5\n{root}\n", key=key, name=name)
    assert tlog.open_checkpoint(good, public, name) == tlog.TreeHead(5, bytes(range(32)))
    other = Ed25519PrivateKey.generate()
    cosigned = good + signed(f"{name}\n5\n{root}\n", key=other, name="w.test/a")[0].split("\n\n")[1]
    assert tlog.open_checkpoint(cosigned, public, name).size == 5, "another key's line is ignored"
    # Of one key's lines only the first counts (Go's note.Open).
    first = good.split("\n\n")[1]
    assert tlog.open_checkpoint(good + first[:-10] + "AAAAAAAAA\n", public, name).size == 5
    text, sep, block = good.rpartition("\n\n")
    refused = {
        "an extra blank line before the signatures": text + "\n\n\n" + block,
        "a blank line after the signatures": good + "\n",
        "no final newline": good[:-1],
        "a junk line": good + "junk\n",
        "a tab in the text": good.replace("5\n", "5\t\n", 1),
        "the right key's line cut short": text + sep + block[:-40] + "\n",
    }
    for why, note in refused.items():
        with pytest.raises(weft.IntegrityError):
            tlog.open_checkpoint(note, public, name)
            pytest.fail(why)
    for size, root_text in [("05", root), ("\uff15", root), ("18446744073709551616", root),
                            ("5", root[:-2] + "B="), ("5", root + "AAAA")]:
        note, _ = signed(f"{name}\n{size}\n{root_text}\n", key=key, name=name)
        with pytest.raises(weft.IntegrityError):
            tlog.open_checkpoint(note, public, name)
            pytest.fail(f"{size!r} {root_text!r}")
    with pytest.raises(weft.IntegrityError):
        tlog.open_checkpoint(good, public[:31], name)
