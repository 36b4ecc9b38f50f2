//! Lease and ownership deadlines by instant (`work/expiry.rs` says what expires and how):
//! loaded at open and noted by every Command that leaves a WorkItem with a deadline, so the
//! expiry timer visits the due entries only, never every lease. Lazy: an entry may be stale,
//! a due one only says "look at this WorkItem now".
//!
//! Threads: shared by the writer thread (Command jobs note deadlines) and the timer; a
//! `std::sync::Mutex` guards it for short critical sections with no `.await`. Memory only:
//! the rows say what is due, so open rebuilds it.

use std::collections::BTreeSet;
use std::sync::Mutex;

use chrono::{DateTime, Utc};

/// When something of a WorkItem may expire next.
pub(crate) type Deadline = DateTime<Utc>;

/// Lease and ownership deadlines by instant: `(instant, WorkItem id)`, ordered by time.
#[derive(Debug, Default)]
pub(crate) struct Deadlines {
    entries: Mutex<BTreeSet<(DateTime<Utc>, String)>>,
    /// When the set was last read again from a shared index (several servers, issue #43).
    reloaded_at: Mutex<Option<DateTime<Utc>>>,
}

/// What one [`Deadlines::take_due`] found.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Due {
    /// The WorkItems with a due entry, each once.
    pub(crate) work_items: BTreeSet<String>,
    /// How many entries were looked at: the due ones and the one that stopped the walk.
    pub(crate) visited: usize,
}

impl Deadlines {
    /// Whether the set should be read again from a shared index at `now`, where other
    /// servers start leases this one never saw: true once per `every`.
    pub(crate) fn reload_due(&self, now: DateTime<Utc>, every: chrono::Duration) -> bool {
        let mut last = self
            .reloaded_at
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if last.is_some_and(|at| now < at + every) {
            return false;
        }
        *last = Some(now);
        true
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeSet<(DateTime<Utc>, String)>> {
        // Short critical sections, no await inside; a panic elsewhere leaves a usable set.
        self.entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Remembers that `work_item_id` has a deadline at `at`.
    pub(crate) fn note(&self, work_item_id: &str, at: DateTime<Utc>) {
        self.lock().insert((at, work_item_id.to_owned()));
    }

    /// Takes the entries due at `now` (at most `limit` WorkItems), earliest first.
    pub(crate) fn take_due(&self, now: DateTime<Utc>, limit: usize) -> Due {
        let mut entries = self.lock();
        let mut due = Due::default();
        while due.work_items.len() < limit {
            due.visited += 1;
            match entries.first() {
                Some((at, _)) if *at <= now => {
                    if let Some((_, work_item)) = entries.pop_first() {
                        due.work_items.insert(work_item);
                    }
                }
                _ => break,
            }
        }
        due
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }
}
