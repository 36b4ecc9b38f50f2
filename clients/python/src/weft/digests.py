"""Both digests of an artifact in one pass (DESIGN §3): ``blake3:<hex>`` is its identity,
``sha256:<hex>`` is computed alongside and checked too."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

import blake3

from .errors import InvalidRequest

_DIGEST = re.compile(r"^(blake3|sha256):[0-9a-f]{64}$")


def check_digest(text: str) -> str:
    """``text`` if it is a ``blake3:`` or ``sha256:`` digest, else :class:`InvalidRequest`."""
    if not _DIGEST.match(text):
        raise InvalidRequest("invalid_digest", f"{text!r} is not blake3:<64 hex> or sha256:<64 hex>")
    return text


@dataclass(frozen=True)
class Digests:
    blake3: str
    sha256: str
    size: int

    def matches(self, digest: str) -> bool:
        """Whether ``digest`` (either form) names these bytes."""
        return digest in (self.blake3, self.sha256)


class Hasher:
    """Feeds both hashes at once; memory stays at the chunk given."""

    def __init__(self) -> None:
        self._blake3 = blake3.blake3()
        self._sha256 = hashlib.sha256()
        self.size = 0

    def update(self, chunk: bytes | memoryview) -> None:
        self._blake3.update(chunk)
        self._sha256.update(chunk)
        self.size += len(chunk)

    def digests(self) -> Digests:
        return Digests(
            "blake3:" + self._blake3.hexdigest(),
            "sha256:" + self._sha256.hexdigest(),
            self.size,
        )
