//! One Group's inbox and work queue as the Worker sees it (SCH-1…3): a fold of the Group's
//! verified Events, nothing else. It is deleted and rebuilt by replay every time the Worker
//! starts, so it cannot drift from the log; the log stays authoritative, and every decision
//! taken on it is a Command the Authority checks again.
//!
//! The fold keeps the Group's [`WorkProjection`] (every WorkItem's state, owner and epoch)
//! plus what is the Worker's own: live offers naming it (from `work.offered`, gone once the
//! WorkItem leaves `offered`), preemption requests on its active WorkItems, and which
//! WorkItems an Event touched since the runtime last looked ([`GroupQueue::take_touched`]).

use std::collections::{BTreeMap, BTreeSet};

use serde::Deserialize;
use weft_api::work::WorkState;
use weft_api::work::events::{WorkEvent, WorkEventKind, WorkProjection};

/// A live offer naming this Worker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Offer {
    pub(super) offer_id: String,
    pub(super) expires_at: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct OfferDetail {
    offer_id: String,
    candidates: Vec<String>,
    expires_at: String,
}

/// The fold.
#[derive(Debug, Default)]
pub(super) struct GroupQueue {
    agent: String,
    pub(super) projection: WorkProjection,
    pub(super) offers: BTreeMap<String, Offer>,
    pub(super) preemptions: BTreeSet<String>,
    touched: BTreeSet<String>,
    /// A WorkItem ended or an approval was granted since the runtime last looked (a
    /// dependency may have been met).
    pub(super) moved: bool,
    pub(super) sequence: u64,
}

impl GroupQueue {
    pub(super) fn new(agent: &str) -> Self {
        Self {
            agent: agent.to_owned(),
            ..Self::default()
        }
    }

    /// Folds one Event (`kind`, its payload) at `sequence`.
    pub(super) fn apply(&mut self, sequence: u64, kind: &str, payload: &str) {
        self.sequence = sequence;
        let Ok(kind) =
            serde_json::from_value::<WorkEventKind>(serde_json::Value::String(kind.into()))
        else {
            return;
        };
        let Ok(event) = serde_json::from_str::<WorkEvent>(payload) else {
            return;
        };
        self.projection.apply(sequence, &event);
        let Some(work_item) = event.work_item_id.as_ref().map(|id| id.to_string()) else {
            return;
        };
        // Eligibility moves only when a WorkItem ends (a dependency met or lost) or an
        // execution approval is granted: only then are waiting items read again.
        self.moved |= matches!(
            event.state,
            Some(WorkState::Verified | WorkState::Failed | WorkState::Cancelled)
        ) || kind == WorkEventKind::ApprovalExecutionGranted;
        match kind {
            WorkEventKind::WorkOffered => {
                if let Ok(detail) = serde_json::from_value::<OfferDetail>(event.detail.clone())
                    && detail.candidates.contains(&self.agent)
                {
                    self.offers.insert(
                        work_item.clone(),
                        Offer {
                            offer_id: detail.offer_id,
                            expires_at: detail.expires_at,
                        },
                    );
                }
            }
            WorkEventKind::WorkOfferDeclined
                if event.detail.get("agentId").and_then(|a| a.as_str()) == Some(&self.agent)
                    || event
                        .actor
                        .as_ref()
                        .is_some_and(|a| a.agent_id.as_str() == self.agent) =>
            {
                self.offers.remove(&work_item);
            }
            WorkEventKind::WorkPreemptionRequested => {
                self.preemptions.insert(work_item.clone());
            }
            _ => {}
        }
        if event.state != Some(WorkState::Offered) {
            self.offers.remove(&work_item);
        }
        if event.state != Some(WorkState::Active) {
            self.preemptions.remove(&work_item);
        }
        self.touched.insert(work_item);
    }

    /// The WorkItems touched since the last call.
    pub(super) fn take_touched(&mut self) -> BTreeSet<String> {
        std::mem::take(&mut self.touched)
    }

    /// Whether `work_item` is this Worker's and in `state`.
    pub(super) fn mine_in(&self, work_item: &str, state: WorkState) -> bool {
        self.projection
            .work_items
            .get(work_item)
            .is_some_and(|w| w.state == Some(state) && w.owner.as_deref() == Some(&self.agent))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(state: &str, owner: Option<&str>, detail: serde_json::Value) -> String {
        let mut e = json!({"detail": detail, "missionId": "m1", "revision": 1,
            "contractRevision": 1, "ownershipEpoch": 1, "state": state, "workItemId": "wi-1"});
        if let Some(owner) = owner {
            e["owner"] = json!(owner);
        }
        e.to_string()
    }

    /// SCH-2, SCH-3: the queue is a fold of the log and nothing else (never authoritative):
    /// the same Events give the same queue, an offer to another Worker is not this one's, and
    /// a WorkItem leaving `offered` drops the offer.
    #[test]
    fn the_queue_is_a_fold_of_the_log_sch_2() {
        let offered = event(
            "offered",
            None,
            json!({"offerId": "o1", "candidates": ["w1"], "expiresAt": "2026-12-05T00:00:00Z"}),
        );
        let elsewhere = event(
            "offered",
            None,
            json!({"offerId": "o2", "candidates": ["w2"], "expiresAt": "2026-12-05T00:00:00Z"}),
        );
        let mut q = GroupQueue::new("w1");
        q.apply(1, "work.offered", &elsewhere);
        assert!(q.offers.is_empty());
        q.apply(2, "work.offered", &offered);
        assert_eq!(q.offers["wi-1"].offer_id, "o1");
        q.apply(
            3,
            "work.offer_accepted",
            &event("queued", Some("w1"), json!({})),
        );
        assert!(q.offers.is_empty());
        assert!(q.mine_in("wi-1", WorkState::Queued));
        q.apply(4, "work.started", &event("active", Some("w1"), json!({})));
        q.apply(
            5,
            "work.preemption_requested",
            &event("active", Some("w1"), json!({})),
        );
        assert!(q.preemptions.contains("wi-1"));
        q.apply(
            6,
            "work.checkpointed",
            &event("queued", Some("w1"), json!({})),
        );
        assert!(q.preemptions.is_empty());
        assert_eq!(q.take_touched().len(), 1);
        assert!(q.take_touched().is_empty());
        // Unknown kinds and foreign payloads change nothing.
        q.apply(7, "artifact.published", "{}");
        assert!(q.mine_in("wi-1", WorkState::Queued));
    }
}
