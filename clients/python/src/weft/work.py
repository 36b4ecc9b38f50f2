"""Missions, WorkItems and their Commands (DESIGN §10), typed, with the lease and epochs
filled in for the caller.

A Command is signed once and its exact envelope is what a retry sends again: the server
answers a repeated ``commandId`` with its original answer, so a dropped connection or a 503
never executes a Command twice. An owner Command (LSE-4) quotes the Execution Lease this
client last saw for the WorkItem (every answer that shows a WorkItem refreshes it), or reads
the WorkItem first when it knows none.
"""

from __future__ import annotations

import datetime
import threading
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import secrets

from . import dsse
from ._base import Base, Lease, Session, now_rfc3339
from .errors import (
    LeaseLost,
    ServerError,
    StaleLease,
    StateConflict,
    Transient,
    Unauthenticated,
    WeftError,
)

USAGE_DIMENSIONS = (
    "financial",
    "tokens",
    "toolCalls",
    "computeSeconds",
    "wallClockSeconds",
    "sideEffects",
)


def full_usage(spent: dict[str, float]) -> dict[str, float]:
    """A usage delta with all six dimensions (DESIGN §12), the ones not named as 0."""
    unknown = set(spent) - set(USAGE_DIMENSIONS)
    if unknown:
        raise ValueError(f"unknown usage dimensions {sorted(unknown)}; use {USAGE_DIMENSIONS}")
    return {name: spent.get(name, 0) for name in USAGE_DIMENSIONS}


def _checkpoint(artifact: str | None, note: str | None) -> dict[str, Any]:
    """A checkpoint ``{artifact?, note?}`` (``work.checkpoint``, ``work.block``)."""
    checkpoint: dict[str, Any] = {}
    if artifact is not None:
        checkpoint["artifact"] = artifact
    if note is not None:
        checkpoint["note"] = note
    return checkpoint


def new_id() -> str:
    """A fresh opaque id for a Command, an offer or a proposal."""
    return str(uuid.uuid4())


def _parse_time(text: str) -> datetime.datetime:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))


class Work(Base):
    """The Command side of the client (mixed into :class:`weft.Client`)."""

    # ---- sessions --------------------------------------------------------------------------

    def _session_request(self) -> bytes:
        _, agent_id = self._signer()
        if self.group_id is None:
            raise ValueError("a session needs group_id")
        request = {
            "agentId": agent_id,
            "groupId": self.group_id,
            "issuedAt": now_rfc3339(),
            "nonce": secrets.token_hex(16),
        }
        return self._signed(dsse.SESSION, request)

    def renew_session(self) -> Session:
        """Moves this session's expiry to a full lifetime from now (``POST
        /v1/session/renew``, a fresh signed request): same token, same epochs, so the leases
        held under it go on, unlike :meth:`open_session`."""
        content = self._session_request()
        view = self._t.json(
            "POST",
            "/v1/session/renew",
            headers={"Content-Type": "application/json"},
            body=lambda: content,
        )
        session = self.session
        self._session = Session(
            token=session.token,
            agent_id=session.agent_id,
            group_id=session.group_id,
            session_epoch=int(view["sessionEpoch"]),
            membership_epoch=int(view["membershipEpoch"]),
            expires_at=str(view["expiresAt"]),
        )
        return self._session

    # ---- reads -----------------------------------------------------------------------------

    def work_item(self, work_item_id: str) -> dict[str, Any]:
        """``GET /v1/workitems/{id}``: state, revision, contract, owner, lease, offers, …"""
        view: dict[str, Any] = self._t.json("GET", f"/v1/workitems/{work_item_id}")
        self._note_view(view)
        return view

    def mission(self, mission_id: str) -> dict[str, Any]:
        """``GET /v1/missions/{id}``: state, budget and WorkItems."""
        view: dict[str, Any] = self._t.json("GET", f"/v1/missions/{mission_id}")
        return view

    def mission_graph(self, mission_id: str) -> dict[str, Any]:
        """``GET /v1/missions/{id}/workitems``: the WorkItem DAG."""
        view: dict[str, Any] = self._t.json("GET", f"/v1/missions/{mission_id}/workitems")
        return view

    def ensure_lease_kept(self, work_item_id: str) -> None:
        """Raises :class:`LeaseLost` when a lease keeper lost this WorkItem's lease: the
        owner's Commands, publications and Evidence for it stop there (until a new start)."""
        with self._lock:
            lost = work_item_id in self._lost
        if lost:
            raise LeaseLost("lease_lost", f"the lease on {work_item_id} was lost; stop the work")

    def current_lease(self, work_item_id: str) -> Lease:
        """The Execution Lease this Agent holds on the WorkItem, read from the server when
        this client has not seen one; :class:`StaleLease` when it holds none."""
        lease = self.lease_of(work_item_id)
        if lease is None:
            self.work_item(work_item_id)
            lease = self.lease_of(work_item_id)
        if lease is None:
            raise StaleLease("stale_lease", f"{self.agent_id} holds no lease on {work_item_id}")
        return lease

    # ---- sending ---------------------------------------------------------------------------

    def command(
        self,
        kind: str,
        payload: dict[str, Any],
        *,
        lease_id: str | None = None,
        expected_revision: int | None = None,
        extensions: Sequence[dict[str, Any]] = (),
        command_id: str | None = None,
    ) -> dict[str, Any]:
        """Signs and sends one Command; returns ``{commandId, events, state}``."""
        _, agent_id = self._signer()
        session = self.session
        body = {
            "commandId": command_id or new_id(),
            "type": kind,
            "groupId": session.group_id,
            "agentId": agent_id,
            "issuedAt": now_rfc3339(),
            "sessionEpoch": session.session_epoch,
            "membershipEpoch": session.membership_epoch,
            "leaseId": lease_id,
            "expectedRevision": expected_revision,
            "extensions": list(extensions),
            "payload": payload,
        }
        answer = self._post_signed(f"/v1/groups/{session.group_id}/commands", dsse.COMMAND, body)
        self._note_view(answer.get("state"))
        return answer

    def _signed(self, payload_type: str, payload: dict[str, Any]) -> bytes:
        """The JSON bytes of a DSSE envelope of ``payload`` signed with this Agent's key."""
        key, _ = self._signer()
        return dsse.payload_bytes(dsse.sign(key, payload_type, dsse.payload_bytes(payload)))

    def _post_signed(self, path: str, payload_type: str, payload: dict[str, Any]) -> dict[str, Any]:
        """POSTs a signed envelope; safe to retry: the same bytes again are a replay (a
        ``commandId``) or the same content-addressed record (a manifest, Evidence)."""
        content = self._signed(payload_type, payload)
        answer: dict[str, Any] = self._t.json(
            "POST",
            path,
            headers={"Content-Type": "application/json"},
            body=lambda: content,
            safe=True,
        )
        return answer

    def _owner(
        self,
        kind: str,
        work_item_id: str,
        payload: dict[str, Any],
        lease_id: str | None,
        expected_revision: int | None = None,
    ) -> dict[str, Any]:
        self.ensure_lease_kept(work_item_id)
        lease = lease_id or self.current_lease(work_item_id).lease_id
        return self.command(
            kind,
            {"workItemId": work_item_id, **payload},
            lease_id=lease,
            expected_revision=expected_revision,
        )

    # ---- Missions --------------------------------------------------------------------------

    def create_mission(
        self,
        mission_id: str,
        title: str,
        budget: dict[str, float],
        *,
        priority_class: str = "normal",
        parent_work_item_id: str | None = None,
    ) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "missionId": mission_id,
            "title": title,
            "priorityClass": priority_class,
            "budget": budget,
        }
        if parent_work_item_id is not None:
            payload["parentWorkItemId"] = parent_work_item_id
        return self.command("mission.create", payload)

    def close_mission(
        self, mission_id: str, outcome: str = "approve", evidence: Sequence[str] = ()
    ) -> dict[str, Any]:
        """``mission.approve``, ``mission.fail`` or ``mission.cancel``."""
        payload: dict[str, Any] = {"missionId": mission_id}
        if evidence:
            payload["evidence"] = list(evidence)
        return self.command(f"mission.{outcome}", payload)

    # ---- the coordinator's Commands --------------------------------------------------------

    def authorize(
        self,
        work_item_id: str,
        mission_id: str,
        contract: dict[str, Any],
        *,
        proposal_id: str | None = None,
    ) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "workItemId": work_item_id,
            "missionId": mission_id,
            "contract": contract,
        }
        if proposal_id is not None:
            payload["proposalId"] = proposal_id
        return self.command("work.authorize", payload)

    def offer(
        self,
        work_item_id: str,
        candidates: Sequence[str],
        *,
        expires_at: str | None = None,
        expires_in: float = 600.0,
        selection_basis: dict[str, Any] | None = None,
        offer_id: str | None = None,
        expected_revision: int | None = None,
    ) -> dict[str, Any]:
        when = expires_at or (
            datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=expires_in)
        ).strftime("%Y-%m-%dT%H:%M:%SZ")
        basis = selection_basis or {
            "capabilityMatches": [],
            "authorizationEligible": True,
            "availabilityEstimate": now_rfc3339(),
            "expectedCost": 0.0,
            "reliabilityEvidence": [],
            "policyRules": [],
        }
        return self.command(
            "work.offer",
            {
                "workItemId": work_item_id,
                "offerId": offer_id or new_id(),
                "candidates": list(candidates),
                "expiresAt": when,
                "selectionBasis": basis,
            },
            expected_revision=expected_revision,
        )

    def propose(
        self, mission_id: str, contract: dict[str, Any], *, proposal_id: str | None = None
    ) -> dict[str, Any]:
        """``work.propose`` (T1, any member but an auditor)."""
        return self.command(
            "work.propose",
            {"proposalId": proposal_id or new_id(), "missionId": mission_id, "contract": contract},
        )

    def revise_contract(
        self, work_item_id: str, contract: dict[str, Any], *, expected_revision: int | None = None
    ) -> dict[str, Any]:
        """``work.revise_contract`` (CON-5)."""
        return self.command(
            "work.revise_contract",
            {"workItemId": work_item_id, "contract": contract},
            expected_revision=expected_revision,
        )

    def grant_execution(self, work_item_id: str) -> dict[str, Any]:
        """``approval.grant_execution`` (T6, an approver)."""
        return self.command("approval.grant_execution", {"workItemId": work_item_id})

    def create_child_mission(
        self, work_item_id: str, child_mission_id: str, title: str, failure_policy: str = "block"
    ) -> dict[str, Any]:
        """``mission.create_child`` (T15)."""
        return self.command(
            "mission.create_child",
            {
                "workItemId": work_item_id,
                "childMissionId": child_mission_id,
                "title": title,
                "childFailurePolicy": failure_policy,
            },
        )

    def request_preemption(self, work_item_id: str) -> dict[str, Any]:
        """``preemption.request`` (LSE-12 step 1)."""
        return self.command("preemption.request", {"workItemId": work_item_id})

    def accept_result(
        self, work_item_id: str, *, expected_revision: int | None = None
    ) -> dict[str, Any]:
        return self.command(
            "work.accept_result",
            {"workItemId": work_item_id},
            expected_revision=expected_revision,
        )

    def unblock(self, work_item_id: str, *, expected_revision: int | None = None) -> dict[str, Any]:
        return self.command(
            "work.unblock", {"workItemId": work_item_id}, expected_revision=expected_revision
        )

    def cancel(
        self, work_item_id: str, reason: str, *, expected_revision: int | None = None
    ) -> dict[str, Any]:
        return self.command(
            "work.cancel",
            {"workItemId": work_item_id, "reason": reason},
            expected_revision=expected_revision,
        )

    # ---- the candidate's and owner's Commands ----------------------------------------------

    def _live_offer(self, work_item_id: str) -> str:
        view = self.work_item(work_item_id)
        for offer in view.get("offers", []):
            if offer.get("status") == "live" and self.agent_id in offer.get("candidates", []):
                return str(offer["offerId"])
        raise StateConflict("no_offer", f"no live offer of {work_item_id} names {self.agent_id}")

    def accept_offer(
        self,
        work_item_id: str,
        offer_id: str | None = None,
        *,
        expected_revision: int | None = None,
    ) -> dict[str, Any]:
        """Accepts the given offer, or the live offer that names this Agent."""
        offer = offer_id or self._live_offer(work_item_id)
        return self.command(
            "work.accept_offer",
            {"workItemId": work_item_id, "offerId": offer},
            expected_revision=expected_revision,
        )

    def decline_offer(
        self,
        work_item_id: str,
        reason: str,
        *,
        offer_id: str | None = None,
        detail: str | None = None,
    ) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "workItemId": work_item_id,
            "offerId": offer_id or self._live_offer(work_item_id),
            "reason": reason,
        }
        if detail is not None:
            payload["detail"] = detail
        return self.command("work.decline_offer", payload)

    def start(self, work_item_id: str, *, expected_revision: int | None = None) -> Lease:
        """``work.start``: returns the new Execution Lease."""
        with self._lock:
            self._lost.discard(work_item_id)
        answer = self.command(
            "work.start", {"workItemId": work_item_id}, expected_revision=expected_revision
        )
        lease = self.lease_of(work_item_id)
        if lease is None:
            raise WeftError("protocol", f"work.start answered no lease: {answer}")
        return lease

    def renew(self, work_item_id: str, *, lease_id: str | None = None) -> Lease:
        """``lease.renew``: returns the lease with its new expiry."""
        self._owner("lease.renew", work_item_id, {}, lease_id)
        return self.current_lease(work_item_id)

    def progress(
        self,
        work_item_id: str,
        *,
        phase: str,
        milestones_done: Sequence[str] = (),
        next_checkpoint: str | None = None,
        blockers: Sequence[str] = (),
        completion_at: str | None = None,
        confidence: float = 0.5,
        evidence: Sequence[str] = (),
        usage: dict[str, float] | None = None,
        percent: float | None = None,
        lease_id: str | None = None,
        expected_revision: int | None = None,
    ) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "phase": phase,
            "milestonesDone": list(milestones_done),
            "nextCheckpoint": next_checkpoint,
            "blockers": list(blockers),
            "estimate": {"completionAt": completion_at, "confidence": confidence},
            "evidence": list(evidence),
        }
        if usage is not None:
            payload["usage"] = full_usage(usage)
        if percent is not None:
            payload["percent"] = percent
        return self._owner("work.progress", work_item_id, payload, lease_id, expected_revision)

    def checkpoint(
        self,
        work_item_id: str,
        *,
        artifact: str | None = None,
        note: str | None = None,
        usage: dict[str, float] | None = None,
        lease_id: str | None = None,
        expected_revision: int | None = None,
    ) -> dict[str, Any]:
        checkpoint = _checkpoint(artifact, note)
        payload: dict[str, Any] = {"checkpoint": checkpoint}
        if usage is not None:
            payload["usage"] = full_usage(usage)
        return self._owner("work.checkpoint", work_item_id, payload, lease_id, expected_revision)

    def block(
        self,
        work_item_id: str,
        needs: str,
        *,
        artifact: str | None = None,
        note: str | None = None,
        lease_id: str | None = None,
        expected_revision: int | None = None,
    ) -> dict[str, Any]:
        """``work.block``: the block is the checkpoint (T9, PRG-4), so it carries one."""
        checkpoint = _checkpoint(artifact, note)
        return self._owner(
            "work.block",
            work_item_id,
            {"needs": needs, "checkpoint": checkpoint},
            lease_id,
            expected_revision,
        )

    def submit(
        self,
        work_item_id: str,
        *,
        artifacts: Sequence[str],
        evidence: Sequence[str],
        usage: dict[str, float] | None = None,
        lease_id: str | None = None,
        expected_revision: int | None = None,
    ) -> dict[str, Any]:
        payload: dict[str, Any] = {"artifacts": list(artifacts), "evidence": list(evidence)}
        if usage is not None:
            payload["usage"] = full_usage(usage)
        return self._owner("work.submit", work_item_id, payload, lease_id, expected_revision)

    def fail(
        self,
        work_item_id: str,
        reason: str,
        *,
        evidence: Sequence[str] = (),
        detail: str | None = None,
        lease_id: str | None = None,
        expected_revision: int | None = None,
    ) -> dict[str, Any]:
        """``work.fail``: by the owner (quoting its lease) or by a coordinator."""
        payload: dict[str, Any] = {
            "workItemId": work_item_id,
            "evidence": list(evidence),
            "reason": reason,
        }
        if detail is not None:
            payload["detail"] = detail
        lease = lease_id or (
            held.lease_id if (held := self.lease_of(work_item_id)) is not None else None
        )
        return self.command(
            "work.fail", payload, lease_id=lease, expected_revision=expected_revision
        )

    # ---- capability tokens -----------------------------------------------------------------

    def issue_token(
        self, scope: Sequence[str], *, work_item_id: str, ttl_seconds: int = 300
    ) -> dict[str, Any]:
        """``POST /v1/leases/{leaseId}/tokens``: a bearer for the scoped operations only,
        dying with the lease (LSE-6/7). ``{tokenId, token, scope, expiresAt}``."""
        lease = self.current_lease(work_item_id)
        answer: dict[str, Any] = self._t.json(
            "POST",
            f"/v1/leases/{lease.lease_id}/tokens",
            headers={"Idempotency-Key": new_id()},  # a retry gets the same token, not a second
            json={"scope": list(scope), "ttlSeconds": ttl_seconds},
            safe=True,
        )
        return answer

    # ---- the lease keeper ------------------------------------------------------------------

    def keep_lease(
        self,
        work_item_id: str,
        *,
        on_lost: Callable[[WeftError], None] | None = None,
        fraction: float = 0.5,
    ) -> LeaseKeeper:
        """A background renewer for the lease this Agent holds on the WorkItem; use it as a
        context manager around the work. See :class:`LeaseKeeper`."""
        return LeaseKeeper(self, work_item_id, on_lost=on_lost, fraction=fraction)


class LeaseKeeper:
    """Renews an Execution Lease in a background thread, each time ``fraction`` of its
    remaining time has passed, and the session too when it would end before the next
    renewal. When the lease is lost (fenced, revoked, expired, the session ended) it stops
    renewing, sets :attr:`lost`, calls ``on_lost`` once, and :meth:`check` (and the client's
    owner calls for that WorkItem) raise :class:`LeaseLost`: the work must stop there. Any
    other failure (the server unreachable, a cut answer) is retried until the lease's own
    expiry. :meth:`stop` waits for a renewal in flight, at most its retries."""

    def __init__(
        self,
        client: Work,
        work_item_id: str,
        *,
        on_lost: Callable[[WeftError], None] | None = None,
        fraction: float = 0.5,
    ) -> None:
        if not 0.0 < fraction < 1.0:
            raise ValueError("fraction must be between 0 and 1")
        self.client = client
        self.work_item_id = work_item_id
        self.lease = client.current_lease(work_item_id)
        self.fraction = fraction
        self.on_lost = on_lost
        self.lost = threading.Event()
        self.error: WeftError | None = None
        self.renewals = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"weft-lease-{work_item_id}", daemon=True
        )

    def __enter__(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def stop(self) -> None:
        """Stops renewing (the lease itself stays until it expires or is released)."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()

    def check(self) -> None:
        """Raises :class:`LeaseLost` if the lease was lost."""
        if self.lost.is_set():
            error = self.error
            raise LeaseLost(
                "lease_lost",
                f"the lease on {self.work_item_id} was lost"
                + (f": {error.code}: {error.detail}" if error else ""),
            )

    def _remaining(self) -> float:
        expires = _parse_time(self.lease.expires_at)
        return (expires - datetime.datetime.now(datetime.UTC)).total_seconds()

    def _lose(self, error: WeftError) -> None:
        self.error = error
        with self.client._lock:
            self.client._lost.add(self.work_item_id)
        self.lost.set()
        if self.on_lost is not None:
            try:
                self.on_lost(error)
            except Exception:  # the callback's failure must not hide the loss
                pass

    def _session_ends_within(self, seconds: float) -> bool:
        expires = _parse_time(self.client.session.expires_at)
        left = (expires - datetime.datetime.now(datetime.UTC)).total_seconds()
        return left < seconds

    def _run(self) -> None:
        while not self._stop.is_set():
            remaining = self._remaining()
            if remaining <= 0:
                self._lose(StaleLease("lease_expired", f"the lease on {self.work_item_id} expired"))
                return
            wait = max(0.05, remaining * self.fraction)
            if self._stop.wait(wait):
                return
            try:
                if self._session_ends_within(2 * wait + 5):
                    self.client.renew_session()
                self.lease = self.client.renew(self.work_item_id, lease_id=self.lease.lease_id)
                self.renewals += 1
            except (StaleLease, StateConflict, Unauthenticated) as error:
                self._lose(error)
                return
            except (Transient, ServerError):
                # A busy or failing server (a 502 from a load balancer in front of several)
                # says nothing of the lease: try again until it expires.
                continue
            except WeftError as error:
                self._lose(error)
                return
            except Exception:  # anything else (a cut connection): try again until expiry
                continue
