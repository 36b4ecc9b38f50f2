//! How a [`crate::Store`] is opened, and the one place every default lives.
//!
//! `weft serve`'s flags (clap), the server's `Config` and [`Options`] all take their defaults
//! from [`defaults`], so a default is changed in one line.

use std::sync::Arc;

use crate::blobs::Backend;
use crate::clock::{Clock, SystemClock};
use crate::db::Location;
use crate::faults::Faults;

/// Every default of the engine and the server, in one place.
pub mod defaults {
    use std::time::Duration;

    /// Largest accepted upload: 64 GiB.
    pub const MAX_UPLOAD_BYTES: u64 = 64 * 1024 * 1024 * 1024;
    /// Blobs up to this size live in the index database, written with their row (issue #15).
    pub const INLINE_BLOB_BYTES: u64 = 64 * 1024;
    /// Large uploads are written with `O_DIRECT` past their first part (`blobs/staging.rs`):
    /// off, because a blob read soon after its upload (the review after a submission re-hashes
    /// what was submitted) then comes from the disk; on, an upload costs about a tenth less CPU
    /// and leaves the page cache to what is read.
    pub const DIRECT_WRITES: bool = false;
    /// Bytes of small blobs kept in memory for reads (`engine/hot.rs`).
    pub const HOT_BLOB_BYTES: u64 = 64 * 1024 * 1024;
    /// Hours a session token stays valid.
    pub const SESSION_HOURS: i64 = 12;
    /// Seconds a client may take to send a request's headers (slowloris guard).
    pub const HEADER_TIMEOUT_SECS: u64 = 10;
    /// Seconds an upload body may stall between two chunks.
    pub const BODY_IDLE_TIMEOUT_SECS: u64 = 30;
    /// Seconds a JSON request may take in all.
    pub const REQUEST_TIMEOUT_SECS: u64 = 30;
    /// Seconds between compaction passes when a retention window is set.
    pub const COMPACTION_INTERVAL_SECS: u64 = 10;
    /// How long a lineage walk may run on the calling (async) thread.
    pub const LINEAGE_INLINE_BUDGET: Duration = Duration::from_millis(5);
    /// Uploads one Agent may run at once (more answer `429 too_many_uploads`).
    pub const MAX_UPLOADS_PER_AGENT: usize = 8;
    /// Uploads the process runs at once, all Agents together (more answer `503 overloaded`).
    /// Each holds a socket and a staging file; `weft serve` lowers this to a quarter of the
    /// descriptor limit if that is smaller.
    pub const MAX_OPEN_UPLOADS: usize = 512;
    /// Downloads of stored files one Agent may have open at once (more answer
    /// `429 too_many_downloads`). Small artifacts answered from memory or their row are not
    /// counted: they hold nothing once answered.
    pub const MAX_DOWNLOADS_PER_AGENT: usize = 32;
    /// Downloads of stored files the sessions of one Group may have open at once (more answer
    /// `429 too_many_downloads`): half the process's, so no one Group takes them all.
    pub const MAX_DOWNLOADS_PER_GROUP: usize = 128;
    /// Downloads of stored files open at once, all readers together (more answer
    /// `503 overloaded`). Each holds a file and what it read ahead of its client: 2 MiB for a
    /// whole content GET, a 4 MiB window for a Range, up to 8 MiB for a snapshot blob, so this
    /// bounds that memory to 0.5–2 GiB; `weft serve` lowers it to a quarter of the descriptor
    /// limit if that is smaller. A body not polled for the body idle timeout is cut and gives
    /// its slot back (`downloads.rs`).
    pub const MAX_OPEN_DOWNLOADS: usize = 256;
    /// Bytes one Agent may hold uploaded but not yet cited by a manifest, Evidence, schema or
    /// snapshot (more answer `429 upload_quota_exceeded`): two of the largest uploads.
    pub const MAX_UNPUBLISHED_BYTES: u64 = 2 * MAX_UPLOAD_BYTES;
    /// Seconds an uploaded blob may stay uncited before the sweep removes it: 24 h.
    pub const UNPUBLISHED_BLOB_TTL_SECS: u64 = 24 * 60 * 60;
    /// Seconds between two sweeps of uncited blobs and spent session nonces.
    pub const SWEEP_INTERVAL_SECS: u64 = 60;
    /// Days the answers of Commands and idempotent requests are kept for retries (issue #46).
    pub const ANSWER_HORIZON_DAYS: u64 = 30;
    /// Collection's pause after each batch, as a multiple of the batch's time (issue #46).
    pub const GC_PAUSE_RATIO: u32 = 8;
    /// Seconds between two collections of what retention policies let go (issue #46).
    pub const GC_INTERVAL_SECS: u64 = 15 * 60;
    /// Seconds between two snapshots of the lineage index (`Store::save_lineage_snapshot`;
    /// one is also written at clean shutdown). A crash costs a restart the catch-up of the
    /// publications since the last one, read from the tables.
    pub const LINEAGE_SNAPSHOT_INTERVAL_SECS: u64 = 300;
    /// Session requests one Agent may make per minute (a token bucket of this size).
    pub const LOGINS_PER_MINUTE: u32 = 10;
    /// Commands one Agent may send per minute: a burst of this many, then this many a minute.
    pub const COMMANDS_PER_MINUTE: u32 = 300;
    /// Proposals (`work.propose`) one Group may hold open, not yet authorized.
    pub const MAX_OPEN_PROPOSALS: u64 = 1000;
    /// Chunks one resumable upload may take: its chunks are read back (on S3, a listing of one
    /// object each) whole at its finish, so their number is bounded, not only their bytes.
    /// 10,000 chunks of the client's 8 MiB default are 80 GiB.
    pub const MAX_UPLOAD_CHUNKS: u64 = 10_000;
    /// Where `weft serve` keeps its data.
    pub const DATA_DIR: &str = "weft-data";
    /// Where `weft serve` listens.
    pub const LISTEN: &str = "127.0.0.1:7070";
}

/// How to open a [`Store`]. The server builds this from its configuration.
#[derive(Clone, Debug)]
pub struct Options {
    pub blobs: Backend,
    pub index: Location,
    pub clock: Arc<dyn Clock>,
    /// Largest accepted upload, in bytes, enforced on the stream.
    pub max_upload_bytes: u64,
    /// Uploads up to this many bytes are stored inline in the index, in the transaction of
    /// their row; larger ones as files. May change between restarts: a blob is read from
    /// wherever it was stored.
    pub inline_blob_bytes: u64,
    /// Write large uploads with `O_DIRECT` past their first part, where the file system
    /// takes it (see [`defaults::DIRECT_WRITES`]).
    pub direct_writes: bool,
    /// Bytes of small (inline-sized) blobs kept in memory for content reads, least recently
    /// used out first; 0 turns the cache off. Every read is still verified.
    pub hot_blob_bytes: u64,
    /// How long a session token stays valid.
    pub session_ttl: chrono::Duration,
    /// The server's own signing key: it signs the built-in reviewer's Evidence (and, later,
    /// exports, snapshots and checkpoints). Published at `GET /v1/authority/keys`.
    pub authority: Arc<ed25519_dalek::SigningKey>,
    /// Delete crash leftovers on open: everything in `staging/`, and blob files with no index
    /// row. Only the server does this; an offline tool such as fsck must not touch uploads a
    /// running server is still writing.
    pub sweep_staging: bool,
    /// Build each Group's Merkle tree on open where its log is ahead of it (a log written
    /// before schema version 31, `lifecycle/trees.rs`). Only the server does this: fsck must
    /// report a tree that is behind, not repair it first.
    pub build_trees: bool,
    /// How long a lineage walk may run on the calling (async) thread. A walk that needs more
    /// is run again on the blocking pool with its whole budget, so a huge fan-out never holds
    /// a runtime thread for long; almost every walk takes well under a millisecond. `None`:
    /// every walk goes to the blocking pool (tests use it to cover that path).
    pub lineage_inline_budget: Option<std::time::Duration>,
    /// Admission limits on uploads and logins, and how long uncited uploads are kept.
    pub quotas: Quotas,
    /// Test hooks that make a transaction or a write fail (`faults.rs`); off unless a test
    /// turns one on.
    pub faults: Faults,
}

/// Admission limits: what one Agent, and the process, may have in flight or stored unpublished.
#[derive(Clone, Copy, Debug)]
pub struct Quotas {
    /// Uploads one Agent may run at once.
    pub max_uploads_per_agent: usize,
    /// Uploads the process runs at once.
    pub max_open_uploads: usize,
    /// Bytes one Agent may hold uploaded but uncited (0: no cap).
    pub max_unpublished_bytes: u64,
    /// How long an uploaded blob may stay uncited before [`crate::handles::Artifacts::sweep`]
    /// removes it.
    pub unpublished_blob_ttl: chrono::Duration,
    /// How long the answers of Commands and idempotent requests are kept for a retry (issue
    /// #46): an older retry is answered `command_expired`, never done again.
    pub answer_horizon: chrono::Duration,
    /// How long collection leaves the writer to others after each batch, as a multiple of
    /// the batch's own time (8: collection takes at most a ninth of it; 0: no pause).
    pub collection_pause_ratio: u32,
    /// Session requests one Agent may make per minute (0: no limit).
    pub logins_per_minute: u32,
    /// Commands one Agent may send per minute (0: no limit).
    pub commands_per_minute: u32,
    /// Proposals one Group may hold open, not yet authorized (0: no cap).
    pub max_open_proposals: u64,
    /// Chunks one resumable upload may take (at least 1).
    pub max_upload_chunks: u64,
    /// Downloads of stored files one Agent may have open at once.
    pub max_downloads_per_agent: usize,
    /// Downloads of stored files one Group's sessions may have open at once.
    pub max_downloads_per_group: usize,
    /// Downloads of stored files the process has open at once.
    pub max_open_downloads: usize,
    /// How long a download's body may go without its client asking for bytes before it is
    /// cut and its slot freed (the body idle timeout).
    pub download_idle: std::time::Duration,
}

impl Default for Quotas {
    fn default() -> Self {
        Self {
            max_uploads_per_agent: defaults::MAX_UPLOADS_PER_AGENT,
            max_open_uploads: defaults::MAX_OPEN_UPLOADS,
            max_unpublished_bytes: defaults::MAX_UNPUBLISHED_BYTES,
            unpublished_blob_ttl: chrono::Duration::seconds(
                defaults::UNPUBLISHED_BLOB_TTL_SECS as i64,
            ),
            answer_horizon: chrono::Duration::days(defaults::ANSWER_HORIZON_DAYS as i64),
            collection_pause_ratio: defaults::GC_PAUSE_RATIO,
            logins_per_minute: defaults::LOGINS_PER_MINUTE,
            commands_per_minute: defaults::COMMANDS_PER_MINUTE,
            max_open_proposals: defaults::MAX_OPEN_PROPOSALS,
            max_upload_chunks: defaults::MAX_UPLOAD_CHUNKS,
            max_downloads_per_agent: defaults::MAX_DOWNLOADS_PER_AGENT,
            max_downloads_per_group: defaults::MAX_DOWNLOADS_PER_GROUP,
            max_open_downloads: defaults::MAX_OPEN_DOWNLOADS,
            download_idle: std::time::Duration::from_secs(defaults::BODY_IDLE_TIMEOUT_SECS),
        }
    }
}

impl Options {
    /// Everything under `data_dir`: `index.sqlite` and `blobs/`.
    pub fn on_disk(data_dir: &std::path::Path) -> Self {
        Self {
            blobs: Backend::Local(data_dir.to_path_buf()),
            index: Location::File(data_dir.join("index.sqlite")),
            clock: Arc::new(SystemClock),
            max_upload_bytes: defaults::MAX_UPLOAD_BYTES,
            inline_blob_bytes: defaults::INLINE_BLOB_BYTES,
            direct_writes: defaults::DIRECT_WRITES,
            hot_blob_bytes: defaults::HOT_BLOB_BYTES,
            session_ttl: chrono::Duration::hours(defaults::SESSION_HOURS),
            sweep_staging: true,
            build_trees: true,
            authority: Arc::new(weft_api::dsse::generate_key()),
            lineage_inline_budget: Some(defaults::LINEAGE_INLINE_BUDGET),
            quotas: Quotas::default(),
            faults: Faults::default(),
        }
    }

    /// Everything in memory, for tests.
    pub fn in_memory() -> Self {
        Self {
            blobs: Backend::Memory,
            index: Location::Memory,
            clock: Arc::new(SystemClock),
            max_upload_bytes: defaults::MAX_UPLOAD_BYTES,
            inline_blob_bytes: defaults::INLINE_BLOB_BYTES,
            direct_writes: defaults::DIRECT_WRITES,
            hot_blob_bytes: defaults::HOT_BLOB_BYTES,
            session_ttl: chrono::Duration::hours(defaults::SESSION_HOURS),
            sweep_staging: true,
            build_trees: true,
            authority: Arc::new(weft_api::dsse::generate_key()),
            lineage_inline_budget: Some(defaults::LINEAGE_INLINE_BUDGET),
            quotas: Quotas::default(),
            faults: Faults::default(),
        }
    }
}
