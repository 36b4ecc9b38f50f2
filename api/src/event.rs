//! Group Events and their hash chain (DESIGN §7).
//!
//! `hash = blake3(prevHash ‖ canonical event bytes)`, with `prevHash` of the first Event all
//! zeros. The canonical bytes are built field by field in a fixed order, with the payload
//! embedded verbatim as it is stored, so a verifier never has to re-serialise JSON (and can
//! never disagree with the server about key order or number formatting).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;

use crate::error::{ErrorCode, Rejection};

/// Hash of an Event in a Group's chain, printed `blake3:<hex>`.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct EventHash(pub [u8; 32]);

impl EventHash {
    /// The `prevHash` of sequence 1.
    pub const GENESIS: Self = Self([0u8; 32]);
}

impl fmt::Display for EventHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "blake3:{}", hex::encode(self.0))
    }
}
impl fmt::Debug for EventHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}
impl FromStr for EventHash {
    type Err = Rejection;
    fn from_str(text: &str) -> Result<Self, Rejection> {
        match crate::digest::Digest::parse(text)? {
            crate::digest::Digest::Blake3(id) => Ok(Self(id.0)),
            crate::digest::Digest::Sha256(_) => Err(Rejection::new(
                ErrorCode::InvalidDigest,
                "event hashes are blake3",
            )),
        }
    }
}
impl Serialize for EventHash {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}
impl<'de> Deserialize<'de> for EventHash {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

/// One Event of a Group log, as stored and as served.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    pub event_id: String,
    pub group_id: String,
    pub sequence: u64,
    #[serde(rename = "type")]
    pub kind: String,
    pub causation_command_id: Option<String>,
    pub payload: Box<RawValue>,
    /// RFC 3339 UTC with microseconds, kept as text so the hash input never changes.
    pub appended_at: String,
    pub prev_hash: EventHash,
    pub hash: EventHash,
}

/// The fields of an Event that its hash covers (everything but `hash`).
#[derive(Clone, Copy, Debug)]
pub struct Unhashed<'a> {
    pub event_id: &'a str,
    pub group_id: &'a str,
    pub sequence: u64,
    pub kind: &'a str,
    pub causation_command_id: Option<&'a str>,
    /// The payload JSON exactly as stored.
    pub payload_json: &'a str,
    pub appended_at: &'a str,
    pub prev_hash: &'a EventHash,
}

impl Unhashed<'_> {
    /// The canonical bytes: a JSON object with the fields in a fixed order, the payload
    /// embedded verbatim.
    pub fn canonical_bytes(&self) -> Vec<u8> {
        use std::io::Write as _;
        let causation = self.causation_command_id.map_or(4, str::len);
        let mut out = Vec::with_capacity(
            192 + self.event_id.len()
                + self.group_id.len()
                + self.kind.len()
                + causation
                + self.payload_json.len()
                + self.appended_at.len(),
        );
        // One buffer, no intermediate strings: appends compute this on the writer thread.
        out.extend_from_slice(b"{\"eventId\":");
        json_string(&mut out, self.event_id);
        out.extend_from_slice(b",\"groupId\":");
        json_string(&mut out, self.group_id);
        out.extend_from_slice(b",\"sequence\":");
        let _ = write!(out, "{}", self.sequence);
        out.extend_from_slice(b",\"type\":");
        json_string(&mut out, self.kind);
        out.extend_from_slice(b",\"causationCommandId\":");
        match self.causation_command_id {
            Some(id) => json_string(&mut out, id),
            None => out.extend_from_slice(b"null"),
        }
        out.extend_from_slice(b",\"payload\":");
        out.extend_from_slice(self.payload_json.as_bytes());
        out.extend_from_slice(b",\"appendedAt\":");
        json_string(&mut out, self.appended_at);
        out.extend_from_slice(b",\"prevHash\":\"blake3:");
        let mut hex = [0u8; 64];
        // 64 bytes hold 32 bytes' hex exactly, so this cannot fail.
        let _ = hex::encode_to_slice(self.prev_hash.0, &mut hex);
        out.extend_from_slice(&hex);
        out.extend_from_slice(b"\"}");
        out
    }

    /// `blake3(prevHash ‖ canonical bytes)`.
    pub fn hash(&self) -> EventHash {
        chain_hash(self.prev_hash, &self.canonical_bytes())
    }
}

/// `text` as a JSON string, escaped as `serde_json` escapes it (the README's rule).
fn json_string(out: &mut Vec<u8>, text: &str) {
    // Writing a &str into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut *out, text);
}

/// `blake3(prevHash ‖ canonical bytes)`.
pub fn chain_hash(prev_hash: &EventHash, canonical: &[u8]) -> EventHash {
    let mut hasher = blake3::Hasher::new();
    hasher.update(&prev_hash.0);
    hasher.update(canonical);
    EventHash(*hasher.finalize().as_bytes())
}

impl Event {
    /// This Event's canonical bytes (what the chain hashes, and the transparency log's leaf).
    pub fn canonical_bytes(&self) -> Vec<u8> {
        self.unhashed().canonical_bytes()
    }

    fn unhashed(&self) -> Unhashed<'_> {
        Unhashed {
            event_id: &self.event_id,
            group_id: &self.group_id,
            sequence: self.sequence,
            kind: &self.kind,
            causation_command_id: self.causation_command_id.as_deref(),
            payload_json: self.payload.get(),
            appended_at: &self.appended_at,
            prev_hash: &self.prev_hash,
        }
    }

    /// Recomputes this Event's hash from its fields and its `prev_hash`.
    pub fn computed_hash(&self) -> EventHash {
        self.unhashed().hash()
    }
}

/// The `type` of a withheld placeholder (DESIGN §11).
pub const WITHHELD: &str = "withheld";

/// An Event of another Mission as a Mission-scoped member receives it (CTX-5, DESIGN §11):
/// `{"sequence", "type": "withheld", "prevHash", "hash"}`, no payload. Its own hash cannot be
/// recomputed, but its links can: its `prevHash` is the previous Event's `hash`, and the next
/// Event's `prevHash` is its `hash`, so cursors and the chain still hold around it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Withheld {
    pub sequence: u64,
    #[serde(rename = "type", deserialize_with = "withheld_type")]
    pub kind: String,
    pub prev_hash: EventHash,
    pub hash: EventHash,
}

fn withheld_type<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    let kind = String::deserialize(deserializer)?;
    if kind == WITHHELD {
        Ok(kind)
    } else {
        Err(serde::de::Error::custom(
            "a placeholder's type is \"withheld\"",
        ))
    }
}

impl Withheld {
    /// The placeholder standing for `event`.
    pub fn of(event: &Event) -> Self {
        Self {
            sequence: event.sequence,
            kind: WITHHELD.to_owned(),
            prev_hash: event.prev_hash,
            hash: event.hash,
        }
    }
}

/// One entry of a replay or stream: a whole Event, or a withheld placeholder.
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum Delivered {
    Event(Event),
    Withheld(Withheld),
}

impl<'de> Deserialize<'de> for Delivered {
    /// By `type`: `withheld` is a placeholder, anything else an Event. (Not serde's
    /// `untagged`: it buffers, and an Event's raw payload cannot be read from a buffer.)
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Probe {
            #[serde(rename = "type")]
            kind: String,
        }
        let raw = Box::<RawValue>::deserialize(deserializer)?;
        let probe: Probe = serde_json::from_str(raw.get()).map_err(serde::de::Error::custom)?;
        if probe.kind == WITHHELD {
            serde_json::from_str(raw.get())
                .map(Self::Withheld)
                .map_err(serde::de::Error::custom)
        } else {
            serde_json::from_str(raw.get())
                .map(Self::Event)
                .map_err(serde::de::Error::custom)
        }
    }
}

impl Delivered {
    pub fn sequence(&self) -> u64 {
        match self {
            Self::Event(event) => event.sequence,
            Self::Withheld(withheld) => withheld.sequence,
        }
    }

    pub fn hash(&self) -> EventHash {
        match self {
            Self::Event(event) => event.hash,
            Self::Withheld(withheld) => withheld.hash,
        }
    }

    pub fn prev_hash(&self) -> EventHash {
        match self {
            Self::Event(event) => event.prev_hash,
            Self::Withheld(withheld) => withheld.prev_hash,
        }
    }

    /// The whole Event, unless withheld.
    pub fn event(&self) -> Option<&Event> {
        match self {
            Self::Event(event) => Some(event),
            Self::Withheld(_) => None,
        }
    }
}

impl From<Event> for Delivered {
    fn from(event: Event) -> Self {
        Self::Event(event)
    }
}

/// Something with a place in a Group's chain: an [`Event`], or a [`Delivered`] entry.
pub trait Linked {
    fn sequence(&self) -> u64;
    fn prev_hash(&self) -> EventHash;
    fn hash(&self) -> EventHash;
    /// The hash recomputed from the content; `None` for a withheld placeholder (only its
    /// links can be checked).
    fn content_hash(&self) -> Option<EventHash>;
}

impl Linked for Event {
    fn sequence(&self) -> u64 {
        self.sequence
    }
    fn prev_hash(&self) -> EventHash {
        self.prev_hash
    }
    fn hash(&self) -> EventHash {
        self.hash
    }
    fn content_hash(&self) -> Option<EventHash> {
        Some(self.computed_hash())
    }
}

impl Linked for Delivered {
    fn sequence(&self) -> u64 {
        Delivered::sequence(self)
    }
    fn prev_hash(&self) -> EventHash {
        Delivered::prev_hash(self)
    }
    fn hash(&self) -> EventHash {
        Delivered::hash(self)
    }
    fn content_hash(&self) -> Option<EventHash> {
        self.event().map(Event::computed_hash)
    }
}

/// Checks that `events` continue a chain whose last Event had `sequence` and `hash`
/// (`0` and [`EventHash::GENESIS`] for a chain from the start). Returns the new head.
/// A withheld placeholder is checked by its links only.
pub fn verify_chain<'a, E: Linked + 'a>(
    mut sequence: u64,
    mut head: EventHash,
    events: impl IntoIterator<Item = &'a E>,
) -> Result<(u64, EventHash), String> {
    for event in events {
        if event.sequence() != sequence + 1 {
            return Err(format!(
                "expected sequence {}, found {}",
                sequence + 1,
                event.sequence()
            ));
        }
        if event.prev_hash() != head {
            return Err(format!(
                "sequence {}: prevHash does not match",
                event.sequence()
            ));
        }
        if event
            .content_hash()
            .is_some_and(|computed| computed != event.hash())
        {
            return Err(format!(
                "sequence {}: hash does not match its content",
                event.sequence()
            ));
        }
        sequence = event.sequence();
        head = event.hash();
    }
    Ok((sequence, head))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The canonical bytes as first written, with a `format!` over escaped strings: the
    /// one-buffer writer must give the same bytes for any text.
    fn formatted(u: &Unhashed<'_>) -> Vec<u8> {
        let text = |s: &str| serde_json::to_string(s).unwrap_or_default();
        let causation = u
            .causation_command_id
            .map_or_else(|| "null".to_owned(), text);
        format!(
            "{{\"eventId\":{},\"groupId\":{},\"sequence\":{},\"type\":{},\"causationCommandId\":{},\"payload\":{},\"appendedAt\":{},\"prevHash\":{}}}",
            text(u.event_id),
            text(u.group_id),
            u.sequence,
            text(u.kind),
            causation,
            u.payload_json,
            text(u.appended_at),
            text(&u.prev_hash.to_string()),
        )
        .into_bytes()
    }

    proptest::proptest! {
        #[test]
        fn canonical_bytes_are_the_formatted_ones(
            event_id in "\\PC{0,40}|[\\x00-\\x1f\"\\\\\u{7f}\u{2028}]{0,8}",
            group_id in "\\PC{0,20}",
            sequence in proptest::num::u64::ANY,
            kind in "\\PC{0,20}",
            causation in proptest::option::of("\\PC{0,30}|[\\x00-\\x1f\"\\\\]{0,4}"),
            appended_at in "\\PC{0,30}",
            prev in proptest::array::uniform32(proptest::num::u8::ANY),
        ) {
            let prev_hash = EventHash(prev);
            let u = Unhashed {
                event_id: &event_id,
                group_id: &group_id,
                sequence,
                kind: &kind,
                causation_command_id: causation.as_deref(),
                payload_json: r#"{"n":100.0,"s":"\u00e9"}"#,
                appended_at: &appended_at,
                prev_hash: &prev_hash,
            };
            proptest::prop_assert_eq!(u.canonical_bytes(), formatted(&u));
        }
    }
}
