//! Each Mission's WorkItems form a DAG (DEP-1) of `dependsOn` edges, kept in `work_deps`. A
//! Command that would close a cycle is refused `cycle` (DEP-4): the Mission's graph is loaded
//! into a petgraph `DiGraphMap` with the proposed edges and checked with a DFS. Eligibility
//! (DEP-3) is the contract's dependency policy over the dependencies' states, for one
//! WorkItem or for a whole Mission in one query (the graph read).

use crate::sql::Connection;
use petgraph::algo::is_cyclic_directed;
use petgraph::graphmap::DiGraphMap;
use weft_api::ErrorCode;
use weft_api::work::contract::DependencyPolicy;
use weft_api::work::machine::WorkState;
use weft_api::work::views::WorkNode;

use super::{WorkRow, load_work_item, parse_name};
use crate::error::{Error, reject};
use crate::rows::work_items;

/// DEP-3: every dependency satisfies the contract's policy (default: all `verified`).
pub(super) fn eligible(
    conn: &(impl crate::unit::Conn + ?Sized),
    row: &WorkRow,
) -> Result<bool, Error> {
    Ok(satisfied(
        row,
        work_items::dependency_states(conn, &row.work_item_id)?,
    ))
}

/// DEP-3 over the dependencies' states already read.
pub(super) fn satisfied(row: &WorkRow, states: impl IntoIterator<Item = WorkState>) -> bool {
    states
        .into_iter()
        .all(|state| satisfies(row.contract.dependency_policy, state))
}

/// Whether a dependency in `state` satisfies `policy` (DEP-3).
fn satisfies(policy: DependencyPolicy, state: WorkState) -> bool {
    match policy {
        DependencyPolicy::AllVerified => state == WorkState::Verified,
        DependencyPolicy::AllTerminal => matches!(
            state,
            WorkState::Verified | WorkState::Failed | WorkState::Cancelled
        ),
    }
}

/// Every WorkItem of a Mission with its state and eligibility (DEP-3), by id, in ONE query:
/// each WorkItem's row joined with its dependencies' states, the policy read from the
/// contract by SQLite (`json_extract`, absent = the serde default) instead of parsing every
/// contract. The per-node form (`load_work_item` + [`eligible`] each) took ~20-30 ms for a
/// Mission of 1,001 WorkItems; issue #11 asks p99 <= 5 ms (see `bench/commands.rs`).
/// Same rule as [`eligible`]: a dependency row naming no WorkItem is skipped (inner join).
pub(super) fn mission_nodes(conn: &Connection, mission_id: &str) -> Result<Vec<WorkNode>, Error> {
    let mut nodes: Vec<WorkNode> = Vec::new();
    // The policy of the node being filled (rows of one WorkItem are adjacent).
    let mut policy = DependencyPolicy::default();
    work_items::mission_nodes(conn, mission_id, |row| {
        if nodes
            .last()
            .is_none_or(|node| node.work_item_id != row.work_item_id)
        {
            policy = row.policy.map(parse_name).transpose()?.unwrap_or_default();
            nodes.push(WorkNode {
                work_item_id: row.work_item_id.to_owned(),
                state: parse_name(row.state)?,
                eligible: true,
            });
        }
        let Some(dependency) = row.dependency else {
            return Ok(());
        };
        let satisfied = satisfies(policy, parse_name(dependency)?);
        if let Some(node) = nodes.last_mut() {
            node.eligible &= satisfied;
        }
        Ok(())
    })?;
    Ok(nodes)
}

/// Checks that `work_item_id` (of `mission_id` in `group_id`) may depend on `depends_on`:
/// every dependency exists in this Group (`unknown_work_item` otherwise, as for another
/// Group's), belongs to the same Mission (`mission_mismatch`), and the edges close no cycle
/// (`cycle`, DEP-4).
pub(super) fn check(
    conn: &Connection,
    group_id: &str,
    mission_id: &str,
    work_item_id: &str,
    depends_on: &[weft_api::Id],
) -> Result<(), Error> {
    for dependency in depends_on {
        match load_work_item(conn, dependency.as_str())? {
            Some(row) if row.group_id == group_id => {
                if row.mission_id != mission_id {
                    return Err(reject(
                        ErrorCode::MissionMismatch,
                        format!(
                            "{dependency} belongs to another Mission (DEP-1: a Mission's graph)"
                        ),
                    ));
                }
            }
            _ => {
                return Err(reject(
                    ErrorCode::UnknownWorkItem,
                    format!("no WorkItem {dependency} to depend on"),
                ));
            }
        }
    }
    let edges = work_items::other_edges(conn, mission_id, work_item_id)?;
    let mut graph: DiGraphMap<&str, ()> = DiGraphMap::new();
    for (from, to) in &edges {
        graph.add_edge(from.as_str(), to.as_str(), ());
    }
    for dependency in depends_on {
        graph.add_edge(work_item_id, dependency.as_str(), ());
    }
    if is_cyclic_directed(&graph) {
        return Err(reject(
            ErrorCode::Cycle,
            format!("{work_item_id}'s dependencies would close a cycle (DEP-4)"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    //! DEP-3: the one-query graph read agrees with the per-WorkItem rule.

    use crate::sql::Connection;
    use serde_json::json;
    use weft_api::Id;

    use super::{eligible, mission_nodes};
    use crate::rows::{work_deps, work_items};
    use crate::unit::Tx;
    use crate::work::load_work_item;

    fn contract(policy: Option<&str>) -> String {
        let mut contract = json!({
            "objective": "o", "deliverables": [{"name": "r", "mediaType": "application/json", "schema": null}],
            "acceptanceCriteria": [{"id": "ac-1", "description": "d", "requiredEvidence": ["automated_test"]}],
            "inputs": [], "dependsOn": [],
            "permissions": {"tools": [], "data": [], "operations": []},
            "requiredCapabilities": [], "deadline": "2099-12-31T00:00:00Z", "urgency": "normal",
            "businessImpact": "medium",
            "budgets": {"financial": 1.0, "tokens": 1, "toolCalls": 1, "computeSeconds": 1,
                        "wallClockSeconds": 1, "sideEffects": 1},
            "retryPolicy": {"maxAttempts": 1, "backoffSeconds": 1, "deadline": null, "maxCost": 1.0},
            "risk": "low", "approvalRequired": false,
            "leases": {"offerSeconds": 1, "ownershipSeconds": 1, "executionSeconds": 1,
                       "blockedSeconds": 1, "graceSeconds": 1},
            "childFailurePolicy": "block"
        });
        if let Some(policy) = policy {
            contract["dependencyPolicy"] = json!(policy);
        }
        contract.to_string()
    }

    /// id, Mission, state, dependency policy, dependencies, expected eligibility.
    type Item = (
        &'static str,
        &'static str,
        &'static str,
        Option<&'static str>,
        &'static [&'static str],
        bool,
    );

    /// DEP-3 under both policies (and the default when the contract names none), a dangling
    /// edge skipped as the per-node join skips it, another Mission's WorkItems left out: the
    /// batched `mission_nodes` answers what `eligible` answers for each node.
    #[test]
    fn dep_3_mission_nodes_agree_with_eligible_per_node() {
        let conn = Connection::open_in_memory().expect("database");
        crate::schema::migrate(&conn).expect("schema");
        // Rows stand alone here (no Group, no Mission rows), and the dangling edge `h` has
        // to be writable to check that both forms skip it.
        conn.execute_batch("PRAGMA foreign_keys = OFF")
            .expect("pragma");
        let items: [Item; 10] = [
            ("a", "m1", "verified", Some("all_verified"), &[], true),
            ("b", "m1", "failed", Some("all_verified"), &[], true),
            ("c", "m1", "active", Some("all_verified"), &[], true),
            ("d", "m1", "open", Some("all_verified"), &["a"], true),
            ("e", "m1", "open", Some("all_verified"), &["a", "b"], false),
            ("f", "m1", "open", Some("all_terminal"), &["a", "b"], true),
            ("g", "m1", "open", Some("all_terminal"), &["a", "c"], false),
            ("h", "m1", "open", Some("all_verified"), &["ghost"], true),
            ("i", "m1", "queued", None, &["b"], false),
            ("z", "m2", "open", Some("all_verified"), &["c"], false),
        ];
        for (id, mission, state, policy, deps, _) in &items {
            let state = serde_json::from_value(json!(state)).expect("a state");
            let contract = serde_json::from_str(&contract(*policy)).expect("a contract");
            work_items::seed(
                &conn,
                &work_items::sample(id, "g1", mission, state, contract),
            )
            .expect("work item");
            let deps: Vec<Id> = deps
                .iter()
                .map(|dep| Id::parse("dependsOn", dep).expect("an id"))
                .collect();
            work_deps::set(&Tx::over(&conn), id, &deps).expect("edges");
        }
        let nodes = mission_nodes(&conn, "m1").expect("nodes");
        let got: Vec<(&str, bool)> = nodes
            .iter()
            .map(|n| (n.work_item_id.as_str(), n.eligible))
            .collect();
        let expected: Vec<(&str, bool)> = items
            .iter()
            .filter(|item| item.1 == "m1")
            .map(|item| (item.0, item.5))
            .collect();
        assert_eq!(got, expected);
        for node in &nodes {
            let row = load_work_item(&conn, &node.work_item_id)
                .expect("load")
                .expect("row");
            assert_eq!(node.state, row.state, "{}", node.work_item_id);
            assert_eq!(
                node.eligible,
                eligible(&conn, &row).expect("eligible"),
                "{}",
                node.work_item_id
            );
        }
    }
}
