//! Issue #43: blob objects no row names (a crash between a promotion and its row, a compaction
//! another server won) are removed by the sweep once an hour old, on every backend, a shared
//! bucket too; an upload of the same bytes between its promotion and its row keeps them (one
//! process: the sweep lock; several servers: the disposal batch refuses the upload's row).
//! A resumable upload's objects whose session row is gone go the same way.

use axum::http::{Method, StatusCode};

use super::harness::*;

/// A large blob (it has an outboard), which `harness_files` stores as a file.
fn large() -> Vec<u8> {
    (0..1_100_000u32).map(|i| (i % 241) as u8).collect()
}

/// An upload held after its bytes are placed and before its row (`Faults::promoted`).
type Held = tokio::task::JoinHandle<Result<axum::response::Response, std::convert::Infallible>>;

impl Harness {
    /// Uploads `bytes` as `worker` and holds the upload once its bytes are placed (or found
    /// present), before its row; `promoted().set(false)` lets it go on.
    async fn held_upload(&self, worker: &Agent, bytes: &[u8]) -> Held {
        self.faults.promoted().set(true);
        let request = request(
            Method::PUT,
            &format!("/v1/blobs/{}", digest_of(bytes).blake3),
            Some(&worker.token),
            bytes.to_vec(),
        );
        let app = self.app.clone();
        let upload = tokio::spawn(async move { tower::ServiceExt::oneshot(app, request).await });
        self.faults.promoted().waiting(1).await;
        upload
    }

    /// Uploads `bytes` as `worker` and drops the upload after its bytes are placed and before
    /// its row, as a crash there would: an object no row names is left.
    async fn stray(&self, worker: &Agent, bytes: &[u8]) {
        let upload = self.held_upload(worker, bytes).await;
        upload.abort();
        assert!(upload.await.expect_err("dropped").is_cancelled());
        self.faults.promoted().waiting(0).await;
        self.faults.promoted().set(false);
    }

    /// How many of fsck's leftovers name `id`, and how many objects it counts in flight.
    async fn fsck_names(&self, id: &str) -> (usize, u64) {
        let report = self.store.fsck().await.expect("fsck");
        assert!(report.problems.is_empty(), "{:?}: {report:?}", self.kind);
        let named = report.leftovers.iter().filter(|l| l.contains(id)).count();
        (named, report.in_flight)
    }

    /// fsck finds nothing: no problem, no leftover, nothing in flight.
    async fn fsck_clean(&self) {
        let report = self.store.fsck().await.expect("fsck");
        assert!(
            report.leftovers.is_empty() && report.in_flight == 0 && report.problems.is_empty(),
            "{:?}: {report:?}",
            self.kind
        );
    }
}

backends!(
    async fn the_sweep_removes_an_object_no_row_names_once_an_hour_old(kind: Kind) {
        let h = harness_files(kind).await;
        let mut worker = h.agent("w1", "g1", &["worker"]).await;
        let kept = h.put(&worker, "g1", &[7u8; 80_000], &[]).await;
        let bytes = large();
        let id = digest_of(&bytes).blake3.to_string();
        h.stray(&worker, &bytes).await;
        let (named, in_flight) = h.fsck_names(&id).await;
        // On a shared index a young object without a row is another server's upload in flight.
        let found = if kind == Kind::Postgres {
            in_flight
        } else {
            named as u64
        };
        assert!(
            found >= 1,
            "{kind:?}: fsck sees the stray ({named}, {in_flight})"
        );

        // Younger than an hour: kept.
        h.clock.advance(chrono::Duration::minutes(50));
        let report = h.store.artifacts().sweep().await.expect("sweep");
        assert_eq!(report.strays_removed, 0, "{kind:?}: {report:?}");
        // An hour old: removed, with its outboard; the stored blob stays.
        h.clock.advance(chrono::Duration::minutes(20));
        let report = h.store.artifacts().sweep().await.expect("sweep");
        assert_eq!(report.strays_removed, 1, "{kind:?}: {report:?}");
        h.fsck_clean().await;
        let read = h
            .call(
                Method::GET,
                &format!("/v1/artifacts/{kept}/content"),
                Some(&worker.token),
                Vec::new(),
            )
            .await;
        assert_eq!(read.status, StatusCode::OK, "{kind:?}: {read:?}");

        // Sent again, the bytes are stored and read back.
        worker.token = h.session(&worker.key, "w1", "g1").await;
        let id = h.put(&worker, "g1", &bytes, &[]).await;
        let read = h
            .call(
                Method::GET,
                &format!("/v1/artifacts/{id}/content"),
                Some(&worker.token),
                Vec::new(),
            )
            .await;
        assert_eq!(read.status, StatusCode::OK, "{kind:?}");
        assert_eq!(read.body.len(), bytes.len(), "{kind:?}");
    }
);

backends!(
    async fn an_upload_before_its_row_keeps_its_bytes_from_the_sweep(kind: Kind) {
        let h = harness_files(kind).await;
        let mut worker = h.agent("w1", "g1", &["worker"]).await;
        let bytes = large();
        h.stray(&worker, &bytes).await;
        h.clock.advance(chrono::Duration::hours(2));
        worker.token = h.session(&worker.key, "w1", "g1").await;
        // The upload finds the old object present and waits before its row; the sweep waits
        // for it (the sweep lock), then finds its row.
        let upload = h.held_upload(&worker, &bytes).await;
        let sweep = {
            let store = h.store.clone();
            tokio::spawn(async move { store.artifacts().sweep().await })
        };
        tokio::task::yield_now().await;
        h.faults.promoted().set(false);
        let answer = upload.await.expect("task").expect("answer");
        assert_eq!(answer.status(), StatusCode::CREATED, "{kind:?}");
        let report = sweep.await.expect("task").expect("sweep");
        assert_eq!(report.strays_removed, 0, "{kind:?}: {report:?}");
        let id = h.put(&worker, "g1", &bytes, &[]).await;
        let read = h
            .call(
                Method::GET,
                &format!("/v1/artifacts/{id}/content"),
                Some(&worker.token),
                Vec::new(),
            )
            .await;
        assert_eq!(read.status, StatusCode::OK, "{kind:?}");
        assert_eq!(read.body.len(), bytes.len(), "{kind:?}");
        h.fsck_clean().await;
    }
);

/// Two servers: a stray found present by an upload on B, disposed of by A's sweep before B's
/// row, refuses B's row as retryable (503 `storage_unavailable`, nothing recorded); sent
/// again, the bytes are stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stray_another_server_disposes_of_under_an_upload_records_nothing() {
    if !postgres_available() {
        return;
    }
    let a = harness_files(Kind::Postgres).await;
    let b = a.peer(|config| config.inline_blob_bytes = 0).await;
    let mut worker = a.agent("w1", "g1", &["worker"]).await;
    let bytes = large();
    let uri = format!("/v1/blobs/{}", digest_of(&bytes).blake3);
    a.stray(&worker, &bytes).await;
    a.clock.advance(chrono::Duration::hours(2));
    worker.token = a.session(&worker.key, "w1", "g1").await;
    let upload = b.held_upload(&worker, &bytes).await;
    let report = a.store.artifacts().sweep().await.expect("sweep");
    assert_eq!(report.strays_removed, 1, "{report:?}");
    b.faults.promoted().set(false);
    let answer = upload.await.expect("task").expect("answer");
    assert_eq!(answer.status(), StatusCode::SERVICE_UNAVAILABLE);
    let head = b
        .call(Method::HEAD, &uri, Some(&worker.token), Vec::new())
        .await;
    assert_eq!(head.status, StatusCode::NOT_FOUND, "a row was recorded");
    let again = b
        .call(Method::PUT, &uri, Some(&worker.token), bytes.clone())
        .await;
    assert_eq!(again.status, StatusCode::CREATED, "{again:?}");
    let id = a.put(&worker, "g1", &bytes, &[]).await;
    let read = a
        .call(
            Method::GET,
            &format!("/v1/artifacts/{id}/content"),
            Some(&worker.token),
            Vec::new(),
        )
        .await;
    assert_eq!(read.status, StatusCode::OK);
    assert_eq!(read.body.len(), bytes.len());
    a.fsck_clean().await;
}

/// Two servers compacting one Group from one snapshot through different points: the one
/// whose transaction comes second writes nothing, and its archive and state objects, placed
/// before, are strays the sweep removes an hour later; the winner's snapshot stays readable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_compactions_objects_are_removed_by_the_sweep() {
    if !postgres_available() {
        return;
    }
    let a = harness(Kind::Postgres).await;
    let b = a.peer(|_| {}).await;
    let worker = a.agent("w1", "g1", &["worker"]).await;
    for n in 0..6 {
        a.put(&worker, "g1", format!("artifact {n}").as_bytes(), &[])
            .await;
    }
    b.faults.promoted().set(true);
    let losing = {
        let compaction = b.store.clone();
        tokio::spawn(async move {
            compaction
                .compaction()
                .compact(weft_storage::Retention::events(3))
                .await
        })
    };
    b.faults.promoted().waiting(1).await;
    let won = a
        .store
        .compaction()
        .compact(weft_storage::Retention::events(1))
        .await
        .expect("a compacts");
    assert_eq!(won.len(), 1, "{won:?}");
    b.faults.promoted().set(false);
    let lost = losing.await.expect("task").expect("b answers");
    assert!(lost.is_empty(), "b compacted nothing: {lost:?}");
    let (_, in_flight) = a.fsck_names("blake3:").await;
    assert_eq!(in_flight, 2, "b's archive and state document");

    a.clock.advance(chrono::Duration::hours(2));
    let report = a.store.artifacts().sweep().await.expect("sweep");
    assert_eq!(report.strays_removed, 2, "{report:?}");
    a.fsck_clean().await;
    assert_eq!(
        a.fingerprint().await.tables["snapshots"].0,
        1,
        "one snapshot"
    );
}

/// A staged upload a crash left is removed by the sweep a day later, on a store servers share
/// too (no start removes it there); a younger one may be an upload in flight and stays.
#[tokio::test]
async fn the_sweep_removes_a_staged_upload_a_day_old() {
    let h = harness_files(Kind::Disk).await;
    let staged = h.dir.path().join("staging").join("left-by-a-crash");
    std::fs::write(&staged, b"half a body").expect("a staged leftover");
    let report = h.store.artifacts().sweep().await.expect("sweep");
    assert_eq!(report.staging_removed, 0, "{report:?}");
    assert!(staged.exists());
    h.clock.advance(chrono::Duration::hours(25));
    let report = h.store.artifacts().sweep().await.expect("sweep");
    assert_eq!(report.staging_removed, 1, "{report:?}");
    assert!(!staged.exists());
}

backends!(
    /// A resumable upload's objects whose session row is gone (here a cancel whose object
    /// deletion failed, as a crash between the two leaves them) are removed by the sweep once
    /// an hour old, on every backend, a shared bucket too (start-up only lists a local
    /// directory); a live session's objects stay, however old.
    async fn the_sweep_removes_upload_objects_no_session_row_names(kind: Kind) {
        use crate::http::tests::uploads::{on_upload, send_chunks, start_as};
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let before = h.fingerprint().await;
        let live = start_as(&h, &worker.token).await;
        send_chunks(&h, &live, &worker.token, &[5u8; 3000], 0, 1000).await;
        let with_live = h.fingerprint().await;
        let cancelled = start_as(&h, &worker.token).await;
        send_chunks(&h, &cancelled, &worker.token, &[6u8; 3000], 0, 1000).await;
        h.faults.fail_writes(
            weft_storage::FaultSite::UploadChunk,
            weft_storage::FaultKind::Io,
        );
        let cancel = h
            .send(on_upload(
                Method::DELETE,
                &cancelled,
                &worker.token,
                &[],
                axum::body::Body::empty(),
            ))
            .await;
        h.faults.clear();
        assert_eq!(
            cancel.status,
            StatusCode::NO_CONTENT,
            "{kind:?}: {cancel:?}"
        );
        let report = h.store.fsck().await.expect("fsck");
        let named = report
            .leftovers
            .iter()
            .filter(|l| l.contains("uploads/up-"))
            .count();
        assert!(named >= 1, "{kind:?}: fsck names them: {report:?}");
        let left = h.fingerprint().await;
        assert_eq!(
            left.tables["upload_sessions"],
            with_live.tables["upload_sessions"]
        );
        assert_ne!(
            left.blob_listing, with_live.blob_listing,
            "{kind:?}: objects left"
        );

        // Younger than an hour: kept.
        h.clock.advance(chrono::Duration::minutes(50));
        let report = h.store.artifacts().sweep().await.expect("sweep");
        assert_eq!(report.upload_strays_removed, 0, "{kind:?}: {report:?}");
        // An hour old: the cancelled session's objects go; the live one's stay.
        h.clock.advance(chrono::Duration::minutes(20));
        let report = h.store.artifacts().sweep().await.expect("sweep");
        assert!(report.upload_strays_removed >= 1, "{kind:?}: {report:?}");
        let after = h.fingerprint().await;
        assert_eq!(after.blob_listing, with_live.blob_listing, "{kind:?}");
        assert_ne!(
            after.blob_listing, before.blob_listing,
            "{kind:?}: the live one's"
        );
        let report = h.store.fsck().await.expect("fsck");
        assert!(
            report.problems.is_empty() && report.leftovers.is_empty(),
            "{kind:?}: {report:?}"
        );
    }
);
