//! OFL-12, CON-1.7, DESIGN §12: the budget rule in `fixtures/budget.json` against
//! `weft_api::work::budget::charge`: exactly up to a limit fits, one unit over any budget on
//! the lineage (the WorkItem's, its Mission's, a parent Mission's) is an overflow naming that
//! budget and dimension. Every case is named on failure.

use std::path::PathBuf;

use serde_json::{Map, Value};
use weft_api::work::budget::{Overflow, charge};
use weft_api::work::contract::Budgets;
use weft_api::work::views::BudgetView;

fn table() -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures/budget.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("the budget table is JSON")
}

/// Six dimensions from a partial object: a dimension left out is 0.
fn budgets(case: &str, partial: &Value) -> Budgets {
    let mut merged: Map<String, Value> = match serde_json::to_value(Budgets::default()) {
        Ok(Value::Object(zeros)) => zeros,
        other => panic!("Budgets serializes to an object, not {other:?}"),
    };
    for (name, value) in partial.as_object().expect("budgets are objects") {
        assert!(
            merged.contains_key(name),
            "{case}: unknown dimension {name}"
        );
        merged.insert(name.clone(), value.clone());
    }
    serde_json::from_value(Value::Object(merged)).unwrap_or_else(|e| panic!("{case}: {e}"))
}

fn close(case: &str, expected: &Budgets, actual: &Budgets) {
    let mut rounded = actual.clone();
    rounded.financial = (actual.financial * 1e6).round() / 1e6;
    let mut wanted = expected.clone();
    wanted.financial = (expected.financial * 1e6).round() / 1e6;
    assert_eq!(rounded, wanted, "{case}");
}

#[test]
fn budget_cases() {
    let table = table();
    let cases = table["cases"].as_array().expect("cases");
    assert!(cases.len() >= 10, "the table lost its cases");
    for case in cases {
        let id = case["id"].as_str().expect("every case has an id");
        let lineage: Vec<BudgetView> = case["lineage"]
            .as_array()
            .expect("lineage")
            .iter()
            .map(|line| BudgetView {
                limit: budgets(id, &line["limit"]),
                spent: budgets(id, &line["spent"]),
            })
            .collect();
        let delta = budgets(id, &case["delta"]);
        let answer = charge(&lineage, &delta);
        match (case.get("spent"), case.get("overflow")) {
            (Some(spent), None) => {
                let after = answer.unwrap_or_else(|o| panic!("{id}: refused {o:?}"));
                let expected = spent.as_array().expect("spent is a list");
                assert_eq!(after.len(), expected.len(), "{id}: one spend per line");
                for (actual, expected) in after.iter().zip(expected) {
                    close(id, &budgets(id, expected), actual);
                }
            }
            (None, Some(overflow)) => {
                let expected: Overflow = serde_json::from_value(overflow.clone())
                    .unwrap_or_else(|e| panic!("{id}: {e}"));
                assert_eq!(answer, Err(expected), "{id}");
            }
            _ => panic!("{id}: a case answers either spent or overflow"),
        }
    }
}
