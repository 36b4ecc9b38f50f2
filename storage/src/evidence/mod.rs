//! Evidence: recording signed records, reading them by criterion, and the built-in
//! deterministic reviewer (EVD-3 steps 1, 2 and 5: integrity and schema checks whose results
//! are preserved as Evidence signed by the server's key).

mod reviewer;

use std::collections::{BTreeMap, BTreeSet};

use base64::Engine as _;
use rusqlite::{Connection, OptionalExtension as _, params};
use weft_api::dsse::BASE64;
use weft_api::evidence::{AUTHORITY_AGENT, Evidence, MethodKind, Outcome};
use weft_api::kinds;
use weft_api::session::Role;
use weft_api::views::{
    CriterionSummary, EvidencePage, EvidenceRecord, EvidenceRecorded, OutcomeCounts, Verdict,
};
use weft_api::{ArtifactId, Envelope, ErrorCode, EventPayload, Id};

use crate::access::{
    AuthorityMay, Reader, Signed, agent_by_keyid, can_read_artifact, group_exists, membership,
};
use crate::engine::Engine;
use crate::error::Error;
use crate::error::reject;
use crate::events::{self, to32};

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

pub(super) fn decode(envelope_json: &str) -> Result<(Envelope, Evidence), Error> {
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
        Reader::Agent { group_id, .. } => {
            args.push(Box::new(group_id.to_string()));
            format!(" AND e.group_id = ?{}", args.len())
        }
    }
}

impl Engine {
    pub(crate) async fn record_evidence(
        &self,
        envelope: Envelope,
        caller: &Reader,
    ) -> Result<(EvidenceRecorded, bool), Error> {
        let Signed {
            signer,
            keyid,
            payload_id: evidence_id,
            value,
        } = self
            .verify_signed::<Evidence>(&envelope, AuthorityMay::Sign)
            .await?;
        let evidence = value.into_inner();
        let is_authority = signer.as_str() == AUTHORITY_AGENT;
        match caller {
            Reader::Agent { agent_id, .. } if *agent_id != signer => {
                return Err(reject(
                    ErrorCode::ProducerMismatch,
                    "an agent records only Evidence it signed",
                ));
            }
            Reader::Agent { .. } if is_authority => {
                return Err(reject(
                    ErrorCode::ProducerMismatch,
                    "only the server records its own Evidence",
                ));
            }
            // A session acts in its own Group only: elsewhere it is not a member.
            Reader::Agent { group_id, .. } if *group_id != evidence.group_id => {
                return Err(reject(
                    ErrorCode::NotAMember,
                    format!("{signer} is not a member of {}", evidence.group_id),
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
                    Reader::Agent { agent_id: signer.clone(), group_id: evidence.group_id.clone() }
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
                let event = EventPayload::EvidenceRecorded(kinds::EvidenceRecorded {
                    artifacts: evidence.artifacts.clone(),
                    criterion: evidence.criterion.clone(),
                    evidence_id,
                    method: evidence.method.kind,
                    mission_id: evidence.mission_id.clone(),
                    outcome: evidence.result.outcome,
                    producer: signer.clone(),
                    supersedes: evidence.supersedes,
                    work_item_id: evidence.work_item_id.clone(),
                });
                let sequence = events::append(txn, &evidence.group_id, &event, now)?;
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
        let outcome: Outcome =
            serde_json::from_value(serde_json::json!(outcome)).map_err(Error::backend)?;
        let method: MethodKind =
            serde_json::from_value(serde_json::json!(method)).map_err(Error::backend)?;
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
