//! The writer's group commit, the pipelined durability of `durable.rs`, and near reads.

use super::*;
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
                    txn.run(
                        "INSERT INTO groups (group_id, created_at) VALUES (?1, 'now')",
                        [format!("g{n}")],
                    )?;
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
        let n_rows: u64 = db
            .read(|conn| Ok(conn.row("SELECT COUNT(*) FROM groups", [], |row| row.get(0))?))
            .await
            .expect("count");
        assert_eq!(n_rows, 32, "{location:?}");
    }
}

/// An Event as a job notes it (the writer publishes what its jobs noted, whatever wrote it).
fn held_event() -> weft_api::Event {
    weft_api::Event {
        event_id: "held-1".into(),
        group_id: "held".into(),
        sequence: 1,
        kind: "test.held".into(),
        causation_command_id: None,
        payload: serde_json::value::RawValue::from_string("{}".into()).expect("json"),
        appended_at: "2026-12-02T00:00:00.000000Z".into(),
        prev_hash: weft_api::event::EventHash::GENESIS,
        hash: weft_api::event::EventHash([1; 32]),
    }
}

fn insert_group(name: &str) -> impl FnOnce(&Tx<'_>) -> Result<(), Error> + Send + 'static {
    let name = name.to_owned();
    move |txn| {
        txn.run(
            "INSERT INTO groups (group_id, created_at) VALUES (?1, 'now')",
            [name],
        )?;
        Ok(())
    }
}

async fn groups(db: &Db) -> Result<Vec<String>, Error> {
    db.read(|conn| {
        let mut statement = conn.prepare("SELECT group_id FROM groups ORDER BY group_id")?;
        let rows = statement.query_map([], |row| row.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    })
    .await
}

/// Pipelined durability (`db/durable.rs`): a write is answered only by the sync of the
/// WAL that holds it, so a failed sync is the write's answer (503, or 507 for a full
/// disk); the committed but unsynced row is never returned by a read, no later write is
/// taken, and a restart recovers from what is on disk.
#[tokio::test]
async fn a_failed_wal_sync_is_the_answer_and_stops_the_database() {
    use crate::faults::{FaultKind, FaultSite, Faults};
    for (kind, code) in [
        (FaultKind::Io, weft_api::ErrorCode::StorageUnavailable),
        (FaultKind::NoSpace, weft_api::ErrorCode::InsufficientStorage),
    ] {
        let dir = tempfile::tempdir().expect("dir");
        let location = Location::File(dir.path().join("t.sqlite"));
        let faults = Faults::default();
        let db = Db::open_with(&location, faults.clone()).expect("open");
        db.write(insert_group("before"))
            .await
            .expect("a synced write");
        let mut live = db.subscribe();
        assert_eq!(groups(&db).await.expect("read"), ["before"]);

        faults.fail_writes(FaultSite::DbSync, kind);
        let refused = db.write(insert_group("unsynced")).await;
        assert_eq!(refused.expect_err("the sync failed").code(), code);
        faults.clear();
        // Everything after the failed sync is refused: reads that could see the unsynced
        // commit, and every write, until restart.
        let read = groups(&db).await.expect_err("a read that may see it");
        assert_eq!(read.code(), code);
        let here = db
            .read_here(|conn| {
                Ok(conn.row("SELECT COUNT(*) FROM groups", [], |r| r.get::<_, u64>(0))?)
            })
            .await
            .expect_err("a near read too");
        assert_eq!(here.code(), code);
        let later = db.write(insert_group("later")).await;
        assert_eq!(later.expect_err("no write after").code(), code);
        assert!(
            live.try_recv().is_err(),
            "no Event of a refused write is published"
        );
        drop(db);

        // A restart reads what the disk holds: the synced row, never the refused write.
        let db = Db::open_with(&location, Faults::default()).expect("reopen");
        let after = groups(&db).await.expect("read after restart");
        assert!(after.contains(&"before".to_owned()), "{after:?}");
        assert!(!after.contains(&"later".to_owned()), "{after:?}");
        db.write(insert_group("again")).await.expect("writes again");
    }
}

/// Nothing returns before the sync of what it depends on: with the WAL's sync held, a
/// committed write stays unanswered, its Event unpublished, and a read that sees its row
/// (pooled or near) unanswered; a read of nothing newer than the last sync is not held.
/// Released, all of them answer.
#[tokio::test]
async fn nothing_returns_before_its_sync() {
    use std::time::Duration;
    let dir = tempfile::tempdir().expect("dir");
    let faults = crate::faults::Faults::default();
    let db =
        Db::open_with(&Location::File(dir.path().join("t.sqlite")), faults.clone()).expect("open");
    db.write(insert_group("synced")).await.expect("write");
    let mut live = db.subscribe();
    faults.hold_syncs();
    let write = tokio::spawn({
        let db = db.clone();
        async move {
            db.write(|txn| {
                insert_group("held")(txn)?;
                txn.appended(held_event());
                Ok(())
            })
            .await
        }
    });
    // The commit itself is not held: wait until another connection sees the row.
    let raw = Connection::open(dir.path().join("t.sqlite")).expect("raw connection");
    while raw
        .query_row(
            "SELECT COUNT(*) FROM groups WHERE group_id = 'held'",
            [],
            |r| r.get::<_, u64>(0),
        )
        .expect("count")
        == 0
    {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let seen = {
        let db = db.clone();
        move || {
            let db = db.clone();
            async move {
                db.read_here(|conn| {
                    Ok(conn.row(
                        "SELECT COUNT(*) FROM groups WHERE group_id = 'held'",
                        [],
                        |r| r.get::<_, u64>(0),
                    )?)
                })
                .await
            }
        }
    };
    let pooled = tokio::spawn({
        let db = db.clone();
        async move { groups(&db).await }
    });
    let near = tokio::spawn(seen());
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !write.is_finished(),
        "a write is answered only after its sync"
    );
    assert!(!pooled.is_finished(), "a read that may see it waits");
    assert!(!near.is_finished(), "a near read too");
    assert!(live.try_recv().is_err(), "its Event waits too");
    faults.release_syncs();
    write.await.expect("task").expect("answered after the sync");
    assert_eq!(
        live.try_recv().expect("published by then").kind,
        "test.held"
    );
    assert_eq!(near.await.expect("task").expect("read"), 1);
    assert_eq!(
        pooled.await.expect("task").expect("read"),
        ["held", "synced"]
    );
    // With nothing in flight, a read is not held.
    faults.hold_syncs();
    assert_eq!(groups(&db).await.expect("read"), ["held", "synced"]);
    faults.release_syncs();
    let durability = db.durability.as_ref().expect("on disk");
    durability
        .settled(durability.horizon())
        .await
        .expect("all durable");
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
        db.write(move |txn| {
            txn.run(
                "INSERT INTO groups (group_id, created_at) VALUES (?1, 'now')",
                [format!("g{n}")],
            )?;
            Ok(())
        })
        .await
        .expect("write");
        dbs.push(db);
    }
    dbs.push(Db::open(&Location::Memory).expect("open"));
    for _ in 0..2 {
        for (n, db) in dbs.iter().enumerate() {
            let groups: Vec<String> = db
                .read_here(|conn| {
                    let mut statement = conn.prepare("SELECT group_id FROM groups")?;
                    let rows = statement.query_map([], |row| row.get(0))?;
                    Ok(rows.collect::<Result<_, _>>()?)
                })
                .await
                .expect("read");
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
    db.write(|txn| {
        txn.run(
            "INSERT INTO groups (group_id, created_at) VALUES ('later', 'now')",
            [],
        )?;
        Ok(())
    })
    .await
    .expect("write");
    let later: u64 = db
        .read_here(|conn| {
            Ok(conn.row(
                "SELECT COUNT(*) FROM groups WHERE group_id = 'later'",
                [],
                |row| row.get(0),
            )?)
        })
        .await
        .expect("read");
    assert_eq!(later, 1);
}
