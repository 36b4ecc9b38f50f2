//! Server configuration: flags with environment fallbacks, validated once, then turned into
//! `weft_storage::Options`. The engine never sees this type.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use weft_storage::{Backend, Location, Options, SystemClock, defaults};

/// Event streams per session: a client needs one per Group it follows, a few for reconnects
/// overlapping their predecessors. Transport settings, so here rather than in storage.
pub const DEFAULT_MAX_STREAMS_PER_SESSION: usize = 8;
/// Event streams per Agent, over all its sessions (one per Group).
pub const DEFAULT_MAX_STREAMS_PER_AGENT: usize = 32;
/// Connections `weft serve` keeps open at once unless the open-file limit allows fewer
/// (`connections` applies it).
pub const DEFAULT_MAX_CONNECTIONS: usize = 4096;

/// `weft serve` flags.
#[derive(Clone, Debug, clap::Args)]
pub struct Config {
    /// Directory holding `index.sqlite`, `blobs/`, `staging/` and `admin.token`.
    #[arg(long, env = "WEFT_DATA_DIR", default_value = defaults::DATA_DIR)]
    pub data_dir: PathBuf,
    /// Address to listen on; `127.0.0.1:0` picks a free port.
    #[arg(long, env = "WEFT_LISTEN", default_value = defaults::LISTEN)]
    pub listen: SocketAddr,
    /// Keep blobs in an S3-compatible store instead of `DATA_DIR/blobs`:
    /// `s3://BUCKET[/PREFIX]?endpoint=http://127.0.0.1:3900&region=garage` (no endpoint: AWS
    /// S3). The index stays in DATA_DIR. Credentials come from AWS_ACCESS_KEY_ID and
    /// AWS_SECRET_ACCESS_KEY, or the shared credentials file (--s3-credentials-file,
    /// AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials), never from this flag.
    #[arg(long, env = "WEFT_BLOBS", value_parser = parse_blobs)]
    pub blobs: Option<weft_storage::S3Location>,
    /// A credentials file in the AWS shared format (`[default]`, `aws_access_key_id = …`,
    /// `aws_secret_access_key = …`) for `--blobs s3://…`.
    #[arg(long, env = "WEFT_S3_CREDENTIALS_FILE")]
    pub s3_credentials_file: Option<PathBuf>,
    /// Keep the index and the Group logs in PostgreSQL instead of `DATA_DIR/index.sqlite`:
    /// `postgres://USER[:PASSWORD]@HOST:PORT/DATABASE` (the schema is created on first use;
    /// several servers may share one database).
    #[arg(long, env = "WEFT_INDEX", value_parser = parse_index)]
    pub index: Option<String>,
    /// Keep blobs and the index in memory (tests and demos; nothing survives a restart).
    #[arg(long, env = "WEFT_IN_MEMORY")]
    pub in_memory: bool,
    /// Largest accepted upload, enforced on the stream: bytes, or a size such as `64GiB`,
    /// `500MiB` or `2GB` (binary and decimal units).
    #[arg(long, env = "WEFT_MAX_UPLOAD_BYTES", default_value = "64GiB", value_parser = parse_size)]
    pub max_upload_bytes: u64,
    /// Uploads up to this size are stored inline in the index database, durable with their
    /// row in one group commit (bytes or a size such as 64KiB; 0: every blob is a file).
    #[arg(long, env = "WEFT_INLINE_BLOB_BYTES", default_value = "64KiB", value_parser = parse_size)]
    pub inline_blob_bytes: u64,
    /// Write large uploads past their first 2 MiB with O_DIRECT, not through the page cache,
    /// where the file system takes it: about a tenth less CPU per upload, but a blob read
    /// soon after its upload (the review after a submission re-hashes it) comes from the disk.
    #[arg(long, env = "WEFT_DIRECT_WRITES", default_value_t = defaults::DIRECT_WRITES)]
    pub direct_writes: bool,
    /// Memory for the bytes of small (inline-sized) artifacts read or uploaded recently, so
    /// their reads need no index read; every read is still verified (0: off).
    #[arg(long, env = "WEFT_HOT_BLOB_BYTES", default_value = "64MiB", value_parser = parse_size)]
    pub hot_blob_bytes: u64,
    /// Seconds a client may take to send its first byte and then a request's headers
    /// (idle connections, slowloris).
    #[arg(long, env = "WEFT_HEADER_TIMEOUT", default_value_t = defaults::HEADER_TIMEOUT_SECS)]
    pub header_timeout_secs: u64,
    /// Connections served at once (at most what the open-file limit allows with a reserve);
    /// past it `GET /healthz` is still answered and anything else gets 503 `overloaded`.
    #[arg(long, env = "WEFT_MAX_CONNECTIONS", default_value_t = DEFAULT_MAX_CONNECTIONS)]
    pub max_connections: usize,
    /// Seconds an upload body may stall between two chunks before it is cut; also how long
    /// a client may take no bytes while the server waits to send before its connection is
    /// closed (a stalled download).
    #[arg(long, env = "WEFT_BODY_IDLE_TIMEOUT", default_value_t = defaults::BODY_IDLE_TIMEOUT_SECS)]
    pub body_idle_timeout_secs: u64,
    /// Seconds a JSON request (not a blob transfer) may take in all.
    #[arg(long, env = "WEFT_REQUEST_TIMEOUT", default_value_t = defaults::REQUEST_TIMEOUT_SECS)]
    pub request_timeout_secs: u64,
    /// Keep only the newest N Events per Group online; older ones are compacted into a signed
    /// snapshot and an archive artifact (nothing is deleted). Unset: keep every Event online.
    #[arg(long, env = "WEFT_RETAIN_EVENTS")]
    pub retain_events: Option<u64>,
    /// Keep Events younger than this many seconds online (with --retain-events too, an Event
    /// stays if either setting keeps it).
    #[arg(long, env = "WEFT_RETAIN_SECONDS")]
    pub retain_seconds: Option<u64>,
    /// A witness that cosigns each Group's transparency-log checkpoints (issue #45), as
    /// `URL=VKEY`: the witness's URL prefix (its `add-checkpoint` is under it) and its
    /// cosignature verifier key (`name+id+base64`, what `weft witness` prints). Repeatable.
    /// With witnesses, `GET /v1/groups/{g}/tlog/checkpoint` serves the newest cosigned tree.
    #[arg(long = "witness", env = "WEFT_WITNESSES", value_delimiter = ' ', value_parser = parse_witness)]
    pub witnesses: Vec<Witness>,
    /// Milliseconds between pushes of each grown Group's checkpoint to the witnesses.
    #[arg(long, env = "WEFT_WITNESS_INTERVAL_MS", default_value_t = 1000)]
    pub witness_interval_ms: u64,
    /// Seconds between compaction passes when a retention window is set.
    #[arg(long, env = "WEFT_COMPACTION_INTERVAL", default_value_t = defaults::COMPACTION_INTERVAL_SECS)]
    pub compaction_interval_secs: u64,
    /// Hours a session token stays valid.
    #[arg(long, env = "WEFT_SESSION_HOURS", default_value_t = defaults::SESSION_HOURS)]
    pub session_hours: i64,
    /// Uploads one Agent may run at once; more answer 429 with Retry-After.
    #[arg(long, env = "WEFT_MAX_UPLOADS_PER_AGENT", default_value_t = defaults::MAX_UPLOADS_PER_AGENT)]
    pub max_uploads_per_agent: usize,
    /// Uploads the server runs at once; more answer 503 with Retry-After.
    #[arg(long, env = "WEFT_MAX_OPEN_UPLOADS", default_value_t = defaults::MAX_OPEN_UPLOADS)]
    pub max_open_uploads: usize,
    /// Bytes one Agent may hold uploaded but not yet cited by a manifest or Evidence (0: no cap).
    #[arg(long, env = "WEFT_MAX_UNPUBLISHED_BYTES", default_value_t = defaults::MAX_UNPUBLISHED_BYTES)]
    pub max_unpublished_bytes: u64,
    /// Seconds an uncited upload is kept before the sweep removes it.
    #[arg(long, env = "WEFT_UNPUBLISHED_BLOB_TTL", default_value_t = defaults::UNPUBLISHED_BLOB_TTL_SECS)]
    pub unpublished_blob_ttl_secs: u64,
    /// Seconds between sweeps of uncited uploads and spent session nonces.
    #[arg(long, env = "WEFT_SWEEP_INTERVAL", default_value_t = defaults::SWEEP_INTERVAL_SECS)]
    pub sweep_interval_secs: u64,
    /// Seconds between collections of the bytes retention policies let go (issue #46;
    /// 0: only `weft admin gc`). Each runs in batches of 256 blobs, so uploads wait at most one.
    #[arg(long, env = "WEFT_GC_INTERVAL", default_value_t = defaults::GC_INTERVAL_SECS)]
    pub gc_interval_secs: u64,
    /// Days the answers of Commands and idempotent requests are kept for retries; an older
    /// retry is answered 409 `command_expired`, never done again (trimmed with each collection).
    #[arg(long, env = "WEFT_ANSWER_HORIZON_DAYS", default_value_t = defaults::ANSWER_HORIZON_DAYS)]
    pub answer_horizon_days: u64,
    /// After each batch of 256 blobs, collection leaves the writer to other work for this many
    /// times the batch's own time (8: it takes at most a ninth; 0: as fast as it can).
    #[arg(long, env = "WEFT_GC_PAUSE_RATIO", default_value_t = defaults::GC_PAUSE_RATIO)]
    pub gc_pause_ratio: u32,
    /// Session requests one Agent may make per minute (0: no limit).
    #[arg(long, env = "WEFT_LOGINS_PER_MINUTE", default_value_t = defaults::LOGINS_PER_MINUTE)]
    pub logins_per_minute: u32,
    /// Commands one Agent may send per minute (0: no limit); more answer 429 with Retry-After.
    #[arg(long, env = "WEFT_COMMANDS_PER_MINUTE", default_value_t = defaults::COMMANDS_PER_MINUTE)]
    pub commands_per_minute: u32,
    /// Proposals one Group may hold open, not yet authorized (0: no cap); more answer 409
    /// `quota_exceeded`.
    #[arg(long, env = "WEFT_MAX_OPEN_PROPOSALS", default_value_t = defaults::MAX_OPEN_PROPOSALS)]
    pub max_open_proposals: u64,
    /// Chunks one resumable upload may take (at least 1); one more answers 400: a finish
    /// lists every chunk, so their number is bounded, not only their bytes.
    #[arg(long, env = "WEFT_MAX_UPLOAD_CHUNKS", default_value_t = defaults::MAX_UPLOAD_CHUNKS)]
    pub max_upload_chunks: u64,
    /// Downloads of stored files one Agent may have open at once; more answer 429 with
    /// Retry-After (small artifacts answered from memory are not counted).
    #[arg(long, env = "WEFT_MAX_DOWNLOADS_PER_AGENT", default_value_t = defaults::MAX_DOWNLOADS_PER_AGENT)]
    pub max_downloads_per_agent: usize,
    /// Downloads of stored files one Group's sessions may have open at once; more answer 429
    /// with Retry-After.
    #[arg(long, env = "WEFT_MAX_DOWNLOADS_PER_GROUP", default_value_t = defaults::MAX_DOWNLOADS_PER_GROUP)]
    pub max_downloads_per_group: usize,
    /// Trust `X-Forwarded-Proto` / `Forwarded: proto=` from a TLS-terminating proxy in front:
    /// the console's cookie is then `Secure` when the browser spoke HTTPS. Off by default,
    /// since without such a proxy any client could send the header.
    #[arg(long, env = "WEFT_TRUST_FORWARDED_PROTO")]
    pub trust_forwarded_proto: bool,
    /// Event streams one session may hold open at once; more answer 429 with Retry-After.
    #[arg(long, env = "WEFT_MAX_STREAMS_PER_SESSION", default_value_t = DEFAULT_MAX_STREAMS_PER_SESSION)]
    pub max_streams_per_session: usize,
    /// Event streams one Agent may hold open at once, over all its sessions.
    #[arg(long, env = "WEFT_MAX_STREAMS_PER_AGENT", default_value_t = DEFAULT_MAX_STREAMS_PER_AGENT)]
    pub max_streams_per_agent: usize,
    /// Downloads of stored files the server has open at once; more answer 503 with Retry-After.
    #[arg(long, env = "WEFT_MAX_OPEN_DOWNLOADS", default_value_t = defaults::MAX_OPEN_DOWNLOADS)]
    pub max_open_downloads: usize,
}

/// A size in bytes as a person writes it: `65536`, `64KiB`, `64 GiB`, `2GB`.
fn parse_size(text: &str) -> Result<u64, String> {
    text.trim()
        .parse::<bytesize::ByteSize>()
        .map(|size| size.as_u64())
        .map_err(|_| format!("`{text}` is not a size: write bytes or a number with a unit such as 64GiB, 500MiB or 2GB"))
}

impl Config {
    /// Defaults as `weft serve` would use them, rooted at `data_dir`.
    pub fn with_data_dir(data_dir: PathBuf) -> Self {
        Self {
            data_dir,
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            in_memory: false,
            index: None,
            blobs: None,
            s3_credentials_file: None,
            max_upload_bytes: defaults::MAX_UPLOAD_BYTES,
            inline_blob_bytes: defaults::INLINE_BLOB_BYTES,
            direct_writes: defaults::DIRECT_WRITES,
            hot_blob_bytes: defaults::HOT_BLOB_BYTES,
            header_timeout_secs: defaults::HEADER_TIMEOUT_SECS,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            body_idle_timeout_secs: defaults::BODY_IDLE_TIMEOUT_SECS,
            request_timeout_secs: defaults::REQUEST_TIMEOUT_SECS,
            session_hours: defaults::SESSION_HOURS,
            retain_events: None,
            retain_seconds: None,
            witnesses: Vec::new(),
            witness_interval_ms: 1000,
            compaction_interval_secs: defaults::COMPACTION_INTERVAL_SECS,
            max_uploads_per_agent: defaults::MAX_UPLOADS_PER_AGENT,
            max_open_uploads: defaults::MAX_OPEN_UPLOADS,
            max_unpublished_bytes: defaults::MAX_UNPUBLISHED_BYTES,
            unpublished_blob_ttl_secs: defaults::UNPUBLISHED_BLOB_TTL_SECS,
            sweep_interval_secs: defaults::SWEEP_INTERVAL_SECS,
            gc_interval_secs: defaults::GC_INTERVAL_SECS,
            answer_horizon_days: defaults::ANSWER_HORIZON_DAYS,
            gc_pause_ratio: defaults::GC_PAUSE_RATIO,
            logins_per_minute: defaults::LOGINS_PER_MINUTE,
            commands_per_minute: defaults::COMMANDS_PER_MINUTE,
            max_open_proposals: defaults::MAX_OPEN_PROPOSALS,
            max_upload_chunks: defaults::MAX_UPLOAD_CHUNKS,
            max_downloads_per_agent: defaults::MAX_DOWNLOADS_PER_AGENT,
            max_downloads_per_group: defaults::MAX_DOWNLOADS_PER_GROUP,
            max_open_downloads: defaults::MAX_OPEN_DOWNLOADS,
            trust_forwarded_proto: false,
            max_streams_per_session: DEFAULT_MAX_STREAMS_PER_SESSION,
            max_streams_per_agent: DEFAULT_MAX_STREAMS_PER_AGENT,
        }
    }

    /// The admission limits.
    pub fn quotas(&self) -> weft_storage::Quotas {
        weft_storage::Quotas {
            max_uploads_per_agent: self.max_uploads_per_agent.max(1),
            max_open_uploads: self.max_open_uploads.max(1),
            max_unpublished_bytes: self.max_unpublished_bytes,
            unpublished_blob_ttl: chrono::Duration::seconds(
                self.unpublished_blob_ttl_secs.min(i64::MAX as u64) as i64,
            ),
            answer_horizon: chrono::Duration::days(
                self.answer_horizon_days.clamp(1, 100 * 365) as i64
            ),
            collection_pause_ratio: self.gc_pause_ratio.min(1000),
            logins_per_minute: self.logins_per_minute,
            commands_per_minute: self.commands_per_minute,
            max_open_proposals: self.max_open_proposals,
            max_upload_chunks: self.max_upload_chunks.max(1),
            max_downloads_per_agent: self.max_downloads_per_agent.max(1),
            max_downloads_per_group: self.max_downloads_per_group.max(1),
            max_open_downloads: self.max_open_downloads.max(1),
            download_idle: self.body_idle_timeout(),
        }
    }

    pub fn sweep_interval(&self) -> Duration {
        Duration::from_secs(self.sweep_interval_secs.max(1))
    }

    pub fn header_timeout(&self) -> Duration {
        Duration::from_secs(self.header_timeout_secs.max(1))
    }
    /// At most a day: a deadline is `now + this`, which a huge value would overflow.
    pub fn body_idle_timeout(&self) -> Duration {
        Duration::from_secs(self.body_idle_timeout_secs.clamp(1, 24 * 60 * 60))
    }
    pub fn request_timeout(&self) -> Duration {
        Duration::from_secs(self.request_timeout_secs.max(1))
    }

    /// The online-log window, if any.
    pub fn retention(&self) -> Option<weft_storage::Retention> {
        let retention = weft_storage::Retention {
            events: self.retain_events,
            age: self
                .retain_seconds
                .map(|s| chrono::Duration::seconds(s.min(i64::MAX as u64) as i64)),
        };
        (retention.events.is_some() || retention.age.is_some()).then_some(retention)
    }

    /// The engine's options.
    pub fn storage_options(&self) -> Options {
        let (blobs, mut index) = if self.in_memory {
            (Backend::Memory, Location::Memory)
        } else if let Some(location) = &self.blobs {
            let mut location = location.clone();
            location.credentials_file = self.s3_credentials_file.clone();
            (
                Backend::S3(location),
                Location::File(self.data_dir.join("index.sqlite")),
            )
        } else {
            (
                Backend::Local(self.data_dir.clone()),
                Location::File(self.data_dir.join("index.sqlite")),
            )
        };
        if let (Some(url), false) = (&self.index, self.in_memory) {
            index = Location::Postgres(url.clone());
        }
        Options {
            blobs,
            index,
            clock: Arc::new(SystemClock),
            max_upload_bytes: self.max_upload_bytes,
            inline_blob_bytes: self.inline_blob_bytes,
            direct_writes: self.direct_writes,
            hot_blob_bytes: self.hot_blob_bytes,
            session_ttl: chrono::Duration::hours(self.session_hours.max(1)),
            sweep_staging: true,
            build_trees: true,
            // Replaced by the persisted `DIR/authority.key` in `serve::run`.
            authority: Arc::new(weft_api::dsse::generate_key()),
            lineage_inline_budget: Some(defaults::LINEAGE_INLINE_BUDGET),
            quotas: self.quotas(),
            faults: weft_storage::Faults::default(),
        }
    }
}

/// `--index`: a PostgreSQL URL (the SQLite file in the data directory needs no flag).
pub(crate) fn parse_index(text: &str) -> Result<String, String> {
    if text.starts_with("postgres://") || text.starts_with("postgresql://") {
        Ok(text.to_owned())
    } else {
        // Not echoed: it may hold a password.
        Err("not a PostgreSQL URL: write postgres://USER@HOST:PORT/DATABASE".to_owned())
    }
}

/// `--blobs`: an `s3://` location (the local directory needs no flag).
pub(crate) fn parse_blobs(text: &str) -> Result<weft_storage::S3Location, String> {
    text.parse()
}

#[cfg(test)]
mod tests {
    use super::parse_size;

    #[test]
    fn sizes_are_read_as_people_write_them() {
        assert_eq!(parse_size("65536"), Ok(65_536));
        assert_eq!(parse_size("64GiB"), Ok(64 << 30));
        assert_eq!(parse_size("64 GiB"), Ok(64 << 30));
        assert_eq!(parse_size("500MiB"), Ok(500 << 20));
        assert_eq!(parse_size("2GB"), Ok(2_000_000_000));
        assert!(parse_size("lots").is_err_and(|why| why.contains("64GiB")));
    }

    #[test]
    fn the_default_upload_limit_is_64_gib() {
        use clap::Parser as _;
        #[derive(clap::Parser)]
        struct Probe {
            #[command(flatten)]
            config: super::Config,
        }
        let probe = Probe::parse_from(["weft"]);
        assert_eq!(probe.config.max_upload_bytes, 64 << 30);
        let probe = Probe::parse_from(["weft", "--max-upload-bytes", "1MiB"]);
        assert_eq!(probe.config.max_upload_bytes, 1 << 20);
    }

    /// Direct writes of large uploads are off unless asked for, and the flag reaches the
    /// engine's options.
    #[test]
    fn direct_writes_are_off_unless_asked_for() {
        use clap::Parser as _;
        #[derive(clap::Parser)]
        struct Probe {
            #[command(flatten)]
            config: super::Config,
        }
        let probe = Probe::parse_from(["weft"]);
        assert!(!probe.config.direct_writes);
        assert!(!probe.config.storage_options().direct_writes);
        let probe = Probe::parse_from(["weft", "--direct-writes"]);
        assert!(probe.config.storage_options().direct_writes);
        let parsed = Probe::try_parse_from(["weft", "--direct-writes=false"]);
        assert!(parsed.is_err(), "a switch, not a value");
    }
}

/// A witness the server pushes checkpoints to: where, and the key its cosignatures verify with.
#[derive(Clone, Debug)]
pub struct Witness {
    pub url: String,
    pub key: weft_api::tlog::witness::WitnessKey,
}

/// `--witness URL=VKEY`.
fn parse_witness(text: &str) -> Result<Witness, String> {
    let (url, vkey) = text
        .split_once('=')
        .ok_or_else(|| "a witness is URL=VKEY".to_owned())?;
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(format!("{url} is not an http(s) URL"));
    }
    let key = weft_api::tlog::witness::WitnessKey::parse(vkey).map_err(|e| e.message)?;
    Ok(Witness {
        url: url.trim_end_matches('/').to_owned(),
        key,
    })
}
