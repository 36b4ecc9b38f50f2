//! EVD-1: the Evidence access table in `fixtures/evidence_rules.json` against the pure rules
//! of `weft_api::verdict`. Every (standing, method) pair and every (standing, own record?)
//! pair must be in the table, so a new method kind or standing cannot go undecided.

use std::path::PathBuf;

use serde_json::Value;
use weft_api::evidence::{MethodKind, Outcome};
use weft_api::verdict::{
    InForce, Standing, Weighed, in_force, may_claim, may_supersede, may_supersede_method,
    on_own_work,
};

const METHODS: [MethodKind; 6] = [
    MethodKind::IntegrityCheck,
    MethodKind::SchemaValidation,
    MethodKind::AutomatedTest,
    MethodKind::BusinessRule,
    MethodKind::ReviewerAgent,
    MethodKind::Human,
];

fn rules() -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures/evidence_rules.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("the rules table is JSON")
}

fn allowed(row: &Value, standing: Standing, what: &str) -> bool {
    row[standing.as_str()]
        .as_bool()
        .unwrap_or_else(|| panic!("{what}: no decision for {}", standing.as_str()))
}

/// EVD-1: every (standing, method kind) pair agrees with the table.
#[test]
fn method_claims_follow_the_table() {
    let rules = rules();
    let claims = rules["claims"].as_object().expect("claims");
    assert_eq!(claims.len(), METHODS.len(), "one row per method kind");
    for method in METHODS {
        let row = &claims[method.as_str()];
        for standing in Standing::ALL {
            assert_eq!(
                may_claim(standing, method),
                allowed(row, standing, method.as_str()),
                "{} claiming {}",
                standing.as_str(),
                method.as_str()
            );
        }
    }
}

/// EVD-1: only a record's producer, or a reviewer or coordinator, supersedes it.
#[test]
fn supersedes_follow_the_table() {
    let rules = rules();
    for (row, own) in [("own record", true), ("another's record", false)] {
        for standing in Standing::ALL {
            assert_eq!(
                may_supersede(standing, own),
                allowed(&rules["supersedes"][row], standing, row),
                "{} superseding {row}",
                standing.as_str()
            );
        }
    }
}

/// Issue #40 (EVD-1): a deterministic check is superseded only by a re-run of the same check.
#[test]
fn methods_supersede_as_the_table_says() {
    let rules = rules();
    for earlier in METHODS {
        let row = rules["superseded_by"][earlier.as_str()]
            .as_array()
            .unwrap_or_else(|| panic!("superseded_by: no row for {}", earlier.as_str()));
        for correction in METHODS {
            let listed = row.iter().any(|m| m.as_str() == Some(correction.as_str()));
            assert_eq!(
                may_supersede_method(earlier, correction),
                listed,
                "{} superseding {}",
                correction.as_str(),
                earlier.as_str()
            );
        }
    }
}

/// Separation of duties: on its own work every standing but the server's is a Worker's, so
/// a producer never reviews itself and never supersedes another's record there.
#[test]
fn own_work_follows_the_table() {
    let rules = rules();
    let row = rules["own_work"].as_object().expect("own_work");
    assert_eq!(row.len(), Standing::ALL.len(), "one decision per standing");
    for standing in Standing::ALL {
        let expected: Standing = row[standing.as_str()]
            .as_str()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("own_work: no standing for {}", standing.as_str()));
        let own = on_own_work(standing);
        assert_eq!(own, expected, "{} on its own work", standing.as_str());
        if own != Standing::Authority {
            assert!(!may_supersede(own, false), "{}", standing.as_str());
            for method in [MethodKind::ReviewerAgent, MethodKind::Human] {
                assert!(!may_claim(own, method), "{}", standing.as_str());
            }
        }
    }
}

/// EVD-1: a Worker's Evidence never overrides a review; reviews that disagree are contested.
#[test]
fn verdicts_follow_the_table() {
    let rules = rules();
    for case in rules["verdicts"].as_array().expect("verdicts") {
        let name = case["name"].as_str().expect("name");
        let records: Vec<Weighed> = case["records"]
            .as_array()
            .expect("records")
            .iter()
            .map(|record| Weighed {
                outcome: serde_json::from_value::<Outcome>(record[0].clone()).expect("outcome"),
                standing: record[1]
                    .as_str()
                    .expect("standing")
                    .parse()
                    .expect("standing"),
                superseded: record[2].as_bool().expect("superseded"),
            })
            .collect();
        let expected = case["latest"].as_u64().map(|latest| InForce {
            latest: latest as usize,
            contested: case["contested"].as_bool().expect("contested"),
        });
        assert_eq!(in_force(&records), expected, "{name}");
    }
}
