"""Evidence and review (DESIGN §5.1): recording signed Evidence bound to the owner's lease,
fetching it by acceptance criterion, and reading the verdict in force per criterion."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator, Sequence
from typing import Any

from . import dsse
from ._base import now_rfc3339
from .artifacts import Artifacts
from .errors import IntegrityError

INTOTO = "application/vnd.in-toto+json"


class Review(Artifacts):
    """The Evidence side of the client (mixed into :class:`weft.Client`)."""

    def record_evidence(
        self,
        *,
        work_item: str,
        criterion: str,
        outcome: str,
        summary: str,
        method: str = "automated_test",
        method_name: str = "weft-client",
        method_version: str = "1",
        metrics: dict[str, float] | None = None,
        artifacts: Sequence[str] = (),
        subject: dict[str, str] | None = None,
        supersedes: str | None = None,
        mission: str | None = None,
    ) -> dict[str, Any]:
        """Signs and records one Evidence record (``{evidenceId, sequence}``). When this
        Agent holds the WorkItem's lease the record is bound to it (``execution``), as the
        server requires of an owner."""
        view = self.work_item(work_item)
        lease = self.lease_of(work_item)
        if lease is not None:
            self.ensure_lease_kept(work_item)
        result: dict[str, Any] = {"outcome": outcome, "summary": summary}
        if metrics is not None:
            result["metrics"] = metrics
        payload: dict[str, Any] = {
            "subject": subject or {"kind": "workItem", "id": work_item},
            "missionId": mission or view["missionId"],
            "groupId": self.session.group_id,
            "workItemId": work_item,
            "criterion": criterion,
            "method": {"kind": method, "name": method_name, "version": method_version},
            "result": result,
            "producer": {"agentId": self.agent_id, "agentCardVersion": self.card_version},
            "timestamp": now_rfc3339(),
            "artifacts": list(artifacts),
        }
        if lease is not None:
            payload["execution"] = {
                "leaseId": lease.lease_id,
                "ownershipEpoch": lease.ownership_epoch,
            }
        if supersedes is not None:
            payload["supersedes"] = supersedes
        return self._post_signed("/v1/evidence", dsse.EVIDENCE, payload)

    def evidence(self, **filters: str) -> Iterator[dict[str, Any]]:
        """Evidence records matching ``workItemId=``, ``criterion=``, ``outcome=``,
        ``method=``, ``producer=``, ``missionId=``, ``supersedes=``, newest first, every page."""
        params: dict[str, Any] = dict(filters)
        while True:
            page = self._t.json("GET", "/v1/evidence", params=params)
            yield from page["items"]
            if page.get("next") is None:
                return
            params["after"] = page["next"]

    def criteria(self, work_item: str) -> dict[str, dict[str, Any]]:
        """The verdict in force per acceptance criterion: criterion → ``{latest, counts,
        producers, contested}``."""
        view = self._t.json("GET", f"/v1/workitems/{work_item}/criteria")
        return {str(entry["criterion"]): entry for entry in view["criteria"]}

    # ---- legal holds, as the Group's approver (issue #46) -----------------------------------

    def place_hold(
        self,
        reason: str,
        *,
        artifact: str | None = None,
        work_item: str | None = None,
        mission: str | None = None,
    ) -> dict[str, Any]:
        """Places a legal hold on one artifact, WorkItem or Mission this session sees, as the
        Group's approver (``POST /v1/groups/{g}/holds``): collection keeps it and its lineage.
        Returns ``{holdId, target, reason, placedAt, groups, placedBy}``."""
        targets = {"artifact": artifact, "workItemId": work_item, "missionId": mission}
        chosen = {name: value for name, value in targets.items() if value is not None}
        if len(chosen) != 1:
            raise ValueError("name exactly one of artifact, work_item, mission")
        body: dict[str, Any] = {**chosen, "reason": reason}
        placed: dict[str, Any] = self._t.json(
            "POST", f"/v1/groups/{self.session.group_id}/holds", json=body
        )
        return placed

    def lift_hold(self, hold_id: str) -> dict[str, Any]:
        """Lifts one of the Group's approvers' holds (``DELETE /v1/groups/{g}/holds/{id}``);
        lifting it again answers it as lifted."""
        lifted: dict[str, Any] = self._t.json(
            "DELETE", f"/v1/groups/{self.session.group_id}/holds/{hold_id}"
        )
        return lifted

    def holds(self) -> Iterator[dict[str, Any]]:
        """The Group's holds this session sees (its approvers' and the operator's, in force
        and lifted), by id, every page."""
        params: dict[str, Any] = {"limit": 1000}
        while True:
            page = self._t.json("GET", f"/v1/groups/{self.session.group_id}/holds", params=params)
            yield from page["holds"]
            if page.get("next") is None:
                return
            params["after"] = page["next"]

    # ---- provenance ------------------------------------------------------------------------

    def lineage(
        self,
        digest: str,
        *,
        direction: str = "ancestors",
        depth: int | None = None,
        page_size: int | None = None,
        edges: Sequence[str] = (),
    ) -> Iterator[dict[str, Any]]:
        """The lineage of an artifact one page at a time (``{artifacts, workItems, missions,
        agents, edges, withheld, truncated, cursor}``), following ``cursor``."""
        params: dict[str, Any] = {"direction": direction}
        if depth is not None:
            params["depth"] = depth
        if page_size is not None:
            params["limit"] = page_size
        if edges:
            params["edges"] = ",".join(edges)
        while True:
            page = self._t.json("GET", f"/v1/artifacts/{digest}/provenance", params=params)
            yield page
            if not page.get("cursor"):
                return
            params["cursor"] = page["cursor"]

    def export(self, digest: str, format: str = "prov-json") -> Any:
        """The lineage as ``prov-json``, ``dot`` or ``mermaid`` (the last two as text), or
        ``intoto``: then see :meth:`intoto_statement`, which also checks its signature."""
        response = self._t.request(
            "GET", f"/v1/artifacts/{digest}/provenance", params={"format": format}
        )
        if format in ("dot", "mermaid"):
            return response.text
        return response.json()

    def authority_keys(self) -> dict[str, bytes]:
        """The server's own signing keys (``GET /v1/authority/keys``): keyid → public key."""
        answer = self._t.json("GET", "/v1/authority/keys")
        return {
            str(entry["keyid"]): base64.b64decode(entry["publicKey"], validate=True)
            for entry in answer["keys"]
        }

    def intoto_statement(self, digest: str, authority_key: bytes | None = None) -> dict[str, Any]:
        """The artifact's in-toto statement, its DSSE signature checked against
        ``authority_key`` (pin it for an answer that does not rest on this server's word),
        else against a key the server serves as its own; :class:`IntegrityError` otherwise."""
        envelope = self.export(digest, "intoto")
        keys = [authority_key] if authority_key is not None else list(self.authority_keys().values())
        for key in keys:
            try:
                payload = dsse.verify(envelope, key, INTOTO)
            except IntegrityError:
                continue
            statement: dict[str, Any] = json.loads(payload)
            subjects = {
                "blake3:" + entry.get("digest", {}).get("blake3", "")
                for entry in statement.get("subject", [])
            }
            if digest.startswith("blake3:") and digest not in subjects:
                raise IntegrityError("intoto_subject", f"the statement is not about {digest}")
            return statement
        raise IntegrityError("bad_signature", "the in-toto statement is not signed by the authority")
