//! The offline audit bundle (issue #45, DESIGN §15): what `weft audit export` writes about one
//! Mission and `weft audit verify` checks with no server. Pure rules; the CLI reads and writes
//! the file (`src/cli/audit.rs`: a tar holding `bundle.json` and, with `--with-bytes`,
//! `blobs/<blake3 hex>`).
//!
//! A bundle holds the Group's signed (and cosigned) transparency-log checkpoint, the Mission's
//! Events each with its inclusion proof against that checkpoint, every manifest and Evidence
//! envelope the Events name, the Agents' public keys that signed them, and the Mission's
//! lineage as the server answered it. [`check`] verifies all of it: the checkpoint's
//! signature (and witnesses), each Event's chain hash and inclusion, that each Event belongs
//! to the Mission, each envelope's signature under its key and that its Event names it, and
//! that every published artifact's bytes (when present) hash to their address. Each failure
//! is one line naming what failed.
//!
//! What it does not prove: that the bundle holds *every* Event of the Mission (an exporter
//! could leave some out; proving absence needs every leaf of the tree), and the lineage
//! section is as the server answered (the signed manifests' `sources` carry the same edges).
//! The trust root is never the bundle's own key: the verifier names the Authority's key or
//! witnesses.

use std::collections::{BTreeMap, BTreeSet};

use ed25519_dalek::VerifyingKey;
use serde::{Deserialize, Serialize};

use crate::tlog::witness::WitnessKey;
use crate::tlog::{self, Proof};
use crate::views::{EvidenceRecord, ManifestRecord};
use crate::{ArtifactId, Event, EventPayload, KeyId};

/// The bundle format's version.
pub const VERSION: u64 = 1;

/// `bundle.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Bundle {
    pub version: u64,
    pub group_id: String,
    pub mission_id: String,
    /// With `--work-item`: only that WorkItem's Events (of `mission_id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work_item_id: Option<String>,
    /// With `--artifact`: the Events about that artifact, in any Mission (`mission_id` is then
    /// the Mission of its first publication, whose lineage the bundle holds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact: Option<ArtifactId>,
    /// The Authority's public key (base64) as the server served it; `weft audit verify
    /// --authority-key` pins one instead.
    pub authority_key: String,
    /// The checkpoint note, cosignatures included.
    pub checkpoint: String,
    pub events: Vec<ProvenEvent>,
    pub manifests: Vec<ManifestRecord>,
    pub evidence: Vec<EvidenceRecord>,
    /// Every key that signed an envelope here, by keyid.
    pub keys: Vec<AgentKey>,
    /// `GET /v1/missions/{id}/provenance` as the server answered (`null`: it published
    /// nothing). Not checked: the manifests' `sources`, which are, carry the same edges.
    pub lineage: serde_json::Value,
    /// The artifacts whose bytes are in the bundle (`blobs/<hex>`), with their sizes.
    #[serde(default)]
    pub blobs: Vec<BlobEntry>,
}

/// One Event and its inclusion proof against the bundle's checkpoint.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProvenEvent {
    pub event: Event,
    pub proof: Proof,
}

/// A key that signed an envelope, and whose it is.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentKey {
    pub keyid: String,
    pub agent_id: String,
    pub public_key: String,
}

/// An artifact's bytes in the bundle.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BlobEntry {
    pub artifact: ArtifactId,
    pub size: u64,
}

/// Which Mission an Event belongs to, as delivery decides it for a Mission-scoped reader
/// (`storage/src/delivery.rs`, `deliver`): `None` for a Group-level Event.
pub fn mission_of(event: &Event) -> Option<String> {
    match EventPayload::of(event).ok().flatten()? {
        EventPayload::ArtifactPublished(p) => Some(p.mission_id.to_string()),
        EventPayload::EvidenceRecorded(p) => Some(p.mission_id.to_string()),
        EventPayload::Work(_, p) => Some(p.mission_id.to_string()),
        EventPayload::ContextPublished(p) => Some(p.mission_id.to_string()),
        EventPayload::RecordsDisposed(p) => Some(p.mission_id.to_string()),
        _ => None,
    }
}

/// Which WorkItem an Event is about, when it names one.
pub fn work_item_of(event: &Event) -> Option<String> {
    match EventPayload::of(event).ok().flatten()? {
        EventPayload::ArtifactPublished(p) => Some(p.work_item_id.to_string()),
        EventPayload::EvidenceRecorded(p) => Some(p.work_item_id.to_string()),
        EventPayload::Work(_, p) => p.work_item_id.map(|id| id.to_string()),
        _ => None,
    }
}

/// What a bundle is about: a Mission, narrowed to one WorkItem, or one artifact.
#[derive(Clone, Copy, Debug)]
pub struct Scope<'a> {
    pub mission: &'a str,
    pub work_item: Option<&'a str>,
    pub artifact: Option<ArtifactId>,
}

impl Bundle {
    pub fn scope(&self) -> Scope<'_> {
        Scope {
            mission: &self.mission_id,
            work_item: self.work_item_id.as_deref(),
            artifact: self.artifact,
        }
    }
}

/// Whether `event` is about `artifact`: its publication, Evidence citing it, its integrity.
pub fn about_artifact(event: &Event, artifact: &ArtifactId) -> bool {
    match EventPayload::of(event).ok().flatten() {
        Some(EventPayload::ArtifactPublished(p)) => p.artifact == *artifact,
        Some(EventPayload::EvidenceRecorded(p)) => p.artifacts.contains(artifact),
        Some(EventPayload::ArtifactIntegrityFailure(p)) => p.artifact == *artifact,
        Some(EventPayload::ArtifactRepaired(p)) => p.artifact == *artifact,
        Some(EventPayload::ArtifactDisposed(p)) => {
            p.artifacts.iter().any(|d| d.artifact == *artifact)
        }
        Some(EventPayload::RecordsDisposed(p)) => {
            p.manifests.iter().any(|d| d.artifact == *artifact)
                || p.evidence.iter().any(|e| e.artifacts.contains(artifact))
        }
        _ => false,
    }
}

/// Whether `event` is in a bundle of `scope`.
pub fn in_scope(event: &Event, scope: &Scope<'_>) -> bool {
    if let Some(artifact) = &scope.artifact {
        return about_artifact(event, artifact);
    }
    // A disposition names every Mission of the Group whose manifests cited the bytes
    // (issue #46): a Mission's bundle says why they are not in it.
    if let Ok(Some(EventPayload::ArtifactDisposed(p))) = EventPayload::of(event) {
        return scope.work_item.is_none() && p.missions.iter().any(|m| m.as_str() == scope.mission);
    }
    // A disposition of records names its Mission, not each WorkItem: a WorkItem's bundle
    // holds it too, and says why its manifests or Evidence are not in it.
    if let Ok(Some(EventPayload::RecordsDisposed(p))) = EventPayload::of(event) {
        return p.mission_id.as_str() == scope.mission;
    }
    mission_of(event).as_deref() == Some(scope.mission)
        && scope
            .work_item
            .is_none_or(|w| work_item_of(event).as_deref() == Some(w))
}

/// The dispositions a bundle's Events record (issue #46): for each artifact whose bytes a
/// retention policy disposed of, the policy and the Event's sequence, so a reader is told
/// "disposed of by policy P at sequence N", never "missing".
pub fn dispositions(bundle: &Bundle) -> Vec<(ArtifactId, String, u64)> {
    let mut found = Vec::new();
    for entry in &bundle.events {
        if let Ok(Some(EventPayload::ArtifactDisposed(p))) = EventPayload::of(&entry.event) {
            for disposed in p.artifacts {
                found.push((disposed.artifact, disposed.policy, entry.event.sequence));
            }
        }
    }
    found
}

/// The records a bundle's `records.disposed` Events name (issue #46): each manifest's or
/// Evidence record's id, the policy, and the Event's sequence. A record named here is
/// missing from the bundle by policy, not by omission.
pub fn records_disposed(bundle: &Bundle) -> Vec<(ArtifactId, String, u64)> {
    let mut found = Vec::new();
    for entry in &bundle.events {
        if let Ok(Some(EventPayload::RecordsDisposed(p))) = EventPayload::of(&entry.event) {
            let ids = (p.manifests.iter().map(|m| m.manifest_id))
                .chain(p.evidence.iter().map(|e| e.evidence_id));
            for id in ids {
                found.push((id, p.policy.clone(), entry.event.sequence));
            }
        }
    }
    found
}

/// The bytes of the artifacts the bundle carries, as the CLI found them: each one's BLAKE3
/// and size as hashed from the file.
pub type BlobsFound = BTreeMap<ArtifactId, u64>;

/// Every check of `bundle`, with `authority` (pinned, or the bundle's own) and the witness
/// policy; one line per failure (empty: the bundle holds).
pub fn check(
    bundle: &Bundle,
    authority: Option<&VerifyingKey>,
    witnesses: &[WitnessKey],
    quorum: usize,
    blobs: &BlobsFound,
) -> Vec<String> {
    let mut failures = Vec::new();
    if bundle.version != VERSION {
        failures.push(format!(
            "bundle.json: version {} is not {VERSION}",
            bundle.version
        ));
        return failures;
    }
    // The trust root comes from outside the bundle: a pinned Authority key, or at least one
    // witness's cosignature (a bundle's own key alone would let anyone sign anything).
    let own = crate::dsse::parse_public_key(&bundle.authority_key);
    let key = match (authority, &own) {
        (Some(pinned), Ok(own)) if pinned == own => *pinned,
        (Some(pinned), _) => {
            failures.push("bundle.json: authorityKey is not the pinned Authority key".into());
            *pinned
        }
        (None, Ok(own)) if quorum > 0 => *own,
        (None, Ok(_)) => {
            failures.push(
                "trust: name the Authority's key (--authority-key, out of band) or witnesses (--witness); the bundle's own key proves nothing".into(),
            );
            return failures;
        }
        (None, Err(_)) => {
            failures.push("bundle.json: authorityKey is not an Ed25519 public key".into());
            return failures;
        }
    };
    let origin = tlog::origin(&key, &bundle.group_id);
    let head = match tlog::witness::open_witnessed(
        bundle.checkpoint.as_bytes(),
        &key,
        &origin,
        witnesses,
        quorum,
    ) {
        Ok((head, _)) => head,
        Err(rejection) => {
            failures.push(format!("checkpoint: {}", rejection.message));
            return failures;
        }
    };
    // Events: each in the Group, of the Mission, hashed as it says, in the checkpoint's tree.
    let mut published: BTreeMap<u64, (ArtifactId, ArtifactId)> = BTreeMap::new();
    let mut recorded: BTreeMap<u64, ArtifactId> = BTreeMap::new();
    // The Agent each publication or record Event names as its producer.
    let mut producers: BTreeMap<u64, String> = BTreeMap::new();
    let mut seen = BTreeSet::new();
    for proven in &bundle.events {
        let event = &proven.event;
        let at = format!("event {}", event.sequence);
        if !seen.insert(event.sequence) {
            failures.push(format!("{at}: appears twice"));
        }
        if event.group_id != bundle.group_id {
            failures.push(format!(
                "{at}: is of Group {}, not {}",
                event.group_id, bundle.group_id
            ));
        }
        if !in_scope(event, &bundle.scope()) {
            let scope = match (&bundle.artifact, &bundle.work_item_id) {
                (Some(artifact), _) => format!("about artifact {artifact}"),
                (None, Some(w)) => format!("of Mission {}'s WorkItem {w}", bundle.mission_id),
                (None, None) => format!("of Mission {}", bundle.mission_id),
            };
            failures.push(format!("{at}: is not an Event {scope}"));
        }
        if event.computed_hash() != event.hash {
            failures.push(format!("{at}: its fields do not hash to its hash"));
        }
        if proven.proof.leaf_index != Some(event.sequence.wrapping_sub(1)) {
            failures.push(format!("{at}: its proof is of another leaf"));
        } else if let Err(rejection) = tlog::check_inclusion(
            &proven.proof,
            tlog::leaf_hash(&event.canonical_bytes()),
            head,
        ) {
            failures.push(format!(
                "{at}: not in the checkpoint's tree ({})",
                rejection.message
            ));
        }
        match EventPayload::of(event).ok().flatten() {
            Some(EventPayload::ArtifactPublished(p)) => {
                published.insert(event.sequence, (p.manifest_id, p.artifact));
                producers.insert(event.sequence, p.producer.to_string());
            }
            Some(EventPayload::EvidenceRecorded(p)) => {
                recorded.insert(event.sequence, p.evidence_id);
                producers.insert(event.sequence, p.producer.to_string());
            }
            _ => {}
        }
    }
    // Keys: each keyid is its key's.
    let mut keys: BTreeMap<String, (VerifyingKey, String)> = BTreeMap::new();
    for agent_key in &bundle.keys {
        match crate::dsse::parse_public_key(&agent_key.public_key) {
            Ok(parsed) if KeyId::of(&parsed).as_str() == agent_key.keyid => {
                keys.insert(
                    agent_key.keyid.clone(),
                    (parsed, agent_key.agent_id.clone()),
                );
            }
            _ => failures.push(format!(
                "key {}: its public key is not the one its keyid names",
                agent_key.keyid
            )),
        }
    }
    // The Authority signs as `weft-authority` (its reviewer's Evidence, approvals) with the
    // key trusted above, pinned or witnessed; never one the bundle brings for it.
    keys.insert(
        KeyId::of(&key).as_str().to_owned(),
        (key, crate::evidence::AUTHORITY_AGENT.to_owned()),
    );
    // The key that signed `envelope`, which must be the key of the Agent its Event names.
    let signer = |envelope: &crate::Envelope, sequence: u64| -> Result<VerifyingKey, String> {
        let keyid = envelope.signer_keyid().map_err(|r| r.message)?;
        let (key, agent) = keys
            .get(keyid.as_str())
            .ok_or_else(|| format!("its signer {} has no key in the bundle", keyid.as_str()))?;
        match producers.get(&sequence) {
            Some(producer) if producer == agent => Ok(*key),
            Some(producer) => Err(format!(
                "signed with {agent}'s key, but event {sequence} names {producer}"
            )),
            None => Err(format!("event {sequence} in the bundle names no producer")),
        }
    };
    // Manifests: signed by their key, each named by the publication Event it says.
    for record in &bundle.manifests {
        let at = format!("manifest {}", record.manifest_id);
        match signer(&record.envelope, record.sequence)
            .and_then(|key| record.check_signature(&key).map_err(|r| r.message))
        {
            Ok(_) => {}
            Err(why) => failures.push(format!("{at}: {why}")),
        }
        match published.get(&record.sequence) {
            Some((manifest_id, _)) if *manifest_id == record.manifest_id => {}
            _ => failures.push(format!(
                "{at}: event {} in the bundle does not publish it",
                record.sequence
            )),
        }
    }
    // Records a retention policy disposed of, by their `records.disposed` Events here.
    let gone: BTreeSet<ArtifactId> = records_disposed(bundle)
        .into_iter()
        .map(|(id, ..)| id)
        .collect();
    for (sequence, (manifest_id, _)) in &published {
        if !gone.contains(manifest_id)
            && !bundle
                .manifests
                .iter()
                .any(|m| m.manifest_id == *manifest_id)
        {
            failures.push(format!(
                "event {sequence}: its manifest {manifest_id} is not in the bundle"
            ));
        }
    }
    // Evidence: signed by its key, its id its payload's, named by its Event.
    for record in &bundle.evidence {
        let at = format!("evidence {}", record.evidence_id);
        let verified = signer(&record.envelope, record.sequence).and_then(|key| {
            record
                .envelope
                .verify(crate::evidence::EVIDENCE_TYPE, &key)
                .map_err(|r| r.message)
        });
        // The record's fields are the signed payload's, and of this bundle's Group.
        match verified {
            Ok(payload)
                if ArtifactId::of(payload.value()) == record.evidence_id
                    && crate::evidence::Evidence::parse(payload.value())
                        .ok()
                        .as_ref()
                        == Some(&record.evidence)
                    && record.group_id == bundle.group_id => {}
            Ok(_) => failures.push(format!("{at}: the signed payload is not this record")),
            Err(why) => failures.push(format!("{at}: {why}")),
        }
        if recorded.get(&record.sequence) != Some(&record.evidence_id) {
            failures.push(format!(
                "{at}: event {} in the bundle does not record it",
                record.sequence
            ));
        }
    }
    for (sequence, evidence_id) in &recorded {
        if !gone.contains(evidence_id)
            && !bundle
                .evidence
                .iter()
                .any(|e| e.evidence_id == *evidence_id)
        {
            failures.push(format!(
                "event {sequence}: its Evidence {evidence_id} is not in the bundle"
            ));
        }
    }
    // Bytes: each listed artifact was published here and its file hashes to it.
    for entry in &bundle.blobs {
        let at = format!("blobs/{}", hex::encode(entry.artifact.0));
        if !published
            .values()
            .any(|(_, artifact)| *artifact == entry.artifact)
        {
            failures.push(format!("{at}: no Event in the bundle publishes it"));
        }
        match blobs.get(&entry.artifact) {
            Some(size) if *size == entry.size => {}
            Some(size) => failures.push(format!("{at}: {size} bytes, not {}", entry.size)),
            None => failures.push(format!(
                "{at}: missing, or its bytes do not hash to its name"
            )),
        }
    }
    failures
}

#[cfg(test)]
mod tests;
