//! The state every handler shares (`AppState`: the store, the admin token's hash, transport
//! limits, idempotent requests in flight, open event streams) and how `weft serve` makes it
//! from its configuration. A leaf of `http`: the handlers and layers import it, and it
//! imports none of them (only `streams`, the stream counter it holds).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use weft_storage::Store;

use super::streams::Streams;
use crate::config::Config;
use crate::telemetry::metrics;

/// Shared state of every handler. Cheap to clone: one reference count, since every
/// extractor of every request clones it (eight counts each time cost a renewal about 1 % of
/// the server's CPU, issue #44); its fields read through `Deref`.
#[derive(Clone, Debug)]
pub struct AppState(Arc<Shared>);

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

/// What [`AppState`] shares.
#[derive(Debug)]
pub struct Shared {
    pub store: Store,
    /// blake3 of the admin token; the token itself is only on disk (mode 0600).
    pub admin_token_hash: blake3::Hash,
    pub limits: Arc<Limits>,
    /// Idempotent requests in flight, by (caller, key).
    pub in_flight: Arc<InFlight>,
    /// Event streams open per session and per Agent.
    pub(crate) streams: Arc<Streams>,
    /// Whether `X-Forwarded-Proto` / `Forwarded` come from a trusted TLS proxy.
    pub trust_forwarded_proto: bool,
    /// How far each Group's chain was verified for the event log page's badge.
    pub(crate) chains: Arc<ChainCache>,
    /// The names of the witnesses that cosign the checkpoints (`--witness`): the checkpoint
    /// route then serves the tree most of them cosigned.
    pub witnesses: Arc<Vec<String>>,
}

/// Transport limits the handlers apply themselves.
#[derive(Clone, Debug)]
pub struct Limits {
    pub body_idle_timeout: Duration,
    pub request_timeout: Duration,
    pub max_upload_bytes: u64,
}

impl AppState {
    pub fn new(store: Store, admin_token: &str, config: &Config) -> Self {
        // Install the recorder before the first request counts anything.
        metrics();
        Self(Arc::new(Shared {
            store,
            admin_token_hash: blake3::hash(admin_token.as_bytes()),
            limits: Arc::new(Limits {
                body_idle_timeout: config.body_idle_timeout(),
                request_timeout: config.request_timeout(),
                max_upload_bytes: config.max_upload_bytes,
            }),
            in_flight: Arc::default(),
            streams: Arc::new(Streams::new(
                config.max_streams_per_session,
                config.max_streams_per_agent,
            )),
            trust_forwarded_proto: config.trust_forwarded_proto,
            chains: Arc::default(),
            witnesses: Arc::new(
                config
                    .witnesses
                    .iter()
                    .map(|w| w.key.name.clone())
                    .collect(),
            ),
        }))
    }
}

/// Per Group, the newest Event already found linked and intact: (sequence, hash).
#[derive(Debug, Default)]
pub(crate) struct ChainCache(Mutex<HashMap<String, (u64, weft_api::event::EventHash)>>);

impl ChainCache {
    pub(crate) fn get(&self, group: &str) -> Option<(u64, weft_api::event::EventHash)> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .get(group)
            .copied()
    }

    pub(crate) fn put(&self, group: &str, verified: (u64, weft_api::event::EventHash)) {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .insert(group.to_owned(), verified);
    }
}

/// One lock per (caller scope, key).
type KeyLocks = HashMap<(String, String), Arc<tokio::sync::Mutex<()>>>;

/// Per-(scope, key) locks of requests in flight (`idempotency` queues on them), and the
/// size at which the map is next swept of locks no request holds.
#[derive(Debug, Default)]
pub struct InFlight(Mutex<(KeyLocks, usize)>);

/// The fewest locks the map sweeps at.
const SWEEP_AT_LEAST: usize = 64;

impl InFlight {
    /// The lock of `(scope, key)`, made on first use. Locks no request holds are dropped
    /// when the map has doubled since its last sweep: a sweep walks the whole map, so one on
    /// every call cost each request the number of keys in flight (quadratic under a flood).
    pub(super) fn lock_for(&self, scope: &str, key: &str) -> Arc<tokio::sync::Mutex<()>> {
        // Short critical section, no await inside.
        let mut guard = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let (map, sweep_at) = &mut *guard;
        if map.len() >= (*sweep_at).max(SWEEP_AT_LEAST) {
            map.retain(|_, lock| Arc::strong_count(lock) > 1);
            *sweep_at = map.len() * 2;
        }
        Arc::clone(map.entry((scope.to_owned(), key.to_owned())).or_default())
    }

    /// How many locks the map holds now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).0.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locks_no_request_holds_are_swept_and_held_ones_kept() {
        let in_flight = InFlight::default();
        let held = in_flight.lock_for("agent:w1", "kept");
        for n in 0..10_000 {
            drop(in_flight.lock_for("agent:w1", &format!("k-{n}")));
            assert!(
                in_flight.len() <= 2 * SWEEP_AT_LEAST,
                "{n}: {}",
                in_flight.len()
            );
        }
        // The held lock survived every sweep: the same one is handed out again.
        assert!(Arc::ptr_eq(&held, &in_flight.lock_for("agent:w1", "kept")));
        // Many held at once: all kept, the map grows with them.
        let many: Vec<_> = (0..1_000)
            .map(|n| in_flight.lock_for("agent:w2", &format!("h-{n}")))
            .collect();
        assert!(in_flight.len() >= 1_000);
        drop(many);
        for n in 0..4_000 {
            drop(in_flight.lock_for("agent:w3", &format!("z-{n}")));
        }
        assert!(
            in_flight.len() <= 4 * 1_000,
            "swept again: {}",
            in_flight.len()
        );
    }
}
