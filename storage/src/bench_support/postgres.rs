//! Another server's hands on a shared PostgreSQL index, for the tests of several servers
//! (issue #43): corrupting a row behind every server's back, holding Group locks as another
//! writer's transaction does, and seeing who waits for a lock. Each runs where the
//! synchronous client may block (`sql::postgres::off_runtime`), so async tests call them too.

use weft_api::ArtifactId;

use crate::error::Error;
use crate::sql::postgres::off_runtime;
use crate::sql::{Cached as _, Connection};

fn open(url: &str) -> Result<Connection, Error> {
    Ok(Connection::Postgres(Box::new(
        crate::sql::postgres::Pg::connect(url)?,
    )))
}

/// Replaces the inline copy of blob `id` in the index at `url` with `bytes`; answers how
/// many rows changed.
pub fn tamper_inline_bytes(url: &str, id: &ArtifactId, bytes: &[u8]) -> Result<usize, Error> {
    off_runtime(|| crate::rows::inline_bytes::tamper_of_blob(&open(url)?, &id.0, bytes))
}

/// How many sessions of the index at `url`'s database wait for a lock now.
pub fn lock_waiters(url: &str) -> Result<u64, Error> {
    off_runtime(|| {
        let waiting = open(url)?.value::<i64, _>(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
            [],
        )?;
        Ok(u64::try_from(waiting.unwrap_or(0)).unwrap_or(0))
    })
}

/// Waits (polling, for at most 10 s) until at least `n` sessions of the index at `url`'s
/// database wait for a lock; answers whether they did.
pub fn wait_for_waiters(url: &str, n: u64) -> Result<bool, Error> {
    for _ in 0..2_000 {
        if lock_waiters(url)? >= n {
            return Ok(true);
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    Ok(false)
}

/// One transaction of its own on the index at `url`, as another server's writer takes Group
/// locks in order (a quarantine does): Group `first`'s lock, then `meanwhile`, then Group
/// `then`'s lock, then the commit. It blocks its caller until then.
pub fn lock_groups_in_turn(
    url: &str,
    first: &str,
    then: &str,
    meanwhile: impl FnOnce() + Send,
) -> Result<(), Error> {
    off_runtime(|| {
        let conn = open(url)?;
        conn.begin()?;
        crate::rows::groups::lock(&conn, first)?;
        meanwhile();
        crate::rows::groups::lock(&conn, then)?;
        conn.control("COMMIT")?;
        Ok(())
    })
}

/// One transaction of its own on the index at `url`, as another server's removal of a
/// Membership runs: Group `group`'s lock, then `locked`, then (once some session waits for a
/// lock, for at most 10 s) Agent `agent`'s Membership of it ended at epoch `epoch`, then the
/// commit. It blocks its caller until then; answers whether a session waited.
pub fn remove_membership_under_lock(
    url: &str,
    group: &str,
    agent: &str,
    epoch: u64,
    locked: impl FnOnce() + Send,
) -> Result<bool, Error> {
    off_runtime(|| {
        let conn = open(url)?;
        conn.begin()?;
        crate::rows::groups::lock(&conn, group)?;
        locked();
        let waited = wait_for_waiters(url, 1)?;
        let now = crate::clock::format_instant(chrono::Utc::now());
        crate::rows::memberships::remove(&conn, group, agent, epoch, &now)?;
        conn.control("COMMIT")?;
        Ok(waited)
    })
}

/// One transaction of its own on the index at `url`, as a publication of `artifact` derived
/// from `source` runs on another server: the derivation graph's lock (`rows/derivations.rs`),
/// the edge (declared by manifest `declared_by`, which the caller picks for the Group it
/// plays), then `locked`, then (once some session waits for a lock, for at most 10 s) the
/// commit. It blocks its caller until then; answers whether a session waited. Foreign keys
/// are not checked (the test cluster's user is its superuser).
pub fn derive_under_lock(
    url: &str,
    artifact: &ArtifactId,
    source: &ArtifactId,
    declared_by: &ArtifactId,
    locked: impl FnOnce() + Send,
) -> Result<bool, Error> {
    off_runtime(|| {
        let conn = open(url)?;
        conn.begin()?;
        conn.run("SET LOCAL session_replication_role = replica", [])?;
        crate::rows::derivations::lock_graph(&conn)?;
        crate::rows::derivations::insert(&conn, artifact, source, declared_by)?;
        locked();
        let waited = wait_for_waiters(url, 1)?;
        conn.control("COMMIT")?;
        Ok(waited)
    })
}

/// One transaction of its own on the index at `url` that takes `(scope, key)`'s
/// idempotency lock (as a request's work does), then `locked`, then waits until `waiters`
/// sessions wait for a lock (for at most 10 s), then ends storing nothing. It blocks its
/// caller until then; answers whether they all waited.
pub fn hold_idempotency_key(
    url: &str,
    scope: &str,
    key: &str,
    waiters: u64,
    locked: impl FnOnce() + Send,
) -> Result<bool, Error> {
    off_runtime(|| {
        let conn = open(url)?;
        conn.begin()?;
        crate::rows::idempotency::lookup(&conn, scope, key)?;
        locked();
        let waited = wait_for_waiters(url, waiters)?;
        conn.control("ROLLBACK")?;
        Ok(waited)
    })
}
