"""The client: one Agent in one Group of one weft server, and the operator's :class:`Admin`.

``Client`` gathers the parts (``work``: Commands and leases, ``artifacts``: uploads and
verified downloads, ``review``: Evidence and lineage, ``feed``: Events), each a class the
next one extends, so every method sees the same session, key and leases.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ._base import Session
from ._http import Transport
from .feed import Feed
from .errors import Unauthenticated
from .keys import AgentKey, default_key_path


class Client(Feed):
    """An Agent's client. Open a session with :meth:`open_session` (or use :func:`connect`)."""

    def __init__(
        self,
        base_url: str,
        *,
        agent_id: str | None = None,
        group_id: str | None = None,
        key: AgentKey | str | os.PathLike[str] | None = None,
        card_version: str = "1",
        token: str | None = None,
        transport: Transport | None = None,
    ) -> None:
        loaded = key if isinstance(key, AgentKey) or key is None else AgentKey.load(key)
        super().__init__(
            transport or Transport(base_url, token), loaded, agent_id, group_id, card_version
        )

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self._t.close()

    def open_session(self) -> Session:
        """Signs a session request and opens a session (DESIGN §8.1). A new session replaces
        this Agent's previous one in the Group, whose leases end (LSE-9)."""
        _, agent_id = self._signer()
        if self.group_id is None:
            raise ValueError("a session needs group_id")
        content = self._session_request()
        grant = self._t.with_token(None).json(
            "POST",
            "/v1/sessions",
            headers={"Content-Type": "application/json"},
            body=lambda: content,
        )
        self._session = Session(
            token=str(grant["token"]),
            agent_id=agent_id,
            group_id=self.group_id,
            session_epoch=int(grant["sessionEpoch"]),
            membership_epoch=int(grant["membershipEpoch"]),
            expires_at=str(grant["expiresAt"]),
        )
        self._t.token = self._session.token
        with self._lock:
            self._leases.clear()
        return self._session

    @classmethod
    def from_home(cls, home: str | os.PathLike[str] | None = None) -> Client:
        """The key and the session the ``weft`` CLI keeps in its home (``agent.key`` and
        ``session.json`` of ``$WEFT_HOME``, else ``~/.weft``): Python picks up the session
        ``weft login`` opened, with its leases, instead of replacing it."""
        root = Path(home) if home is not None else default_key_path().parent
        key = AgentKey.load(root / "agent.key")
        try:
            stored = json.loads((root / "session.json").read_text(encoding="utf-8"))
            session = Session(
                token=str(stored["token"]),
                agent_id=str(stored["agentId"]),
                group_id=str(stored["groupId"]),
                session_epoch=int(stored["sessionEpoch"]),
                membership_epoch=int(stored["membershipEpoch"]),
                expires_at=str(stored["expiresAt"]),
            )
            server = str(stored["server"])
            card_version = str(stored.get("agentCardVersion", "1"))
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise Unauthenticated(
                "no_session", f"no usable session in {root} (run `weft login`): {error}"
            ) from error
        client = cls(
            server,
            agent_id=session.agent_id,
            group_id=session.group_id,
            key=key,
            card_version=card_version,
            token=session.token,
        )
        client._session = session
        return client

    def whoami(self) -> dict[str, Any]:
        """``GET /v1/session``: Agent, Group, roles, Mission scope, epochs, expiry."""
        view: dict[str, Any] = self._t.json("GET", "/v1/session")
        return view

    def with_capability(self, token: str) -> Client:
        """A client acting with a capability token (``issue_token``) in place of the
        session: for the token's scoped operations only."""
        clone = Client(
            self.base_url,
            agent_id=self.agent_id,
            group_id=self.group_id,
            key=self.key,
            card_version=self.card_version,
            transport=self._t.with_token(token),
        )
        clone._session = self._session
        clone._leases = dict(self._leases)
        return clone


def connect(
    base_url: str,
    *,
    agent_id: str,
    group_id: str,
    key: AgentKey | str | os.PathLike[str] | None = None,
    card_version: str = "1",
) -> Client:
    """A client with a session open: ``key`` is an :class:`AgentKey` or a key file's path
    (default: ``$WEFT_HOME/agent.key`` or ``~/.weft/agent.key``)."""
    client = Client(
        base_url,
        agent_id=agent_id,
        group_id=group_id,
        key=key if key is not None else AgentKey.load(),
        card_version=card_version,
    )
    client.open_session()
    return client


class Admin:
    """The operator's calls (``Authorization: Bearer <admin token>``, DESIGN §8.1)."""

    def __init__(self, base_url: str, token: str, *, transport: Transport | None = None) -> None:
        self._t = transport or Transport(base_url, token)

    @classmethod
    def from_data_dir(cls, base_url: str, data_dir: str | os.PathLike[str]) -> Admin:
        """With the token ``weft serve`` wrote to ``DIR/admin.token``."""
        with open(os.path.join(data_dir, "admin.token"), encoding="utf-8") as file:
            return cls(base_url, file.read().strip())

    def create_group(self, group_id: str) -> None:
        self._t.json("PUT", f"/v1/admin/groups/{group_id}", safe=True)

    def register_agent(self, agent_id: str, public_key: AgentKey, card_version: str = "1") -> str:
        """Registers an Agent with the key's public half; returns its keyid."""
        answer = self._t.json(
            "POST",
            "/v1/admin/agents",
            json={
                "agentId": agent_id,
                "publicKey": public_key.public_key_b64,
                "agentCardVersion": card_version,
            },
            safe=True,
        )
        return str(answer["keyid"])

    def set_membership(
        self, group_id: str, agent_id: str, roles: Sequence[str], missions: Sequence[str] = ()
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"roles": list(roles)}
        if missions:
            body["missions"] = list(missions)
        answer: dict[str, Any] = self._t.json(
            "PUT", f"/v1/admin/groups/{group_id}/members/{agent_id}", json=body
        )
        return answer

    def close(self) -> None:
        self._t.close()
