//! Deleting blob files after their rows: the sweep of uncited uploads, the undoing of a
//! failed upload's promotion, and objects no row names (`strays.rs`). In one process the sweep lock orders them against uploads
//! (`sweep.rs`); on an index several servers share, each batch is also recorded in the
//! transaction that deletes its rows, so that an upload on another server that found one of
//! its files present refuses to record a row for it (`rows/blob_disposals.rs`).
//!
//! A batch deletes files only within its lease ([`LEASE`], less [`MARGIN`] for clocks that
//! disagree): an upload that reads the batch after its lease treats it as done. Files left
//! past the lease have no row: a leftover, like a crash between the rows and the files.

use chrono::{DateTime, Utc};
use weft_api::{ArtifactId, ErrorCode};

use crate::artifacts::handle::Artifacts;
use crate::clock::format_instant;
use crate::error::Error;
use crate::rows::blob_disposals;
use crate::sql::{Connection, Engine};

/// How long a batch may delete files.
const LEASE: chrono::Duration = chrono::Duration::minutes(15);

/// How long before its lease ends a batch stops deleting: more than a removal can take (two
/// requests to the store, each bounded at 120 s with its retries, `blobs/s3.rs`) and clocks
/// disagree by, so no delete lands after the lease, when another server's upload may have
/// found the object and recorded its row.
const MARGIN: chrono::Duration = chrono::Duration::minutes(6);

/// Failed deletions in a row that stop a disposal's deleting (`delete_disposed`).
const FAILURES_IN_A_ROW: u32 = 3;

/// A disposal begun in a transaction: on a shared index its generation and lease.
#[derive(Clone, Copy, Debug)]
pub(super) enum Begun {
    /// One process owns the index (SQLite): the sweep lock is enough.
    Alone,
    /// A batch on a shared index, to be recorded with its digests.
    Batch {
        generation: i64,
        until: DateTime<Utc>,
    },
    /// Another server is deleting a batch's files: dispose of nothing now.
    Busy,
}

impl Begun {
    /// Begins a disposal in the transaction that will delete the rows.
    pub(super) fn begin(c: &impl crate::unit::Conn, now: DateTime<Utc>) -> Result<Self, Error> {
        if c.conn().engine() != Engine::Postgres {
            return Ok(Self::Alone);
        }
        Ok(match blob_disposals::begin(c, &format_instant(now))? {
            Some(generation) => Self::Batch {
                generation,
                until: now + LEASE,
            },
            None => Self::Busy,
        })
    }

    /// Records the batch's digests (after its rows were deleted in the same transaction).
    pub(super) fn record(
        self,
        conn: &Connection,
        now: DateTime<Utc>,
        blobs: &[[u8; 32]],
    ) -> Result<(), Error> {
        match self {
            Self::Batch { generation, until } if !blobs.is_empty() => {
                blob_disposals::record(conn, generation, blobs, now, &format_instant(until))
            }
            _ => Ok(()),
        }
    }
}

/// The refusal of an upload whose stored copy was deleted, as an unused upload, between the
/// moment it found the copy and its row: nothing was recorded, and sending the bytes again
/// stores them.
pub(super) fn swept_meanwhile() -> Error {
    Error::reject(
        ErrorCode::StorageUnavailable,
        "the stored copy of these bytes was deleted as an unused upload while this upload \
         found it; send them again",
    )
}

/// Refuses an upload that only hashed bytes its sender could already read when their blob
/// was disposed of or quarantined (through another server) before its row: its row stays, its
/// bytes are gone or bad. Nothing is recorded, and sending the bytes again stores them.
pub(super) fn not_gone_meanwhile(conn: &Connection, blake3: &ArtifactId) -> Result<(), Error> {
    match crate::rows::blobs::row(conn, &weft_api::Digest::Blake3(*blake3))? {
        Some((_, true)) => Err(Error::reject(
            ErrorCode::StorageUnavailable,
            "the stored copy of these bytes was disposed of or found damaged while this \
             upload hashed them; send them again",
        )),
        _ => Ok(()),
    }
}

/// The blobs of `ids` that no row names.
fn rowless(conn: &Connection, ids: &[ArtifactId]) -> Result<Vec<ArtifactId>, Error> {
    let mut rowless = Vec::new();
    for id in ids {
        if !crate::rows::blobs::exists(conn, id)? {
            rowless.push(*id);
        }
    }
    Ok(rowless)
}

impl Artifacts<'_> {
    /// Deletes the files (and outboards) of the blobs in `ids` that no row names: a failed
    /// upload's promotion, objects a crash or a lost compaction left (`strays.rs`). The caller
    /// holds the sweep lock exclusively, so no upload of this process is between its promotion
    /// and its row. On a shared index the check that no row names a blob and the batch that
    /// names it are one transaction, so an upload on another server that found one of these
    /// files present refuses to record its row. Answers the files deleted.
    pub(super) async fn dispose_rowless(&self, ids: Vec<ArtifactId>) -> Result<usize, Error> {
        if ids.is_empty() {
            return Ok(0);
        }
        let now = self.0.clock.now();
        // Most listed objects have their row: found by a read, outside any lock, so the
        // disposal lock (which every server's uploads fence on) is held only to check again
        // the few that had none. In one process the sweep lock already orders uploads.
        let ids = self.0.db.read(move |conn| rowless(conn, &ids)).await?;
        if ids.is_empty() {
            return Ok(0);
        }
        let (begun, rowless) = if self.0.db.is_shared() {
            self.0
                .db
                .write(move |txn| {
                    let begun = Begun::begin(txn, now)?;
                    if matches!(begun, Begun::Busy) {
                        // Another server is deleting files: these stay for a later round.
                        return Ok((begun, Vec::new()));
                    }
                    let rowless = rowless(txn, &ids)?;
                    let digests: Vec<[u8; 32]> = rowless.iter().map(|id| id.0).collect();
                    begun.record(txn, now, &digests)?;
                    Ok((begun, rowless))
                })
                .await?
        } else {
            (Begun::Alone, ids)
        };
        match self.delete_disposed(begun, &rowless).await? {
            (_, Some(error)) => Err(error),
            (deleted, None) => Ok(deleted.len()),
        }
    }

    /// Deletes the files of a committed disposal (while its lease lasts), then ends its batch.
    /// Answers the files deleted, in `files`' order, and the first failure: a file the store
    /// fails to delete is left (a disposed blob keeps its mark, `disposal_pending`, for a later
    /// round) and the next ones are tried, so one object the store refuses for good stops no
    /// other; [`FAILURES_IN_A_ROW`] failures in a row stop it (a store that is down may take
    /// minutes a request, and the caller holds the sweep lock uploads wait on).
    pub(super) async fn delete_disposed(
        &self,
        begun: Begun,
        files: &[ArtifactId],
    ) -> Result<(Vec<ArtifactId>, Option<Error>), Error> {
        let mut deleted = Vec::with_capacity(files.len());
        let mut failed = None;
        let mut in_a_row = 0;
        for (n, id) in files.iter().enumerate() {
            if let Begun::Batch { until, .. } = begun
                && self.0.clock.now() > until - MARGIN
            {
                tracing::warn!(
                    left = files.len() - n,
                    "a disposal's lease ended: its remaining files stay"
                );
                break;
            }
            match self.0.blobs.remove(id).await {
                Ok(()) => {
                    deleted.push(*id);
                    in_a_row = 0;
                }
                Err(error) => {
                    tracing::warn!(%error, blob = %id, left = files.len() - n, "a disposed blob's file could not be deleted");
                    failed.get_or_insert(error);
                    in_a_row += 1;
                    if in_a_row == FAILURES_IN_A_ROW {
                        break;
                    }
                }
            }
        }
        if let Begun::Batch { generation, .. } = begun
            && !files.is_empty()
        {
            self.0
                .db
                .write(move |txn| blob_disposals::finish(txn, generation))
                .await?;
        }
        Ok((deleted, failed))
    }
}
