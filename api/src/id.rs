//! Opaque identifiers of Groups, Missions, WorkItems, Agents, Leases and Events.
//!
//! DESIGN §3: 1–128 characters of `[A-Za-z0-9._:-]`. Nothing is normalised: an id that is
//! not already in that alphabet is refused, so NFC/NFD twins, zero-width and bidi characters,
//! path separators and NUL can never reach a file name, a SQL row or a log line.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};

use crate::error::{ErrorCode, Rejection};

/// Longest id accepted anywhere.
pub const MAX_ID_LEN: usize = 128;

/// A validated identifier. The only way to build one is [`Id::parse`] (or deserialising,
/// which calls it).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct Id(String);

impl Id {
    /// Checks `text` against the id alphabet; `what` names the field in the error.
    pub fn parse(what: &str, text: &str) -> Result<Self, Rejection> {
        let problem = if text.is_empty() {
            Some("is empty")
        } else if text.len() > MAX_ID_LEN {
            Some("is longer than 128 characters")
        } else if !text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
        {
            Some("may only contain A-Z a-z 0-9 . _ : -")
        } else if text.bytes().all(|b| b == b'.') {
            // "." and ".." are path segments, never names.
            Some("may not consist of dots only")
        } else {
            None
        };
        match problem {
            Some(problem) => Err(Rejection::new(
                ErrorCode::InvalidId,
                format!("{what} {problem}"),
            )),
            None => Ok(Self(text.to_owned())),
        }
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// An id reads as its text wherever text is expected (`&id` as a `&str`).
impl std::ops::Deref for Id {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl PartialEq<str> for Id {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for Id {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl PartialEq<String> for Id {
    fn eq(&self, other: &String) -> bool {
        self.0 == *other
    }
}

impl fmt::Display for Id {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Id {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Id::parse("id", &text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(input: &str, accepted: bool) {
        assert_eq!(Id::parse("id", input).is_ok(), accepted, "{input:?}");
    }

    #[test]
    fn accepts_the_documented_alphabet() {
        check("agent-7", true);
        check("0192f0c4-1b2a-7c3d-8e4f-001122334455", true);
        check("urn:mwp:group.a_b", true);
        check(&"a".repeat(128), true);
    }

    #[test]
    fn refuses_path_tricks_and_unicode_twins() {
        for bad in [
            "",
            "..",
            ".",
            "../etc",
            "%2e%2e",
            "a/b",
            "a\\b",
            "a\0b",
            "a b",
            " a",
            "caf\u{e9}",
            "cafe\u{301}",
            "a\u{200b}b",
            "a\u{202e}b",
            "\u{ff41}",
        ] {
            check(bad, false);
        }
        check(&"a".repeat(129), false);
        check(&"a".repeat(10 * 1024), false);
    }
}
