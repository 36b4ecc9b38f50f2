//! Issue #47, SCH-11: Agent Cards and Presence. A card is signed by its Agent's current key,
//! names that key, and sets the version signed payloads must claim; an older card cannot be
//! replayed; another Group's member cannot read it. Presence is a member's rate-limited hint,
//! bounded by its card, read by the Group's coordinators only. Every refusal changes nothing.

use axum::body::Body;
use axum::http::{Method, StatusCode};
use base64::Engine as _;
use serde_json::{Value, json};
use weft_api::Envelope;
use weft_api::dsse::BASE64;
use weft_api::worker::card::AGENT_CARD_TYPE;

use super::harness::*;

pub(super) fn card(agent: &Agent, version: &str, max: u32, issued_at: &str) -> Value {
    json!({
        "agentId": agent.id, "version": version,
        "capabilities": [{"id": "cap.summarize", "version": "1"}],
        "maxConcurrency": max,
        "publicKey": BASE64.encode(agent.key.verifying_key().as_bytes()),
        "issuedAt": issued_at,
    })
}

pub(super) fn signed(signer: &Agent, payload: &Value) -> Value {
    let envelope = Envelope::sign(&signer.key, AGENT_CARD_TYPE, payload.to_string().as_bytes());
    serde_json::to_value(envelope).expect("envelope")
}

pub(super) async fn put_card(h: &Harness, as_token: &str, agent: &str, body: Value) -> Answer {
    h.json_as(
        Method::PUT,
        &format!("/v1/agents/{agent}/card"),
        as_token,
        body,
        &[],
    )
    .await
}

fn card_request(token: &str, agent: &str, body: Value) -> axum::http::Request<Body> {
    json_request(
        Method::PUT,
        &format!("/v1/agents/{agent}/card"),
        token,
        body,
        &[],
    )
}

backends!(
    /// SCH-11: the card sets the version manifests must claim; a replay of an older card, a
    /// card naming another key, a card signed by another Agent, and bad shapes are refused
    /// with nothing changed; reads are the Agent's, the operator's and its Groups'
    /// coordinators'; the operator cannot contradict its version; a key rotation ends it.
    async fn an_agent_card_is_signed_current_and_read_only_by_those_who_share_a_group(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let coordinator = h.agent("c1", "g1", &["coordinator"]).await;
        let peer = h.agent("w2", "g1", &["worker"]).await;
        let stranger = h.agent("c9", "g2", &["coordinator"]).await;
        let now = h.clock_now();

        let v2 = signed(&worker, &card(&worker, "2", 4, &now));
        let answer = put_card(&h, &worker.token, "w1", v2.clone()).await;
        assert_eq!(
            answer.status,
            StatusCode::CREATED,
            "{:?}: {answer:?}",
            h.kind
        );
        assert_eq!(answer.json()["version"], "2");
        let answer = put_card(&h, &worker.token, "w1", v2).await;
        assert_eq!(
            answer.status,
            StatusCode::OK,
            "{:?}: the same card again",
            h.kind
        );

        // Manifests must claim the card's version now.
        let digests = h.upload(&worker, b"card-bound bytes").await;
        let old = manifest(&worker, "g1", digests, &[]);
        refused(
            &h,
            publish_request(&worker, &sign(&worker.key, &old)),
            "producer_mismatch",
        )
        .await;
        let mut current = old.clone();
        current.producer.agent_card_version = "2".into();
        let answer = h.publish(&worker, &sign(&worker.key, &current)).await;
        assert!(answer.status.is_success(), "{:?}: {answer:?}", h.kind);

        // Reads.
        for (reader, token) in [
            ("itself", &worker.token),
            ("a coordinator", &coordinator.token),
        ] {
            let answer = h
                .call(
                    Method::GET,
                    "/v1/agents/w1/card",
                    Some(token),
                    Body::empty(),
                )
                .await;
            assert_eq!(
                answer.status,
                StatusCode::OK,
                "{:?}: {reader}: {answer:?}",
                h.kind
            );
            let envelope: Envelope =
                serde_json::from_value(answer.json()["envelope"].clone()).expect("envelope");
            envelope
                .verify(AGENT_CARD_TYPE, &worker.key.verifying_key())
                .expect("the stored card verifies");
        }
        for (reader, token) in [
            ("a peer worker", &peer.token),
            ("another Group", &stranger.token),
        ] {
            let answer = h
                .call(
                    Method::GET,
                    "/v1/agents/w1/card",
                    Some(token),
                    Body::empty(),
                )
                .await;
            assert_eq!(answer.code(), "not_found", "{:?}: {reader}", h.kind);
        }

        // Refusals, each changing nothing.
        let earlier =
            (weft_storage::Clock::now(&h.clock) - chrono::Duration::seconds(1)).to_rfc3339();
        let replay = signed(&worker, &card(&worker, "1", 4, &earlier));
        refused(&h, card_request(&worker.token, "w1", replay), "conflict").await;
        let later = (weft_storage::Clock::now(&h.clock) + chrono::Duration::hours(1)).to_rfc3339();
        let ahead = signed(&worker, &card(&worker, "3", 4, &later));
        refused(&h, card_request(&worker.token, "w1", ahead), "bad_request").await;
        let mut other_key = card(&worker, "3", 4, &now);
        other_key["publicKey"] = json!(BASE64.encode(peer.key.verifying_key().as_bytes()));
        refused(
            &h,
            card_request(&worker.token, "w1", signed(&worker, &other_key)),
            "producer_mismatch",
        )
        .await;
        let forged = signed(&peer, &card(&worker, "3", 4, &now));
        refused(&h, card_request(ADMIN, "w1", forged), "producer_mismatch").await;
        let theirs = signed(&peer, &card(&peer, "3", 4, &now));
        refused(&h, card_request(&worker.token, "w2", theirs), "forbidden").await;
        for bad in [
            card(&worker, "3", 0, &now),
            card(&worker, "3", 257, &now),
            card(&worker, "", 4, &now),
            json!({"agentId": "w1"}),
        ] {
            refused(
                &h,
                card_request(&worker.token, "w1", signed(&worker, &bad)),
                "bad_request",
            )
            .await;
        }
        let mut extra = card(&worker, "3", 4, &now);
        extra["extra"] = json!(1);
        refused(
            &h,
            card_request(&worker.token, "w1", signed(&worker, &extra)),
            "bad_request",
        )
        .await;
        // A newer card is taken, but not twice within 2 s: a card is a row, not a feed.
        h.clock.advance(chrono::Duration::seconds(1));
        let soon = signed(&worker, &card(&worker, "3", 4, &h.clock_now()));
        refused(&h, card_request(&worker.token, "w1", soon), "rate_limited").await;
        h.clock.advance(chrono::Duration::seconds(2));
        let later = signed(&worker, &card(&worker, "3", 4, &h.clock_now()));
        let answer = put_card(&h, &worker.token, "w1", later).await;
        assert_eq!(
            answer.status,
            StatusCode::CREATED,
            "{:?}: {answer:?}",
            h.kind
        );
        // The operator may not set another version than the card's (one source of truth).
        refused(
            &h,
            admin_request(
                Method::POST,
                "/v1/admin/agents",
                json!({"agentId": "w1", "publicKey": BASE64.encode(worker.key.verifying_key().as_bytes()), "agentCardVersion": "9"}),
            ),
            "conflict",
        )
        .await;
        // A rotated key takes the card with it: the card named the old key.
        let new_key = ed25519_dalek::SigningKey::from_bytes(&[42; 32]);
        let answer = h
            .admin_json(
                Method::POST,
                "/v1/admin/agents/w1/keys",
                json!({"publicKey": BASE64.encode(new_key.verifying_key().as_bytes())}),
            )
            .await;
        assert!(answer.status.is_success(), "{:?}: {answer:?}", h.kind);
        let answer = h
            .call(
                Method::GET,
                "/v1/agents/w1/card",
                Some(ADMIN),
                Body::empty(),
            )
            .await;
        assert_eq!(
            answer.code(),
            "not_found",
            "{:?}: the card after a rotation",
            h.kind
        );
    }
);

backends!(
    /// SCH-11: Presence is a member's hint in its own Group, at most its card's slots, at most
    /// once per 2 s, read by the Group's coordinators (with the card) and nobody else.
    async fn presence_is_a_rate_limited_hint_read_by_coordinators(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let coordinator = h.agent("c1", "g1", &["coordinator"]).await;
        let stranger = h.agent("c9", "g2", &["coordinator"]).await;
        let answer = put_card(
            &h,
            &worker.token,
            "w1",
            signed(&worker, &card(&worker, "2", 3, &h.clock_now())),
        )
        .await;
        assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
        let report = |free: u32, state: &str| json!({"freeSlots": free, "capacityState": state});
        let put = |token: &str, group: &str, body: Value| {
            json_request(
                Method::PUT,
                &format!("/v1/groups/{group}/presence"),
                token,
                body,
                &[],
            )
        };
        let answer = h
            .send(put(&worker.token, "g1", report(2, "available")))
            .await;
        assert_eq!(
            answer.status,
            StatusCode::NO_CONTENT,
            "{:?}: {answer:?}",
            h.kind
        );
        refused(
            &h,
            put(&worker.token, "g1", report(1, "busy")),
            "rate_limited",
        )
        .await;
        h.clock.advance(chrono::Duration::seconds(2));
        refused(
            &h,
            put(&worker.token, "g1", report(4, "available")),
            "bad_request",
        )
        .await;
        refused(&h, put(&worker.token, "g2", report(1, "busy")), "forbidden").await;
        refused(
            &h,
            put(&worker.token, "g1", json!({"freeSlots": 1})),
            "bad_request",
        )
        .await;
        refused(&h, put(ADMIN, "g1", report(1, "busy")), "forbidden").await;
        let answer = h.send(put(&worker.token, "g1", report(0, "busy"))).await;
        assert_eq!(answer.status, StatusCode::NO_CONTENT, "{answer:?}");

        let seen = h.get_json(&coordinator, "/v1/groups/g1/presence").await;
        assert_eq!(seen["agents"][0]["agentId"], "w1", "{seen}");
        assert_eq!(seen["agents"][0]["freeSlots"], 0);
        assert_eq!(seen["agents"][0]["capacityState"], "busy");
        assert_eq!(seen["agents"][0]["card"]["maxConcurrency"], 3);
        for (who, token, group) in [
            ("a worker", &worker.token, "g1"),
            ("another Group's coordinator", &stranger.token, "g1"),
        ] {
            let answer = h
                .call(
                    Method::GET,
                    &format!("/v1/groups/{group}/presence"),
                    Some(token),
                    Body::empty(),
                )
                .await;
            assert_eq!(answer.code(), "forbidden", "{:?}: {who}", h.kind);
        }
        // A deactivated Agent's Presence goes with it.
        let other = h.agent("w2", "g1", &["worker"]).await;
        let answer = h
            .send(put(&other.token, "g1", report(1, "available")))
            .await;
        assert_eq!(answer.status, StatusCode::NO_CONTENT, "{answer:?}");
        let answer = h
            .call(
                Method::POST,
                "/v1/admin/agents/w2/deactivate",
                Some(ADMIN),
                Body::empty(),
            )
            .await;
        assert!(answer.status.is_success(), "{answer:?}");
        let seen = h.get_json(&coordinator, "/v1/groups/g1/presence").await;
        assert!(
            seen["agents"]
                .as_array()
                .is_some_and(|a| a.iter().all(|a| a["agentId"] != "w2")),
            "{:?}: {seen}",
            h.kind
        );
        // A removed member's Presence goes with its Membership.
        let answer = h
            .call(
                Method::DELETE,
                "/v1/admin/groups/g1/members/w1",
                Some(ADMIN),
                Body::empty(),
            )
            .await;
        assert!(answer.status.is_success(), "{answer:?}");
        let seen = h.get_json(&coordinator, "/v1/groups/g1/presence").await;
        assert_eq!(seen["agents"], json!([]), "{:?}", h.kind);
    }
);

backends!(
    /// DIS-1, DIS-2: a Presence report discloses the schedule of each WorkItem its Worker owns
    /// in that Group, which the Group's coordinators read; a schedule of a WorkItem the Worker
    /// does not own, or of another Group's, is refused with nothing changed, so a report never
    /// names another Group's work.
    async fn presence_discloses_only_the_reporters_own_schedules_dis_1_dis_2(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let coordinator = h.agent("c1", "g1", &["coordinator"]).await;
        h.ensure_lease(&worker, "g1", "mission-1", "wi-mine").await;
        h.ensure_work_item("g1", "mission-1", "wi-other").await;
        h.ensure_work_item("g2", "mission-2", "wi-g2").await;
        let now = weft_storage::Clock::now(&h.clock);
        let schedule = |work_item: &str| {
            json!({"workItemId": work_item, "startFrom": now.to_rfc3339(),
                "startTo": (now + chrono::Duration::minutes(5)).to_rfc3339(),
                "completionAt": (now + chrono::Duration::minutes(20)).to_rfc3339(),
                "confidence": 0.8, "computeSeconds": 900})
        };
        let report = |schedules: Vec<Value>| {
            json_request(
                Method::PUT,
                "/v1/groups/g1/presence",
                &worker.token,
                json!({"freeSlots": 0, "capacityState": "busy", "schedules": schedules}),
                &[],
            )
        };
        refused(&h, report(vec![schedule("wi-other")]), "forbidden").await;
        refused(&h, report(vec![schedule("wi-g2")]), "forbidden").await;
        refused(
            &h,
            report(vec![schedule("wi-mine"), schedule("wi-mine")]),
            "bad_request",
        )
        .await;
        let mut unsure = schedule("wi-mine");
        unsure["confidence"] = json!(1.5);
        refused(&h, report(vec![unsure]), "bad_request").await;
        let answer = h.send(report(vec![schedule("wi-mine")])).await;
        assert_eq!(
            answer.status,
            StatusCode::NO_CONTENT,
            "{:?}: {answer:?}",
            h.kind
        );
        let seen = h.get_json(&coordinator, "/v1/groups/g1/presence").await;
        let disclosed = &seen["agents"][0]["schedules"][0];
        assert_eq!(disclosed["workItemId"], "wi-mine", "{seen}");
        assert_eq!(disclosed["computeSeconds"], 900);
        assert_eq!(disclosed["confidence"], 0.8);
    }
);
