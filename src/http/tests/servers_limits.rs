//! Per-Agent limits and resumable uploads through several servers over one PostgreSQL index
//! and one Garage bucket (issue #43): what one server's process-local claim or count used to
//! decide (a chunk at one offset, the last upload session under the cap, an idle session's
//! sweep, one Presence report per interval) is decided by the database's rows, so two
//! servers at once take it once.
//! Two `Store`s in one test process, as in `servers.rs`; on the other backends these tests
//! say they skipped.

use axum::http::{Method, StatusCode};

use super::harness::*;

/// One chunk of a resumable upload sent through two servers at once (a client retrying on
/// another server while the first still streams), each with other bytes: one is committed,
/// the other is refused `upload_offset_mismatch`, and the finish stores exactly the
/// committed chunk's bytes. Both wrote the one object `uploads/<id>/<offset>`, and the loser,
/// its commit refused, removed every chunk at that offset: the winner's acknowledged chunk
/// was gone (or held the loser's bytes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chunk_sent_through_two_servers_at_once_keeps_the_committed_one() {
    use futures::stream;
    use weft_storage::Uploader;

    if !postgres_available() {
        return;
    }
    let a = harness(Kind::Postgres).await;
    let b = a.peer(|_| {}).await;
    let worker = a.agent("w1", "g1", &["worker"]).await;
    let session = a
        .store
        .sessions()
        .authenticate(&worker.token)
        .await
        .expect("live");
    let as_worker = || Uploader::Agent(&session);
    for n in 0..8u8 {
        let started = a.store.artifacts().start_upload(as_worker()).await;
        let id = started.expect("starts").upload_id;
        let mine = |fill: u8| stream::iter([Ok(bytes::Bytes::from(vec![fill; 300_000]))]);
        let (artifacts_a, artifacts_b) = (a.store.artifacts(), b.store.artifacts());
        let (through_a, through_b) = tokio::join!(
            artifacts_a.append_upload(&id, 0, mine(2 * n), as_worker()),
            artifacts_b.append_upload(&id, 0, mine(2 * n + 1), as_worker())
        );
        let kept = match (through_a, through_b) {
            (Ok(_), Err(error)) => {
                assert_eq!(error.code(), weft_api::ErrorCode::UploadOffsetMismatch);
                2 * n
            }
            (Err(error), Ok(_)) => {
                assert_eq!(error.code(), weft_api::ErrorCode::UploadOffsetMismatch);
                2 * n + 1
            }
            other => panic!("one chunk is committed, the other refused: {other:?}"),
        };
        let expected = digest_of(&vec![kept; 300_000]);
        let none = None::<(u64, stream::Empty<Result<bytes::Bytes, std::io::Error>>)>;
        let finished = b
            .store
            .artifacts()
            .finish_upload(
                &id,
                weft_api::Digest::Blake3(expected.blake3),
                none,
                as_worker(),
            )
            .await;
        assert!(finished.is_ok(), "round {n}: {:?}", finished.err());
    }
}

/// The last resumable upload session an Agent may open (its 64th, `MAX_SESSIONS_PER_AGENT`),
/// asked for through two servers at once: one opens it, the other is refused. Each counted
/// the Agent's sessions before either had inserted its own, and both opened one past the cap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_upload_session_asked_through_two_servers_at_once_opens_once() {
    use weft_storage::Uploader;

    if !postgres_available() {
        return;
    }
    let a = harness(Kind::Postgres).await;
    let b = a.peer(|_| {}).await;
    for n in 0..6 {
        let worker = a.agent(&format!("w{n}"), "g1", &["worker"]).await;
        let session = a
            .store
            .sessions()
            .authenticate(&worker.token)
            .await
            .expect("live");
        let as_worker = || Uploader::Agent(&session);
        for _ in 0..63 {
            let started = a.store.artifacts().start_upload(as_worker()).await;
            started.expect("below the cap");
        }
        let (artifacts_a, artifacts_b) = (a.store.artifacts(), b.store.artifacts());
        let (x, y) = tokio::join!(
            artifacts_a.start_upload(as_worker()),
            artifacts_b.start_upload(as_worker())
        );
        assert!(
            x.is_ok() != y.is_ok(),
            "w{n}: one opens the 64th, the other is refused: {x:?} {y:?}"
        );
    }
}

/// Two Presence reports of one Agent through two servers at once: one is taken, the other
/// refused `rate_limited` (one report per interval). Each read the last report before either
/// wrote its own, and both were stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_presence_reports_through_two_servers_at_once_are_taken_once() {
    if !postgres_available() {
        return;
    }
    let a = harness(Kind::Postgres).await;
    let b = a.peer(|_| {}).await;
    let path = "/v1/groups/g1/presence";
    for n in 0..12 {
        let worker = a.agent(&format!("w{n}"), "g1", &["worker"]).await;
        let report = || serde_json::json!({"freeSlots": 1, "capacityState": "available"});
        let (x, y) = tokio::join!(
            a.json_as(Method::PUT, path, &worker.token, report(), &[]),
            b.json_as(Method::PUT, path, &worker.token, report(), &[])
        );
        let taken = [&x, &y]
            .iter()
            .filter(|answer| answer.status == StatusCode::NO_CONTENT)
            .count();
        assert_eq!(taken, 1, "w{n}: {x:?} {y:?}");
        let refused = if x.status == StatusCode::NO_CONTENT {
            &y
        } else {
            &x
        };
        assert_eq!(refused.json()["code"], "rate_limited", "w{n}: {refused:?}");
    }
}

/// Two servers over one index whose sweep takes uploads idle for 600 s, and an upload session
/// of `w1` (its Agent session here) started through the first and idle past that (the clock
/// moved 601 s). `None` when PostgreSQL is not installed.
struct IdleSession {
    a: Harness,
    b: Harness,
    session: weft_storage::Session,
    id: String,
}

async fn idle_session() -> Option<IdleSession> {
    if !postgres_available() {
        return None;
    }
    let ttl = |config: &mut crate::config::Config| config.unpublished_blob_ttl_secs = 600;
    let a = harness_with(Kind::Postgres, ttl).await;
    let b = a.peer(ttl).await;
    let worker = a.agent("w1", "g1", &["worker"]).await;
    let session = a
        .store
        .sessions()
        .authenticate(&worker.token)
        .await
        .expect("live");
    let started = a
        .store
        .artifacts()
        .start_upload(weft_storage::Uploader::Agent(&session))
        .await;
    let id = started.expect("starts").upload_id;
    a.clock.advance(chrono::Duration::seconds(601));
    Some(IdleSession { a, b, session, id })
}

/// Finishes upload `id` through `h` as `session`, whose bytes must be `whole`.
async fn finish(h: &Harness, session: &weft_storage::Session, id: &str, whole: &[u8]) {
    let none = None::<(
        u64,
        futures::stream::Empty<Result<bytes::Bytes, std::io::Error>>,
    )>;
    let finished = h
        .store
        .artifacts()
        .finish_upload(
            id,
            weft_api::Digest::Blake3(digest_of(whole).blake3),
            none,
            weft_storage::Uploader::Agent(session),
        )
        .await;
    assert!(finished.is_ok(), "{:?}", finished.err());
}

/// A chunk streaming through one server into an upload session idle long enough to be swept,
/// while another server sweeps: the session stays and the chunk commits. Each server's claim
/// on a session is its own, so the sweep removed the session under the chunk, which then
/// answered `not_found`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_upload_session_a_chunk_streams_into_through_one_server_is_not_swept_by_another() {
    use futures::{SinkExt as _, StreamExt as _};
    use weft_storage::Uploader;

    let Some(IdleSession { a, b, session, id }) = idle_session().await else {
        return;
    };
    let as_worker = || Uploader::Agent(&session);
    // The chunk's body: its first part is taken, then it waits for the rest.
    let (mut send, parts) =
        futures::channel::mpsc::channel::<Result<bytes::Bytes, std::io::Error>>(0);
    let (taken, streaming) = tokio::sync::oneshot::channel::<()>();
    let mut taken = Some(taken);
    let body = parts.inspect(move |_| {
        if let Some(taken) = taken.take() {
            let _ = taken.send(());
        }
    });
    let artifacts_b = b.store.artifacts();
    let append = artifacts_b.append_upload(&id, 0, body, as_worker());
    let meanwhile = async {
        send.send(Ok(bytes::Bytes::from(vec![1u8; 100_000])))
            .await
            .expect("taken");
        streaming.await.expect("streaming");
        let report = a.store.artifacts().sweep().await.expect("sweep");
        assert_eq!(report.upload_sessions_removed, 0, "{report:?}");
        send.send(Ok(bytes::Bytes::from(vec![2u8; 100_000])))
            .await
            .expect("taken");
        drop(send);
    };
    let (appended, ()) = tokio::join!(append, meanwhile);
    assert_eq!(appended.expect("the chunk commits").offset, 200_000);
    let mut whole = vec![1u8; 100_000];
    whole.extend(vec![2u8; 100_000]);
    finish(&a, &session, &id, &whole).await;
}

/// The idle-upload sweep through one server lists a session as idle (held there by
/// `Faults::upload_sweeps`), then a chunk through another server marks the session live
/// and commits, then the sweep goes on: the session stays, with its chunk. The sweep's
/// removal did not ask whether the row was still idle, so it removed a session a chunk had
/// just been acknowledged into.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_one_servers_sweep_listed_as_idle_and_another_appended_to_stays() {
    use futures::stream;
    use weft_storage::Uploader;

    let Some(IdleSession { a, b, session, id }) = idle_session().await else {
        return;
    };
    let as_worker = || Uploader::Agent(&session);
    a.faults.upload_sweeps().set(true);
    let artifacts_a = a.store.artifacts();
    let meanwhile = async {
        a.faults.upload_sweeps().waiting(1).await;
        let chunk = stream::iter([Ok(bytes::Bytes::from(vec![3u8; 1000]))]);
        let appended = b
            .store
            .artifacts()
            .append_upload(&id, 0, chunk, as_worker())
            .await;
        assert_eq!(appended.expect("the chunk commits").offset, 1000);
        a.faults.upload_sweeps().set(false);
    };
    let (report, ()) = tokio::join!(artifacts_a.sweep(), meanwhile);
    let report = report.expect("sweep");
    assert_eq!(report.upload_sessions_removed, 0, "{report:?}");
    finish(&a, &session, &id, &[3u8; 1000]).await;
}
