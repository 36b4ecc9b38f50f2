//! Whether a shared index answers (issue #43: a server partitioned from its database). A probe
//! reads `SELECT 1` every [`PROBE`] (one at a time: a probe stuck on a silent database is not
//! joined by more) and notes when one last answered while the follower of other servers'
//! commits had heard from the index too (`db/follow.rs`: a follower cut off would miss the
//! end of a session). While the index has been silent longer
//! than [`STALE_AFTER`], what this process keeps from it in memory may be stale: the session
//! cache is not used (every token is read from the index, which then fails or waits), and
//! `/healthz` answers 503 `storage_unavailable`. A single-process index is always current.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How often the probe reads.
pub(crate) const PROBE: Duration = Duration::from_secs(1);

/// How long the index may be silent before this process says it is cut off.
pub(crate) const STALE_AFTER: Duration = Duration::from_secs(3);

/// When the shared index last answered.
#[derive(Debug)]
pub(crate) struct Contact {
    /// Whether the index is shared at all (`false`: always current).
    shared: bool,
    started: Instant,
    /// Milliseconds after `started` of the last answer.
    last: AtomicU64,
    /// Whether a probe is out now.
    probing: AtomicBool,
}

impl Contact {
    pub(crate) fn new(shared: bool) -> Self {
        Self {
            shared,
            started: Instant::now(),
            last: AtomicU64::new(0),
            probing: AtomicBool::new(false),
        }
    }

    /// Notes that the index answered now.
    pub(crate) fn answered(&self) {
        let elapsed = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last.fetch_max(elapsed, Ordering::Relaxed);
    }

    /// How long the index has been silent (`None` for a single-process index).
    pub(crate) fn silent_for(&self) -> Option<Duration> {
        if !self.shared {
            return None;
        }
        let last = Duration::from_millis(self.last.load(Ordering::Relaxed));
        Some(self.started.elapsed().saturating_sub(last))
    }

    /// Whether what this process keeps from the index can be taken as current.
    pub(crate) fn current(&self) -> bool {
        self.silent_for().is_none_or(|silent| silent <= STALE_AFTER)
    }

    /// Claims the one probe that may be out; `false` while another is.
    pub(crate) fn begin_probe(&self) -> bool {
        !self.probing.swap(true, Ordering::AcqRel)
    }

    /// Ends the probe [`Contact::begin_probe`] claimed.
    pub(crate) fn end_probe(&self) {
        self.probing.store(false, Ordering::Release);
    }
}
