//! Idempotent answers that hold a bearer secret, sealed to the caller (PD-20: only hashes of
//! secrets at rest). A capability token's issue and a session's opening answer with a fresh
//! secret; with an `Idempotency-Key` that answer must be kept for a retry, but never in the
//! clear: a copy of the index would hand out live bearer secrets, and another session of the
//! same Agent (the key's scope) would be given a secret issued to this one.
//!
//! So such an answer is stored as [`MARK`], a random 24-byte nonce and the XChaCha20-Poly1305
//! ciphertext of the answer, under a key derived from the bearer token of the request that
//! made it. The server keeps only that token's hash, so only a retry carrying the same token
//! can open it; the associated data binds it to its scope, key and request hash, so it opens
//! in no other row. JSON answers never begin with [`MARK`], so the two never mix.

use chacha20poly1305::aead::{Aead as _, KeyInit as _, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};

/// The first byte of a sealed answer; a JSON answer begins with `{` or `[`.
pub(crate) const MARK: u8 = 0;

const NONCE: usize = 24;

/// What seals and opens the answers of one request: its caller's bearer and its row.
#[derive(Clone)]
pub(crate) struct Sealer {
    key: [u8; 32],
    row: Vec<u8>,
}

impl std::fmt::Debug for Sealer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Sealer(..)")
    }
}

impl Sealer {
    /// The sealer of the request with `bearer` answered under (`scope`, `key`, `request_hash`).
    pub(crate) fn new(bearer: &str, scope: &str, key: &str, request_hash: &[u8; 32]) -> Self {
        let key_bytes = blake3::derive_key(
            "weft 2026-12-07 an idempotent answer sealed to its caller's bearer token",
            bearer.as_bytes(),
        );
        let mut row = Vec::with_capacity(scope.len() + key.len() + 34);
        for part in [scope.as_bytes(), key.as_bytes()] {
            row.extend_from_slice(&(part.len() as u64).to_be_bytes());
            row.extend_from_slice(part);
        }
        row.extend_from_slice(request_hash);
        Self {
            key: key_bytes,
            row,
        }
    }

    /// `answer` sealed: [`MARK`], the nonce, the ciphertext.
    pub(crate) fn seal(&self, answer: &[u8]) -> Option<Vec<u8>> {
        let nonce: [u8; NONCE] = rand::random();
        let cipher = XChaCha20Poly1305::new(&self.key.into());
        let payload = Payload {
            msg: answer,
            aad: &self.row,
        };
        let sealed = cipher.encrypt(&XNonce::from(nonce), payload).ok()?;
        let mut stored = Vec::with_capacity(1 + NONCE + sealed.len());
        stored.push(MARK);
        stored.extend_from_slice(&nonce);
        stored.extend_from_slice(&sealed);
        Some(stored)
    }

    /// The answer `stored` seals, when this caller's bearer sealed it for this row.
    pub(crate) fn open(&self, stored: &[u8]) -> Option<Vec<u8>> {
        let rest = stored.strip_prefix(&[MARK])?;
        if rest.len() < NONCE {
            return None;
        }
        let (nonce, sealed) = rest.split_at(NONCE);
        let nonce: [u8; NONCE] = nonce.try_into().ok()?;
        let cipher = XChaCha20Poly1305::new(&self.key.into());
        let payload = Payload {
            msg: sealed,
            aad: &self.row,
        };
        cipher.decrypt(&XNonce::from(nonce), payload).ok()
    }
}

/// Whether `stored` is a sealed answer.
pub(crate) fn is_sealed(stored: &[u8]) -> bool {
    stored.first() == Some(&MARK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_same_bearer_opens_an_answer_and_only_in_its_row() {
        let hash = [7; 32];
        let sealer = Sealer::new("session-a", "agent:w1", "k-1", &hash);
        let stored = sealer.seal(br#"{"token":"secret"}"#).expect("sealed");
        assert!(is_sealed(&stored));
        assert!(
            !stored.windows(6).any(|w| w == b"secret"),
            "never in the clear"
        );
        assert_eq!(
            sealer.open(&stored).as_deref(),
            Some(&br#"{"token":"secret"}"#[..])
        );
        for other in [
            Sealer::new("session-b", "agent:w1", "k-1", &hash),
            Sealer::new("session-a", "agent:w2", "k-1", &hash),
            Sealer::new("session-a", "agent:w1", "k-2", &hash),
            Sealer::new("session-a", "agent:w1", "k-1", &[8; 32]),
            Sealer::new("session-a", "agent:w1k", "-1", &hash),
        ] {
            assert_eq!(other.open(&stored), None, "another bearer or row");
        }
        let mut flipped = stored.clone();
        *flipped.last_mut().expect("bytes") ^= 1;
        assert_eq!(sealer.open(&flipped), None, "tampered");
        assert_eq!(sealer.open(&stored[..10]), None, "truncated");
        assert!(!is_sealed(b"{}"));
    }
}
