//! Response shapes of the read API, shared by server and client.

use serde::{Deserialize, Serialize};

use crate::digest::{ArtifactId, Digests, Sha256Digest};
use crate::dsse::Envelope;
use crate::manifest::Manifest;

/// Answer to `PUT /v1/blobs/{digest}` and `POST /v1/blobs`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UploadReceipt {
    pub blake3: ArtifactId,
    pub sha256: Sha256Digest,
    pub size: u64,
}

/// A resumable upload session (`POST /v1/uploads`, `PATCH` and `HEAD /v1/uploads/{id}`):
/// its id and how many bytes the server holds durably, where the next chunk must start.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UploadSession {
    pub upload_id: String,
    pub offset: u64,
}

/// Answer to `POST /v1/artifacts`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Published {
    pub artifact: ArtifactId,
    pub manifest_id: ArtifactId,
    pub sequence: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DigestPair {
    pub blake3: ArtifactId,
    pub sha256: Sha256Digest,
}

/// A manifest or Evidence record whose signed envelope a retention policy disposed of (issue
/// #46): its id, the sequence of the Event that recorded it, and the sequence of the
/// `records.disposed` Event (of the same Group) that says why it went.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DisposedRecord {
    pub id: ArtifactId,
    pub sequence: u64,
    pub disposed_sequence: u64,
    /// A manifest's classification, which its tombstone keeps (CTX-8 still weighs it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub classification: Option<crate::manifest::Classification>,
}

/// One manifest of an artifact, as stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManifestRecord {
    pub manifest_id: ArtifactId,
    pub envelope: Envelope,
    pub manifest: Manifest,
    pub sequence: u64,
}

impl ManifestRecord {
    /// Checks the record against `key`, which the caller resolved from the envelope's keyid
    /// and trusts (a key it holds, or the producer's registered key): the signature verifies,
    /// and the signed payload hashes to `manifest_id` and is exactly `manifest`. `weft show`
    /// and the console's artifact page both ask this; neither takes the server's word.
    pub fn check_signature(
        &self,
        key: &ed25519_dalek::VerifyingKey,
    ) -> Result<crate::dsse::KeyId, crate::error::Rejection> {
        let payload = self
            .envelope
            .verify(crate::dsse::MANIFEST_TYPE, key)?
            .into_inner();
        self.check_payload(&payload)?;
        self.envelope.signer_keyid()
    }

    /// Whether the envelope's payload is exactly this record's manifest (hashes to its id and
    /// parses to it), signature aside.
    pub fn payload_matches(&self) -> bool {
        use base64::Engine as _;
        crate::dsse::BASE64
            .decode(&self.envelope.payload)
            .is_ok_and(|payload| self.check_payload(&payload).is_ok())
    }

    fn check_payload(&self, payload: &[u8]) -> Result<(), crate::error::Rejection> {
        if ArtifactId::of(payload) == self.manifest_id
            && Manifest::parse(payload).ok().as_ref() == Some(&self.manifest)
        {
            Ok(())
        } else {
            Err(crate::error::Rejection::new(
                crate::error::ErrorCode::BadSignature,
                "the signed payload is not this manifest",
            ))
        }
    }
}

/// Answer to `GET /v1/artifacts/{digest}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactView {
    pub digests: DigestPair,
    pub size: u64,
    pub quarantined: bool,
    pub manifests: Vec<ManifestRecord>,
    /// The manifests whose records a retention policy disposed of (issue #46): their signed
    /// envelopes are gone; each names its `records.disposed` Event. Left out when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disposed_manifests: Vec<DisposedRecord>,
    /// Set when the Artifact was published as reusable knowledge in the reader's Group (CTX-6).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reuse: Option<ReuseRecord>,
}

/// `POST /v1/artifacts/{digest}/reuse` body: publish an Artifact as reusable knowledge
/// (CTX-6), citing the approver's signed approval Evidence.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ReuseRequest {
    pub classification: crate::manifest::Classification,
    /// The approval: Evidence with criterion `reuse` about this Artifact, recorded by an
    /// Organization approver, outcome `pass`, not superseded.
    pub approval: ArtifactId,
}

/// An Artifact published as reusable knowledge in a Group (CTX-6), with its provenance: the
/// approval Evidence, who signed it, who published, and the Mission it came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReuseRecord {
    pub artifact: ArtifactId,
    pub group_id: String,
    pub classification: crate::manifest::Classification,
    pub approval: ArtifactId,
    pub approved_by: String,
    pub mission_id: String,
    pub published_by: String,
    pub published_at: String,
    pub sequence: u64,
}

impl ArtifactView {
    pub fn digests(&self) -> Digests {
        Digests {
            blake3: self.digests.blake3,
            sha256: self.digests.sha256,
            size: self.size,
        }
    }
}

/// One row of `GET /v1/artifacts`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListedArtifact {
    pub artifact: ArtifactId,
    pub manifest_id: ArtifactId,
    pub size: u64,
    pub media_type: String,
    pub group_id: String,
    pub mission_id: String,
    pub work_item_id: String,
    pub producer: String,
    pub created_at: String,
    pub sequence: u64,
    /// The file name the manifest records (`Manifest::file_name`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// Answer to `GET /v1/artifacts`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactPage {
    pub items: Vec<ListedArtifact>,
    /// Pass as `after` to get the next page; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<u64>,
}

/// Answer to `GET /v1/groups/{g}/events`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct EventPage {
    /// Whole Events, and `withheld` placeholders for a Mission-scoped member (CTX-5).
    pub events: Vec<crate::event::Delivered>,
}

/// Answer to `GET /v1/groups/{g}/agents/{agentId}/events` (issue #50): what one Agent did in
/// a Group that the caller may see, newest first.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ActorEvents {
    pub group_id: String,
    pub agent_id: String,
    /// The Events whose actor is the Agent (the Commands it signed, what it published,
    /// reviewed, opened), newest first; an Event the caller may not see is left out.
    pub events: Vec<crate::Event>,
    /// `before` of the next (older) page; `null` when there is none.
    pub before: Option<u64>,
}

/// One Evidence record as stored and served.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EvidenceRecord {
    pub evidence_id: ArtifactId,
    pub group_id: String,
    pub sequence: u64,
    pub envelope: Envelope,
    pub evidence: crate::evidence::Evidence,
}

/// Answer to `GET /v1/evidence` and `GET /v1/artifacts/{digest}/evidence`, newest first.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EvidencePage {
    pub items: Vec<EvidenceRecord>,
    /// Pass as `after` to get the next (older) page; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<u64>,
}

/// Answer to `POST /v1/evidence`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EvidenceRecorded {
    pub evidence_id: ArtifactId,
    pub sequence: u64,
}

/// The latest non-superseded verdict on one criterion.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Verdict {
    pub evidence_id: ArtifactId,
    pub outcome: crate::evidence::Outcome,
    pub method: crate::evidence::MethodKind,
    pub producer: String,
    /// What the producer's word weighs (its roles when it recorded; EVD-1): a review
    /// outranks a Worker's claim.
    pub standing: crate::verdict::Standing,
    pub timestamp: String,
    pub sequence: u64,
}

/// How many records of each outcome exist for a criterion.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutcomeCounts {
    pub pass: u64,
    pub fail: u64,
    pub inconclusive: u64,
}

/// One row of `GET /v1/workitems/{id}/criteria`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CriterionSummary {
    pub criterion: String,
    pub latest: Verdict,
    /// Every record, superseded ones included.
    pub counts: OutcomeCounts,
    pub producers: Vec<String>,
    /// The records in force (not superseded) of the verdict's rank disagree.
    pub contested: bool,
}

/// Answer to `GET /v1/workitems/{id}/criteria`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CriteriaView {
    pub work_item_id: String,
    /// The Mission the WorkItem belongs to (one answer covers one Mission).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mission_id: Option<String>,
    pub criteria: Vec<CriterionSummary>,
}

/// Body of `POST /v1/workitems/{id}/review`.
///
/// Each check is recorded under a criterion of its own ([`ReviewRequest::assignments`]), so
/// one review of a binary artifact (integrity passes, schema cannot) is not contested
/// against itself.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReviewRequest {
    /// The criterion of a single check, or the stem of several (`ac-1.integrity`,
    /// `ac-1.schema`). May be left out when `criteria` names one for every check.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub criterion: String,
    pub artifacts: Vec<ArtifactId>,
    /// The checks to run; left out, the keys of `criteria`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<Check>,
    /// The caller's criterion for a check, overriding the one derived from `criterion`.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub criteria: std::collections::BTreeMap<Check, String>,
    /// The Mission of the WorkItem; required when the WorkItem id is used in more than one
    /// Mission of the Group.
    #[serde(default, rename = "missionId", skip_serializing_if = "Option::is_none")]
    pub mission_id: Option<crate::id::Id>,
}

impl ReviewRequest {
    /// Which criterion each check is recorded under, in check order: the one `criteria`
    /// maps it to; else `criterion` when a single check runs; else `criterion.<check>` (one
    /// criterion per check kind). Refused (the reason): no check, a mapped check that is
    /// not run, or a check with no criterion to derive.
    pub fn assignments(&self) -> Result<Vec<(Check, String)>, String> {
        let checks: std::collections::BTreeSet<Check> = if self.checks.is_empty() {
            self.criteria.keys().copied().collect()
        } else {
            self.checks.iter().copied().collect()
        };
        if checks.is_empty() {
            return Err("name at least one check (checks, or criteria's keys)".to_owned());
        }
        if let Some(extra) = self.criteria.keys().find(|check| !checks.contains(check)) {
            return Err(format!(
                "criteria maps {} but checks does not run it",
                extra.as_str()
            ));
        }
        let single = checks.len() == 1;
        checks
            .into_iter()
            .map(|check| {
                let criterion = match (self.criteria.get(&check), self.criterion.as_str()) {
                    (Some(mapped), _) => mapped.clone(),
                    (None, "") => {
                        return Err(format!(
                            "name a criterion, or map {} to one in criteria",
                            check.as_str()
                        ));
                    }
                    (None, stem) if single => stem.to_owned(),
                    (None, stem) => format!("{stem}.{}", check.as_str()),
                };
                Ok((check, criterion))
            })
            .collect()
    }
}

/// A deterministic check the built-in reviewer runs (EVD-3 step 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Check {
    Integrity,
    Schema,
}

impl Check {
    /// The wire word.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Integrity => "integrity",
            Self::Schema => "schema",
        }
    }
}

/// Answer to `POST /v1/workitems/{id}/review`: one Evidence record per check.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReviewOutcome {
    pub evidence: Vec<EvidenceRecord>,
}

/// `GET /v1/authority/keys`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthorityKeys {
    pub keys: Vec<AuthorityKey>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthorityKey {
    pub keyid: String,
    /// Base64 of the 32-byte Ed25519 public key.
    pub public_key: String,
}

/// One ACK entry (DLV-6): the highest contiguous sequence the caller has durably processed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CursorEntry {
    pub group_id: String,
    pub sequence: u64,
}

/// Body of `POST /v1/groups/{g}/cursors`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ack {
    pub cursors: Vec<CursorEntry>,
}

/// A stored cursor.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Cursor {
    pub group_id: String,
    pub agent_id: String,
    pub sequence: u64,
    /// For an ACK: whether it moved the cursor (an older or equal ACK is a no-op).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moved: Option<bool>,
}

/// Answer to the cursor routes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursors {
    pub cursors: Vec<Cursor>,
}

/// The signed head of a Group's log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Checkpoint {
    pub group_id: String,
    pub sequence: u64,
    pub hash: crate::event::EventHash,
    pub created_at: String,
}

/// Answer to `GET /v1/groups/{g}/checkpoint`: the envelope (signed by the authority key,
/// payload type `application/vnd.mwp.checkpoint.v1+json`) and its decoded payload.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignedCheckpoint {
    pub envelope: Envelope,
    pub checkpoint: Checkpoint,
}

/// What a snapshot reference says (DLV-9): the projected Group state at `sequence` is the
/// artifact `stateDigest`, and the chain hash of the Event at `sequence` is `eventChainHash`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SnapshotReference {
    pub group_id: String,
    pub sequence: u64,
    pub state_digest: ArtifactId,
    pub event_chain_hash: crate::event::EventHash,
    pub created_at: String,
    /// Where the state document is served: `/v1/groups/{g}/snapshots/blobs/{stateDigest}`
    /// (DESIGN §7). Absent only in references signed before it was added, which still verify.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
}

/// A snapshot reference signed by the authority key (payload type
/// `application/vnd.mwp.snapshot.v1+json`), with where its archived Events are.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SignedSnapshot {
    pub envelope: Envelope,
    pub reference: SnapshotReference,
    /// The archive artifact holding Events `fromSequence..=sequence` as JSON lines.
    pub archive: ArtifactId,
    pub from_sequence: u64,
}

/// Answer to `GET /v1/groups/{g}/snapshots`, oldest first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshots {
    pub snapshots: Vec<SignedSnapshot>,
}

#[cfg(test)]
mod tests {
    use super::{Check, ReviewRequest};

    fn request(criterion: &str, checks: &[Check], criteria: &[(Check, &str)]) -> ReviewRequest {
        ReviewRequest {
            criterion: criterion.to_owned(),
            artifacts: Vec::new(),
            checks: checks.to_vec(),
            criteria: criteria
                .iter()
                .map(|(check, name)| (*check, (*name).to_owned()))
                .collect(),
            mission_id: None,
        }
    }

    #[test]
    fn each_check_kind_is_recorded_under_its_own_criterion() {
        use Check::{Integrity, Schema};
        let own = |pairs: &[(Check, &str)]| {
            pairs
                .iter()
                .map(|(check, name)| (*check, (*name).to_owned()))
                .collect::<Vec<_>>()
        };
        // One check: the criterion as named.
        assert_eq!(
            request("ac-1", &[Integrity], &[]).assignments(),
            Ok(own(&[(Integrity, "ac-1")]))
        );
        // Several: one criterion per kind, so they cannot contest each other.
        assert_eq!(
            request("ac-1", &[Schema, Integrity, Schema], &[]).assignments(),
            Ok(own(&[
                (Integrity, "ac-1.integrity"),
                (Schema, "ac-1.schema")
            ]))
        );
        // The caller's map wins, and alone names the checks.
        assert_eq!(
            request("", &[], &[(Integrity, "bytes"), (Schema, "shape")]).assignments(),
            Ok(own(&[(Integrity, "bytes"), (Schema, "shape")]))
        );
        assert_eq!(
            request("ac-1", &[Integrity, Schema], &[(Schema, "shape")]).assignments(),
            Ok(own(&[(Integrity, "ac-1.integrity"), (Schema, "shape")]))
        );
        // Refusals.
        assert!(request("ac-1", &[], &[]).assignments().is_err());
        assert!(request("", &[Integrity], &[]).assignments().is_err());
        assert!(
            request("ac-1", &[Integrity], &[(Schema, "shape")])
                .assignments()
                .is_err()
        );
    }
}
