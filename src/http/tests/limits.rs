//! Admission limits and the upload timing oracle (issue #10, findings 6 and 7): only producing
//! roles upload; per-Agent caps on running uploads and uncited bytes answer 429 and a full
//! server 503, each with `Retry-After`; the sweep removes old uncited uploads and spent
//! nonces; logins are rate-limited per Agent after their signature checks out; and bytes held
//! only by another Group take exactly the path new bytes take; an Agent holds at most 64
//! resumable upload sessions.
//!
//! Nothing here is timed: the oracle is shown structurally, by which path the engine took and
//! how many bytes it staged (`Store::upload_counters`), and a stalled upload is held open by a
//! channel the test feeds, never by a sleep.

use axum::body::Body;
use axum::http::{Method, StatusCode};
use bytes::Bytes;
use serde_json::json;
use tower::ServiceExt as _;

use super::harness::*;

/// An upload request whose body the test feeds through the returned sender.
fn held_upload(
    token: &str,
    bytes: &[u8],
) -> (
    axum::http::Request<Body>,
    tokio::sync::mpsc::Sender<Result<Bytes, std::io::Error>>,
) {
    let (sender, mut receiver) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(1);
    let body = Body::from_stream(futures::stream::poll_fn(move |cx| receiver.poll_recv(cx)));
    let request = axum::http::Request::builder()
        .method(Method::PUT)
        .uri(format!("/v1/blobs/{}", digest_of(bytes).blake3))
        .header("authorization", format!("Bearer {token}"))
        .body(body)
        .expect("valid request");
    (request, sender)
}

/// Starts `request` on its own task and returns once the handler has read its first chunk,
/// so the upload is admitted and holds its slot. With a channel of capacity 1 the second send
/// completes only after the first chunk was taken: no sleep, no race.
async fn start_held(
    h: &Harness,
    request: axum::http::Request<Body>,
    sender: &tokio::sync::mpsc::Sender<Result<Bytes, std::io::Error>>,
    bytes: &[u8],
) -> tokio::task::JoinHandle<StatusCode> {
    let app = h.app.clone();
    let task = tokio::spawn(async move {
        let response = app.oneshot(request).await.expect("infallible");
        let status = response.status();
        let _ = axum::body::to_bytes(response.into_body(), usize::MAX).await;
        status
    });
    let (first, rest) = bytes.split_at(1);
    sender
        .send(Ok(Bytes::copy_from_slice(first)))
        .await
        .expect("handler reads");
    sender
        .send(Ok(Bytes::copy_from_slice(rest)))
        .await
        .expect("handler took the first chunk");
    task
}

fn put(token: &str, bytes: &[u8]) -> axum::http::Request<Body> {
    request(
        Method::PUT,
        &format!("/v1/blobs/{}", digest_of(bytes).blake3),
        Some(token),
        bytes.to_vec(),
    )
}

fn retry_after(answer: &Answer) -> u32 {
    answer.headers["retry-after"]
        .to_str()
        .expect("ascii")
        .parse()
        .expect("seconds")
}

backends!(
    /// Issue #10 finding 7: an auditor only reads, so it may not upload (403 `forbidden`,
    /// nothing kept, by either upload route); workers, coordinators and reviewers may.
    async fn only_producing_roles_may_upload(kind: Kind) {
        let h = harness(kind).await;
        let auditor = h.agent("a1", "g1", &["auditor"]).await;
        let answer = refused(&h, put(&auditor.token, b"audit notes"), "forbidden").await;
        assert_eq!(answer.status, StatusCode::FORBIDDEN);
        let post = request(
            Method::POST,
            "/v1/blobs",
            Some(&auditor.token),
            b"audit notes".to_vec(),
        );
        refused(&h, post, "forbidden").await;
        for (agent, role) in [("w1", "worker"), ("c1", "coordinator"), ("r1", "reviewer")] {
            let producer = h.agent(agent, "g1", &[role]).await;
            let answer = h.send(put(&producer.token, role.as_bytes())).await;
            assert_eq!(answer.status, StatusCode::CREATED, "{role}: {answer:?}");
        }
        // Roles are those of the session's Group: a worker elsewhere is an auditor here.
        let both = h.agent("b1", "g2", &["worker"]).await;
        let answer = h
            .admin_json(
                Method::PUT,
                "/v1/admin/groups/g1/members/b1",
                json!({"roles": ["auditor"]}),
            )
            .await;
        assert_eq!(answer.status, StatusCode::OK);
        let in_g1 = h.session(&both.key, "b1", "g1").await;
        refused(&h, put(&in_g1, b"from g1"), "forbidden").await;
        let answer = h.send(put(&both.token, b"from g2")).await;
        assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    }
);

backends!(
    /// Issue #10 finding 6: bytes only another Group holds are staged, fsynced and promoted
    /// exactly like new bytes (same path, same bytes staged, same 201), so an upload's cost
    /// tells nothing; only bytes the uploader may already see take the hash-only path (200).
    async fn bytes_held_by_another_group_cost_what_new_bytes_cost(kind: Kind) {
        let h = harness(kind).await;
        let outsider = h.agent("x1", "g2", &["worker"]).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let held_elsewhere = vec![7u8; 64 * 1024];
        let fresh = vec![9u8; 64 * 1024];
        h.put(&outsider, "g2", &held_elsewhere, &[]).await;

        let measure = |bytes: Vec<u8>| {
            let (h, token) = (&h, worker.token.clone());
            async move {
                let before = h.store.artifacts().upload_counters();
                let answer = h.send(put(&token, &bytes)).await;
                let after = h.store.artifacts().upload_counters();
                (
                    answer.status,
                    after.staged_uploads - before.staged_uploads,
                    after.staged_bytes - before.staged_bytes,
                    after.hashed_only_uploads - before.hashed_only_uploads,
                )
            }
        };
        let foreign = measure(held_elsewhere.clone()).await;
        let new = measure(fresh).await;
        assert_eq!(foreign, new, "held by another Group vs new bytes");
        assert_eq!(new, (StatusCode::CREATED, 1, 64 * 1024, 0));
        // Now the worker uploaded them itself: they are visible to it, the fast path answers.
        let visible = measure(held_elsewhere).await;
        assert_eq!(visible, (StatusCode::OK, 0, 0, 1));
    }
);

backends!(
    /// Issue #10 finding 7: one Agent may run only so many uploads at once (429
    /// `too_many_uploads` with Retry-After, nothing changed); another Agent is not held up,
    /// and the slot comes back when the upload ends.
    async fn running_uploads_are_capped_per_agent(kind: Kind) {
        let h = harness_with(kind, |config| config.max_uploads_per_agent = 1).await;
        let greedy = h.agent("w1", "g1", &["worker"]).await;
        let other = h.agent("w2", "g1", &["worker"]).await;
        let slow = b"a slow upload".to_vec();
        let (request, sender) = held_upload(&greedy.token, &slow);
        let task = start_held(&h, request, &sender, &slow).await;

        // `refused` would wait for staging to empty, which the held upload keeps busy: compare
        // the fingerprints directly (the held upload's staging object is in both).
        let before = h.store.fingerprint().await.expect("fingerprint");
        let answer = h.send(put(&greedy.token, b"one more")).await;
        assert_eq!(answer.code(), "too_many_uploads", "{answer:?}");
        assert_eq!(answer.status, StatusCode::TOO_MANY_REQUESTS);
        assert!(retry_after(&answer) >= 1);
        assert_unchanged(
            &before,
            &h.store.fingerprint().await.expect("fingerprint"),
            "too_many_uploads",
        );
        let answer = h.send(put(&other.token, b"not held up")).await;
        assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");

        drop(sender);
        assert_eq!(task.await.expect("joins"), StatusCode::CREATED);
        let answer = h.send(put(&greedy.token, b"one more")).await;
        assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    }
);

backends!(
    /// Issue #10 finding 7: past the process-wide bound on open uploads (what protects the
    /// descriptor limit) an upload answers 503 `overloaded` with Retry-After, never a 500.
    async fn a_full_server_answers_503_with_retry_after(kind: Kind) {
        let h = harness_with(kind, |config| config.max_open_uploads = 1).await;
        let first = h.agent("w1", "g1", &["worker"]).await;
        let second = h.agent("w2", "g1", &["worker"]).await;
        let slow = b"holds the only slot".to_vec();
        let (request, sender) = held_upload(&first.token, &slow);
        let task = start_held(&h, request, &sender, &slow).await;
        let before = h.store.fingerprint().await.expect("fingerprint");
        let answer = h.send(put(&second.token, b"no room")).await;
        assert_eq!(answer.code(), "overloaded", "{answer:?}");
        assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(retry_after(&answer) >= 1);
        assert_unchanged(
            &before,
            &h.store.fingerprint().await.expect("fingerprint"),
            "overloaded",
        );
        drop(sender);
        assert_eq!(task.await.expect("joins"), StatusCode::CREATED);
        let answer = h.send(put(&second.token, b"room again")).await;
        assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    }
);

backends!(
    /// Issue #10 finding 7: an Agent may hold only so many uploaded bytes that nothing cites
    /// (429 `upload_quota_exceeded` with Retry-After, nothing kept), whether it is already at
    /// the cap or a single body crosses it; publishing frees the room.
    async fn uncited_bytes_are_capped_per_agent(kind: Kind) {
        let h = harness_with(kind, |config| config.max_unpublished_bytes = 100).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let other = h.agent("w2", "g1", &["worker"]).await;
        let first = vec![1u8; 60];
        let digests = h.upload(&worker, &first).await;

        // 60 stored + 60 arriving > 100: refused on the stream.
        let answer = refused(&h, put(&worker.token, &[2u8; 60]), "upload_quota_exceeded").await;
        assert_eq!(answer.status, StatusCode::TOO_MANY_REQUESTS);
        assert!(retry_after(&answer) >= 1);
        // A single body larger than the whole cap, from an Agent holding nothing.
        refused(&h, put(&other.token, &[3u8; 101]), "upload_quota_exceeded").await;
        // At the cap, refused before any byte is read.
        h.upload(&worker, &[4u8; 40]).await;
        refused(&h, put(&worker.token, b"x"), "upload_quota_exceeded").await;

        // Publishing the first upload cites it: its 60 bytes no longer count.
        let envelope = sign(&worker.key, &manifest(&worker, "g1", digests, &[]));
        let answer = h.publish(&worker, &envelope).await;
        assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
        h.upload(&worker, &[2u8; 60]).await;
    }
);

backends!(
    /// Issue #15: an uncited small blob swept goes with its inline copy; no copy is left
    /// that no row names (fsck would say so), and nothing else is stored.
    async fn the_sweep_removes_an_inline_blob_with_its_copy(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        h.upload(&worker, b"small, never published").await;
        h.clock.advance(chrono::Duration::hours(25));
        let report = h.store.artifacts().sweep().await.expect("sweep");
        assert_eq!(report.blobs_removed, 1, "{report:?}");
        let stats = h.stats().await;
        assert_eq!((stats.blobs, stats.blob_objects), (0, 0));
        let report = h.store.fsck().await.expect("fsck");
        assert!(report.problems.is_empty(), "{:?}", report.problems);
    }
);

backends!(
    /// Stop 69: a sweep round examines a window of blobs in digest order, and the next round
    /// goes on from where it stopped (each round examined every blob, in the writer, while
    /// uploads waited on the sweep's lock). With a window of two, five abandoned uploads and
    /// a published one take three rounds, none removing more than its window holds; the
    /// fourth finds the walk at its end and the fifth starts over.
    async fn the_sweep_walks_the_blobs_a_window_a_round(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        for n in 0..5u8 {
            h.upload(&worker, &[n; 10]).await;
        }
        h.put(&worker, "g1", b"published", &[]).await;
        weft_storage::bench_support::set_sweep_walk(&h.store, &[], 2);
        h.clock.advance(chrono::Duration::hours(25));
        let mut removed = Vec::new();
        for _ in 0..5 {
            let report = h.store.artifacts().sweep().await.expect("sweep");
            removed.push(report.blobs_removed);
        }
        assert_eq!(removed[..3].iter().sum::<u64>(), 5, "{kind:?}: {removed:?}");
        assert!(removed.iter().all(|&n| n <= 2), "{kind:?}: {removed:?}");
        assert_eq!(removed[3..], [0, 0], "{kind:?}: {removed:?}");
    }
);

backends!(
    /// Stop 69: a walk that starts in the middle of the digests (as a server's does, at a
    /// random one) and reaches the last blob goes on from the first in the same round: one
    /// round removes the abandoned uploads on both sides of where it began.
    async fn a_sweep_round_from_the_middle_goes_round_to_where_it_began(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let mut firsts = Vec::new();
        for n in 0..6u8 {
            firsts.push(h.upload(&worker, &[n; 10]).await.blake3.0[0]);
        }
        assert!(
            firsts.iter().any(|&b| b < 0x80) && firsts.iter().any(|&b| b >= 0x80),
            "uploads on both sides of the start: {firsts:?}"
        );
        weft_storage::bench_support::set_sweep_walk(&h.store, &[0x80; 32], 10_000);
        h.clock.advance(chrono::Duration::hours(25));
        let report = h.store.artifacts().sweep().await.expect("sweep");
        assert_eq!(report.blobs_removed, 6, "{kind:?}: {report:?}");
    }
);

backends!(
    /// Issue #10 finding 7: the sweep removes an upload nothing cites once its latest upload
    /// is older than the TTL (rows and file), and keeps published bytes and recent uploads.
    async fn the_sweep_removes_old_uncited_uploads_only(kind: Kind) {
        let h = harness_files(kind).await;
        let mut worker = h.agent("w1", "g1", &["worker"]).await;
        let abandoned = h.upload(&worker, b"never published").await.blake3;
        let refreshed = h.upload(&worker, b"uploaded again later").await.blake3;
        let published = h.put(&worker, "g1", b"published", &[]).await;

        h.clock.advance(chrono::Duration::hours(23));
        let report = h.store.artifacts().sweep().await.expect("sweep");
        assert_eq!(report.blobs_removed, 0, "younger than 24 h");
        worker.token = h.session(&worker.key, "w1", "g1").await; // 12 h sessions
        h.upload(&worker, b"uploaded again later").await;
        h.clock.advance(chrono::Duration::hours(2));
        let report = h.store.artifacts().sweep().await.expect("sweep");
        assert_eq!(report.blobs_removed, 1, "{report:?}");
        assert_eq!(report.bytes_removed, b"never published".len() as u64);

        let head = |id: weft_api::ArtifactId| {
            h.send(request(
                Method::HEAD,
                &format!("/v1/blobs/{id}"),
                Some(&worker.token),
                Body::empty(),
            ))
        };
        assert_eq!(head(abandoned).await.status, StatusCode::NOT_FOUND);
        assert_eq!(head(refreshed).await.status, StatusCode::OK);
        assert_eq!(head(published).await.status, StatusCode::OK);
        let content = h
            .call(
                Method::GET,
                &format!("/v1/artifacts/{published}/content"),
                Some(&worker.token),
                Body::empty(),
            )
            .await;
        assert_eq!(content.body, &b"published"[..]);
        if kind == Kind::Disk {
            assert!(
                !h.blob_file(&abandoned).exists(),
                "the file went with the row"
            );
            assert!(h.blob_file(&published).exists());
        }
        let report = h.store.fsck().await.expect("fsck");
        assert!(report.problems.is_empty(), "{:?}", report.problems);
        // The swept bytes can be uploaded again, as new bytes.
        let answer = h.send(put(&worker.token, b"never published")).await;
        assert_eq!(answer.status, StatusCode::CREATED);
    }
);

backends!(
    /// Issue #10 finding 7: session nonces older than twice the skew window (plus a minute,
    /// issue #40) are pruned by the sweep, and a replay of a pruned request is still refused
    /// (its issuedAt is too old).
    async fn spent_nonces_are_pruned(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let issued_at = h.clock_now();
        let answer = h
            .open_session(
                &worker.key,
                "w1",
                "g1",
                issued_at.clone(),
                "0123456789abcdef",
            )
            .await;
        assert_eq!(answer.status, StatusCode::CREATED);
        let nonces = |h: &Harness| {
            let h = h.store.clone();
            async move { h.fingerprint().await.expect("fingerprint").tables["session_nonces"].0 }
        };
        assert_eq!(nonces(&h).await, 2);
        // Kept twice the 5-minute skew window plus a minute (issue #40).
        h.clock.advance(chrono::Duration::minutes(11));
        assert_eq!(
            h.store
                .artifacts()
                .sweep()
                .await
                .expect("sweep")
                .nonces_removed,
            0
        );
        h.clock.advance(chrono::Duration::minutes(1));
        assert_eq!(
            h.store
                .artifacts()
                .sweep()
                .await
                .expect("sweep")
                .nonces_removed,
            2
        );
        assert_eq!(nonces(&h).await, 0);
        let replay = session_request(&worker.key, "w1", "g1", issued_at, "0123456789abcdef");
        refused(&h, replay, "clock_skew").await;
    }
);

backends!(
    /// Issue #10 finding 7: an Agent may open only 10 sessions a minute (429 `rate_limited`
    /// with Retry-After, nothing changed); requests that fail their signature check spend
    /// nothing, so nobody can lock another Agent out; other Agents are unaffected.
    async fn logins_are_rate_limited_per_agent(kind: Kind) {
        let h = harness(kind).await;
        let victim = h.agent("w1", "g1", &["worker"]).await; // one login
        let other = h.agent("w2", "g1", &["worker"]).await;
        // Forged requests for w1 (signed by w2's key, or by a key nobody registered) are
        // refused before the bucket.
        let stranger = ed25519_dalek::SigningKey::from_bytes(&[42u8; 32]);
        for _ in 0..10 {
            let forged = session_request(&other.key, "w1", "g1", h.clock_now(), &random_nonce());
            refused(&h, forged, "producer_mismatch").await;
            let forged = session_request(&stranger, "w1", "g1", h.clock_now(), &random_nonce());
            refused(&h, forged, "unknown_key").await;
        }
        for _ in 0..9 {
            h.session(&victim.key, "w1", "g1").await;
        }
        let eleventh = session_request(&victim.key, "w1", "g1", h.clock_now(), &random_nonce());
        let answer = refused(&h, eleventh, "rate_limited").await;
        assert_eq!(answer.status, StatusCode::TOO_MANY_REQUESTS);
        let wait = retry_after(&answer);
        h.session(&other.key, "w2", "g1").await;
        h.clock.advance(chrono::Duration::seconds(i64::from(wait)));
        h.session(&victim.key, "w1", "g1").await;
    }
);

backends!(
    /// Issue #16: an Agent holds at most 64 resumable upload sessions open (each costs a row
    /// until it is finished, cancelled or swept); the 65th is refused (429) and changes
    /// nothing, and cancelling one makes room.
    async fn open_upload_sessions_per_agent_are_capped(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let start = || {
            request(
                Method::POST,
                "/v1/uploads",
                Some(&worker.token),
                Body::empty(),
            )
        };
        let mut first = None;
        for _ in 0..64 {
            let answer = h.send(start()).await;
            assert_eq!(answer.status, StatusCode::ACCEPTED, "{answer:?}");
            first.get_or_insert(
                answer.headers["location"]
                    .to_str()
                    .expect("ascii")
                    .to_owned(),
            );
        }
        let answer = refused(&h, start(), "too_many_uploads").await;
        assert_eq!(answer.status, StatusCode::TOO_MANY_REQUESTS);
        let location = first.expect("a session");
        let cancel = request(
            Method::DELETE,
            &location,
            Some(&worker.token),
            Body::empty(),
        );
        assert_eq!(h.send(cancel).await.status, StatusCode::NO_CONTENT);
        assert_eq!(h.send(start()).await.status, StatusCode::ACCEPTED);
    }
);

backends!(
    /// Issue #16: bytes held in open upload sessions count against the unpublished-bytes cap,
    /// so chunking an upload is no way around it.
    async fn upload_session_bytes_count_against_the_unpublished_cap(kind: Kind) {
        let h = harness_with(kind, |config| config.max_unpublished_bytes = 1000).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let answer = h
            .send(request(
                Method::POST,
                "/v1/uploads",
                Some(&worker.token),
                Body::empty(),
            ))
            .await;
        let location = answer.headers["location"]
            .to_str()
            .expect("ascii")
            .to_owned();
        let chunk = |start: u64, bytes: Vec<u8>| {
            let end = start + bytes.len() as u64 - 1;
            let mut patch = request(Method::PATCH, &location, Some(&worker.token), bytes);
            let range = format!("{start}-{end}").parse().expect("header value");
            patch.headers_mut().insert("content-range", range);
            patch
        };
        assert_eq!(
            h.send(chunk(0, vec![1; 800])).await.status,
            StatusCode::ACCEPTED
        );
        refused(&h, chunk(800, vec![2; 300]), "upload_quota_exceeded").await;
        // A one-shot upload of the same Agent meets the same cap.
        let one_shot = request(Method::POST, "/v1/blobs", Some(&worker.token), vec![3; 300]);
        refused(&h, one_shot, "upload_quota_exceeded").await;
        assert_eq!(
            h.send(chunk(800, vec![2; 200])).await.status,
            StatusCode::ACCEPTED
        );
    }
);

backends!(
    /// A resumable upload takes at most `--max-upload-chunks` chunks (its finish lists them
    /// all): one more is refused `bad_request` and changes nothing; the upload still
    /// finishes with the chunks it took.
    async fn an_upload_takes_at_most_its_chunk_cap(kind: Kind) {
        use crate::http::tests::uploads::{chunk, finish, send_chunks, start_as};

        let h = harness_with(kind, |config| config.max_upload_chunks = 3).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let bytes: Vec<u8> = (0..4000u32).map(|i| (i % 251) as u8).collect();
        let location = start_as(&h, &worker.token).await;
        send_chunks(&h, &location, &worker.token, &bytes[..3000], 0, 1000).await;
        let fourth = chunk(&location, &worker.token, 3000, &bytes[3000..]);
        let answer = refused(&h, fourth, "bad_request").await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST);
        let digest = digest_of(&bytes[..3000]).blake3;
        let answer = h
            .send(finish(&location, &worker.token, &digest.to_string()))
            .await;
        assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    }
);

backends!(
    /// A chunk into a session near the idle sweep's cutoff marks the session live before it
    /// streams (`keep_live`, for the sweep of another server); a chunk then refused takes the
    /// mark back, so the refusal changes nothing, and a good chunk afterwards still lands.
    async fn a_refused_chunk_into_a_nearly_idle_session_changes_nothing(kind: Kind) {
        use crate::http::tests::uploads::{chunk, on_upload, send_chunks, start_as};

        let h = harness_with(kind, |config| config.unpublished_blob_ttl_secs = 600).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let bytes: Vec<u8> = (0..2000u32).map(|i| (i % 251) as u8).collect();
        let location = start_as(&h, &worker.token).await;
        h.clock.advance(chrono::Duration::seconds(301));
        let short = on_upload(
            Method::PATCH,
            &location,
            &worker.token,
            &[("content-range", "0-999".to_owned())],
            bytes[..500].to_vec(),
        );
        refused(&h, short, "incomplete_body").await;
        let wrong_offset = chunk(&location, &worker.token, 7, &bytes[..1000]);
        refused(&h, wrong_offset, "upload_offset_mismatch").await;
        send_chunks(&h, &location, &worker.token, &bytes, 0, 1000).await;
    }
);
