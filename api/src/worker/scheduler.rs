//! The Worker's global Scheduler as a pure, deterministic function (SCH-4…10, LSE-10).
//!
//! Three levels, each a rule a test can state:
//! - **Groups** share the slots by weight (SCH-8): stride scheduling. Each Group has a pass
//!   value; the backlogged Group with the lowest pass (then the lowest name) gets the next
//!   slot and its pass grows by `STRIDE / weight`. A Group that was idle rejoins at the
//!   current virtual time, so idling banks no credit. A Group at its slot quota is skipped.
//! - **Missions** inside a Group share that Group's turns by the Organization priority class
//!   weights of the Worker's policy (data, not the Coordinator's say: SCH-6/7), the same way.
//!   A class raises a Mission's share; it never puts the Mission first outright (SCH-10).
//! - **WorkItems** inside a Mission go by rank, then deadline, then arrival. Rank is the
//!   Coordinator's urgency (0…3), plus one per `aging_seconds` waited (SCH-8: a low item
//!   that has waited `4 × aging_seconds` outranks any fresh critical one), plus one when
//!   the deadline is nearer than `aging_seconds`. Urgency is an input, never an override.
//!   Since every item ages alike, rank acts as a virtual deadline: an item goes before every
//!   item of higher urgency that arrived more than `3 × aging_seconds` after it, so its wait
//!   is bounded by about `4 × aging_seconds × arrival rate / service rate`.
//!
//! An item is placed only when it is runnable (eligible, approved if it must be, before its
//! deadline, with an executor for its capabilities): that is the caller's fact. A priority
//! change is a new input, so it reorders the next call at once (LSE-10).
//!
//! [`preemption`] says which running item, if any, should be asked to checkpoint (LSE-11/12:
//! the Worker only asks; the executor stops at a safe point): one of a Group over its weighted
//! share when a Group with none running waits, or one that a waiting item of the same Group
//! outranks by two or more.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::work::contract::Level;

/// One unit of pass; a Group of weight `w` advances `STRIDE / w` per slot it gets.
const STRIDE: u64 = 1 << 20;

/// The Worker's scheduling policy (its `worker.toml`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Policy {
    /// A wait this long raises an item's rank by one.
    pub aging_seconds: u64,
    /// Mission weight per Organization priority class, low → critical.
    pub class_weights: [u32; 4],
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            aging_seconds: 60,
            class_weights: [1, 2, 3, 4],
        }
    }
}

/// A Group the Worker serves: its weight and its quota of slots.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct GroupShare {
    pub group: String,
    pub weight: u32,
    /// At most this many slots at once (`None`: no quota).
    pub max_slots: Option<u32>,
}

/// A queued WorkItem, as the local queue knows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Waiting {
    pub work_item: String,
    pub group: String,
    pub mission: String,
    pub priority_class: Level,
    pub urgency: Level,
    pub deadline: DateTime<Utc>,
    /// When it joined the queue.
    pub since: DateTime<Utc>,
    /// Eligible, approved when it must be, an executor exists: it may start now.
    pub runnable: bool,
}

/// A WorkItem in a slot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Running {
    pub work_item: String,
    pub group: String,
    pub slot: u32,
    /// Its rank when it started.
    pub rank: u64,
}

/// The Scheduler's memory between calls: pass values and virtual times. Deterministic: the
/// same inputs in the same order give the same placements.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fairness {
    groups: BTreeMap<String, u64>,
    group_time: u64,
    missions: BTreeMap<(String, String), u64>,
    mission_time: BTreeMap<String, u64>,
}

/// One decision: start `work_item` in `slot`, at `rank`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Placement {
    pub work_item: String,
    pub group: String,
    pub slot: u32,
    pub rank: u64,
}

fn level(l: Level) -> u64 {
    match l {
        Level::Low => 0,
        Level::Normal => 1,
        Level::High => 2,
        Level::Critical => 3,
    }
}

/// An item's rank now: urgency, plus one per `aging_seconds` waited, plus one near its deadline.
pub fn rank(policy: &Policy, item: &Waiting, now: DateTime<Utc>) -> u64 {
    let aging = policy.aging_seconds.max(1);
    let waited = u64::try_from((now - item.since).num_seconds()).unwrap_or(0);
    let left = (item.deadline - now).num_seconds();
    let pressing = u64::from(left < i64::try_from(aging).unwrap_or(i64::MAX));
    level(item.urgency) + waited / aging + pressing
}

/// Places runnable items into `free_slots` (ascending), at most one item per slot.
pub fn schedule(
    policy: &Policy,
    groups: &[GroupShare],
    fairness: &mut Fairness,
    waiting: &[Waiting],
    running: &[Running],
    free_slots: &[u32],
    now: DateTime<Utc>,
) -> Vec<Placement> {
    let mut taken = vec![false; waiting.len()];
    let mut busy: BTreeMap<&str, u32> = BTreeMap::new();
    for r in running {
        *busy.entry(r.group.as_str()).or_default() += 1;
    }
    let mut placements = Vec::new();
    for &slot in free_slots {
        // Level 1: the backlogged Group under its quota with the lowest pass.
        let open = |g: &GroupShare| {
            g.max_slots
                .is_none_or(|q| busy.get(g.group.as_str()).copied().unwrap_or(0) < q)
                && waiting
                    .iter()
                    .zip(&taken)
                    .any(|(w, t)| !t && w.runnable && w.group == g.group)
        };
        let Some(group) = groups
            .iter()
            .filter(|g| g.weight > 0 && open(g))
            .map(|g| {
                let pass = fairness.groups.get(&g.group).copied().unwrap_or(0);
                (pass.max(fairness.group_time), g)
            })
            .min_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.group.cmp(&b.1.group)))
        else {
            break;
        };
        let (pass, share) = group;
        fairness.group_time = pass;
        fairness
            .groups
            .insert(share.group.clone(), pass + STRIDE / u64::from(share.weight));

        // Level 2: the Mission of that Group with the lowest pass, weighted by class.
        let mut missions: BTreeMap<&str, Level> = BTreeMap::new();
        for (w, _) in waiting
            .iter()
            .zip(&taken)
            .filter(|(w, t)| !**t && w.runnable && w.group == share.group)
        {
            let class = missions.entry(&w.mission).or_insert(w.priority_class);
            *class = (*class).max(w.priority_class);
        }
        let time = fairness
            .mission_time
            .get(&share.group)
            .copied()
            .unwrap_or(0);
        let Some((mission_pass, mission, class)) = missions
            .iter()
            .map(|(m, c)| {
                let key = (share.group.clone(), (*m).to_owned());
                let p = fairness.missions.get(&key).copied().unwrap_or(0);
                (p.max(time), *m, *c)
            })
            .min()
        else {
            continue;
        };
        let weight = u64::from(policy.class_weights[level(class) as usize].max(1));
        fairness
            .mission_time
            .insert(share.group.clone(), mission_pass);
        fairness.missions.insert(
            (share.group.clone(), mission.to_owned()),
            mission_pass + STRIDE / weight,
        );

        // Level 3: the item of that Mission with the highest rank, then deadline, arrival, id.
        let best = waiting
            .iter()
            .enumerate()
            .filter(|(i, w)| {
                !taken[*i] && w.runnable && w.group == share.group && w.mission == mission
            })
            .min_by(|(_, a), (_, b)| {
                rank(policy, b, now)
                    .cmp(&rank(policy, a, now))
                    .then(a.deadline.cmp(&b.deadline))
                    .then(a.since.cmp(&b.since))
                    .then(a.work_item.cmp(&b.work_item))
            });
        let Some((i, item)) = best else { continue };
        taken[i] = true;
        *busy.entry(item.group.as_str()).or_default() += 1;
        placements.push(Placement {
            work_item: item.work_item.clone(),
            group: item.group.clone(),
            slot,
            rank: rank(policy, item, now),
        });
    }
    placements
}

/// Which running item to ask to checkpoint, if any (only when no slot is free).
pub fn preemption(
    policy: &Policy,
    groups: &[GroupShare],
    waiting: &[Waiting],
    running: &[Running],
    slots: u32,
    now: DateTime<Utc>,
) -> Option<String> {
    if running.len() < usize::try_from(slots).unwrap_or(usize::MAX) {
        return None;
    }
    let count = |g: &str| running.iter().filter(|r| r.group == g).count() as u64;
    let runnable = |g: &str| waiting.iter().any(|w| w.runnable && w.group == g);
    let active: Vec<&GroupShare> = groups
        .iter()
        .filter(|g| g.weight > 0 && (runnable(&g.group) || count(&g.group) > 0))
        .collect();
    let total: u64 = active.iter().map(|g| u64::from(g.weight)).sum();
    // A share in thousandths of a slot, so a share of one slot is 1000.
    let share = |g: &GroupShare| u64::from(slots) * 1000 * u64::from(g.weight) / total.max(1);
    // A Group that waits with nothing running and is owed at least one slot.
    let starved = active
        .iter()
        .any(|g| runnable(&g.group) && count(&g.group) == 0 && share(g) >= 1000);
    if starved {
        let over = active
            .iter()
            .filter(|g| count(&g.group) * 1000 > share(g) + 1000)
            .max_by_key(|g| {
                (
                    count(&g.group) * 1000 - share(g),
                    std::cmp::Reverse(&g.group),
                )
            })?;
        return running
            .iter()
            .filter(|r| r.group == over.group)
            .min_by(|a, b| a.rank.cmp(&b.rank).then(b.work_item.cmp(&a.work_item)))
            .map(|r| r.work_item.clone());
    }
    // Inside a Group: a waiting item that outranks a running one by two or more.
    let mut best: Option<(&Running, u64)> = None;
    for r in running {
        let top = waiting
            .iter()
            .filter(|w| w.runnable && w.group == r.group)
            .map(|w| rank(policy, w, now))
            .max();
        if let Some(top) = top.filter(|t| *t >= r.rank + 2) {
            let gap = top - r.rank;
            if best.is_none_or(|(b, g)| gap > g || (gap == g && r.work_item < b.work_item)) {
                best = Some((r, gap));
            }
        }
    }
    best.map(|(r, _)| r.work_item.clone())
}

#[cfg(test)]
#[path = "scheduler_tests.rs"]
mod tests;
