//! Several servers over one PostgreSQL index and one Garage bucket (issue #43), in one test
//! process: two `Store`s with their own writers, readers, followers and sweep locks, as two
//! `weft serve` processes have. Only the PostgreSQL backend shares an index; on the others
//! these tests say they skipped. (The multi-process tests are `tests/e2e/scale_out.rs`.)

use std::sync::Arc;

use axum::http::{Method, StatusCode};
use weft_storage::{Options, Store};

use super::harness::*;
use crate::config::Config;
use crate::http::{AppState, app};

impl Harness {
    /// Another server over this harness's index and blob store (the PostgreSQL backend:
    /// several servers), with the same clock, its own fault hooks, and `adjust` applied.
    pub(super) async fn peer(&self, adjust: impl FnOnce(&mut Config)) -> Harness {
        assert_eq!(
            self.kind,
            Kind::Postgres,
            "only servers over PostgreSQL share an index"
        );
        let dir = tempfile::tempdir().expect("tempdir");
        let mut config = Config::with_data_dir(dir.path().to_path_buf());
        config.max_upload_bytes = MAX_UPLOAD;
        if let Some((location, credentials)) = &self.s3 {
            config.blobs = Some(location.clone());
            config.s3_credentials_file = Some(credentials.clone());
        }
        config.index = self.index.clone();
        adjust(&mut config);
        let mut options: Options = config.storage_options();
        options.clock = Arc::new(self.clock.clone());
        let faults = weft_storage::Faults::default();
        options.faults = faults.clone();
        options.lineage_inline_budget = None;
        let store = Store::open(options).await.expect("the peer opens");
        let state = AppState::new(store.clone(), ADMIN, &config);
        Harness {
            app: app(state),
            store,
            clock: self.clock.clone(),
            dir,
            kind: self.kind,
            s3: self.s3.clone(),
            index: self.index.clone(),
            coordinators: Default::default(),
            faults,
        }
    }
}

/// The bytes of a file blob (inline blobs are off in these harnesses).
fn bytes() -> Vec<u8> {
    (0..70_000u32).map(|i| (i % 251) as u8).collect()
}

/// A sweep on one server deletes an uncited upload's row and then its file while an upload of
/// the same bytes on another server found that file (or, its uploader's own bytes only hashed,
/// that row) and is about to record its row: the upload is refused as retryable (503
/// `storage_unavailable`) and records nothing, where it would otherwise record a row naming a
/// file that is gone; sent again, it stores the bytes, and both servers read them back
/// verified. Both paths: another member's upload (staged, its promotion finds the file) and
/// the uploader's own (hashed only).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upload_that_found_a_file_another_server_disposes_of_records_nothing() {
    if !postgres_available() {
        return;
    }
    let a = harness_files(Kind::Postgres).await;
    let b = a.peer(|config| config.inline_blob_bytes = 0).await;
    let mut worker = a.agent("w1", "g1", &["worker"]).await;
    let mut other = a.agent("w2", "g1", &["worker"]).await;
    let bytes = bytes();
    let uri = format!("/v1/blobs/{}", digest_of(&bytes).blake3);
    for staged in [true, false] {
        worker.token = a.session(&worker.key, "w1", "g1").await;
        a.upload(&worker, &bytes).await;
        a.clock.advance(chrono::Duration::days(2));
        worker.token = a.session(&worker.key, "w1", "g1").await;
        other.token = a.session(&other.key, "w2", "g1").await;
        let uploader = if staged { &other } else { &worker };

        // B finds the file (or the row) and waits before its row.
        b.faults.promoted().set(true);
        let upload = {
            let (app, request) = (
                b.app.clone(),
                request(Method::PUT, &uri, Some(&uploader.token), bytes.clone()),
            );
            tokio::spawn(async move {
                use tower::ServiceExt as _;
                let response = app.oneshot(request).await.expect("infallible service");
                let status = response.status();
                let body = axum::body::to_bytes(response.into_body(), usize::MAX)
                    .await
                    .unwrap_or_default();
                (status, body)
            })
        };
        b.faults.promoted().waiting(1).await;

        // A sweeps: the row and then the file go.
        let report = a.store.artifacts().sweep().await.expect("sweep");
        assert_eq!(report.blobs_removed, 1, "staged {staged}: {report:?}");

        b.faults.promoted().set(false);
        let (status, body) = upload.await.expect("the upload task");
        assert_eq!(
            status,
            StatusCode::SERVICE_UNAVAILABLE,
            "staged {staged}: {body:?}"
        );
        let problem: serde_json::Value = serde_json::from_slice(&body).expect("problem+json");
        assert_eq!(problem["code"], "storage_unavailable", "{problem}");
        let head = b
            .call(Method::HEAD, &uri, Some(&uploader.token), Vec::new())
            .await;
        assert_eq!(
            head.status,
            StatusCode::NOT_FOUND,
            "staged {staged}: a row was recorded"
        );

        // Sent again, the bytes are stored.
        let again = b
            .call(Method::PUT, &uri, Some(&uploader.token), bytes.clone())
            .await;
        assert_eq!(
            again.status,
            StatusCode::CREATED,
            "staged {staged}: {again:?}"
        );
        a.clock.advance(chrono::Duration::days(2));
        let report = a.store.artifacts().sweep().await.expect("sweep");
        assert_eq!(report.blobs_removed, 1, "staged {staged}: {report:?}");
    }
    // Published, both servers read the bytes back verified.
    worker.token = a.session(&worker.key, "w1", "g1").await;
    let id = a.put(&worker, "g1", &bytes, &[]).await;
    // One session per Agent and Group: each server in turn, the newer replacing the older.
    for server in [&a, &b] {
        let token = server.session(&worker.key, "w1", "g1").await;
        let read = server
            .call(
                Method::GET,
                &format!("/v1/artifacts/{id}/content"),
                Some(&token),
                Vec::new(),
            )
            .await;
        assert_eq!(read.status, StatusCode::OK, "{read:?}");
        assert_eq!(read.body.as_ref(), bytes.as_slice());
    }
}

/// The lineage index is a projection in every server (issue #43): publications committed
/// through one server reach another's index by following the log, so a provenance query on
/// either answers the same walk.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publications_through_one_server_reach_the_lineage_index_of_another() {
    if !postgres_available() {
        return;
    }
    let a = harness(Kind::Postgres).await;
    let b = a.peer(|_| {}).await;
    let worker = a.agent("w1", "g1", &["worker"]).await;
    let x = a.put(&worker, "g1", b"x", &[]).await;
    let y = a.put(&worker, "g1", b"y", &[x]).await;
    let z = a.put(&worker, "g1", b"z", &[y]).await;
    let token = b.session(&worker.key, "w1", "g1").await;
    let uri = format!("/v1/artifacts/{z}/provenance");
    let mut walked = Vec::new();
    // The other server hears of the commits asynchronously: a bounded wait, not a sleep.
    for _ in 0..500 {
        let answer = b.call(Method::GET, &uri, Some(&token), Vec::new()).await;
        if answer.status == StatusCode::OK {
            walked = answer.json()["artifacts"]
                .as_array()
                .expect("artifacts")
                .iter()
                .map(|node| node["id"].as_str().unwrap_or_default().to_owned())
                .collect();
            if walked.len() == 3 {
                break;
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(walked, [z.to_string(), y.to_string(), x.to_string()]);
}

/// Two servers compacting one Group at once: one snapshot is written, the other server finds
/// it and compacts nothing (under the Group's lock its starting snapshot is no longer the
/// newest), and both answer without an error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_compacting_one_group_write_one_snapshot() {
    if !postgres_available() {
        return;
    }
    let a = harness(Kind::Postgres).await;
    let b = a.peer(|_| {}).await;
    let worker = a.agent("w1", "g1", &["worker"]).await;
    for n in 0..4 {
        a.put(&worker, "g1", format!("artifact {n}").as_bytes(), &[])
            .await;
    }
    let retain = weft_storage::Retention::events(1);
    let (compact_a, compact_b) = (a.store.compaction(), b.store.compaction());
    let (on_a, on_b) = tokio::join!(compact_a.compact(retain), compact_b.compact(retain));
    let (on_a, on_b) = (on_a.expect("a compacts"), on_b.expect("b compacts"));
    assert_eq!(
        on_a.len() + on_b.len(),
        1,
        "one compaction: {on_a:?} {on_b:?}"
    );
    let tables = a.fingerprint().await.tables;
    assert_eq!(tables["snapshots"].0, 1, "one snapshot");
}

/// Two servers publishing into one Group at once: a member's artifact listing, paged by its
/// `after` cursor (a rowid), lists them in the order of their Events, so a client that pages
/// on as new ones commit never skips one that committed after a later-numbered one (a
/// publication draws its rowid under its Group's lock).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_groups_listing_pages_in_commit_order_across_servers() {
    if !postgres_available() {
        return;
    }
    let a = harness(Kind::Postgres).await;
    let b = a.peer(|_| {}).await;
    let worker = a.agent("w1", "g1", &["worker"]).await;
    async fn publish(h: &Harness, worker: &Agent, from: u32) {
        for n in from..from + 12 {
            h.put(worker, "g1", format!("artifact {n}").as_bytes(), &[])
                .await;
        }
    }
    // The WorkItem and its lease first (the harness sets them up on the first publication).
    publish(&a, &worker, 1000).await;
    tokio::join!(publish(&a, &worker, 0), publish(&b, &worker, 100));
    let mut sequences = Vec::new();
    let mut after = 0;
    loop {
        let page = a
            .get_json(&worker, &format!("/v1/artifacts?after={after}&limit=5"))
            .await;
        for item in page["items"].as_array().expect("items") {
            sequences.push(item["sequence"].as_u64().expect("sequence"));
        }
        match page["next"].as_u64() {
            Some(next) => after = next,
            None => break,
        }
    }
    assert_eq!(sequences.len(), 36);
    assert!(
        sequences.windows(2).all(|pair| pair[0] < pair[1]),
        "{sequences:?}"
    );
}

/// `request` sent through servers `a` and `b` at once: one must answer 201 and the other
/// 200 (the same record, kept once, never an error). Both answers, `a`'s first.
async fn once_through_both(
    a: &Harness,
    b: &Harness,
    request: impl Fn() -> axum::http::Request<axum::body::Body>,
    n: usize,
) -> (Answer, Answer) {
    let (x, y) = tokio::join!(a.send(request()), b.send(request()));
    let mut statuses = [x.status, y.status];
    statuses.sort();
    assert_eq!(
        statuses,
        [StatusCode::OK, StatusCode::CREATED],
        "{n}: {x:?} {y:?}"
    );
    (x, y)
}

/// The same signed Evidence sent to two servers at once is recorded once: one answers 201,
/// the other 200 with the same id and sequence, never an error. Each takes the Group's lock
/// before it looks for an earlier record, so the second waits for the first and finds it
/// (looked up first, both miss and the second fails on the record's key).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_evidence_sent_to_two_servers_at_once_is_recorded_once() {
    if !postgres_available() {
        return;
    }
    let a = harness(Kind::Postgres).await;
    let b = a.peer(|_| {}).await;
    let reviewer = a.agent("r1", "g1", &["reviewer"]).await;
    let first =
        super::work_setup::evidence_payload(&reviewer, "g1", "mission-1", "work-1", "human", &[]);
    a.recorded(&reviewer, &first).await;
    for n in 0..24 {
        let mut payload = first.clone();
        payload["result"]["summary"] = serde_json::json!(format!("run {n}"));
        let signed = weft_api::Envelope::sign(
            &reviewer.key,
            weft_api::evidence::EVIDENCE_TYPE,
            payload.to_string().as_bytes(),
        );
        let envelope = a.bind_evidence(&reviewer, &signed).await;
        let request = || super::evidence::record_request(&reviewer, &envelope);
        let (x, y) = once_through_both(&a, &b, request, n).await;
        assert_eq!(x.json(), y.json(), "{n}: the same id and sequence");
    }
}

/// As for Evidence: the same signed manifest published through two servers at once is
/// published once, one 201 and one 200 naming the same sequence, never an error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_manifest_sent_to_two_servers_at_once_is_published_once() {
    if !postgres_available() {
        return;
    }
    let a = harness(Kind::Postgres).await;
    let b = a.peer(|_| {}).await;
    let worker = a.agent("w1", "g1", &["worker"]).await;
    for n in 0..24 {
        let digests = a.upload(&worker, format!("result {n}").as_bytes()).await;
        let signed = sign(&worker.key, &manifest(&worker, "g1", digests, &[]));
        let envelope = a.bind_to_lease(&worker, &signed).await;
        once_through_both(&a, &b, || publish_request(&worker, &envelope), n).await;
    }
}

/// As for Evidence: the same signed Context Package sent to two servers at once is
/// published once, one 201 and one 200 with the same body, never an error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_context_package_sent_to_two_servers_at_once_is_published_once() {
    if !postgres_available() {
        return;
    }
    let a = harness(Kind::Postgres).await;
    let b = a.peer(|_| {}).await;
    let (worker, artifact) = super::context::setting(&a).await;
    let to = super::context::head(&a, "g1").await;
    for n in 0..24 {
        let payload = super::context::package(
            &worker,
            ("g1", "mission-1"),
            &format!("pkg-{n}"),
            1,
            None,
            (1, to),
            &[artifact],
        );
        let request = || super::context::publish_context(&worker, "g1", &payload);
        let (x, y) = once_through_both(&a, &b, request, n).await;
        assert_eq!(x.json(), y.json(), "{n}: the same answer");
    }
}

/// An Agent's uncited bytes are capped across servers (issue #43 on the cap of issue #10
/// finding 7): the bound a server keeps from its last exact sum grows with what the Agent
/// uploaded through any server (`rows/agent_upload_totals.rs`). It grew only with the
/// server's own uploads, so each of N servers let the Agent hold one more cap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bytes_uploaded_through_another_server_count_against_the_uncited_cap() {
    if !postgres_available() {
        return;
    }
    const MIB: usize = 1024 * 1024;
    // Far enough above the largest upload that a bound stands in for the exact sum.
    let cap = |config: &mut Config| config.max_unpublished_bytes = 10 * MIB as u64;
    let a = harness_with(Kind::Postgres, cap).await;
    let b = a.peer(cap).await;
    let worker = a.agent("w1", "g1", &["worker"]).await;
    let blob = |n: u8, size: usize| vec![n; size];
    // `a` sums the Agent's uncited bytes once (none) and keeps the bound.
    a.upload(&worker, &blob(1, 1024)).await;
    for n in 2..6 {
        b.upload(&worker, &blob(n, 2 * MIB)).await;
    }
    // 8 MiB and 1 KiB held: 3 MiB more would pass the cap, through either server.
    let over = blob(9, 3 * MIB);
    let put = || {
        let uri = format!("/v1/blobs/{}", digest_of(&over).blake3);
        request(Method::PUT, &uri, Some(&worker.token), over.clone())
    };
    let before = a.fingerprint().await;
    refused(&a, put(), "upload_quota_exceeded").await;
    refused(&b, put(), "upload_quota_exceeded").await;
    assert_unchanged(&before, &a.fingerprint().await, "refused past the cap");
    // What still fits is taken, through the server that kept the bound.
    a.upload(&worker, &blob(10, MIB)).await;
}

/// Two ACKs of one cursor through two servers at once: the cursor ends at the higher, never
/// back at the lower (DLV-6). The ACK read the cursor, then wrote its own sequence over
/// whatever the other server had written meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_acks_through_two_servers_at_once_leave_the_cursor_at_the_higher() {
    if !postgres_available() {
        return;
    }
    let a = harness(Kind::Postgres).await;
    let b = a.peer(|_| {}).await;
    let reader = a.agent("c1", "g1", &["coordinator"]).await;
    for n in 0..26 {
        a.agent(&format!("w{n}"), "g1", &["worker"]).await;
    }
    let body =
        |sequence: u64| serde_json::json!({"cursors": [{"groupId": "g1", "sequence": sequence}]});
    let path = "/v1/groups/g1/cursors";
    for n in 0..24u64 {
        let (higher, lower) = (2 * n + 2, 2 * n + 1);
        let (first, second) = tokio::join!(
            a.json_as(Method::POST, path, &reader.token, body(higher), &[]),
            b.json_as(Method::POST, path, &reader.token, body(lower), &[])
        );
        assert_eq!(first.status, StatusCode::OK, "{first:?}");
        assert_eq!(second.status, StatusCode::OK, "{second:?}");
        let mine = a.get_json(&reader, "/v1/groups/g1/cursors").await;
        assert_eq!(mine["cursors"][0]["sequence"], higher, "{mine}");
    }
}

/// A Context Package's version forwarded into a Group through one server while a member of
/// that Group publishes a package of the same id there through another: one of the two is
/// refused, never a forwarded copy beside a chain published in the target (whose readers may
/// be scoped to a Mission the copy is not of, CTX-7). The forward read what the target held
/// of the package before it took the target's lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forward_and_a_publication_of_one_package_id_in_the_target_do_not_both_land() {
    use super::context::{head, package, publish_context, published, setting};

    if !postgres_available() {
        return;
    }
    let a = harness(Kind::Postgres).await;
    let b = a.peer(|_| {}).await;
    let (worker, artifact) = setting(&a).await;
    let coordinator = a.agent("ctx-coord", "g1", &["coordinator"]).await;
    a.join(&coordinator, "g2", &["coordinator"]).await;
    let there = a.agent("ctx-there", "g2", &["worker"]).await;
    a.ensure_work_item("g2", "mission-g2", "work-g2").await;
    let mut landed = (0, 0);
    for n in 0..12 {
        let id = format!("pkg-{n}");
        let to = head(&a, "g1").await;
        let v1 = package(
            &worker,
            ("g1", "mission-1"),
            &id,
            1,
            None,
            (1, to),
            &[artifact],
        );
        let v1 = published(&a, &worker, "g1", &v1).await;
        let v2 = package(
            &worker,
            ("g1", "mission-1"),
            &id,
            2,
            Some(&v1),
            (1, to),
            &[artifact],
        );
        published(&a, &worker, "g1", &v2).await;
        let to = head(&a, "g2").await;
        let native = package(&there, ("g2", "mission-g2"), &id, 1, None, (1, to), &[]);
        let forward = serde_json::json!({"toGroupId": "g2", "version": 2});
        let path = format!("/v1/context/{id}/forward");
        let (forwarded, publication) = tokio::join!(
            a.json_as(Method::POST, &path, &coordinator.token, forward, &[]),
            b.send(publish_context(&there, "g2", &native))
        );
        let (published_there, forwarded_there) = (
            publication.status == StatusCode::CREATED,
            forwarded.status == StatusCode::CREATED,
        );
        assert!(
            !(published_there && forwarded_there),
            "{id}: a forwarded copy landed in g2 beside a package published there"
        );
        landed.0 += u32::from(published_there);
        landed.1 += u32::from(forwarded_there);
    }
    assert!(landed.0 + landed.1 > 0, "{landed:?}");
}

/// A read through one server that found a blob's bytes bad, and a repair of that blob through
/// another server before the read's quarantine commits (held there by
/// `Faults::quarantines`): the stale read fails its own answer, but the repaired blob
/// stays repaired, and the log has one failure and one repair. A repair was remembered only
/// by the process that made it, so the stale read quarantined the repaired blob and appended
/// a second, false, `artifact.integrity_failure`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_read_through_one_server_cannot_quarantine_a_blob_repaired_through_another() {
    if !postgres_available() {
        return;
    }
    let a = harness(Kind::Postgres).await;
    let b = a.peer(|_| {}).await;
    let worker = a.agent("w1", "g1", &["worker"]).await;
    let good = bytes();
    let id = a.put(&worker, "g1", &good, &[]).await;
    a.overwrite_blob(&id, &good[..1_000]).await;
    let uri = format!("/v1/artifacts/{id}/content");
    async fn get(h: &Harness, uri: &str, token: &str) -> Answer {
        h.call(Method::GET, uri, Some(token), axum::body::Body::empty())
            .await
    }
    a.faults.quarantines().set(true);
    let meanwhile = async {
        a.faults.quarantines().waiting(1).await;
        // Another read finds the bad bytes and quarantines the blob; an upload repairs it.
        let answer = get(&b, &uri, &worker.token).await;
        assert_eq!(answer.code().as_str(), "integrity_failure");
        let put = format!("/v1/blobs/{id}");
        let answer = b
            .call(Method::PUT, &put, Some(&worker.token), good.clone())
            .await;
        assert!(answer.status.is_success(), "{}", answer.status);
        assert_eq!(b.stats().await.quarantined, 0, "repaired");
        a.faults.quarantines().set(false);
    };
    let (stale, ()) = tokio::join!(get(&a, &uri, &worker.token), meanwhile);
    assert_eq!(
        (stale.status, stale.code().as_str()),
        (StatusCode::INTERNAL_SERVER_ERROR, "integrity_failure"),
        "the stale read fails its own answer"
    );
    assert_eq!(
        a.stats().await.quarantined,
        0,
        "the stale read quarantined the repaired blob"
    );
    let answer = get(&a, &uri, &worker.token).await;
    assert_eq!(answer.status, StatusCode::OK, "the repaired blob reads");
    assert_eq!(
        (
            a.events_of(&worker, "artifact.integrity_failure")
                .await
                .len(),
            a.events_of(&worker, "artifact.repaired").await.len()
        ),
        (1, 1)
    );
    // Damaged again: a read that begins within the clock skew after the repair fails but
    // leaves the mark to the next; one that begins past it quarantines the blob.
    a.overwrite_blob(&id, &good[..1_000]).await;
    assert_eq!(
        get(&a, &uri, &worker.token).await.code().as_str(),
        "integrity_failure"
    );
    assert_eq!(
        a.stats().await.quarantined,
        0,
        "within the skew of the repair"
    );
    let skew = weft_api::session::MAX_CLOCK_SKEW_SECONDS;
    a.clock.advance(chrono::Duration::seconds(skew + 1));
    assert_eq!(
        get(&b, &uri, &worker.token).await.code().as_str(),
        "integrity_failure"
    );
    assert_eq!(a.stats().await.quarantined, 1, "past the skew");
    assert_eq!(
        a.events_of(&worker, "artifact.integrity_failure")
            .await
            .len(),
        2
    );
}
