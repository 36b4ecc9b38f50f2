//! SM-1…SM-12, T1…T18, OFR, DEP-3, GAP-1…5: the state machine table in
//! `fixtures/state_machine.json`, written from REQUIREMENTS §10.2 and DESIGN §10, against the
//! pure functions of `weft_api::work::machine`. Every row is checked and named on failure;
//! the baseline must cover every WorkItem state × every Command naming a WorkItem, and the
//! other tables every pair they describe, so a new state, Command type or role cannot go
//! undecided.

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde::de::DeserializeOwned;
use serde_json::Value;
use weft_api::EventKind;
use weft_api::error::ErrorCode;
use weft_api::session::Role;
use weft_api::work::contract::ChildFailurePolicy;
use weft_api::work::machine::{
    Facts, MissionState, WorkState, child_outcome, decide, decide_mission, propagate, role_allows,
};
use weft_api::work::{CommandType, Transition};

const ROLES: [(Role, &str); 5] = [
    (Role::Worker, "worker"),
    (Role::Coordinator, "coordinator"),
    (Role::Reviewer, "reviewer"),
    (Role::Auditor, "auditor"),
    (Role::Approver, "approver"),
];

const MISSION_STATES: [MissionState; 4] = [
    MissionState::Active,
    MissionState::Approved,
    MissionState::Failed,
    MissionState::Cancelled,
];

fn table() -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures/state_machine.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("the state machine table is JSON")
}

fn rows<'a>(table: &'a Value, name: &str) -> &'a [Value] {
    table[name]
        .as_array()
        .unwrap_or_else(|| panic!("no {name} table"))
}

fn id(row: &Value) -> &str {
    row["id"]
        .as_str()
        .unwrap_or_else(|| panic!("a row without an id: {row}"))
}

/// A field of `row` read with its serde (wire) name.
fn field<T: DeserializeOwned>(row: &Value, name: &str) -> T {
    serde_json::from_value(row[name].clone())
        .unwrap_or_else(|e| panic!("{}: field {name}: {e}", id(row)))
}

/// The Commands that act on an existing WorkItem, plus `work.authorize` (illegal on one).
fn work_item_commands() -> Vec<CommandType> {
    CommandType::ALL
        .into_iter()
        .filter(|command| command.targets_work_item() || *command == CommandType::WorkAuthorize)
        .collect()
}

/// `Facts::favourable(state)` with the row's partial `facts` written over it; an unknown
/// field name is refused (Facts denies unknown fields), so a typo cannot pass silently.
fn facts(row: &Value, state: WorkState) -> Facts {
    let mut merged = serde_json::to_value(Facts::favourable(state)).expect("Facts serializes");
    if let Some(overrides) = row.get("facts") {
        let overrides = overrides
            .as_object()
            .unwrap_or_else(|| panic!("{}: facts is not an object", id(row)));
        for (name, value) in overrides {
            assert!(
                merged.get(name).is_some(),
                "{}: unknown fact {name}",
                id(row)
            );
            merged[name] = value.clone();
        }
    }
    serde_json::from_value(merged).unwrap_or_else(|e| panic!("{}: facts: {e}", id(row)))
}

/// What the row expects: `{next, event}` or `{code}`, in the shape `decide` answers.
fn expected_work(row: &Value) -> Result<(WorkState, String), String> {
    match (row.get("next"), row.get("code")) {
        (Some(_), None) => Ok((field(row, "next"), field(row, "event"))),
        (None, Some(_)) => Err(field(row, "code")),
        _ => panic!("{}: exactly one of next or code", id(row)),
    }
}

fn answered_work(answer: Result<Transition, ErrorCode>) -> Result<(WorkState, String), String> {
    answer
        .map(|transition| (transition.next, transition.event.as_str().to_owned()))
        .map_err(|code| code.as_str().to_owned())
}

/// SM-2, SM-3 and the rule-specific checks: every WorkItem row agrees with `decide`. Every
/// disagreeing row is listed, not only the first, so one run shows the whole difference.
#[test]
fn work_item_rows_follow_the_table() {
    let table = table();
    let mut disagreements = Vec::new();
    for row in rows(&table, "work_items") {
        let state: WorkState = field(row, "state");
        let command: CommandType = field(row, "command");
        let coordinator = row.get("coordinator").is_some_and(|flag| flag == true);
        let answer = answered_work(decide(state, command, &facts(row, state), coordinator));
        let expected = expected_work(row);
        if answer != expected {
            disagreements.push(format!(
                "{}: decide answers {answer:?}, the table says {expected:?}",
                id(row)
            ));
        }
    }
    assert!(disagreements.is_empty(), "\n{}", disagreements.join("\n"));
}

/// SM-1, SM-3: the baseline (no facts, no coordinator flag) holds exactly one row for every
/// WorkItem state × every Command naming a WorkItem.
#[test]
fn baseline_covers_every_state_and_command() {
    let table = table();
    let mut seen = BTreeSet::new();
    for row in rows(&table, "work_items") {
        if row.get("facts").is_some() || row.get("coordinator").is_some() {
            continue;
        }
        let pair: (WorkState, CommandType) = (field(row, "state"), field(row, "command"));
        assert!(seen.insert(pair), "{}: a second baseline row", id(row));
    }
    for state in WorkState::ALL {
        for command in work_item_commands() {
            assert!(
                seen.contains(&(state, command)),
                "no baseline row for {} {}",
                state.as_str(),
                command.as_str()
            );
        }
    }
    assert_eq!(
        seen.len(),
        WorkState::ALL.len() * work_item_commands().len()
    );
}

/// Every Event the table names is one the Event vocabulary knows (`api::kinds`), so an
/// accepted Command never appends a type that replay or the GroupState fold cannot read.
#[test]
fn every_event_named_is_a_known_kind() {
    let table = table();
    for row in rows(&table, "work_items") {
        if let Some(event) = row.get("event") {
            let event: String = serde_json::from_value(event.clone()).expect("event is a string");
            assert!(
                EventKind::parse(&event).is_some(),
                "{}: {event} is not an Event kind",
                id(row)
            );
        }
    }
}

/// Row ids name the rule they check; two rows with one id would hide which one failed.
#[test]
fn row_ids_are_unique() {
    let table = table();
    let mut ids = BTreeSet::new();
    for name in ["work_items", "missions", "propagation", "child", "roles"] {
        for row in rows(&table, name) {
            assert!(ids.insert(id(row).to_owned()), "duplicate id {}", id(row));
        }
    }
}

/// A Mission's terminal Commands leave `active` only; every state × command is in the table.
#[test]
fn mission_rows_follow_the_table() {
    let table = table();
    let mut seen = BTreeSet::new();
    for row in rows(&table, "missions") {
        let state: MissionState = field(row, "state");
        let command: CommandType = field(row, "command");
        seen.insert((format!("{state:?}"), command));
        let expected: Result<MissionState, String> = match row.get("code") {
            Some(_) => Err(field(row, "code")),
            None => Ok(field(row, "next")),
        };
        let did_the_parent_work = row
            .get("facts")
            .and_then(|facts| facts.get("callerDidTheParentWork"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let live_work_items = row
            .get("facts")
            .and_then(|facts| facts.get("liveWorkItems"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let answer = decide_mission(state, command, did_the_parent_work, live_work_items)
            .map_err(|code| code.as_str().to_owned());
        assert_eq!(answer, expected, "{}", id(row));
    }
    let closing = [
        CommandType::MissionApprove,
        CommandType::MissionFail,
        CommandType::MissionCancel,
    ];
    for state in MISSION_STATES {
        for command in closing {
            assert!(
                seen.contains(&(format!("{state:?}"), command)),
                "no missions row for {state:?} {}",
                command.as_str()
            );
        }
    }
}

/// T18, SM-12, GAP-3: every Mission state × WorkItem state.
#[test]
fn propagation_rows_follow_the_table() {
    let table = table();
    let mut seen = BTreeSet::new();
    for row in rows(&table, "propagation") {
        let mission: MissionState = field(row, "mission");
        let state: WorkState = field(row, "state");
        seen.insert((format!("{mission:?}"), state));
        let expected: Option<WorkState> = field(row, "next");
        assert_eq!(propagate(mission, state), expected, "{}", id(row));
    }
    assert_eq!(
        seen.len(),
        MISSION_STATES.len() * WorkState::ALL.len(),
        "propagation covers every Mission state × WorkItem state"
    );
}

/// T16, T17: every child Mission state × child-failure policy.
#[test]
fn child_rows_follow_the_table() {
    let table = table();
    let mut seen = BTreeSet::new();
    for row in rows(&table, "child") {
        let child: MissionState = field(row, "child");
        let policy: ChildFailurePolicy = field(row, "policy");
        seen.insert(format!("{child:?} {policy:?}"));
        let expected: Option<WorkState> = field(row, "next");
        assert_eq!(child_outcome(child, policy), expected, "{}", id(row));
    }
    assert_eq!(
        seen.len(),
        MISSION_STATES.len() * 2,
        "child covers every Mission state × policy"
    );
}

/// GAP-5: who may issue each Command type, for each single role; every Command type is in
/// the table once.
#[test]
fn role_rows_follow_the_table() {
    let table = table();
    let mut seen = BTreeSet::new();
    for row in rows(&table, "roles") {
        let command: CommandType = field(row, "command");
        assert!(seen.insert(command), "{}: a second roles row", id(row));
        for (role, name) in ROLES {
            let expected = row[name]
                .as_bool()
                .unwrap_or_else(|| panic!("{}: no decision for {name}", id(row)));
            assert_eq!(
                role_allows(command, &[role]),
                expected,
                "{} for a {name}",
                id(row)
            );
        }
    }
    assert_eq!(
        seen.len(),
        CommandType::ALL.len(),
        "every Command type in roles"
    );
}
