"""Checks a cosigned weft checkpoint with aics-tlog (issue #45): the log's signature under its
origin and a cosignature/v1 line from the given witness, both verified by a C2SP
implementation nobody at weft wrote.

Usage: tlog_witnessed.py NOTE_FILE LOG_VKEY WITNESS_VKEY; prints "ok <size> <witnesses>" or
exits 1.
"""

import sys

from aics_tlog import parse_note, parse_vkey, verify_checkpoint


def main() -> None:
    note = parse_note(open(sys.argv[1], "rb").read())
    log_key = parse_vkey(sys.argv[2])
    witness = parse_vkey(sys.argv[3])
    result = verify_checkpoint(note, log_key, [witness], quorum=1, expected_origin=log_key.name)
    if not (result.ok and result.log_ok and result.cosignature_count >= 1):
        print(f"FAIL: {result.error}", file=sys.stderr)
        sys.exit(1)
    print(f"ok {result.size} {','.join(result.witnesses)}")


if __name__ == "__main__":
    main()
