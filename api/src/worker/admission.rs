//! Admission control on an offer (OFR-7/8/9) as a pure function: the offer's facts and the
//! Worker's capacity in, a credible commitment or a structured decline out.
//!
//! Checks run in this order and the first that fails declines: `capability` (every required
//! capability has an executor of that id and version), `authorization` (every tool, data set
//! and operation the contract permits is one this Worker is allowed; `*` allows all),
//! `dependency` (under `all_verified`, a dependency already failed or cancelled can never be
//! met), `capacity` (the queue is full), `deadline` (the estimated completion is past the
//! contract's deadline), `budget` (the executor's wall clock exceeds the contract's, or a
//! dimension is already spent). The commitment's estimate is arithmetic on the queue: the
//! items ahead share the slots, each taking the executor's typical time.

use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};

use crate::work::command::DeclineReason;
use crate::work::contract::{Budgets, Capability, DependencyPolicy, Permissions, WorkContract};

/// What the Worker can do now.
#[derive(Clone, Debug, PartialEq)]
pub struct Capacity {
    pub slots: u32,
    pub running: u32,
    /// Accepted and not yet running, across every Group.
    pub queued: u32,
    /// Accepted and not finished, at most.
    pub max_queued: u32,
    /// Capabilities with an executor, each with its typical run in seconds.
    pub executors: Vec<(Capability, u64)>,
    /// What this Worker is allowed to use; `*` in a list allows anything.
    pub allowed: Permissions,
}

/// The facts of one offer.
#[derive(Clone, Debug, PartialEq)]
pub struct OfferFacts<'a> {
    pub contract: &'a WorkContract,
    /// Some dependency is failed or cancelled.
    pub dependency_lost: bool,
    pub spent: &'a Budgets,
}

/// A credible commitment (DIS-1's figures).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Commitment {
    pub start_from: DateTime<Utc>,
    pub start_to: DateTime<Utc>,
    pub completion_at: DateTime<Utc>,
    /// 0…1
    pub confidence: f64,
}

/// Accept with a commitment, or decline with a structured reason (OFR-9).
#[derive(Clone, Debug, PartialEq)]
pub enum Admission {
    Accept(Commitment),
    Decline {
        reason: DeclineReason,
        detail: String,
    },
}

fn decline(reason: DeclineReason, detail: impl Into<String>) -> Admission {
    Admission::Decline {
        reason,
        detail: detail.into(),
    }
}

fn allows(allowed: &[String], wanted: &[String]) -> Option<String> {
    if allowed.iter().any(|a| a == "*") {
        return None;
    }
    wanted.iter().find(|w| !allowed.contains(w)).cloned()
}

/// Decides an offer.
pub fn admit(offer: &OfferFacts<'_>, capacity: &Capacity, now: DateTime<Utc>) -> Admission {
    let contract = offer.contract;
    let mut typical = 0u64;
    for wanted in &contract.required_capabilities {
        match capacity.executors.iter().find(|(c, _)| c == wanted) {
            Some((_, seconds)) => typical = typical.max(*seconds),
            None => {
                return decline(
                    DeclineReason::Capability,
                    format!("no executor for {} version {}", wanted.id, wanted.version),
                );
            }
        }
    }
    let p = &contract.permissions;
    for (what, allowed, wanted) in [
        ("tool", &capacity.allowed.tools, &p.tools),
        ("data", &capacity.allowed.data, &p.data),
        ("operation", &capacity.allowed.operations, &p.operations),
    ] {
        if let Some(refused) = allows(allowed, wanted) {
            return decline(
                DeclineReason::Authorization,
                format!("{what} {refused} is not allowed here"),
            );
        }
    }
    if offer.dependency_lost && contract.dependency_policy == DependencyPolicy::AllVerified {
        return decline(
            DeclineReason::Dependency,
            "a dependency failed or was cancelled",
        );
    }
    if capacity.queued + capacity.running >= capacity.max_queued {
        return decline(
            DeclineReason::Capacity,
            format!(
                "{} items accepted already",
                capacity.queued + capacity.running
            ),
        );
    }
    let slots = u64::from(capacity.slots.max(1));
    // Finishes needed before this one starts: all accepted work plus it, less the slots.
    let ahead =
        (u64::from(capacity.queued) + u64::from(capacity.running) + 1).saturating_sub(slots);
    let waves = ahead.div_ceil(slots);
    let seconds = |n: u64| Duration::seconds(i64::try_from(n).unwrap_or(i64::MAX / 2).min(1 << 40));
    let start_from = now + seconds(waves.saturating_sub(1) * typical);
    let start_to = now + seconds(waves * typical);
    let completion_at = start_to + seconds(typical);
    if completion_at > contract.deadline.with_timezone(&Utc) {
        return decline(
            DeclineReason::Deadline,
            format!("estimated completion {completion_at} is past the deadline"),
        );
    }
    let b = &contract.budgets;
    if typical > b.wall_clock_seconds || typical > b.compute_seconds {
        return decline(
            DeclineReason::Budget,
            format!("the executor takes about {typical} s; the budget allows less"),
        );
    }
    let s = offer.spent;
    let spent = |used: f64, limit: f64| limit > 0.0 && used >= limit;
    if spent(s.financial, b.financial)
        || spent(s.tokens as f64, b.tokens as f64)
        || spent(s.wall_clock_seconds as f64, b.wall_clock_seconds as f64)
        || spent(s.compute_seconds as f64, b.compute_seconds as f64)
    {
        return decline(DeclineReason::Budget, "the WorkItem's budget is spent");
    }
    // Confidence falls with the waves of work ahead: 0.9, 0.82, 0.75, …
    let confidence = 0.9 / (1.0 + 0.1 * waves as f64);
    Admission::Accept(Commitment {
        start_from,
        start_to,
        completion_at,
        confidence,
    })
}

#[cfg(test)]
#[path = "admission_tests.rs"]
mod tests;
