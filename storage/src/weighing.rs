//! The Evidence of a WorkItem as the rules weigh it, and the one way a record enters the log.
//! [`criteria_of`] answers, per acceptance criterion, the verdict in force (`weft_api::verdict`:
//! newest of the highest standing, contested or not) with its counts and producers; the
//! reviewer's view and `work.accept_result` (EVD-3) both read it. [`insert_record`] appends
//! `evidence.recorded` and writes the record's rows; `evidence/` records what Agents sign, and
//! `work/` what the Authority signs for a child Mission (T16).
//!
//! A leaf under the features: it imports rows, `standing.rs`, `events.rs` and `access`, so
//! `evidence/` and `work/` share it without reaching into each other.

use std::collections::{BTreeMap, BTreeSet};

use crate::sql::Connection;
use weft_api::evidence::{Evidence, MethodKind, Outcome};
use weft_api::kinds;
use weft_api::verdict::{Standing, Weighed, in_force};
use weft_api::views::{CriteriaView, CriterionSummary, OutcomeCounts, Verdict};
use weft_api::{ArtifactId, ErrorCode, EventPayload, Id};

use crate::access::Reader;
use crate::error::{Error, reject};
use crate::events::{self, to32};

/// The verdict per criterion of one WorkItem of one Mission, from the Evidence the reader
/// may see. A WorkItem id is only unique within a Mission, so when the reader's Evidence for
/// it spans several Missions (or, for the operator, Groups) the caller must name the Mission.
pub(crate) fn criteria_of(
    conn: &Connection,
    work_item_id: &Id,
    mission_id: Option<&Id>,
    reader: &Reader,
) -> Result<CriteriaView, Error> {
    let rows = crate::rows::evidence::of_work_item(
        conn,
        work_item_id.as_str(),
        mission_id.map(Id::as_str),
        &reader.seer(),
    )?;
    let scopes: BTreeSet<&(String, String)> = rows.iter().map(|(_, scope)| scope).collect();
    if scopes.len() > 1 {
        return Err(reject(
            ErrorCode::BadRequest,
            format!(
                "WorkItem {work_item_id} has Evidence under more than one Mission; name missionId"
            ),
        ));
    }
    let mission = scopes
        .first()
        .map(|(_, mission)| mission.clone())
        .or_else(|| mission_id.map(Id::to_string));
    // Separation of duties, at weigh time: see `standing::weighed`.
    let workers = match rows.first() {
        Some((_, (group, _))) => crate::standing::worked_on(conn, work_item_id.as_str(), group)?,
        None => BTreeSet::new(),
    };
    let superseded_now = crate::standing::superseded(conn, work_item_id.as_str(), &workers)?;
    struct Acc {
        records: Vec<(Weighed, Verdict)>,
        counts: OutcomeCounts,
        producers: BTreeSet<String>,
    }
    let mut by_criterion: BTreeMap<String, Acc> = BTreeMap::new();
    for (row, _) in rows {
        let (evidence_id, criterion, outcome, method, producer, timestamp, sequence, standing) =
            row;
        let superseded = superseded_now.contains(&evidence_id);
        let outcome: Outcome =
            serde_json::from_value(serde_json::json!(outcome)).map_err(Error::backend)?;
        let method: MethodKind =
            serde_json::from_value(serde_json::json!(method)).map_err(Error::backend)?;
        let standing =
            crate::standing::weighed(crate::standing::stored(&standing)?, &producer, &workers);
        let acc = by_criterion.entry(criterion).or_insert_with(|| Acc {
            records: Vec::new(),
            counts: OutcomeCounts::default(),
            producers: BTreeSet::new(),
        });
        match outcome {
            Outcome::Pass => acc.counts.pass += 1,
            Outcome::Fail => acc.counts.fail += 1,
            Outcome::Inconclusive => acc.counts.inconclusive += 1,
        }
        acc.producers.insert(producer.clone());
        let verdict = Verdict {
            evidence_id: ArtifactId(to32(evidence_id)?),
            outcome,
            method,
            producer,
            standing,
            timestamp,
            sequence,
        };
        acc.records.push((
            Weighed {
                outcome,
                standing,
                superseded,
            },
            verdict,
        ));
    }
    let criteria = by_criterion
        .into_iter()
        .filter_map(|(criterion, acc)| {
            let weighed: Vec<Weighed> = acc.records.iter().map(|(weighed, _)| *weighed).collect();
            // Rows come in record order, so the verdict is the newest of the highest standing.
            let verdict = in_force(&weighed)?;
            let latest = acc.records.into_iter().nth(verdict.latest)?.1;
            Some(CriterionSummary {
                criterion,
                latest,
                counts: acc.counts,
                producers: acc.producers.into_iter().collect(),
                contested: verdict.contested,
            })
        })
        .collect();
    Ok(CriteriaView {
        work_item_id: work_item_id.to_string(),
        mission_id: mission,
        criteria,
    })
}

/// Appends `evidence.recorded` and inserts the record and its cited artifacts, in the caller's
/// transaction, after every check passed. The Authority's own records (the reviewer's, and a
/// child Mission's approval for its parent WorkItem, T16) go through here too.
pub(crate) fn insert_record(
    txn: &crate::unit::Tx<'_>,
    evidence_id: ArtifactId,
    evidence: &Evidence,
    signer: &Id,
    envelope_json: &str,
    standing: Standing,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<u64, Error> {
    let group = evidence.group_id.as_str();
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
    crate::rows::evidence::insert(
        txn,
        &crate::rows::evidence::New {
            evidence_id: &evidence_id,
            group_id: group,
            mission_id: evidence.mission_id.as_str(),
            work_item_id: evidence.work_item_id.as_str(),
            criterion: &evidence.criterion,
            outcome: evidence.result.outcome.as_str(),
            method_kind: evidence.method.kind.as_str(),
            producer: signer.as_str(),
            timestamp: &evidence.timestamp.to_rfc3339(),
            supersedes: evidence.supersedes.as_ref(),
            envelope: envelope_json,
            sequence,
            standing: standing.as_str(),
        },
    )?;
    for artifact in &evidence.artifacts {
        crate::rows::evidence_artifacts::insert(txn, &evidence_id, artifact)?;
    }
    Ok(sequence)
}
