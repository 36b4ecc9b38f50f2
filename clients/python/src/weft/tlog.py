"""A Group's transparency log, checked here rather than trusted (DESIGN §15, issue #45).

The Authority keeps an RFC 6962 Merkle tree over each Group's Events (leaf ``i`` is Event
``i + 1``'s canonical bytes, the text its hash covers) and signs its head as a C2SP checkpoint
(c2sp.org/tlog-checkpoint) in a signed note (c2sp.org/signed-note) under the origin
``weft/<first 16 hex of the key's BLAKE3>/<group>``. With the Authority's public key, pinned
out of band, a client checks:

- a checkpoint: its note is signed by that key under the Group's origin (:func:`open_checkpoint`);
- that an Event is in the tree a checkpoint signs (an inclusion proof, :func:`check_inclusion`);
- that a newer checkpoint extends an older one (a consistency proof, :func:`check_consistency`):
  a server that shows this client a forked or shorter history is caught;
- that a log read whole is exactly the tree a checkpoint signs (:class:`Frontier`).

Each check raises :class:`~weft.errors.IntegrityError` (code ``tlog_*``) when it fails. The proof
algorithms are RFC 9162 §2.1.3.2 and §2.1.4.2.
"""

from __future__ import annotations

import base64
import hashlib
import re
from dataclasses import dataclass

import blake3
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from .errors import IntegrityError

_SIGNATURE_ED25519 = b"\x01"


@dataclass(frozen=True)
class TreeHead:
    """A checked checkpoint: the tree's size (leaves) and root."""

    size: int
    root: bytes


def origin(authority_key: bytes, group_id: str) -> str:
    """The checkpoint origin of ``group_id``'s log under the Authority's raw public key."""
    return f"weft/{blake3.blake3(authority_key).hexdigest()[:16]}/{group_id}"


def leaf_hash(canonical: bytes) -> bytes:
    """RFC 6962 leaf hash of one Event's canonical bytes."""
    return hashlib.sha256(b"\x00" + canonical).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """RFC 6962 interior node hash."""
    return hashlib.sha256(b"\x01" + left + right).digest()


def _fail(code: str, detail: str) -> IntegrityError:
    return IntegrityError(f"tlog_{code}", detail)


def open_checkpoint(note: str, authority_key: bytes, expected_origin: str) -> TreeHead:
    """The tree a checkpoint note commits to, once a signature of ``authority_key`` under
    ``expected_origin`` verifies over its text and its first line is that origin. The note is
    parsed as strictly as c2sp.org/signed-note asks (and ``weft_api::tlog``): its text ends at
    the last blank line, holds no empty line and no control character, and every signature
    line is ``— <name> <base64>`` ending in a newline; a malformed note is refused whole. Other
    keys' lines (witnesses' cosignatures) are ignored here; of one key's lines only the first
    counts, as Go's ``note.Open`` does."""
    if len(authority_key) != 32:
        raise _fail("key", "an Ed25519 public key is 32 bytes")
    text, sep, block = note.rpartition("\n\n")
    if not sep or not text or not block.endswith("\n"):
        raise _fail("note", "not a signed note (text, a blank line, signature lines)")
    if any(ord(char) < 0x20 and char != "\n" for char in note):
        raise _fail("note", "a control character in the note")
    lines = text.split("\n")
    if any(line == "" for line in lines) or len(lines) < 3:
        raise _fail("note", "a checkpoint is an origin, a size, a root and extension lines")
    if lines[0] != expected_origin:
        raise _fail("origin", f"the checkpoint is of {lines[0]!r}, not {expected_origin!r}")
    body = (text + "\n").encode("utf-8")
    key_id = hashlib.sha256(
        expected_origin.encode("utf-8") + b"\n" + _SIGNATURE_ED25519 + authority_key
    ).digest()[:4]
    public = Ed25519PublicKey.from_public_bytes(authority_key)
    seen: set[tuple[str, bytes]] = set()
    signed = False
    for line in block[:-1].split("\n"):
        parts = line.split(" ")
        if len(parts) != 3 or parts[0] != "\u2014" or not parts[1] or "+" in parts[1]:
            raise _fail("note", f"a malformed signature line {line!r}")
        try:
            blob = base64.b64decode(parts[2], validate=True)
        except ValueError:
            raise _fail("note", "a signature line is not base64") from None
        if len(blob) < 5:
            raise _fail("note", "a signature line shorter than a key id and a signature")
        if (parts[1], blob[:4]) in seen:
            continue
        seen.add((parts[1], blob[:4]))
        if parts[1] != expected_origin or blob[:4] != key_id:
            continue
        try:
            if len(blob) != 4 + 64:
                raise InvalidSignature
            public.verify(blob[4:], body)
        except InvalidSignature:
            raise _fail("signature", "the Authority's signature does not verify") from None
        signed = True
    if not signed:
        raise _fail("signature", "no signature of the Authority's key on the checkpoint")
    if not re.fullmatch(r"0|[1-9][0-9]{0,19}", lines[1]) or int(lines[1]) >= 2**64:
        raise _fail("note", f"the checkpoint's size {lines[1]!r} is not a 64-bit number")
    try:
        root = base64.b64decode(lines[2], validate=True)
    except ValueError:
        raise _fail("note", "the checkpoint's root is not base64") from None
    if len(root) != 32 or base64.b64encode(root).decode() != lines[2]:
        raise _fail("note", "the checkpoint's root is not 32 bytes in canonical base64")
    return TreeHead(int(lines[1]), root)


def proof_hashes(
    proof: object, tree_size: int, leaf_index: int | None = None
) -> list[bytes]:
    """The hashes of a proof as the API serves it (``{treeSize, leafIndex?, hashes}``), for
    the tree of ``tree_size`` (and leaf ``leaf_index``): a proof of another is refused."""
    if not isinstance(proof, dict):
        raise _fail("proof", "a proof is a JSON object")
    if proof.get("treeSize") != tree_size or proof.get("leafIndex") != leaf_index:
        raise _fail("proof", f"a proof of another tree or leaf than {tree_size}, {leaf_index}")
    hashes = proof.get("hashes")
    if not isinstance(hashes, list):
        raise _fail("proof", "a proof without hashes")
    out = []
    for text in hashes:
        try:
            raw = base64.b64decode(str(text), validate=True)
        except ValueError:
            raise _fail("proof", "a proof hash is not base64") from None
        if len(raw) != 32:
            raise _fail("proof", "a proof hash is not 32 bytes")
        out.append(raw)
    return out


def _hashes(*hashes: bytes) -> None:
    """A tree head, leaf or proof hash is exactly 32 bytes, always (as ``weft_api::tlog``)."""
    if any(len(h) != 32 for h in hashes):
        raise _fail("proof", "a hash that is not 32 bytes")


def check_inclusion(leaf: bytes, index: int, proof: list[bytes], head: TreeHead) -> None:
    """That the leaf hash ``leaf`` is leaf ``index`` of the tree ``head`` signs."""
    _hashes(leaf, head.root, *proof)
    if index < 0 or index >= head.size:
        raise _fail("proof", f"leaf {index} is not in a tree of {head.size}")
    fn, sn, r = index, head.size - 1, leaf
    for p in proof:
        if sn == 0:
            raise _fail("proof", "the inclusion proof is too long")
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    if sn != 0 or r != head.root:
        raise _fail("proof", f"leaf {index} is not in the tree of {head.size} the checkpoint signs")


def check_consistency(old: TreeHead, new: TreeHead, proof: list[bytes]) -> None:
    """That the tree ``new`` signs extends the tree ``old`` signs (same leaves first)."""
    _hashes(old.root, new.root, *proof)
    if old.size > new.size:
        raise _fail("shrunk", f"the tree of {new.size} is smaller than the tree of {old.size}")
    if old.size == new.size:
        if proof or old.root != new.root:
            raise _fail("fork", f"two different trees of {old.size}: a forked history")
        return
    if old.size == 0:
        if proof:
            raise _fail("proof", "a consistency proof from the empty tree is empty")
        return
    hashes = list(proof)
    if old.size & (old.size - 1) == 0:
        hashes.insert(0, old.root)
    if not hashes:
        raise _fail("proof", "an empty consistency proof")
    fn, sn = old.size - 1, new.size - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = hashes[0]
    for c in hashes[1:]:
        if sn == 0:
            raise _fail("fork", "the consistency proof is too long")
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    if sn != 0 or fr != old.root or sr != new.root:
        raise _fail(
            "fork",
            f"the tree of {new.size} does not extend the tree of {old.size}: a forked history",
        )


class Frontier:
    """The root of a tree grown one leaf at a time, in O(log n) memory."""

    def __init__(self) -> None:
        self.size = 0
        # The roots of the perfect subtrees that make the tree, largest first.
        self._stack: list[tuple[int, bytes]] = []

    def push(self, leaf: bytes) -> None:
        height, node = 0, leaf
        while self._stack and self._stack[-1][0] == height:
            _, left = self._stack.pop()
            node = node_hash(left, node)
            height += 1
        self._stack.append((height, node))
        self.size += 1

    def root(self) -> bytes:
        if not self._stack:
            return hashlib.sha256(b"").digest()
        node = self._stack[-1][1]
        for _, left in reversed(self._stack[:-1]):
            node = node_hash(left, node)
        return node
