//! The VFS against real files: a pass-through while nothing is armed, and SQLite's own
//! answer to a failed WAL write, WAL fsync and checkpoint.

use std::sync::Mutex;

use rusqlite::{Connection, ErrorCode, OpenFlags};

use super::*;

/// Fails every call that matches the armed (file, op) and counts every call it sees.
#[derive(Default)]
struct Armed {
    armed: Mutex<Option<(File, Op, Failure)>>,
    seen: Mutex<Vec<(File, Op)>>,
}

impl Hook for Armed {
    fn before(&self, file: File, op: Op) -> Option<Failure> {
        self.seen.lock().expect("lock").push((file, op));
        match *self.armed.lock().expect("lock") {
            Some((f, o, failure)) if (f, o) == (file, op) => Some(failure),
            _ => None,
        }
    }
}

impl Armed {
    fn arm(&self, armed: Option<(File, Op, Failure)>) {
        *self.armed.lock().expect("lock") = armed;
    }

    fn saw(&self, file: File, op: Op) -> bool {
        self.seen.lock().expect("lock").contains(&(file, op))
    }

    /// How many times the hook was asked about `op` on `file` since the last call.
    fn took(&self, file: File, op: Op) -> usize {
        let mut seen = self.seen.lock().expect("lock");
        let n = seen.iter().filter(|s| **s == (file, op)).count();
        seen.clear();
        n
    }
}

fn open(path: &std::path::Path, vfs: &str) -> Connection {
    let conn = Connection::open_with_flags_and_vfs(path, OpenFlags::default(), vfs).expect("opens");
    conn.execute_batch(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA wal_autocheckpoint = 0;
         CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, v BLOB NOT NULL);",
    )
    .expect("setup");
    conn
}

/// A database in a fresh directory (kept while the first value lives), its path, the hook
/// that arms its faults, and a connection opened through the VFS that asks it.
fn hooked() -> (
    tempfile::TempDir,
    std::path::PathBuf,
    Arc<Armed>,
    Connection,
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let hook = Arc::new(Armed::default());
    let vfs = register(Some(hook.clone())).expect("registers");
    let conn = open(&path, &vfs);
    (dir, path, hook, conn)
}

fn count(conn: &Connection) -> i64 {
    conn.query_row("SELECT count(*) FROM t", [], |row| row.get(0))
        .expect("count")
}

/// Inserts `n` rows of 3 KiB in one transaction.
fn insert(conn: &mut Connection, n: usize) -> rusqlite::Result<()> {
    let txn = conn.transaction()?;
    for _ in 0..n {
        txn.execute("INSERT INTO t (v) VALUES (zeroblob(3072))", [])?;
    }
    txn.commit()
}

/// Nothing armed: the VFS is the default one. Rows written through it, checkpointed through
/// it, read back through the default VFS after a reopen, and the database checks whole; the
/// hook saw the WAL's writes and fsyncs and the checkpoint's writes to the main file.
#[test]
fn unarmed_it_is_the_default_vfs() {
    let (_dir, path, hook, mut conn) = hooked();
    for _ in 0..20 {
        insert(&mut conn, 50).expect("inserts");
    }
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| {
        row.get::<_, i64>(0)
    })
    .expect("checkpoints");
    assert!(hook.saw(File::Wal, Op::Write) && hook.saw(File::Wal, Op::Sync));
    assert!(hook.saw(File::Main, Op::Write) && hook.saw(File::Main, Op::Sync));
    drop(conn);
    let plain = Connection::open(&path).expect("reopens");
    assert_eq!(count(&plain), 1000);
    let check: String = plain
        .query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .expect("checks");
    assert_eq!(check, "ok");
}

/// A commit whose WAL write or fsync fails returns SQLite's error for it, its rows are never
/// visible to another connection, and the next commit after the fault clears succeeds.
#[test]
fn a_failed_wal_write_or_fsync_fails_the_commit_and_nothing_shows() {
    let (_dir, path, hook, mut conn) = hooked();
    insert(&mut conn, 10).expect("inserts");
    let reader = Connection::open(&path).expect("reader");
    let cases = [
        (
            Op::Write,
            Failure::Full,
            ErrorCode::DiskFull,
            ffi::SQLITE_FULL,
        ),
        (
            Op::Write,
            Failure::Io,
            ErrorCode::SystemIoFailure,
            ffi::SQLITE_IOERR_WRITE,
        ),
        // The unix VFS reports any failed fsync as an I/O error, ENOSPC included.
        (
            Op::Sync,
            Failure::Full,
            ErrorCode::SystemIoFailure,
            ffi::SQLITE_IOERR_FSYNC,
        ),
        (
            Op::Sync,
            Failure::Io,
            ErrorCode::SystemIoFailure,
            ffi::SQLITE_IOERR_FSYNC,
        ),
    ];
    let mut expected = 10;
    for (op, failure, code, extended) in cases {
        hook.arm(Some((File::Wal, op, failure)));
        let error = insert(&mut conn, 10).expect_err("the commit fails");
        assert_eq!(error.sqlite_error_code(), Some(code), "{op:?} {failure:?}");
        assert_eq!(
            error.sqlite_error().map(|e| e.extended_code),
            Some(extended),
            "{op:?} {failure:?}"
        );
        assert!(conn.is_autocommit(), "rolled back: {op:?} {failure:?}");
        assert_eq!(
            count(&reader),
            expected,
            "nothing shows: {op:?} {failure:?}"
        );
        hook.arm(None);
        insert(&mut conn, 10).expect("recovers");
        expected += 10;
        assert_eq!(count(&reader), expected);
        assert_eq!(count(&conn), expected);
    }
    drop(conn);
    drop(reader);
    assert_eq!(count(&Connection::open(&path).expect("reopens")), expected);
}

/// A checkpoint that cannot write or fsync the main file fails; every committed row is still
/// read (from the WAL), and the next checkpoint copies them all.
#[test]
fn a_failed_checkpoint_loses_nothing() {
    let (_dir, path, hook, mut conn) = hooked();
    let checkpoint = |conn: &Connection| {
        conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| {
            row.get::<_, i64>(0)
        })
    };
    let mut expected = 0;
    for op in [Op::Write, Op::Sync] {
        insert(&mut conn, 30).expect("inserts");
        expected += 30;
        hook.arm(Some((File::Main, op, Failure::Io)));
        let error = checkpoint(&conn).expect_err("the checkpoint fails");
        assert_eq!(
            error.sqlite_error_code(),
            Some(ErrorCode::SystemIoFailure),
            "{op:?}"
        );
        assert_eq!(count(&conn), expected, "{op:?}");
        assert_eq!(count(&Connection::open(&path).expect("reader")), expected);
        hook.arm(None);
        insert(&mut conn, 1).expect("commits go on");
        expected += 1;
        assert_eq!(checkpoint(&conn).expect("checkpoints"), 0, "{op:?}");
    }
    drop(conn);
    let plain = Connection::open(&path).expect("reopens");
    assert_eq!(count(&plain), expected);
    let check: String = plain
        .query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .expect("checks");
    assert_eq!(check, "ok");
}

/// Checks the database whole through the default VFS, as a reader or a restart opens it.
fn plain_count(path: &std::path::Path) -> i64 {
    let plain = Connection::open(path).expect("reopens");
    let check: String = plain
        .query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .expect("checks");
    assert_eq!(check, "ok");
    count(&plain)
}

/// A commit's WAL frames (two `xWrite`s each, SQLite's header and page) reach the file as one
/// write, before its fsync, and another connection through the default VFS reads them all.
#[test]
fn a_commit_writes_its_wal_once_before_its_fsync() {
    let (_dir, path, hook, mut conn) = hooked();
    let reader = Connection::open(&path).expect("reader");
    hook.took(File::Wal, Op::Write);
    for round in 1..=3 {
        insert(&mut conn, 40).expect("inserts");
        assert_eq!(hook.took(File::Wal, Op::Write), 1, "round {round}");
        assert_eq!(count(&reader), 40 * round);
    }
    hook.arm(Some((File::Wal, Op::Sync, Failure::Io)));
    insert(&mut conn, 40).expect_err("the fsync fails");
    hook.arm(None);
    drop(conn);
    assert_eq!(plain_count(&path), 120);
}

/// Pages a transaction spills to the WAL before its commit (a small page cache) are read back
/// and written again in place while they wait; a transaction larger than what is gathered
/// at once goes in parts. Every row arrives, and the database checks whole.
#[test]
fn spilled_rewritten_and_oversized_transactions_read_back_whole() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let vfs = register(None).expect("registers");
    let mut conn = open(&path, &vfs);
    conn.execute_batch("PRAGMA cache_size = 8")
        .expect("small cache");
    let txn = conn.transaction().expect("begins");
    for _ in 0..200 {
        txn.execute("INSERT INTO t (v) VALUES (randomblob(3072))", [])
            .expect("inserts");
    }
    // Reading spilled pages back, then changing them, rewrites their frames.
    let before: i64 = txn
        .query_row("SELECT sum(length(v)) FROM t", [], |row| row.get(0))
        .expect("reads back");
    assert_eq!(before, 200 * 3072);
    txn.execute("UPDATE t SET v = zeroblob(3000) WHERE id % 2 = 0", [])
        .expect("rewrites");
    txn.commit().expect("commits");
    // More than `PENDING_LIMIT` in one commit.
    let rows = gather::PENDING_LIMIT / 3072 + 200;
    insert(&mut conn, rows).expect("a large commit");
    let expected = 200 + i64::try_from(rows).expect("fits");
    let bytes: i64 = conn
        .query_row("SELECT sum(length(v)) FROM t", [], |row| row.get(0))
        .expect("sums");
    drop(conn);
    assert_eq!(plain_count(&path), expected);
    let plain = Connection::open(&path).expect("reopens");
    let again: i64 = plain
        .query_row("SELECT sum(length(v)) FROM t", [], |row| row.get(0))
        .expect("sums");
    assert_eq!(again, bytes);
    assert_eq!(bytes, 100 * 3072 + 100 * 3000 + (expected - 200) * 3072);
}

/// Gathering is safe only under `synchronous` FULL or EXTRA and a main file with powersafe
/// overwrite; `check_gathering` says which is missing.
#[test]
fn gathering_is_checked_against_its_two_conditions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let vfs = register(None).expect("registers");
    let conn = open(&path, &vfs);
    assert_eq!(check_gathering(&conn), Ok(()));
    conn.execute_batch("PRAGMA synchronous = NORMAL")
        .expect("normal");
    let why = check_gathering(&conn).expect_err("NORMAL is refused");
    assert!(why.contains("synchronous is 1"), "{why}");
    drop(conn);
    let uri = format!("file:{}?psow=0", path.display());
    let padded = Connection::open_with_flags_and_vfs(&uri, OpenFlags::default(), vfs.as_str())
        .expect("opens");
    let why = check_gathering(&padded).expect_err("no powersafe overwrite is refused");
    assert!(why.contains("powersafe"), "{why}");
}

/// A hand-over that fails when a spilled transaction reads its own pages back (the read
/// flushes what was gathered) fails that transaction as an I/O error; it rolls back whole,
/// nothing of it shows to another connection, and the next commit after the fault clears
/// succeeds.
#[test]
fn a_failed_hand_over_on_a_read_back_rolls_the_transaction_back() {
    let (_dir, path, hook, mut conn) = hooked();
    insert(&mut conn, 10).expect("inserts");
    conn.execute_batch("PRAGMA cache_size = 8")
        .expect("small cache");
    let reader = Connection::open(&path).expect("reader");
    let attempt = |conn: &mut Connection| -> rusqlite::Result<i64> {
        let txn = conn.transaction()?;
        for _ in 0..200 {
            txn.execute("INSERT INTO t (v) VALUES (randomblob(3072))", [])?;
        }
        let bytes = txn.query_row("SELECT sum(length(v)) FROM t", [], |row| row.get(0))?;
        txn.commit()?;
        Ok(bytes)
    };
    hook.arm(Some((File::Wal, Op::Write, Failure::Io)));
    let error = attempt(&mut conn).expect_err("the read-back's hand-over fails");
    assert_eq!(error.sqlite_error_code(), Some(ErrorCode::SystemIoFailure));
    assert_eq!(
        error.sqlite_error().map(|e| e.extended_code),
        Some(ffi::SQLITE_IOERR_READ),
        "failed on the read, not at the commit"
    );
    assert!(conn.is_autocommit(), "rolled back");
    assert_eq!(count(&reader), 10, "nothing shows");
    hook.arm(None);
    assert_eq!(attempt(&mut conn).expect("recovers"), 210 * 3072);
    assert_eq!(count(&reader), 210);
    drop(conn);
    drop(reader);
    assert_eq!(plain_count(&path), 210);
}
