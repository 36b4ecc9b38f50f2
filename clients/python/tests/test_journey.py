"""The README's journeys through the package against the real server: a Worker publishes
Artifacts under its lease, records Evidence, submits; the coordinator accepts; an auditor
walks the lineage and verifies the chain."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

import weft
from conftest import World, contract


def test_publish_under_the_lease_record_evidence_submit_and_verify(world: World, tmp_path: Path) -> None:
    work_item = world.work_item()
    worker = world.worker
    data = tmp_path / "corpus.txt"
    data.write_bytes(b"the corpus\n" * 1000)
    source = worker.put(data, work_item=work_item, media_type="text/plain")
    report = worker.put(
        io.BytesIO(json.dumps({"summary": "short"}).encode()),
        work_item=work_item,
        media_type="application/json",
        sources=[source["artifact"]],
        tools=[{"kind": "model", "id": "summariser", "version": "1"}],
        name="report.json",
    )
    assert report["artifact"].startswith("blake3:") and report["sequence"] > source["sequence"]

    view = worker.artifact(report["artifact"])
    manifest = view["manifests"][0]["manifest"]
    lease = worker.current_lease(work_item)
    assert manifest["execution"] == {"leaseId": lease.lease_id, "ownershipEpoch": lease.ownership_epoch}
    assert manifest["sources"] == [source["artifact"]]
    assert manifest["annotations"]["name"] == "report.json"

    evidence = worker.record_evidence(
        work_item=work_item,
        criterion="ac-1",
        outcome="pass",
        summary="12 passed",
        metrics={"passed": 12},
        artifacts=[report["artifact"]],
    )
    found = list(worker.evidence(workItemId=work_item, criterion="ac-1"))
    assert [record["evidenceId"] for record in found] == [evidence["evidenceId"]]
    assert found[0]["evidence"]["execution"]["leaseId"] == lease.lease_id

    submitted = worker.submit(
        work_item, artifacts=[report["artifact"]], evidence=[evidence["evidenceId"]]
    )
    assert submitted["state"]["state"] == "submitted"
    accepted = world.coordinator.accept_result(work_item)
    assert accepted["state"]["state"] == "verified"
    verdicts = world.coordinator.criteria(work_item)
    assert verdicts["ac-1"]["latest"]["outcome"] == "pass"

    # The auditor's side: the lineage both ways, and the bytes verified on the way down.
    ancestors = list(world.coordinator.lineage(report["artifact"]))
    edges = {(e["from"], e["to"], e["type"]) for page in ancestors for e in page["edges"]}
    assert (report["artifact"], source["artifact"], "derivedFrom") in edges
    descendants = list(world.coordinator.lineage(source["artifact"], direction="descendants"))
    assert any(n["id"] == report["artifact"] for p in descendants for n in p["artifacts"])
    target = tmp_path / "out" / "copy.txt"
    target.parent.mkdir()
    digests = world.coordinator.get(source["artifact"], target)
    assert target.read_bytes() == data.read_bytes()
    assert digests.blake3 == source["artifact"]
    assert world.coordinator.get_bytes(digests.sha256) == data.read_bytes()
    prov = world.coordinator.export(report["artifact"], "prov-json")
    assert "wasDerivedFrom" in prov


def test_lineage_pages_follow_the_cursor(world: World) -> None:
    work_item = world.work_item()
    previous: list[str] = []
    for n in range(5):
        published = world.worker.put(
            io.BytesIO(f"step {n}".encode()), work_item=work_item, sources=previous[-1:]
        )
        previous.append(published["artifact"])
    pages = list(world.worker.lineage(previous[-1], page_size=2))
    seen = {node["id"] for page in pages for node in page["artifacts"]}
    assert len(pages) > 1
    assert set(previous) <= seen


def test_the_chain_verifies_and_follow_resumes_from_a_cursor(world: World) -> None:
    world.work_item()
    last = world.coordinator.verify_log()
    assert last >= 5
    followed = list(world.coordinator.follow(after=2, idle_timeout=0.5))
    assert [event.sequence for event in followed] == list(range(3, last + 1))
    assert world.coordinator.ack(last) == last
    assert world.coordinator.cursor() == last
    # One altered payload byte breaks the chain where it is.
    events = world.coordinator.events(0, 100)
    verifier = weft.ChainVerifier()
    verifier.check(events[0])
    tampered = weft.Event.parse(events[1].raw.replace('"payload":{', '"payload":{"x":1,', 1))
    with pytest.raises(weft.ChainError, match="chain_hash|hashes to"):
        verifier.check(tampered)


def test_refusals_raise_their_family(world: World) -> None:
    work_item = world.work_item()
    with pytest.raises(weft.Forbidden) as forbidden:
        world.worker.authorize("wi-nope", world.mission, contract())
    assert forbidden.value.code == "forbidden" and forbidden.value.status == 403
    with pytest.raises(weft.StaleLease):
        world.worker.renew(work_item, lease_id="not-the-lease")
    with pytest.raises(weft.StateConflict) as illegal:
        world.coordinator.accept_result(work_item)
    assert illegal.value.code == "illegal_transition" and illegal.value.status == 409
    output = world.worker.put(b"an output", work_item=work_item)
    with pytest.raises(weft.EvidenceMissing):
        world.worker.submit(work_item, artifacts=[output["artifact"]], evidence=[])
    with pytest.raises(weft.NotFound):
        world.worker.artifact("blake3:" + "ab" * 32)
    with pytest.raises(weft.InvalidRequest):
        world.worker.artifact("md5:abc")


def test_a_capability_token_acts_for_its_scope_only(world: World) -> None:
    work_item = world.work_item()
    issued = world.worker.issue_token(["blob:write"], work_item_id=work_item, ttl_seconds=60)
    scoped = world.worker.with_capability(issued["token"])
    digests = scoped.upload(io.BytesIO(b"written with a capability token"))
    assert digests.size == len(b"written with a capability token")
    with pytest.raises((weft.Forbidden, weft.Unauthenticated)):
        scoped.record_evidence(work_item=work_item, criterion="ac-1", outcome="pass", summary="no")


def test_the_example_agent_takes_a_work_item_to_submitted(world: World, tmp_path: Path) -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
    import summarise

    work_item = "wi-example-" + world.group
    world.coordinator.authorize(work_item, world.mission, contract(criteria=("ac-1", "ac-2")))
    world.coordinator.offer(work_item, [str(world.worker.agent_id)])
    key_file = world.worker_key.save(tmp_path / "agent.key")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the quick brown fox jumps over the lazy dog " * 50)
    argv = ["--url", world.server.url, "--group", world.group, "--agent", str(world.worker.agent_id)]
    argv += ["--work-item", work_item, "--input", str(corpus), "--key", str(key_file)]
    assert summarise.main(argv) == 0
    view = world.coordinator.work_item(work_item)
    assert view["state"] == "submitted"
    verdicts = world.coordinator.criteria(work_item)
    assert set(verdicts) == {"ac-1", "ac-2"}
    summary = list(world.coordinator.artifacts(workItemId=work_item, name="summary.json"))
    assert len(summary) == 1
    lineage = list(world.coordinator.lineage(summary[0]["artifact"]))
    assert len({node["id"] for page in lineage for node in page["artifacts"]}) == 3


def test_the_intoto_statement_is_checked_against_the_authority_key(world: World) -> None:
    work_item = world.work_item()
    published = world.worker.put(b"attested bytes", work_item=work_item)
    statement = world.worker.intoto_statement(published["artifact"])
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    keys = world.worker.authority_keys()
    pinned = next(iter(keys.values()))
    assert world.worker.intoto_statement(published["artifact"], authority_key=pinned) == statement
    with pytest.raises(weft.IntegrityError):
        world.worker.intoto_statement(
            published["artifact"], authority_key=weft.AgentKey.generate().public_bytes
        )


def test_an_approver_places_lists_and_lifts_a_hold(world: World) -> None:
    work_item = world.work_item()
    output = world.worker.put(b"kept for the audit", work_item=work_item)
    approver = world.enrol("approver")
    hold = approver.place_hold("audit 12", artifact=output["artifact"])
    assert hold["placedBy"] == approver.agent_id and hold["groups"] == [world.group]
    assert [h["holdId"] for h in approver.holds()] == [hold["holdId"]]
    lifted = approver.lift_hold(hold["holdId"])
    assert lifted["liftedAt"]
    with pytest.raises(weft.Forbidden):
        world.worker.place_hold("not an approver", mission=world.mission)
    with pytest.raises(ValueError):
        approver.place_hold("two targets", mission=world.mission, work_item=work_item)
