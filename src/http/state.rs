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

/// Per-(scope, key) locks of requests in flight (`idempotency` queues on them).
#[derive(Debug, Default)]
pub struct InFlight(Mutex<KeyLocks>);

impl InFlight {
    /// The lock of `(scope, key)`, made on first use; locks no request holds are dropped.
    pub(super) fn lock_for(&self, scope: &str, key: &str) -> Arc<tokio::sync::Mutex<()>> {
        // Short critical section, no await inside.
        let mut map = self.0.lock().unwrap_or_else(|p| p.into_inner());
        map.retain(|_, lock| Arc::strong_count(lock) > 1);
        Arc::clone(map.entry((scope.to_owned(), key.to_owned())).or_default())
    }
}
