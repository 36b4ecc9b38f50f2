//! Content digests: an Artifact is named by `blake3:<hex>` and also known by `sha256:<hex>`.
//!
//! Parsing is strict on purpose (DESIGN §3): lowercase hex only, exactly 64 digits, a known
//! algorithm prefix, no whitespace. Two spellings of one digest would be two names for one
//! Artifact, which content addressing must never allow.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::Digest as _;

use crate::error::{ErrorCode, Rejection};

/// The identity of an Artifact: BLAKE3 of its bytes.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ArtifactId(pub [u8; 32]);

/// SHA-256 of an Artifact's bytes, kept beside the identity for OCI/in-toto interop.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Sha256Digest(pub [u8; 32]);

/// Either spelling, as accepted in a URL path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Digest {
    Blake3(ArtifactId),
    Sha256(Sha256Digest),
}

fn parse_hex32(what: &str, hex_digits: &str) -> Result<[u8; 32], Rejection> {
    let well_formed = hex_digits.len() == 64
        && hex_digits
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if !well_formed {
        return Err(Rejection::new(
            ErrorCode::InvalidDigest,
            format!("{what} must be followed by exactly 64 lowercase hex digits"),
        ));
    }
    let mut out = [0u8; 32];
    hex::decode_to_slice(hex_digits, &mut out)
        .map_err(|_| Rejection::new(ErrorCode::InvalidDigest, "digest is not hex"))?;
    Ok(out)
}

impl Digest {
    /// Whether this digest, in whichever form it is, names the bytes of `blake3` / `sha256`.
    pub fn names(&self, blake3: &ArtifactId, sha256: &Sha256Digest) -> bool {
        match self {
            Self::Blake3(id) => id == blake3,
            Self::Sha256(sha) => sha == sha256,
        }
    }

    pub fn parse(text: &str) -> Result<Self, Rejection> {
        if let Some(rest) = text.strip_prefix("blake3:") {
            Ok(Self::Blake3(ArtifactId(parse_hex32("blake3:", rest)?)))
        } else if let Some(rest) = text.strip_prefix("sha256:") {
            Ok(Self::Sha256(Sha256Digest(parse_hex32("sha256:", rest)?)))
        } else {
            Err(Rejection::new(
                ErrorCode::InvalidDigest,
                "a digest is `blake3:<64 hex>` or `sha256:<64 hex>`",
            ))
        }
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Blake3(id) => id.fmt(f),
            Self::Sha256(digest) => digest.fmt(f),
        }
    }
}

impl ArtifactId {
    pub fn parse(text: &str) -> Result<Self, Rejection> {
        match Digest::parse(text)? {
            Digest::Blake3(id) => Ok(id),
            Digest::Sha256(_) => Err(Rejection::new(
                ErrorCode::InvalidDigest,
                "an artifact id is a blake3 digest",
            )),
        }
    }

    pub fn hex(&self) -> String {
        hex::encode(self.0)
    }

    /// BLAKE3 of `bytes`; for small in-memory values such as manifest payloads.
    pub fn of(bytes: &[u8]) -> Self {
        Self(*blake3::hash(bytes).as_bytes())
    }
}

impl Sha256Digest {
    pub fn parse(text: &str) -> Result<Self, Rejection> {
        match Digest::parse(text)? {
            Digest::Sha256(digest) => Ok(digest),
            Digest::Blake3(_) => Err(Rejection::new(
                ErrorCode::InvalidDigest,
                "expected a sha256 digest",
            )),
        }
    }

    pub fn hex(&self) -> String {
        hex::encode(self.0)
    }
}

impl fmt::Display for ArtifactId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "blake3:{}", self.hex())
    }
}
impl fmt::Debug for ArtifactId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}
impl fmt::Display for Sha256Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.hex())
    }
}
impl fmt::Debug for Sha256Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl FromStr for ArtifactId {
    type Err = Rejection;
    fn from_str(text: &str) -> Result<Self, Rejection> {
        Self::parse(text)
    }
}
impl FromStr for Sha256Digest {
    type Err = Rejection;
    fn from_str(text: &str) -> Result<Self, Rejection> {
        Self::parse(text)
    }
}
impl FromStr for Digest {
    type Err = Rejection;
    fn from_str(text: &str) -> Result<Self, Rejection> {
        Self::parse(text)
    }
}

macro_rules! serde_as_text {
    ($ty:ty) => {
        impl Serialize for $ty {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_str(self)
            }
        }
        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                let text = String::deserialize(deserializer)?;
                text.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}
serde_as_text!(ArtifactId);
serde_as_text!(Sha256Digest);
serde_as_text!(Digest);

/// Both digests and the size of one byte sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Digests {
    pub blake3: ArtifactId,
    pub sha256: Sha256Digest,
    pub size: u64,
}

/// Computes [`Digests`] on one thread. The server uses a two-thread pipeline for large
/// bodies; this is for the client, fsck and tests.
#[derive(Clone, Debug, Default)]
pub struct Hasher {
    blake3: blake3::Hasher,
    sha256: sha2::Sha256,
    size: u64,
}

impl Hasher {
    pub fn update(&mut self, bytes: &[u8]) {
        self.blake3.update(bytes);
        self.sha256.update(bytes);
        self.size += bytes.len() as u64;
    }

    pub fn finish(self) -> Digests {
        Digests {
            blake3: ArtifactId(*self.blake3.finalize().as_bytes()),
            sha256: Sha256Digest(self.sha256.finalize().into()),
            size: self.size,
        }
    }

    pub fn digest(bytes: &[u8]) -> Digests {
        let mut hasher = Self::default();
        hasher.update(bytes);
        hasher.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ZERO_HEX: &str = "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262";

    fn check(input: &str, accepted: bool) {
        assert_eq!(Digest::parse(input).is_ok(), accepted, "{input:?}");
    }

    #[test]
    fn parses_both_algorithms_and_round_trips() {
        let text = format!("blake3:{ZERO_HEX}");
        let digest = Digest::parse(&text).expect("valid");
        assert_eq!(digest.to_string(), text);
        assert_eq!(Hasher::digest(b"").blake3.to_string(), text);
        let sha = format!(
            "sha256:{}",
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(Hasher::digest(b"").sha256.to_string(), sha);
        check(&sha, true);
    }

    #[test]
    fn refuses_every_other_spelling() {
        check(&format!("blake3:{}", ZERO_HEX.to_uppercase()), false);
        check(&format!("blake3:{}", &ZERO_HEX[..63]), false);
        check(&format!("blake3:{ZERO_HEX}0"), false);
        check(&format!("blake3:{}g", &ZERO_HEX[..63]), false);
        check(&format!("md5:{ZERO_HEX}"), false);
        check(ZERO_HEX, false);
        check(&format!(" blake3:{ZERO_HEX}"), false);
        check(&format!("blake3:{ZERO_HEX} "), false);
        check(&format!("blake3: {}", &ZERO_HEX[..63]), false);
        check(&format!("BLAKE3:{ZERO_HEX}"), false);
        check("", false);
    }
}
