"""Verified ranges (``Accept: application/vnd.weft.bao``): the client side of the server's
proofs, so a range read trusts no byte the server did not prove against the digest.

The server sends bao-tree 0.17's range encoding of the artifact's BLAKE3 tree with 16 KiB
chunk groups (``api/src/bao.rs``): in pre-order, for every parent on the way to the chunks
the range covers, the two children's chaining values (64 bytes), and for every chunk group the
range touches its bytes (the whole group when the range covers it, else, inside the group, the
same pre-order encoding down to 1 KiB chunks). Which nodes appear follows bao-tree's range
sets exactly (their boundaries and the way a split keeps them), so that is reproduced here
(``_split``, ``_truncate``). Hashing below the root needs BLAKE3's chaining values, which the
``blake3`` package does not expose, so the compression function is written out below (checked
against the package on every root it reaches): it is slow (about 30 ms per 16 KiB group), so
ask for ranges you mean to read, not for whole large artifacts.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator

import blake3 as blake3_lib

from .errors import IntegrityError

MEDIA_TYPE = "application/vnd.weft.bao"
CHUNK = 1024
GROUP_CHUNKS = 16

_IV = (0x6A09E667, 0xBB67AE85, 0x3C6EF372, 0xA54FF53A, 0x510E527F, 0x9B05688C, 0x1F83D9AB, 0x5BE0CD19)
_PERMUTATION = (2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8)
_CHUNK_START, _CHUNK_END, _PARENT, _ROOT = 1, 2, 4, 8
_MASK = 0xFFFFFFFF


def _g(s: list[int], a: int, b: int, c: int, d: int, x: int, y: int) -> None:
    s[a] = (s[a] + s[b] + x) & _MASK
    v = s[d] ^ s[a]
    s[d] = ((v >> 16) | (v << 16)) & _MASK
    s[c] = (s[c] + s[d]) & _MASK
    v = s[b] ^ s[c]
    s[b] = ((v >> 12) | (v << 20)) & _MASK
    s[a] = (s[a] + s[b] + y) & _MASK
    v = s[d] ^ s[a]
    s[d] = ((v >> 8) | (v << 24)) & _MASK
    s[c] = (s[c] + s[d]) & _MASK
    v = s[b] ^ s[c]
    s[b] = ((v >> 7) | (v << 25)) & _MASK


def _compress(cv: tuple[int, ...], block: bytes, counter: int, length: int, flags: int) -> tuple[int, ...]:
    m = [int.from_bytes(block[i : i + 4], "little") for i in range(0, 64, 4)]
    s = [*cv, *_IV[:4], counter & _MASK, (counter >> 32) & _MASK, length, flags]
    for round_index in range(7):
        _g(s, 0, 4, 8, 12, m[0], m[1])
        _g(s, 1, 5, 9, 13, m[2], m[3])
        _g(s, 2, 6, 10, 14, m[4], m[5])
        _g(s, 3, 7, 11, 15, m[6], m[7])
        _g(s, 0, 5, 10, 15, m[8], m[9])
        _g(s, 1, 6, 11, 12, m[10], m[11])
        _g(s, 2, 7, 8, 13, m[12], m[13])
        _g(s, 3, 4, 9, 14, m[14], m[15])
        if round_index < 6:
            m = [m[i] for i in _PERMUTATION]
    return tuple(s[i] ^ s[i + 8] for i in range(8))


def _bytes(words: tuple[int, ...]) -> bytes:
    return b"".join(word.to_bytes(4, "little") for word in words)


def chunk_cv(data: bytes, counter: int) -> bytes:
    """The chaining value of one non-root chunk (at most 1 KiB) with chunk number ``counter``."""
    cv: tuple[int, ...] = _IV
    blocks = [data[i : i + 64] for i in range(0, len(data), 64)] or [b""]
    for index, block in enumerate(blocks):
        flags = (_CHUNK_START if index == 0 else 0) | (_CHUNK_END if index == len(blocks) - 1 else 0)
        cv = _compress(cv, block.ljust(64, b"\0"), counter, len(block), flags)
    return _bytes(cv)


def parent_cv(left: bytes, right: bytes, is_root: bool) -> bytes:
    flags = _PARENT | (_ROOT if is_root else 0)
    return _bytes(_compress(_IV, left + right, 0, 64, flags))


def _left_chunks(chunks: int) -> int:
    """BLAKE3's split: the largest power of two below ``chunks`` (``chunks`` ≥ 2)."""
    return 1 << ((chunks - 1).bit_length() - 1)


def subtree_cv(start_chunk: int, data: bytes, is_root: bool) -> bytes:
    """The chaining value of the subtree of ``data`` starting at chunk ``start_chunk``."""
    if is_root:
        return blake3_lib.blake3(data).digest()
    if len(data) <= CHUNK:
        return chunk_cv(data, start_chunk)
    left = _left_chunks(-(-len(data) // CHUNK))
    return parent_cv(
        subtree_cv(start_chunk, data[: left * CHUNK], False),
        subtree_cv(start_chunk + left, data[left * CHUNK :], False),
        False,
    )


# ---- range sets as bao-tree keeps them: sorted boundaries, an odd count is open-ended -------

Ranges = tuple[int, ...]


def _split(bs: Ranges, at: int) -> tuple[Ranges, Ranges]:
    """range-collections' split: views valid on their side of ``at`` only."""
    index = bisect_left(bs, at)
    found = index < len(bs) and bs[index] == at
    if index % 2 == 0:
        return bs[:index], bs[index:]
    if found:
        return bs[:index], bs[min(index + 1, len(bs)) :]
    return bs[:index], bs[max(index - 1, 0) :]


def _split_inner(bs: Ranges, start: int, mid: int) -> tuple[Ranges, Ranges]:
    left, right = _split(bs, mid)
    if len(left) == 1 and left[0] <= start:
        left = (0,)
    if len(right) == 1 and right[0] <= mid:
        right = (0,)
    return left, right


def _is_all(bs: Ranges) -> bool:
    return bs == (0,)


def _truncate(bs: Ranges, size: int) -> Ranges:
    """bao-tree's ``truncate_ranges``: a query reaching the last chunk becomes open-ended."""
    last = max(-(-size // CHUNK) - 1, 0)
    index = bisect_left(bs, last)
    found = index < len(bs) and bs[index] == last
    if found and index % 2 == 0:
        keep = index + 1
    elif found:
        keep = index + 1 if len(bs) == index + 1 else index
    elif index % 2 == 0:
        keep = index if len(bs) == index else index + 1
    else:
        keep = index
    return bs[:keep]


class _Reader:
    def __init__(self, encoded: bytes) -> None:
        self.encoded = encoded
        self.at = 0

    def take(self, count: int) -> bytes:
        if self.at + count > len(self.encoded):
            raise IntegrityError("proof_truncated", "the proof ends early")
        piece = self.encoded[self.at : self.at + count]
        self.at += count
        return piece


def _check(actual: bytes, expected: bytes, where: str) -> None:
    if actual != expected:
        raise IntegrityError("proof_mismatch", f"the proof does not verify at {where}")


def _node(
    reader: _Reader, size: int, start: int, chunks: int, is_root: bool, ranges: Ranges, cv: bytes
) -> Iterator[tuple[int, bytes]]:
    if chunks <= GROUP_CHUNKS:
        length = min(chunks * CHUNK, size - start * CHUNK)
        if _is_all(ranges):
            data = reader.take(length)
            _check(subtree_cv(start, data, is_root), cv, f"chunk group {start // GROUP_CHUNKS}")
            yield start * CHUNK, data
        else:
            yield from _inside(reader, start, length, is_root, ranges, cv)
        return
    pair = reader.take(64)
    _check(parent_cv(pair[:32], pair[32:], is_root), cv, f"the parent at chunk {start}")
    left = _left_chunks(chunks)
    left_ranges, right_ranges = _split_inner(ranges, start, start + left)
    if left_ranges:
        yield from _node(reader, size, start, left, False, left_ranges, pair[:32])
    if right_ranges:
        yield from _node(reader, size, start + left, chunks - left, False, right_ranges, pair[32:])


def _inside(
    reader: _Reader, start: int, length: int, is_root: bool, query: Ranges, cv: bytes
) -> Iterator[tuple[int, bytes]]:
    """Inside a chunk group the range touches but does not cover (``encode_selected_rec``)."""
    if not query:
        return
    if length <= CHUNK:
        data = reader.take(length)
        _check(subtree_cv(start, data, is_root), cv, f"chunk {start}")
        yield start * CHUNK, data
        return
    half = (1 << (-(-length // CHUNK) - 1).bit_length()) // 2
    left_query, right_query = _split_inner(query, start, start + half)
    if _is_all(query):  # a covered subtree comes as its bytes
        data = reader.take(length)
        _check(subtree_cv(start, data, is_root), cv, f"chunks from {start}")
        yield start * CHUNK, data
        return
    pair = reader.take(64)
    _check(parent_cv(pair[:32], pair[32:], is_root), cv, f"the parent at chunk {start}")
    yield from _inside(reader, start, half * CHUNK, False, left_query, pair[:32])
    yield from _inside(reader, start + half, length - half * CHUNK, False, right_query, pair[32:])


def verify_range(digest: str, size: int, start: int, end: int, encoded: bytes) -> bytes:
    """The bytes ``[start, end)`` of the artifact ``digest`` (``blake3:``, ``size`` bytes)
    from a proof, or :class:`IntegrityError` when any hash, byte or length is off."""
    if not digest.startswith("blake3:") or not 0 <= start < end <= size:
        raise IntegrityError("proof_range", f"no proof of {start}..{end} of {size} bytes")
    root = bytes.fromhex(digest.removeprefix("blake3:"))
    query = _truncate((start // CHUNK, -(-end // CHUNK)), size)
    reader = _Reader(encoded)
    out = bytearray(end - start)
    covered = 0
    chunks = max(-(-size // CHUNK), 1)
    for offset, data in _node(reader, size, 0, chunks, True, query, root):
        lo, hi = max(offset, start), min(offset + len(data), end)
        if lo < hi:
            out[lo - start : hi - start] = data[lo - offset : hi - offset]
            covered += hi - lo
    if covered != end - start:
        raise IntegrityError("proof_incomplete", f"the proof does not cover {start}..{end}")
    if reader.at != len(encoded):
        raise IntegrityError("proof_trailing", "bytes after the proof")
    return bytes(out)
