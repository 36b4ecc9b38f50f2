"""An independent verifier of a weft audit bundle (issue #45), written from the README
("How an Event is hashed", "Verifiable audit") and the C2SP specs, not from weft's Rust.

Usage: audit_verify.py BUNDLE.tar AUTHORITY_KEY_BASE64
Prints "ok <counts>" and exits 0, or one "FAIL ..." line per failed check and exits 1.

Checks: the tar holds bundle.json (and blobs/<blake3 hex>); the checkpoint is a C2SP signed
note by the Authority key under origin weft/<16 hex of its keyid>/<group> (aics-tlog, another
C2SP implementation nobody at weft wrote); each Event's canonical bytes, rebuilt field by field
with the payload's bytes exactly as they stand in bundle.json, hash (BLAKE3) to its `hash` and
are the leaf its inclusion proof proves in the checkpoint's tree (aics-tlog); every manifest
and Evidence envelope is a DSSE envelope signed (Ed25519 over PAE) by the key its keyid names;
every blob hashes to its name.
"""

import base64
import json
import sys
import tarfile

import blake3
from aics_tlog import parse_note, verify_checkpoint, verify_leaf_inclusion, vkey_from_ed25519
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey


class Obj(dict):
    """A JSON object that remembers each member's raw text."""

    raw: dict


def parse(text):
    """A small JSON parser that keeps every object member's exact text (the payloads)."""
    ws = " \t\r\n"

    def skip(i):
        while i < len(text) and text[i] in ws:
            i += 1
        return i

    def value(i):
        i = skip(i)
        c = text[i]
        if c == "{":
            obj = Obj()
            obj.raw = {}
            i = skip(i + 1)
            if text[i] == "}":
                return obj, i + 1
            while True:
                key, i = string(skip(i))
                i = skip(i)
                assert text[i] == ":"
                start = skip(i + 1)
                val, i = value(start)
                obj[key] = val
                obj.raw[key] = text[start:i]
                i = skip(i)
                if text[i] == ",":
                    i += 1
                    continue
                assert text[i] == "}"
                return obj, i + 1
        if c == "[":
            items = []
            i = skip(i + 1)
            if text[i] == "]":
                return items, i + 1
            while True:
                val, i = value(i)
                items.append(val)
                i = skip(i)
                if text[i] == ",":
                    i += 1
                    continue
                assert text[i] == "]"
                return items, i + 1
        if c == '"':
            return string(i)
        end = i
        while end < len(text) and text[end] not in ",}] \t\r\n":
            end += 1
        return json.loads(text[i:end]), end

    def string(i):
        assert text[i] == '"'
        j = i + 1
        while text[j] != '"':
            j += 2 if text[j] == "\\" else 1
        return json.loads(text[i:j + 1]), j + 1

    val, end = value(0)
    assert skip(end) == len(text)
    return val


def s(x):
    """A JSON string as the README writes it (JSON.stringify's escaping)."""
    return json.dumps(x, ensure_ascii=False)


def canonical(event):
    causation = "null" if event["causationCommandId"] is None else s(event["causationCommandId"])
    return (
        "{"
        f'"eventId":{s(event["eventId"])},"groupId":{s(event["groupId"])},'
        f'"sequence":{event["sequence"]},"type":{s(event["type"])},'
        f'"causationCommandId":{causation},"payload":{event.raw["payload"]},'
        f'"appendedAt":{s(event["appendedAt"])},"prevHash":{s(event["prevHash"])}'
        "}"
    ).encode("utf-8")


def pae(payload_type, payload):
    t = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(payload), payload)


def main():
    failures = []
    path, authority_b64 = sys.argv[1], sys.argv[2]
    authority = base64.b64decode(authority_b64)
    blobs = {}
    bundle_text = None
    with tarfile.open(path) as tar:
        for member in tar.getmembers():
            data = tar.extractfile(member).read()
            if member.name == "bundle.json":
                bundle_text = data.decode("utf-8")
            elif member.name.startswith("blobs/"):
                blobs[member.name[len("blobs/"):]] = data
            else:
                failures.append(f"{member.name}: not a bundle member")
    bundle = parse(bundle_text)
    keyid = blake3.blake3(authority).hexdigest()
    origin = f"weft/{keyid[:16]}/{bundle['groupId']}"
    result = verify_checkpoint(
        parse_note(bundle["checkpoint"].encode()), vkey_from_ed25519(origin, authority), expected_origin=origin
    )
    if not result.ok:
        print(f"FAIL checkpoint: {result.error}")
        sys.exit(1)
    size, root = result.size, result.root
    for proven in bundle["events"]:
        event, proof = proven["event"], proven["proof"]
        seq = event["sequence"]
        data = canonical(event)
        prev = bytes.fromhex(event["prevHash"].removeprefix("blake3:"))
        if "blake3:" + blake3.blake3(prev + data).hexdigest() != event["hash"]:
            failures.append(f"event {seq}: its canonical bytes do not hash to its hash")
        hashes = [base64.b64decode(h) for h in proof["hashes"]]
        if proof["treeSize"] != size or proof.get("leafIndex") != seq - 1:
            failures.append(f"event {seq}: its proof is not for leaf {seq - 1} of {size}")
        elif not verify_leaf_inclusion(data, seq - 1, size, hashes, root):
            failures.append(f"event {seq}: not in the checkpoint's tree")
    keys = {k["keyid"]: k for k in bundle["keys"]}
    for k in bundle["keys"]:
        if "ed25519:" + blake3.blake3(base64.b64decode(k["publicKey"])).hexdigest() != k["keyid"]:
            failures.append(f"key {k['keyid']}: not the key its id names")
    for kind, records, payload_type in [
        ("manifest", bundle["manifests"], "application/vnd.mwp.artifact-manifest.v1+json"),
        ("evidence", bundle["evidence"], "application/vnd.mwp.evidence.v1+json"),
    ]:
        for record in records:
            envelope = record["envelope"]
            payload = base64.b64decode(envelope["payload"])
            signature = envelope["signatures"][0]
            key = keys.get(signature["keyid"])
            ident = record.get("manifestId") or record.get("evidenceId")
            if key is None or envelope["payloadType"] != payload_type:
                failures.append(f"{kind} {ident}: no key, or another payload type")
                continue
            try:
                Ed25519PublicKey.from_public_bytes(base64.b64decode(key["publicKey"])).verify(
                    base64.b64decode(signature["sig"]), pae(payload_type, payload)
                )
            except Exception:
                failures.append(f"{kind} {ident}: the signature does not verify")
            if "blake3:" + blake3.blake3(payload).hexdigest() != ident:
                failures.append(f"{kind} {ident}: its id is not its payload's")
    for name, data in blobs.items():
        if blake3.blake3(data).hexdigest() != name:
            failures.append(f"blobs/{name}: its bytes do not hash to its name")
    for failure in failures:
        print(f"FAIL {failure}")
    if failures:
        sys.exit(1)
    print(
        f"ok events={len(bundle['events'])} manifests={len(bundle['manifests'])} "
        f"evidence={len(bundle['evidence'])} blobs={len(blobs)} tree={size}"
    )


if __name__ == "__main__":
    main()
