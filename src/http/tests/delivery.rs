//! Delivery (DLV-1…DLV-8): the SSE stream (replay, then live), ACK cursors and signed
//! checkpoints.

use std::time::Duration;

use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode};
use futures::StreamExt as _;
use serde_json::{Value, json};
use tower::ServiceExt as _;
use weft_api::{Envelope, Id};

use super::harness::*;
use weft_api::dsse::CHECKPOINT_TYPE;

/// Reads SSE frames from a streaming response until `count` Events arrived (or 5 s passed).
pub(super) async fn read_events(body: Body, count: usize) -> Vec<Value> {
    let mut stream = body.into_data_stream();
    let mut text = String::new();
    let mut events = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while events.len() < count {
        let chunk = tokio::time::timeout_at(deadline, stream.next()).await;
        let Ok(Some(Ok(chunk))) = chunk else { break };
        text.push_str(&String::from_utf8_lossy(&chunk));
        // Exactly `count`: one chunk may carry more frames than asked for (a live Event
        // right behind the last one wanted), which made this helper flaky.
        while events.len() < count
            && let Some(end) = text.find("\n\n")
        {
            let frame: String = text.drain(..end + 2).collect();
            let id = frame
                .lines()
                .find_map(|l| l.strip_prefix("id: ").or_else(|| l.strip_prefix("id:")));
            let data: String = frame
                .lines()
                .filter_map(|l| l.strip_prefix("data: ").or_else(|| l.strip_prefix("data:")))
                .collect();
            if let (Some(id), false) = (id, data.is_empty()) {
                let event: Value = serde_json::from_str(&data).expect("event JSON");
                assert_eq!(
                    event["sequence"].to_string(),
                    id.trim(),
                    "SSE id is the sequence"
                );
                events.push(event);
            }
        }
    }
    events
}

pub(super) async fn open_stream(
    h: &Harness,
    token: &str,
    query: &str,
    last_event_id: Option<&str>,
) -> axum::response::Response {
    let mut request = Request::builder()
        .uri(format!("/v1/groups/g1/events/stream{query}"))
        .header("authorization", format!("Bearer {token}"));
    if let Some(id) = last_event_id {
        request = request.header("last-event-id", id);
    }
    h.app
        .clone()
        .oneshot(request.body(Body::empty()).expect("request"))
        .await
        .expect("infallible")
}

backends!(
    /// DLV-1, DLV-3, DLV-8: replay from a position, then live Events, in order, without gaps.
    async fn the_stream_replays_then_follows_live(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await; // events 1..3
        // The WorkItem the manifests name (issue #11): the harness coordinator joins, creates
        // the Mission and authorizes it, events 4..7.
        h.ensure_work_item("g1", "mission-1", "work-1").await;
        let response = open_stream(&h, &worker.token, "?after=5", None).await;
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        let reader = tokio::spawn(read_events(response.into_body(), 4));
        h.put(&worker, "g1", b"live one", &[]).await; // event 8
        h.put(&worker, "g1", b"live two", &[]).await; // event 9
        let events = reader.await.expect("reader");
        let sequences: Vec<u64> = events
            .iter()
            .filter_map(|e| e["sequence"].as_u64())
            .collect();
        assert_eq!(sequences, [6, 7, 8, 9], "{kind:?}");
        let parsed: Vec<weft_api::Event> = events
            .into_iter()
            .map(|e| serde_json::from_value(e).expect("event"))
            .collect();
        let first = &parsed[0];
        weft_api::event::verify_chain(first.sequence - 1, first.prev_hash, &parsed)
            .expect("the chain continues");
        // Last-Event-ID resumes after the given sequence.
        let response = open_stream(&h, &worker.token, "", Some("8")).await;
        let events = read_events(response.into_body(), 1).await;
        assert_eq!(events[0]["sequence"], json!(9));
    }
);

#[tokio::test]
async fn bad_stream_positions_are_refused() {
    let h = harness(Kind::Memory).await;
    let worker = h.agent("w1", "g1", &["worker"]).await;
    let outsider = h.agent("x1", "g2", &["worker"]).await;
    for (query, last, code) in [
        ("?after=99", None, "cursor_ahead"),
        ("?after=-1", None, "bad_request"),
        ("?after=abc", None, "bad_request"),
        ("?after=1&x=2", None, "bad_request"),
        ("", Some("nope"), "bad_request"),
    ] {
        let response = open_stream(&h, &worker.token, query, last).await;
        let status = response.status();
        let body = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .expect("body");
        let answer = Answer {
            status,
            headers: HeaderMap::from_iter([(
                axum::http::header::CONTENT_TYPE,
                "application/problem+json".parse().expect("value"),
            )]),
            body,
        };
        assert_eq!(answer.code(), code, "{query} {last:?}");
    }
    let response = open_stream(&h, &outsider.token, "", None).await;
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
}

backends!(
    /// DLV-5, DLV-6, DLV-7: cursors move forward only, never past the head, never trim history.
    async fn acks_move_cursors_forward_only(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let coordinator = h.agent("c1", "g1", &["coordinator"]).await;
        let ack = |token: String, body: Value| {
            let h = &h;
            async move {
                h.json_as(Method::POST, "/v1/groups/g1/cursors", &token, body, &[])
                    .await
            }
        };
        let before = h
            .call(
                Method::GET,
                "/v1/groups/g1/events",
                Some(&worker.token),
                Body::empty(),
            )
            .await
            .body;
        let moved = ack(
            worker.token.clone(),
            json!({"cursors": [{"groupId": "g1", "sequence": 4}]}),
        )
        .await;
        assert_eq!(
            moved.json()["cursors"][0],
            json!({"groupId": "g1", "agentId": "w1", "sequence": 4, "moved": true})
        );
        let older = ack(
            worker.token.clone(),
            json!({"cursors": [{"groupId": "g1", "sequence": 2}]}),
        )
        .await;
        assert_eq!(older.status, StatusCode::OK);
        assert_eq!(
            older.json()["cursors"][0]["moved"],
            json!(false),
            "an older ACK is a no-op that says so"
        );
        assert_eq!(older.json()["cursors"][0]["sequence"], json!(4));
        // JSON has one number type: `5.0` is the integer 5 (JSON Schema agrees; Schemathesis
        // sends it), while `5.5` is no sequence at all.
        let whole = ack(
            worker.token.clone(),
            json!({"cursors": [{"groupId": "g1", "sequence": 5.0}]}),
        )
        .await;
        assert_eq!(
            whole.json()["cursors"][0]["sequence"],
            json!(5),
            "{whole:?}"
        );
        let fraction = json!({"cursors": [{"groupId": "g1", "sequence": 5.5}]});
        refused(
            &h,
            json_request(
                Method::POST,
                "/v1/groups/g1/cursors",
                &worker.token,
                fraction,
                &[],
            ),
            "bad_request",
        )
        .await;
        for (token, body, code) in [
            (
                worker.token.as_str(),
                json!({"cursors": [{"groupId": "g1", "sequence": 999}]}),
                "cursor_ahead",
            ),
            (
                &worker.token,
                json!({"cursors": [{"groupId": "g2", "sequence": 1}]}),
                "bad_request",
            ),
            (
                &worker.token,
                json!({"cursors": [{"groupId": "g1", "sequence": -1}]}),
                "bad_request",
            ),
            (&worker.token, json!({"cursors": []}), "bad_request"),
            (
                ADMIN,
                json!({"cursors": [{"groupId": "g1", "sequence": 1}]}),
                "forbidden",
            ),
        ] {
            let ack = json_request(Method::POST, "/v1/groups/g1/cursors", token, body, &[]);
            refused(&h, ack, code).await;
        }
        // Concurrent ACKs: the cursor ends at the highest, whatever the order.
        let racing = (1..=5).rev().map(|n| {
            ack(
                coordinator.token.clone(),
                json!({"cursors": [{"groupId": "g1", "sequence": n}]}),
            )
        });
        futures::future::join_all(racing).await;
        let mine = h
            .call(
                Method::GET,
                "/v1/groups/g1/cursors",
                Some(&coordinator.token),
                Body::empty(),
            )
            .await
            .json();
        assert_eq!(mine["cursors"][0]["sequence"], json!(5));
        let all = h
            .call(
                Method::GET,
                "/v1/groups/g1/cursors?all=true",
                Some(&coordinator.token),
                Body::empty(),
            )
            .await
            .json();
        assert_eq!(all["cursors"].as_array().map(Vec::len), Some(2));
        let refused = h
            .call(
                Method::GET,
                "/v1/groups/g1/cursors?all=true",
                Some(&worker.token),
                Body::empty(),
            )
            .await;
        assert_eq!(refused.code(), "forbidden");
        // DLV-7: acknowledging deletes nothing.
        let after = h
            .call(
                Method::GET,
                "/v1/groups/g1/events",
                Some(&worker.token),
                Body::empty(),
            )
            .await
            .body;
        assert!(after.starts_with(&before[..before.len() - 2]), "{kind:?}");
    }
);

#[tokio::test]
async fn checkpoints_are_signed_heads() {
    let h = harness(Kind::Memory).await;
    let worker = h.agent("w1", "g1", &["worker"]).await;
    h.put(&worker, "g1", b"something", &[]).await;
    let signed = h
        .call(
            Method::GET,
            "/v1/groups/g1/checkpoint",
            Some(&worker.token),
            Body::empty(),
        )
        .await
        .json();
    let events: weft_api::views::EventPage = serde_json::from_slice(
        &h.call(
            Method::GET,
            "/v1/groups/g1/events",
            Some(&worker.token),
            Body::empty(),
        )
        .await
        .body,
    )
    .expect("events");
    let last = events.events.last().expect("events");
    assert_eq!(signed["checkpoint"]["sequence"], json!(last.sequence()));
    assert_eq!(signed["checkpoint"]["hash"], json!(last.hash().to_string()));
    let keys = h
        .call(Method::GET, "/v1/authority/keys", None, Body::empty())
        .await
        .json();
    let key = weft_api::dsse::parse_public_key(keys["keys"][0]["publicKey"].as_str().expect("key"))
        .expect("key");
    let envelope: Envelope = serde_json::from_value(signed["envelope"].clone()).expect("envelope");
    let payload = envelope
        .verify(CHECKPOINT_TYPE, &key)
        .expect("signed by the authority");
    let checkpoint: weft_api::views::Checkpoint =
        serde_json::from_slice(payload.value()).expect("payload");
    assert_eq!(checkpoint.hash, last.hash());
}

backends!(
    /// DLV-9, DLV-7: with retention, old Events leave the online log only into an archive artifact
    /// behind a signed snapshot; a replay from before the window is `410 cursor_too_old` carrying
    /// that signed reference; the chain continues unbroken across the compaction.
    async fn compaction_archives_history_behind_signed_snapshots(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await; // 1..=3
        // 4..=10: the WorkItem, and the worker's Execution Lease its manifests name (issue #12)
        h.ensure_lease(&worker, "g1", "mission-1", "work-1").await;
        for n in 0..5 {
            h.put(&worker, "g1", format!("artifact {n}").as_bytes(), &[])
                .await; // 11..=15
        }
        let before = h.stats().await;
        let compacted = h
            .store
            .compaction()
            .compact(weft_storage::Retention::events(3))
            .await
            .expect("compaction");
        assert_eq!(compacted, [("g1".to_owned(), 12)]);
        assert_eq!(
            h.stats().await.events,
            before.events - 12,
            "rows left the online log"
        );

        let old = h
            .call(
                Method::GET,
                "/v1/groups/g1/events?after=2",
                Some(&worker.token),
                Body::empty(),
            )
            .await;
        assert_eq!(
            (old.status, old.code().as_str()),
            (StatusCode::GONE, "cursor_too_old")
        );
        let snapshot: weft_api::views::SignedSnapshot =
            serde_json::from_value(old.json()["snapshot"].clone()).expect("snapshot");
        let keys = h
            .call(Method::GET, "/v1/authority/keys", None, Body::empty())
            .await
            .json();
        let key =
            weft_api::dsse::parse_public_key(keys["keys"][0]["publicKey"].as_str().expect("key"))
                .expect("key");
        let payload = snapshot
            .envelope
            .verify(weft_api::dsse::SNAPSHOT_TYPE, &key)
            .expect("signed by the authority");
        let reference: weft_api::views::SnapshotReference =
            serde_json::from_slice(payload.value()).expect("reference");
        assert_eq!(reference, snapshot.reference);
        assert_eq!(reference.sequence, 12);
        let stream = open_stream(&h, &worker.token, "?after=0", None).await;
        assert_eq!(stream.status(), StatusCode::GONE);

        // The archive holds the compacted Events, chained from genesis to the signed hash.
        let archive = h
            .call(
                Method::GET,
                &format!("/v1/groups/g1/snapshots/blobs/{}", snapshot.archive),
                Some(&worker.token),
                Body::empty(),
            )
            .await;
        assert_eq!(archive.status, StatusCode::OK);
        let archived: Vec<weft_api::Event> = archive
            .body
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_slice(l).expect("event"))
            .collect();
        let end = weft_api::event::verify_chain(0, weft_api::EventHash::GENESIS, &archived)
            .expect("archived chain");
        assert_eq!(end, (12, reference.event_chain_hash));
        let state = h
            .call(
                Method::GET,
                &format!("/v1/groups/g1/snapshots/blobs/{}", reference.state_digest),
                Some(&worker.token),
                Body::empty(),
            )
            .await
            .json();
        assert_eq!(
            (
                state["sequence"].as_u64(),
                state["artifacts"].as_object().map(|a| a.len())
            ),
            (Some(12), Some(2))
        );
        assert_eq!(state["memberships"]["w1"]["roles"], json!(["worker"]));

        // The online log continues the chain, and new Events keep extending it.
        h.put(&worker, "g1", b"after compaction", &[]).await;
        let online: weft_api::views::EventPage = serde_json::from_slice(
            &h.call(
                Method::GET,
                "/v1/groups/g1/events?after=12",
                Some(&worker.token),
                Body::empty(),
            )
            .await
            .body,
        )
        .expect("events");
        assert_eq!(
            weft_api::event::verify_chain(12, reference.event_chain_hash, &online.events)
                .expect("online chain")
                .0,
            16
        );
        // A second compaction continues from the first.
        assert_eq!(
            h.store
                .compaction()
                .compact(weft_storage::Retention::events(2))
                .await
                .expect("compaction"),
            [("g1".to_owned(), 14)]
        );
        let snapshots = h
            .call(
                Method::GET,
                "/v1/groups/g1/snapshots",
                Some(&worker.token),
                Body::empty(),
            )
            .await
            .json();
        assert_eq!(snapshots["snapshots"][1]["fromSequence"], json!(13));
        let report = h.store.fsck().await.expect("fsck");
        assert!(report.problems.is_empty(), "{:?}", report.problems);
        assert_eq!(
            report.n_events, 16,
            "archived and online Events together, {kind:?}"
        );
        let outsider = h.agent("x1", "g2", &["worker"]).await;
        let hidden = h
            .call(
                Method::GET,
                &format!("/v1/groups/g1/snapshots/blobs/{}", snapshot.archive),
                Some(&outsider.token),
                Body::empty(),
            )
            .await;
        assert_eq!(hidden.code(), "not_found");
    }
);

/// DLV-10: a subscriber whose cursor fell out of the online log restores the signed
/// snapshot (signature and digest checked) and resumes from its sequence.
#[tokio::test]
async fn a_subscriber_restores_from_a_snapshot_and_resumes() {
    let h = harness(Kind::Disk).await;
    let worker = h.agent("w1", "g1", &["worker"]).await; // 1..=3
    // 4..=10: the WorkItem, and the worker's Execution Lease its manifests name (issue #12)
    h.ensure_lease(&worker, "g1", "mission-1", "work-1").await;
    for n in 0..6 {
        h.put(&worker, "g1", format!("artifact {n}").as_bytes(), &[])
            .await; // 11..=16
    }
    h.store
        .compaction()
        .compact(weft_storage::Retention::events(2))
        .await
        .expect("compaction"); // through 14
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let serving = tokio::spawn(crate::serve(
        listener,
        h.app.clone(),
        Duration::from_secs(5),
        Duration::from_secs(30),
        futures::future::pending(),
    ));
    let client = weft_api::client::Client::new(base, Some(worker.token.clone()));
    let mut subscription = weft_api::subscription::Subscription::new(
        client,
        Id::parse("g", "g1").expect("id"),
        h.dir.path().join("cursor.json"),
    );
    // The client restores the server's projection and folds later Events into it with the
    // same pure function the server's snapshots use (`GroupState::apply`).
    let state = Arc::new(std::sync::Mutex::new(None::<weft_api::GroupState>));
    let restored_into = Arc::clone(&state);
    subscription.restore = Some(Box::new(move |reference, document| {
        let restored = weft_api::GroupState::from_document(document).map_err(|e| e.message)?;
        if restored.sequence != reference.sequence {
            return Err(format!(
                "state at {} for reference {}",
                restored.sequence, reference.sequence
            ));
        }
        *restored_into.lock().map_err(|_| "poisoned")? = Some(restored);
        Ok(())
    }));
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (seen_by, folded_into) = (Arc::clone(&seen), Arc::clone(&state));
    let cursor = subscription
        .run(move |event| {
            let (seen, state) = (Arc::clone(&seen_by), Arc::clone(&folded_into));
            async move {
                seen.lock().map_err(|_| "poisoned")?.push(event.sequence);
                if let Some(state) = state.lock().map_err(|_| "poisoned")?.as_mut() {
                    state.apply(&event);
                }
                Ok(if event.sequence >= 16 {
                    weft_api::subscription::Flow::Stop
                } else {
                    weft_api::subscription::Flow::Continue
                })
            }
        })
        .await
        .expect("subscription");
    assert_eq!(cursor, 16);
    assert_eq!(
        *seen.lock().expect("lock"),
        [15, 16],
        "resumed right after the snapshot"
    );
    let state = state.lock().expect("lock").clone().expect("restored");
    assert_eq!(
        state.sequence, 16,
        "the client folded 15 and 16 into the snapshot at 14"
    );
    assert_eq!(
        state.artifacts.len(),
        6,
        "4 in the snapshot, 2 folded after it"
    );
    assert_eq!(state.event_counts.get("artifact.published"), Some(&6));
    serving.abort();
}

/// Retention by age: Events older than the limit are compacted, the newest always stays.
#[tokio::test]
async fn retention_by_age_uses_the_injected_clock() {
    let h = harness(Kind::Memory).await;
    let worker = h.agent("w1", "g1", &["worker"]).await; // 1..=3
    let day = weft_storage::Retention::age(chrono::Duration::hours(24));
    assert_eq!(
        h.store.compaction().compact(day).await.expect("compaction"),
        [],
        "nothing is old yet"
    );
    h.clock.advance(chrono::Duration::hours(25));
    h.session(&worker.key, "w1", "g1").await; // 4, young (the old session expired meanwhile)
    assert_eq!(
        h.store.compaction().compact(day).await.expect("compaction"),
        [("g1".to_owned(), 3)]
    );
    h.clock.advance(chrono::Duration::hours(25));
    assert_eq!(
        h.store.compaction().compact(day).await.expect("compaction"),
        [],
        "the newest Event always stays online"
    );
}
