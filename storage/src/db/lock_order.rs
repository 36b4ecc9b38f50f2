//! The order of Group locks on PostgreSQL (issue #43): two servers' writers, or two lanes of
//! one, never wait on each other's locks in a circle, and a job that lost such a race anyway
//! runs again.

use super::*;
use crate::rows::groups;

/// Two servers' writers (two `Db`s over one PostgreSQL database) whose jobs take two Groups'
/// locks in opposite orders deadlock; PostgreSQL rolls one job back, and a job sent with
/// `write_again_if_raced` runs again and succeeds: neither caller hears 503 (issue #43).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_lost_a_deadlock_runs_again() {
    let Some(url) = weft_testkit::postgres_database_or_skip() else {
        return;
    };
    let a = Db::open(&Location::Postgres(url.clone())).expect("a opens");
    let b = Db::open(&Location::Postgres(url)).expect("b opens");
    a.write(|tx| {
        let now = chrono::Utc::now();
        groups::insert(tx, "g1", now)?;
        groups::insert(tx, "g2", now)
    })
    .await
    .expect("groups");
    let meet = Arc::new(std::sync::Barrier::new(2));
    let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let job = |first: &'static str, then: &'static str| {
        let (meet, runs) = (Arc::clone(&meet), Arc::clone(&runs));
        let once = std::sync::atomic::AtomicBool::new(true);
        move |tx: &Tx<'_>| {
            runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            groups::lock(tx, first)?;
            // Only the first runs meet: each holds one lock and asks for the other's.
            if once.swap(false, std::sync::atomic::Ordering::SeqCst) {
                meet.wait();
            }
            groups::lock(tx, then)
        }
    };
    let (on_a, on_b) = tokio::join!(
        write_again_if_raced(&a, "g1", job("g1", "g2")),
        write_again_if_raced(&b, "g2", job("g2", "g1"))
    );
    on_a.expect("a's job");
    on_b.expect("b's job");
    // One ran again; on a loaded machine both may have been rolled back once (a CI run saw
    // four runs): what is promised is that neither caller hears 503.
    let runs = runs.load(std::sync::atomic::Ordering::SeqCst);
    assert!((3..=4).contains(&runs), "ran again: {runs} runs");
}

/// A job that locked a Group it did not name ends its transaction on PostgreSQL (`db/writer.rs`,
/// issue #43): its Group lock is gone before the Group jobs batched behind it take theirs.
/// Here server A's first lane holds an unrouted job that locks Group `high` and a job routed
/// to Group `low` (same lane); server B's job locks `low`, then `high`, in the one order every
/// batch uses. Were A's two jobs one transaction (`high` then `low`), the three would wait on
/// each other in a circle and PostgreSQL would roll one back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unrouted_job_never_holds_its_lock_under_a_groups_batch() {
    use std::sync::mpsc::channel;
    let Some(url) = weft_testkit::postgres_database_or_skip() else {
        return;
    };
    let a = Db::open(&Location::Postgres(url.clone())).expect("a opens");
    let b = Db::open(&Location::Postgres(url)).expect("b opens");
    // Two Groups of the first lane, where unrouted jobs go.
    let mut first_lane = (0..)
        .map(|n| format!("g{n}"))
        .filter(|g| lane_of(g, a.lanes.len()) == 0);
    let (low, high) = (
        first_lane.next().expect("a group"),
        first_lane.next().expect("another"),
    );
    let (low, high) = (low.clone().min(high.clone()), low.max(high));
    let (l, h) = (low.clone(), high.clone());
    a.write(move |tx| {
        let now = chrono::Utc::now();
        groups::insert(tx, &l, now)?;
        groups::insert(tx, &h, now)
    })
    .await
    .expect("groups");

    // B locks `low` and waits until A's unrouted job holds `high`.
    let (b_locked, b_has_low) = tokio::sync::oneshot::channel::<()>();
    let (a_locked, a_has_high) = channel::<()>();
    let (l, h) = (low.clone(), high.clone());
    let on_b = tokio::spawn(async move {
        b.write_in(&l.clone(), move |tx| {
            groups::lock(tx, &l)?;
            b_locked.send(()).expect("told");
            a_has_high.recv().expect("heard");
            groups::lock(tx, &h)
        })
        .await
    });
    b_has_low.await.expect("B holds low");
    let (unrouted, routed) = batched_behind_busy(
        &a,
        move |tx| {
            groups::lock(tx, &high)?;
            a_locked.send(()).expect("told");
            Ok(())
        },
        &low,
    )
    .await;
    unrouted.expect("A's unrouted job");
    on_b.await.expect("task").expect("B's job");
    routed.expect("A's routed job");
}

/// A Group's lock is taken once per writer transaction, not once per job (PostgreSQL): a
/// later job of the batch finds it held by the transaction (an earlier job's released
/// savepoint) and sends no statement for it; a job whose own savepoint was rolled back let
/// its lock go, and the next job takes it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_takes_a_groups_lock_once() {
    let Some(url) = weft_testkit::postgres_database_or_skip() else {
        return;
    };
    let db = Db::open(&Location::Postgres(url)).expect("opens");
    db.write(|tx| groups::insert(tx, "g1", chrono::Utc::now()))
        .await
        .expect("group");
    let lane = lane_of("g1", db.lanes.len());
    // The lane is kept busy while the next jobs queue up behind, as one batch.
    let (release, held) = std::sync::mpsc::channel::<()>();
    let (started, busy_started) = tokio::sync::oneshot::channel::<()>();
    let busy = tokio::spawn({
        let db = db.clone();
        async move {
            db.write_in("g1", move |_| {
                let _ = started.send(());
                held.recv().map_err(Error::backend)
            })
            .await
        }
    });
    busy_started.await.expect("the lane is busy");
    // Statements each job sent for the Group's lock; the refused job's through `refused_sent`.
    let refused_sent = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let lock = |fail: bool| {
        let (db, refused_sent) = (db.clone(), Arc::clone(&refused_sent));
        async move {
            db.write_in("g1", move |tx| {
                let (taken, work) = crate::sql::metered(|| groups::lock(tx, "g1"));
                taken?;
                if fail {
                    refused_sent.store(work.statements, std::sync::atomic::Ordering::SeqCst);
                    return Err(Error::reject(weft_api::ErrorCode::Conflict, "refused"));
                }
                Ok(work.statements)
            })
            .await
        }
    };
    // One task polls the three in order: each is queued on its first poll, in this order.
    let jobs = tokio::spawn({
        let (refused, first, second) = (lock(true), lock(false), lock(false));
        async move { tokio::join!(refused, first, second) }
    });
    while db.lanes[lane].max_capacity() - db.lanes[lane].capacity() < 3 {
        tokio::task::yield_now().await;
    }
    release.send(()).expect("released");
    busy.await.expect("busy").expect("busy job");
    let (refused, first, second) = jobs.await.expect("task");
    assert!(refused.is_err(), "the refused job");
    assert_eq!(
        refused_sent.load(std::sync::atomic::Ordering::SeqCst),
        1,
        "the refused job took the lock"
    );
    assert_eq!(first.expect("first"), 1, "taken again");
    assert_eq!(second.expect("second"), 0, "held");
}

/// A job that took the exclusive disposal lock (a sweep's, a collection's or a records
/// batch's, `rows/blob_disposals.rs`) ends its transaction on PostgreSQL, as one that took a
/// Group's lock it did not name does: here server A's first lane holds an unrouted job that
/// takes it and a job routed to Group `low`; server B's upload-like job holds `low` and asks
/// for the shared side. Were A's two jobs one transaction, A would wait for `low` under the
/// exclusive lock while B waits for it under `low`, until PostgreSQL rolled one back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_under_the_disposal_lock_never_holds_it_under_a_groups_batch() {
    use std::sync::mpsc::channel;
    let Some(url) = weft_testkit::postgres_database_or_skip() else {
        return;
    };
    let a = Db::open(&Location::Postgres(url.clone())).expect("a opens");
    let b = Db::open(&Location::Postgres(url)).expect("b opens");
    let low = (0..)
        .map(|n| format!("g{n}"))
        .find(|g| lane_of(g, a.lanes.len()) == 0)
        .expect("a group of the first lane");
    let l = low.clone();
    a.write(move |tx| groups::insert(tx, &l, chrono::Utc::now()))
        .await
        .expect("group");

    // B locks `low`, then waits until A's unrouted job holds the exclusive lock.
    let (b_locked, b_has_low) = tokio::sync::oneshot::channel::<()>();
    let (a_locked, a_excludes) = channel::<()>();
    let l = low.clone();
    let on_b = tokio::spawn(async move {
        b.write_in(&l.clone(), move |tx| {
            groups::lock(tx, &l)?;
            b_locked.send(()).expect("told");
            a_excludes.recv().expect("heard");
            crate::rows::blob_disposals::fence(tx)?;
            Ok(tx.settle()?)
        })
        .await
    });
    b_has_low.await.expect("B holds low");
    let (unrouted, routed) = batched_behind_busy(
        &a,
        move |tx| {
            crate::rows::blob_disposals::exclude(tx)?;
            a_locked.send(()).expect("told");
            Ok(())
        },
        &low,
    )
    .await;
    unrouted.expect("A's unrouted job");
    on_b.await.expect("task").expect("B's job");
    routed.expect("A's routed job");
}

/// Keeps `a`'s first lane busy with a job that runs until the answered sender sends (or is
/// dropped), so the jobs queued meanwhile run as one batch; answers the sender and the job.
async fn busy_first_lane(
    a: &Db,
) -> (
    std::sync::mpsc::Sender<()>,
    tokio::task::JoinHandle<Result<(), Error>>,
) {
    let (release, held) = std::sync::mpsc::channel::<()>();
    let (started, busy_started) = tokio::sync::oneshot::channel::<()>();
    let busy = tokio::spawn({
        let a = a.clone();
        async move {
            a.write(move |_| {
                let _ = started.send(());
                held.recv().map_err(Error::backend)
            })
            .await
        }
    });
    busy_started.await.expect("the first lane is busy");
    (release, busy)
}

/// Waits until `n` jobs wait in `a`'s first lane.
async fn queued_in_first_lane(a: &Db, n: usize) {
    while a.lanes[0].max_capacity() - a.lanes[0].capacity() < n {
        tokio::task::yield_now().await;
    }
}

/// Queues `unrouted` (no lane) and then a job routed to Group `low` that locks it behind a
/// job that keeps `a`'s first lane busy, so the two run as one batch (`low` is of the first
/// lane); answers both jobs' outcomes.
async fn batched_behind_busy(
    a: &Db,
    unrouted: impl FnOnce(&Tx<'_>) -> Result<(), Error> + Send + 'static,
    low: &str,
) -> (Result<(), Error>, Result<(), Error>) {
    let (release, busy) = busy_first_lane(a).await;
    let unrouted = tokio::spawn({
        let a = a.clone();
        async move { a.write(unrouted).await }
    });
    let routed = tokio::spawn({
        let (a, l) = (a.clone(), low.to_owned());
        async move { a.write_in(&l.clone(), move |tx| groups::lock(tx, &l)).await }
    });
    queued_in_first_lane(a, 2).await;
    release.send(()).expect("released");
    busy.await.expect("busy").expect("busy job");
    let unrouted = unrouted.await.expect("task");
    (unrouted, routed.await.expect("task"))
}

/// Another server's retry of an `Idempotency-Key` takes the key's lock, then its Group's
/// (`claim.rs`). Here, the job under that key, batched behind a job that took the Group's
/// lock, waited for the key while its transaction held the Group: the two waited on each
/// other in a circle until PostgreSQL rolled one back (a 503 here, or the retry failed).
/// The job under a key now starts a transaction of its own: the first job commits, the
/// retry takes the Group and commits, and the key is then free.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_under_an_idempotency_key_never_waits_for_it_under_a_groups_lock() {
    let Some(url) = weft_testkit::postgres_database_or_skip() else {
        return;
    };
    keyed_behind(&url, None, groups::lock).await;
}

/// The same with two keys: a job under one key (that locks no Group) batched before a job
/// under another, while another server's transaction takes the second key, then the first.
/// The first key's lock lasts to the commit, so the second job now starts a transaction too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_under_an_idempotency_key_never_waits_for_it_under_another_key() {
    let Some(url) = weft_testkit::postgres_database_or_skip() else {
        return;
    };
    keyed_behind(&url, Some("k-0"), |conn, _| {
        crate::rows::idempotency::lookup(conn, "agent:w1", "k-0").map(|_| ())
    })
    .await;
}

/// Another server's transaction takes key `k-1`'s lock, then (once a session waits for a
/// lock) `then`; meanwhile this server's first lane runs, as one batch, a job of a Group
/// that locks it (or, under key `first_key` when given, locks nothing) and a job of that
/// Group under `k-1`.
/// Both servers' jobs must commit.
async fn keyed_behind(
    url: &str,
    first_key: Option<&'static str>,
    then: impl FnOnce(&Connection, &str) -> Result<(), Error> + Send + 'static,
) {
    let a = Db::open(&Location::Postgres(url.to_owned())).expect("a opens");
    let group = (0..)
        .map(|n| format!("g{n}"))
        .find(|g| lane_of(g, a.lanes.len()) == 0)
        .expect("a group of the first lane");
    let g = group.clone();
    a.write(move |tx| groups::insert(tx, &g, chrono::Utc::now()))
        .await
        .expect("group");
    let (b_locked, b_has_key) = tokio::sync::oneshot::channel::<()>();
    let on_b = tokio::task::spawn_blocking({
        let (url, group) = (url.to_owned(), group.clone());
        move || {
            under_key(
                &url,
                ("agent:w1", "k-1"),
                || b_locked.send(()).expect("told"),
                |conn| then(conn, &group),
            )
        }
    });
    b_has_key.await.expect("B holds the key");
    // A's lane kept busy while a job that locks the Group and then one under the key queue.
    let (release, busy) = busy_first_lane(&a).await;
    let keyed = |key: &'static str, locks: bool| {
        let (a, g) = (a.clone(), group.clone());
        let request = crate::claim::IdempotentRequest {
            scope: "agent:w1".to_owned(),
            key: key.to_owned(),
            request_hash: [1; 32],
            received_at: chrono::Utc::now(),
        };
        crate::claim::with_idempotency(request, async move {
            crate::claim::answer_with::<()>(|()| Some((200, b"{}".to_vec())));
            let lane = g.clone();
            let job = move |tx: &Tx<'_>| if locks { groups::lock(tx, &g) } else { Ok(()) };
            a.write_in(&lane, job).await
        })
    };
    let first = match first_key {
        Some(key) => {
            let job = keyed(key, false);
            tokio::spawn(async move { job.await.0 })
        }
        None => tokio::spawn({
            let (a, g) = (a.clone(), group.clone());
            async move { a.write_in(&g.clone(), move |tx| groups::lock(tx, &g)).await }
        }),
    };
    queued_in_first_lane(&a, 1).await;
    let second = tokio::spawn(keyed("k-1", true));
    queued_in_first_lane(&a, 2).await;
    release.send(()).expect("released");
    busy.await.expect("busy").expect("busy job");
    first.await.expect("task").expect("the first job");
    let (second, claimed) = second.await.expect("task");
    second.expect("the job under the key");
    assert!(
        matches!(claimed, Some(crate::claim::Claimed::Stored(_))),
        "{claimed:?}"
    );
    let waited = on_b.await.expect("task").expect("the retry's transaction");
    assert!(waited, "the job under the key waited for it");
}

/// One transaction of its own on the index at `url`, as another server's retry of an
/// `Idempotency-Key` runs: the key's lock (`scope`, `key`), then `locked`, then, once a
/// session waits for a lock, `then`, then the commit. Answers whether one waited.
fn under_key(
    url: &str,
    (scope, key): (&str, &str),
    locked: impl FnOnce() + Send,
    then: impl FnOnce(&Connection) -> Result<(), Error> + Send,
) -> Result<bool, Error> {
    crate::sql::postgres::off_runtime(|| {
        let conn = Connection::Postgres(Box::new(crate::sql::postgres::Pg::connect(url)?));
        conn.begin()?;
        crate::rows::idempotency::lookup(&conn, scope, key)?;
        locked();
        let mut waited = false;
        for _ in 0..2_000 {
            let waiting = crate::sql::Cached::value::<i64, _>(
                &conn,
                "SELECT count(*) FROM pg_stat_activity
                 WHERE datname = current_database() AND wait_event_type = 'Lock'",
                [],
            )?;
            if waiting.unwrap_or(0) >= 1 {
                waited = true;
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        then(&conn)?;
        conn.control("COMMIT")?;
        Ok(waited)
    })
}
