"""Recomputes Event hashes from the README's "How an Event is hashed" rules alone.

argv[1]: fixtures/event_hash.json. argv[2]: fixtures/vectors/blake3/test_vectors.json.
Written from the prose, not from weft's Rust: the canonical bytes are rebuilt field by field
(fixed order, JSON string escaping as specified, the payload's served bytes verbatim), then
hash = BLAKE3(prevHash's 32 bytes || canonical bytes). Standard library only: BLAKE3 is
implemented below and checked against the official vectors first.
"""
import json
import sys

# --- BLAKE3 (32-byte output), after the BLAKE3 paper's reference description ---------------
IV = [0x6A09E667, 0xBB67AE85, 0x3C6EF372, 0xA54FF53A, 0x510E527F, 0x9B05688C, 0x1F83D9AB, 0x5BE0CD19]
PERMUTATION = [2, 6, 3, 10, 7, 0, 4, 13, 1, 11, 12, 5, 9, 14, 15, 8]
CHUNK_START, CHUNK_END, PARENT, ROOT = 1, 2, 4, 8
MASK = 0xFFFFFFFF


def rotr(word, bits):
    return ((word >> bits) | (word << (32 - bits))) & MASK


def g(state, a, b, c, d, mx, my):
    state[a] = (state[a] + state[b] + mx) & MASK
    state[d] = rotr(state[d] ^ state[a], 16)
    state[c] = (state[c] + state[d]) & MASK
    state[b] = rotr(state[b] ^ state[c], 12)
    state[a] = (state[a] + state[b] + my) & MASK
    state[d] = rotr(state[d] ^ state[a], 8)
    state[c] = (state[c] + state[d]) & MASK
    state[b] = rotr(state[b] ^ state[c], 7)


def compress(cv, block, counter, block_len, flags):
    """The first 8 words of the compression function's output (a chaining value)."""
    m = [int.from_bytes(block[i:i + 4], "little") for i in range(0, 64, 4)]
    state = cv[:] + IV[:4] + [counter & MASK, counter >> 32, block_len, flags]
    for round_idx in range(7):
        g(state, 0, 4, 8, 12, m[0], m[1])
        g(state, 1, 5, 9, 13, m[2], m[3])
        g(state, 2, 6, 10, 14, m[4], m[5])
        g(state, 3, 7, 11, 15, m[6], m[7])
        g(state, 0, 5, 10, 15, m[8], m[9])
        g(state, 1, 6, 11, 12, m[10], m[11])
        g(state, 2, 7, 8, 13, m[12], m[13])
        g(state, 3, 4, 9, 14, m[14], m[15])
        if round_idx < 6:
            m = [m[i] for i in PERMUTATION]
    return [state[i] ^ state[i + 8] for i in range(8)]


def chunk_cv(data, chunk_counter, is_root):
    cv = IV[:]
    blocks = [data[i:i + 64] for i in range(0, len(data), 64)] or [b""]
    for block_idx, block in enumerate(blocks):
        last = block_idx == len(blocks) - 1
        flags = (CHUNK_START if block_idx == 0 else 0) | (CHUNK_END if last else 0)
        flags |= ROOT if last and is_root else 0
        cv = compress(cv, block.ljust(64, b"\0"), 0 if is_root else chunk_counter, len(block), flags)
    return cv


def subtree_cv(data, chunk_counter, is_root):
    if len(data) <= 1024:
        return chunk_cv(data, chunk_counter, is_root)
    n_chunks = (len(data) + 1023) // 1024
    left_chunks = 1 << ((n_chunks - 1).bit_length() - 1)  # largest power of 2 below n_chunks
    left = subtree_cv(data[:left_chunks * 1024], chunk_counter, False)
    right = subtree_cv(data[left_chunks * 1024:], chunk_counter + left_chunks, False)
    block = b"".join(word.to_bytes(4, "little") for word in left + right)
    return compress(IV[:], block, 0, 64, PARENT | (ROOT if is_root else 0))


def blake3(data):
    return b"".join(word.to_bytes(4, "little") for word in subtree_cv(data, 0, True))


def check_blake3(vectors_path):
    with open(vectors_path) as vectors_file:
        vectors = json.load(vectors_file)
    n_checked = 0
    for case in vectors["cases"]:
        if case["input_len"] > 9 * 1024:
            continue  # long enough to cover several tree levels; the rest only costs time
        data = bytes(i % 251 for i in range(case["input_len"]))
        assert blake3(data).hex() == case["hash"][:64], case["input_len"]
        n_checked += 1
    assert n_checked >= 15, n_checked


# --- The canonical bytes, as the README specifies them --------------------------------------
FIELDS = ["eventId", "groupId", "sequence", "type", "causationCommandId", "payload", "appendedAt", "prevHash"]
SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def json_string(text):
    """A quote, each character as itself except the seven short escapes and other controls
    below U+0020 as \\u00xx (lowercase hex), a quote; UTF-8."""
    out = []
    for char in text:
        if char in SHORT_ESCAPES:
            out.append(SHORT_ESCAPES[char])
        elif ord(char) < 0x20:
            out.append("\\u%04x" % ord(char))
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def raw_members(served):
    """The top-level members of a served Event: name -> the exact text of its value."""
    decoder = json.JSONDecoder()
    members = {}
    idx = served.index("{") + 1
    while True:
        while served[idx] in " \t\r\n,":
            idx += 1
        if served[idx] == "}":
            return members
        name, idx = decoder.raw_decode(served, idx)
        while served[idx] in " \t\r\n:":
            idx += 1
        _, end = decoder.raw_decode(served, idx)
        members[name] = served[idx:end]
        idx = end


def canonical_bytes(served):
    members = raw_members(served)
    values = {name: json.loads(members[name]) for name in FIELDS}
    parts = []
    for name in FIELDS:
        value = values[name]
        if name == "payload":
            encoded = members[name]  # verbatim: never re-serialised
        elif name == "sequence":
            assert isinstance(value, int) and value >= 1, value
            encoded = str(value)
        elif value is None:
            assert name == "causationCommandId", name
            encoded = "null"
        else:
            encoded = json_string(value)
        parts.append(json_string(name) + ":" + encoded)
    return ("{" + ",".join(parts) + "}").encode("utf-8"), values, json.loads(members["hash"])


def hash_bytes(text):
    assert text.startswith("blake3:") and len(text) == 7 + 64, text
    return bytes.fromhex(text[7:])


def main():
    check_blake3(sys.argv[2])
    with open(sys.argv[1], encoding="utf-8") as fixture_file:
        fixture = json.load(fixture_file)
    previous = None
    for case in fixture["events"]:
        canonical, values, served_hash = canonical_bytes(case["served"])
        assert canonical.hex() == case["canonicalHex"], (case["name"], canonical)
        prev_hash = hash_bytes(values["prevHash"])
        if values["sequence"] == 1:
            assert prev_hash == bytes(32), "sequence 1 chains from 32 zero bytes"
        if previous is not None and previous[0] + 1 == values["sequence"]:
            assert values["prevHash"] == previous[1], "prevHash is the previous Event's hash"
        computed = "blake3:" + blake3(prev_hash + canonical).hex()
        assert computed == case["hash"] == served_hash, (case["name"], computed)
        previous = (values["sequence"], computed)
    print("ok: %d Events recomputed from the README's rules" % len(fixture["events"]))


if __name__ == "__main__":
    main()
