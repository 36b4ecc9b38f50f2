//! Issue #40, "session request replay after nonce pruning": the `issuedAt` skew is compared in
//! milliseconds, and a nonce is kept for twice the skew window plus a margin, so a captured
//! session request is refused at every instant after its first use, before and after the sweep.

use axum::http::StatusCode;
use chrono::Duration;

use super::harness::*;

backends!(
    /// Issue #40 (DESIGN §8.1 skew and nonce): a request dated just over the skew window ahead
    /// is `clock_skew`; one dated exactly at its edge is accepted once, and its replay is
    /// refused just before the sweep, just after the sweep, and when it would again be in the
    /// window under whole-second rounding.
    async fn a_session_request_is_never_accepted_twice(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let start = weft_storage::Clock::now(&h.clock);
        let ahead = |by: Duration| (start + by).to_rfc3339();
        let over = session_request(
            &worker.key,
            "w1",
            "g1",
            ahead(Duration::milliseconds(300_900)),
            &random_nonce(),
        );
        refused(&h, over, "clock_skew").await;
        let nonce = random_nonce();
        let edge = ahead(Duration::seconds(300));
        let first = h
            .open_session(&worker.key, "w1", "g1", edge.clone(), &nonce)
            .await;
        assert_eq!(first.status, StatusCode::CREATED, "{first:?}");
        let replay = || session_request(&worker.key, "w1", "g1", edge.clone(), &nonce);
        h.clock.advance(Duration::milliseconds(599_999));
        h.store.artifacts().sweep().await.expect("sweep");
        refused(&h, replay(), "nonce_reused").await;
        // Whole seconds would call 300.9 s of skew 300 s; the nonce must outlive that too.
        h.clock.advance(Duration::milliseconds(900));
        h.store.artifacts().sweep().await.expect("sweep");
        refused(&h, replay(), "clock_skew").await;
        h.clock.advance(Duration::seconds(120));
        h.store.artifacts().sweep().await.expect("sweep");
        refused(&h, replay(), "clock_skew").await;
    }
);
