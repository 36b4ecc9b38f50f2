//! DSSE v1 envelopes signed with Ed25519 (DESIGN §4).
//!
//! The signature covers PAE(payloadType, payload), so a payload signed as one type can never be
//! replayed as another. The signed bytes are the stored bytes: no canonicalisation step exists
//! that could disagree between signer and verifier. Verification uses `verify_strict`, which
//! refuses non-canonical S and small-order keys.

use std::fmt;
use std::str::FromStr;

use base64::Engine as _;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use ed25519_dalek::{Signature, Signer as _, SigningKey, VerifyingKey};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::error::{ErrorCode, Rejection};

/// Standard base64 with padding, refusing non-canonical encodings (DESIGN §8.1).
pub const BASE64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_encode_padding(true)
        .with_decode_padding_mode(DecodePaddingMode::RequireCanonical),
);

pub const MANIFEST_TYPE: &str = "application/vnd.mwp.artifact-manifest.v1+json";
pub const SESSION_TYPE: &str = "application/vnd.mwp.session.v1+json";
pub const SNAPSHOT_TYPE: &str = "application/vnd.mwp.snapshot.v1+json";
pub const CHECKPOINT_TYPE: &str = "application/vnd.mwp.checkpoint.v1+json";

/// Fingerprint of an Ed25519 public key: `ed25519:<hex of blake3(key)>`.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KeyId(String);

impl KeyId {
    pub fn of(key: &VerifyingKey) -> Self {
        Self(format!(
            "ed25519:{}",
            hex::encode(blake3::hash(key.as_bytes()).as_bytes())
        ))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for KeyId {
    type Err = Rejection;
    fn from_str(text: &str) -> Result<Self, Rejection> {
        let ok = text.strip_prefix("ed25519:").is_some_and(|hex_digits| {
            hex_digits.len() == 64
                && hex_digits
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        });
        if ok {
            Ok(Self(text.to_owned()))
        } else {
            Err(Rejection::new(
                ErrorCode::UnknownKey,
                "keyid must be `ed25519:<64 lowercase hex>`",
            ))
        }
    }
}

impl fmt::Display for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
impl fmt::Debug for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
impl Serialize for KeyId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}
impl<'de> Deserialize<'de> for KeyId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

/// Parses a base64 (standard, padded) Ed25519 public key.
pub fn parse_public_key(text: &str) -> Result<VerifyingKey, Rejection> {
    let bad = || {
        Rejection::new(
            ErrorCode::BadRequest,
            "publicKey must be base64 of a 32-byte Ed25519 key",
        )
    };
    let bytes = BASE64.decode(text).map_err(|_| bad())?;
    let bytes: [u8; 32] = bytes.try_into().map_err(|_| bad())?;
    let key = VerifyingKey::from_bytes(&bytes).map_err(|_| bad())?;
    if key.is_weak() {
        return Err(Rejection::new(
            ErrorCode::BadRequest,
            "publicKey is a small-order point",
        ));
    }
    Ok(key)
}

/// One signature of an envelope. Unknown fields are ignored, as DSSE readers do (issue #40):
/// the signature covers only the payload and its type, so nothing else can change a verdict.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvelopeSignature {
    pub keyid: String,
    pub sig: String,
}

/// A DSSE v1 envelope as it travels and as it is stored. Unknown top-level fields are ignored
/// and not stored, as DSSE readers do (issue #40): the signature covers only the payload and
/// its type.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Envelope {
    pub payload_type: String,
    pub payload: String,
    pub signatures: Vec<EnvelopeSignature>,
}

/// Pre-Authentication Encoding: `"DSSEv1" SP len(type) SP type SP len(payload) SP payload`.
pub fn pae(payload_type: &str, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + payload_type.len() + 32);
    out.extend_from_slice(b"DSSEv1 ");
    out.extend_from_slice(payload_type.len().to_string().as_bytes());
    out.push(b' ');
    out.extend_from_slice(payload_type.as_bytes());
    out.push(b' ');
    out.extend_from_slice(payload.len().to_string().as_bytes());
    out.push(b' ');
    out.extend_from_slice(payload);
    out
}

/// A value whose DSSE signature has been checked, with the key that signed it.
/// The only way to get one is [`Envelope::verify`].
#[derive(Clone, Debug)]
pub struct Verified<T> {
    value: T,
    signer: KeyId,
}

impl<T> Verified<T> {
    pub fn value(&self) -> &T {
        &self.value
    }
    pub fn signer(&self) -> &KeyId {
        &self.signer
    }
    pub fn into_inner(self) -> T {
        self.value
    }
    /// Keeps the proof while transforming the value (e.g. parsing the verified bytes).
    pub fn try_map<U, E>(self, f: impl FnOnce(T) -> Result<U, E>) -> Result<Verified<U>, E> {
        Ok(Verified {
            value: f(self.value)?,
            signer: self.signer,
        })
    }
}

impl Envelope {
    /// Signs `payload` as `payload_type` with `key`.
    pub fn sign(key: &SigningKey, payload_type: &str, payload: &[u8]) -> Self {
        let signature = key.sign(&pae(payload_type, payload));
        Self {
            payload_type: payload_type.to_owned(),
            payload: BASE64.encode(payload),
            signatures: vec![EnvelopeSignature {
                keyid: KeyId::of(&key.verifying_key()).to_string(),
                sig: BASE64.encode(signature.to_bytes()),
            }],
        }
    }

    /// The `keyid` of the single signature, without checking anything else.
    pub fn signer_keyid(&self) -> Result<KeyId, Rejection> {
        match self.signatures.as_slice() {
            [only] => only.keyid.parse(),
            _ => Err(Rejection::new(
                ErrorCode::BadSignature,
                "an envelope carries exactly one signature",
            )),
        }
    }

    /// Checks the payload type, decodes the payload and verifies the single signature with
    /// `verify_strict` against `key`, which the caller resolved from [`Envelope::signer_keyid`].
    pub fn verify(
        &self,
        expected_type: &str,
        key: &VerifyingKey,
    ) -> Result<Verified<Vec<u8>>, Rejection> {
        if self.payload_type != expected_type {
            return Err(Rejection::new(
                ErrorCode::WrongPayloadType,
                format!("payloadType must be {expected_type}"),
            ));
        }
        let keyid = self.signer_keyid()?;
        if keyid != KeyId::of(key) {
            return Err(Rejection::new(
                ErrorCode::BadSignature,
                "keyid does not match the key it was resolved to",
            ));
        }
        let bad = |why: &str| Rejection::new(ErrorCode::BadSignature, why.to_owned());
        let payload = BASE64.decode(&self.payload).map_err(|_| {
            Rejection::new(ErrorCode::BadRequest, "payload is not canonical base64")
        })?;
        let sig_bytes = BASE64
            .decode(&self.signatures[0].sig)
            .map_err(|_| bad("sig is not canonical base64"))?;
        let sig_bytes: [u8; 64] = sig_bytes
            .try_into()
            .map_err(|_| bad("an Ed25519 signature is exactly 64 bytes"))?;
        let signature = Signature::from_bytes(&sig_bytes);
        key.verify_strict(&pae(&self.payload_type, &payload), &signature)
            .map_err(|_| bad("signature does not verify"))?;
        Ok(Verified {
            value: payload,
            signer: keyid,
        })
    }
}

/// weft's one signature policy: exactly 64 bytes, checked with `verify_strict` (canonical S,
/// no small-order R or A). The external vectors in `fixtures/vectors` pin what it accepts.
pub fn verify_detached(
    key: &VerifyingKey,
    message: &[u8],
    signature: &[u8],
) -> Result<(), Rejection> {
    let bad = |why: &str| Rejection::new(ErrorCode::BadSignature, why.to_owned());
    let signature: [u8; 64] = signature
        .try_into()
        .map_err(|_| bad("an Ed25519 signature is exactly 64 bytes"))?;
    key.verify_strict(message, &Signature::from_bytes(&signature))
        .map_err(|_| bad("signature does not verify"))
}

/// Generates a fresh signing key from the operating system's randomness.
pub fn generate_key() -> SigningKey {
    let secret: [u8; 32] = rand::random();
    SigningKey::from_bytes(&secret)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> SigningKey {
        SigningKey::from_bytes(&[7u8; 32])
    }

    #[test]
    fn pae_matches_the_dsse_spec_example() {
        // From the DSSE protocol document: PAE("http://example.com/HelloWorld", "hello world").
        assert_eq!(
            pae("http://example.com/HelloWorld", b"hello world"),
            b"DSSEv1 29 http://example.com/HelloWorld 11 hello world".to_vec()
        );
    }

    #[test]
    fn sign_then_verify_round_trips() {
        let envelope = Envelope::sign(&key(), MANIFEST_TYPE, b"{}");
        let verified = envelope
            .verify(MANIFEST_TYPE, &key().verifying_key())
            .expect("own signature verifies");
        assert_eq!(verified.value(), b"{}");
        assert_eq!(verified.signer(), &KeyId::of(&key().verifying_key()));
    }

    #[test]
    fn replay_under_another_payload_type_fails() {
        let mut envelope = Envelope::sign(&key(), MANIFEST_TYPE, b"{}");
        envelope.payload_type = SESSION_TYPE.to_owned();
        // Even when the verifier expects the new type, the PAE no longer matches.
        let err = envelope
            .verify(SESSION_TYPE, &key().verifying_key())
            .expect_err("type is bound by PAE");
        assert_eq!(err.code, ErrorCode::BadSignature);
    }

    #[test]
    fn truncated_and_extended_signatures_fail() {
        let envelope = Envelope::sign(&key(), MANIFEST_TYPE, b"{}");
        let raw = BASE64
            .decode(&envelope.signatures[0].sig)
            .expect("own encoding");
        for mutated in [raw[..63].to_vec(), [raw.clone(), vec![0]].concat()] {
            let mut bad = envelope.clone();
            bad.signatures[0].sig = BASE64.encode(&mutated);
            let err = bad
                .verify(MANIFEST_TYPE, &key().verifying_key())
                .expect_err("length");
            assert_eq!(err.code, ErrorCode::BadSignature);
        }
    }
}
