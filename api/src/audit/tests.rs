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

/// A `records.disposed` Event (issue #46) is in its Mission's bundle, and in each of its
/// WorkItems' (it names the Mission only), and in the bundle of each artifact a manifest it
/// names described; `records_disposed` lists every record it names, which `check` then does
/// not ask the bundle for.
#[test]
fn a_records_disposition_is_in_scope_and_names_its_records() {
    let (manifest, artifact, evidence) = (
        ArtifactId([5; 32]),
        ArtifactId([6; 32]),
        ArtifactId([7; 32]),
    );
    let cited = ArtifactId([8; 32]);
    let payload = EventPayload::RecordsDisposed(crate::lifecycle::RecordsDisposed {
        mission_id: crate::Id::parse("missionId", "m1").expect("id"),
        manifests: vec![crate::lifecycle::DisposedManifest {
            manifest_id: manifest,
            artifact,
        }],
        evidence: vec![crate::lifecycle::DisposedEvidence {
            evidence_id: evidence,
            artifacts: vec![cited],
        }],
        policy: "group g1 keep-bytes 1d keep-records 2d".into(),
        reason: "Mission m1 ended".into(),
        disposed_at: "2026-01-03T00:05:00Z".into(),
    });
    let event = Event {
        event_id: "e1".into(),
        group_id: "g1".into(),
        sequence: 9,
        kind: "records.disposed".into(),
        causation_command_id: None,
        payload: serde_json::value::RawValue::from_string(payload.to_json()).expect("json"),
        appended_at: "2026-01-03T00:05:00.000000Z".into(),
        prev_hash: crate::EventHash::GENESIS,
        hash: crate::EventHash::GENESIS,
    };
    let scope = |work_item, artifact| Scope {
        mission: "m1",
        work_item,
        artifact,
    };
    assert!(in_scope(&event, &scope(None, None)));
    assert!(in_scope(&event, &scope(Some("wi1"), None)));
    assert!(in_scope(&event, &scope(None, Some(artifact))));
    assert!(
        in_scope(&event, &scope(None, Some(cited))),
        "what the Evidence cited"
    );
    assert!(!in_scope(&event, &scope(None, Some(evidence))));
    assert!(!in_scope(
        &event,
        &Scope {
            mission: "m2",
            work_item: None,
            artifact: None
        }
    ));
    let key = ed25519_dalek::SigningKey::from_bytes(&[3; 32]);
    let mut with = bundle(&key);
    with.events.push(ProvenEvent {
        event,
        proof: Proof::new(9, Some(8), &[]),
    });
    let named: Vec<ArtifactId> = records_disposed(&with)
        .into_iter()
        .map(|(id, ..)| id)
        .collect();
    assert_eq!(named, vec![manifest, evidence]);
}

/// Evidence the Authority signed (its reviewer's, an approval) is checked against the trusted
/// Authority key, as `weft-authority`: no Agent key in the bundle is asked for it. (The
/// export asked the server for an Agent key under the Authority's keyid and failed, and
/// `check` found the signer "has no key in the bundle".)
#[test]
fn the_authoritys_own_evidence_is_checked_against_the_trusted_key() {
    let key = ed25519_dalek::SigningKey::from_bytes(&[3; 32]);
    let payload = serde_json::json!({
        "subject": {"kind": "workItem", "id": "wi1"},
        "missionId": "m1", "groupId": "g1", "workItemId": "wi1",
        "criterion": "ac-1",
        "method": {"kind": "integrity_check", "name": "weft integrity check", "version": "1"},
        "result": {"outcome": "pass", "summary": "", "metrics": {}},
        "producer": {"agentId": crate::evidence::AUTHORITY_AGENT, "agentCardVersion": "1"},
        "timestamp": "2026-11-30T12:05:00Z",
        "artifacts": []
    })
    .to_string();
    let evidence = crate::evidence::Evidence::parse(payload.as_bytes()).expect("evidence");
    let evidence_id = ArtifactId::of(payload.as_bytes());
    let envelope = crate::Envelope::sign(&key, crate::evidence::EVIDENCE_TYPE, payload.as_bytes());
    let recorded = EventPayload::EvidenceRecorded(crate::kinds::EvidenceRecorded {
        artifacts: Vec::new(),
        criterion: "ac-1".into(),
        evidence_id,
        method: crate::evidence::MethodKind::IntegrityCheck,
        mission_id: crate::Id::parse("missionId", "m1").expect("id"),
        outcome: crate::evidence::Outcome::Pass,
        producer: crate::Id::parse("agentId", crate::evidence::AUTHORITY_AGENT).expect("id"),
        supersedes: None,
        work_item_id: crate::Id::parse("workItemId", "wi1").expect("id"),
    });
    let event = Event {
        event_id: "e1".into(),
        group_id: "g1".into(),
        sequence: 1,
        kind: "evidence.recorded".into(),
        causation_command_id: None,
        payload: serde_json::value::RawValue::from_string(recorded.to_json()).expect("json"),
        appended_at: "2026-11-30T12:05:00.000000Z".into(),
        prev_hash: crate::EventHash::GENESIS,
        hash: crate::EventHash::GENESIS,
    };
    let mut with = bundle(&key);
    with.events.push(ProvenEvent {
        event,
        proof: Proof::new(1, Some(0), &[]),
    });
    with.evidence.push(crate::views::EvidenceRecord {
        evidence_id,
        group_id: "g1".into(),
        sequence: 1,
        envelope,
        evidence,
    });
    let pinned = key.verifying_key();
    let failures = check(&with, Some(&pinned), &[], 0, &BlobsFound::new());
    let about = format!("evidence {evidence_id}");
    assert!(
        !failures.iter().any(|f| f.starts_with(&about)),
        "{failures:?}"
    );
}
