//! Issue #40's read-timing finding for WorkItem and Mission ids: a lookup by id decides
//! visibility itself, so another Group's (or, for a scoped member, another Mission's) id
//! costs what an unknown one costs. Compared by the SQL work done (`sql::metered`), not by
//! wall time.

use crate::sql::Connection;
use weft_api::Id;

use super::{mission_where, work_item_where};
use crate::access::{MissionScope, Reader};
use crate::rows::{missions, work_items};
use crate::sql::{Work, metered};
use weft_api::work::contract::Level;
use weft_api::work::machine::{MissionState, WorkState};

/// Group `ga` has Missions `m1` and `m2`, each with one WorkItem (`w1`, `w2`); Group `gb` has
/// Mission `m9` with WorkItem `w9`. Rows are written directly (foreign keys off): only the
/// lookups are under test. The contracts are long, as real ones are: decoding one is the
/// work a hidden id must not cause.
fn database() -> Connection {
    let conn = Connection::open_in_memory().expect("open");
    crate::schema::migrate(&conn).expect("migrate");
    conn.execute_batch("PRAGMA foreign_keys = OFF")
        .expect("pragma");
    conn.trace(true);
    let contract = work_items::sample_contract(&"x".repeat(4096));
    for (group, mission, work_item) in [("ga", "m1", "w1"), ("ga", "m2", "w2"), ("gb", "m9", "w9")]
    {
        let id = |what: &str, text: &str| Id::parse(what, text).expect("a valid id");
        let row = missions::MissionRow {
            mission_id: id("missionId", mission),
            group_id: id("groupId", group),
            title: "t".into(),
            priority_class: Level::Normal,
            budget: contract.budgets.clone(),
            state: MissionState::Active,
            revision: 1,
            parent_work_item_id: None,
            child_failure_policy: None,
        };
        missions::insert(&conn, &row, 0).expect("mission");
        let row = work_items::sample(
            work_item,
            group,
            mission,
            WorkState::Queued,
            contract.clone(),
        );
        work_items::seed(&conn, &row).expect("work item");
    }
    conn
}

fn reader(scope: MissionScope) -> Reader {
    Reader::Agent {
        agent_id: Id::parse("id", "reader").expect("id"),
        group_id: Id::parse("id", "ga").expect("id"),
        scope,
    }
}

/// Whether the WorkItem (`what` = work) or Mission lookup of `id` found a row, and its work.
fn look(conn: &Connection, reader: &Reader, what: &str, id: &str) -> (bool, Work) {
    let (found, work) = metered(|| match what {
        "work" => work_item_where(conn, id, reader).map(|row| row.is_some()),
        _ => mission_where(conn, id, reader).map(|row| row.is_some()),
    });
    // A decode error would also be "found": the test rows must decode.
    (found.unwrap_or(true), work)
}

/// Same statements and rows; virtual-machine steps within 12: the hidden id's index entry is
/// found and its Group and Mission compared (on the index entry, schema V25), where an
/// unknown id's seek ends at once. Before, the hidden row was read, decoded and its
/// contract parsed before the reader was compared.
fn same_work(hidden: Work, absent: Work, what: &str) {
    assert!(absent.statements > 0, "{what}: the meter counts");
    assert_eq!(
        (hidden.statements, hidden.rows),
        (absent.statements, absent.rows),
        "{what}"
    );
    assert!(
        hidden.vm_steps.abs_diff(absent.vm_steps) <= 12,
        "{what}: {hidden:?} against {absent:?}"
    );
}

/// CTX-5 (issue #40): another Group's WorkItem and Mission ids cost what unknown ones cost.
#[test]
fn ctx_5_another_groups_ids_cost_what_unknown_ones_cost() {
    let conn = database();
    let group_wide = reader(MissionScope::Group);
    for (what, own, other, unknown) in [("work", "w1", "w9", "w5"), ("mission", "m1", "m9", "m5")] {
        assert!(
            look(&conn, &group_wide, what, own).0,
            "{what}: its own Group's"
        );
        let (hidden, hidden_work) = look(&conn, &group_wide, what, other);
        let (absent, absent_work) = look(&conn, &group_wide, what, unknown);
        assert!(!hidden && !absent, "{what}");
        same_work(hidden_work, absent_work, what);
    }
}

/// CTX-5 (issue #40): for a member scoped to `m1`, Mission `m2`'s ids cost what unknown ones
/// cost.
#[test]
fn ctx_5_another_missions_ids_cost_what_unknown_ones_cost() {
    let conn = database();
    let scoped = reader(MissionScope::Missions(["m1".to_owned()].into()));
    for (what, own, other, unknown) in [("work", "w1", "w2", "w5"), ("mission", "m1", "m2", "m5")] {
        assert!(
            look(&conn, &scoped, what, own).0,
            "{what}: its own Mission's"
        );
        let (hidden, hidden_work) = look(&conn, &scoped, what, other);
        let (absent, absent_work) = look(&conn, &scoped, what, unknown);
        assert!(!hidden && !absent, "{what}");
        same_work(hidden_work, absent_work, what);
    }
}
