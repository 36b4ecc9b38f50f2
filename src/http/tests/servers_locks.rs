//! Group locks under several servers over one PostgreSQL index (issue #43): a job that
//! learns only under its own Group's lock that it must lock other Groups too takes them all
//! again in Group order, so it never waits in a circle with another server's transaction.

use axum::http::{Method, StatusCode};
use weft_storage::bench_support::postgres::{
    derive_under_lock, hold_idempotency_key, lock_groups_in_turn, remove_membership_under_lock,
    tamper_inline_bytes, wait_for_waiters,
};

use super::harness::*;

/// An upload of small bytes through one server repairs a blob published in Groups `g1` and
/// `g2` and quarantined, while another server's transaction holds `g1`'s lock and then asks
/// for `g2`'s (as a quarantine of that blob takes them, in Group order). The uploader is in
/// `g2`: its job locked `g2`, learned of the repair, and asked for `g1` to append
/// `artifact.repaired` there, so the two waited on each other until PostgreSQL rolled one
/// back (the upload answered 503, or the other transaction failed). Now the upload runs again
/// with every lock in Group order: both finish, and each Group hears of the repair once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_upload_that_repairs_a_blob_of_two_groups_takes_their_locks_in_order() {
    if !postgres_available() {
        return;
    }
    let a = harness_with(Kind::Postgres, |config| config.hot_blob_bytes = 0).await;
    let url = a.index.clone().expect("a PostgreSQL index");
    let here = a.agent("w1", "g1", &["worker"]).await;
    let there = a.agent("w2", "g2", &["worker"]).await;
    let bytes: Vec<u8> = (0..4096u32).map(|i| (i % 251) as u8).collect();
    let id = a.put(&here, "g1", &bytes, &[]).await;
    assert_eq!(a.put(&there, "g2", &bytes, &[]).await, id);
    let mut flipped = bytes.clone();
    flipped[100] ^= 1;
    let changed = tamper_inline_bytes(&url, &id, &flipped).expect("tamper");
    assert_eq!(changed, 1, "{id} is stored inline");
    let uri = format!("/v1/artifacts/{id}/content");
    let answer = a
        .call(
            Method::GET,
            &uri,
            Some(&here.token),
            axum::body::Body::empty(),
        )
        .await;
    assert_eq!(answer.code(), "integrity_failure");
    assert_eq!(a.stats().await.quarantined, 1);

    let (holding, held) = tokio::sync::oneshot::channel();
    let holder = tokio::task::spawn_blocking(move || {
        let mut saw_a_waiter = false;
        let outcome = lock_groups_in_turn(&url, "g1", "g2", || {
            let _ = holding.send(());
            // Until the upload waits for `g1`'s lock (bounded: 10 s).
            saw_a_waiter = wait_for_waiters(&url, 1).expect("pg_stat_activity");
        });
        (outcome, saw_a_waiter)
    });
    held.await.expect("the other transaction holds g1");
    let repaired = a.upload(&there, &bytes).await;
    assert_eq!(repaired.blake3, id);
    let (outcome, saw_a_waiter) = holder.await.expect("the holder ran");
    outcome.expect("the other server's transaction commits");
    assert!(saw_a_waiter, "the upload waited for g1's lock");

    assert_eq!(a.stats().await.quarantined, 0, "repaired");
    let answer = a
        .call(
            Method::GET,
            &uri,
            Some(&here.token),
            axum::body::Body::empty(),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK);
    for (reader, group) in [(&here, "g1"), (&there, "g2")] {
        let events = a
            .get_json(reader, &format!("/v1/groups/{group}/events?limit=1000"))
            .await;
        let repairs = events["events"]
            .as_array()
            .expect("events")
            .iter()
            .filter(|event| event["type"] == "artifact.repaired")
            .count();
        assert_eq!(repairs, 1, "{group} hears of the repair once");
    }
}

/// An approver places a hold while another server removes its Membership: the removal holds
/// the Group's lock when the placement, its session checked, asks for it. Once the removal
/// commits, the placement checks the session again under the lock and is refused, so no
/// `hold.placed` follows the `membership.removed` it never saw (the check before the lock
/// alone let it commit).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_placed_while_another_server_removes_the_approver_is_refused() {
    if !postgres_available() {
        return;
    }
    let a = harness(Kind::Postgres).await;
    let url = a.index.clone().expect("a PostgreSQL index");
    let coordinator = a.agent("c1", "g1", &["coordinator"]).await;
    let approver = a.agent("a1", "g1", &["approver"]).await;
    super::work::mission(&a, &coordinator, "g1", "m-held").await;
    let session = a
        .store
        .sessions()
        .authenticate(&approver.token)
        .await
        .expect("session");
    let (locking, locked) = tokio::sync::oneshot::channel();
    let holder = tokio::task::spawn_blocking(move || {
        remove_membership_under_lock(&url, "g1", "a1", 99, || {
            let _ = locking.send(());
        })
    });
    locked.await.expect("the other transaction holds g1");
    let group = weft_api::Id::parse("groupId", "g1").expect("id");
    let target = weft_api::lifecycle::HoldTarget::MissionId(
        weft_api::Id::parse("missionId", "m-held").expect("id"),
    );
    let by = weft_storage::HoldBy::Approver {
        group: &group,
        session: &session,
    };
    let placed = a
        .store
        .lifespan()
        .place_hold(target, "r".to_owned(), by)
        .await;
    let waited = holder.await.expect("the holder ran").expect("it commits");
    assert!(waited, "the placement waited for g1's lock");
    let refused = placed.expect_err("refused once the Membership is gone");
    assert_eq!(
        refused.code(),
        weft_api::ErrorCode::StaleMembership,
        "{refused:?}"
    );
    let holds = a
        .admin_json(Method::GET, "/v1/admin/holds", serde_json::Value::Null)
        .await;
    assert_eq!(holds.json()["holds"], serde_json::json!([]), "{holds:?}");
}

/// DESIGN §6 across servers: with `s` derived from `b` and `t` from `a` recorded, another
/// server's publication in the Group records `a` derived from `s` (declared by a manifest of
/// the Group) and has not committed when a publication here of `b` derived from `t` checks
/// for a cycle. Each walked only what was committed, so both committed and the Group's graph
/// held the cycle `a → s → b → t → a`; their edges share no end, so locking the ends would
/// not stop it. Now both take the graph's lock: this one waits, then sees the other's edge
/// and answers `cycle`. (Only the Group's own edges count: another Group's provenance is not
/// this one's to learn of, `artifacts/publish.rs`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_publications_cannot_close_a_cycle_between_them() {
    if !postgres_available() {
        return;
    }
    let a = harness(Kind::Postgres).await;
    let url = a.index.clone().expect("a PostgreSQL index");
    let worker = a.agent("w2", "g2", &["worker"]).await;
    let a_id = a.put(&worker, "g2", b"a", &[]).await;
    let b_bytes = b"b";
    let b_id = a.put(&worker, "g2", b_bytes, &[]).await;
    let s_id = a.put(&worker, "g2", b"s", &[b_id]).await;
    let t_id = a.put(&worker, "g2", b"t", &[a_id]).await;
    let view = a
        .call(
            Method::GET,
            &format!("/v1/artifacts/{s_id}"),
            Some(&worker.token),
            Vec::new(),
        )
        .await
        .json();
    let declared_by: weft_api::ArtifactId =
        serde_json::from_value(view["manifests"][0]["manifestId"].clone()).expect("a manifest id");
    let (locking, locked) = tokio::sync::oneshot::channel();
    let holder = tokio::task::spawn_blocking(move || {
        derive_under_lock(&url, &a_id, &s_id, &declared_by, || {
            let _ = locking.send(());
        })
    });
    locked.await.expect("the other transaction holds its edge");
    let digests = a.upload(&worker, b_bytes).await;
    let envelope = sign(&worker.key, &manifest(&worker, "g2", digests, &[t_id]));
    let answer = a.publish(&worker, &envelope).await;
    let waited = holder.await.expect("the holder ran").expect("it commits");
    assert!(waited, "the publication waited for the graph's lock");
    assert_eq!(answer.status, StatusCode::CONFLICT, "{answer:?}");
    assert_eq!(answer.code(), "cycle", "{answer:?}");
}

/// One request for a capability token, sent with one Idempotency-Key to two servers at once
/// (a client retrying on another server while the first still works): both looked the key
/// up before either answered, found nothing, and each minted a token, two live secrets for
/// one request. The issue's answer now commits with the token, the key looked up again
/// under its lock in that transaction: one token, and the other server replays its answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_request_retried_on_another_server_mints_one_token() {
    if !postgres_available() {
        return;
    }
    let a = harness(Kind::Postgres).await;
    let b = a.peer(|_| {}).await;
    let url = a.index.clone().expect("a PostgreSQL index");
    let (_, worker, _, lease) = super::tokens::setup(&a).await;
    let uri = format!(
        "/v1/leases/{}/tokens",
        lease["leaseId"].as_str().expect("id")
    );
    let (locking, locked) = tokio::sync::oneshot::channel();
    // Both servers' look-ups wait behind this lock, then both find nothing.
    let holder = tokio::task::spawn_blocking(move || {
        hold_idempotency_key(&url, "agent:w1", "token-once", 2, || {
            let _ = locking.send(());
        })
    });
    locked.await.expect("the key is held");
    let body = serde_json::json!({"scope": ["blob:write"], "ttlSeconds": 60});
    let key = [("Idempotency-Key", "token-once")];
    let (first, second) = tokio::join!(
        a.json_as(Method::POST, &uri, &worker.token, body.clone(), &key),
        b.json_as(Method::POST, &uri, &worker.token, body, &key),
    );
    let waited = holder.await.expect("the holder ran").expect("it ends");
    assert!(waited, "both servers looked the key up behind its lock");
    assert_eq!(first.status, StatusCode::CREATED, "{first:?}");
    assert_eq!(second.status, StatusCode::CREATED, "{second:?}");
    assert_eq!(
        first.json()["tokenId"],
        second.json()["tokenId"],
        "one token, its answer replayed"
    );
}

/// A renewal that waited for its Group's lock (another server's batch held it) past its
/// lease's expiry: it ran with the time read at the door, so it renewed a lease that had
/// expired while it waited and stamped its Event with a time before those committed ahead
/// of it. A Command now reads the time once it holds the lock: the lease has expired, the
/// renewal is `stale_lease` (LSE-5), and nothing is kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renewal_that_waited_past_its_leases_expiry_is_refused() {
    if !postgres_available() {
        return;
    }
    let a = harness(Kind::Postgres).await;
    let (_, worker, _, lease) = super::tokens::setup(&a).await;
    let mut renewal = super::work_setup::command_doc(
        &a,
        &worker,
        "g1",
        "lease.renew",
        serde_json::json!({"workItemId": "wi-1"}),
    )
    .await;
    renewal["leaseId"] = lease["leaseId"].clone();
    let answer = past_the_lease_while_g1_is_held(
        &a,
        super::work_setup::command_request(&worker, "g1", &renewal),
    )
    .await;
    assert_eq!(answer.status, StatusCode::CONFLICT, "{answer:?}");
    assert_eq!(answer.code(), "stale_lease", "{answer:?}");
}

/// The same for a publication under the lease (LSE-5): it waited for its Group's lock while
/// the lease's 300 s passed, and is judged at the time it holds the lock: `stale_lease`, and
/// nothing recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_publication_that_waited_past_its_leases_expiry_is_refused() {
    if !postgres_available() {
        return;
    }
    let a = harness(Kind::Postgres).await;
    let (_, worker, _, lease) = super::tokens::setup(&a).await;
    a.upload(&worker, b"a late result").await;
    let lease_id = super::tokens::lease_id(&lease);
    let envelope = super::tokens::manifest_for(&worker, b"a late result", "wi-1", lease_id);
    let answer = past_the_lease_while_g1_is_held(&a, publish_request(&worker, &envelope)).await;
    assert_eq!(answer.status, StatusCode::CONFLICT, "{answer:?}");
    assert_eq!(answer.code(), "stale_lease", "{answer:?}");
}

/// And for the owner's Evidence under the lease: judged at the time it holds the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evidence_that_waited_past_its_leases_expiry_is_refused() {
    if !postgres_available() {
        return;
    }
    let a = harness(Kind::Postgres).await;
    let (_, worker, _, lease) = super::tokens::setup(&a).await;
    let signed = evidence_under(&worker, &lease);
    let answer = past_the_lease_while_g1_is_held(
        &a,
        request(Method::POST, "/v1/evidence", Some(&worker.token), signed),
    )
    .await;
    assert_eq!(answer.status, StatusCode::CONFLICT, "{answer:?}");
    assert_eq!(answer.code(), "stale_lease", "{answer:?}");
}

/// Sends `request` while another transaction holds `g1`'s lock; once the request waits for
/// it, the clock passes the 300 s of `wi-1`'s lease (`tokens::setup`), then the other
/// transaction commits. Answers the request's answer.
async fn past_the_lease_while_g1_is_held(
    a: &Harness,
    request: axum::http::Request<axum::body::Body>,
) -> Answer {
    while_g1_is_held_time_passes(a, request, 301).await
}

/// Sends `request` while another transaction holds `g1`'s lock; once the request waits for
/// it, the clock moves `seconds` on, then the other transaction commits.
async fn while_g1_is_held_time_passes(
    a: &Harness,
    request: axum::http::Request<axum::body::Body>,
    seconds: i64,
) -> Answer {
    let url = a.index.clone().expect("a PostgreSQL index");
    let (locking, locked) = tokio::sync::oneshot::channel();
    let clock = a.clock.clone();
    let holder = tokio::task::spawn_blocking(move || {
        let mut saw_a_waiter = false;
        let outcome = lock_groups_in_turn(&url, "g1", "g1", || {
            let _ = locking.send(());
            saw_a_waiter = wait_for_waiters(&url, 1).expect("pg_stat_activity");
            clock.advance(chrono::Duration::seconds(seconds));
        });
        (outcome, saw_a_waiter)
    });
    locked.await.expect("the other transaction holds g1");
    let answer = a.send(request).await;
    let (outcome, saw_a_waiter) = holder.await.expect("the holder ran");
    outcome.expect("the other transaction commits");
    assert!(saw_a_waiter, "the request waited for g1's lock");
    answer
}

/// A capability token of 30 s on `wi-1`'s lease (`tokens::setup`) with `scope`.
async fn short_token(
    a: &Harness,
    worker: &Agent,
    lease: &serde_json::Value,
    scope: &[&str],
) -> String {
    let issued = super::tokens::issue(a, worker, super::tokens::lease_id(lease), scope, 30).await;
    super::tokens::secret(&issued).to_owned()
}

/// A write under a capability token that expired while it waited for its Group's lock (the
/// lease still has 270 s to run) is refused `unauthorized`, for each way a token writes: a
/// publication, an Evidence record, an upload. Their transactions judged the token at the
/// time read before the wait, so it passed, and the lease, judged after, passed too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_that_expired_while_its_write_waited_writes_nothing() {
    if !postgres_available() {
        return;
    }
    let a = harness(Kind::Postgres).await;
    let (_, worker, _, lease) = super::tokens::setup(&a).await;
    let scope = ["artifact:publish", "evidence:record", "blob:write"];
    a.upload(&worker, b"a result under a token").await;
    let late = super::tokens::manifest_for(
        &worker,
        b"a result under a token",
        "wi-1",
        super::tokens::lease_id(&lease),
    );
    let body = serde_json::to_vec(&late).expect("json");
    let publication = request(Method::POST, "/v1/artifacts", None, body);
    let signed = evidence_under(&worker, &lease);
    let evidence = request(Method::POST, "/v1/evidence", None, signed);
    let upload = super::tokens::upload_request("none yet", b"bytes sent under a token");
    for (what, write) in [
        ("publication", publication),
        ("evidence", evidence),
        ("upload", upload),
    ] {
        let token = short_token(&a, &worker, &lease, &scope).await;
        let write = with_bearer(write, &token);
        let before = a.fingerprint().await;
        let answer = while_g1_is_held_time_passes(&a, write, 31).await;
        assert_eq!(
            answer.status,
            StatusCode::UNAUTHORIZED,
            "{what}: {answer:?}"
        );
        assert!(
            answer.json()["detail"]
                .as_str()
                .unwrap_or_default()
                .contains("expired"),
            "{what}: {answer:?}"
        );
        assert_unchanged(&before, &a.fingerprint().await, what);
    }
}

/// `request` carrying `bearer` instead.
fn with_bearer(
    mut request: axum::http::Request<axum::body::Body>,
    bearer: &str,
) -> axum::http::Request<axum::body::Body> {
    let value = format!("Bearer {bearer}").parse().expect("a header value");
    request.headers_mut().insert("authorization", value);
    request
}

/// An approver's hold that waited for its Group's lock while the approver's session expired
/// (13 h pass; sessions last 12) is refused: the placement judged the session at the time
/// read before the wait, so it passed and stamped its Event before those committed ahead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_that_waited_past_its_sessions_expiry_is_refused() {
    if !postgres_available() {
        return;
    }
    let a = harness(Kind::Postgres).await;
    let coordinator = a.agent("c1", "g1", &["coordinator"]).await;
    let approver = a.agent("a1", "g1", &["approver"]).await;
    super::work::mission(&a, &coordinator, "g1", "m-held").await;
    let placement = json_request(
        Method::POST,
        "/v1/groups/g1/holds",
        &approver.token,
        serde_json::json!({"missionId": "m-held", "reason": "an audit"}),
        &[],
    );
    let before = a.fingerprint().await;
    let answer = while_g1_is_held_time_passes(&a, placement, 13 * 3600).await;
    assert_eq!(answer.status, StatusCode::UNAUTHORIZED, "{answer:?}");
    assert_unchanged(&before, &a.fingerprint().await, "a hold placed too late");
}

/// A session renewal that waited for its Group's lock while the session expired (13 h
/// pass; sessions last 12) is refused: it judged the session, and counted the new expiry,
/// from the time read before the wait, so it renewed a dead session to an instant already
/// past.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_renewal_that_waited_past_its_expiry_is_refused() {
    if !postgres_available() {
        return;
    }
    let a = harness(Kind::Postgres).await;
    let worker = a.agent("w1", "g1", &["worker"]).await;
    let renewal = super::sessions::renewal(
        &worker.token,
        &worker.key,
        "w1",
        "g1",
        a.clock_now(),
        "nonce-renewed-late-01",
    );
    let before = a.fingerprint().await;
    let answer = while_g1_is_held_time_passes(&a, renewal, 13 * 3600).await;
    assert_eq!(answer.status, StatusCode::UNAUTHORIZED, "{answer:?}");
    assert_unchanged(&before, &a.fingerprint().await, "a renewal too late");
}

/// The owner's signed Evidence for `wi-1` under `lease` (`tokens::setup`).
fn evidence_under(worker: &Agent, lease: &serde_json::Value) -> Vec<u8> {
    let mut payload = super::work_setup::evidence_payload(
        worker,
        "g1",
        "mission-1",
        "wi-1",
        "automated_test",
        &[],
    );
    payload["execution"] =
        serde_json::json!({"leaseId": lease["leaseId"].clone(), "ownershipEpoch": 1});
    super::work_setup::signed_evidence(worker, &payload)
}
