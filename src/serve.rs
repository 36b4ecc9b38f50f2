//! The accept loop: hyper with a header-read timeout (slowloris), a write timeout (a peer that
//! takes no bytes), HTTP/1.1 and HTTP/2, and a graceful shutdown that lets running requests
//! finish.
//!
//! The write timeout: a connection whose peer has taken nothing for `write_idle` while the
//! server had bytes to send is closed (`tokio-io-timeout` around the socket; hyper then drops
//! the response body). Without it a download whose client stopped reading kept its reader's
//! windows and open file for as long as the client kept the connection (stop 35 noted it).
//! It counts only time spent waiting to write: an SSE stream with nothing to send, or a client
//! reading slowly but steadily, is never cut. An HTTP/2 client that stalls one stream by
//! withholding its flow-control window leaves nothing waiting on the socket, so this does not
//! reach it.
//!
//! axum's own `serve` cannot set hyper's header timeout, and hyper silently disables that
//! timeout when no timer is configured, so the connection builder is set up here.

use std::future::Future;
use std::io::Write as _;
use std::path::Path;
use std::time::Duration;

use anyhow::Context as _;
use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;

use crate::config::{Config, DEFAULT_MAX_CONNECTIONS};
use crate::connections;
use crate::http::{AppState, app};

/// Blobs one timed collection round disposes of at most.
const GC_ROUND: usize = 100_000;

/// How often the server appends the lease and ownership expiries that fell due.
const EXPIRY_TICK: Duration = Duration::from_millis(200);

/// How the accept loop treats connections.
#[derive(Clone, Copy, Debug)]
pub struct Transport {
    /// How long a client may take to send its first byte, and then a request's headers.
    pub header_timeout: Duration,
    /// How long the server waits to write to a peer that takes no bytes before closing.
    pub write_idle: Duration,
    /// Connections served at once (`connections::Gate`).
    pub max_connections: usize,
}

/// Serves `router` on `listener` until `shutdown` resolves, with the default connection cap;
/// answers whether every connection then finished (false: some were still open after 30 s and
/// were dropped).
pub async fn serve(
    listener: TcpListener,
    router: Router,
    header_timeout: Duration,
    write_idle: Duration,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<bool> {
    let transport = Transport {
        header_timeout,
        write_idle,
        max_connections: DEFAULT_MAX_CONNECTIONS,
    };
    serve_with(listener, router, transport, shutdown).await
}

/// [`serve`] with every transport setting given.
pub async fn serve_with(
    listener: TcpListener,
    router: Router,
    transport: Transport,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<bool> {
    let Transport {
        header_timeout,
        write_idle,
        max_connections,
    } = transport;
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .keep_alive(true);
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(Some(Duration::from_secs(30)))
        .keep_alive_timeout(header_timeout);
    // A connection past the cap gets one HTTP/1.1 request, answered and closed.
    let mut overflow = hyper::server::conn::http1::Builder::new();
    overflow
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .keep_alive(false);
    let gate = connections::Gate::new(max_connections);
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(accepted) => accepted,
                    Err(error) => {
                        // Out of file descriptors and the like: back off instead of spinning.
                        tracing::warn!(%error, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let admission = gate.admit();
                if let connections::Admission::Refused = admission {
                    tracing::debug!(%peer, "connection refused: too many open");
                    continue;
                }
                let _ = stream.set_nodelay(true);
                let router = router.clone();
                let builder = builder.clone();
                let overflow = overflow.clone();
                let watcher = graceful.watcher();
                tokio::spawn(async move {
                    // The permit is this connection's slot, released when the task ends.
                    let _slot = admission;
                    if !connections::first_byte_within(&stream, header_timeout).await {
                        tracing::debug!(%peer, "connection closed: nothing sent");
                        return;
                    }
                    let mut stream = tokio_io_timeout::TimeoutStream::new(stream);
                    stream.set_write_timeout(Some(write_idle));
                    let io = TokioIo::new(Box::pin(stream));
                    let ended: Result<(), Box<dyn std::error::Error + Send + Sync>> =
                        if let connections::Admission::Overflow(_) = &_slot {
                            let service = hyper::service::service_fn(move |request| {
                                connections::answer_overflow(router.clone(), request)
                            });
                            let connection = overflow.serve_connection(io, service);
                            watcher.watch(connection).await.map_err(Into::into)
                        } else {
                            let service = TowerToHyperService::new(router);
                            let connection = builder.serve_connection_with_upgrades(io, service);
                            watcher.watch(connection.into_owned()).await
                        };
                    if let Err(error) = ended {
                        tracing::debug!(%peer, %error, "connection ended with an error");
                    }
                });
            }
            () = &mut shutdown => break,
        }
    }
    drop(listener);
    if tokio::time::timeout(Duration::from_secs(30), graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("connections still open after 30 s; stopping anyway");
        return Ok(false);
    }
    Ok(true)
}

/// Reads `DIR/admin.token`, creating it (mode 0600) with a random token on first start.
pub fn admin_token(data_dir: &Path) -> anyhow::Result<String> {
    let path = data_dir.join("admin.token");
    match std::fs::read_to_string(&path) {
        Ok(token) => return Ok(token.trim().to_owned()),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => return Err(error).with_context(|| format!("reading {}", path.display())),
    }
    use base64::Engine as _;
    let token = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>());
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let mut file = options
        .open(&path)
        .with_context(|| format!("creating {}", path.display()))?;
    file.write_all(token.as_bytes())?;
    file.sync_all()?;
    Ok(token)
}

/// Reads `DIR/authority.key` (the server's own Ed25519 key, base64 of the 32-byte secret),
/// creating it (mode 0600) on first start.
pub fn authority_key(data_dir: &Path) -> anyhow::Result<ed25519_dalek::SigningKey> {
    use base64::Engine as _;
    let path = data_dir.join("authority.key");
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            let key = weft_api::dsse::generate_key();
            write_private(
                &path,
                weft_api::dsse::BASE64.encode(key.to_bytes()).as_bytes(),
            )?;
            return Ok(key);
        }
        Err(error) => return Err(error).with_context(|| format!("reading {}", path.display())),
    };
    let secret: [u8; 32] = weft_api::dsse::BASE64
        .decode(text.trim())
        .ok()
        .and_then(|bytes| bytes.try_into().ok())
        .with_context(|| format!("{} is not base64 of a 32-byte key", path.display()))?;
    Ok(ed25519_dalek::SigningKey::from_bytes(&secret))
}

/// Creates `path` with mode 0600 (failing if it exists) and syncs it.
fn write_private(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let mut file = options
        .open(path)
        .with_context(|| format!("creating {}", path.display()))?;
    file.write_all(bytes)?;
    file.sync_all()?;
    Ok(())
}

/// Raises the soft limit on open file descriptors to the hard limit and returns the limit in
/// force (`None` where it cannot be read). Every upload holds a socket and a staging file, so
/// the usual soft limit of 1,024 is what many slow uploads would exhaust first.
pub fn raise_descriptor_limit() -> Option<u64> {
    #[cfg(unix)]
    {
        use rustix::process::{Resource, getrlimit, setrlimit};
        let limit = getrlimit(Resource::Nofile);
        let raised = rustix::process::Rlimit {
            current: limit.maximum,
            maximum: limit.maximum,
        };
        if limit.current != limit.maximum
            && let Err(error) = setrlimit(Resource::Nofile, raised)
        {
            tracing::warn!(%error, "could not raise the open-file limit");
        }
        let in_force = getrlimit(Resource::Nofile).current;
        tracing::info!(
            open_files = ?in_force,
            "open-file limit (unlimited if none)"
        );
        // `None` from getrlimit means unlimited: no descriptor bound on uploads then.
        in_force.or(Some(u64::MAX))
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// The data directory's lock file: `weft serve` holds it exclusively while it runs (so two
/// servers never share a directory) and `weft fsck` shared (so it never checks a directory a
/// server is writing: uploads in flight would look like damage). The OS drops it with the
/// process, a crash included.
pub const LOCK_FILE: &str = "weft.lock";

/// Takes `data_dir`'s lock exclusively, or says which server holds it.
pub fn lock_data_dir(data_dir: &Path) -> anyhow::Result<std::fs::File> {
    let path = data_dir.join(LOCK_FILE);
    let mut options = std::fs::OpenOptions::new();
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let file = options
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("opening {}", path.display()))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => anyhow::bail!(
            "{} is in use by another weft serve (it holds {}); stop it first or use another --data-dir",
            data_dir.display(),
            path.display()
        ),
        Err(std::fs::TryLockError::Error(error)) => {
            Err(error).with_context(|| format!("locking {}", path.display()))
        }
    }
}

/// Sets the process's file creation mask to 0o077: whatever it creates from now on is
/// owner-only. `weft fsck` calls it too, since opening the index may create its WAL files.
pub fn owner_only_from_now() {
    #[cfg(unix)]
    rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o077));
}

/// Makes everything this process creates from now on owner-only (0600 files, 0700
/// directories), whoever creates it: our own code, SQLite's journal and WAL files, and
/// `object_store`'s blob directories, which take no mode of their own (issue #40). Then closes
/// the data directory itself to everyone else, so what an older weft created inside it with
/// wider modes is out of reach too; only a directory weft made or already uses (it holds
/// `weft.lock`), never one it was merely pointed at (`--data-dir .`, a home, a shared mount).
fn owner_only(data_dir: &Path, created: bool) -> anyhow::Result<()> {
    owner_only_from_now();
    #[cfg(unix)]
    if created || data_dir.join("weft.lock").exists() {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(data_dir, std::fs::Permissions::from_mode(0o700))
            .with_context(|| format!("making {} owner-only", data_dir.display()))?;
    }
    #[cfg(not(unix))]
    let _ = (data_dir, created);
    Ok(())
}

/// `weft serve`: open the store, bind, print `listening on http://…`, serve until Ctrl-C.
/// Test hook: hold every reaction after commit (the review after a submission, EVD-3) for the
/// life of the process, so a test can kill it between a commit and its reaction
/// (`tests/e2e/reactions.rs`). No flag or configuration file sets it.
const HOLD_REACTIONS: &str = "WEFT_TEST_HOLD_REACTIONS";

pub async fn run(config: Config) -> anyhow::Result<()> {
    let created = !config.data_dir.exists();
    std::fs::create_dir_all(&config.data_dir)
        .with_context(|| format!("creating {}", config.data_dir.display()))?;
    owner_only(&config.data_dir, created)?;
    let _lock = lock_data_dir(&config.data_dir)?;
    let token = admin_token(&config.data_dir)?;
    let descriptors = raise_descriptor_limit();
    let mut options = config.storage_options();
    if let Some(descriptors) = descriptors {
        // An upload needs a socket and a staging file, a download of a stored file a socket
        // and the file, and the index and the other connections need descriptors too:
        // uploads and downloads may each take at most a quarter of them, so past that they
        // answer 503 instead of failing other requests with EMFILE.
        let bound = usize::try_from(descriptors / 4)
            .unwrap_or(usize::MAX)
            .max(1);
        options.quotas.max_open_uploads = options.quotas.max_open_uploads.min(bound);
        options.quotas.max_open_downloads = options.quotas.max_open_downloads.min(bound);
        // A Group's cap above the process's would mean nothing.
        options.quotas.max_downloads_per_group = options
            .quotas
            .max_downloads_per_group
            .min(options.quotas.max_open_downloads);
    }
    options.authority = std::sync::Arc::new(authority_key(&config.data_dir)?);
    if std::env::var_os(HOLD_REACTIONS).is_some() {
        tracing::warn!("{HOLD_REACTIONS} is set: reactions after commit are held (a test hook)");
        options.faults.hold_reactions(true);
    }
    let store = weft_storage::Store::open(options)
        .await
        .context("opening the store")?;
    if let Some(retain) = config.retention() {
        let (store, every) = (
            store.clone(),
            Duration::from_secs(config.compaction_interval_secs.max(1)),
        );
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(every);
            loop {
                ticks.tick().await;
                if let Err(error) = store.compaction().compact(retain).await {
                    tracing::error!(%error, "compaction failed; the online log is unchanged");
                }
            }
        });
    }
    crate::witnesses::start(
        store.clone(),
        config.witnesses.clone(),
        Duration::from_millis(config.witness_interval_ms.max(10)),
    );
    {
        // Uncited uploads past their TTL and spent session nonces (`Store::sweep`).
        let (store, every) = (store.clone(), config.sweep_interval());
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(every);
            loop {
                ticks.tick().await;
                if let Err(error) = store.artifacts().sweep().await {
                    tracing::error!(%error, "the sweep of uncited uploads failed");
                }
            }
        });
    }
    if config.gc_interval_secs > 0 {
        // What retention policies let go (issue #46, `Artifacts::collect`), a bounded number
        // of blobs per round; `weft admin gc` runs one at once.
        let (store, every) = (store.clone(), Duration::from_secs(config.gc_interval_secs));
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(every);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                if let Err(error) = store.artifacts().collect(false, GC_ROUND).await {
                    tracing::error!(%error, "collection failed; the next round finishes it");
                }
                match store.lifespan().trim_answers().await {
                    Ok(0) => {}
                    Ok(trimmed) => tracing::info!(trimmed, "trimmed answers past the horizon"),
                    Err(error) => tracing::error!(%error, "trimming old answers failed"),
                }
                match store.lifespan().forget_spent().await {
                    Ok(0) => {}
                    Ok(forgotten) => tracing::info!(forgotten, "forgot rows nothing reads"),
                    Err(error) => tracing::error!(%error, "forgetting spent rows failed"),
                }
                // Each Group's usage, for `/metrics` (the route computes it on demand).
                for group in store.directory().group_ids().await.unwrap_or_default() {
                    let Ok(id) = weft_api::Id::parse("groupId", &group) else {
                        continue;
                    };
                    if let Ok(usage) = store.lifespan().usage(id).await {
                        metrics::gauge!("weft_group_usage_bytes", "group" => group.clone())
                            .set(usage.bytes as f64);
                        metrics::gauge!("weft_group_usage_artifacts", "group" => group)
                            .set(usage.artifacts as f64);
                    }
                }
            }
        });
    }
    {
        // Lease and ownership expiry (`Store::expire_due`, LSE-8, OFL-1): every 200 ms, so an
        // expiry is in the log within a second of its instant. Every Command also expires its
        // own WorkItem first, so nothing depends on this timer having run.
        let store = store.clone();
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(EXPIRY_TICK);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                if let Err(error) = store.work().expire_due(store.now()).await {
                    tracing::error!(%error, "appending lease expiries failed; retried next tick");
                }
            }
        });
    }
    {
        // The lineage index's snapshot (`Store::save_lineage_snapshot`, issue #15): the first
        // tick writes one at once after a full rebuild, later ones only if something new was
        // published; shutdown writes the last.
        let store = store.clone();
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(Duration::from_secs(
                weft_storage::defaults::LINEAGE_SNAPSHOT_INTERVAL_SECS,
            ));
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                if let Err(error) = store.lineage().save_lineage_snapshot().await {
                    tracing::error!(%error, "writing the lineage snapshot failed; the next restart rebuilds more");
                }
            }
        });
    }
    let state = AppState::new(store.clone(), &token, &config);
    let listener = TcpListener::bind(config.listen)
        .await
        .with_context(|| format!("binding {}", config.listen))?;
    let address = listener.local_addr()?;
    // SIGINT is listened for before the server says it listens: a script (or test) that
    // stops it as soon as it reads that line must not find a handler installed but no
    // listener yet (the signal would be consumed and lost, and the server never stop).
    let mut interrupt = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        .context("listening for SIGINT")?;
    // The first line on stdout; tests and scripts read it.
    println!("listening on http://{address}");
    std::io::stdout().flush()?;
    tracing::info!(%address, data_dir = %config.data_dir.display(), in_memory = config.in_memory, direct_writes = config.direct_writes, "weft serving");
    let shutdown = async move {
        let _ = interrupt.recv().await;
        tracing::info!("shutting down");
    };
    let transport = Transport {
        header_timeout: config.header_timeout(),
        write_idle: config.body_idle_timeout(),
        max_connections: connections::cap_for_descriptors(config.max_connections, descriptors),
    };
    let drained = serve_with(listener, app(state), transport, shutdown).await?;
    match store.lineage().save_lineage_snapshot().await {
        Ok(saved) => tracing::info!(?saved, "lineage snapshot written"),
        Err(error) => tracing::error!(%error, "writing the lineage snapshot failed"),
    }
    // Only when every request finished: the next start may then skip the orphan scan.
    if drained && let Err(error) = store.mark_clean_shutdown().await {
        tracing::error!(%error, "marking the clean shutdown failed");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use axum::routing::get;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    use tokio::sync::oneshot;

    use super::*;

    const WRITE_IDLE: Duration = Duration::from_secs(5);

    /// Sends a message when dropped: tells the test that hyper let go of a response body.
    struct OnDrop(Option<oneshot::Sender<()>>);

    impl Drop for OnDrop {
        fn drop(&mut self) {
            if let Some(dropped) = self.0.take() {
                let _ = dropped.send(());
            }
        }
    }

    /// Serves `GET /endless`, a body that never ends; answers the address, and a receiver
    /// that completes when that body is dropped.
    async fn endless_server(write_idle: Duration) -> (std::net::SocketAddr, oneshot::Receiver<()>) {
        let (dropped, body_dropped) = oneshot::channel();
        let guard = Arc::new(Mutex::new(Some(OnDrop(Some(dropped)))));
        let router = Router::new().route(
            "/endless",
            get(move || async move {
                let guard = guard.lock().map(|mut g| g.take()).unwrap_or(None);
                let chunk = bytes::Bytes::from(vec![7u8; 64 * 1024]);
                let body = futures::stream::repeat(chunk).map(move |chunk| {
                    let _held = &guard;
                    Ok::<_, std::io::Error>(chunk)
                });
                axum::body::Body::from_stream(body)
            }),
        );
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address");
        tokio::spawn(serve(
            listener,
            router,
            Duration::from_secs(10),
            write_idle,
            std::future::pending(),
        ));
        (address, body_dropped)
    }

    async fn request(address: std::net::SocketAddr) -> tokio::net::TcpStream {
        let mut client = tokio::net::TcpStream::connect(address)
            .await
            .expect("connect");
        client
            .write_all(b"GET /endless HTTP/1.1\r\nhost: weft\r\n\r\n")
            .await
            .expect("request");
        client
    }

    use futures::StreamExt as _;

    /// A client that stops reading is cut off once the server has waited `WRITE_IDLE` to
    /// write, and its response body (a download's reader, windows and file) is dropped.
    #[tokio::test(start_paused = true)]
    async fn a_peer_that_takes_no_bytes_is_cut_off_and_its_body_dropped() {
        let (address, body_dropped) = endless_server(WRITE_IDLE).await;
        let mut client = request(address).await;
        let asked = tokio::time::Instant::now();
        tokio::time::timeout(WRITE_IDLE * 10, body_dropped)
            .await
            .expect("the body is dropped within the write timeout")
            .expect("the body is dropped");
        assert!(asked.elapsed() >= WRITE_IDLE, "{:?}", asked.elapsed());
        // What the socket buffered still arrives, then the connection ends.
        let mut sink = vec![0u8; 1 << 20];
        let mut received = 0usize;
        loop {
            match client.read(&mut sink).await {
                Ok(0) | Err(_) => break,
                Ok(n) => received += n,
            }
        }
        assert!(received > 0, "the response began before the stall");
    }

    /// A download that outlasts the write timeout several times over is not cut off while
    /// its client keeps reading: the timer counts only a wait to write, and each write resets
    /// it. In real time (a second), because a paused clock jumps ahead of the kernel's window
    /// updates and would cut a reader that is in fact reading.
    #[tokio::test]
    async fn a_reader_that_keeps_reading_is_not_cut_off_however_long_it_takes() {
        let write_idle = Duration::from_secs(1);
        let (address, mut body_dropped) = endless_server(write_idle).await;
        let mut client = request(address).await;
        let mut sink = vec![0u8; 64 * 1024];
        let started = std::time::Instant::now();
        while started.elapsed() < write_idle * 5 / 2 {
            let n = client.read(&mut sink).await.expect("still connected");
            assert!(n > 0, "still sending after {:?}", started.elapsed());
        }
        assert!(
            body_dropped.try_recv().is_err(),
            "the body is still being sent"
        );
    }
}
