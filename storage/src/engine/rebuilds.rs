//! The outboard rebuilds under way (`content/rebuild.rs` runs them, issue #15): one per
//! blob at a time, its outcome shared by every request that waits for it, and a bound on how
//! many run at once. Each runs as a task of its own, so a request that goes away does not
//! stop it.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use futures::FutureExt as _;
use futures::future::{BoxFuture, Shared};
use weft_api::ArtifactId;

use crate::error::Error;

/// What a rebuild came to: `Ok(true)`, the outboard is in place (or its blob was removed
/// meanwhile, and nothing was placed); `Ok(false)`, the bytes do not hash to their address
/// and the blob is quarantined; or why it could not be done.
pub(crate) type Rebuilt = Result<bool, Error>;

/// A rebuild's outcome, for everyone who waits for it.
pub(crate) type Outcome = Shared<BoxFuture<'static, Rebuilt>>;

/// Rebuilds that run at once, whatever the number of blobs that need one: each is a full read
/// and a blocking thread hashing it.
const AT_ONCE: usize = 2;

/// The rebuilds under way, by blob, each one's outcome shared by everyone waiting for it; and
/// the slots that bound how many run at once. Cheap to clone (`Arc` inside).
#[derive(Clone)]
pub(crate) struct Rebuilds(Arc<Inner>);

struct Inner {
    under_way: Mutex<HashMap<ArtifactId, Flight>>,
    started: std::sync::atomic::AtomicU64,
    slots: tokio::sync::Semaphore,
}

/// One rebuild under way: which it is (an entry is removed only by its own rebuild) and its
/// outcome.
struct Flight {
    number: u64,
    outcome: Outcome,
}

impl Default for Rebuilds {
    fn default() -> Self {
        Self(Arc::new(Inner {
            under_way: Mutex::default(),
            started: Default::default(),
            slots: tokio::sync::Semaphore::new(AT_ONCE),
        }))
    }
}

impl std::fmt::Debug for Rebuilds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let under_way = self.0.under_way.lock().map(|map| map.len()).unwrap_or(0);
        f.debug_struct("Rebuilds")
            .field("under_way", &under_way)
            .finish()
    }
}

/// Forgets its rebuild's entry however the rebuild's task ends (its end, a panic, the
/// runtime dropping it), so a later need starts a new one and nobody waits on a dead one.
struct Ending {
    rebuilds: Rebuilds,
    id: ArtifactId,
    number: u64,
}

impl Drop for Ending {
    fn drop(&mut self) {
        let mut under_way = self.rebuilds.lock();
        if under_way.get(&self.id).map(|flight| flight.number) == Some(self.number) {
            under_way.remove(&self.id);
        }
    }
}

impl Rebuilds {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ArtifactId, Flight>> {
        self.0.under_way.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The outcome of the rebuild of `id` under way, or of a new one running `work()` as a
    /// task of its own (once a slot is free), whether or not anyone awaits it.
    pub(crate) fn run<F>(&self, id: ArtifactId, work: impl FnOnce() -> F) -> Outcome
    where
        F: Future<Output = Rebuilt> + Send + 'static,
    {
        let (sender, receiver) = tokio::sync::oneshot::channel();
        let (ending, outcome) = {
            let mut under_way = self.lock();
            if let Some(flight) = under_way.get(&id) {
                return flight.outcome.clone();
            }
            let number = self.0.started.fetch_add(1, Ordering::Relaxed);
            let outcome = receiver
                .map(|sent: Result<Rebuilt, _>| {
                    sent.unwrap_or_else(|_| {
                        Err(Error::backend(std::io::Error::other(
                            "the outboard's rebuild ended without an outcome",
                        )))
                    })
                })
                .boxed()
                .shared();
            under_way.insert(
                id,
                Flight {
                    number,
                    outcome: outcome.clone(),
                },
            );
            let ending = Ending {
                rebuilds: self.clone(),
                id,
                number,
            };
            (ending, outcome)
        };
        // Spawned with the lock released: a task the runtime drops at once drops `ending`,
        // which takes the lock. A task that panics drops `sender` too: its waiters hear so.
        let (work, inner) = (work(), Arc::clone(&self.0));
        tokio::spawn(async move {
            let _slot = inner.slots.acquire().await;
            let rebuilt = work.await;
            drop(ending);
            let _ = sender.send(rebuilt);
        });
        outcome
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use super::*;

    /// A gate the test opens, and a count of the rebuilds that got past their slot.
    struct Gated {
        started: Arc<AtomicUsize>,
        gate: Shared<tokio::sync::oneshot::Receiver<()>>,
    }

    impl Gated {
        fn new() -> (Self, tokio::sync::oneshot::Sender<()>) {
            let (open, gate) = tokio::sync::oneshot::channel();
            let started = Arc::default();
            (
                Self {
                    started,
                    gate: gate.shared(),
                },
                open,
            )
        }

        /// A rebuild's work: counted once it runs, done once the gate opens.
        fn work(&self) -> impl Future<Output = Rebuilt> + Send + 'static {
            let (started, gate) = (Arc::clone(&self.started), self.gate.clone());
            async move {
                started.fetch_add(1, Ordering::SeqCst);
                let _ = gate.await;
                Ok(true)
            }
        }

        fn started(&self) -> usize {
            self.started.load(Ordering::SeqCst)
        }
    }

    /// Until the spawned tasks have run as far as they can.
    async fn settle() {
        for _ in 0..50 {
            tokio::task::yield_now().await;
        }
    }

    /// Everyone who needs a blob's outboard while its rebuild runs waits for that one rebuild
    /// and hears its outcome; once it has ended, the next need starts a new one.
    #[tokio::test]
    async fn one_rebuild_per_blob_at_a_time_shared_by_everyone_waiting() {
        let rebuilds = Rebuilds::default();
        let id = ArtifactId([7; 32]);
        let (gated, open) = Gated::new();
        let first = rebuilds.run(id, || gated.work());
        let second = rebuilds.run(id, || gated.work());
        settle().await;
        assert_eq!(gated.started(), 1, "one rebuild for two waiters");
        open.send(()).expect("still waiting");
        assert!(matches!(first.await, Ok(true)));
        assert!(matches!(second.await, Ok(true)));
        let again = rebuilds.run(id, || gated.work());
        assert!(matches!(again.await, Ok(true)));
        assert_eq!(gated.started(), 2, "a need after the end, a new rebuild");
    }

    /// A rebuild that panics tells its waiters so (no one waits forever) and leaves no entry
    /// behind that would answer every later need with its failure.
    #[tokio::test]
    async fn a_rebuild_that_panics_fails_its_waiters_and_is_forgotten() {
        let rebuilds = Rebuilds::default();
        let id = ArtifactId([9; 32]);
        let panicking = rebuilds.run(id, || async { panic!("a rebuild's bug") });
        let code = panicking.await.map_err(|error| error.code()).err();
        assert_eq!(code, Some(weft_api::ErrorCode::Internal));
        let after = rebuilds.run(id, || async { Ok(true) });
        assert!(
            matches!(after.await, Ok(true)),
            "a new rebuild, not the failure"
        );
    }

    /// At most [`AT_ONCE`] rebuilds run at once, however many blobs need one.
    #[tokio::test]
    async fn rebuilds_of_many_blobs_take_turns() {
        let rebuilds = Rebuilds::default();
        let (gated, open) = Gated::new();
        let outcomes: Vec<Outcome> = (0..AT_ONCE as u8 + 2)
            .map(|i| rebuilds.run(ArtifactId([i; 32]), || gated.work()))
            .collect();
        settle().await;
        assert_eq!(gated.started(), AT_ONCE);
        open.send(()).expect("still waiting");
        for outcome in outcomes {
            assert!(matches!(outcome.await, Ok(true)));
        }
        assert_eq!(gated.started(), AT_ONCE + 2);
    }
}
