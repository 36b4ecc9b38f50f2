//! Which blobs were repaired since a read began, so a read that found bytes bad cannot
//! quarantine a copy repaired after it read them.
//!
//! A read that judges stored bytes notes [`Repairs::seen`] before it reads them. An upload
//! that repairs a quarantined blob records the repair ([`Repairs::record`]) inside its own
//! transaction, after it put the good bytes in place (file renamed over the bad one, or the
//! row's inline bytes replaced). A quarantine's transaction applies only if the blob was not
//! repaired after the generation its read noted ([`Repairs::since`]). Both run on the
//! database's one writer thread, so one of two orders holds: the quarantine came first and
//! the repair clears it, or the repair came first and the stale quarantine is skipped. The
//! stale read still fails its own answer (its bytes did not verify); only the mark is
//! skipped. A read that opened the blob after the repair's bytes were in place reads good
//! bytes and quarantines nothing.
//!
//! A repair recorded in a transaction that then rolls back skips at most the quarantines of
//! reads that began before it; the next read finds the bad bytes again and quarantines them.
//! The map keeps one entry per blob ever repaired in this process: repairs follow
//! quarantines, which are rare, and it is empty at every start (no read survives a restart).

use std::collections::HashMap;
use std::sync::Mutex;

use weft_api::ArtifactId;

/// The generation a read noted before reading the bytes it judges.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Seen(u64);

impl Seen {
    /// For bytes outside the index (snapshots): no repair of theirs comes after it.
    pub(crate) const OUTSIDE_THE_INDEX: Seen = Seen(u64::MAX);
}

#[derive(Debug, Default)]
pub(crate) struct Repairs(Mutex<State>);

#[derive(Debug, Default)]
struct State {
    generation: u64,
    last: HashMap<ArtifactId, u64>,
}

impl Repairs {
    /// The generation now; note it before reading the bytes a quarantine would judge.
    pub(crate) fn seen(&self) -> Seen {
        Seen(self.state().generation)
    }

    /// A repair of `blake3`: called in the repair's transaction, after its bytes are in place.
    pub(crate) fn record(&self, blake3: ArtifactId) {
        let mut state = self.state();
        state.generation += 1;
        let generation = state.generation;
        state.last.insert(blake3, generation);
    }

    /// Whether `blake3` was repaired after `seen` was noted.
    pub(crate) fn since(&self, blake3: &ArtifactId, seen: Seen) -> bool {
        self.state()
            .last
            .get(blake3)
            .is_some_and(|&repaired| repaired > seen.0)
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
    fn only_a_repair_of_that_blob_after_the_read_began_counts() {
        let repairs = Repairs::default();
        let (a, b) = (ArtifactId([1; 32]), ArtifactId([2; 32]));
        let before = repairs.seen();
        assert!(!repairs.since(&a, before), "never repaired");
        repairs.record(a);
        assert!(repairs.since(&a, before), "repaired after the read began");
        assert!(!repairs.since(&b, before), "another blob's repair");
        let after = repairs.seen();
        assert!(!repairs.since(&a, after), "repaired before the read began");
        repairs.record(b);
        assert!(!repairs.since(&a, after), "b's repair says nothing of a");
        repairs.record(a);
        assert!(repairs.since(&a, after), "repaired again");
        assert!(!repairs.since(&a, Seen::OUTSIDE_THE_INDEX));
    }
}
