//! A capability token's reach over resumable uploads (LSE-6: tokens are bound to the lease).
//! An upload session a token starts belongs to the token's lease as well as to its Agent and
//! Group: a token of another lease of the same Agent, or any token for a session the Agent
//! started itself, is told `not_found` and changes nothing; a rotated token of the same lease
//! goes on, and the Agent's own session reaches every upload of its own. One lease's tokens
//! hold at most 16 of the Agent's 64 upload sessions.

use axum::body::Body;
use axum::http::{Method, StatusCode};
use serde_json::Value;

use super::harness::*;
use super::tokens::{issue, lease_id, secret, setup, started};
use super::uploads::{chunk, finish, offset, on_upload, send_chunks, start_as};

/// Worker `w1` of `tokens::setup` with a second WorkItem started: its first lease, and a
/// `blob:write` token of each lease.
async fn two_leases(h: &Harness) -> (Agent, Value, Value, Value) {
    let (coordinator, worker, _, lease) = setup(h).await;
    let other_lease = started(h, &coordinator, &worker, "wi-2").await;
    let mine = issue(h, &worker, lease_id(&lease), &["blob:write"], 600).await;
    let theirs = issue(h, &worker, lease_id(&other_lease), &["blob:write"], 600).await;
    (worker, lease, mine, theirs)
}

backends!(
    /// LSE-6: a token reaches the upload sessions of its own lease and no others of its
    /// owner's; the owner's session reaches them all.
    async fn a_token_reaches_only_its_own_leases_uploads(kind: Kind) {
        let h = harness(kind).await;
        let (worker, lease, mine, theirs) = two_leases(&h).await;
        let by_token = start_as(&h, secret(&mine)).await;
        send_chunks(&h, &by_token, secret(&mine), b"lease", 0, 5).await;
        let by_session = start_as(&h, &worker.token).await;
        send_chunks(&h, &by_session, &worker.token, b"owner", 0, 5).await;

        let digest = digest_of(b"lease").blake3.to_string();
        for (location, token) in [
            (&by_token, secret(&theirs)),
            (&by_session, secret(&theirs)),
            (&by_session, secret(&mine)),
        ] {
            let before = h.fingerprint().await;
            let head = h
                .send(on_upload(Method::HEAD, location, token, &[], Body::empty()))
                .await;
            assert_eq!(head.status, StatusCode::NOT_FOUND, "{location}: {head:?}");
            assert_unchanged(&before, &h.fingerprint().await, "HEAD");
            refused(&h, chunk(location, token, 5, b"-more"), "not_found").await;
            refused(&h, finish(location, token, &digest), "not_found").await;
            refused(
                &h,
                on_upload(Method::DELETE, location, token, &[], Body::empty()),
                "not_found",
            )
            .await;
        }

        // A token rotated for the same lease goes on where the first one stopped.
        let rotated = issue(&h, &worker, lease_id(&lease), &["blob:write"], 600).await;
        send_chunks(&h, &by_token, secret(&rotated), b"lease-more", 5, 5).await;
        // The owner's session reaches its token's upload, and finishes it.
        assert_eq!(offset(&h, &by_token, &worker.token).await, 10);
        let whole = digest_of(b"lease-more").blake3.to_string();
        let stored = h.send(finish(&by_token, &worker.token, &whole)).await;
        assert_eq!(stored.status, StatusCode::CREATED, "{stored:?}");
        assert_eq!(offset(&h, &by_session, &worker.token).await, 5);
    }
);

backends!(
    /// One lease's tokens open at most 16 upload sessions (`too_many_uploads`, nothing
    /// changed); the Agent's session and its other leases still open theirs, and a
    /// cancelled session frees its lease's place.
    async fn a_lease_holds_at_most_sixteen_upload_sessions(kind: Kind) {
        let h = harness(kind).await;
        let (worker, _, mine, theirs) = two_leases(&h).await;
        let mut first = None;
        for _ in 0..16 {
            first.get_or_insert(start_as(&h, secret(&mine)).await);
        }
        let start = || {
            on_upload(
                Method::POST,
                "/v1/uploads",
                secret(&mine),
                &[],
                Body::empty(),
            )
        };
        let answer = refused(&h, start(), "too_many_uploads").await;
        assert_eq!(answer.status, StatusCode::TOO_MANY_REQUESTS);
        start_as(&h, secret(&theirs)).await;
        start_as(&h, &worker.token).await;
        let first = first.expect("a session");
        let cancel = on_upload(Method::DELETE, &first, secret(&mine), &[], Body::empty());
        assert_eq!(h.send(cancel).await.status, StatusCode::NO_CONTENT);
        start_as(&h, secret(&mine)).await;
    }
);
