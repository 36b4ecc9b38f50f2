"""Faults between the client and the server: lost answers, refusals with Retry-After, a
dropped upload, bytes altered on the way down."""

from __future__ import annotations

import io
import os
from pathlib import Path

import httpx
import pytest

import weft
from conftest import World
from faults import faulty_client


def test_a_lost_command_answer_is_retried_and_replayed_never_executed_twice(world: World) -> None:
    work_item = world.work_item()
    before = world.worker.verify_log()
    state = {"dropped": 0}

    def rule(request: httpx.Request, _: int) -> str | None:
        if request.url.path.endswith("/commands") and state["dropped"] == 0:
            state["dropped"] += 1
            return "drop-after"
        return None

    worker, faulty, slept = faulty_client(world.worker, rule)
    answer = worker.progress(work_item, phase="reading", percent=10)
    assert state["dropped"] == 1 and len(slept) == 1
    assert [e["type"] for e in answer["events"]] == ["work.progress_reported"]
    assert world.worker.verify_log() == before + 1, "the retry replayed the first answer"


def test_503_with_retry_after_is_retried_for_safe_requests(world: World) -> None:
    calls = {"n": 0}

    def rule(request: httpx.Request, _: int) -> str | None:
        if request.method == "GET" and calls["n"] < 2:
            calls["n"] += 1
            return "503"
        return None

    worker, _, slept = faulty_client(world.worker, rule)
    assert worker.whoami()["agentId"] == world.worker.agent_id
    assert len(slept) == 2


def test_a_resumable_upload_resumes_at_the_servers_offset(world: World, tmp_path: Path) -> None:
    work_item = world.work_item()
    payload = os.urandom(3 * 256 * 1024 + 1234)
    path = tmp_path / "big.bin"
    path.write_bytes(payload)
    patches = {"n": 0}

    def rule(request: httpx.Request, _: int) -> str | None:
        if request.method == "PATCH":
            patches["n"] += 1
            if patches["n"] == 2:
                return "drop-after"
            if patches["n"] == 4:
                return "drop-before"
        return None

    worker, faulty, _ = faulty_client(world.worker, rule)
    worker.one_request_up_to = 0
    worker.resumable_above = 512 * 1024
    worker.upload_chunk = 256 * 1024
    published = worker.put(path, work_item=work_item)
    assert any(line.startswith("HEAD /v1/uploads/") for line in faulty.seen)
    # Four chunks; the second's answer was lost (the server kept it), the fourth never left.
    assert sum(line.startswith("PATCH") for line in faulty.seen) == 5
    assert world.worker.get_bytes(published["artifact"]) == payload


def test_altered_bytes_are_refused_and_nothing_is_written(world: World, tmp_path: Path) -> None:
    work_item = world.work_item()
    published = world.worker.put(io.BytesIO(b"x" * 100_000), work_item=work_item)

    def rule(request: httpx.Request, _: int) -> str | None:
        return "flip" if request.url.path.endswith("/content") else None

    reader, _, _ = faulty_client(world.worker, rule)
    target = tmp_path / "never.bin"
    with pytest.raises(weft.IntegrityError):
        reader.get(published["artifact"], target)
    assert not target.exists()
    assert list(tmp_path.iterdir()) == [], "no temporary file is left behind"
    with pytest.raises(weft.IntegrityError):
        reader.get_bytes(published["artifact"])


def test_a_one_shot_stream_is_uploaded_once_with_both_digests(world: World) -> None:
    chunks = [b"a" * 1000, b"b" * 5000, b"c"]
    digests = world.worker.upload(iter(chunks))
    assert digests.size == 6001
    import hashlib

    assert digests.sha256 == "sha256:" + hashlib.sha256(b"".join(chunks)).hexdigest()


def test_an_answer_cut_mid_body_is_retried_for_commands_and_downloads(world: World, tmp_path: Path) -> None:
    work_item = world.work_item()
    payload = os.urandom(300_000)
    published = world.worker.put(payload, work_item=work_item)
    before = world.worker.verify_log()
    cuts = {"command": 0, "content": 0}

    def rule(request: httpx.Request, _: int) -> str | None:
        for kind, suffix in (("command", "/commands"), ("content", "/content")):
            if request.url.path.endswith(suffix) and cuts[kind] == 0:
                cuts[kind] += 1
                return "cut"
        return None

    worker, _, slept = faulty_client(world.worker, rule)
    answer = worker.progress(work_item, phase="cut")
    assert answer["events"][0]["type"] == "work.progress_reported"
    assert world.worker.verify_log() == before + 1, "executed once, replayed once"
    target = tmp_path / "whole.bin"
    worker.get(published["artifact"], target)
    assert target.read_bytes() == payload and cuts == {"command": 1, "content": 1}
    assert len(slept) == 2


def test_a_lost_finish_of_a_resumable_upload_is_recognised(world: World, tmp_path: Path) -> None:
    work_item = world.work_item()
    payload = os.urandom(700_000)
    path = tmp_path / "big.bin"
    path.write_bytes(payload)
    finishes = {"n": 0}

    def rule(request: httpx.Request, _: int) -> str | None:
        if request.method == "PUT" and request.url.path.startswith("/v1/uploads/"):
            finishes["n"] += 1
            if finishes["n"] == 1:
                return "drop-after"
        return None

    worker, faulty, _ = faulty_client(world.worker, rule)
    worker.one_request_up_to = 0
    worker.resumable_above = 256 * 1024
    worker.upload_chunk = 256 * 1024
    published = worker.put(path, work_item=work_item)
    assert finishes["n"] == 2 and any(line.startswith("HEAD /v1/blobs/") for line in faulty.seen)
    assert world.worker.get_bytes(published["artifact"]) == payload


def test_a_replaced_session_ends_a_follow_with_its_code(world: World) -> None:
    world.work_item()
    events = world.worker.follow(after=0)
    first = next(events)
    assert first.sequence == 1
    for _ in range(3):
        next(events)
    again = weft.Client(world.server.url, agent_id=world.worker.agent_id, group_id=world.group, key=world.worker_key)
    again.open_session()
    with pytest.raises(weft.Unauthenticated) as ended:
        for _ in events:
            pass
    assert ended.value.code == "stale_session"


def test_a_small_artifact_is_published_in_one_request_and_a_lost_answer_replays(
    world: World, tmp_path: Path
) -> None:
    work_item = world.work_item()
    lost = {"n": 0}

    def rule(request: httpx.Request, _: int) -> str | None:
        if request.method == "PUT" and request.url.path.startswith("/v1/artifacts/"):
            lost["n"] += 1
            return "drop-after" if lost["n"] == 1 else None
        return None

    worker, faulty, _ = faulty_client(world.worker, rule)
    small = tmp_path / "small.json"
    small.write_bytes(b'{"one": "request"}')
    before = world.worker.verify_log()
    published = worker.put(small, work_item=work_item, media_type="application/json")
    sent = [line for line in faulty.seen if not line.startswith("GET")]
    assert sent == [f"PUT /v1/artifacts/{published['artifact']}"] * 2, sent
    assert world.worker.verify_log() == before + 1, "published once; the retry was answered 200"
    assert world.worker.get_bytes(published["artifact"]) == small.read_bytes()
