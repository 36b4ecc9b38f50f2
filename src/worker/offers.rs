//! Answering offers (OFR-7…9) in three steps, so a flood of offers is not answered one round
//! trip at a time: the WorkItems' views (and their dependencies' states) are read together,
//! admission control decides each in turn against a capacity that counts the ones accepted
//! before it, and the signed answers go together. An offer whose read or answer did not reach
//! the Authority stays undecided and is tried again at the next look.

use std::collections::BTreeMap;

use chrono::Utc;
use futures::StreamExt as _;
use serde_json::json;
use weft_api::Id;
use weft_api::work::views::WorkItemView;
use weft_api::work::{CommandType, WorkState};
use weft_api::worker::admission::{self, Admission, Capacity, OfferFacts};
use weft_api::worker::card::Schedule;

use super::link::{Link, unreachable};

/// Requests in flight at once.
const AT_ONCE: usize = 16;

/// One offer to answer: (Group, WorkItem, offer id).
pub(super) type Pending = (String, String, String);

/// What became of one offer.
pub(super) struct Answered {
    pub(super) group: String,
    pub(super) work_item: String,
    pub(super) offer_id: String,
    /// The Authority has the answer (else: try again).
    pub(super) decided: bool,
    /// Accepted, with the schedule it discloses (DIS-1), and the view it was decided on.
    pub(super) accepted: Option<(Schedule, WorkItemView)>,
}

/// Whether a dependency of `view` is already failed or cancelled (it can never be verified).
async fn dependency_lost(link: &Link, view: &WorkItemView) -> bool {
    for dependency in &view.depends_on {
        let Ok(id) = Id::parse("workItemId", dependency) else {
            continue;
        };
        if let Ok(dep) = link.api.scheduling(&id).await
            && matches!(dep.state, WorkState::Failed | WorkState::Cancelled)
        {
            return true;
        }
    }
    false
}

/// Answers `pending` against `capacity`.
pub(super) async fn answer(
    links: &BTreeMap<String, Link>,
    pending: Vec<Pending>,
    mut capacity: Capacity,
) -> Vec<Answered> {
    // 1. Read the views together.
    let read: Vec<(Pending, Option<(WorkItemView, bool)>)> = futures::stream::iter(pending)
        .map(|p| async move {
            let link = &links[&p.0];
            let Ok(id) = Id::parse("workItemId", &p.1) else {
                return (p, None);
            };
            match link.api.work_item(&id).await {
                Ok(view) => {
                    let lost = dependency_lost(link, &view).await;
                    (p, Some((view, lost)))
                }
                Err(error) => {
                    tracing::warn!("{}: {error}; trying again", p.1);
                    (p, None)
                }
            }
        })
        .buffer_unordered(AT_ONCE)
        .collect()
        .await;
    // 2. Decide each in turn, counting what is accepted.
    let mut decisions = Vec::new();
    for ((group, work_item, offer_id), read) in read {
        let Some((view, lost)) = read else {
            continue;
        };
        let facts = OfferFacts {
            contract: &view.contract,
            dependency_lost: lost,
            spent: &view.budget.spent,
        };
        let decision = admission::admit(&facts, &capacity, Utc::now());
        if matches!(decision, Admission::Accept(_)) {
            capacity.queued += 1;
        }
        decisions.push((group, work_item, offer_id, view, decision));
    }
    // 3. Send the answers together.
    futures::stream::iter(decisions)
        .map(|(group, work_item, offer_id, view, decision)| async move {
            let link = &links[&group];
            let (kind, payload, schedule) = match decision {
                Admission::Accept(commitment) => {
                    let compute = (commitment.completion_at - commitment.start_to).num_seconds();
                    let schedule = Id::parse("workItemId", &work_item).ok().map(|id| Schedule {
                        work_item_id: id,
                        start_from: commitment.start_from.fixed_offset(),
                        start_to: commitment.start_to.fixed_offset(),
                        completion_at: commitment.completion_at.fixed_offset(),
                        confidence: commitment.confidence,
                        compute_seconds: u64::try_from(compute).unwrap_or(0),
                    });
                    (
                        CommandType::WorkAcceptOffer,
                        json!({"workItemId": work_item, "offerId": offer_id}),
                        schedule,
                    )
                }
                Admission::Decline { reason, detail } => (
                    CommandType::WorkDeclineOffer,
                    json!({"workItemId": work_item, "offerId": offer_id, "reason": reason, "detail": detail}),
                    None,
                ),
            };
            let (decided, accepted) = match link.send(kind, payload, None).await {
                Ok(_) => (true, schedule.map(|s| (s, view))),
                Err(error) if unreachable(&error) => {
                    tracing::warn!("{work_item}: {}: {error}; trying again", kind.as_str());
                    (false, None)
                }
                Err(error) => {
                    tracing::warn!("{work_item}: {} refused: {error}", kind.as_str());
                    (true, None)
                }
            };
            Answered {
                group,
                work_item,
                offer_id,
                decided,
                accepted,
            }
        })
        .buffer_unordered(AT_ONCE)
        .collect()
        .await
}
