"""DSSE v1 envelopes with Ed25519 (DESIGN §4): the signed bytes are the stored bytes.

``PAE = "DSSEv1" SP len(type) SP type SP len(payload) SP payload`` with lengths in ASCII
decimal; ``payload`` and ``sig`` are standard base64 with padding; ``keyid`` is the signer's
key id.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from .errors import IntegrityError, InvalidRequest
from .keys import AgentKey, keyid_of

MANIFEST = "application/vnd.mwp.artifact-manifest.v1+json"
EVIDENCE = "application/vnd.mwp.evidence.v1+json"
COMMAND = "application/vnd.mwp.command.v1+json"
CONTEXT_PACKAGE = "application/vnd.mwp.context-package.v1+json"
SESSION = "application/vnd.mwp.session.v1+json"
SNAPSHOT = "application/vnd.mwp.snapshot.v1+json"
CHECKPOINT = "application/vnd.mwp.checkpoint.v1+json"


def pae(payload_type: str, payload: bytes) -> bytes:
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


def payload_bytes(value: Any) -> bytes:
    """The compact JSON bytes of a payload: what is signed is exactly what is sent. NaN and
    the infinities are refused: JSON has no spelling for them."""
    try:
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except ValueError as error:
        raise InvalidRequest("invalid_json", f"cannot sign this payload: {error}") from error
    return text.encode("utf-8")


def sign(key: AgentKey, payload_type: str, payload: bytes) -> dict[str, Any]:
    """A DSSE envelope of ``payload`` signed by ``key``."""
    return {
        "payloadType": payload_type,
        "payload": base64.b64encode(payload).decode("ascii"),
        "signatures": [
            {
                "keyid": key.keyid,
                "sig": base64.b64encode(key.sign(pae(payload_type, payload))).decode("ascii"),
            }
        ],
    }


def verify(envelope: dict[str, Any], public_key: bytes, payload_type: str | None = None) -> bytes:
    """Checks that ``public_key`` signed ``envelope`` and returns the payload bytes; raises
    :class:`IntegrityError` otherwise."""
    try:
        kind = str(envelope["payloadType"])
        payload = base64.b64decode(envelope["payload"], validate=True)
        signatures = list(envelope["signatures"])
    except (KeyError, TypeError, ValueError) as error:
        raise IntegrityError("bad_envelope", f"not a DSSE envelope: {error}") from error
    if payload_type is not None and kind != payload_type:
        raise IntegrityError("wrong_payload_type", f"expected {payload_type}, got {kind}")
    verifier = Ed25519PublicKey.from_public_bytes(public_key)
    wanted = keyid_of(public_key)
    for signature in signatures:
        if signature.get("keyid") != wanted:
            continue
        try:
            verifier.verify(base64.b64decode(signature["sig"], validate=True), pae(kind, payload))
            return payload
        except (InvalidSignature, ValueError, KeyError):
            break
    raise IntegrityError("bad_signature", f"no valid signature by {wanted}")
