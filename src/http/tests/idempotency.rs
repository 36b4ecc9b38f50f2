//! Idempotency keys (DLV-11, PRG-9): a retry with the same key gets the stored answer and the
//! work is done once; the same key for another request is refused.

use axum::body::Body;
use axum::http::{HeaderValue, Method, Request, StatusCode};
use serde_json::{Value, json};

use super::harness::*;

backends!(
    /// DLV-11 / PRG-9: Idempotency-Key: same key and request → stored answer, work done once;
    /// same key, other request → 422; concurrent requests with one key execute once (DLV-12:
    /// the network alone cannot make a retried side effect happen once; the key does).
    async fn idempotency_keys_make_retries_safe(kind: Kind) {
        let h = harness(kind).await;
        h.agent("w1", "g1", &["worker"]).await;
        let set_roles_request = |key: &'static str, roles: Value| {
            let body = json!({"roles": roles});
            let uri = "/v1/admin/groups/g1/members/w1";
            json_request(Method::PUT, uri, ADMIN, body, &[("idempotency-key", key)])
        };
        let set_roles = |key: &'static str, roles: Value| h.send(set_roles_request(key, roles));
        // Setting a membership is not idempotent by itself: each call bumps the epoch.
        let first = set_roles("op-1", json!(["worker", "reviewer"])).await;
        assert_eq!(first.json()["epoch"], json!(2));
        let before = h.fingerprint().await;
        let events_before = h.stats().await.events;
        let retries = (0..8).map(|_| set_roles("op-1", json!(["worker", "reviewer"])));
        for retry in futures::future::join_all(retries).await {
            assert_eq!(retry.status, StatusCode::OK);
            assert_eq!(retry.json(), first.json(), "the stored answer");
            assert_eq!(retry.headers["idempotent-replayed"], "true");
        }
        let other_request = set_roles_request("op-1", json!(["auditor"]));
        refused(&h, other_request, "idempotency_key_reused").await;
        assert_unchanged(&before, &h.fingerprint().await, "retries did the work once");
        // Concurrent first attempts with a fresh key execute once.
        let racing = (0..8).map(|_| set_roles("op-2", json!(["worker"])));
        let answers = futures::future::join_all(racing).await;
        let epochs: std::collections::BTreeSet<String> = answers
            .iter()
            .map(|a| a.json()["epoch"].to_string())
            .collect();
        assert_eq!(epochs.len(), 1, "one execution, one answer: {epochs:?}");
        assert_eq!(h.stats().await.events, events_before + 1);
        for bad in ["", "has space", "caf\u{e9}"] {
            let request = Request::builder()
                .method(Method::PUT)
                .uri("/v1/admin/groups/g1/members/w1")
                .header("authorization", format!("Bearer {ADMIN}"))
                .header("content-type", "application/json")
                .header(
                    "idempotency-key",
                    HeaderValue::from_bytes(bad.as_bytes()).expect("header bytes"),
                )
                .body(Body::from(json!({"roles": ["worker"]}).to_string()))
                .expect("request");
            refused(&h, request, "bad_request").await;
        }
    }
);

backends!(
    /// Issue #10's eighth finding, kept through the writer lanes of #43: a publication under an
    /// Idempotency-Key commits its answer with the work (`Claimed::Stored`), not after it. A
    /// Group's lane once took the request's claim and dropped it, and the answer was stored
    /// after the commit, so a crash between the two ran the work again.
    async fn an_idempotent_publication_commits_its_answer_with_the_work(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let digests = h.upload(&worker, b"answered with the work").await;
        let envelope = sign(&worker.key, &manifest(&worker, "g1", digests, &[]));
        // Bound to a live lease of a WorkItem the harness makes, as `Harness::publish` does.
        let envelope = h.bind_to_lease(&worker, &envelope).await;
        let reader = h
            .store
            .sessions()
            .authenticate(&worker.token)
            .await
            .expect("session")
            .reader();
        let claim = weft_storage::IdempotentRequest {
            scope: "test".to_owned(),
            key: "k-1".to_owned(),
            request_hash: [7; 32],
            received_at: h.store.now(),
        };
        let store = h.store.clone();
        let (published, claimed) = weft_storage::with_idempotency(claim, async move {
            crate::http::idempotency::answer_with(
                |(published, _): &(weft_api::views::Published, bool)| {
                    (StatusCode::CREATED, published.clone())
                },
            );
            store.artifacts().publish(envelope, &reader).await
        })
        .await;
        published.expect("published");
        assert!(
            matches!(claimed, Some(weft_storage::Claimed::Stored(_))),
            "{kind:?}: {claimed:?}"
        );
    }
);

backends!(
    /// PD-20: only hashes of secrets are stored. A capability token or a session asked for
    /// with an Idempotency-Key answers with a fresh bearer secret, and the answer is kept for a
    /// retry: it is stored sealed to the caller's own bearer token, so the index never holds the
    /// secret, the same session's retry gets it back, and another session of the same Agent
    /// (the key's scope) is refused instead of being handed it.
    async fn answers_holding_a_secret_are_stored_sealed_to_their_caller(kind: Kind) {
        let h = harness(kind).await;
        let (_, worker, _, lease) = crate::http::tests::tokens::setup(&h).await;
        let uri = format!(
            "/v1/leases/{}/tokens",
            crate::http::tests::tokens::lease_id(&lease)
        );
        let body = json!({"scope": ["blob:write"], "ttlSeconds": 60});
        let ask = |bearer: &str, key: &str, body: Value| {
            h.send(json_request(
                Method::POST,
                &uri,
                bearer,
                body,
                &[("idempotency-key", key)],
            ))
        };
        let first = ask(&worker.token, "tok-1", body.clone()).await;
        assert_eq!(first.status, StatusCode::CREATED, "{kind:?}: {first:?}");
        let secret = crate::http::tests::tokens::secret(&first.json()).to_owned();
        let retry = ask(&worker.token, "tok-1", body.clone()).await;
        assert_eq!(
            retry.json(),
            first.json(),
            "{kind:?}: the same session's retry"
        );
        assert_eq!(retry.headers["idempotent-replayed"], "true");
        let stored = h
            .store
            .idempotent_answer("agent:w1".to_owned(), "tok-1".to_owned())
            .await
            .expect("read")
            .expect("stored");
        let in_the_clear = |bytes: &[u8], secret: &str| {
            bytes
                .windows(secret.len())
                .any(|window| window == secret.as_bytes())
        };
        assert!(
            !in_the_clear(&stored.body, &secret),
            "{kind:?}: the token at rest"
        );
        // Another session of the same Agent, same key, same request: refused, not handed it.
        let other = h.session(&worker.key, "w1", "g1").await;
        let before = h.fingerprint().await;
        let refused = ask(&other, "tok-1", body.clone()).await;
        assert_eq!(
            refused.status,
            StatusCode::FORBIDDEN,
            "{kind:?}: {refused:?}"
        );
        assert!(!in_the_clear(&refused.body, &secret), "{kind:?}");
        let detail = refused.json()["detail"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(detail.contains("another session"), "{kind:?}: {detail}");
        assert_unchanged(&before, &h.fingerprint().await, "a refused retry");

        // A session opened in another Group (which leaves the caller's own session live) by a
        // caller that sent its own token and an Idempotency-Key.
        h.join(&worker, "g2", &["worker"]).await;
        let open = || {
            let mut request =
                session_request(&worker.key, "w1", "g2", h.clock_now(), "nonce-sealed-0001");
            let headers = request.headers_mut();
            let bearer = format!("Bearer {other}");
            headers.insert("authorization", bearer.parse().expect("header"));
            headers.insert("idempotency-key", HeaderValue::from_static("open-1"));
            h.send(request)
        };
        let opened = open().await;
        assert_eq!(opened.status, StatusCode::CREATED, "{kind:?}: {opened:?}");
        let session = opened.json()["token"].as_str().expect("token").to_owned();
        let stored = h
            .store
            .idempotent_answer("agent:w1".to_owned(), "open-1".to_owned())
            .await
            .expect("read")
            .expect("stored");
        assert!(
            !in_the_clear(&stored.body, &session),
            "{kind:?}: the session at rest"
        );
        let again = open().await;
        assert_eq!(
            again.json(),
            opened.json(),
            "{kind:?}: replayed to its caller"
        );
    }
);

backends!(
    /// A refusal under an Idempotency-Key stores nothing: it did no work, so a retry runs
    /// again (here it is then accepted), and a flood of refusals under fresh keys, each of
    /// whose details may echo its whole body, writes nothing (they were kept 30 days).
    async fn refusals_under_a_key_store_nothing(kind: Kind) {
        let h = harness(kind).await;
        h.agent("w1", "g1", &["worker"]).await;
        let uri = "/v1/admin/groups/g1/members/w1";
        let echoed = "x".repeat(100_000);
        let bad = |key: &'static str| {
            json_request(
                Method::PUT,
                uri,
                ADMIN,
                json!({"roles": [echoed]}),
                &[("idempotency-key", key)],
            )
        };
        for key in ["flood-1", "flood-2", "flood-3"] {
            let answer = refused(&h, bad(key), "bad_request").await;
            assert!(
                answer.body.len() > 100_000,
                "{kind:?}: the detail echoes the body"
            );
        }
        // The same key and request again: run again, not replayed.
        let again = refused(&h, bad("flood-1"), "bad_request").await;
        assert!(
            !again.headers.contains_key("idempotent-replayed"),
            "{kind:?}"
        );
        // The same key with a good request: done (the refusal held no claim on it).
        let good = json_request(
            Method::PUT,
            uri,
            ADMIN,
            json!({"roles": ["worker", "reviewer"]}),
            &[("idempotency-key", "flood-1")],
        );
        let answer = h.send(good).await;
        assert_eq!(answer.status, StatusCode::OK, "{kind:?}: {answer:?}");
    }
);
