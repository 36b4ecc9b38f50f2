"""Verifies a DSSE-wrapped in-toto Statement independently of weft's Rust code.

argv[1]: the authority public key (standard base64). stdin: the DSSE envelope JSON.
Checks the Ed25519 signature over PAE with the `cryptography` package, then the Statement v1
structure (_type, subject name and digest map, predicateType, predicate object), and the
rules the `in-toto-attestation` validators apply to an SLSA provenance v1 predicate: every
ResourceDescriptor carries a uri, digest or content, digests are lowercase hex, and
timestamps are RFC 3339 ending in `Z`.
"""
import base64
import datetime
import json
import sys

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

envelope = json.load(sys.stdin)
key = Ed25519PublicKey.from_public_bytes(base64.b64decode(sys.argv[1]))
payload = base64.b64decode(envelope["payload"])
payload_type = envelope["payloadType"].encode()
pae = b"DSSEv1 %d %s %d %s" % (len(payload_type), payload_type, len(payload), payload)
if len(envelope["signatures"]) != 1:
    sys.exit("expected exactly one signature")
key.verify(base64.b64decode(envelope["signatures"][0]["sig"]), pae)  # raises on failure
if envelope["payloadType"] != "application/vnd.in-toto+json":
    sys.exit("wrong payloadType")
statement = json.loads(payload)
assert statement["_type"] == "https://in-toto.io/Statement/v1", statement["_type"]
assert isinstance(statement["subject"], list) and statement["subject"], "subject"
for subject in statement["subject"]:
    assert isinstance(subject["name"], str) and isinstance(subject["digest"], dict) and subject["digest"], subject
assert statement["predicateType"] == "https://slsa.dev/provenance/v1"
assert isinstance(statement["predicate"], dict)
predicate = statement["predicate"]
for dependency in predicate.get("buildDefinition", {}).get("resolvedDependencies", []):
    assert dependency.get("uri") or dependency.get("digest") or dependency.get("content"), dependency
    for value in dependency.get("digest", {}).values():
        assert value == value.lower() and all(c in "0123456789abcdef" for c in value), dependency
metadata = predicate.get("runDetails", {}).get("metadata", {})
for field in ("startedOn", "finishedOn"):
    if field in metadata:
        stamp = metadata[field]
        assert stamp.endswith("Z"), (field, stamp)
        datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
print("ok")
