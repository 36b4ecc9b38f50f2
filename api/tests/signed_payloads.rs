//! Every signed payload type goes through the one parsing path (`SignedPayload`).

use weft_api::evidence::Evidence;
use weft_api::{ErrorCode, Manifest, SessionRequest, SignedPayload};

/// Every payload type refuses what is over its cap with its own code, before parsing.
#[test]
fn each_type_caps_its_size_before_parsing() {
    fn oversized<T: SignedPayload>() -> ErrorCode {
        let bytes = vec![b' '; T::MAX_BYTES + 1];
        T::parse_payload(&bytes)
            .err()
            .map(|r| r.code)
            .expect("refused")
    }
    assert_eq!(oversized::<Manifest>(), ErrorCode::InvalidManifest);
    assert_eq!(oversized::<Evidence>(), ErrorCode::InvalidEvidence);
    assert_eq!(oversized::<SessionRequest>(), ErrorCode::BadRequest);
}

/// Duplicate keys are refused for every type (the strict parser is shared).
#[test]
fn duplicate_keys_are_refused_for_every_type() {
    let twice = br#"{"agentId":"a","agentId":"b"}"#;
    assert_eq!(
        SessionRequest::parse_payload(twice).err().map(|r| r.code),
        Some(ErrorCode::BadRequest)
    );
    assert_eq!(
        Manifest::parse_payload(twice).err().map(|r| r.code),
        Some(ErrorCode::InvalidManifest)
    );
}
