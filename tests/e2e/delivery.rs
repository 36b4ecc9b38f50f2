//! Delivery with faults: a subscribed client keeps processing while another client appends,
//! the server is SIGKILLed and restarted, and the client ends with every Event exactly once,
//! in order, its durable cursor at the head (DLV-1…DLV-8). The subscriber keeps one cursor per
//! Group (SCH-1) and rebuilds its projection by replay from that cursor (SCH-2).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use ed25519_dalek::SigningKey;
use weft_api::Id;
use weft_api::client::Client;
use weft_api::session::Role;
use weft_api::subscription::{Flow, Subscription};

use crate::support::{TestServer, admin_client, member_session};

fn id(text: &str) -> Id {
    Id::parse("id", text).expect("valid id")
}

async fn append(admin: &Client, n: usize) {
    for i in 0..n {
        let roles = if i % 2 == 0 {
            [Role::Worker]
        } else {
            [Role::Reviewer]
        };
        admin
            .set_membership(&id("g1"), &id("churn"), &roles)
            .await
            .expect("append");
    }
}

/// The agent whose membership changes append Events without touching the reader's session.
async fn register_churn(admin: &Client) {
    let key = SigningKey::from_bytes(&[12u8; 32]);
    admin
        .register_agent(&id("churn"), &key.verifying_key(), "1")
        .await
        .expect("agent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_survives_a_server_crash_without_skipping_or_repeating() {
    let root = tempfile::tempdir().expect("tempdir");
    let data = root.path().join("data");
    let server = TestServer::start(&data, &[]);
    let address = server.addr.to_string();
    let admin = admin_client(&server);
    let (_, token) = member_session(&server, &admin, "g1", "reader", Role::Worker, 11).await;
    register_churn(&admin).await;
    let reader = Client::new(server.url(), Some(token));

    let seen = Arc::new(Mutex::new(Vec::<u64>::new()));
    let target = Arc::new(AtomicU64::new(u64::MAX));
    let cursor_file = root.path().join("cursor.json");
    let mut subscription = Subscription::new(reader.clone(), id("g1"), cursor_file.clone());
    subscription.ack_every = 7;
    let (seen_by_handler, target_of_handler) = (Arc::clone(&seen), Arc::clone(&target));
    let subscriber = tokio::spawn(subscription.run(move |event| {
        let (seen, target) = (Arc::clone(&seen_by_handler), Arc::clone(&target_of_handler));
        async move {
            // Short critical section, no await inside.
            seen.lock().map_err(|_| "poisoned")?.push(event.sequence);
            Ok(if event.sequence >= target.load(Ordering::SeqCst) {
                Flow::Stop
            } else {
                Flow::Continue
            })
        }
    }));

    append(&admin, 60).await;
    // Kill only once the subscriber is demonstrably mid-stream.
    for _ in 0..500 {
        if seen.lock().expect("lock").len() >= 30 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(
        seen.lock().expect("lock").len() >= 30,
        "the subscriber is following"
    );
    server.kill(); // SIGKILL while the subscriber is connected
    let server = TestServer::start_on(&data, &address, &[]);
    append(&admin, 60).await;
    let head = admin
        .checkpoint(&id("g1"))
        .await
        .expect("checkpoint")
        .checkpoint
        .sequence;
    target.store(head + 1, Ordering::SeqCst);
    append(&admin, 1).await;

    let cursor = tokio::time::timeout(std::time::Duration::from_secs(30), subscriber)
        .await
        .expect("the subscriber finishes")
        .expect("task")
        .expect("subscription");
    assert_eq!(cursor, head + 1);
    let seen = seen.lock().expect("lock").clone();
    assert_eq!(
        seen,
        (1..=head + 1).collect::<Vec<_>>(),
        "every Event exactly once, in order"
    );
    let persisted: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&cursor_file).expect("cursor file")).expect("json");
    assert_eq!(persisted["sequence"], serde_json::json!(head + 1));
    let server_cursor = reader
        .ack(&id("g1"), 1)
        .await
        .expect("older ACK is a no-op");
    assert_eq!(
        (server_cursor.sequence, server_cursor.moved),
        (head + 1, Some(false))
    );
    drop(server);
}

/// A hostile network between server and client: a proxy that serves each stream connection a
/// window of the real log shuffled, with duplicates, with stale Events from before the cursor,
/// and with some Events missing (then closes). The client's processed sequence is still
/// exactly 1..=N (DLV-2, DLV-3, DLV-4).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicates_reordering_and_gaps_between_server_and_client() {
    use axum::extract::{Path, Query, State};
    use axum::routing::{get, post};

    let root = tempfile::tempdir().expect("tempdir");
    let data = root.path().join("data");
    let server = TestServer::start(&data, &[]);
    let admin = admin_client(&server);
    let (_, token) = member_session(&server, &admin, "g1", "reader", Role::Worker, 21).await;
    register_churn(&admin).await;
    append(&admin, 80).await;
    let head = admin
        .checkpoint(&id("g1"))
        .await
        .expect("checkpoint")
        .checkpoint
        .sequence;

    #[derive(Clone)]
    struct Proxy {
        upstream: Client,
        connections: Arc<AtomicU64>,
    }
    async fn stream(
        State(proxy): State<Proxy>,
        Path(group): Path<String>,
        Query(query): Query<std::collections::HashMap<String, String>>,
    ) -> axum::response::Response {
        let after: u64 = query.get("after").and_then(|a| a.parse().ok()).unwrap_or(0);
        let connection = proxy.connections.fetch_add(1, Ordering::SeqCst);
        let group = id(&group);
        let window = proxy
            .upstream
            .events(&group, after, 20)
            .await
            .expect("upstream");
        let stale = proxy
            .upstream
            .events(&group, after.saturating_sub(5), 5)
            .await
            .expect("upstream");
        // A deterministic scramble per connection.
        let mut state = connection.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut frames: Vec<&weft_api::event::Delivered> = Vec::new();
        for event in &window {
            if next() % 5 != 0 {
                frames.push(event); // ~20% missing on this connection
            }
            if next() % 3 == 0 {
                frames.push(event); // duplicated
            }
        }
        frames.extend(stale.iter().filter(|e| e.sequence() <= after)); // already processed
        for i in (1..frames.len()).rev() {
            frames.swap(i, (next() % (i as u64 + 1)) as usize);
        }
        let mut body = String::new();
        for event in frames {
            let json = serde_json::to_string(event).expect("json");
            body.push_str(&format!(
                "id: {}\nevent: {}\ndata: {json}\n\n",
                event.sequence(),
                event.event().map_or("withheld", |e| e.kind.as_str())
            ));
        }
        (
            [(axum::http::header::CONTENT_TYPE, "text/event-stream")],
            body,
        )
            .into_response()
    }
    async fn ack(
        State(proxy): State<Proxy>,
        Path(group): Path<String>,
        body: axum::body::Bytes,
    ) -> axum::response::Response {
        let ack: weft_api::views::Ack = serde_json::from_slice(&body).expect("ack");
        let cursor = proxy
            .upstream
            .ack(&id(&group), ack.cursors[0].sequence)
            .await
            .expect("upstream ack");
        axum::Json(weft_api::views::Cursors {
            cursors: vec![cursor],
        })
        .into_response()
    }
    use axum::response::IntoResponse as _;
    let proxy = Proxy {
        upstream: Client::new(server.url(), Some(token.clone())),
        connections: Arc::default(),
    };
    let connections = Arc::clone(&proxy.connections);
    let app = axum::Router::new()
        .route("/v1/groups/{group}/events/stream", get(stream))
        .route("/v1/groups/{group}/cursors", post(ack))
        .with_state(proxy);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let proxy_url = format!("http://{}", listener.local_addr().expect("addr"));
    let serving = tokio::spawn(async move { axum::serve(listener, app).await });

    let mut subscription = Subscription::new(
        Client::new(proxy_url, Some(token)),
        id("g1"),
        root.path().join("cursor.json"),
    );
    subscription.ack_every = 10;
    subscription.max_backoff = std::time::Duration::from_millis(20);
    let seen = Arc::new(Mutex::new(Vec::<u64>::new()));
    let seen_by = Arc::clone(&seen);
    let cursor = tokio::time::timeout(
        std::time::Duration::from_secs(30),
        subscription.run(move |event| {
            let seen = Arc::clone(&seen_by);
            async move {
                seen.lock().map_err(|_| "poisoned")?.push(event.sequence);
                Ok(if event.sequence >= head {
                    Flow::Stop
                } else {
                    Flow::Continue
                })
            }
        }),
    )
    .await
    .expect("finishes")
    .expect("subscription");
    assert_eq!(cursor, head);
    assert_eq!(*seen.lock().expect("lock"), (1..=head).collect::<Vec<_>>());
    assert!(
        connections.load(Ordering::SeqCst) > 5,
        "the gaps forced reconnections"
    );
    serving.abort();
}
