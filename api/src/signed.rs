//! The one path from signed bytes to a value: every signed payload type (artifact manifest,
//! Evidence, session request, and next Commands and Context Packages) is parsed by
//! [`SignedPayload::parse_payload`]: a size cap, strict JSON (no duplicate keys, no unknown
//! fields), then the type's own validation. The signature itself is checked before this, by
//! [`crate::Envelope::verify`]; the server resolves the signing key and compares the signer
//! with [`SignedPayload::signer_claim`] in one place (`storage`'s `verify_signed`).

use serde::de::DeserializeOwned;

use crate::error::{ErrorCode, Rejection};
use crate::id::Id;
use crate::json::parse_strict;

/// A payload type that travels inside a DSSE envelope.
pub trait SignedPayload: DeserializeOwned + Sized {
    /// The DSSE `payloadType` it must be signed as.
    const PAYLOAD_TYPE: &'static str;
    /// What it is called in error messages.
    const NAME: &'static str;
    /// Largest payload accepted, in bytes.
    const MAX_BYTES: usize;
    /// The code of a malformed payload.
    const INVALID: ErrorCode;

    /// Checks what `deny_unknown_fields` and the types cannot: bounds, formats, consistency.
    fn validate(&self) -> Result<(), Rejection>;

    /// The Agent the payload says signed it, and the agent card version it claims (`None`
    /// when the payload type names none, as a session request).
    fn signer_claim(&self) -> (&Id, Option<&str>);

    /// Size cap, strict JSON, validation: the only way signed bytes become a value.
    fn parse_payload(payload: &[u8]) -> Result<Self, Rejection> {
        if payload.len() > Self::MAX_BYTES {
            return Err(Rejection::new(
                Self::INVALID,
                format!("{} is larger than {} bytes", Self::NAME, Self::MAX_BYTES),
            ));
        }
        let value: Self = parse_strict(payload, Self::INVALID)?;
        value.validate()?;
        Ok(value)
    }
}
