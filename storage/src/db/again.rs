//! A job run again when it lost a race of locks with another server's batch (issue #43): on
//! PostgreSQL each writer's batch holds the Group locks its earlier jobs took until it
//! commits, so two servers' batches that lock two Groups in opposite orders deadlock, and
//! PostgreSQL rolls one job back (its savepoint: nothing of it kept).

use std::sync::Arc;

use super::Db;
use crate::error::Error;
use crate::unit::Tx;

/// Runs `job` as [`Db::write`] does, and again (three runs at most) when it lost a race
/// of locks with another server's batch ([`Error::lost_a_race`]), instead of answering
/// 503. Only for a job that may run twice: a Command, whose first run left nothing and whose
/// `commandId` dedupes it. Not for a job under an `Idempotency-Key`: its claim (`claim.rs`)
/// is armed for one run, which stores the answer with the work.
/// `group`: the Group it writes, whose lane runs it ([`Db::write_in`]).
pub(crate) async fn write_again_if_raced<T, F>(db: &Db, group: &str, job: F) -> Result<T, Error>
where
    T: Send + 'static,
    F: Fn(&Tx<'_>) -> Result<T, Error> + Send + Sync + 'static,
{
    let job = Arc::new(job);
    let mut runs = 0;
    loop {
        runs += 1;
        let run = Arc::clone(&job);
        match db.write_in(group, move |tx| run(tx)).await {
            Err(error) if runs < 3 && error.lost_a_race() => {
                tracing::info!(%error, runs, "a job lost a race of locks; it runs again");
            }
            outcome => return outcome,
        }
    }
}
