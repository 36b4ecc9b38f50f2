//! Issue #50, search by an Agent: `GET /v1/groups/{g}/agents/{agentId}/events` answers what
//! one Agent did in a Group (the Commands it signed, what it published and reviewed, the
//! sessions it opened), newest first and paged, leaving out what the caller may not see; the
//! console's Agent page lists it beside the Evidence it recorded and the artifacts it produced.

use axum::body::Body;
use axum::http::{Method, StatusCode};
use serde_json::Value;

use super::harness::*;
use super::progress::{MISSION, owned, setup, start};
use super::scope::scoped_agent;
use super::work_setup::contract;

/// The types of `answer`'s Events, in the order given.
fn kinds(answer: &Value) -> Vec<String> {
    answer["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|event| event["type"].as_str().unwrap_or_default().to_owned())
        .collect()
}

backends!(
    async fn an_agents_events_are_what_it_did_newest_first(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, worker, _) = setup(&h).await;
        owned(&h, &coordinator, &worker, "wi-1", contract(&[])).await;
        start(&h, &worker, "wi-1").await;

        let by_coordinator = h
            .get_json(&coordinator, "/v1/groups/g1/agents/c1/events")
            .await;
        let by_worker = h
            .get_json(&coordinator, "/v1/groups/g1/agents/w1/events")
            .await;
        for (answer, agent) in [(&by_coordinator, "c1"), (&by_worker, "w1")] {
            assert_eq!(answer["agentId"], agent);
            assert_eq!(answer["groupId"], "g1");
            let events = answer["events"].as_array().expect("events");
            assert!(!events.is_empty(), "{answer}");
            let sequences: Vec<u64> = events
                .iter()
                .map(|event| event["sequence"].as_u64().expect("a sequence"))
                .collect();
            assert!(
                sequences.windows(2).all(|pair| pair[0] > pair[1]),
                "newest first: {sequences:?}"
            );
            // Each is the Agent's own act: a Command it signed, or its session.
            for event in events {
                let actor = event["payload"]["actor"]["agentId"]
                    .as_str()
                    .or(event["payload"]["agentId"].as_str());
                assert_eq!(actor, Some(agent), "{event}");
            }
            assert_eq!(answer["before"], Value::Null, "one page holds them all");
        }
        let coordinator_did = kinds(&by_coordinator);
        for expected in ["work.authorized", "work.offered", "session.opened"] {
            assert!(
                coordinator_did.iter().any(|k| k == expected),
                "{coordinator_did:?}"
            );
        }
        assert!(
            !coordinator_did.iter().any(|k| k == "work.started"),
            "{coordinator_did:?}"
        );
        let worker_did = kinds(&by_worker);
        for expected in ["work.offer_accepted", "work.started", "session.opened"] {
            assert!(worker_did.iter().any(|k| k == expected), "{worker_did:?}");
        }
        assert_eq!(
            worker_did[0], "work.started",
            "the newest first: {worker_did:?}"
        );

        // Paged: `before` of one page is where the next, older one starts.
        let first = h
            .get_json(&coordinator, "/v1/groups/g1/agents/w1/events?limit=1")
            .await;
        assert_eq!(kinds(&first), ["work.started"]);
        let before = first["before"].as_u64().expect("a next page");
        let second = h
            .get_json(
                &coordinator,
                &format!("/v1/groups/g1/agents/w1/events?limit=100&before={before}"),
            )
            .await;
        assert_eq!(kinds(&second), worker_did[1..], "the rest, in order");

        // An Agent that did nothing has an empty answer; an unknown parameter is refused.
        let idle = h
            .get_json(&coordinator, "/v1/groups/g1/agents/nobody/events")
            .await;
        assert_eq!(kinds(&idle), Vec::<String>::new());
        let unknown = h
            .call(
                Method::GET,
                "/v1/groups/g1/agents/w1/events?after=1",
                Some(&coordinator.token),
                Body::empty(),
            )
            .await;
        assert_eq!(unknown.status, StatusCode::BAD_REQUEST, "{unknown:?}");
    }
);

backends!(
    /// Another Group's member learns nothing (as for a Group that does not exist), and a
    /// Mission-scoped member sees the Agent's acts in its own Missions only.
    async fn an_agents_events_show_only_what_the_caller_may_see(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, worker, _) = setup(&h).await;
        owned(&h, &coordinator, &worker, "wi-1", contract(&[])).await;
        start(&h, &worker, "wi-1").await;

        let outsider = h.agent("o1", "g2", &["coordinator"]).await;
        for uri in [
            "/v1/groups/g1/agents/w1/events",
            "/v1/groups/no-such-group/agents/w1/events",
        ] {
            let answer = h
                .call(Method::GET, uri, Some(&outsider.token), Body::empty())
                .await;
            assert_eq!(answer.status, StatusCode::NOT_FOUND, "{uri}: {answer:?}");
        }
        let anonymous = h
            .call(
                Method::GET,
                "/v1/groups/g1/agents/w1/events",
                None,
                Body::empty(),
            )
            .await;
        assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);

        let inside = scoped_agent(&h, "s1", &["worker"], &[MISSION]).await;
        let outside = scoped_agent(&h, "s2", &["worker"], &["another-mission"]).await;
        let seen_inside = h.get_json(&inside, "/v1/groups/g1/agents/w1/events").await;
        assert!(
            kinds(&seen_inside).iter().any(|k| k == "work.started"),
            "{seen_inside}"
        );
        let seen_outside = h.get_json(&outside, "/v1/groups/g1/agents/w1/events").await;
        for event in seen_outside["events"].as_array().expect("events") {
            assert_ne!(
                event["payload"]["missionId"], MISSION,
                "another Mission's acts are left out: {event}"
            );
        }
        assert!(
            !kinds(&seen_outside).iter().any(|k| k.starts_with("work.")),
            "{seen_outside}"
        );
        // Paged one by one, every cursor is an Event the reader was given: a hidden Event's
        // sequence (when the Agent acted elsewhere) never shows.
        let mut before: Option<u64> = None;
        let mut pages = 0;
        loop {
            let uri = match before {
                Some(before) => format!("/v1/groups/g1/agents/w1/events?limit=1&before={before}"),
                None => "/v1/groups/g1/agents/w1/events?limit=1".to_owned(),
            };
            let page = h.get_json(&outside, &uri).await;
            let events = page["events"].as_array().expect("events");
            match page["before"].as_u64() {
                Some(next) => {
                    assert_eq!(events.len(), 1, "a full page: {page}");
                    assert_eq!(events[0]["sequence"].as_u64(), Some(next), "{page}");
                    assert_ne!(events[0]["payload"]["missionId"], MISSION, "{page}");
                    before = Some(next);
                }
                None => break,
            }
            pages += 1;
            assert!(pages < 100, "paging ends");
        }
    }
);

backends!(
    /// The console's Agent page (a search for its id) lists what it did, with its Commands.
    async fn the_agent_page_lists_what_it_did(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, worker, _) = setup(&h).await;
        owned(&h, &coordinator, &worker, "wi-1", contract(&[])).await;
        let request = axum::http::Request::builder()
            .uri("/ui/search?q=c1")
            .header("cookie", format!("weft_session={}", coordinator.token))
            .body(Body::empty())
            .expect("request");
        let answer = h.send(request).await;
        assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
        let page = String::from_utf8(answer.body.to_vec()).expect("html");
        let acts = page
            .split(r#"<table id="acts">"#)
            .nth(1)
            .and_then(|rest| rest.split("</table>").next())
            .expect("what c1 did");
        assert!(acts.contains("<code>work.offered</code>"), "{acts}");
        assert!(acts.contains(r#"href="/ui/workitems/wi-1""#), "{acts}");
        assert!(
            acts.contains("/v1/groups/g1/commands/"),
            "each act links to its signed Command: {acts}"
        );
        assert!(
            page.contains(r#"<p id="reviewed">None you may see.</p>"#),
            "{page}"
        );
    }
);
