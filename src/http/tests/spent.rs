//! Issue #46, nothing grows without bound: each collection forgets the rows no view reads.
//! An open lease keeps its newest 17 renewal rows (the view lists 16 and says there were
//! more), an ended lease none, and a capability token of an ended lease a day past its expiry
//! goes; the
//! WorkItem's view is the same before and after, and the forgotten token is refused exactly
//! as it was when it had only expired.

use axum::body::Body;
use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use super::harness::*;
use super::lifecycle::gc;
use super::progress::{checkpoint, ok_quoting, start};
use super::tokens::{issue, lease_id, secret, setup};
use super::work::{group, offer, ok, send};
use super::work_setup::contract;

/// How many rows `table` holds.
async fn rows(h: &Harness, table: &str) -> u64 {
    h.fingerprint().await.tables[table].0
}

/// `wi-1` as the operator reads it.
async fn view(h: &Harness) -> Value {
    let answer = h
        .call(
            Method::GET,
            "/v1/workitems/wi-1",
            Some(ADMIN),
            Body::empty(),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    answer.json()
}

/// A blob PUT with bearer `token`: its status and problem code.
async fn upload_with(h: &Harness, token: &str) -> (StatusCode, String) {
    let bytes = b"bytes under a dead token";
    let answer = h
        .call(
            Method::PUT,
            &format!("/v1/blobs/{}", digest_of(bytes).blake3),
            Some(token),
            Body::from(bytes.to_vec()),
        )
        .await;
    (answer.status, answer.code())
}

backends!(
    async fn rows_nothing_reads_are_forgotten(kind: Kind) {
        let h = harness(kind).await;
        let (_coordinator, w1, _w2, lease) = setup(&h).await;
        let first = lease_id(&lease).to_owned();
        let renew = json!({"workItemId": "wi-1"});
        for _ in 0..20 {
            h.clock.advance(chrono::Duration::seconds(1));
            ok_quoting(&h, &w1, "lease.renew", renew.clone(), &first).await;
        }
        assert_eq!(rows(&h, "lease_renewals").await, 20, "{kind:?}");
        let before = view(&h).await;
        assert_eq!(
            before["lease"]["renewalsTruncated"], true,
            "{kind:?}: {before}"
        );
        let report = gc(&h, false).await;
        assert_eq!(report["rowsForgotten"], 3, "{kind:?}: {report}");
        assert_eq!(rows(&h, "lease_renewals").await, 17, "{kind:?}");
        assert_eq!(
            view(&h).await,
            before,
            "{kind:?}: the view reads no forgotten row"
        );

        // The lease ends: none of its rows is read again.
        ok_quoting(&h, &w1, "work.checkpoint", checkpoint("wi-1"), &first).await;
        let second = start(&h, &w1, "wi-1").await;
        ok_quoting(&h, &w1, "lease.renew", renew, &second).await;
        let report = gc(&h, false).await;
        assert_eq!(report["rowsForgotten"], 17, "{kind:?}: {report}");
        assert_eq!(rows(&h, "lease_renewals").await, 1, "{kind:?}");
        let shown = view(&h).await;
        assert_eq!(shown["lease"]["renewals"].as_array().map(Vec::len), Some(1));
        assert_eq!(
            shown["lease"]["renewalsTruncated"], false,
            "{kind:?}: {shown}"
        );

        // A token of a lease that ended goes a day past its expiry; it is refused as it was
        // before.
        let tokens = rows(&h, "capability_tokens").await;
        let issued = issue(&h, &w1, &second, &["blob:write"], 60).await;
        ok_quoting(&h, &w1, "work.checkpoint", checkpoint("wi-1"), &second).await;
        assert_eq!(
            gc(&h, false).await["rowsForgotten"],
            1,
            "{kind:?}: the ended lease's renewal"
        );
        h.clock.advance(chrono::Duration::hours(23));
        assert_eq!(
            gc(&h, false).await["rowsForgotten"],
            0,
            "{kind:?}: expired, not a day past"
        );
        assert_eq!(rows(&h, "capability_tokens").await, tokens + 1);
        let expired = upload_with(&h, secret(&issued)).await;
        assert_eq!(expired.0, StatusCode::UNAUTHORIZED, "{kind:?}: {expired:?}");
        h.clock.advance(chrono::Duration::hours(2));
        let report = gc(&h, false).await;
        assert_eq!(report["rowsForgotten"], 1, "{kind:?}: {report}");
        assert_eq!(rows(&h, "capability_tokens").await, tokens, "{kind:?}");
        assert_eq!(upload_with(&h, secret(&issued)).await, expired, "{kind:?}");
    }
);

/// The view of WorkItem `id` as the operator reads it.
async fn view_of(h: &Harness, id: &str) -> Value {
    let answer = h
        .call(
            Method::GET,
            &format!("/v1/workitems/{id}"),
            Some(ADMIN),
            Body::empty(),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    answer.json()
}

backends!(
    /// A cancelled WorkItem's offers past the newest 17 (its view lists 16 and says there were
    /// more) are forgotten, and its view reads the same; a live WorkItem's offers all stay,
    /// since a forgotten id could be offered again.
    async fn an_ended_work_items_old_offers_are_forgotten(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, _w1, _w2) = group(&h).await;
        for wi in ["wi-ended", "wi-live"] {
            let authorize = json!({"workItemId": wi, "missionId": "m1", "contract": contract(&[])});
            ok(&h, &coordinator, "g1", "work.authorize", authorize).await;
            for n in 0..20 {
                let offered = offer(wi, &format!("o-{n}"), &["w1"], &h, 600);
                ok(&h, &coordinator, "g1", "work.offer", offered).await;
            }
        }
        let cancel = json!({"workItemId": "wi-ended", "reason": "not needed"});
        ok(&h, &coordinator, "g1", "work.cancel", cancel).await;
        let (ended, live) = (view_of(&h, "wi-ended").await, view_of(&h, "wi-live").await);
        assert_eq!(ended["offersTruncated"], true, "{kind:?}: {ended}");
        assert_eq!(rows(&h, "offers").await, 40, "{kind:?}");

        let report = gc(&h, false).await;
        assert_eq!(report["rowsForgotten"], 3, "{kind:?}: {report}");
        assert_eq!(rows(&h, "offers").await, 37, "{kind:?}");
        assert_eq!(view_of(&h, "wi-ended").await, ended, "{kind:?}");
        assert_eq!(view_of(&h, "wi-live").await, live, "{kind:?}");
        assert_eq!(gc(&h, false).await["rowsForgotten"], 0, "{kind:?}");

        // A forgotten offer is answered as an unknown one would be: the WorkItem takes no
        // offer (SM-4), and its id is not offered twice.
        let again = offer("wi-ended", "o-0", &["w1"], &h, 600);
        let refused = send(&h, &coordinator, "g1", "work.offer", again).await;
        assert_eq!(
            refused.status,
            StatusCode::CONFLICT,
            "{kind:?}: {refused:?}"
        );
        assert_eq!(rows(&h, "offers").await, 37, "{kind:?}");
    }
);

backends!(
    /// `POST /v1/admin/gc` answers within its request's time however much is left to trim:
    /// past its deadline no further batch of answers starts, yet each call trims one batch
    /// (progress), and a call without a deadline (the background round) trims the rest.
    async fn trimming_answers_stops_at_its_deadline(kind: Kind) {
        let h = harness(kind).await;
        let batch = weft_storage::bench_support::ANSWER_BATCH;
        let long_ago = weft_storage::Clock::now(&h.clock) - chrono::Duration::days(400);
        weft_storage::bench_support::keep_answers(&h.store, "g1", "w1", batch + 7, long_ago)
            .await
            .expect("kept answers");
        let lifespan = h.store.lifespan();
        let first = lifespan
            .trim_answers_until(Some(std::time::Instant::now()))
            .await
            .expect("trimmed");
        assert_eq!(first, batch, "{kind:?}: one batch, then the deadline");
        let rest = lifespan.trim_answers_until(None).await.expect("trimmed");
        assert_eq!(rest, 7, "{kind:?}: the rest, without a deadline");
        let none = lifespan
            .trim_answers_until(Some(std::time::Instant::now()))
            .await
            .expect("trimmed");
        assert_eq!(none, 0, "{kind:?}: nothing left");
    }
);

backends!(
    /// Past its deadline, forgetting spent rows still takes one batch of each of its walks
    /// (renewal rows, offers, tokens): a call whose time went to the collection does not
    /// leave the later walks starved. Here the offers walk, second, still forgets.
    async fn each_walk_takes_a_batch_past_the_deadline(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, _w1, _w2) = group(&h).await;
        let authorize =
            json!({"workItemId": "wi-ended", "missionId": "m1", "contract": contract(&[])});
        ok(&h, &coordinator, "g1", "work.authorize", authorize).await;
        for n in 0..20 {
            let offered = offer("wi-ended", &format!("o-{n}"), &["w1"], &h, 600);
            ok(&h, &coordinator, "g1", "work.offer", offered).await;
        }
        let cancel = json!({"workItemId": "wi-ended", "reason": "not needed"});
        ok(&h, &coordinator, "g1", "work.cancel", cancel).await;
        let forgotten = h
            .store
            .lifespan()
            .forget_spent_until(Some(std::time::Instant::now()))
            .await
            .expect("forgotten");
        assert_eq!(forgotten, 3, "{kind:?}");
        assert_eq!(rows(&h, "offers").await, 17, "{kind:?}");
    }
);
