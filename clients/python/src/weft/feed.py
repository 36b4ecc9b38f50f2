"""A Group's Events: replay pages, a follow iterator over the live stream that verifies the
hash chain and resumes from a cursor, the ACK that records the cursor (DLV-6), and the
transparency log's checkpoints and proofs, checked against the Authority's key (``tlog.py``)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx

from .errors import ChainError, IntegrityError, Transient, from_code
from .events import ChainVerifier, Event, parse_page, sse_frames
from .review import Review
from .tlog import (
    Frontier,
    TreeHead,
    check_consistency,
    check_inclusion,
    leaf_hash,
    open_checkpoint,
    origin,
    proof_hashes,
)


class _Idle(Exception):
    """``follow``'s idle timeout passed."""


class Feed(Review):
    """The event side of the client (mixed into :class:`weft.Client`)."""

    def events(self, after: int = 0, limit: int = 100) -> list[Event]:
        """One replay page: up to ``limit`` Events after ``after``."""
        response = self._t.request(
            "GET",
            f"/v1/groups/{self.session.group_id}/events",
            params={"after": after, "limit": limit},
        )
        return parse_page(response.text)

    def verify_log(self, page_size: int = 500, checkpoint: TreeHead | None = None) -> int:
        """Replays the whole Group log and checks its chain; the last sequence checked. With
        ``checkpoint`` (from :meth:`tlog_checkpoint`), the log's first ``checkpoint.size``
        Events must make exactly the tree it signs (a Mission-scoped reader, whose log holds
        withheld placeholders, checks single Events with :meth:`tlog_prove` instead)."""
        verifier = ChainVerifier()
        tree = Frontier() if checkpoint is not None else None
        while True:
            page = self.events(verifier.sequence, page_size)
            for event in page:
                verifier.check(event)
                if tree is not None and checkpoint is not None and event.sequence <= checkpoint.size:
                    if event.withheld:
                        raise IntegrityError(
                            "tlog_withheld", f"Event {event.sequence} is withheld from this reader"
                        )
                    tree.push(leaf_hash(event.canonical_bytes()))
            if len(page) < page_size:
                break
        if tree is not None and checkpoint is not None:
            if tree.size < checkpoint.size:
                raise IntegrityError(
                    "tlog_short",
                    f"the log ends at {tree.size}, before the checkpoint's tree of {checkpoint.size}",
                )
            if tree.root() != checkpoint.root:
                raise IntegrityError(
                    "tlog_fork",
                    f"the log's first {checkpoint.size} Events are not the tree the checkpoint signs",
                )
        return verifier.sequence

    def tlog_checkpoint(self, authority_key: bytes, seen: TreeHead | None = None) -> TreeHead:
        """The Group's transparency-log checkpoint, checked: signed by ``authority_key`` (the
        Authority's raw Ed25519 public key, pinned out of band) under the Group's origin; with
        ``seen`` (a checkpoint checked before), it must extend that tree (its consistency
        proof, checked). Raises :class:`IntegrityError` otherwise."""
        group = self.session.group_id
        note = self._t.request("GET", f"/v1/groups/{group}/tlog/checkpoint").text
        head = open_checkpoint(note, authority_key, origin(authority_key, group))
        if seen is not None:
            self.tlog_extends(seen, head)
        return head

    def tlog_extends(self, old: TreeHead, new: TreeHead) -> None:
        """That the tree ``new`` signs extends the tree ``old`` signs (a consistency proof the
        server serves, checked): a forked or shorter history raises :class:`IntegrityError`."""
        proof: list[bytes] = []
        if 0 < old.size < new.size:
            answer = self._t.json(
                "GET",
                f"/v1/groups/{self.session.group_id}/tlog/proof/consistency",
                params={"from": old.size, "to": new.size},
            )
            proof = proof_hashes(answer, new.size)
        check_consistency(old, new, proof)

    def tlog_prove(self, event: Event, head: TreeHead) -> None:
        """That ``event``, as served, is in the tree ``head`` signs (its inclusion proof,
        checked against its canonical bytes): raises :class:`IntegrityError` otherwise."""
        answer = self._t.json(
            "GET",
            f"/v1/groups/{self.session.group_id}/tlog/proof/inclusion",
            params={"sequence": event.sequence, "size": head.size},
        )
        index = event.sequence - 1
        check_inclusion(
            leaf_hash(event.canonical_bytes()), index, proof_hashes(answer, head.size, index), head
        )

    def head_of(self, sequence: int) -> str | None:
        """The hash of Event ``sequence``, recomputed from its content (``None`` for 0: the
        chain starts from zeros)."""
        if sequence == 0:
            return None
        page = self.events(sequence - 1, 1)
        if not page or page[0].sequence != sequence:
            raise ChainError("chain_gap", f"Event {sequence} is not in the log")
        computed = page[0].computed_hash()
        if computed is not None and computed != page[0].hash:
            raise ChainError("chain_hash", f"Event {sequence}'s content hashes to {computed}")
        return page[0].hash

    def follow(
        self, after: int | None = None, *, verify: bool = True, idle_timeout: float | None = None
    ) -> Iterator[Event]:
        """Every Event after ``after`` (default: this Agent's recorded cursor, see
        :meth:`ack`), live, in order; reconnects after a dropped or closed stream from the last
        Event seen. With ``verify`` each Event's hash and link are checked (starting from Event
        ``after``'s hash), and a break raises :class:`ChainError`. ``idle_timeout`` ends the
        iteration once that many seconds pass without an Event (checked whenever the stream
        speaks, keep-alives included, so it ends at most 15 s late). A stream the server ends
        (a replaced session, a Membership change) raises that code's exception."""
        if after is None:
            after = self.cursor()
        verifier = ChainVerifier(after, self.head_of(after)) if verify else None
        last = after
        path = f"/v1/groups/{self.session.group_id}/events/stream"
        timeout = httpx.Timeout(10.0, read=idle_timeout)
        failures = 0
        last_event_at = time.monotonic()

        def until_idle(lines: Iterator[str]) -> Iterator[str]:
            for line in lines:
                if idle_timeout is not None and time.monotonic() - last_event_at > idle_timeout:
                    raise _Idle
                yield line

        while True:
            try:
                with self._t.stream(
                    "GET",
                    path,
                    params={"after": last},
                    headers={"Accept": "text/event-stream"},
                    timeout=timeout,
                ) as response:
                    for _, kind, data in sse_frames(until_idle(response.iter_lines())):
                        if kind == "error":
                            raise from_code(data, f"the server ended the stream: {data}")
                        event = Event.parse(data)
                        if verifier is not None:
                            verifier.check(event)
                        last = event.sequence
                        last_event_at = time.monotonic()
                        failures = 0
                        yield event
                # The server closed the stream without an error frame (a restart): reconnect.
                raise Transient("stream_closed", "the event stream ended")
            except (httpx.ReadTimeout, _Idle):
                return
            except (httpx.TransportError, Transient):
                failures += 1
                if failures > self._t.max_retries:
                    raise
                self._t.sleep(self._t._backoff(failures, None))

    def ack(self, sequence: int) -> int:
        """Records this Agent's cursor in the Group (it never moves back); the cursor now."""
        group = self.session.group_id
        answer = self._t.json(
            "POST",
            f"/v1/groups/{group}/cursors",
            json={"cursors": [{"groupId": group, "sequence": sequence}]},
            safe=True,
        )
        return int(answer["cursors"][0]["sequence"])

    def cursor(self) -> int:
        """This Agent's recorded cursor in the Group (0 when none)."""
        answer = self._t.json("GET", f"/v1/groups/{self.session.group_id}/cursors")
        for entry in answer.get("cursors", []):
            if entry.get("agentId") == self.agent_id:
                return int(entry["sequence"])
        return 0
