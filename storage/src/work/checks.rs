//! The rule-specific facts and checks of WorkItem Commands: an offer's standing for its
//! caller (SM-8, OFR-5), Evidence that covers every acceptance criterion (EVD-2) or backs a
//! failure (T13), and the quoted Execution Lease (LSE-4, LSE-5).

use std::collections::BTreeSet;
use weft_api::work::machine::OfferStanding;
use weft_api::{ArtifactId, ErrorCode};

use super::WorkRow;
use super::ctx::Ctx;
use crate::clock::format_instant;
use crate::error::{Error, reject};
use crate::rows::leases::{self, Claim, Refusal};
use crate::rows::offers::{self, OfferStatus};

/// The standing of offer `offer_id` of `row` for the caller (SM-8, OFR-5).
pub(super) fn offer_standing(
    ctx: &Ctx<'_, '_>,
    row: &WorkRow,
    offer_id: &str,
) -> Result<OfferStanding, Error> {
    let found = offers::load(ctx.tx, &row.work_item_id, offer_id)?;
    let caller = ctx.command.agent_id.as_str();
    Ok(match found {
        None => OfferStanding::Unknown,
        // The winner asking again meets the table (`queued`: illegal, or a re-acceptance of a
        // revised contract, CON-5); anyone else lost, and so did an older acceptance than the
        // one that opened the current ownership epoch.
        Some(offer) if offer.status == OfferStatus::Accepted => {
            if row.owner.as_deref() == Some(caller)
                && current_acceptance(ctx, row)?.is_some_and(|(current, _)| current == offer_id)
            {
                OfferStanding::Candidate
            } else {
                OfferStanding::Withdrawn
            }
        }
        Some(offer) if offer.status == OfferStatus::Withdrawn => OfferStanding::Withdrawn,
        Some(offer) if offer.expired(ctx.now) => OfferStanding::Expired,
        Some(offer) => {
            if offer.candidates.iter().any(|c| c == caller) && !offer.declined.contains_key(caller)
            {
                OfferStanding::Candidate
            } else {
                OfferStanding::NotCandidate
            }
        }
    })
}

/// The offer whose acceptance opened the WorkItem's current ownership epoch (the newest one
/// accepted: a new offer withdraws every live one, T3), and the contract revision accepted.
fn current_acceptance(ctx: &Ctx<'_, '_>, row: &WorkRow) -> Result<Option<(String, u64)>, Error> {
    offers::newest_accepted(ctx.tx, &row.work_item_id)
}

/// CON-5: the owner of a `queued` WorkItem accepted an older contract revision than the
/// current one (the contract was revised after its acceptance), so it must accept again.
pub(super) fn acceptance_stale(ctx: &Ctx<'_, '_>, row: &WorkRow) -> Result<bool, Error> {
    if row.state != weft_api::work::machine::WorkState::Queued || row.owner.is_none() {
        return Ok(false);
    }
    Ok(current_acceptance(ctx, row)?.is_some_and(|(_, revision)| revision < row.contract_revision))
}

/// EVD-2: the submitted artifacts are this WorkItem's, and the Evidence cited covers every
/// acceptance criterion of the contract.
pub(super) fn covers_criteria(
    ctx: &Ctx<'_, '_>,
    row: &WorkRow,
    artifacts: &[ArtifactId],
    evidence: &[ArtifactId],
) -> Result<bool, Error> {
    for artifact in artifacts {
        let published = crate::rows::manifests::published_for_work_item(
            ctx.tx,
            artifact,
            &row.group_id,
            &row.mission_id,
            &row.work_item_id,
        )?;
        if !published {
            return Err(reject(
                ErrorCode::UnknownArtifact,
                format!(
                    "{artifact} is not published for WorkItem {} in {}",
                    row.work_item_id, row.group_id
                ),
            ));
        }
    }
    // Every cited record must be this WorkItem's (unknown_evidence otherwise).
    cited_criteria(ctx, row, evidence)?;
    let lease_started: Option<u64> =
        leases::current(ctx.tx, &row.work_item_id)?.and_then(|lease| lease.started_sequence);
    // Separation of duties, at weigh time (`standing.rs`): who did this work, and
    // which records are superseded by someone who may still supersede them.
    let workers = crate::standing::worked_on(ctx.tx, &row.work_item_id, &row.group_id)?;
    let superseded = crate::standing::superseded(ctx.tx, &row.work_item_id, &workers)?;
    let weighing = (workers, superseded);
    for criterion in &row.contract.acceptance_criteria {
        // EVD-3: a criterion the built-in reviewer can satisfy (integrity or schema) is
        // checked by it after the submission; `work.accept_result` waits for its verdict.
        if criterion.required_evidence.iter().any(|m| {
            matches!(
                m,
                weft_api::evidence::MethodKind::IntegrityCheck
                    | weft_api::evidence::MethodKind::SchemaValidation
            )
        }) {
            continue;
        }
        let mut satisfied = false;
        for record in evidence {
            if counts_for(ctx, row, record, criterion, lease_started, &weighing)? {
                satisfied = true;
                break;
            }
        }
        if !satisfied {
            return Ok(false);
        }
    }
    Ok(true)
}

/// EVD-1/EVD-2 (issue #12): a record satisfies `criterion` only if it is about that
/// criterion, passes, is of a method kind the criterion requires, is still in force (not
/// superseded), and, when a Worker produced it, was produced by the current owner under the
/// current Execution Lease (recorded after the `work.started` that opened it). A reviewer's, coordinator's or
/// the Authority's record needs no lease. So a Worker's own `pass` never suffices where the
/// contract requires a method only a reviewer may claim (EVD-1's method table).
fn counts_for(
    ctx: &Ctx<'_, '_>,
    row: &WorkRow,
    record: &ArtifactId,
    criterion: &weft_api::work::contract::AcceptanceCriterion,
    lease_started: Option<u64>,
    (workers, superseded): &(BTreeSet<String>, BTreeSet<Vec<u8>>),
) -> Result<bool, Error> {
    if superseded.contains(&record.0[..]) {
        return Ok(false);
    }
    let found = crate::rows::evidence::verdict(ctx.tx, record, criterion.id.as_str())?;
    let Some((outcome, method, standing, producer, recorded_at)) = found else {
        return Ok(false);
    };
    let method: weft_api::evidence::MethodKind = super::parse_name(&method)?;
    if outcome != "pass" || !criterion.required_evidence.contains(&method) {
        return Ok(false);
    }
    // A review counts as one unless its producer did this work (separation of duties, at
    // weigh time: `standing::weighed`); a Worker's claim only from the owner
    // under its current lease.
    if standing != "worker" && !workers.contains(&producer) {
        return Ok(true);
    }
    // Recorded after the `work.started` Event that opened the current lease.
    Ok(row.owner.as_deref() == Some(producer.as_str())
        && lease_started.is_some_and(|started| recorded_at > started))
}

/// T13: a failure cites at least one Evidence record of this WorkItem.
pub(super) fn cites_evidence(
    ctx: &Ctx<'_, '_>,
    row: &WorkRow,
    evidence: &[ArtifactId],
) -> Result<bool, Error> {
    Ok(!cited_criteria(ctx, row, evidence)?.is_empty())
}

/// The criteria of the cited Evidence, each of which must be this WorkItem's.
fn cited_criteria(
    ctx: &Ctx<'_, '_>,
    row: &WorkRow,
    evidence: &[ArtifactId],
) -> Result<Vec<String>, Error> {
    let mut criteria = Vec::new();
    for record in evidence {
        let criterion = crate::rows::evidence::criterion_in(
            ctx.tx,
            record,
            &row.group_id,
            &row.mission_id,
            &row.work_item_id,
        )?;
        match criterion {
            Some(criterion) => criteria.push(criterion),
            None => {
                return Err(reject(
                    ErrorCode::UnknownEvidence,
                    format!(
                        "no Evidence {record} for WorkItem {} in {}",
                        row.work_item_id, row.group_id
                    ),
                ));
            }
        }
    }
    Ok(criteria)
}

/// The current lease must be the one the Command quotes (LSE-4/LSE-5), and unexpired: the
/// current lease admits the quote (`leases::Lease::admits`; the caller's ownership is the
/// table's to judge, so nothing is signed under it and nothing acts).
pub(super) fn check_lease(ctx: &Ctx<'_, '_>, row: &WorkRow) -> Result<(), Error> {
    let Some(lease) = leases::current(ctx.tx, &row.work_item_id)? else {
        return Ok(());
    };
    let Some(quoted) = &ctx.command.lease_id else {
        return Err(reject(
            ErrorCode::StaleLease,
            format!("quote the current lease of {} (LSE-4)", row.work_item_id),
        ));
    };
    let claim = Claim {
        lease_id: quoted.as_str(),
        work_item_id: &row.work_item_id,
        signer: None,
        acts_for: None,
    };
    match lease.admits(&claim, ctx.now) {
        Ok(()) => Ok(()),
        Err(Refusal::Expired | Refusal::Ended) => Err(reject(
            ErrorCode::StaleLease,
            format!(
                "lease {} expired at {}",
                lease.lease_id,
                format_instant(lease.expires_at)
            ),
        )),
        Err(_) => Err(reject(
            ErrorCode::StaleLease,
            format!(
                "lease {quoted} is not the current lease of {}",
                row.work_item_id
            ),
        )),
    }
}

/// EVD-3: the combined Evidence passes: every acceptance criterion of the contract has a
/// verdict in force (`weft_api::verdict`, ranked by standing) that is `pass` and not
/// contested. `work.accept_result` waits for it.
pub(super) fn verdicts_pass(ctx: &Ctx<'_, '_>, row: &WorkRow) -> Result<bool, Error> {
    let work_item = weft_api::Id::parse("workItemId", &row.work_item_id)?;
    let mission = weft_api::Id::parse("missionId", &row.mission_id)?;
    let view = crate::weighing::criteria_of(
        ctx.tx,
        &work_item,
        Some(&mission),
        &crate::access::Reader::Admin,
    )?;
    Ok(row.contract.acceptance_criteria.iter().all(|criterion| {
        view.criteria.iter().any(|summary| {
            summary.criterion == criterion.id.as_str()
                && summary.latest.outcome == weft_api::evidence::Outcome::Pass
                && !summary.contested
        })
    }))
}

/// The acceptance criteria no review (a reviewer's, coordinator's or the Authority's
/// passing Evidence in force) covers yet: what `work.review_requested` asks reviewers for.
pub(super) fn criteria_awaiting_review(
    ctx: &Ctx<'_, '_>,
    row: &WorkRow,
) -> Result<Vec<String>, Error> {
    let work_item = weft_api::Id::parse("workItemId", &row.work_item_id)?;
    let mission = weft_api::Id::parse("missionId", &row.mission_id)?;
    let view = crate::weighing::criteria_of(
        ctx.tx,
        &work_item,
        Some(&mission),
        &crate::access::Reader::Admin,
    )?;
    Ok(row
        .contract
        .acceptance_criteria
        .iter()
        .filter(|criterion| {
            !view.criteria.iter().any(|summary| {
                summary.criterion == criterion.id.as_str()
                    && summary.latest.outcome == weft_api::evidence::Outcome::Pass
                    && summary.latest.standing != weft_api::verdict::Standing::Worker
            })
        })
        .map(|criterion| criterion.id.to_string())
        .collect())
}
