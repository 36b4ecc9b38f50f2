//! The expiry timer's entry point (`Store::expire_due`): takes the due entries of the
//! in-memory deadline set and runs `expiry::expire_work_item` for each in one writer
//! transaction. Kept apart from `expiry.rs` so the engine, which holds the deadline set,
//! and the code that expires never import each other.

use chrono::{DateTime, Utc};

use super::expiry::{MAX_PER_CALL, expire_work_item};
use crate::error::Error;
use crate::work::handle::Work;

/// How often a server on a shared index reads every open deadline again.
const SHARED_RELOAD_SECONDS: i64 = 5;

impl Work<'_> {
    /// Appends the lease and ownership expiry Events due at `now` (`lease.expired`,
    /// `ownership.expired`) in one writer transaction; answers how many. Finds them in an
    /// in-memory set of deadlines, never by scanning every lease; the server calls it on a
    /// timer, and every Command also expires its own WorkItem first.
    pub async fn expire_due(&self, now: DateTime<Utc>) -> Result<usize, Error> {
        // Several servers: each also expires what the others started (whichever commits
        // first expires it; the other finds it expired under the Group's lock).
        if self.0.db.is_shared()
            && self
                .0
                .deadlines
                .reload_due(now, chrono::Duration::seconds(SHARED_RELOAD_SECONDS))
        {
            for (at, work_item_id) in self.0.db.read(super::expiry::load).await? {
                self.0.deadlines.note(&work_item_id, at);
            }
        }
        let due = self.0.deadlines.take_due(now, MAX_PER_CALL).work_items;
        if due.is_empty() {
            return Ok(0);
        }
        let deadlines = self.0.deadlines.clone();
        let work_items = due.clone();
        let result = self
            .0
            .db
            .write(move |tx| {
                let mut n_events = 0;
                let work_items =
                    crate::rows::work_items::in_group_order(tx, work_items.into_iter().collect())?;
                for work_item_id in &work_items {
                    let (appended, next) = expire_work_item(tx, work_item_id, now)?;
                    n_events += appended;
                    if let Some(at) = next {
                        deadlines.note(work_item_id, at);
                    }
                }
                Ok(n_events)
            })
            .await;
        if result.is_err() {
            // Nothing was appended: look at them again on the next call.
            for work_item_id in &due {
                self.0.deadlines.note(work_item_id, now);
            }
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use weft_api::Id;
    use weft_api::work::machine::WorkState;

    use super::super::expiry::*;
    use super::*;
    use crate::clock::Clock as _;
    use crate::engine::Engine;
    use crate::engine::deadlines::{Deadlines, Due};

    fn instant(second: u32) -> DateTime<Utc> {
        let start: DateTime<Utc> = "2026-11-30T12:00:00Z".parse().expect("instant");
        start + chrono::Duration::seconds(i64::from(second))
    }

    /// The measure: with 100,000 live deadlines, finding the due ones looks at the
    /// due entries only (plus the one that stops the walk), never all of them.
    #[test]
    fn take_due_visits_only_due_entries() {
        let deadlines = Deadlines::default();
        for n in 0..100_000u32 {
            deadlines.note(&format!("wi-{n}"), instant(600 + n % 3000));
        }
        deadlines.note("wi-late-1", instant(10));
        deadlines.note("wi-late-2", instant(20));
        deadlines.note("wi-late-2", instant(30)); // a stale entry of the same WorkItem
        let due = deadlines.take_due(instant(100), MAX_PER_CALL);
        assert_eq!(
            due.work_items
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
            ["wi-late-1", "wi-late-2"]
        );
        assert_eq!(due.visited, 4, "three due entries and the first not due");
        assert_eq!(deadlines.len(), 100_000);
        assert_eq!(
            deadlines.take_due(instant(100), MAX_PER_CALL),
            Due {
                work_items: BTreeSet::new(),
                visited: 1
            }
        );
    }

    /// LSE-8 at scale: with 100,000 live Execution Leases, 100 of them past due, one
    /// `expire_due` appends exactly the 100 `lease.expired` (it prints how long it took; the
    /// figure is the benchmark's to judge, never an assertion here).
    #[tokio::test]
    async fn expiry_with_100000_live_leases_finds_exactly_the_due() {
        let start: DateTime<Utc> = "2026-11-30T12:00:00Z".parse().expect("instant");
        let clock = crate::clock::ManualClock::new(start);
        let mut options = crate::options::Options::in_memory();
        options.clock = std::sync::Arc::new(clock.clone());
        let engine = std::sync::Arc::new(Engine::open(options).await.expect("open"));
        let contract = serde_json::json!({
            "objective": "o", "deliverables": [], "acceptanceCriteria": [], "inputs": [],
            "dependsOn": [], "dependencyPolicy": "all_verified",
            "permissions": {"tools": [], "data": [], "operations": []}, "requiredCapabilities": [],
            "deadline": "2026-12-31T00:00:00Z", "urgency": "normal", "businessImpact": "medium",
            "budgets": {"financial": 1.0, "tokens": 1, "toolCalls": 1, "computeSeconds": 1,
                        "wallClockSeconds": 1, "sideEffects": 1},
            "retryPolicy": {"maxAttempts": 3, "backoffSeconds": 30, "deadline": null, "maxCost": 2.0},
            "risk": "low", "approvalRequired": false,
            "leases": {"offerSeconds": 600, "ownershipSeconds": 36000, "executionSeconds": 300,
                       "blockedSeconds": 3600, "graceSeconds": 120},
            "childFailurePolicy": "block"});
        let contract: weft_api::work::contract::WorkContract =
            serde_json::from_value(contract).expect("a contract");
        let n_leases = 100_000u32;
        engine
            .db
            .write(move |tx| {
                let id = |what: &str, text: &str| Id::parse(what, text).expect("a valid id");
                crate::rows::groups::insert(tx, "g1", start)?;
                crate::rows::missions::insert(
                    tx,
                    &crate::rows::missions::MissionRow {
                        mission_id: id("missionId", "m1"),
                        group_id: id("groupId", "g1"),
                        title: "t".into(),
                        priority_class: weft_api::work::contract::Level::Normal,
                        budget: contract.budgets.clone(),
                        state: weft_api::work::machine::MissionState::Active,
                        revision: 1,
                        parent_work_item_id: None,
                        child_failure_policy: None,
                    },
                    1,
                )?;
                for n in 0..n_leases {
                    let id = format!("wi-{n:06}");
                    // The first 100 expire at +100 s, the others spread over +10 min to +1 h.
                    let seconds = if n < 100 {
                        100
                    } else {
                        600 + i64::from(n % 3000)
                    };
                    let mut row = crate::rows::work_items::sample(
                        &id,
                        "g1",
                        "m1",
                        WorkState::Active,
                        contract.clone(),
                    );
                    row.revision = 3;
                    row.owner = Some(Id::parse("agentId", "w1").expect("a valid id"));
                    row.ownership_epoch = 1;
                    row.ownership_expires_at = Some(start + chrono::Duration::seconds(36_000));
                    row.attempts = 1;
                    crate::rows::work_items::seed(tx, &row)?;
                    crate::rows::leases::insert(
                        tx,
                        &crate::rows::leases::New {
                            lease_id: &format!("lease-{n:06}"),
                            work_item_id: &id,
                            kind: crate::rows::leases::Kind::Execution,
                            agent_id: "w1",
                            session_epoch: 1,
                            ownership_epoch: 1,
                            started_at: start,
                            expires_at: start + chrono::Duration::seconds(seconds),
                        },
                    )?;
                }
                Ok(())
            })
            .await
            .expect("load");
        for (at, work_item_id) in engine.db.read(load).await.expect("deadlines") {
            engine.deadlines.note(&work_item_id, at);
        }
        clock.advance(chrono::Duration::seconds(101));
        let began = std::time::Instant::now();
        let n_events = Work(&engine).expire_due(clock.now()).await.expect("expire");
        let took = began.elapsed();
        assert_eq!(n_events, 100);
        // A figure, not an assertion (tests are never timed): the benchmark reports it.
        eprintln!("expire_due over 100,000 live leases, 100 due: {took:?}");
        eprintln!("expire_due with {n_leases} live leases, 100 due: {took:?}");
        // The 99,900 live leases, and the 100 re-queued WorkItems' ownership deadlines.
        assert_eq!(
            engine.deadlines.len(),
            usize::try_from(n_leases).expect("fits")
        );
    }

    #[test]
    fn take_due_stops_at_its_limit() {
        let deadlines = Deadlines::default();
        for n in 0..5u32 {
            deadlines.note(&format!("wi-{n}"), instant(n));
        }
        assert_eq!(deadlines.take_due(instant(100), 2).work_items.len(), 2);
        assert_eq!(deadlines.len(), 3);
    }
}
