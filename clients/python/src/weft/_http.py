"""The HTTP layer: one ``httpx.Client`` per server, problem+json turned into exceptions, and
retries with backoff for what is safe to repeat.

A request is safe to repeat when it is a read, or when the server recognises a repetition:
a Command (its ``commandId``), a request with an ``Idempotency-Key``, a content-addressed
blob upload. Those are retried on 429/503/408 (honouring ``Retry-After``) and on a dropped
connection; anything else is tried once. Bodies that stream are given as a factory so a retry
re-opens them instead of buffering them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx

from .errors import Transient, WeftError, from_problem

RETRY_STATUSES = frozenset({408, 429, 503})
Body = bytes | Iterable[bytes] | None


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def problem(response: httpx.Response) -> WeftError:
    """The exception for a refusal (the body must have been read)."""
    body: dict[str, Any] | None
    try:
        parsed = response.json()
        body = parsed if isinstance(parsed, dict) else None
    except ValueError:
        body = None
    if body is None:
        body = {"code": f"http_{response.status_code}", "detail": response.text[:500]}
    return from_problem(response.status_code, body, _retry_after(response))


class Transport:
    """Requests to one server with one bearer (a session token, a capability token, or the
    operator's admin token)."""

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        http: httpx.Client | None = None,
        max_retries: int = 5,
        max_backoff: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.http = http or httpx.Client(timeout=httpx.Timeout(60.0, connect=10.0))
        self.max_retries = max_retries
        self.max_backoff = max_backoff
        self.sleep = sleep

    def with_token(self, token: str | None) -> Transport:
        """The same server and connection pool with another bearer."""
        clone = Transport(
            self.base_url,
            token,
            http=self.http,
            max_retries=self.max_retries,
            max_backoff=self.max_backoff,
            sleep=self.sleep,
        )
        return clone

    def _headers(self, extra: dict[str, str] | None) -> dict[str, str]:
        headers = dict(extra or {})
        if self.token is not None:
            headers["Authorization"] = f"Bearer {self.token}"
        return headers

    def _backoff(self, attempt: int, hint: float | None) -> float:
        delay: float = min(self.max_backoff, 0.1 * float(2**attempt))
        if hint is not None:
            delay = max(delay, min(hint, self.max_backoff))
        return delay

    @contextmanager
    def stream(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        json: Any = None,
        body: Callable[[], Body] | None = None,
        safe: bool | None = None,
        timeout: httpx.Timeout | None = None,
        read_body: bool = False,
    ) -> Iterator[httpx.Response]:
        """Sends a request and yields its answer, unread (for streamed bodies) unless
        ``read_body``; a refusal is raised as its :class:`WeftError`. Retries as the module
        says, also when the connection drops while an answer is read here; a drop while the
        caller reads a streamed body is the caller's to handle (``httpx.TransportError``)."""
        repeatable = safe if safe is not None else method in ("GET", "HEAD")
        attempt = 0
        while True:
            content = body() if body is not None else None
            request = self.http.build_request(
                method,
                self.base_url + path,
                params=params,
                headers=self._headers(headers),
                json=json,
                content=content,
                timeout=timeout if timeout is not None else httpx.USE_CLIENT_DEFAULT,
            )
            try:
                response = self.http.send(request, stream=True)
            except httpx.TransportError as error:
                if not repeatable or attempt >= self.max_retries:
                    raise Transient("unreachable", f"{method} {path}: {error}") from error
                self.sleep(self._backoff(attempt, None))
                attempt += 1
                continue
            try:
                try:
                    if response.status_code >= 400 or read_body:
                        response.read()
                except httpx.TransportError as error:
                    if not repeatable or attempt >= self.max_retries:
                        raise Transient(
                            "unreachable", f"{method} {path}: the answer was cut off: {error}"
                        ) from error
                    self.sleep(self._backoff(attempt, None))
                    attempt += 1
                    continue
                if response.status_code >= 400:
                    failure = problem(response)
                    if (
                        repeatable
                        and response.status_code in RETRY_STATUSES
                        and attempt < self.max_retries
                    ):
                        self.sleep(self._backoff(attempt, failure.retry_after))
                        attempt += 1
                        continue
                    raise failure
                yield response
                return
            finally:
                response.close()

    def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        json: Any = None,
        body: Callable[[], Body] | None = None,
        safe: bool | None = None,
    ) -> httpx.Response:
        """Like :meth:`stream`, with the body read."""
        with self.stream(
            method,
            path,
            params=params,
            headers=headers,
            json=json,
            body=body,
            safe=safe,
            read_body=True,
        ) as response:
            return response

    def json(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        json: Any = None,
        body: Callable[[], Body] | None = None,
        safe: bool | None = None,
    ) -> Any:
        response = self.request(
            method, path, params=params, headers=headers, json=json, body=body, safe=safe
        )
        if not response.content:
            return None
        return response.json()

    def close(self) -> None:
        self.http.close()
