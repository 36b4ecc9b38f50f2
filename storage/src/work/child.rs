//! Child Missions (T15–T17, SM-11, issue #49). A child is created only by
//! `mission.create_child` (`commands/create_child.rs`), which blocks the parent WorkItem and
//! fences its owner while the child runs; `mission.create` names no parent ([`refuse_parent`]),
//! so no Mission can hang under a WorkItem without blocking it and without a child-failure
//! policy.
//!
//! A child is approved only once at least one of its WorkItems is verified and none is live
//! ([`verified_work`]); the approval then becomes Evidence for the parent (T16): one record per
//! acceptance criterion of the parent's contract, signed by the Authority (method
//! `business_rule`, the one rule it checks itself: outcome `pass`, naming the child, the
//! approver, its Command, the verified WorkItems and the approval's sequence), appended in
//! the approval's own transaction before the parent moves to `verified`, so the parent's
//! criteria view says why it was verified and a fold of the log finds the records.

use std::collections::BTreeMap;

use weft_api::evidence::{
    AUTHORITY_AGENT, EVIDENCE_TYPE, Evidence, EvidenceResult, Method, MethodKind, Metric, Outcome,
    Subject, SubjectKind,
};
use weft_api::manifest::Producer;
use weft_api::verdict::Standing;
use weft_api::{ArtifactId, Envelope, ErrorCode, Id};

use super::ctx::{Ctx, id};
use super::{MissionRow, WorkRow};
use crate::error::{Error, reject};

/// SM-11: a child Mission is created through `mission.create_child` only.
pub(super) fn refuse_parent(parent: Option<&Id>) -> Result<(), Error> {
    match parent {
        None => Ok(()),
        Some(parent) => Err(reject(
            ErrorCode::InvalidCommand,
            format!(
                "mission.create names no parentWorkItemId: a child Mission of {parent} is created with mission.create_child, which blocks the parent while it runs (T15-T17, SM-11)"
            ),
        )),
    }
}

/// T16: a child Mission is approved only once at least one of its WorkItems is verified (none
/// is live by then, `decide_mission`): its approval is the parent's Evidence, so an empty child
/// must not verify its parent with nothing checked. Answers the verified WorkItems' ids.
pub(super) fn verified_work(ctx: &Ctx<'_, '_>, child: &MissionRow) -> Result<Vec<String>, Error> {
    let verified = crate::rows::work_items::verified_of_mission(ctx.tx, &child.mission_id)?;
    if verified.is_empty() {
        return Err(reject(
            ErrorCode::EvidenceMissing,
            format!(
                "child Mission {} has no verified WorkItem: its approval would verify {} with nothing checked (T16)",
                child.mission_id,
                child.parent_work_item_id.as_deref().unwrap_or_default()
            ),
        ));
    }
    Ok(verified)
}

/// T16: the approval of `child` (appended at `approval_sequence`) as the Authority's Evidence
/// for its parent WorkItem `parent`, one record per acceptance criterion; answers their ids.
pub(super) fn approval_evidence(
    ctx: &mut Ctx<'_, '_>,
    parent: &WorkRow,
    child: &MissionRow,
    approval_sequence: u64,
    verified: &[String],
) -> Result<Vec<String>, Error> {
    let authority = ctx
        .authority
        .clone()
        .ok_or_else(|| reject(ErrorCode::Internal, "no Authority key in this transaction"))?;
    let producer = id(AUTHORITY_AGENT)?;
    let mut recorded = Vec::new();
    for criterion in &parent.contract.acceptance_criteria {
        let evidence = Evidence {
            subject: Subject {
                kind: SubjectKind::WorkItem,
                id: parent.work_item_id.to_string(),
            },
            mission_id: id(&parent.mission_id)?,
            group_id: id(&parent.group_id)?,
            work_item_id: id(&parent.work_item_id)?,
            criterion: criterion.id.to_string(),
            method: Method {
                kind: MethodKind::BusinessRule,
                name: "child_mission_approval".to_owned(),
                version: env!("CARGO_PKG_VERSION").to_owned(),
            },
            result: EvidenceResult {
                outcome: Outcome::Pass,
                summary: format!(
                    "child Mission {} approved by {} (command {}) with no WorkItem live and {} verified: {} (T16)",
                    child.mission_id,
                    ctx.command.agent_id,
                    ctx.command.command_id,
                    verified.len(),
                    verified.join(", ")
                ),
                metrics: BTreeMap::from([
                    (
                        "approvalSequence".to_owned(),
                        Metric::Number(approval_sequence as f64),
                    ),
                    (
                        "verifiedWorkItems".to_owned(),
                        Metric::Number(verified.len() as f64),
                    ),
                ]),
            },
            producer: Producer {
                agent_id: producer.clone(),
                agent_card_version: "1".to_owned(),
            },
            timestamp: ctx.now.fixed_offset(),
            artifacts: Vec::new(),
            supersedes: None,
            execution: None,
        };
        let payload = serde_json::to_vec(&evidence).map_err(Error::backend)?;
        let evidence_id = ArtifactId(*blake3::hash(&payload).as_bytes());
        let envelope = Envelope::sign(&authority, EVIDENCE_TYPE, &payload);
        let envelope_json = serde_json::to_string(&envelope).map_err(Error::backend)?;
        let sequence = crate::weighing::insert_record(
            ctx.tx,
            evidence_id,
            &evidence,
            &producer,
            &envelope_json,
            Standing::Authority,
            ctx.now,
        )?;
        ctx.appended.push(weft_api::work::views::AppendedEvent {
            sequence,
            kind: "evidence.recorded".to_owned(),
        });
        recorded.push(evidence_id.to_string());
    }
    Ok(recorded)
}
