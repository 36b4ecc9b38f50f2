"""The main README's work journey through the package: offers declined and accepted, a
block and an unblock, a checkpoint and a resume, progress with usage, a submission accepted,
a failure with Evidence, a cancellation, and the Mission approved once nothing is live."""

from __future__ import annotations

import pytest

import weft
from conftest import World, contract


def test_the_work_journey(world: World) -> None:
    coordinator, worker = world.coordinator, world.worker
    me = str(worker.agent_id)
    coordinator.authorize("wi-1-" + world.group, world.mission, contract())
    wi1 = "wi-1-" + world.group
    offered = coordinator.offer(wi1, [me], expires_in=600)
    assert offered["state"]["state"] == "offered"
    with pytest.raises(weft.StateConflict) as stale:
        worker.accept_offer(wi1, expected_revision=1)
    assert stale.value.code == "stale_revision"
    worker.accept_offer(wi1, expected_revision=offered["state"]["revision"])
    lease = worker.start(wi1)
    assert lease.agent_id == me and lease.kind == "execution"
    renewed = worker.renew(wi1)
    assert renewed.lease_id == lease.lease_id and renewed.expires_at >= lease.expires_at
    progress = worker.progress(
        wi1,
        phase="drafting",
        milestones_done=["outline"],
        blockers=["corpus access"],
        confidence=0.6,
        percent=30,
        usage={"tokens": 1200},
    )
    assert progress["events"][0]["type"] == "work.progress_reported"
    draft = worker.put(b'{"summary": "a first draft"}', work_item=wi1, media_type="application/json")
    blocked = worker.block(wi1, "access to the corpus", artifact=draft["artifact"], note="half way")
    assert blocked["state"]["state"] == "blocked"
    assert coordinator.unblock(wi1)["state"]["state"] == "queued"
    worker.start(wi1)
    checkpointed = worker.checkpoint(wi1, artifact=draft["artifact"], note="draft revised")
    assert checkpointed["state"]["state"] == "queued" and worker.lease_of(wi1) is None
    worker.start(wi1)
    report = worker.put(b'{"summary": "the final report"}', work_item=wi1, media_type="application/json")
    evidence = worker.record_evidence(
        work_item=wi1, criterion="ac-1", outcome="pass", summary="ok", artifacts=[report["artifact"]]
    )
    worker.submit(wi1, artifacts=[report["artifact"]], evidence=[evidence["evidenceId"]])
    assert coordinator.accept_result(wi1)["state"]["state"] == "verified"
    budget = coordinator.work_item(wi1)["budget"]
    assert budget["spent"]["tokens"] == 1200

    wi2 = "wi-2-" + world.group
    coordinator.authorize(wi2, world.mission, contract())
    coordinator.offer(wi2, [me])
    declined = worker.decline_offer(wi2, "capacity", detail="busy until Friday")
    assert declined["events"][0]["type"] == "work.offer_declined"
    failure = coordinator.record_evidence(
        work_item=wi2, criterion="ac-1", outcome="fail", method="human", summary="no capacity"
    )
    failed = coordinator.fail(wi2, "other", evidence=[failure["evidenceId"]])
    assert failed["state"]["state"] == "failed"

    wi3 = "wi-3-" + world.group
    coordinator.authorize(wi3, world.mission, contract())
    assert coordinator.cancel(wi3, "covered by wi-1")["state"]["state"] == "cancelled"
    approved = coordinator.close_mission(world.mission, "approve")
    assert approved["events"][0]["type"] == "mission.approved"
    assert coordinator.mission(world.mission)["state"] == "approved"
