//! The accept loop: hyper with a header-read timeout (slowloris), HTTP/1.1 and HTTP/2, and a
//! graceful shutdown that lets running requests finish.
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

use crate::config::Config;
use crate::http::{AppState, app};

/// How often the server appends the lease and ownership expiries that fell due.
const EXPIRY_TICK: Duration = Duration::from_millis(200);

/// Serves `router` on `listener` until `shutdown` resolves; answers whether every connection
/// then finished (false: some were still open after 30 s and were dropped).
pub async fn serve(
    listener: TcpListener,
    router: Router,
    header_timeout: Duration,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<bool> {
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
                let _ = stream.set_nodelay(true);
                let service = TowerToHyperService::new(router.clone());
                let connection = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
                let connection = graceful.watch(connection.into_owned());
                tokio::spawn(async move {
                    if let Err(error) = connection.await {
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
    let file = std::fs::OpenOptions::new()
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

/// `weft serve`: open the store, bind, print `listening on http://…`, serve until Ctrl-C.
pub async fn run(config: Config) -> anyhow::Result<()> {
    std::fs::create_dir_all(&config.data_dir)
        .with_context(|| format!("creating {}", config.data_dir.display()))?;
    let _lock = lock_data_dir(&config.data_dir)?;
    let token = admin_token(&config.data_dir)?;
    let descriptors = raise_descriptor_limit();
    let mut options = config.storage_options();
    if let Some(descriptors) = descriptors {
        // An upload needs a socket and a staging file, and reads, the index and the other
        // connections need descriptors too: uploads may take at most a quarter of them, so
        // past that they answer 503 instead of failing other requests with EMFILE.
        let bound = usize::try_from(descriptors / 4)
            .unwrap_or(usize::MAX)
            .max(1);
        options.quotas.max_open_uploads = options.quotas.max_open_uploads.min(bound);
    }
    options.authority = std::sync::Arc::new(authority_key(&config.data_dir)?);
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
                if let Err(error) = store.compact(retain).await {
                    tracing::error!(%error, "compaction failed; the online log is unchanged");
                }
            }
        });
    }
    {
        // Uncited uploads past their TTL and spent session nonces (`Store::sweep`).
        let (store, every) = (store.clone(), config.sweep_interval());
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(every);
            loop {
                ticks.tick().await;
                if let Err(error) = store.sweep().await {
                    tracing::error!(%error, "the sweep of uncited uploads failed");
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
                if let Err(error) = store.expire_due(store.now()).await {
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
                if let Err(error) = store.save_lineage_snapshot().await {
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
    // The first line on stdout; tests and scripts read it.
    println!("listening on http://{address}");
    std::io::stdout().flush()?;
    tracing::info!(%address, data_dir = %config.data_dir.display(), in_memory = config.in_memory, "weft serving");
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
        tracing::info!("shutting down");
    };
    let drained = serve(listener, app(state), config.header_timeout(), shutdown).await?;
    match store.save_lineage_snapshot().await {
        Ok(saved) => tracing::info!(?saved, "lineage snapshot written"),
        Err(error) => tracing::error!(%error, "writing the lineage snapshot failed"),
    }
    // Only when every request finished: the next start may then skip the orphan scan.
    if drained && let Err(error) = store.mark_clean_shutdown().await {
        tracing::error!(%error, "marking the clean shutdown failed");
    }
    Ok(())
}
