//! The built-in deterministic reviewer (EVD-3 steps 1, 2 and 5): integrity through the
//! verified read path, JSON Schema validation (built without resolvers, so a schema never
//! makes the server fetch anything), each result recorded as Evidence signed by the server.
//! After a submission it runs as a reaction after the commit (`reactions.rs`), and records
//! its Evidence in the transaction that marks the reaction done.
//!
//! Long (about 620 lines) because each check's read path (download slots, verified reads,
//! the schema lookup) sits next to the Evidence it produces.

use std::collections::{BTreeMap, BTreeSet};

use base64::Engine as _;
use futures::TryStreamExt as _;
use weft_api::evidence::{
    AUTHORITY_AGENT, EVIDENCE_TYPE, Evidence, EvidenceResult, Method, MethodKind, Metric, Outcome,
    Subject, SubjectKind,
};
use weft_api::manifest::Producer;
use weft_api::session::Role;
use weft_api::views::{Check, EvidenceRecord, ReviewRequest};
use weft_api::{ArtifactId, Digest, Envelope, ErrorCode, Id};

use crate::access::Session;
use crate::access::{Reader, can_read_artifact, membership};
use crate::content::Content;
use crate::engine::Engine;
use crate::error::Error;
use crate::error::reject;
use crate::evidence::handle::Evidence as Handle;

/// Largest JSON artifact the schema check loads into memory.
const MAX_SCHEMA_CONTENT: u64 = 16 * 1024 * 1024;
/// Largest schema document.
const MAX_SCHEMA: u64 = 1024 * 1024;

impl Handle<'_> {
    /// The built-in deterministic reviewer: runs each requested check over the cited artifacts
    /// and records one Evidence per check, signed by the server's key. A failed check is
    /// Evidence with outcome `fail`, not an error.
    pub async fn review(
        &self,
        work_item_id: Id,
        request: ReviewRequest,
        session: &Session,
    ) -> Result<Vec<EvidenceRecord>, Error> {
        let assignments = request
            .assignments()
            .map_err(|why| reject(ErrorCode::BadRequest, why))?;
        for (_, criterion) in &assignments {
            Id::parse("criterion", criterion)
                .map_err(|e| reject(ErrorCode::InvalidEvidence, e.message))?;
        }
        if request.artifacts.is_empty() || request.artifacts.len() > 256 {
            return Err(reject(ErrorCode::BadRequest, "name 1..=256 artifacts"));
        }
        let reader = session.reader();
        let (group, agent, work_item) = (
            session.group_id.clone(),
            session.agent_id.clone(),
            work_item_id.clone(),
        );
        let artifacts = request.artifacts.clone();
        let named_mission = request.mission_id.clone();
        let mission_id = self
            .0.db
            .read(move |conn| {
                match membership(conn, group.as_str(), agent.as_str())? {
                    Some((roles, _)) if roles.iter().any(|r| matches!(r, Role::Reviewer | Role::Coordinator)) => {}
                    _ => return Err(reject(ErrorCode::Forbidden, "the reviewer runs for coordinators and reviewers of the Group")),
                }
                // A WorkItem id is unique only within its Mission: the Mission is the one the
                // request names, or the only one the id is published under in the Group.
                // CTX-5: a Mission-scoped reviewer's other Missions are not there for it.
                let requester = crate::access::agent_reader(conn, &group, &agent)?;
                let missions = crate::rows::manifests::missions_of_work_item(conn, work_item.as_str(), group.as_str(), named_mission.as_ref().map(Id::as_str))?
                    .into_iter()
                    .filter(|mission| requester.sees_mission(group.as_str(), mission))
                    .collect::<Vec<_>>();
                let mission = match missions.as_slice() {
                    [] => return Err(reject(ErrorCode::UnknownWorkItem, format!("nothing was published for WorkItem {work_item} in {group}"))),
                    [mission] => mission.clone(),
                    _ => return Err(reject(ErrorCode::BadRequest, format!("WorkItem {work_item} is published under more than one Mission in {group}; name missionId"))),
                };
                for artifact in &artifacts {
                    if !can_read_artifact(conn, &requester, artifact)? {
                        return Err(reject(ErrorCode::UnknownArtifact, format!("{artifact} is not visible to you")));
                    }
                    let for_work_item = crate::rows::manifests::published_for_work_item(conn, artifact, group.as_str(), &mission, work_item.as_str())?;
                    if !for_work_item {
                        return Err(reject(
                            ErrorCode::MissionMismatch,
                            format!("{artifact} is not published for Mission {mission} WorkItem {work_item}"),
                        ));
                    }
                }
                Ok(Id::parse("missionId", &mission)?)
            })
            .await?;
        // Every check runs first, then all are recorded in one transaction: a check refused
        // (no download slot) or failing records nothing, not the checks before it.
        let mut signed = Vec::new();
        for (check, criterion) in &assignments {
            let (envelope, evidence) = self
                .sign_check(
                    *check,
                    criterion,
                    &work_item_id,
                    &session.group_id,
                    &mission_id,
                    &request.artifacts,
                    &reader,
                )
                .await?;
            let prepared = self
                .prepare_evidence(envelope.clone(), &Reader::Admin)
                .await?;
            signed.push((envelope, evidence, prepared));
        }
        let (kept, prepared): (Vec<_>, Vec<_>) = signed
            .into_iter()
            .map(|(envelope, evidence, prepared)| ((envelope, evidence), prepared))
            .unzip();
        // The caller again, under the Group's lock: the checks took long (every byte hashed),
        // and its session or role may have ended meanwhile, through another server too.
        let acting = crate::acting::Acting::session(session);
        let clock = std::sync::Arc::clone(&self.0.clock);
        let (group, agent) = (session.group_id.clone(), session.agent_id.clone());
        let recorded = self
            .0
            .db
            .write_in(&session.group_id, move |tx| {
                acting.check(tx, &crate::clock::format_instant(clock.now()))?;
                match membership(tx, group.as_str(), agent.as_str())? {
                    Some((roles, _))
                        if roles
                            .iter()
                            .any(|r| matches!(r, Role::Reviewer | Role::Coordinator)) => {}
                    _ => {
                        return Err(reject(
                            ErrorCode::Forbidden,
                            "the reviewer runs for coordinators and reviewers of the Group",
                        ));
                    }
                }
                let recorded = prepared
                    .into_iter()
                    .map(|evidence| Ok(evidence.record(tx)?.0))
                    .collect::<Result<Vec<_>, Error>>()?;
                // The answer itself, so that a route's idempotent answer commits with it.
                Ok(kept
                    .into_iter()
                    .zip(recorded)
                    .map(|((envelope, evidence), recorded)| EvidenceRecord {
                        evidence_id: recorded.evidence_id,
                        group_id: group.to_string(),
                        sequence: recorded.sequence,
                        envelope,
                        evidence,
                    })
                    .collect::<Vec<EvidenceRecord>>())
            })
            .await?;
        Ok(recorded)
    }

    /// EVD-3: after the submission appended at `sequence`, the built-in reviewer runs the
    /// checks the contract names (a criterion requiring `integrity_check` or
    /// `schema_validation`) over the submitted artifacts, as the Authority. Answers their
    /// Evidence, signed and checked but not recorded: the reaction that runs this
    /// (`reactions.rs`) records it in the transaction that marks the reaction done. Nothing
    /// when the WorkItem has left that submission (revised, resubmitted, closed).
    async fn review_submission(
        &self,
        work_item_id: Id,
        sequence: u64,
    ) -> Result<Vec<crate::evidence::Prepared>, Error> {
        let id = work_item_id.clone();
        let plan = self
            .0
            .db
            .read(move |conn| super::plan::submission_plan(conn, id.as_str(), sequence))
            .await?;
        let Some(plan) = plan else {
            return Ok(Vec::new());
        };
        let reader = Reader::Agent {
            agent_id: Id::parse("agentId", AUTHORITY_AGENT)?,
            group_id: plan.group_id.clone(),
            scope: crate::access::MissionScope::Group,
        };
        let mut records = Vec::new();
        for (criterion, methods) in &plan.criteria {
            if plan.artifacts.is_empty() {
                continue;
            }
            // The contract's criterion names these checks: each records under it.
            let checks: BTreeSet<Check> = methods
                .iter()
                .filter_map(|method| match method {
                    MethodKind::IntegrityCheck => Some(Check::Integrity),
                    MethodKind::SchemaValidation => Some(Check::Schema),
                    _ => None,
                })
                .collect();
            for check in checks {
                let (envelope, _) = self
                    .sign_check(
                        check,
                        criterion,
                        &work_item_id,
                        &plan.group_id,
                        &plan.mission_id,
                        &plan.artifacts,
                        &reader,
                    )
                    .await?;
                records.push(self.prepare_evidence(envelope, &Reader::Admin).await?);
            }
        }
        Ok(records)
    }

    /// The reaction to `work.submitted` (`reactions.rs`): the checks of the submission at
    /// `owed.sequence`, recorded with the reaction's row deleted in one transaction, and
    /// nothing recorded if the row is gone (another run recorded them): exactly once.
    pub(crate) async fn review_after_submission(
        &self,
        owed: &crate::reactions::Owed,
    ) -> Result<(), Error> {
        let work_item_id = Id::parse("workItemId", &owed.subject)?;
        let prepared = self.review_submission(work_item_id, owed.sequence).await?;
        let (group_id, sequence) = (owed.group_id.clone(), owed.sequence);
        // In the Group's lane, with its Commands and publications (`db/writer.rs`): its
        // Evidence locks that Group only.
        let n_recorded = self
            .0
            .db
            .write_in(&owed.group_id, move |tx| {
                if !crate::reactions::done(tx, &group_id, sequence)? {
                    return Ok(0);
                }
                let mut n_recorded = 0;
                for evidence in prepared {
                    let (_, new) = evidence.record(tx)?;
                    n_recorded += usize::from(new);
                }
                Ok(n_recorded)
            })
            .await?;
        tracing::debug!(n_recorded, "reviewed a submission");
        Ok(())
    }

    /// Runs one check over `artifacts`: its Evidence under `criterion`, signed by the server's
    /// key, not yet recorded. A failed check is Evidence with outcome `fail`.
    #[allow(clippy::too_many_arguments)]
    async fn sign_check(
        &self,
        check: Check,
        criterion: &str,
        work_item_id: &Id,
        group_id: &Id,
        mission_id: &Id,
        artifacts: &[ArtifactId],
        reader: &Reader,
    ) -> Result<(Envelope, Evidence), Error> {
        let (kind, name, findings) = match check {
            Check::Integrity => (
                MethodKind::IntegrityCheck,
                "weft integrity check",
                self.check_integrity(artifacts, reader).await?,
            ),
            Check::Schema => (
                MethodKind::SchemaValidation,
                "weft schema validation",
                self.check_schemas(artifacts, reader).await?,
            ),
        };
        // This run supersedes the reviewer's own record in force of the same check on the
        // criterion: a new run outweighs the last (an `inconclusive` for a busy store, a
        // `fail` before rework), never contests it (`weft_api::verdict::in_force`).
        let keys = (
            group_id.to_string(),
            mission_id.to_string(),
            work_item_id.to_string(),
            criterion.to_owned(),
        );
        let supersedes = self
            .0
            .db
            .read(move |conn| {
                let (group, mission, work_item, criterion) = &keys;
                crate::rows::evidence::newest_in_force_of(
                    conn,
                    (group, mission, work_item),
                    criterion,
                    kind.as_str(),
                    AUTHORITY_AGENT,
                )
            })
            .await?
            .map(crate::rows::artifact_id)
            .transpose()?;
        let outcome = if findings.iter().any(|f| f.outcome == Outcome::Fail) {
            Outcome::Fail
        } else if findings.iter().any(|f| f.outcome == Outcome::Inconclusive) {
            Outcome::Inconclusive
        } else {
            Outcome::Pass
        };
        let mut summary = String::new();
        for finding in &findings {
            let line = format!(
                "{} {}: {}\n",
                finding.outcome.as_str(),
                finding.artifact,
                finding.reason
            );
            if summary.len() + line.len() > weft_api::evidence::MAX_SUMMARY {
                break;
            }
            summary.push_str(&line);
        }
        let count =
            |o: Outcome| Metric::Number(findings.iter().filter(|f| f.outcome == o).count() as f64);
        let metrics = BTreeMap::from([
            (
                "artifacts".to_owned(),
                Metric::Number(findings.len() as f64),
            ),
            ("passed".to_owned(), count(Outcome::Pass)),
            ("failed".to_owned(), count(Outcome::Fail)),
            ("inconclusive".to_owned(), count(Outcome::Inconclusive)),
        ]);
        let evidence = Evidence {
            subject: Subject {
                kind: SubjectKind::WorkItem,
                id: work_item_id.to_string(),
            },
            mission_id: mission_id.clone(),
            group_id: group_id.clone(),
            work_item_id: work_item_id.clone(),
            criterion: criterion.to_owned(),
            method: Method {
                kind,
                name: name.to_owned(),
                version: env!("CARGO_PKG_VERSION").to_owned(),
            },
            result: EvidenceResult {
                outcome,
                summary: summary.trim_end().to_owned(),
                metrics,
            },
            producer: Producer {
                agent_id: Id::parse("agentId", AUTHORITY_AGENT)?,
                agent_card_version: "1".to_owned(),
            },
            timestamp: self.0.clock.now().fixed_offset(),
            artifacts: artifacts.to_vec(),
            supersedes,
            execution: None,
        };
        let payload = serde_json::to_vec(&evidence).map_err(Error::backend)?;
        let envelope = Envelope::sign(&self.0.authority, EVIDENCE_TYPE, &payload);
        Ok((envelope, evidence))
    }

    /// A re-hash of a stored file holds a download slot while it runs, as a GET does: the
    /// reviewer's own, whose review is refused past its caps (429 `too_many_downloads`, 503
    /// `overloaded`) and records nothing. The review after a submission runs as the Authority,
    /// one Agent id every Group shares, so it takes the Group's slot and the process's, and a
    /// refusal there is not an error that would end the whole review unseen: the artifact's
    /// finding is inconclusive, naming why (`Err`), the other checks still run, and a reviewer
    /// can run the check again.
    fn slot(content: Content, reader: &Reader) -> Result<Result<Content, String>, Error> {
        let authority = matches!(
            reader,
            Reader::Agent { agent_id, .. } if agent_id.as_str() == AUTHORITY_AGENT
        );
        match content.admitted(reader) {
            Ok(content) => Ok(Ok(content)),
            Err(Error::Rejected(rejection))
                if authority
                    && matches!(
                        rejection.code,
                        ErrorCode::TooManyDownloads | ErrorCode::Overloaded
                    ) =>
            {
                Ok(Err(format!(
                    "not read: {}; run the check again",
                    rejection.message
                )))
            }
            Err(error) => Err(error),
        }
    }

    /// Re-hashes each artifact's stored bytes through the verified read path (BLAKE3 against
    /// the address; a mismatch quarantines the blob) and, from the same bytes, SHA-256 against
    /// the digest recorded at upload, which an ordinary read does not recompute. Each re-hash
    /// of a stored file holds a download slot while it runs ([`Engine::slot`]).
    async fn check_integrity(
        &self,
        artifacts: &[ArtifactId],
        reader: &Reader,
    ) -> Result<Vec<Finding>, Error> {
        let corrupt = |artifact: ArtifactId| {
            Finding::new(
                artifact,
                Outcome::Fail,
                "stored bytes do not match their address; quarantined".into(),
            )
        };
        let mut findings = Vec::new();
        for artifact in artifacts {
            // The integrity check re-hashes what is stored, never a copy in memory.
            let content =
                match Engine::open_stored_content(self.0, Digest::Blake3(*artifact), reader, None)
                    .await
                {
                    Ok(content) => content,
                    Err(Error::Corrupt(_)) => {
                        findings.push(corrupt(*artifact));
                        continue;
                    }
                    Err(error) => return Err(error),
                };
            let recorded = content.digests;
            let content = match Self::slot(content, reader)? {
                Ok(content) => content,
                Err(reason) => {
                    findings.push(Finding::new(*artifact, Outcome::Inconclusive, reason));
                    continue;
                }
            };
            let sha256 = crate::hashing::Sha256Task::start();
            let hashed = content
                .into_body(None)
                .try_fold(sha256, |sha256, chunk| async move {
                    sha256.update(chunk).await?;
                    Ok(sha256)
                })
                .await;
            let finding = match hashed {
                Ok(sha256) => {
                    let (digest, size) = sha256.finish().await?;
                    if digest == recorded.sha256 && size == recorded.size {
                        Finding::new(
                            *artifact,
                            Outcome::Pass,
                            format!("{size} bytes re-hashed, blake3 and sha256 match"),
                        )
                    } else {
                        Finding::new(
                            *artifact,
                            Outcome::Fail,
                            format!(
                                "the bytes match their address, but hash to {digest} ({size} bytes) \
                                 where the index records {} ({} bytes)",
                                recorded.sha256, recorded.size
                            ),
                        )
                    }
                }
                Err(Error::Corrupt(_)) => corrupt(*artifact),
                Err(error) => return Err(error),
            };
            findings.push(finding);
        }
        Ok(findings)
    }

    async fn check_schemas(
        &self,
        artifacts: &[ArtifactId],
        reader: &Reader,
    ) -> Result<Vec<Finding>, Error> {
        let mut findings = Vec::new();
        for artifact in artifacts {
            findings.push(self.check_schema(*artifact, reader).await?);
        }
        Ok(findings)
    }

    /// The newest manifest of `artifact` that `reader` sees (`not_found` when it sees none).
    async fn newest_manifest(
        &self,
        artifact: ArtifactId,
        reader: &Reader,
    ) -> Result<Option<weft_api::Manifest>, Error> {
        let reader = reader.clone();
        self.0
            .db
            .read(move |conn| {
                let digest = Digest::Blake3(artifact);
                let visible =
                    crate::rows::manifests::visible_manifests(conn, reader.seer(), &digest, true)?;
                if visible.is_empty() {
                    return Err(reject(
                        ErrorCode::NotFound,
                        format!("no artifact {digest} is visible to you"),
                    ));
                }
                // The newest whose record is kept (a tombstone's went by policy, issue #46).
                let Some(envelope) = visible
                    .into_iter()
                    .filter_map(|v| v.envelope)
                    .find(|e| !e.is_empty())
                else {
                    return Ok(None);
                };
                let envelope: weft_api::Envelope =
                    serde_json::from_str(&envelope).map_err(Error::backend)?;
                let payload = weft_api::dsse::BASE64
                    .decode(&envelope.payload)
                    .map_err(Error::backend)?;
                Ok(Some(weft_api::Manifest::parse(&payload)?))
            })
            .await
    }

    async fn check_schema(&self, artifact: ArtifactId, reader: &Reader) -> Result<Finding, Error> {
        let inconclusive = |reason: &str| {
            Ok(Finding::new(
                artifact,
                Outcome::Inconclusive,
                reason.to_owned(),
            ))
        };
        let Some(manifest) = self.newest_manifest(artifact, reader).await? else {
            return inconclusive("no manifest");
        };
        let content = &manifest.content;
        let media_type = content
            .media_type
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        if media_type != "application/json" && !media_type.ends_with("+json") {
            return inconclusive("not a JSON artifact");
        }
        let Some(schema_ref) = content.schema.clone() else {
            return inconclusive("the manifest names no schema");
        };
        let schema_artifact = match ArtifactId::parse(&schema_ref) {
            Ok(id) => Some(id),
            Err(_) => {
                let uri = schema_ref.clone();
                self.0
                    .db
                    .read(move |conn| crate::rows::schemas::by_uri(conn, &uri))
                    .await?
            }
        };
        let Some(schema_artifact) = schema_artifact else {
            return inconclusive("the schema URI is not registered with the server");
        };
        let schema = match self.read_small(schema_artifact, reader, MAX_SCHEMA).await? {
            Ok(bytes) => bytes,
            Err(reason) => {
                return Ok(Finding::new(
                    artifact,
                    Outcome::Inconclusive,
                    format!("schema {schema_artifact}: {reason}"),
                ));
            }
        };
        let document = match self
            .read_small(artifact, reader, MAX_SCHEMA_CONTENT)
            .await?
        {
            Ok(bytes) => bytes,
            Err(reason) => {
                return Ok(Finding::new(
                    artifact,
                    if reason.contains("verification") {
                        Outcome::Fail
                    } else {
                        Outcome::Inconclusive
                    },
                    reason,
                ));
            }
        };
        tokio::task::spawn_blocking(move || validate(artifact, &schema, &document))
            .await
            .map_err(Error::backend)
    }

    /// Reads a whole (small) artifact, verified; `Ok(Err(reason))` when it cannot be used.
    async fn read_small(
        &self,
        artifact: ArtifactId,
        reader: &Reader,
        max: u64,
    ) -> Result<Result<Vec<u8>, String>, Error> {
        let content = match Engine::open_content(self.0, Digest::Blake3(artifact), reader).await {
            Ok(content) => content,
            Err(Error::Corrupt(_)) => return Ok(Err("stored bytes failed verification".into())),
            Err(Error::Rejected(rejection)) if rejection.code == ErrorCode::NotFound => {
                return Ok(Err("not visible".into()));
            }
            Err(error) => return Err(error),
        };
        if content.digests.size > max {
            return Ok(Err(format!(
                "larger than {max} bytes; not validated in memory"
            )));
        }
        let content = match Self::slot(content, reader)? {
            Ok(content) => content,
            Err(reason) => return Ok(Err(reason)),
        };
        match content
            .into_body(None)
            .try_fold(Vec::new(), |mut all, chunk| async move {
                all.extend_from_slice(&chunk);
                Ok(all)
            })
            .await
        {
            Ok(bytes) => Ok(Ok(bytes)),
            Err(Error::Corrupt(_)) => Ok(Err("stored bytes failed verification".into())),
            Err(error) => Err(error),
        }
    }
}

/// One artifact's result within a check.
#[derive(Debug)]
struct Finding {
    artifact: ArtifactId,
    outcome: Outcome,
    reason: String,
}

impl Finding {
    fn new(artifact: ArtifactId, outcome: Outcome, reason: String) -> Self {
        Self {
            artifact,
            outcome,
            reason,
        }
    }
}

/// Validates `document` against `schema` (JSON Schema; no remote or file references are ever
/// fetched: the validator is built without resolvers).
fn validate(artifact: ArtifactId, schema: &[u8], document: &[u8]) -> Finding {
    let Ok(schema) = serde_json::from_slice::<serde_json::Value>(schema) else {
        return Finding::new(
            artifact,
            Outcome::Inconclusive,
            "the schema is not JSON".into(),
        );
    };
    let validator = match jsonschema::validator_for(&schema) {
        Ok(validator) => validator,
        Err(error) => {
            return Finding::new(
                artifact,
                Outcome::Inconclusive,
                format!("the schema is not usable: {error}"),
            );
        }
    };
    let document = match serde_json::from_slice::<serde_json::Value>(document) {
        Ok(document) => document,
        Err(error) => {
            return Finding::new(artifact, Outcome::Fail, format!("not valid JSON: {error}"));
        }
    };
    let errors: Vec<String> = validator
        .iter_errors(&document)
        .take(5)
        .map(|error| format!("{} at {}", error, error.instance_path()))
        .collect();
    if errors.is_empty() {
        Finding::new(artifact, Outcome::Pass, "valid against its schema".into())
    } else {
        Finding::new(artifact, Outcome::Fail, errors.join("; "))
    }
}
