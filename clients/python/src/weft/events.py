"""Group Events and their hash chain (DESIGN §7), checked here rather than trusted.

``hash = BLAKE3(prevHash ‖ canonical bytes)``: the canonical bytes are a JSON object with the
fields ``eventId, groupId, sequence, type, causationCommandId, payload, appendedAt,
prevHash`` in that order, strings escaped as serde_json escapes them, and the payload's served
text embedded verbatim (never re-serialised). So an Event is parsed from its served text with
its members' exact text kept. A Mission-scoped reader gets ``withheld`` placeholders for
other Missions' Events: their own hash cannot be recomputed, but their links can.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import blake3

from .errors import ChainError

_ORDER = (
    "eventId",
    "groupId",
    "sequence",
    "type",
    "causationCommandId",
    "payload",
    "appendedAt",
    "prevHash",
)
_SHORT = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_DECODER = json.JSONDecoder()
ZERO_HASH = "blake3:" + "00" * 32


def _json_string(text: str) -> str:
    out = []
    for char in text:
        if char in _SHORT:
            out.append(_SHORT[char])
        elif ord(char) < 0x20:
            out.append("\\u%04x" % ord(char))
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def _skip(text: str, index: int, chars: str) -> int:
    while index < len(text) and text[index] in chars:
        index += 1
    return index


def raw_members(text: str, start: int = 0) -> tuple[dict[str, str], int]:
    """The members of the JSON object at ``text[start:]``: name → the exact text of its
    value; and the index just past the object."""
    index = _skip(text, start, " \t\r\n")
    if text[index : index + 1] != "{":
        raise ChainError("invalid_event", "an Event is not a JSON object")
    index += 1
    members: dict[str, str] = {}
    while True:
        index = _skip(text, index, " \t\r\n,")
        if text[index] == "}":
            return members, index + 1
        name, index = _DECODER.raw_decode(text, index)
        index = _skip(text, index, " \t\r\n:")
        _, end = _DECODER.raw_decode(text, index)
        members[str(name)] = text[index:end]
        index = end


def raw_array(text: str, start: int) -> Iterator[tuple[int, int]]:
    """The (start, end) spans of the elements of the JSON array at ``text[start:]``."""
    index = _skip(text, start, " \t\r\n")
    if text[index] != "[":
        raise ChainError("invalid_event", "not a JSON array")
    index += 1
    while True:
        index = _skip(text, index, " \t\r\n,")
        if text[index] == "]":
            return
        _, end = _DECODER.raw_decode(text, index)
        yield index, end
        index = end


@dataclass(frozen=True)
class Event:
    """One Event as served, with what its hash covers."""

    sequence: int
    type: str
    hash: str
    prev_hash: str
    event_id: str | None
    group_id: str | None
    causation_command_id: str | None
    appended_at: str | None
    payload: Any
    withheld: bool
    raw: str = field(repr=False)
    _payload_text: str = field(repr=False, default="null")

    @classmethod
    def parse(cls, text: str) -> Event:
        """An Event (or a withheld placeholder) from its served JSON text."""
        members, _ = raw_members(text)
        try:
            kind = json.loads(members["type"])
            withheld = kind == "withheld" and "payload" not in members
            payload_text = members.get("payload", "null")
            causation = members.get("causationCommandId")
            return cls(
                sequence=int(json.loads(members["sequence"])),
                type=str(kind),
                hash=str(json.loads(members["hash"])),
                prev_hash=str(json.loads(members["prevHash"])),
                event_id=None if withheld else str(json.loads(members["eventId"])),
                group_id=None if withheld else str(json.loads(members["groupId"])),
                causation_command_id=json.loads(causation) if causation else None,
                appended_at=None if withheld else str(json.loads(members["appendedAt"])),
                payload=None if withheld else json.loads(payload_text),
                withheld=withheld,
                raw=text,
                _payload_text=payload_text,
            )
        except (KeyError, ValueError, TypeError) as error:
            raise ChainError("invalid_event", f"an Event lacks {error}") from error

    def canonical_bytes(self) -> bytes:
        if self.withheld:
            raise ChainError("withheld", "a withheld placeholder has no canonical bytes")
        values: dict[str, str] = {
            "eventId": _json_string(self.event_id or ""),
            "groupId": _json_string(self.group_id or ""),
            "sequence": str(self.sequence),
            "type": _json_string(self.type),
            "causationCommandId": "null"
            if self.causation_command_id is None
            else _json_string(self.causation_command_id),
            "payload": self._payload_text,
            "appendedAt": _json_string(self.appended_at or ""),
            "prevHash": _json_string(self.prev_hash),
        }
        body = ",".join(_json_string(name) + ":" + values[name] for name in _ORDER)
        return ("{" + body + "}").encode("utf-8")

    def computed_hash(self) -> str | None:
        """The hash recomputed from the content; ``None`` for a withheld placeholder."""
        if self.withheld:
            return None
        prev = bytes.fromhex(self.prev_hash.removeprefix("blake3:"))
        return "blake3:" + blake3.blake3(prev + self.canonical_bytes()).hexdigest()


def parse_page(text: str) -> list[Event]:
    """The Events of a replay page ``{"events": [...]}``, each with its exact served text."""
    members, _ = raw_members(text)
    if "events" not in members:
        raise ChainError("invalid_event", "a replay page without events")
    array = members["events"]
    return [Event.parse(array[start:end]) for start, end in raw_array(array, 0)]


class ChainVerifier:
    """Checks Events in sequence order: each hash recomputed, each ``prevHash`` the previous
    Event's ``hash``, no sequence skipped. Start it after a known Event (``after`` and its
    ``hash``) or at the beginning of the log."""

    def __init__(self, after: int = 0, head: str | None = None) -> None:
        self.sequence = after
        self.head = head if head is not None else (ZERO_HASH if after == 0 else None)

    def check(self, event: Event) -> None:
        if event.sequence != self.sequence + 1:
            raise ChainError(
                "chain_gap", f"expected sequence {self.sequence + 1}, got {event.sequence}"
            )
        if self.head is not None and event.prev_hash != self.head:
            raise ChainError(
                "chain_fork",
                f"Event {event.sequence}'s prevHash is not Event {self.sequence}'s hash",
            )
        computed = event.computed_hash()
        if computed is not None and computed != event.hash:
            raise ChainError(
                "chain_hash", f"Event {event.sequence}'s content hashes to {computed}"
            )
        self.sequence = event.sequence
        self.head = event.hash


def sse_frames(lines: Iterator[str]) -> Iterator[tuple[str, str, str]]:
    """(id, event, data) of each frame of a ``text/event-stream`` (comments skipped)."""
    frame_id, kind = "", "message"
    data: list[str] = []
    for line in lines:
        if line == "":
            if data:
                yield frame_id, kind, "\n".join(data)
            frame_id, kind = "", "message"
            data = []
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "id":
            frame_id = value
        elif name == "event":
            kind = value
        elif name == "data":
            data.append(value)
