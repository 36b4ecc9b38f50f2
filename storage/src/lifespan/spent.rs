//! Rows nothing reads any more are forgotten (issue #46: nothing grows without bound), a
//! bounded batch per transaction, by each collection round:
//! - a lease's renewal rows: the WorkItem's view lists only its current lease's newest
//!   `SHOWN` (and says whether there were more), so an open lease keeps one more
//!   than that and an ended lease none. Its `lease.renewed` Events keep the whole history
//!   (LSE-3); before this, a lease renewed every ten seconds for a month kept 260,000 rows.
//! - capability tokens that expired a day ago or more, of a lease that ended: they authorize
//!   nothing, a bearer presenting one is answered as for any unknown token, and no owner can
//!   revoke or replace a token of an ended lease any more (a live lease's tokens stay, so its
//!   owner's revocation and rotation answer as they did).
//! - the offers of a verified or cancelled WorkItem (SM-4: no Command offers it again) past
//!   the newest `offers::SHOWN` + 1 its view reads, but one still live and its newest
//!   accepted one: a Command naming a forgotten offer is answered as for an unknown one
//!   (the state refuses it either way), and the log's `work.offered` Events keep them all.

use super::answers::past;
use super::handle::Lifespan;
use crate::clock::format_instant;
use crate::engine::SpentWalk;
use crate::error::Error;
use crate::rows::{capability_tokens, lease_renewals, leases, offers, work_items};

/// Leases looked at, or tokens forgotten, per transaction.
const BATCH: u64 = 256;

impl Lifespan<'_> {
    /// Forgets the renewal rows and expired capability tokens nothing reads any more; answers
    /// how many rows went.
    pub async fn forget_spent(&self) -> Result<u64, Error> {
        self.forget_spent_until(None).await
    }

    /// [`Self::forget_spent`], starting no batch after `deadline` (`POST /v1/admin/gc`
    /// answers within its request's time). Each of its three walks (renewal rows, offers,
    /// tokens) takes at least one batch per call and goes on from where the last call left
    /// it, so none is starved by the deadline.
    pub async fn forget_spent_until(
        &self,
        deadline: Option<std::time::Instant>,
    ) -> Result<u64, Error> {
        let mut total = 0;
        let mut after = self.walk(|walk| std::mem::take(&mut walk.leases));
        loop {
            let from = after.clone();
            let (forgotten, last) = self
                .0
                .db
                .write(move |txn| {
                    let ids = lease_renewals::leases_after(txn, &from, BATCH)?;
                    let mut forgotten = 0;
                    for id in &ids {
                        let open = leases::load(txn, id)?.is_some_and(|l| l.released_at.is_none());
                        let keep = if open { lease_renewals::SHOWN + 1 } else { 0 };
                        forgotten += lease_renewals::forget_all_but_newest(txn, id, keep)?;
                    }
                    Ok((forgotten, ids.last().cloned()))
                })
                .await?;
            total += forgotten;
            let Some(last) = last else { break };
            if past(deadline) {
                self.walk(|walk| walk.leases = last);
                break;
            }
            after = last;
        }
        total += self.forget_offers(deadline).await?;
        let cutoff = format_instant(self.0.clock.now() - chrono::Duration::days(1));
        let mut after = self.walk(|walk| std::mem::take(&mut walk.tokens));
        loop {
            let (cutoff, from) = (cutoff.clone(), after.clone());
            let (forgotten, last) = self
                .0
                .db
                .write(move |txn| {
                    let expired = capability_tokens::expired_before(txn, &cutoff, &from, BATCH)?;
                    let mut forgotten = 0;
                    for (hash, lease_id) in &expired {
                        // A live lease's token stays: its owner may still revoke or replace it.
                        let ended =
                            leases::load(txn, lease_id)?.is_none_or(|l| l.released_at.is_some());
                        if ended {
                            forgotten += capability_tokens::forget(txn, hash)?;
                        }
                    }
                    // Token rows deleted are held to the commit: no later job of the batch
                    // takes a Group's lock under them (a use takes the Group's, then shares
                    // the token's row).
                    if forgotten > 0 {
                        txn.loaded().note_row_lock("token");
                    }
                    Ok((forgotten, expired.last().map(|(hash, _)| hash.clone())))
                })
                .await?;
            total += forgotten;
            let Some(last) = last else {
                return Ok(total);
            };
            if past(deadline) {
                self.walk(|walk| walk.tokens = last);
                return Ok(total);
            }
            after = last;
        }
    }

    /// `f` on the walks' places.
    fn walk<T>(&self, f: impl FnOnce(&mut SpentWalk) -> T) -> T {
        f(&mut self.0.spent_walk.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// Forgets the offers of verified and cancelled WorkItems that no view reads; answers how
    /// many went.
    async fn forget_offers(&self, deadline: Option<std::time::Instant>) -> Result<u64, Error> {
        let now = self.0.clock.now();
        let mut total = 0;
        let mut after = self.walk(|walk| std::mem::take(&mut walk.offers));
        loop {
            let from = after.clone();
            let (forgotten, last) = self
                .0
                .db
                .write(move |txn| {
                    let ids = offers::crowded_after(txn, &from, offers::SHOWN + 1, BATCH)?;
                    let mut forgotten = 0;
                    for id in &ids {
                        let ended =
                            work_items::load(txn, id)?.is_some_and(|w| w.state.is_terminal());
                        if ended {
                            forgotten +=
                                offers::forget_all_but_newest(txn, id, offers::SHOWN + 1, now)?;
                        }
                    }
                    Ok((forgotten, ids.last().cloned()))
                })
                .await?;
            total += forgotten;
            let Some(last) = last else {
                return Ok(total);
            };
            if past(deadline) {
                self.walk(|walk| walk.offers = last);
                return Ok(total);
            }
            after = last;
        }
    }
}
