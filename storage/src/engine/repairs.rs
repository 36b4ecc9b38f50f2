//! Which blobs were repaired since a read began, so a read that found bytes bad cannot
//! quarantine a copy repaired after it read them.
//!
//! A read that judges stored bytes notes [`Repairs::seen`] before it reads them. An upload
//! that repairs a quarantined blob marks the repair pending ([`Repairs::begin`]) inside its
//! transaction, after it put the good bytes in place (file renamed over the bad one, or the
//! row's inline bytes replaced in that transaction), and the mark ends, with a new
//! generation, when the [`PendingRepair`] it got is dropped: after the commit (the guard
//! travels with the job's answer, which is delivered, or dropped, only once the commit's
//! outcome is known) or when the job fails. A quarantine's transaction applies only if the
//! blob has no repair pending and none ended after the generation its read noted
//! ([`Repairs::since`]). So a read that judged the bad copy, whether it read it before the
//! repair began or from a snapshot taken before the repair committed, cannot quarantine the
//! repaired blob; it still fails its own answer (its bytes did not verify). A read that
//! notes its generation after the mark ended reads the committed state.
//!
//! A repair whose transaction fails skips at most the quarantines of reads that judged
//! bytes while it was pending or began before it; the next read finds the bad bytes again
//! and quarantines them. The map keeps one entry per blob ever repaired in this process:
//! repairs follow quarantines, which need bad bytes on disk, and it is empty at every start
//! (no read survives a restart).
//!
//! Several servers over one index: this map knows only this process's repairs. A repair
//! through another server is known by the blob's row instead: the repair records when it
//! happened (`blobs.repaired_at`, V44), and a quarantine applies only to a row repaired
//! before its read began ([`Seen::began`]) by more than the clock skew the protocol allows
//! between servers (`MAX_CLOCK_SKEW_SECONDS`); on PostgreSQL its update waits for a repair
//! under way and then sees the repair's row (`rows::blobs::quarantine`). A blob repaired and
//! then damaged again fails its reads (they verify), and is quarantined by the first read that
//! begins more than that margin after the repair, by the reader's clock; until then each
//! failing read is logged and counted, and the blob stays readable-but-failing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};

use weft_api::ArtifactId;

/// The generation a read noted before reading the bytes it judges, and when it began.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Seen {
    generation: u64,
    began: Option<DateTime<Utc>>,
}

impl Seen {
    /// For bytes outside the index (snapshots): no repair of theirs comes after it.
    pub(crate) const OUTSIDE_THE_INDEX: Seen = Seen {
        generation: u64::MAX,
        began: None,
    };

    /// When the read began by its server's clock (`None`: outside the index): a repair the
    /// blob's row records after it, less the clock skew, came after the read.
    pub(crate) fn began(&self) -> Option<DateTime<Utc>> {
        self.began
    }
}

#[derive(Debug, Default)]
pub(crate) struct Repairs(Mutex<State>);

#[derive(Debug, Default)]
struct State {
    generation: u64,
    /// The generation each blob's last repair ended at.
    last: HashMap<ArtifactId, u64>,
    /// Repairs begun and not yet ended, by blob.
    pending: HashMap<ArtifactId, u32>,
}

/// A repair under way: ends (with a new generation) when dropped.
#[derive(Debug)]
pub(crate) struct PendingRepair {
    repairs: Arc<Repairs>,
    blake3: ArtifactId,
}

impl Drop for PendingRepair {
    fn drop(&mut self) {
        let mut state = self.repairs.state();
        state.generation += 1;
        let generation = state.generation;
        state.last.insert(self.blake3, generation);
        if let Some(n) = state.pending.get_mut(&self.blake3) {
            *n -= 1;
            if *n == 0 {
                state.pending.remove(&self.blake3);
            }
        }
    }
}

impl Repairs {
    /// The generation now, and `now`; note it before reading the bytes a quarantine would
    /// judge.
    pub(crate) fn seen(&self, now: DateTime<Utc>) -> Seen {
        Seen {
            generation: self.state().generation,
            began: Some(now),
        }
    }

    /// A repair of `blake3` begins: called in the repair's transaction, after its bytes are
    /// in place. Keep the guard until the transaction's outcome is known.
    pub(crate) fn begin(self: &Arc<Self>, blake3: ArtifactId) -> PendingRepair {
        *self.state().pending.entry(blake3).or_default() += 1;
        PendingRepair {
            repairs: Arc::clone(self),
            blake3,
        }
    }

    /// Whether a repair of `blake3` is pending, or ended after `seen` was noted.
    pub(crate) fn since(&self, blake3: &ArtifactId, seen: Seen) -> bool {
        let state = self.state();
        state.pending.contains_key(blake3)
            || state
                .last
                .get(blake3)
                .is_some_and(|&repaired| repaired > seen.generation)
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding this lock cannot leave the counter or map half-updated.
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_repair_of_that_blob_pending_or_ended_after_the_read_began_counts() {
        let repairs = Arc::new(Repairs::default());
        let (a, b) = (ArtifactId([1; 32]), ArtifactId([2; 32]));
        let before = repairs.seen(Utc::now());
        assert!(!repairs.since(&a, before), "never repaired");
        let pending = repairs.begin(a);
        let during = repairs.seen(Utc::now());
        assert!(repairs.since(&a, before), "pending");
        assert!(
            repairs.since(&a, during),
            "pending: its snapshot may predate the commit"
        );
        assert!(!repairs.since(&b, during), "another blob's repair");
        drop(pending);
        assert!(repairs.since(&a, before), "ended after the read began");
        assert!(repairs.since(&a, during), "ended after the read began");
        let after = repairs.seen(Utc::now());
        assert!(!repairs.since(&a, after), "ended before the read began");
        drop(repairs.begin(b));
        assert!(!repairs.since(&a, after), "b's repair says nothing of a");
        let (first, second) = (repairs.begin(a), repairs.begin(a));
        drop(first);
        assert!(
            repairs.since(&a, repairs.seen(Utc::now())),
            "one of two still pending"
        );
        drop(second);
        assert!(!repairs.since(&a, repairs.seen(Utc::now())));
        assert!(!repairs.since(&a, Seen::OUTSIDE_THE_INDEX));
    }
}
