"""The lease keeper: it renews in the background, and when the lease is lost the work
learns it (LSE-9: a new session of the Agent revokes its leases)."""

from __future__ import annotations

import threading
import time

import httpx
import pytest

import weft
from conftest import World
from faults import faulty_client


def test_the_keeper_renews_and_reports_the_loss(world: World) -> None:
    work_item = world.work_item(execution_seconds=2)
    lost = threading.Event()
    with world.worker.keep_lease(work_item, fraction=0.3, on_lost=lambda _: lost.set()) as keeper:
        first = keeper.lease.expires_at
        give_up = time.monotonic() + 10.0
        while keeper.renewals < 2 and time.monotonic() < give_up:
            keeper.check()
            time.sleep(0.05)
        assert keeper.renewals >= 2
        assert keeper.lease.expires_at > first
        # A replacement session ends the lease (LSE-9); the keeper's next renewal is refused.
        world.worker.open_session()
        assert lost.wait(5.0), "the keeper noticed the loss"
        with pytest.raises(weft.LeaseLost):
            keeper.check()
        # The owner's calls for that WorkItem stop too, before anything is sent.
        with pytest.raises(weft.LeaseLost):
            world.worker.progress(work_item, phase="after the loss")
        with pytest.raises(weft.LeaseLost):
            world.worker.put(b"late", work_item=work_item)
    assert keeper.error is not None and keeper.error.code in ("stale_lease", "stale_session")


def test_a_failing_gateway_does_not_lose_the_lease(world: World) -> None:
    """A 502 from a load balancer in front of several servers says nothing of the lease: the
    keeper renews again instead of declaring the lease lost."""
    work_item = world.work_item(execution_seconds=2)
    renewals = 0

    def rule(request: httpx.Request, n: int) -> str | None:
        nonlocal renewals
        # Only the keeper's renewals are Commands while it runs.
        if request.method == "POST" and request.url.path.endswith("/commands"):
            renewals += 1
            return "502" if renewals == 1 else None
        return None

    client, _, _ = faulty_client(world.worker, rule)
    lost = threading.Event()
    with client.keep_lease(work_item, fraction=0.3, on_lost=lambda _: lost.set()) as keeper:
        give_up = time.monotonic() + 10.0
        while keeper.renewals < 2 and time.monotonic() < give_up:
            keeper.check()
            time.sleep(0.05)
        assert renewals >= 2, "the first renewal failed at the gateway and was sent again"
        assert keeper.renewals >= 2 and not lost.is_set(), keeper.error
