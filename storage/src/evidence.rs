//! Evidence: recording signed records, reading them by criterion, and the built-in
//! deterministic reviewer (EVD-3 steps 1, 2 and 5: integrity and schema checks whose results
//! are preserved as Evidence signed by the server's key).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use base64::Engine as _;
use futures::TryStreamExt as _;
use rusqlite::{Connection, OptionalExtension as _, params};
use serde_json::json;
use weft_api::dsse::BASE64;
use weft_api::evidence::{
    AUTHORITY_AGENT, EVIDENCE_TYPE, Evidence, EvidenceResult, Method, MethodKind, Metric, Outcome,
    Subject, SubjectKind,
};
use weft_api::manifest::Producer;
use weft_api::session::Role;
use weft_api::views::{
    Check, CriterionSummary, EvidencePage, EvidenceRecord, EvidenceRecorded, OutcomeCounts,
    ReviewRequest, Verdict,
};
use weft_api::{ArtifactId, Digest, Envelope, ErrorCode, Id, KeyId};

use crate::Session;
use crate::error::Error;
use crate::events::{self, to32};
use crate::records::{
    Inner, Reader, agent_by_keyid, can_read_artifact, group_exists, membership, reject,
};

/// Filters of `GET /v1/evidence`.
#[derive(Clone, Debug, Default)]
pub struct EvidenceFilter {
    pub work_item_id: Option<Id>,
    pub criterion: Option<String>,
    pub outcome: Option<Outcome>,
    pub method: Option<MethodKind>,
    pub producer: Option<Id>,
    pub mission_id: Option<Id>,
    pub artifact: Option<ArtifactId>,
    /// Cursor from a previous page: only records older than it.
    pub after: Option<u64>,
    pub limit: u32,
}

/// Largest JSON artifact the schema check loads into memory.
const MAX_SCHEMA_CONTENT: u64 = 16 * 1024 * 1024;
/// Largest schema document.
const MAX_SCHEMA: u64 = 1024 * 1024;

fn decode(envelope_json: &str) -> Result<(Envelope, Evidence), Error> {
    let envelope: Envelope = serde_json::from_str(envelope_json).map_err(Error::backend)?;
    let payload = BASE64.decode(&envelope.payload).map_err(Error::backend)?;
    let evidence = Evidence::parse(&payload)?;
    Ok((envelope, evidence))
}

fn roles_may_record(roles: &[Role]) -> bool {
    roles
        .iter()
        .any(|role| matches!(role, Role::Reviewer | Role::Worker | Role::Coordinator))
}

/// The SQL fragment and parameters restricting Evidence rows to `reader`'s Groups.
fn visible_clause(reader: &Reader, args: &mut Vec<Box<dyn rusqlite::ToSql>>) -> String {
    match reader {
        Reader::Admin => String::new(),
        Reader::Agent(agent_id) => {
            args.push(Box::new(agent_id.to_string()));
            format!(
                " AND e.group_id IN (SELECT group_id FROM memberships WHERE agent_id = ?{})",
                args.len()
            )
        }
    }
}

impl Inner {
    /// The server's signing key as `(keyid, public key)`.
    pub(crate) fn authority_key(&self) -> (KeyId, ed25519_dalek::VerifyingKey) {
        let public = self.authority.verifying_key();
        (KeyId::of(&public), public)
    }

    pub(crate) async fn record_evidence(
        &self,
        envelope: Envelope,
        caller: &Reader,
    ) -> Result<(EvidenceRecorded, bool), Error> {
        let keyid = envelope.signer_keyid()?;
        let (authority_keyid, authority_key) = self.authority_key();
        let (signer, key, card_version) = if keyid == authority_keyid {
            (
                Id::parse("agentId", AUTHORITY_AGENT)?,
                authority_key,
                "1".to_owned(),
            )
        } else {
            let lookup = keyid.clone();
            match self
                .db
                .read(move |conn| agent_by_keyid(conn, &lookup))
                .await?
            {
                Some(agent) => agent,
                None => {
                    return Err(reject(
                        ErrorCode::UnknownKey,
                        format!("no agent is registered with key {keyid}"),
                    ));
                }
            }
        };
        let verified = envelope.verify(EVIDENCE_TYPE, &key)?;
        let evidence_id = ArtifactId::of(verified.value());
        let evidence = Evidence::parse(verified.value())?;
        if evidence.producer.agent_id != signer {
            return Err(reject(
                ErrorCode::ProducerMismatch,
                format!(
                    "signed by {signer}, but the producer is {}",
                    evidence.producer.agent_id
                ),
            ));
        }
        if evidence.producer.agent_card_version != card_version {
            return Err(reject(
                ErrorCode::ProducerMismatch,
                format!("{signer}'s registered agent card version is {card_version}"),
            ));
        }
        let is_authority = signer.as_str() == AUTHORITY_AGENT;
        match caller {
            Reader::Agent(caller) if *caller != signer => {
                return Err(reject(
                    ErrorCode::ProducerMismatch,
                    "an agent records only Evidence it signed",
                ));
            }
            Reader::Agent(_) if is_authority => {
                return Err(reject(
                    ErrorCode::ProducerMismatch,
                    "only the server records its own Evidence",
                ));
            }
            _ => {}
        }
        let envelope_json = serde_json::to_string(&envelope).map_err(Error::backend)?;
        let now = self.clock.now();
        self.db
            .write(move |txn| {
                let existing: Option<u64> = txn
                    .query_row("SELECT sequence FROM evidence WHERE evidence_id = ?1", [&evidence_id.0[..]], |row| row.get(0))
                    .optional()?;
                if let Some(sequence) = existing {
                    return Ok((EvidenceRecorded { evidence_id, sequence }, false));
                }
                let group = evidence.group_id.as_str();
                if !group_exists(txn, group)? {
                    return Err(reject(ErrorCode::UnknownGroup, format!("group {group} does not exist")));
                }
                let producer = if is_authority {
                    Reader::Admin
                } else {
                    match agent_by_keyid(txn, &keyid)? {
                        Some((agent_id, _, _)) if agent_id == signer => {}
                        _ => return Err(reject(ErrorCode::UnknownKey, "the signing key was unregistered meanwhile")),
                    }
                    match membership(txn, group, signer.as_str())? {
                        Some((roles, _)) if roles_may_record(&roles) => {}
                        Some(_) => return Err(reject(ErrorCode::Forbidden, format!("{signer} may not record Evidence in {group}"))),
                        None => return Err(reject(ErrorCode::NotAMember, format!("{signer} is not a member of {group}"))),
                    }
                    Reader::Agent(signer.clone())
                };
                for artifact in &evidence.artifacts {
                    if !can_read_artifact(txn, &producer, artifact)? {
                        return Err(reject(ErrorCode::UnknownArtifact, format!("{artifact} is not published in a group {signer} can read")));
                    }
                }
                if let Some(earlier) = &evidence.supersedes {
                    let target: Option<(String, String)> = txn
                        .query_row("SELECT work_item_id, group_id FROM evidence WHERE evidence_id = ?1", [&earlier.0[..]], |row| {
                            Ok((row.get(0)?, row.get(1)?))
                        })
                        .optional()?;
                    match target {
                        None => return Err(reject(ErrorCode::UnknownEvidence, format!("supersedes names unknown Evidence {earlier}"))),
                        Some((work_item, group_id)) if work_item != evidence.work_item_id.as_str() || group_id != group => {
                            return Err(reject(ErrorCode::SupersedesMismatch, "supersedes names Evidence of another WorkItem"));
                        }
                        Some(_) => {}
                    }
                }
                let event = json!({
                    "evidenceId": evidence_id,
                    "missionId": evidence.mission_id,
                    "workItemId": evidence.work_item_id,
                    "criterion": evidence.criterion,
                    "outcome": evidence.result.outcome,
                    "method": evidence.method.kind,
                    "producer": signer,
                    "artifacts": evidence.artifacts,
                    "supersedes": evidence.supersedes,
                });
                let sequence = events::append(txn, &evidence.group_id, "evidence.recorded", &event, now)?;
                txn.execute(
                    "INSERT INTO evidence (evidence_id, group_id, mission_id, work_item_id, criterion, outcome, method_kind,
                                           producer, timestamp, supersedes, envelope, sequence)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
                    params![
                        &evidence_id.0[..], group, evidence.mission_id.as_str(), evidence.work_item_id.as_str(),
                        evidence.criterion, evidence.result.outcome.as_str(), evidence.method.kind.as_str(),
                        signer.as_str(), evidence.timestamp.to_rfc3339(), evidence.supersedes.map(|id| id.0.to_vec()),
                        envelope_json, sequence
                    ],
                )?;
                for artifact in &evidence.artifacts {
                    txn.execute(
                        "INSERT INTO evidence_artifacts (evidence_id, blake3) VALUES (?1, ?2)",
                        params![&evidence_id.0[..], &artifact.0[..]],
                    )?;
                }
                Ok((EvidenceRecorded { evidence_id, sequence }, true))
            })
            .await
    }

    pub(crate) async fn list_evidence(
        &self,
        filter: EvidenceFilter,
        reader: &Reader,
    ) -> Result<EvidencePage, Error> {
        let reader = reader.clone();
        let limit = filter.limit.clamp(1, 1000);
        self.db
            .read(move |conn| {
                let mut args: Vec<Box<dyn rusqlite::ToSql>> = Vec::new();
                let mut sql = String::from(
                    "SELECT e.rowid, e.evidence_id, e.group_id, e.sequence, e.envelope FROM evidence e WHERE 1 = 1",
                );
                let mut add = |clause: &str, value: Box<dyn rusqlite::ToSql>, args: &mut Vec<Box<dyn rusqlite::ToSql>>| {
                    args.push(value);
                    sql.push_str(&format!(" AND {clause} ?{}", args.len()));
                };
                if let Some(v) = &filter.work_item_id { add("e.work_item_id =", Box::new(v.to_string()), &mut args); }
                if let Some(v) = &filter.criterion { add("e.criterion =", Box::new(v.clone()), &mut args); }
                if let Some(v) = filter.outcome { add("e.outcome =", Box::new(v.as_str()), &mut args); }
                if let Some(v) = filter.method { add("e.method_kind =", Box::new(v.as_str()), &mut args); }
                if let Some(v) = &filter.producer { add("e.producer =", Box::new(v.to_string()), &mut args); }
                if let Some(v) = &filter.mission_id { add("e.mission_id =", Box::new(v.to_string()), &mut args); }
                if let Some(v) = filter.after { add("e.rowid <", Box::new(v), &mut args); }
                if let Some(artifact) = filter.artifact {
                    add("e.evidence_id IN (SELECT evidence_id FROM evidence_artifacts WHERE blake3 =", Box::new(artifact.0.to_vec()), &mut args);
                    sql.push(')');
                }
                sql.push_str(&visible_clause(&reader, &mut args));
                args.push(Box::new(limit + 1));
                sql.push_str(&format!(" ORDER BY e.rowid DESC LIMIT ?{}", args.len()));
                let params: Vec<&dyn rusqlite::ToSql> = args.iter().map(|arg| arg.as_ref()).collect();
                let mut statement = conn.prepare(&sql)?;
                let rows = statement
                    .query_map(params.as_slice(), |row| {
                        Ok((row.get::<_, u64>(0)?, row.get::<_, Vec<u8>>(1)?, row.get::<_, String>(2)?, row.get::<_, u64>(3)?, row.get::<_, String>(4)?))
                    })?
                    .collect::<Result<Vec<_>, _>>()?;
                let mut items = Vec::new();
                let mut next = None;
                let mut last_rowid = 0;
                for (index, (rowid, evidence_id, group_id, sequence, envelope)) in rows.into_iter().enumerate() {
                    if index as u32 == limit {
                        next = Some(last_rowid);
                        break;
                    }
                    last_rowid = rowid;
                    let (envelope, evidence) = decode(&envelope)?;
                    items.push(EvidenceRecord { evidence_id: ArtifactId(to32(evidence_id)?), group_id, sequence, envelope, evidence });
                }
                Ok(EvidencePage { items, next })
            })
            .await
    }

    pub(crate) async fn evidence(
        &self,
        evidence_id: ArtifactId,
        reader: &Reader,
    ) -> Result<EvidenceRecord, Error> {
        let reader = reader.clone();
        self.db
            .read(move |conn| {
                let mut args: Vec<Box<dyn rusqlite::ToSql>> = vec![Box::new(evidence_id.0.to_vec())];
                let sql = format!(
                    "SELECT e.group_id, e.sequence, e.envelope FROM evidence e WHERE e.evidence_id = ?1{}",
                    visible_clause(&reader, &mut args)
                );
                let params: Vec<&dyn rusqlite::ToSql> = args.iter().map(|arg| arg.as_ref()).collect();
                let row = conn
                    .query_row(&sql, params.as_slice(), |row| Ok((row.get::<_, String>(0)?, row.get::<_, u64>(1)?, row.get::<_, String>(2)?)))
                    .optional()?;
                let Some((group_id, sequence, envelope)) = row else {
                    return Err(reject(ErrorCode::NotFound, format!("no Evidence {evidence_id} is visible to you")));
                };
                let (envelope, evidence) = decode(&envelope)?;
                Ok(EvidenceRecord { evidence_id, group_id, sequence, envelope, evidence })
            })
            .await
    }

    pub(crate) async fn criteria(
        &self,
        work_item_id: Id,
        reader: &Reader,
    ) -> Result<Vec<CriterionSummary>, Error> {
        let reader = reader.clone();
        self.db
            .read(move |conn| criteria_of(conn, &work_item_id, &reader))
            .await
    }

    pub(crate) async fn register_schema(
        &self,
        uri: String,
        artifact: ArtifactId,
    ) -> Result<(), Error> {
        if uri.is_empty()
            || uri.len() > 2048
            || !(uri.starts_with("https://")
                || uri.starts_with("http://")
                || uri.starts_with("urn:"))
        {
            return Err(reject(
                ErrorCode::BadRequest,
                "uri must be an absolute http(s) or urn URI of at most 2048 bytes",
            ));
        }
        self.db
            .write(move |txn| {
                if !can_read_artifact(txn, &Reader::Admin, &artifact)? {
                    return Err(reject(ErrorCode::UnknownArtifact, format!("{artifact} is not a published artifact")));
                }
                txn.execute(
                    "INSERT INTO schemas (uri, blake3) VALUES (?1, ?2) ON CONFLICT (uri) DO UPDATE SET blake3 = excluded.blake3",
                    params![uri, &artifact.0[..]],
                )?;
                Ok(())
            })
            .await
    }

    /// The built-in deterministic reviewer: runs each requested check over the cited artifacts
    /// and records one Evidence per check, signed by the server's key. A failed check is
    /// Evidence with outcome `fail`, not an error.
    pub(crate) async fn review(
        this: &Arc<Self>,
        work_item_id: Id,
        request: ReviewRequest,
        session: &Session,
    ) -> Result<Vec<EvidenceRecord>, Error> {
        Id::parse("criterion", &request.criterion)
            .map_err(|e| reject(ErrorCode::InvalidEvidence, e.message))?;
        let checks: BTreeSet<Check> = request.checks.iter().copied().collect();
        if checks.is_empty() || request.artifacts.is_empty() || request.artifacts.len() > 256 {
            return Err(reject(
                ErrorCode::BadRequest,
                "name at least one check and 1..=256 artifacts",
            ));
        }
        let reader = Reader::Agent(session.agent_id.clone());
        let (group, agent, work_item) = (
            session.group_id.clone(),
            session.agent_id.clone(),
            work_item_id.clone(),
        );
        let artifacts = request.artifacts.clone();
        let mission_id = this
            .db
            .read(move |conn| {
                match membership(conn, group.as_str(), agent.as_str())? {
                    Some((roles, _)) if roles.iter().any(|r| matches!(r, Role::Reviewer | Role::Coordinator)) => {}
                    _ => return Err(reject(ErrorCode::Forbidden, "the reviewer runs for coordinators and reviewers of the Group")),
                }
                let mission: Option<String> = conn
                    .query_row(
                        "SELECT mission_id FROM manifests WHERE work_item_id = ?1 AND group_id = ?2 LIMIT 1",
                        params![work_item.as_str(), group.as_str()],
                        |row| row.get(0),
                    )
                    .optional()?;
                let Some(mission) = mission else {
                    return Err(reject(ErrorCode::UnknownWorkItem, format!("nothing was published for WorkItem {work_item} in {group}")));
                };
                for artifact in &artifacts {
                    if !can_read_artifact(conn, &Reader::Agent(agent.clone()), artifact)? {
                        return Err(reject(ErrorCode::UnknownArtifact, format!("{artifact} is not visible to you")));
                    }
                }
                Ok(Id::parse("missionId", &mission)?)
            })
            .await?;
        let mut records = Vec::new();
        for check in checks {
            let (kind, name, findings) = match check {
                Check::Integrity => (
                    MethodKind::IntegrityCheck,
                    "weft integrity check",
                    this.check_integrity(&request.artifacts, &reader).await?,
                ),
                Check::Schema => (
                    MethodKind::SchemaValidation,
                    "weft schema validation",
                    this.check_schemas(&request.artifacts, &reader).await?,
                ),
            };
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
            let count = |o: Outcome| {
                Metric::Number(findings.iter().filter(|f| f.outcome == o).count() as f64)
            };
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
                group_id: session.group_id.clone(),
                work_item_id: work_item_id.clone(),
                criterion: request.criterion.clone(),
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
                timestamp: this.clock.now().fixed_offset(),
                artifacts: request.artifacts.clone(),
                supersedes: None,
            };
            let payload = serde_json::to_vec(&evidence).map_err(Error::backend)?;
            let envelope = Envelope::sign(&this.authority, EVIDENCE_TYPE, &payload);
            let (recorded, _) = this
                .record_evidence(envelope.clone(), &Reader::Admin)
                .await?;
            records.push(EvidenceRecord {
                evidence_id: recorded.evidence_id,
                group_id: session.group_id.to_string(),
                sequence: recorded.sequence,
                envelope,
                evidence,
            });
        }
        Ok(records)
    }

    async fn check_integrity(
        self: &Arc<Self>,
        artifacts: &[ArtifactId],
        reader: &Reader,
    ) -> Result<Vec<Finding>, Error> {
        let mut findings = Vec::new();
        for artifact in artifacts {
            let outcome = match Inner::open_content(self, Digest::Blake3(*artifact), reader).await {
                Ok(content) => {
                    let size = content.digests.size;
                    match content
                        .into_body(None)
                        .try_fold(0u64, |n, chunk| async move { Ok(n + chunk.len() as u64) })
                        .await
                    {
                        Ok(_) => Finding::new(
                            *artifact,
                            Outcome::Pass,
                            format!("{size} bytes re-hashed, blake3 and sha256 match"),
                        ),
                        Err(Error::Corrupt(_)) => Finding::new(
                            *artifact,
                            Outcome::Fail,
                            "stored bytes do not match their address; quarantined".into(),
                        ),
                        Err(error) => return Err(error),
                    }
                }
                Err(Error::Corrupt(_)) => Finding::new(
                    *artifact,
                    Outcome::Fail,
                    "stored bytes do not match their address; quarantined".into(),
                ),
                Err(error) => return Err(error),
            };
            findings.push(outcome);
        }
        Ok(findings)
    }

    async fn check_schemas(
        self: &Arc<Self>,
        artifacts: &[ArtifactId],
        reader: &Reader,
    ) -> Result<Vec<Finding>, Error> {
        let mut findings = Vec::new();
        for artifact in artifacts {
            findings.push(self.check_schema(*artifact, reader).await?);
        }
        Ok(findings)
    }

    async fn check_schema(
        self: &Arc<Self>,
        artifact: ArtifactId,
        reader: &Reader,
    ) -> Result<Finding, Error> {
        let inconclusive = |reason: &str| {
            Ok(Finding::new(
                artifact,
                Outcome::Inconclusive,
                reason.to_owned(),
            ))
        };
        let view = self.artifact(Digest::Blake3(artifact), reader).await?;
        let Some(record) = view.manifests.last() else {
            return inconclusive("no manifest");
        };
        let content = &record.manifest.content;
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
                self.db
                    .read(move |conn| {
                        let row: Option<Vec<u8>> = conn
                            .query_row("SELECT blake3 FROM schemas WHERE uri = ?1", [uri], |row| {
                                row.get(0)
                            })
                            .optional()?;
                        row.map(|bytes| Ok(ArtifactId(to32(bytes)?))).transpose()
                    })
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
        self: &Arc<Self>,
        artifact: ArtifactId,
        reader: &Reader,
        max: u64,
    ) -> Result<Result<Vec<u8>, String>, Error> {
        let content = match Inner::open_content(self, Digest::Blake3(artifact), reader).await {
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

fn criteria_of(
    conn: &Connection,
    work_item_id: &Id,
    reader: &Reader,
) -> Result<Vec<CriterionSummary>, Error> {
    let mut args: Vec<Box<dyn rusqlite::ToSql>> = vec![Box::new(work_item_id.to_string())];
    let sql = format!(
        "SELECT e.evidence_id, e.criterion, e.outcome, e.method_kind, e.producer, e.timestamp, e.sequence,
                EXISTS (SELECT 1 FROM evidence s WHERE s.supersedes = e.evidence_id)
         FROM evidence e WHERE e.work_item_id = ?1{} ORDER BY e.rowid",
        visible_clause(reader, &mut args)
    );
    let params: Vec<&dyn rusqlite::ToSql> = args.iter().map(|arg| arg.as_ref()).collect();
    let mut statement = conn.prepare(&sql)?;
    let rows = statement
        .query_map(params.as_slice(), |row| {
            Ok((
                row.get::<_, Vec<u8>>(0)?,
                row.get::<_, String>(1)?,
                row.get::<_, String>(2)?,
                row.get::<_, String>(3)?,
                row.get::<_, String>(4)?,
                row.get::<_, String>(5)?,
                row.get::<_, u64>(6)?,
                row.get::<_, bool>(7)?,
            ))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    struct Acc {
        latest: Option<Verdict>,
        counts: OutcomeCounts,
        producers: BTreeSet<String>,
        in_force: BTreeSet<Outcome>,
    }
    let mut by_criterion: BTreeMap<String, Acc> = BTreeMap::new();
    for (evidence_id, criterion, outcome, method, producer, timestamp, sequence, superseded) in rows
    {
        let outcome: Outcome = serde_json::from_value(json!(outcome)).map_err(Error::backend)?;
        let method: MethodKind = serde_json::from_value(json!(method)).map_err(Error::backend)?;
        let acc = by_criterion.entry(criterion).or_insert_with(|| Acc {
            latest: None,
            counts: OutcomeCounts::default(),
            producers: BTreeSet::new(),
            in_force: BTreeSet::new(),
        });
        match outcome {
            Outcome::Pass => acc.counts.pass += 1,
            Outcome::Fail => acc.counts.fail += 1,
            Outcome::Inconclusive => acc.counts.inconclusive += 1,
        }
        acc.producers.insert(producer.clone());
        if !superseded {
            acc.in_force.insert(outcome);
            // Rows come in record order, so the last one in force is the latest verdict.
            acc.latest = Some(Verdict {
                evidence_id: ArtifactId(to32(evidence_id)?),
                outcome,
                method,
                producer,
                timestamp,
                sequence,
            });
        }
    }
    Ok(by_criterion
        .into_iter()
        .filter_map(|(criterion, acc)| {
            let latest = acc.latest?;
            Some(CriterionSummary {
                criterion,
                latest,
                counts: acc.counts,
                producers: acc.producers.into_iter().collect(),
                contested: acc.in_force.len() > 1,
            })
        })
        .collect())
}
