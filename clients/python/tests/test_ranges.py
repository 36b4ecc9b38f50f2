"""Verified ranges: every range of artifacts of awkward sizes comes back proven against the
digest, and one altered byte of a proof fails it."""

from __future__ import annotations

import io
import random

import httpx
import pytest

import weft
from conftest import World
from faults import faulty_client
from weft import bao


def test_ranges_verify_against_the_digest(world: World) -> None:
    work_item = world.work_item()
    rng = random.Random(7)
    for size in (1, 1000, 1024, 1025, 16384, 16385, 50_000, 300_000):
        data = rng.randbytes(size)
        digest = world.worker.put(io.BytesIO(data), work_item=work_item)["artifact"]
        cases = {(0, size), (0, 1), (size - 1, size), (size // 3, size // 2 + 1)}
        if size > 20_000:
            cases |= {(16384, 32768), (1000, 17000), (size - 20_000, size - 5)}
        for start, end in sorted(cases):
            if start >= end:
                continue
            got = world.worker.verified_range(digest, start, end)
            assert got == data[start:end], (size, start, end)


def test_an_altered_proof_is_refused(world: World) -> None:
    work_item = world.work_item()
    data = random.Random(8).randbytes(100_000)
    digest = world.worker.put(io.BytesIO(data), work_item=work_item)["artifact"]

    def rule(request: httpx.Request, _: int) -> str | None:
        return "flip" if request.url.path.endswith("/content") else None

    reader, _, _ = faulty_client(world.worker, rule)
    with pytest.raises(weft.IntegrityError):
        reader.verified_range(digest, 20_000, 40_000)
    # A proof cut short, or with bytes after it, fails too.
    response = httpx.get(
        f"{world.server.url}/v1/artifacts/{digest}/content",
        headers={
            "Authorization": f"Bearer {world.worker.session.token}",
            "Accept": bao.MEDIA_TYPE,
            "Range": "bytes=20000-39999",
        },
    )
    proof = response.content
    assert bao.verify_range(digest, len(data), 20_000, 40_000, proof) == data[20_000:40_000]
    for broken in (proof[:-1], proof + b"\0"):
        with pytest.raises(weft.IntegrityError):
            bao.verify_range(digest, len(data), 20_000, 40_000, broken)
    # A size that changes the tree's shape does not verify (a size within the last chunk
    # is proven only by a proof that covers the last chunk).
    with pytest.raises(weft.IntegrityError):
        bao.verify_range(digest, len(data) * 2, 20_000, 40_000, proof)
