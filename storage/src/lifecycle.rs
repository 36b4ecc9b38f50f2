//! Opening and closing the engine: the index file made owner-only, what a crash can leave
//! behind removed (orphan blob files and outboards, upload objects), each feature's part of
//! the shared state loaded (the lineage index, the expiry deadlines, the forwarded artifacts),
//! the reactions after commit handed to the features that run them, and the clean-shutdown
//! mark. The one room that knows the engine and every feature whose state it loads, so the
//! engine (`engine.rs`) knows none.

pub(crate) mod trees;

use std::sync::Arc;

use crate::blobs::Blobs;
use crate::db::Db;
use crate::engine::Engine;
use crate::engine::deadlines::Deadlines;
use crate::engine::hot::{FastSet, Hot};
use crate::engine::rebuilds::Rebuilds;
use crate::engine::uploads::{Claims, Counters};
use crate::error::Error;
use crate::options::Options;

/// Makes the index's directory 0700 and the index file 0600, creating the file empty with
/// that mode if it is new: SQLite gives its `-wal` and `-shm` files the mode of the database
/// file, so all three are owner-only from the first write. Existing ones are fixed too.
fn owner_only_index(path: &std::path::Path) -> Result<(), Error> {
    use crate::blobs::{owner_only_dir, owner_only_file};
    if let Some(parent) = path.parent() {
        owner_only_dir(parent)?;
    }
    if !path.exists() {
        let mut create = std::fs::OpenOptions::new();
        create.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut create, 0o600);
        match create.open(path) {
            Ok(_) => {}
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(error) => return Err(Error::backend(error)),
        }
    }
    let name = path.as_os_str().to_owned();
    for suffix in ["", "-wal", "-shm"] {
        let mut file = name.clone();
        file.push(suffix);
        owner_only_file(std::path::Path::new(&file))?;
    }
    Ok(())
}

/// `<data>/clean-shutdown`: written by a clean shutdown once every request has finished and
/// nothing can promote a blob any more, removed by the next open. When an open finds it, no
/// crash happened since that shutdown, so there can be no orphan blob file or outboard and
/// the scan of every blob file is skipped (at a million files it would cost seconds of each
/// restart).
const CLEAN_MARK: &str = "clean-shutdown";

/// Removes the clean-shutdown mark, durably; whether it was there.
fn take_clean_mark(root: &std::path::Path) -> Result<bool, Error> {
    match std::fs::remove_file(root.join(CLEAN_MARK)) {
        Ok(()) => {
            std::fs::File::open(root)
                .and_then(|dir| dir.sync_all())
                .map_err(Error::backend)?;
            Ok(true)
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(error) => Err(Error::backend(error)),
    }
}

impl Engine {
    /// Marks a clean shutdown (see [`CLEAN_MARK`]): waits for every upload between its
    /// promotion and its row and for a running sweep, and keeps both out for the rest of the
    /// process. Call last, after the server stopped taking requests.
    pub(crate) async fn mark_clean_shutdown(&self) -> Result<(), Error> {
        let Some(root) = self.blobs.local_root() else {
            return Ok(());
        };
        std::mem::forget(self.sweep_lock.write().await);
        let path = root.join(CLEAN_MARK);
        let file = std::fs::File::create(&path).map_err(Error::backend)?;
        file.sync_all().map_err(Error::backend)?;
        std::fs::File::open(root)
            .and_then(|dir| dir.sync_all())
            .map_err(Error::backend)
    }
}

/// Start-up reconciliation (issue #10 finding 10): a crash between promoting a blob file and
/// committing its `blobs` row leaves a file that no row names. No upload was acknowledged for
/// it (the answer follows the commit), it has no uploader and no Group, so it is removed
/// rather than recorded: a client that retries uploads the bytes again. The same for an
/// outboard no row names (a large blob's is placed before the blob's own rename). Runs
/// before the server accepts requests, so no upload can be between its promotion and its row.
async fn remove_orphan_blobs(db: &Db, blobs: &Blobs) -> Result<usize, Error> {
    let files = blobs.local_blob_files()?;
    let outboards = blobs.local_outboard_files()?;
    if files.is_empty() && outboards.is_empty() {
        return Ok(0);
    }
    let (orphans, orphan_outboards) = db
        .read(move |conn| {
            let unnamed = |found: Vec<(std::path::PathBuf, weft_api::ArtifactId)>| {
                let mut orphans = Vec::new();
                for (path, id) in found {
                    if !crate::rows::blobs::exists(conn, &id)? {
                        orphans.push((path, id));
                    }
                }
                Ok::<_, Error>(orphans)
            };
            Ok((unnamed(files)?, unnamed(outboards)?))
        })
        .await?;
    for (path, id) in &orphans {
        tracing::warn!(path = %path.display(), "removing a blob file with no index row");
        std::fs::remove_file(path).map_err(Error::backend)?;
        blobs.remove_outboard(id).await?;
    }
    // An orphan blob file's outboard went with it above.
    let orphan_outboards: Vec<_> = orphan_outboards
        .into_iter()
        .filter(|(_, id)| !orphans.iter().any(|(_, file)| file == id))
        .collect();
    for (path, id) in &orphan_outboards {
        tracing::warn!(path = %path.display(), "removing an outboard with no index row");
        blobs.remove_outboard(id).await?;
    }
    Ok(orphans.len() + orphan_outboards.len())
}

impl Engine {
    pub(crate) async fn open(options: Options) -> Result<Self, Error> {
        if let crate::db::Location::File(path) = &options.index
            && let Some(parent) = path.parent()
        {
            std::fs::create_dir_all(parent).map_err(Error::backend)?;
            owner_only_index(path)?;
        }
        let db = Db::open_with(&options.index, options.faults.clone())?;
        let scratch = match &options.index {
            crate::db::Location::File(path) => path.parent(),
            _ => None,
        };
        let blobs = Blobs::open(
            &options.blobs,
            options.faults.clone(),
            options.direct_writes,
            scratch,
        )?;
        blobs.check_reachable().await?;
        // On PostgreSQL other servers share the index and the bucket: what looks like a crash's
        // leftover (a staged copy, an upload object whose session row is not yet committed)
        // may be another server's upload in flight, so a start removes nothing there.
        let shared = matches!(options.index, crate::db::Location::Postgres(_));
        if shared {
            tracing::info!("the index is shared (PostgreSQL): no start-up sweep of the bucket");
        }
        if options.sweep_staging && !shared {
            let n_swept = blobs.sweep_staging().await?;
            if n_swept > 0 {
                tracing::info!(n_swept, "removed stale staging files");
            }
            let clean = match blobs.local_root() {
                Some(root) => take_clean_mark(root)?,
                None => false,
            };
            let n_orphans = if clean {
                tracing::info!("the last shutdown was clean: no scan for orphan blob files");
                0
            } else if blobs.is_remote() {
                // Every key of a shared bucket is not listed at each start: an orphan holds
                // the bytes its digest names, so it is harmless, and fsck reports it.
                0
            } else {
                remove_orphan_blobs(&db, &blobs).await?
            };
            if n_orphans > 0 {
                tracing::info!(
                    n_orphans,
                    "removed blob files and outboards a crash left without an index row"
                );
            }
            let n_uploads = crate::artifacts::remove_orphan_uploads(&db, &blobs).await?;
            if n_uploads > 0 {
                tracing::info!(n_uploads, "removed upload objects with no session row");
            }
        }
        let (lineage, lineage_start) =
            crate::lineage_index::Index::open(&db, &options.index).await?;
        tracing::info!(?lineage_start, "lineage index ready");
        let deadlines = Arc::new(Deadlines::default());
        for (at, work_item_id) in db.read(crate::work::expiry::load).await? {
            deadlines.note(&work_item_id, at);
        }
        let forwarded = db
            .read(|conn| {
                Ok(crate::rows::forwarded_artifacts::all(conn)?
                    .into_iter()
                    .collect::<FastSet>())
            })
            .await?;
        Ok(Self {
            db,
            blobs,
            lineage,
            lineage_start,
            lineage_snapshot: crate::lineage_index::snapshot_path(&options.index),
            clock: options.clock,
            authority: options.authority,
            auth_generation: tokio::sync::watch::Sender::new(0),
            keys: crate::keys::KeyCache::default(),
            max_upload_bytes: options.max_upload_bytes,
            inline_blob_bytes: options.inline_blob_bytes,
            hot: Arc::new(Hot::new(options.hot_blob_bytes, forwarded)),
            session_ttl: options.session_ttl,
            lineage_inline_budget: options.lineage_inline_budget,
            limits: crate::limits::Limits::new(crate::limits::Settings {
                max_uploads_per_agent: options.quotas.max_uploads_per_agent,
                max_open_uploads: options.quotas.max_open_uploads,
                max_unpublished_bytes: options.quotas.max_unpublished_bytes,
                logins_per_minute: options.quotas.logins_per_minute,
                commands_per_minute: options.quotas.commands_per_minute,
                max_open_proposals: options.quotas.max_open_proposals,
                max_upload_chunks: options.quotas.max_upload_chunks,
                max_downloads_per_agent: options.quotas.max_downloads_per_agent,
                max_downloads_per_group: options.quotas.max_downloads_per_group,
                max_open_downloads: options.quotas.max_open_downloads,
                download_idle: options.quotas.download_idle,
            }),
            unpublished_blob_ttl: options.quotas.unpublished_blob_ttl,
            answer_horizon: options.quotas.answer_horizon,
            collection_pause_ratio: options.quotas.collection_pause_ratio,
            sweep_lock: tokio::sync::RwLock::new(()),
            strays: std::sync::Mutex::default(),
            spent_walk: std::sync::Mutex::default(),
            // From a random digest: a server restarted more often than a full walk takes
            // still reaches every blob in time, where one starting at the first would not.
            sweep_walk: std::sync::Mutex::new((
                rand::random::<[u8; 32]>().to_vec(),
                crate::artifacts::SWEEP_WINDOW,
            )),
            upload_strays: std::sync::Mutex::default(),
            upload_counters: Counters::default(),
            upload_claims: Claims::default(),
            rebuilds: Rebuilds::default(),
            repairs: Arc::default(),
            deadlines,
            faults: options.faults,
            reactions: crate::reactions::Reactions::default(),
            on_session_replaced: crate::work::expiry::revoke_for_new_session,
            contact: crate::engine::contact::Contact::new(shared),
        })
    }
}

/// The reactions after commit (`reactions.rs`) run on the Engine; what each does is its
/// feature's (the review after a submission: `evidence/reviewer.rs`).
impl crate::reactions::Reactor for Engine {
    fn db(&self) -> &Db {
        &self.db
    }

    fn faults(&self) -> &crate::faults::Faults {
        &self.faults
    }

    fn reactions(&self) -> &crate::reactions::Reactions {
        &self.reactions
    }

    fn now(&self) -> chrono::DateTime<chrono::Utc> {
        self.clock.now()
    }

    fn react<'a>(
        self: &'a Arc<Self>,
        owed: &'a crate::reactions::Owed,
    ) -> futures::future::BoxFuture<'a, Result<(), Error>> {
        match owed.reaction() {
            Some(crate::reactions::Reaction::Review) => Box::pin(async move {
                crate::evidence::handle::Evidence(self)
                    .review_after_submission(owed)
                    .await
            }),
            None => Box::pin(std::future::ready(Ok(()))),
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::engine::Engine;
    use crate::options::Options;

    /// A clean shutdown's mark skips one start's scan for orphan blob files, and only one: the
    /// open that finds it removes it, so a crash after that start is scanned for again.
    #[tokio::test]
    async fn a_clean_shutdown_skips_the_orphan_scan_of_the_next_start_only() {
        let dir = tempfile::tempdir().expect("dir");
        let orphan_id = weft_api::ArtifactId::of(b"bytes no row names");
        let hex = orphan_id.hex();
        let orphan = dir.path().join("blobs/blake3").join(&hex[..2]).join(&hex);
        let store = Engine::open(Options::on_disk(dir.path()))
            .await
            .expect("open");
        std::fs::create_dir_all(orphan.parent().expect("shard")).expect("shard");
        std::fs::write(&orphan, b"bytes no row names").expect("orphan");
        store.mark_clean_shutdown().await.expect("mark");
        drop(store);
        let store = Engine::open(Options::on_disk(dir.path()))
            .await
            .expect("reopen");
        assert!(orphan.exists(), "no scan after a clean shutdown");
        assert!(
            !dir.path().join(super::CLEAN_MARK).exists(),
            "the mark is used up"
        );
        drop(store);
        let _store = Engine::open(Options::on_disk(dir.path()))
            .await
            .expect("reopen");
        assert!(
            !orphan.exists(),
            "the next start (no mark) scans and removes it"
        );
    }
}
