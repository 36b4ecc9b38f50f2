//! `weft_api::audit::check`'s refusals before any Event is looked at: another format version,
//! an Authority key that is not one, a pinned key the bundle does not name, a checkpoint not
//! signed under the Group's origin. (The whole bundle is checked end to end, tampering
//! included, in `tests/e2e/audit.rs`.)

use super::*;
use crate::tlog::{TreeHead, origin, sign_checkpoint};
use base64::Engine as _;

fn bundle(key: &ed25519_dalek::SigningKey) -> Bundle {
    let note = sign_checkpoint(
        key,
        &origin(&key.verifying_key(), "g1"),
        TreeHead {
            size: 0,
            root: tlog_tiles::EMPTY_HASH.0,
        },
    )
    .expect("sign");
    Bundle {
        version: VERSION,
        group_id: "g1".into(),
        mission_id: "m1".into(),
        work_item_id: None,
        artifact: None,
        authority_key: base64::engine::general_purpose::STANDARD
            .encode(key.verifying_key().as_bytes()),
        checkpoint: note,
        events: Vec::new(),
        manifests: Vec::new(),
        evidence: Vec::new(),
        keys: Vec::new(),
        lineage: serde_json::Value::Null,
        blobs: Vec::new(),
    }
}

#[test]
fn the_bundles_trust_root_is_checked_first() {
    let key = ed25519_dalek::SigningKey::from_bytes(&[3; 32]);
    let good = bundle(&key);
    let pinned_key = key.verifying_key();
    assert!(check(&good, Some(&pinned_key), &[], 0, &BlobsFound::new()).is_empty());
    // The bundle's own key is no trust root.
    assert!(check(&good, None, &[], 0, &BlobsFound::new())[0].starts_with("trust:"));
    let mut other_version = good.clone();
    other_version.version = 2;
    assert!(
        check(
            &other_version,
            Some(&pinned_key),
            &[],
            0,
            &BlobsFound::new()
        )[0]
        .contains("version")
    );
    let stranger = ed25519_dalek::SigningKey::from_bytes(&[4; 32]).verifying_key();
    let pinned = check(&good, Some(&stranger), &[], 0, &BlobsFound::new());
    assert!(
        pinned.iter().any(|f| f.contains("not the pinned")),
        "{pinned:?}"
    );
    assert!(
        pinned.iter().any(|f| f.starts_with("checkpoint:")),
        "{pinned:?}"
    );
    let mut elsewhere = good.clone();
    elsewhere.group_id = "g2".into();
    assert!(
        check(&elsewhere, Some(&pinned_key), &[], 0, &BlobsFound::new())[0]
            .starts_with("checkpoint:")
    );
    let mut listed = good;
    listed.blobs.push(BlobEntry {
        artifact: ArtifactId([1; 32]),
        size: 3,
    });
    let failures = check(&listed, Some(&pinned_key), &[], 0, &BlobsFound::new());
    assert!(
        failures
            .iter()
            .any(|f| f.contains("no Event in the bundle publishes it")),
        "{failures:?}"
    );
}
