//! Fast restart (issue #15): which `manifests` rows the index holds ([`Coverage`]), the
//! snapshot file written at clean shutdown and periodically, and opening the index from it.
//!
//! The database stays the authority. A snapshot says through which rowid it holds every
//! committed row, and which rows above that it holds too; at open it is used only if its
//! digest checks out and the database still has those very rows (same rowid, same manifest
//! id), and then the rows committed after it are read and added. Anything else (no file, a
//! torn or corrupt one, one of another database or of a database restored from an older
//! backup) is a full rebuild from the tables, as before, with a warning in the log.
//!
//! Rowids: `manifests` rows are never deleted or updated, so SQLite gives each new row the
//! largest rowid plus one, and a committed row's rowid is larger than every row committed
//! before it. Publications reach the index after their commit, in any order, so the index
//! counts a row as covered only when every row below it is in (`Coverage::note`).
//!
//! Crash story: the file is written to `<path>.tmp`, synced, renamed over the old one and the
//! directory synced, so a crash leaves the old snapshot or the new one; either is correct, as
//! neither claims a row it does not hold, and the rows after it come from the tables.
//! Threads: encoding runs under the index's read lock on the blocking pool, so a publication
//! waits for it (about 0.2 s at 1 M artifacts); writing and syncing run after the lock is
//! released.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::sql::Connection;
use weft_api::ArtifactId;

use super::coverage::Coverage;
use super::{Ids, Index, Publication, snapshot};
use crate::db::{Db, Location};
use crate::error::Error;
use crate::events::to32;

/// How the lineage index was made ready at open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineageStart {
    /// Built from the tables (no usable snapshot, or an in-memory database).
    Rebuilt { manifests: usize },
    /// Read from the snapshot, plus the manifests committed after it.
    FromSnapshot { caught_up: usize },
}

/// What a save of the snapshot wrote (`Index::write_snapshot`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SnapshotSaved {
    pub bytes: usize,
    /// Committed publications the index did not hold yet, read from the tables first (0 when
    /// every publication reached the index through `Store::publish`).
    pub caught_up: usize,
    /// The rowid through which it holds every `manifests` row.
    pub through: u64,
}

/// Where the snapshot of an on-disk index lives: beside it, as its `-wal` does (none on
/// PostgreSQL: every server builds its index from the `manifests` rows at start).
pub(crate) fn snapshot_path(location: &Location) -> Option<PathBuf> {
    match location {
        Location::File(path) => {
            let mut name = path.as_os_str().to_owned();
            name.push("-lineage");
            Some(PathBuf::from(name))
        }
        Location::Memory | Location::Postgres(_) => None,
    }
}

/// Whether the database holds exactly the rows `coverage` names: the row at `through` and
/// every row ahead of it, each with the same manifest id.
fn matches(conn: &Connection, coverage: &Coverage) -> Result<bool, Error> {
    let rows =
        std::iter::once(coverage.through).chain(coverage.ahead.iter().map(|(r, m)| (*r, *m)));
    for (rowid, manifest_id) in rows {
        if rowid == 0 {
            continue;
        }
        let stored = crate::rows::manifests::id_at(conn, rowid)?;
        if stored.as_deref() != Some(&manifest_id.0[..]) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Publications read from the tables, oldest first, and the last one's rowid and manifest id.
pub(crate) type PublicationsRead = (Vec<Publication>, Option<(u64, ArtifactId)>);

/// The publications whose `manifests` rowid is above `after`, oldest first, and the last one's
/// rowid and manifest id: everything, for a rebuild at start (`after` = 0), or what was
/// committed after a snapshot (`CROSS JOIN` keeps SQLite on the rowid range of `manifests`,
/// never a scan of `blobs`). A rebuild reads `derivations` in one scan; a catch-up looks up
/// each new manifest's rows by the primary key. Either takes a manifest's sources in the order
/// they were written, as the publication added them, so every way of building the index
/// gives the same edge lists.
pub(crate) fn load_publications_after(
    conn: &Connection,
    after: u64,
) -> Result<PublicationsRead, Error> {
    let mut sources: std::collections::HashMap<Vec<u8>, Vec<ArtifactId>> =
        std::collections::HashMap::new();
    if after == 0 {
        for (manifest_id, source) in crate::rows::derivations::all(conn)? {
            sources.entry(manifest_id).or_default().push(source);
        }
    }
    let rows = crate::rows::manifests::publications_after(conn, after)?;
    let mut publications = Vec::with_capacity(rows.len());
    for row in rows {
        let known = (after == 0).then(|| sources.remove(&row.2).unwrap_or_default());
        publications.push(publication(conn, row, known)?);
    }
    let last = publications.last().map(|p| (p.rowid, p.manifest_id));
    Ok((publications, last))
}

/// The publication of manifest `manifest_id` read from the tables, if it is there: another
/// server's, added when its `artifact.published` arrives (`Store::open`'s follower).
pub(crate) fn load_publication(
    conn: &Connection,
    manifest_id: &ArtifactId,
) -> Result<Option<Publication>, Error> {
    crate::rows::manifests::publication_of(conn, &manifest_id.0)?
        .map(|row| publication(conn, row, None))
        .transpose()
}

/// One row of `manifests` (with its blob's size) as a publication; its sources are `known`,
/// or else read by the primary key of `derivations`.
fn publication(
    conn: &Connection,
    row: crate::rows::manifests::PublicationRow,
    known: Option<Vec<ArtifactId>>,
) -> Result<Publication, Error> {
    let (
        artifact,
        size,
        manifest_id,
        group,
        mission,
        work_item,
        producer,
        media_type,
        sequence,
        rowid,
    ) = row;
    let sources = match known {
        Some(sources) => sources,
        None => crate::rows::derivations::sources_in(conn, &artifact, &manifest_id)?,
    };
    Ok(Publication {
        artifact: ArtifactId(to32(artifact)?),
        size,
        sources,
        manifest_id: ArtifactId(to32(manifest_id)?),
        group,
        mission,
        work_item,
        producer,
        media_type,
        sequence,
        rowid,
    })
}

impl Index {
    /// Adds every row one read of the tables saw, the last being `last` (rows the index holds
    /// already are skipped).
    pub(crate) fn catch_up(&self, publications: &[Publication], last: Option<(u64, ArtifactId)>) {
        let mut graph = self.graph.write().unwrap_or_else(|p| p.into_inner());
        for publication in publications {
            graph.add(publication);
        }
        self.coverage().caught_up(last);
    }

    /// The snapshot file's bytes and the rowid through which they hold every row.
    ///
    /// The ids it sorts for the file are kept as the index's sorted run (`Ids::adopt`), so
    /// after a full rebuild (every id in the hash map) the next save sorts only the ids added
    /// since, and the map's memory goes back.
    pub(super) fn encode(&self) -> (Vec<u8>, u64) {
        let (bytes, through, sorted, n_nodes) = {
            let graph = self.graph.read().unwrap_or_else(|p| p.into_inner());
            let coverage = self.coverage().clone();
            let sorted = graph.index.sorted();
            let bytes = snapshot::encode(&graph, &sorted, &coverage);
            (bytes, coverage.through.0, sorted, graph.nodes.len())
        };
        let fresh = Ids::loaded(sorted);
        let old = {
            let mut graph = self.graph.write().unwrap_or_else(|p| p.into_inner());
            let old = std::mem::replace(&mut graph.index, fresh);
            graph.index.adopt(old, n_nodes)
        };
        drop(old); // freed without the lock
        (bytes, through)
    }

    /// The index of the database `db` at `location`: from its snapshot if there is a usable
    /// one, else rebuilt from the tables.
    pub(crate) async fn open(db: &Db, location: &Location) -> Result<(Self, LineageStart), Error> {
        if let Some(path) = snapshot_path(location) {
            match Self::from_snapshot(db, path.clone()).await {
                Ok(Some(opened)) => return Ok(opened),
                Ok(None) => {}
                Err(error) => {
                    tracing::warn!(path = %path.display(), %error, "lineage snapshot not used; rebuilding the index from the tables");
                }
            }
        }
        let (publications, last) = db.read(|conn| load_publications_after(conn, 0)).await?;
        let index = Self::default();
        index.catch_up(&publications, last);
        Ok((
            index,
            LineageStart::Rebuilt {
                manifests: publications.len(),
            },
        ))
    }

    /// `Ok(None)`: there is no snapshot file.
    async fn from_snapshot(db: &Db, path: PathBuf) -> Result<Option<(Self, LineageStart)>, Error> {
        let decoded = tokio::task::spawn_blocking(move || match std::fs::read(&path) {
            Ok(file) => snapshot::decode(&file).map(Some).map_err(Error::backend),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(error) => Err(Error::backend(error)),
        })
        .await
        .map_err(Error::backend)??;
        let Some((graph, coverage)) = decoded else {
            return Ok(None);
        };
        let through = coverage.through.0;
        let check = coverage.clone();
        let rows = db
            .read(move |conn| {
                if !matches(conn, &check)? {
                    return Ok(None);
                }
                load_publications_after(conn, through).map(Some)
            })
            .await?;
        let Some((publications, last)) = rows else {
            return Err(Error::backend(snapshot::Unusable(
                "the database does not hold the rows it names (another or an older database)",
            )));
        };
        let index = Self {
            graph: std::sync::RwLock::new(graph),
            coverage: std::sync::Mutex::new(coverage),
            saved_through: AtomicU64::new(through),
            saving: std::sync::Mutex::new(()),
        };
        index.catch_up(&publications, last);
        Ok(Some((
            index,
            LineageStart::FromSnapshot {
                caught_up: publications.len(),
            },
        )))
    }
}

/// Writes `bytes` to `path` so that a crash leaves the old file or the new one, never a mix:
/// a temporary file (owner-only), synced, renamed over `path`, the directory synced.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(".tmp");
    let temporary = PathBuf::from(temporary);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(&temporary)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&temporary, path)?;
    if let Some(parent) = path.parent() {
        std::fs::File::open(parent)?.sync_all()?;
    }
    Ok(())
}

impl Index {
    /// The rowid through which the index holds every `manifests` row.
    pub(crate) fn covered_through(&self) -> u64 {
        self.coverage().through.0
    }

    /// Writes the snapshot to `path`, unless the one on disk holds every row the index holds
    /// (`None`); `caught_up` is what the caller read from the tables first. Blocking (call it
    /// on the blocking pool), and one save at a time.
    pub(crate) fn write_snapshot(
        &self,
        path: &Path,
        caught_up: usize,
    ) -> Result<Option<SnapshotSaved>, Error> {
        // Held for the whole write (no await inside).
        let _one_at_a_time = self.saving.lock().unwrap_or_else(|p| p.into_inner());
        if self.coverage().through.0 == self.saved_through.load(Ordering::Relaxed) {
            return Ok(None);
        }
        let (bytes, through) = self.encode();
        write_atomically(path, &bytes).map_err(Error::backend)?;
        self.saved_through.store(through, Ordering::Relaxed);
        Ok(Some(SnapshotSaved {
            bytes: bytes.len(),
            caught_up,
            through,
        }))
    }
}
