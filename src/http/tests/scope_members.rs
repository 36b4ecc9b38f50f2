//! CTX-5 and the Group's Membership Events: a Mission-scoped member receives a
//! `membership.set` naming Missions it does not all see as a `withheld` placeholder (its own
//! excepted). Before, every `membership.set` reached every member whole, so a scoped member
//! learned the ids of Missions outside its scope and who works in them.

use axum::http::StatusCode;
use serde_json::{Value, json};

use super::harness::*;
use super::scope::{World, get, scoped_agent, world};

/// The payloads of the `membership.set` Events of `agent` that `reader` receives whole in
/// g1's log (a placeholder names no type or Agent).
async fn memberships_of(h: &Harness, reader: &Agent, agent: &str) -> Vec<Value> {
    let answer = get(h, reader, "/v1/groups/g1/events?after=0&limit=1000").await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    let events = answer.json()["events"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    events
        .into_iter()
        .filter(|e| e["type"] == "membership.set" && e["payload"]["agentId"] == agent)
        .map(|e| e["payload"].clone())
        .collect()
}

backends!(
    async fn a_scoped_member_does_not_learn_other_missions_from_memberships(kind: Kind) {
        let World {
            h, scoped, auditor, ..
        } = world(kind).await;
        scoped_agent(&h, "elsewhere", &["worker"], &["mission-2"]).await;
        scoped_agent(&h, "alongside", &["worker"], &["mission-1"]).await;
        let naming = |payloads: Vec<Value>, mission: &str| {
            payloads
                .into_iter()
                .filter(|p| p["missions"] == json!([mission]))
                .count()
        };
        // The auditor (the whole Group) sees both scoped Memberships whole.
        assert_eq!(
            naming(memberships_of(&h, &auditor, "elsewhere").await, "mission-2"),
            1
        );
        assert_eq!(
            naming(memberships_of(&h, &auditor, "alongside").await, "mission-1"),
            1
        );
        // The member scoped to mission-1: mission-2's Membership is withheld, mission-1's is
        // not, and its own is whole.
        assert_eq!(
            naming(memberships_of(&h, &scoped, "elsewhere").await, "mission-2"),
            0,
            "{kind:?}: mission-2's Membership reached a member of mission-1 only"
        );
        assert_eq!(
            naming(memberships_of(&h, &scoped, "alongside").await, "mission-1"),
            1
        );
        assert_eq!(
            naming(memberships_of(&h, &scoped, "scoped").await, "mission-1"),
            1
        );
    }
);
