"""weft-client: a typed, streaming, verifying client for weft, the MissionWeaveProtocol Group
Authority. Start with :func:`connect`; see ``clients/python/README.md``."""

from ._base import Lease, Session
from .client import Admin, Client, connect
from .digests import Digests
from .errors import (
    BudgetExceeded,
    ChainError,
    EvidenceMissing,
    Forbidden,
    IdempotencyConflict,
    IntegrityError,
    InvalidRequest,
    LeaseLost,
    NotFound,
    ServerError,
    SignatureRejected,
    StaleLease,
    StateConflict,
    Transient,
    Unauthenticated,
    WeftError,
)
from .events import ChainVerifier, Event
from .keys import AgentKey
from .tlog import TreeHead
from .work import LeaseKeeper

__all__ = [
    "Admin",
    "AgentKey",
    "BudgetExceeded",
    "ChainError",
    "ChainVerifier",
    "Client",
    "Digests",
    "Event",
    "EvidenceMissing",
    "Forbidden",
    "IdempotencyConflict",
    "IntegrityError",
    "InvalidRequest",
    "Lease",
    "LeaseKeeper",
    "LeaseLost",
    "NotFound",
    "ServerError",
    "Session",
    "SignatureRejected",
    "StaleLease",
    "StateConflict",
    "Transient",
    "TreeHead",
    "Unauthenticated",
    "WeftError",
    "connect",
]
__version__ = "0.1.0"
