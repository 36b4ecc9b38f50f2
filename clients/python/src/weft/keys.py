"""Agent keys: Ed25519, in the file format of ``weft keygen``.

``agent.key`` is a JSON object ``{"secretKey", "publicKey", "keyid"}``: the 32-byte secret
and public keys in standard base64 with padding, and the key id ``ed25519:`` + lowercase hex
of BLAKE3 of the raw public key (DESIGN §8.1). Files are written readable by their owner only.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
from pathlib import Path

import blake3
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from .errors import InvalidRequest


def keyid_of(public_key: bytes) -> str:
    """``ed25519:<hex of blake3(public key)>``."""
    return "ed25519:" + blake3.blake3(public_key).hexdigest()


def default_key_path() -> Path:
    """``$WEFT_HOME/agent.key``, else ``~/.weft/agent.key`` (where ``weft keygen`` writes)."""
    home = os.environ.get("WEFT_HOME")
    return Path(home) / "agent.key" if home else Path.home() / ".weft" / "agent.key"


class AgentKey:
    """An Agent's Ed25519 signing key."""

    def __init__(self, private: Ed25519PrivateKey) -> None:
        self._private = private
        self.public_bytes: bytes = private.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        self.keyid: str = keyid_of(self.public_bytes)

    @classmethod
    def generate(cls) -> AgentKey:
        return cls(Ed25519PrivateKey.generate())

    @classmethod
    def from_secret(cls, secret: bytes) -> AgentKey:
        if len(secret) != 32:
            raise InvalidRequest("invalid_key", "an Ed25519 secret key is 32 bytes")
        return cls(Ed25519PrivateKey.from_private_bytes(secret))

    @classmethod
    def load(cls, path: str | os.PathLike[str] | None = None) -> AgentKey:
        """Reads a key file written by ``weft keygen`` (or :meth:`save`)."""
        file = Path(path) if path is not None else default_key_path()
        try:
            document = json.loads(file.read_text(encoding="utf-8"))
            secret = base64.b64decode(document["secretKey"], validate=True)
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise InvalidRequest("invalid_key", f"cannot read {file}: {error}") from error
        key = cls.from_secret(secret)
        if "keyid" in document and document["keyid"] != key.keyid:
            raise InvalidRequest("invalid_key", f"{file}: keyid does not match its secret key")
        return key

    @property
    def public_key_b64(self) -> str:
        return base64.b64encode(self.public_bytes).decode("ascii")

    def save(self, path: str | os.PathLike[str] | None = None, *, force: bool = False) -> Path:
        """Writes the key file (mode 0600, its directory created 0700); refuses to replace one
        unless ``force``. The file is written whole beside its name and renamed into place, never
        through a symbolic link, so the secret lands nowhere else and is never readable by others."""
        file = Path(path) if path is not None else default_key_path()
        if (file.exists() or file.is_symlink()) and not force:
            raise InvalidRequest("key_exists", f"{file} exists; pass force=True to replace it")
        file.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        secret = self._private.private_bytes(
            serialization.Encoding.Raw,
            serialization.PrivateFormat.Raw,
            serialization.NoEncryption(),
        )
        document = {
            "secretKey": base64.b64encode(secret).decode("ascii"),
            "publicKey": self.public_key_b64,
            "keyid": self.keyid,
        }
        temporary = file.with_name(f".{file.name}.{secrets.token_hex(8)}.tmp")
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        descriptor = os.open(temporary, flags, 0o600)
        try:
            with os.fdopen(descriptor, "w", encoding="utf-8") as out:
                json.dump(document, out, indent=2)
                out.flush()
                os.fsync(out.fileno())
            if force:
                os.replace(temporary, file)
            else:
                os.link(temporary, file)  # fails if a file appeared meanwhile
        except FileExistsError as error:
            raise InvalidRequest("key_exists", f"{file} exists; pass force=True") from error
        finally:
            temporary.unlink(missing_ok=True)
        return file

    def sign(self, message: bytes) -> bytes:
        return self._private.sign(message)

    def public_key(self) -> Ed25519PublicKey:
        return self._private.public_key()
