"""What every part of the client shares: the transport, the Agent's key and identity, the
session, and the leases this Agent holds (learnt from every answer that shows one)."""

from __future__ import annotations

import datetime
import threading
from dataclasses import dataclass, field
from typing import Any

from ._http import Transport
from .errors import Unauthenticated
from .keys import AgentKey


def now_rfc3339() -> str:
    """The current UTC time as RFC 3339 with whole seconds and ``Z``."""
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Session:
    """A session in one Group (DESIGN §8.1): its bearer token and the epochs a Command quotes."""

    token: str = field(repr=False)
    agent_id: str
    group_id: str
    session_epoch: int
    membership_epoch: int
    expires_at: str


@dataclass(frozen=True)
class Lease:
    """An Execution Lease (DESIGN §10): what an owner's Commands, manifests and Evidence quote."""

    lease_id: str
    kind: str
    agent_id: str
    session_epoch: int
    work_item_id: str
    ownership_epoch: int
    started_at: str
    expires_at: str

    @classmethod
    def of(cls, view: dict[str, Any]) -> Lease:
        return cls(
            lease_id=str(view["leaseId"]),
            kind=str(view["kind"]),
            agent_id=str(view["agentId"]),
            session_epoch=int(view["sessionEpoch"]),
            work_item_id=str(view["workItemId"]),
            ownership_epoch=int(view["ownershipEpoch"]),
            started_at=str(view["startedAt"]),
            expires_at=str(view["expiresAt"]),
        )


class Base:
    """State shared by the client's parts (see ``client.py``)."""

    def __init__(
        self,
        transport: Transport,
        key: AgentKey | None,
        agent_id: str | None,
        group_id: str | None,
        card_version: str,
    ) -> None:
        self._t = transport
        self.key = key
        self.agent_id = agent_id
        self.group_id = group_id
        self.card_version = card_version
        self._session: Session | None = None
        self._leases: dict[str, Lease] = {}
        self._lost: set[str] = set()
        self._lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return self._t.base_url

    @property
    def session(self) -> Session:
        if self._session is None:
            raise Unauthenticated("no_session", "open a session first (Client.open_session)")
        return self._session

    def _signer(self) -> tuple[AgentKey, str]:
        if self.key is None or self.agent_id is None:
            raise Unauthenticated("no_key", "this client has no agent key to sign with")
        return self.key, self.agent_id

    def _note_view(self, view: Any) -> None:
        """Remembers the lease a WorkItem view shows for this Agent (or forgets it)."""
        if not isinstance(view, dict) or "workItemId" not in view:
            return
        work_item_id = str(view["workItemId"])
        lease = view.get("lease")
        with self._lock:
            if isinstance(lease, dict) and lease.get("agentId") == self.agent_id:
                self._leases[work_item_id] = Lease.of(lease)
            else:
                self._leases.pop(work_item_id, None)

    def lease_of(self, work_item_id: str) -> Lease | None:
        """The lease this Agent holds on a WorkItem, as last seen (``None``: none known)."""
        with self._lock:
            return self._leases.get(work_item_id)
