//! The writer's group commit and near reads (`db.rs`).

use super::*;
use crate::rows::groups;
use crate::sql::Cached as _;

/// Group commit: jobs that fail roll back alone, the others in the same batch commit.
#[tokio::test]
async fn a_failing_job_does_not_spoil_its_batch() {
    for location in [
        Location::Memory,
        Location::File(tempfile::tempdir().expect("dir").keep().join("t.sqlite")),
    ] {
        let db = Db::open(&location).expect("open");
        let writes = (0..64u32).map(|n| {
            let db = db.clone();
            async move {
                db.write(move |txn| {
                    groups::insert(txn, &format!("g{n}"), chrono::Utc::now())?;
                    if n % 2 == 1 {
                        return Err(Error::ShuttingDown); // any failure after a write
                    }
                    Ok(n)
                })
                .await
            }
        });
        let outcomes = futures::future::join_all(writes).await;
        assert_eq!(outcomes.iter().filter(|o| o.is_ok()).count(), 32);
        let n_rows: u64 = db.read(groups::count).await.expect("count");
        assert_eq!(n_rows, 32, "{location:?}");
    }
}

/// `read_here` answers from the database it is asked about, on a thread that keeps
/// connections to more databases than it holds open (issue #15's near reads), and an
/// in-memory database reads through its writer.
#[tokio::test]
async fn a_near_read_reads_its_own_database() {
    let dir = tempfile::tempdir().expect("dir");
    let mut dbs = Vec::new();
    for n in 0..NEAR_PER_THREAD + 2 {
        let db = Db::open(&Location::File(dir.path().join(format!("{n}.sqlite")))).expect("open");
        add_group(&db, format!("g{n}")).await;
        dbs.push(db);
    }
    dbs.push(Db::open(&Location::Memory).expect("open"));
    for _ in 0..2 {
        for (n, db) in dbs.iter().enumerate() {
            let groups: Vec<String> = db.read_here(groups::ids).await.expect("read");
            let expected: Vec<String> = if n <= NEAR_PER_THREAD + 1 {
                vec![format!("g{n}")]
            } else {
                Vec::new()
            };
            assert_eq!(groups, expected, "database {n}");
        }
    }
    // A row committed after this thread opened its connection is seen at once.
    let db = &dbs[0];
    add_group(db, "later".into()).await;
    let later: u64 = db
        .read_here(|conn| Ok(u64::from(groups::exists(conn, "later")?)))
        .await
        .expect("read");
    assert_eq!(later, 1);
}

/// A database as a SIGKILL leaves it (its file and its WAL, copied while the writer runs)
/// opens with every committed row: the open syncs the leftover WAL before anything reads it
/// (`sync_leftover_wal`), and SQLite's recovery then replays it.
#[tokio::test]
async fn a_killed_database_opens_with_its_wal() {
    let dir = tempfile::tempdir().expect("dir");
    let live = dir.path().join("live.sqlite");
    let db = Db::open(&Location::File(live.clone())).expect("open");
    for n in 0..50u32 {
        add_group(&db, format!("g{n}")).await;
    }
    assert_eq!(count_groups(&killed_copy(&live, "killed")).await, 50);
}

/// A leftover WAL the open cannot sync because it cannot open it (here a symlink to itself)
/// stops the open with an error naming the file, before anything reads the database: what
/// it would show might not be durable. Once the WAL is readable again the database opens
/// with every row.
#[tokio::test]
async fn a_leftover_wal_that_cannot_be_opened_stops_the_open() {
    let dir = tempfile::tempdir().expect("dir");
    let copy = killed_with_groups(dir.path(), 5).await;
    let wal = dir.path().join("killed.sqlite-wal");
    let kept = dir.path().join("kept-wal");
    std::fs::rename(&wal, &kept).expect("move the WAL aside");
    std::os::unix::fs::symlink(&wal, &wal).expect("a symlink loop");
    let Err(error) = Db::open(&Location::File(copy.clone())) else {
        panic!("an unsyncable WAL must stop the open");
    };
    let said: Vec<String> = std::iter::successors(
        Some(&error as &(dyn std::error::Error + 'static)),
        |error| error.source(),
    )
    .map(ToString::to_string)
    .collect();
    let said = said.join(": ");
    assert!(
        said.contains("killed.sqlite-wal") && said.contains("symbolic links"),
        "the error says which file and why: {said}"
    );
    std::fs::remove_file(&wal).expect("remove the loop");
    std::fs::rename(&kept, &wal).expect("the WAL back");
    let db = Db::open(&Location::File(copy)).expect("opens once the WAL is readable");
    assert_eq!(count_groups(&db).await, 5);
}

/// Issue #15's fault rule at the open: a leftover WAL whose fsync fails (EIO) stops the open
/// with the disk's code before anything reads the database; once the disk works the same
/// files open with every row.
#[tokio::test]
async fn a_leftover_wal_whose_sync_fails_stops_the_open() {
    use crate::faults::{FaultKind, FaultSite, Faults};
    let dir = tempfile::tempdir().expect("dir");
    let copy = killed_with_groups(dir.path(), 5).await;
    let faults = Faults::default();
    faults.fail_writes(FaultSite::DbWalSync, FaultKind::Io);
    let Err(error) = Db::open_with(&Location::File(copy.clone()), faults.clone()) else {
        panic!("a WAL that cannot be synced must stop the open");
    };
    assert_eq!(
        error.code(),
        weft_api::ErrorCode::StorageUnavailable,
        "{error}"
    );
    faults.clear();
    let db = Db::open_with(&Location::File(copy), faults).expect("opens once the disk works");
    assert_eq!(count_groups(&db).await, 5);
}

/// The database at `live` as a SIGKILL would leave it now (its file and its WAL, copied
/// beside it under `name`), opened again.
fn killed_copy(live: &std::path::Path, name: &str) -> Db {
    Db::open(&Location::File(copied_as_killed(live, name))).expect("reopens")
}

/// A database in `dir` with `n` Groups, copied as a SIGKILL would leave it, not opened: the
/// copy's path.
async fn killed_with_groups(dir: &std::path::Path, n: u32) -> std::path::PathBuf {
    let live = dir.join("live.sqlite");
    let db = Db::open(&Location::File(live.clone())).expect("open");
    for n in 0..n {
        add_group(&db, format!("g{n}")).await;
    }
    copied_as_killed(&live, "killed")
}

/// The files of [`killed_copy`], not opened: the copy's path.
fn copied_as_killed(live: &std::path::Path, name: &str) -> std::path::PathBuf {
    let dir = live.parent().expect("in a directory");
    let copy = dir.join(format!("{name}.sqlite"));
    std::fs::copy(live, &copy).expect("copy the database");
    let mut wal = live.as_os_str().to_owned();
    wal.push("-wal");
    assert!(
        std::path::Path::new(&wal).exists(),
        "a running database has its WAL"
    );
    std::fs::copy(&wal, dir.join(format!("{name}.sqlite-wal"))).expect("copy the WAL");
    copy
}

/// Issue #15's fault rule at the database's own write sites, through SQLite's VFS: a commit
/// whose WAL write or fsync fails (ENOSPC or EIO) is answered with the disk's code and shows
/// nothing, the next one succeeds once the fault clears; a checkpoint that cannot write or
/// fsync the database file fails while commits and reads go on, and a later one copies
/// everything. After a reopen every committed row is there and the database checks whole.
#[tokio::test]
async fn the_database_fails_cleanly_at_its_own_write_sites() {
    use crate::faults::{FaultKind, FaultSite, Faults};
    use weft_api::ErrorCode;
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("t.sqlite");
    let faults = Faults::with_database().expect("the VFS registers");
    let db = Db::open_with(&Location::File(path.clone()), faults.clone()).expect("open");
    add_group(&db, "g0".into()).await;
    let mut expected = 1;
    for (site, kind, code) in [
        (
            FaultSite::DbWalWrite,
            FaultKind::NoSpace,
            ErrorCode::InsufficientStorage,
        ),
        (
            FaultSite::DbWalWrite,
            FaultKind::Io,
            ErrorCode::StorageUnavailable,
        ),
        // SQLite reports a failed fsync as an I/O error whatever its errno, ENOSPC included.
        (
            FaultSite::DbWalSync,
            FaultKind::NoSpace,
            ErrorCode::StorageUnavailable,
        ),
        (
            FaultSite::DbWalSync,
            FaultKind::Io,
            ErrorCode::StorageUnavailable,
        ),
    ] {
        faults.fail_writes(site, kind);
        let error = try_add_group(&db, format!("{site:?}-{kind:?}"))
            .await
            .expect_err("the commit fails");
        assert_eq!(error.code(), code, "{site:?} {kind:?}: {error:?}");
        assert_eq!(count_groups(&db).await, expected, "{site:?} {kind:?}");
        faults.clear();
        add_group(&db, format!("{site:?}-{kind:?}")).await;
        expected += 1;
    }
    let vfs = faults.vfs().expect("hooked").to_owned();
    let checkpoint = {
        let path = path.clone();
        move || {
            let conn = open_writing(&path, Some(&vfs))?;
            conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| {
                row.get::<_, i64>(0)
            })
        }
    };
    for skip in [0, 1] {
        // 0: its first write fails; 1: a later write or its fsync.
        // (The background checkpointer may take the skip or fail too: it is armed as well.)
        faults.fail_writes_after(FaultSite::DbCheckpoint, FaultKind::Io, skip);
        for n in 0..5 {
            add_group(&db, format!("during-{skip}-{n}")).await;
            expected += 1;
        }
        let error = checkpoint().expect_err("the checkpoint fails");
        assert_eq!(
            error.sqlite_error_code(),
            Some(rusqlite::ErrorCode::SystemIoFailure)
        );
        add_group(&db, format!("after-{skip}")).await;
        expected += 1;
        assert_eq!(count_groups(&db).await, expected);
        faults.clear();
        // Once cleared, a checkpoint succeeds; it answers "busy" (1) only while the background
        // checkpointer holds the lock at that moment, which a loaded machine makes likely:
        // ask again, a bounded number of times, until one runs whole.
        let whole = (0..400).any(|_| {
            let busy = checkpoint().expect("checkpoints");
            if busy != 0 {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            busy == 0
        });
        assert!(whole, "a checkpoint ran whole once the fault was cleared");
    }
    drop(db);
    let reopened = Db::open(&Location::File(path)).expect("reopens");
    assert_eq!(count_groups(&reopened).await, expected);
    let check: String = reopened
        .read(|conn| Ok(conn.row("PRAGMA integrity_check", [], |row| row.get(0))?))
        .await
        .expect("checks");
    assert_eq!(check, "ok");
}

/// What a failed WAL fsync leaves: the commit is answered as failed and shows nothing while
/// the process runs, but its frames were written before the fsync failed, so a crash before
/// the next commit lets SQLite's recovery replay it, whole (a commit is never replayed in
/// part). The next commit overwrites those frames, and then a crash brings nothing back.
/// README's fault invariant states this exception.
#[tokio::test]
async fn a_commit_whose_fsync_failed_comes_back_whole_only_before_the_next_commit() {
    use crate::faults::{FaultKind, FaultSite, Faults};
    let dir = tempfile::tempdir().expect("dir");
    let live = dir.path().join("live.sqlite");
    let faults = Faults::with_database().expect("the VFS registers");
    let db = Db::open_with(&Location::File(live.clone()), faults.clone()).expect("open");
    add_group(&db, "kept".into()).await;
    faults.fail_next(FaultSite::DbWalSync, FaultKind::Io, 1);
    try_add_group(&db, "ghost".into())
        .await
        .expect_err("the fsync fails");
    assert_eq!(count_groups(&db).await, 1, "nothing shows while it runs");
    let groups = |db: Db| async move { db.read(groups::ids).await.expect("read") };
    // A crash now (the files as a SIGKILL leaves them), and one after the next commit.
    assert_eq!(groups(killed_copy(&live, "first")).await, ["ghost", "kept"]);
    add_group(&db, "after".into()).await;
    assert_eq!(
        groups(killed_copy(&live, "second")).await,
        ["after", "kept"]
    );
}

/// Commits one Group row named `name` (the rows these tests count).
async fn add_group(db: &Db, name: String) {
    try_add_group(db, name).await.expect("write");
}

async fn try_add_group(db: &Db, name: String) -> Result<(), Error> {
    db.write(move |txn| groups::insert(txn, &name, chrono::Utc::now()).map(drop))
        .await
}

async fn count_groups(db: &Db) -> u64 {
    db.read(groups::count).await.expect("count")
}

/// A PostgreSQL URL is never shown with its password (logs print the index's location).
#[test]
fn a_postgres_url_is_shown_without_its_password() {
    let shown = format!(
        "{:?}",
        Location::Postgres("postgres://weft:s3cret@db.internal:5432/weft".into())
    );
    assert!(!shown.contains("s3cret"), "{shown}");
    assert!(shown.contains("weft:***@db.internal:5432/weft"), "{shown}");
    let bare = format!(
        "{:?}",
        Location::Postgres("postgres://weft@db:5432/weft".into())
    );
    assert!(bare.contains("postgres://weft@db:5432/weft"), "{bare}");
}

/// Issue #44: a cached statement whose `LIMIT ?` the planner reads is not re-prepared at each
/// run on the connections weft opens (QPSG), where a plain connection re-prepares it (so the
/// query below does exercise SQLite's re-prepare).
#[test]
fn cached_statements_keep_their_plans() {
    const SQL: &str = "SELECT a FROM t WHERE b = ?1 ORDER BY a DESC LIMIT ?2";
    let reprepares = |conn: &rusqlite::Connection| {
        conn.execute_batch(
            "CREATE TABLE t (a INTEGER PRIMARY KEY, b TEXT); CREATE INDEX t_b ON t (b, a);",
        )
        .expect("schema");
        for limit in [3i64, 4, 5, 6] {
            let mut statement = conn.prepare_cached(SQL).expect("prepare");
            let rows: Vec<i64> = statement
                .query_map(rusqlite::params!["x", limit], |row| row.get(0))
                .expect("query")
                .collect::<Result<_, _>>()
                .expect("rows");
            assert!(rows.is_empty());
        }
        let statement = conn.prepare_cached(SQL).expect("prepare");
        statement.get_status(rusqlite::StatementStatus::RePrepare)
    };
    let plain = rusqlite::Connection::open_in_memory().expect("open");
    assert!(reprepares(&plain) > 0, "the query exercises the re-prepare");
    let ours = rusqlite::Connection::open_in_memory().expect("open");
    keep_plans(&ours).expect("keep plans");
    assert_eq!(reprepares(&ours), 0);
}

/// The databases a writer test runs on: memory, a file, and PostgreSQL when one runs.
fn every_engine() -> Vec<Location> {
    let mut locations = vec![
        Location::Memory,
        Location::File(tempfile::tempdir().expect("dir").keep().join("t.sqlite")),
    ];
    match weft_testkit::shared_postgres() {
        Some(cluster) => locations.push(Location::Postgres(cluster.new_database())),
        None => assert!(
            !weft_testkit::postgres_required(),
            "WEFT_POSTGRES is set but no PostgreSQL runs"
        ),
    }
    locations
}

/// Changes sent ahead (PostgreSQL's pipeline, `sql/pipeline.rs`; run at once on SQLite) are
/// answered before their job's outcome: one that fails fails its own job, whether a read
/// follows it or the job ends on it, and nothing of that job commits, while the rest of the
/// batch does; inside a nested savepoint it fails only the nested part.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_sent_ahead_that_fails_fails_its_own_job() {
    use crate::rows::work_history;
    for location in every_engine() {
        let db = Db::open(&location).expect("open");
        let writes = (0..48u64).map(|n| {
            let db = db.clone();
            async move {
                db.write(move |txn| {
                    work_history::insert(txn, "wi", n, "work.progress")?;
                    match n % 3 {
                        // The same row again: refused by the key, found at the job's end.
                        1 => work_history::insert(txn, "wi", n, "work.progress")?,
                        // Refused, then a read: the read answers the refusal.
                        2 => {
                            work_history::insert(txn, "wi", n, "work.progress")?;
                            work_history::newest(txn, "wi", 1)?.get(txn)?;
                        }
                        _ => {}
                    }
                    Ok(n)
                })
                .await
            }
        });
        let outcomes = futures::future::join_all(writes).await;
        for (n, outcome) in outcomes.iter().enumerate() {
            assert_eq!(
                outcome.is_ok(),
                n % 3 == 0,
                "{location:?}: job {n}: {outcome:?}"
            );
        }
        let kept = db
            .read(|conn| work_history::newest(conn, "wi", 100)?.get(conn))
            .await
            .expect("read");
        let expected: Vec<u64> = (0..48).filter(|n| n % 3 == 0).rev().collect();
        assert_eq!(kept, expected, "{location:?}");

        let nested = db
            .write(|txn| {
                work_history::insert(txn, "wj", 1, "work.progress")?;
                let inner = txn.nested(|tx| work_history::insert(tx, "wj", 1, "work.progress"));
                assert!(inner.is_err(), "the nested part fails");
                work_history::insert(txn, "wj", 2, "work.progress")?;
                work_history::newest(txn, "wj", 10)?.get(txn)
            })
            .await
            .expect("the job stands");
        assert_eq!(nested, vec![2, 1], "{location:?}");
    }
}

/// On PostgreSQL two Groups' writes run at once, each in its Group's lane (`db/writer.rs`):
/// each job waits, inside its transaction, for the other to have started; in one lane the
/// first would wait for the second forever (here ten seconds, then it fails).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_groups_are_written_at_once_on_postgres() {
    let Some(url) = weft_testkit::postgres_database_or_skip() else {
        return;
    };
    let db = Db::open(&Location::Postgres(url)).expect("opens");
    let first = "ga".to_owned();
    let second = (0..)
        .map(|n| format!("g{n}"))
        .find(|g| lane_of(g, POSTGRES_LANES) != lane_of(&first, POSTGRES_LANES))
        .expect("a Group in another lane");
    let (to_second, from_first) = std::sync::mpsc::channel::<()>();
    let (to_first, from_second) = std::sync::mpsc::channel::<()>();
    let job =
        |group: String, tell: std::sync::mpsc::Sender<()>, hear: std::sync::mpsc::Receiver<()>| {
            let db = db.clone();
            async move {
                db.write_in(&group.clone(), move |txn| {
                    groups::insert(txn, &group, chrono::Utc::now())?;
                    let _ = tell.send(());
                    hear.recv_timeout(std::time::Duration::from_secs(10))
                        .map_err(|_| Error::ShuttingDown)
                })
                .await
            }
        };
    let (a, b) = tokio::join!(
        job(first, to_second, from_second),
        job(second, to_first, from_first)
    );
    a.expect("the first Group's job");
    b.expect("the second Group's job");
    assert_eq!(count_groups(&db).await, 2);
}

/// A Group's newest Event is handed from job to job of a transaction (`rows/events.rs`,
/// `db/writer.rs`): 48 jobs at once, each appending one or two Events to one Group, every
/// third refused after its appends and every fifth panicking after them, leave one chain
/// with no gap, each Event after the one it names, on every engine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_appended_in_one_batch_make_one_chain() {
    let group = weft_api::Id::parse("g", "g1").expect("id");
    for location in every_engine() {
        let db = Db::open(&location).expect("open");
        db.write(|txn| groups::insert(txn, "g1", chrono::Utc::now()))
            .await
            .expect("group");
        let writes = (0..48u64).map(|n| {
            let (db, group) = (db.clone(), group.clone());
            async move {
                db.write(move |txn| {
                    let now = chrono::Utc::now();
                    for _ in 0..1 + n % 2 {
                        crate::events::append_raw(txn, &group, "bench.tick", "{}".into(), now)?;
                    }
                    if n % 5 == 4 {
                        panic!("job {n} panics after its appends");
                    }
                    if n % 3 == 1 {
                        return Err(Error::ShuttingDown); // any refusal after its appends
                    }
                    Ok(1 + n % 2)
                })
                .await
            }
        });
        let outcomes = futures::future::join_all(writes).await;
        let appended: u64 = outcomes.iter().filter_map(|o| o.as_ref().ok()).sum();
        let expected: u64 = (0..48u64)
            .filter(|n| n % 5 != 4 && n % 3 != 1)
            .map(|n| 1 + n % 2)
            .sum();
        assert_eq!(appended, expected, "{location:?}");
        let events = db
            .read(|conn| crate::events::read(conn, "g1", 0, 1000))
            .await
            .expect("read");
        assert_eq!(events.len() as u64, expected, "{location:?}");
        let mut prev = weft_api::event::EventHash::GENESIS;
        for (at, event) in (1..).zip(&events) {
            assert_eq!(event.sequence, at, "{location:?}");
            assert_eq!(event.prev_hash, prev, "{location:?}: Event {at}");
            prev = event.hash;
        }
    }
}

/// On PostgreSQL a Group's head read before its lock (an ACK reads it so, `delivery.rs`) is
/// not remembered: another server may append to the Group before this job takes the lock,
/// and an append after the lock reads the head again (a remembered one would reuse the
/// other server's sequence, or fork the chain if that Event were gone).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_read_before_the_groups_lock_is_read_again_under_it() {
    let Some(url) = weft_testkit::postgres_database_or_skip() else {
        return;
    };
    let db = Db::open(&Location::Postgres(url.clone())).expect("open");
    let other = Db::open(&Location::Postgres(url)).expect("open another server's");
    let group = weft_api::Id::parse("g", "g1").expect("id");
    db.write(|txn| groups::insert(txn, "g1", chrono::Utc::now()))
        .await
        .expect("group");
    let (before, appended) = db
        .write(move |txn| {
            let (before, _) = crate::events::head(txn, "g1")?;
            // Another server appends to the Group meanwhile.
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            let theirs = group.clone();
            runtime.block_on(other.write(move |t| {
                crate::events::append_raw(t, &theirs, "bench.tick", "{}".into(), chrono::Utc::now())
            }))?;
            let appended = crate::events::append_raw(
                txn,
                &group,
                "bench.tick",
                "{}".into(),
                chrono::Utc::now(),
            )?;
            Ok((before, appended))
        })
        .await
        .expect("appended after the other server's Event");
    assert_eq!(appended, before + 2);
}
