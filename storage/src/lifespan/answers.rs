//! Nothing kept for retries grows forever (issue #46): the answers of Commands and idempotent
//! requests older than the answer horizon are trimmed, a bounded batch per transaction. The rows keep their ids and
//! request hashes: a retry is answered `command_expired` (`work/command.rs`, `claim.rs`),
//! never executed again. Sessions that expired a day ago or more are forgotten with them.

use super::handle::Lifespan;
use crate::clock::format_instant;
use crate::error::Error;

/// Answers trimmed per transaction.
pub(crate) const ANSWER_BATCH: u64 = 5_000;
const BATCH: u64 = ANSWER_BATCH;

/// Whether `deadline` has passed: no further batch starts (one always runs, so each call
/// makes progress; the next call goes on where the rows say it stopped).
pub(super) fn past(deadline: Option<std::time::Instant>) -> bool {
    deadline.is_some_and(|deadline| std::time::Instant::now() >= deadline)
}

impl Lifespan<'_> {
    /// Trims the answers older than the horizon, and forgets sessions that expired a day ago
    /// or more; answers how many answers.
    pub async fn trim_answers(&self) -> Result<u64, Error> {
        self.trim_answers_until(None).await
    }

    /// [`Self::trim_answers`], starting no batch after `deadline` (`POST /v1/admin/gc` answers
    /// within its request's time; what is left is trimmed by the next call or round).
    pub async fn trim_answers_until(
        &self,
        deadline: Option<std::time::Instant>,
    ) -> Result<u64, Error> {
        let now = self.0.clock.now();
        let cutoff = format_instant(now - self.0.answer_horizon);
        let ended = format_instant(now - chrono::Duration::days(1));
        let mut total = 0;
        loop {
            let (cutoff, ended) = (cutoff.clone(), ended.clone());
            let trimmed = self
                .0
                .db
                .write(move |txn| {
                    let commands = crate::rows::commands::trim_before(txn, &cutoff, BATCH)?;
                    let answers = crate::rows::idempotency::trim_before(txn, &cutoff, BATCH)?;
                    // Sessions that ended a day ago or more: their tokens authenticate
                    // nothing, and an Agent's next session counts from `session_epochs`.
                    let sessions =
                        crate::rows::sessions::forget_expired_before(txn, &ended, BATCH)?;
                    Ok((commands + answers, sessions))
                })
                .await?;
            let (trimmed, sessions) = trimmed;
            total += trimmed;
            if (trimmed == 0 && sessions == 0) || past(deadline) {
                return Ok(total);
            }
        }
    }
}
