"""A fault-injecting HTTP transport for the tests: requests go to the real server, and a rule
may drop the answer, refuse with a status, or flip a byte of a body on its way back."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import httpx

import weft
from weft._http import Transport

Rule = Callable[[httpx.Request, int], str | None]


@dataclass
class Faulty(httpx.BaseTransport):
    """``rule(request, n)`` (n counts requests matching nothing in particular) answers
    ``None`` (pass), ``"drop-before"`` (the request never leaves), ``"drop-after"`` (the
    server handles it, the answer is lost), ``"502"`` (a gateway's failure, never sent on),
    ``"503"`` (refused with Retry-After: 0), or
    ``"flip"`` (one byte of the answer's body inverted), or ``"cut"`` (the answer's body
    ends half way with a reset connection)."""

    rule: Rule
    inner: httpx.HTTPTransport = field(default_factory=httpx.HTTPTransport)
    seen: list[str] = field(default_factory=list)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.seen.append(f"{request.method} {request.url.path}")
        action = self.rule(request, len(self.seen))
        if action == "drop-before":
            raise httpx.ConnectError("injected: connection refused", request=request)
        if action == "502":
            return httpx.Response(
                502,
                headers={"Content-Type": "application/problem+json"},
                json={"code": "bad_gateway", "detail": "injected", "status": 502},
                request=request,
            )
        if action == "503":
            return httpx.Response(
                503,
                headers={"Retry-After": "0", "Content-Type": "application/problem+json"},
                json={"code": "overloaded", "detail": "injected", "status": 503},
                request=request,
            )
        response = self.inner.handle_request(request)
        if action == "drop-after":
            response.read()
            response.close()
            raise httpx.ReadError("injected: connection reset", request=request)
        if action == "cut":
            whole = response.read()
            response.close()
            return httpx.Response(
                response.status_code,
                headers=response.headers,
                stream=_CutStream(whole[: len(whole) // 2], request),
                request=request,
            )
        if action == "flip":
            body = bytearray(response.read())
            response.close()
            if body:
                body[len(body) // 2] ^= 0xFF
            return httpx.Response(
                response.status_code,
                headers=response.headers,
                stream=httpx.ByteStream(bytes(body)),  # unread, as a network answer is
                request=request,
            )
        return response


class _CutStream(httpx.SyncByteStream):
    def __init__(self, first: bytes, request: httpx.Request) -> None:
        self.first = first
        self.request = request

    def __iter__(self) -> Iterator[bytes]:
        yield self.first
        raise httpx.ReadError("injected: connection reset mid-body", request=self.request)


def faulty_client(client: weft.Client, rule: Rule) -> tuple[weft.Client, Faulty, list[float]]:
    """A copy of ``client`` (same key, session and leases) whose requests pass ``rule``;
    backoff sleeps are recorded, not slept."""
    faulty = Faulty(rule)
    slept: list[float] = []
    transport = Transport(
        client.base_url,
        client.session.token,
        http=httpx.Client(transport=faulty, timeout=60.0),
        sleep=slept.append,
    )
    copy = weft.Client(
        client.base_url,
        agent_id=client.agent_id,
        group_id=client.group_id,
        key=client.key,
        card_version=client.card_version,
        transport=transport,
    )
    copy._session = client.session
    copy._leases = dict(client._leases)
    return copy, faulty, slept
