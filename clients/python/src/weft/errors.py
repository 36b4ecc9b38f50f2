"""Errors: one exception type per family of problem+json ``code`` (DESIGN §8).

Every refusal of the server becomes a :class:`WeftError` subclass carrying the ``code``, the
HTTP ``status`` and the ``detail``; the family tells a caller what to do about it (retry,
re-open the session, re-read the WorkItem, give up), the ``code`` says exactly what happened.
Client-side failures that are not the server's answer (bytes that do not hash to their
digest, a broken hash chain) have their own types below.
"""

from __future__ import annotations

from typing import Any


class WeftError(Exception):
    """A refusal by the server (problem+json), or a failure of this client."""

    def __init__(
        self,
        code: str,
        detail: str,
        status: int = 0,
        body: dict[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{code}: {detail}" + (f" (HTTP {status})" if status else ""))
        self.code = code
        self.detail = detail
        self.status = status
        self.body: dict[str, Any] = body or {}
        self.retry_after = retry_after


class InvalidRequest(WeftError):
    """The request is malformed or names something that does not exist in the shape asked
    (400, 413, 415, 416, 422): fix the request, do not retry it as is."""


class Unauthenticated(WeftError):
    """The bearer is missing, expired or stale (401): open a new session."""


class SignatureRejected(WeftError):
    """A signature or key was refused (``bad_signature``, ``unknown_key``, ``producer_mismatch``,
    ``key_retired``, ``clock_skew``)."""


class Forbidden(WeftError):
    """The caller may not do this (403): wrong role, not a member, not the owner."""


class NotFound(WeftError):
    """Nothing by that name is visible to the caller (404)."""


class StaleLease(WeftError):
    """The Execution Lease quoted is no longer the current one (``stale_lease``): the work is
    fenced; stop it and do not publish under that lease again."""


class StateConflict(WeftError):
    """The aggregate is not in a state that allows this (409): ``illegal_transition``,
    ``stale_revision``, offers, eligibility, cycles, offline reconciliation. Re-read and decide."""


class BudgetExceeded(WeftError):
    """The usage would overflow a budget on the lineage (``budget_exceeded``, ``quota_exceeded``)."""


class EvidenceMissing(WeftError):
    """A submission lacks Evidence for some acceptance criterion (``evidence_missing``)."""


class IdempotencyConflict(WeftError):
    """The same ``commandId`` or ``Idempotency-Key`` was used for a different request."""


class Transient(WeftError):
    """The server is busy, rate-limiting or cannot reach its storage (429, 503, 408): safe
    requests are retried by the client with backoff before this is raised."""


class ServerError(WeftError):
    """The server failed (500)."""


class IntegrityError(WeftError):
    """Bytes do not hash to the digest they were asked by, or a proof does not verify. Raised
    before the caller sees any of the unverified bytes."""


class ChainError(WeftError):
    """Events do not form the Group's hash chain (a gap, a fork, or an Event whose recomputed
    hash differs from the one served)."""


class LeaseLost(WeftError):
    """The lease keeper could not keep the lease: its work must stop."""


_BY_CODE: dict[str, type[WeftError]] = {
    "unauthorized": Unauthenticated,
    "agent_deactivated": Unauthenticated,
    "stale_session": Unauthenticated,
    "stale_membership": Unauthenticated,
    "bad_signature": SignatureRejected,
    "unknown_key": SignatureRejected,
    "producer_mismatch": SignatureRejected,
    "key_retired": SignatureRejected,
    "clock_skew": SignatureRejected,
    "stale_lease": StaleLease,
    "budget_exceeded": BudgetExceeded,
    "quota_exceeded": BudgetExceeded,
    "upload_quota_exceeded": BudgetExceeded,
    "evidence_missing": EvidenceMissing,
    "idempotency_key_reused": IdempotencyConflict,
    "digest_mismatch": IntegrityError,
    "integrity_failure": IntegrityError,
}

_BY_STATUS: dict[int, type[WeftError]] = {
    400: InvalidRequest,
    401: Unauthenticated,
    403: Forbidden,
    404: NotFound,
    408: Transient,
    409: StateConflict,
    410: NotFound,
    412: StateConflict,
    413: InvalidRequest,
    415: InvalidRequest,
    416: InvalidRequest,
    422: InvalidRequest,
    429: Transient,
    503: Transient,
}


def from_problem(
    status: int, body: dict[str, Any] | None, retry_after: float | None = None
) -> WeftError:
    """The exception for a problem+json answer (or a bare status when the body is not one)."""
    body = body or {}
    code = str(body.get("code") or f"http_{status}")
    detail = str(body.get("detail") or body.get("title") or "no detail")
    kind = _BY_CODE.get(code) or _BY_STATUS.get(status)
    if kind is None:
        kind = ServerError if status >= 500 else InvalidRequest
    return kind(code, detail, status, body, retry_after)


def from_code(code: str, detail: str) -> WeftError:
    """The exception for a bare ``code`` (an event stream's ``error`` frame)."""
    return _BY_CODE.get(code, WeftError)(code, detail)
