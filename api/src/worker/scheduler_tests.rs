//! Simulation tests of the Scheduler: shares by weight (SCH-8), no starvation (SCH-8/10),
//! the Coordinator's urgency never an override (SCH-6), quotas (SCH-9), reordering at once
//! (LSE-10), and preemption asked only where the rules say (LSE-11/12).

use chrono::{Duration, TimeZone};

use super::*;

fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 1, 0, 0, 0)
        .single()
        .expect("an instant")
}

fn item(id: &str, group: &str, mission: &str, urgency: Level, since: DateTime<Utc>) -> Waiting {
    Waiting {
        work_item: id.into(),
        group: group.into(),
        mission: mission.into(),
        priority_class: Level::Normal,
        urgency,
        deadline: t0() + Duration::days(30),
        since,
        runnable: true,
    }
}

fn share(group: &str, weight: u32) -> GroupShare {
    GroupShare {
        group: group.into(),
        weight,
        max_slots: None,
    }
}

/// Runs `slots` slots for `ticks` ticks; each item takes `duration` ticks of one second.
/// Returns slot-ticks per Group per tick.
fn simulate(
    groups: &[GroupShare],
    queue: &mut Vec<Waiting>,
    slots: u32,
    ticks: u32,
    duration: u32,
    mut arrive: impl FnMut(u32, &mut Vec<Waiting>),
) -> Vec<BTreeMap<String, u32>> {
    let policy = Policy::default();
    let mut fairness = Fairness::default();
    let mut running: Vec<(Running, u32)> = Vec::new();
    let mut usage = Vec::new();
    for tick in 0..ticks {
        let now = t0() + Duration::seconds(i64::from(tick));
        arrive(tick, queue);
        running.retain(|(_, end)| *end > tick);
        let free: Vec<u32> = (1..=slots)
            .filter(|s| running.iter().all(|(r, _)| r.slot != *s))
            .collect();
        let now_running: Vec<Running> = running.iter().map(|(r, _)| r.clone()).collect();
        let placed = schedule(
            &policy,
            groups,
            &mut fairness,
            queue,
            &now_running,
            &free,
            now,
        );
        for p in placed {
            queue.retain(|w| w.work_item != p.work_item);
            running.push((
                Running {
                    work_item: p.work_item,
                    group: p.group,
                    slot: p.slot,
                    rank: p.rank,
                },
                tick + duration,
            ));
        }
        let mut used = BTreeMap::new();
        for (r, _) in &running {
            *used.entry(r.group.clone()).or_default() += 1;
        }
        usage.push(used);
    }
    usage
}

fn flood(groups: &[&str], each: usize) -> Vec<Waiting> {
    let mut queue = Vec::new();
    for g in groups {
        for i in 0..each {
            queue.push(item(&format!("{g}-{i:04}"), g, "m", Level::Normal, t0()));
        }
    }
    queue
}

/// SCH-4, SCH-5, SCH-8: the Worker's own Scheduler places items of every Group into its
/// declared slots and decides the order across Groups: backlogged Groups get slots by weight.
#[test]
fn backlogged_groups_share_the_slots_by_weight_sch_8() {
    let groups = [share("a", 1), share("b", 2), share("c", 4)];
    let mut queue = flood(&["a", "b", "c"], 1000);
    let usage = simulate(&groups, &mut queue, 8, 600, 3, |_, _| {});
    let total: BTreeMap<String, u32> = usage.iter().fold(BTreeMap::new(), |mut acc, u| {
        for (g, n) in u {
            *acc.entry(g.clone()).or_default() += n;
        }
        acc
    });
    let sum: u32 = total.values().sum();
    for (g, want) in [("a", 1.0 / 7.0), ("b", 2.0 / 7.0), ("c", 4.0 / 7.0)] {
        let got = f64::from(total[g]) / f64::from(sum);
        assert!(
            (got - want).abs() / want < 0.05,
            "group {g}: share {got:.4}, want {want:.4} ± 5 %"
        );
    }
}

#[test]
fn the_same_inputs_give_the_same_placements() {
    let groups = [share("a", 1), share("b", 3)];
    let run = || {
        let mut queue = flood(&["a", "b"], 50);
        simulate(&groups, &mut queue, 3, 40, 2, |_, _| {})
    };
    assert_eq!(run(), run());
}

#[test]
fn an_idle_group_banks_no_credit() {
    // "a" runs alone for a while; "b" arrives later and gets its 1:1 share, not a burst.
    let groups = [share("a", 1), share("b", 1)];
    let mut queue = flood(&["a"], 500);
    let usage = simulate(&groups, &mut queue, 2, 200, 1, |tick, q| {
        if tick == 100 {
            q.extend(flood(&["b"], 500));
        }
    });
    for u in &usage[100..] {
        assert_eq!(u.get("a"), Some(&1), "{u:?}");
        assert_eq!(u.get("b"), Some(&1), "{u:?}");
    }
}

/// Ticks until a low item is placed in one slot while `per_tick` fresh critical items arrive
/// every tick (each takes one tick).
fn low_item_wait(per_tick: u32) -> u64 {
    let groups = [share("a", 1)];
    let mut queue = vec![item("low", "a", "m", Level::Low, t0())];
    let policy = Policy::default();
    let mut fairness = Fairness::default();
    for tick in 0..10_000u32 {
        let now = t0() + Duration::seconds(i64::from(tick));
        for k in 0..per_tick {
            queue.push(item(
                &format!("c{tick}-{k}"),
                "a",
                "m",
                Level::Critical,
                now,
            ));
        }
        let placed = schedule(&policy, &groups, &mut fairness, &queue, &[], &[1], now);
        let p = &placed[0];
        queue.retain(|w| w.work_item != p.work_item);
        if p.work_item == "low" {
            return u64::from(tick);
        }
    }
    panic!("the low item starved")
}

#[test]
fn a_low_item_waits_a_bounded_time_while_critical_work_keeps_arriving_sch_8_sch_10() {
    // Aging makes rank a virtual deadline: a low item goes before every critical item that
    // arrived more than 3 × aging_seconds after it, so it waits at most about
    // 4 × aging_seconds × (arrival rate / service rate).
    let aging = Policy::default().aging_seconds;
    let saturated = low_item_wait(1);
    assert!(saturated <= 4 * aging, "waited {saturated} s at 1:1");
    let overloaded = low_item_wait(2);
    assert!(overloaded <= 8 * aging, "waited {overloaded} s at 2:1");
}

#[test]
fn urgency_orders_a_mission_but_never_puts_it_ahead_of_other_missions_sch_6() {
    let groups = [share("a", 1)];
    let mut queue = Vec::new();
    for i in 0..100 {
        queue.push(item(
            &format!("x{i:03}"),
            "a",
            "loud",
            Level::Critical,
            t0(),
        ));
        queue.push(item(&format!("y{i:03}"), "a", "quiet", Level::Low, t0()));
    }
    let usage = simulate(&groups, &mut queue, 2, 50, 1, |_, _| {});
    assert_eq!(usage.len(), 50);
    // Both Missions are normal class: equal turns, whatever the urgency.
    let left_loud = queue.iter().filter(|w| w.mission == "loud").count();
    let left_quiet = queue.iter().filter(|w| w.mission == "quiet").count();
    assert_eq!(left_loud, left_quiet, "{left_loud} vs {left_quiet}");
}

#[test]
fn a_priority_class_weighs_a_mission_without_starving_the_others_sch_9() {
    let groups = [share("a", 1)];
    let mut queue = Vec::new();
    for i in 0..400 {
        let mut hi = item(&format!("h{i:03}"), "a", "hi", Level::Normal, t0());
        hi.priority_class = Level::Critical;
        let mut lo = item(&format!("l{i:03}"), "a", "lo", Level::Normal, t0());
        lo.priority_class = Level::Low;
        queue.extend([hi, lo]);
    }
    simulate(&groups, &mut queue, 1, 100, 1, |_, _| {});
    let done_hi = 400 - queue.iter().filter(|w| w.mission == "hi").count();
    let done_lo = 400 - queue.iter().filter(|w| w.mission == "lo").count();
    assert_eq!((done_hi, done_lo), (80, 20), "class weights 4:1");
}

#[test]
fn a_group_at_its_quota_waits_and_unrunnable_items_are_never_placed() {
    let mut a = share("a", 10);
    a.max_slots = Some(1);
    let groups = [a, share("b", 1)];
    let mut queue = flood(&["a", "b"], 10);
    queue[0].runnable = false;
    let policy = Policy::default();
    let placed = schedule(
        &policy,
        &groups,
        &mut Fairness::default(),
        &queue,
        &[],
        &[1, 2, 3, 4],
        t0(),
    );
    let in_a = placed.iter().filter(|p| p.group == "a").count();
    assert_eq!(in_a, 1, "{placed:?}");
    assert_eq!(placed.len(), 4);
    assert!(placed.iter().all(|p| p.work_item != queue[0].work_item));
}

#[test]
fn a_raised_urgency_reorders_the_queue_at_once_lse_10() {
    let groups = [share("a", 1)];
    let mut queue = vec![
        item("first", "a", "m", Level::Normal, t0()),
        item(
            "second",
            "a",
            "m",
            Level::Normal,
            t0() + Duration::seconds(1),
        ),
    ];
    let policy = Policy::default();
    let now = t0() + Duration::seconds(2);
    let pick = |q: &[Waiting]| {
        schedule(
            &policy,
            &groups,
            &mut Fairness::default(),
            q,
            &[],
            &[1],
            now,
        )[0]
        .work_item
        .clone()
    };
    assert_eq!(pick(&queue), "first");
    queue[1].urgency = Level::High;
    assert_eq!(pick(&queue), "second");
}

#[test]
fn preemption_frees_a_slot_for_a_starved_group_or_a_far_higher_rank_lse_12() {
    let policy = Policy::default();
    let groups = [share("a", 1), share("b", 1)];
    let run = |id: &str, g: &str, slot, rank| Running {
        work_item: id.into(),
        group: g.into(),
        slot,
        rank,
    };
    let all_a = [
        run("a1", "a", 1, 1),
        run("a2", "a", 2, 0),
        run("a3", "a", 3, 1),
    ];
    // "b" waits with nothing running and is owed 1.5 slots: the lowest-ranked of "a" is asked.
    let waiting = [item("b1", "b", "m", Level::Normal, t0())];
    assert_eq!(
        preemption(&policy, &groups, &waiting, &all_a, 3, t0()).as_deref(),
        Some("a2")
    );
    // A free slot: nothing is asked.
    assert_eq!(
        preemption(&policy, &groups, &waiting, &all_a[..2], 3, t0()),
        None
    );
    // Same Group: critical (3) over a running rank 1 is a gap of two.
    let waiting = [item("a9", "a", "m", Level::Critical, t0())];
    let one = [run("a1", "a", 1, 1)];
    assert_eq!(
        preemption(&policy, &groups[..1], &waiting, &one, 1, t0()).as_deref(),
        Some("a1")
    );
    // High (2) over rank 1 is not enough: active work is not interrupted for it (LSE-11).
    let waiting = [item("a9", "a", "m", Level::High, t0())];
    assert_eq!(
        preemption(&policy, &groups[..1], &waiting, &one, 1, t0()),
        None
    );
}
