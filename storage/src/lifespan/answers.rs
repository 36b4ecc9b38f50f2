//! Nothing kept for retries grows forever (issue #46): the answers of Commands and idempotent
//! requests older than the answer horizon are trimmed, a bounded batch per transaction. The rows keep their ids and
//! request hashes: a retry is answered `command_expired` (`work/command.rs`, `claim.rs`),
//! never executed again.

use super::handle::Lifespan;
use crate::clock::format_instant;
use crate::error::Error;

/// Answers trimmed per transaction.
const BATCH: u64 = 5_000;

impl Lifespan<'_> {
    /// Trims the answers older than the horizon; answers how many.
    pub async fn trim_answers(&self) -> Result<u64, Error> {
        let cutoff = format_instant(self.0.clock.now() - self.0.answer_horizon);
        let mut total = 0;
        loop {
            let cutoff = cutoff.clone();
            let trimmed = self
                .0
                .db
                .write(move |txn| {
                    let commands = crate::rows::commands::trim_before(txn, &cutoff, BATCH)?;
                    let answers = crate::rows::idempotency::trim_before(txn, &cutoff, BATCH)?;
                    Ok(commands + answers)
                })
                .await?;
            total += trimmed;
            if trimmed == 0 {
                return Ok(total);
            }
        }
    }
}
