//! Resumable uploads, as OCI distribution does them: a session is started, chunks are
//! appended at the durable offset, the offset can be asked for at any time (also after a
//! restart), and the finish verifies the whole object against the claimed digest before it
//! becomes an ordinary blob, with the same uploader row, quotas and sweep as a one-shot upload.
//!
//! Ownership: a session belongs to the Agent and Group of the session that started it, and,
//! when a capability token started it, to that token's lease (LSE-6: tokens are bound to the
//! lease, so a rotated token of the same lease goes on). The Agent's own sessions reach all of
//! its upload sessions; a token reaches only those of its lease. Any other caller is told
//! `not_found`, as if it did not exist (no oracle). Every call re-checks that the Membership
//! still holds a producing role.
//!
//! Hashing: the finish re-hashes the staged object (streaming, memory flat) rather than
//! persisting hasher state at each chunk: neither `blake3::Hasher` nor `sha2::Sha256` can
//! serialize its state, a re-hash costs one sequential read at about 1 GB/s, and it checks
//! the bytes actually on disk, not the bytes we believe we wrote.
//!
//! Concurrency: one request at a time per session (a process-local claim; a second one is
//! refused with `conflict`). The sweep claims a session before it removes it, so it never
//! deletes an object a chunk is being written to. Through several servers (issue #43) the
//! claim is each server's own: two chunks at one offset commit once (`received` must still
//! be the offset), the other answers `upload_offset_mismatch`, and on S3 each wrote an object
//! of its own, only the committed one named by the row (`last_chunk`, `blobs/chunks.rs`).
//! The idle sweep removes a session only if its row is still idle, and a request that streams
//! into a session near the sweep's cutoff marks the row live first (`keep_live`), so a sweep
//! through another server does not remove a session a request is writing (unless that one
//! request streams for longer than half the sweep's cutoff).
//!
//! Long (about 620 lines) because each request on a session (append, finish, cancel) and the
//! sweep check ownership, liveness and the sweep's mark on paths of their own.
//!
//! Crash story: the row is inserted before any byte is written; a chunk is fsynced before the
//! row's `received` moves; the finish deletes the row in the blob row's transaction, after the
//! promotion. Start-up removes objects under `uploads/` that no row names.

use crate::sql::Connection;
use bytes::Bytes;
use futures::Stream;
use weft_api::views::UploadSession;
use weft_api::{Digest, ErrorCode};

use super::upload::{Recorder, UploadOutcome, Uploader, held_bytes, require_uploading_role};
use crate::access::Session;
use crate::acting::Acting;
use crate::artifacts::handle::Artifacts;
use crate::blobs::{Blobs, upload_path};
use crate::clock::format_instant;
use crate::db::Db;
use crate::error::{Error, reject};
use crate::rows;

/// Upload sessions one Agent may hold open at once (running or waiting to be resumed); a
/// session costs a row until it is finished, cancelled or swept, so this bounds what an Agent
/// can make the server keep.
pub(crate) const MAX_SESSIONS_PER_AGENT: u64 = 64;

/// Upload sessions one lease's capability tokens may hold open at once, out of their Agent's
/// [`MAX_SESSIONS_PER_AGENT`]: one lease cannot take them all from the Agent's session and its
/// other leases, which cannot see (or cancel) that lease's sessions.
pub(crate) const MAX_SESSIONS_PER_LEASE: u64 = 16;

/// A session row as its owner sees it.
type Row = rows::upload_sessions::Open;

/// A session's idle clock as a request found it, and the instant it set it to
/// ([`Engine::keep_live`]).
#[derive(Clone, Debug)]
struct Mark {
    previous: String,
    at: String,
}

fn not_found() -> Error {
    reject(ErrorCode::NotFound, "no such upload session is yours")
}

/// Who works on resumable uploads: the Agent's session the bytes count against, the lease a
/// capability token is bound to (`None` for the Agent's own session, which reaches all of its
/// upload sessions), and what must still be live when a change commits (a token's own row,
/// with its owner's session). The operator uploads in one request.
#[derive(Clone, Copy)]
struct Owner<'a> {
    session: &'a Session,
    lease: Option<&'a str>,
    acting: Acting,
}

fn resumable_caller(uploader: Uploader<'_>) -> Result<Owner<'_>, Error> {
    uploader.admitted()?;
    let lease = match uploader {
        Uploader::Token(grant) => Some(grant.lease_id.as_str()),
        Uploader::Admin | Uploader::Agent(_) => None,
    };
    match (uploader.session(), uploader.acting()) {
        (Some(session), Some(acting)) => Ok(Owner {
            session,
            lease,
            acting,
        }),
        _ => Err(reject(
            ErrorCode::Forbidden,
            "resumable uploads belong to an Agent session; the operator uploads with POST /v1/blobs",
        )),
    }
}

/// The session `upload_id` if `owner` reaches it (its Agent and Group; for a token, its
/// lease), and the Membership still holds a producing role.
fn owned(
    conn: &Connection,
    upload_id: &str,
    session: &Session,
    lease: Option<&str>,
) -> Result<Row, Error> {
    require_uploading_role(conn, session)?;
    rows::upload_sessions::owned(
        conn,
        upload_id,
        session.agent_id.as_str(),
        session.group_id.as_str(),
        lease,
    )?
    .ok_or_else(not_found)
}

/// `too_many_uploads` once `open` sessions of one `whose` (agent, lease) reach `max`.
fn room_for_one(open: u64, max: u64, whose: &str) -> Result<(), Error> {
    if open < max {
        return Ok(());
    }
    Err(reject(
        ErrorCode::TooManyUploads,
        format!("at most {max} upload sessions per {whose} may be open; finish or cancel one"),
    ))
}

fn offset_mismatch(start: u64, received: u64) -> Error {
    reject(
        ErrorCode::UploadOffsetMismatch,
        format!(
            "the chunk starts at {start}, but the upload holds {received} bytes: send from {received}"
        ),
    )
}

impl Artifacts<'_> {
    /// Starts a resumable upload for the uploader's Agent in its Group (and, for a capability
    /// token, its lease), at offset 0. The operator is refused (`forbidden`).
    pub async fn start_upload(&self, uploader: Uploader<'_>) -> Result<UploadSession, Error> {
        let owner = resumable_caller(uploader)?;
        let upload_id = format!("up-{}", uuid::Uuid::new_v4().simple());
        let clock = std::sync::Arc::clone(&self.0.clock);
        let (session, lease, acting) = (
            owner.session.clone(),
            owner.lease.map(str::to_owned),
            owner.acting,
        );
        let id = upload_id.clone();
        self.0
            .db
            .write(move |txn| {
                // Judged at the time the job runs, not when it queued (as every write below).
                let now = format_instant(clock.now());
                acting.check(txn, &now)?;
                require_uploading_role(txn, &session)?;
                // The Agent's row held while its sessions are counted: two starts through two
                // servers take turns, so neither cap is passed by counting the same room.
                rows::agents::lock(txn, session.agent_id.as_str())?;
                let open = rows::upload_sessions::count_of_agent(txn, session.agent_id.as_str())?;
                room_for_one(open, MAX_SESSIONS_PER_AGENT, "agent")?;
                if let Some(lease) = &lease {
                    let of_lease = rows::upload_sessions::count_of_lease(
                        txn,
                        session.agent_id.as_str(),
                        lease,
                    )?;
                    room_for_one(of_lease, MAX_SESSIONS_PER_LEASE, "lease")?;
                }
                rows::upload_sessions::insert(
                    txn,
                    &rows::upload_sessions::New {
                        upload_id: &id,
                        agent_id: session.agent_id.as_str(),
                        group_id: session.group_id.as_str(),
                        lease_id: lease.as_deref(),
                        staging_path: upload_path(&id).as_ref(),
                        now: &now,
                    },
                )
            })
            .await?;
        Ok(UploadSession {
            upload_id,
            offset: 0,
        })
    }

    /// The durable offset of an upload session the uploader reaches: its Agent's, and for a
    /// capability token only its lease's (`not_found` for any other).
    pub async fn upload_offset(
        &self,
        upload_id: &str,
        uploader: Uploader<'_>,
    ) -> Result<UploadSession, Error> {
        self.offset_for(upload_id, resumable_caller(uploader)?)
            .await
    }

    async fn offset_for(&self, upload_id: &str, owner: Owner<'_>) -> Result<UploadSession, Error> {
        let (id, session, lease) = (
            upload_id.to_owned(),
            owner.session.clone(),
            owner.lease.map(str::to_owned),
        );
        let row = self
            .0
            .db
            .read(move |conn| owned(conn, &id, &session, lease.as_deref()))
            .await?;
        Ok(UploadSession {
            upload_id: upload_id.to_owned(),
            offset: row.received,
        })
    }

    /// Appends a chunk starting at `start`, which must be the durable offset
    /// (`upload_offset_mismatch` otherwise); the chunk is durable when this returns.
    pub async fn append_upload<S>(
        &self,
        upload_id: &str,
        start: u64,
        body: S,
        uploader: Uploader<'_>,
    ) -> Result<UploadSession, Error>
    where
        S: Stream<Item = Result<Bytes, std::io::Error>> + Send,
    {
        let owner = resumable_caller(uploader)?;
        // As for a finish: a session the caller does not reach is `not_found` before the
        // claim is asked, whoever is working on it.
        self.offset_for(upload_id, owner).await?;
        let _claim = self.0.upload_claims.claim(upload_id)?;
        let received = self.append_claimed(upload_id, start, body, owner).await?;
        Ok(UploadSession {
            upload_id: upload_id.to_owned(),
            offset: received,
        })
    }

    /// The upload session `owner` reaches, and the bytes its Agent holds in unfinished uploads.
    async fn owned_and_held(&self, upload_id: &str, owner: Owner<'_>) -> Result<(Row, u64), Error> {
        let (id, looking, lease) = (
            upload_id.to_owned(),
            owner.session.clone(),
            owner.lease.map(str::to_owned),
        );
        let limits = self.0.limits.clone();
        let largest_upload = self.0.max_upload_bytes;
        self.0
            .db
            .read(move |conn| {
                let row = owned(conn, &id, &looking, lease.as_deref())?;
                let held = held_bytes(conn, looking.agent_id.as_str(), &limits, largest_upload)?;
                Ok((row, held))
            })
            .await
    }

    /// Marks session `upload_id` (read as `row`) live, for `acting`, once the request is
    /// admitted and before it streams into the session or reads it back, when it is within
    /// half the idle sweep's cutoff of being swept: the claim is this server's own, so a sweep
    /// through another server knows of the request only by the row. The sweep removes a
    /// session only if it is still idle (`upload_sessions::delete_idle`): marked first, it
    /// stays; removed first, the request answers `not_found` before it writes a byte. A
    /// session that moved more recently costs no write. A request refused after the mark
    /// takes it back ([`Self::unmark`]), so a refusal leaves the row as it was. A request that
    /// streams for longer than half the cutoff (12 h by default) can still find its session
    /// swept under it.
    async fn keep_live(
        &self,
        upload_id: &str,
        row: &Row,
        acting: Acting,
    ) -> Result<Option<Mark>, Error> {
        let now = self.0.clock.now();
        if row.updated_at >= format_instant(now - self.0.unpublished_blob_ttl / 2) {
            return Ok(None);
        }
        let (id, received, previous) = (upload_id.to_owned(), row.received, row.updated_at.clone());
        let clock = std::sync::Arc::clone(&self.0.clock);
        self.0
            .db
            .write(move |txn| {
                let now = format_instant(clock.now());
                acting.check(txn, &now)?;
                if rows::upload_sessions::touch(txn, &id, received, &now)? {
                    return Ok(Some(Mark { previous, at: now }));
                }
                Err(match rows::upload_sessions::received(txn, &id)? {
                    Some(at) => offset_mismatch(received, at),
                    None => not_found(),
                })
            })
            .await
    }

    /// Passes `outcome` on; when it is a refusal, first takes back `mark` (the row's idle
    /// clock as it was, unless the row moved since). A failure to take it back only leaves
    /// the session idle from later: it is logged.
    async fn unmark<T>(
        &self,
        upload_id: &str,
        mark: Option<Mark>,
        outcome: Result<T, Error>,
    ) -> Result<T, Error> {
        if let (Err(_), Some(mark)) = (&outcome, mark) {
            let id = upload_id.to_owned();
            let undone = self
                .0
                .db
                .write(move |txn| {
                    rows::upload_sessions::untouch(txn, &id, &mark.at, &mark.previous)
                })
                .await;
            if let Err(error) = undone {
                tracing::warn!(upload_id, %error, "could not take back a refused request's mark");
            }
        }
        outcome
    }

    /// The body of [`Engine::append_upload`], for a caller holding the claim.
    async fn append_claimed<S>(
        &self,
        upload_id: &str,
        start: u64,
        body: S,
        owner: Owner<'_>,
    ) -> Result<u64, Error>
    where
        S: Stream<Item = Result<Bytes, std::io::Error>> + Send,
    {
        let (session, acting) = (owner.session, owner.acting);
        let (row, held) = self.owned_and_held(upload_id, owner).await?;
        if start != row.received {
            return Err(offset_mismatch(start, row.received));
        }
        let max_chunks = self.0.limits.max_upload_chunks();
        if row.chunks >= max_chunks {
            return Err(reject(
                ErrorCode::BadRequest,
                format!(
                    "an upload takes at most {max_chunks} chunks: finish it, or send larger ones"
                ),
            ));
        }
        let permit = self
            .0
            .limits
            .admit_upload(Some(session.agent_id.as_str()), held)?;
        let mark = self.keep_live(upload_id, &row, acting).await?;
        let counted = permit.metered(body);
        let room = self.0.max_upload_bytes.saturating_sub(row.received);
        let path = object_store::path::Path::from(row.staging_path.as_str());
        let streamed = self
            .0
            .blobs
            .append_upload(
                &path,
                row.received,
                row.last_chunk.as_deref(),
                counted,
                room,
            )
            .await;
        let (appended, chunk) = self.unmark(upload_id, mark.clone(), streamed).await?;
        let clock = std::sync::Arc::clone(&self.0.clock);
        let id = upload_id.to_owned();
        let before = row.received;
        let named = chunk.clone();
        let moved = self
            .0
            .db
            .write(move |txn| {
                // The chunk may have streamed for long: its caller must still be live.
                let now = format_instant(clock.now());
                acting.check(txn, &now)?;
                let moved = rows::upload_sessions::advance(
                    txn,
                    &id,
                    before,
                    appended,
                    named.as_deref(),
                    &now,
                )?;
                // The claim keeps this server's other requests away; a chunk at the same
                // offset through another server (a client retrying there) commits first or
                // finds the row moved: the session is where that one left it.
                if moved {
                    Ok(())
                } else {
                    let now_at = rows::upload_sessions::received(txn, &id)?;
                    Err(match now_at {
                        Some(at) => offset_mismatch(before, at),
                        None => not_found(),
                    })
                }
            })
            .await;
        // The chunk counted as in flight until its row said so or nothing did: dropped
        // before, another upload of the Agent's could be admitted in between without it.
        drop(permit);
        if let Err(error) = moved {
            // The row still says `before`: the object says so too (issue #15, fault injection).
            if let Err(cut) = self
                .0
                .blobs
                .cut_upload(&path, before, chunk.as_deref())
                .await
            {
                tracing::warn!(%path, %cut, "could not cut an uncommitted chunk back");
            }
            return self.unmark(upload_id, mark, Err(error)).await;
        }
        Ok(before + appended)
    }

    /// Appends an optional last chunk, then verifies the whole upload against `expected` and
    /// records it as a blob exactly as a one-shot upload would. On a mismatch nothing is kept:
    /// the session and its bytes are removed.
    pub async fn finish_upload<S>(
        &self,
        upload_id: &str,
        expected: Digest,
        last_chunk: Option<(u64, S)>,
        uploader: Uploader<'_>,
    ) -> Result<UploadOutcome, Error>
    where
        S: Stream<Item = Result<Bytes, std::io::Error>> + Send,
    {
        let owner = resumable_caller(uploader)?;
        let (session, acting) = (owner.session, owner.acting);
        // A session the caller does not reach (or none) is `not_found` before the claim is
        // asked, so a request its owner is making shows nowhere (no `conflict` for an id not
        // yours).
        self.offset_for(upload_id, owner).await?;
        let _claim = self.0.upload_claims.claim(upload_id)?;
        if let Some((start, body)) = last_chunk {
            let (row, _) = self.owned_and_held(upload_id, owner).await?;
            if start < row.received {
                let mark = self.keep_live(upload_id, &row, acting).await?;
                // A finish re-sent after its last chunk was made durable but its answer was
                // lost (issue #40): the same chunk, ending exactly at the durable offset, is
                // already there. Anything else is the usual mismatch. The digest check below
                // still covers every byte.
                let path = object_store::path::Path::from(row.staging_path.as_str());
                let holds = self
                    .0
                    .blobs
                    .upload_holds(&path, start, row.received, row.last_chunk.as_deref(), body)
                    .await
                    .and_then(|holds| {
                        holds
                            .then_some(())
                            .ok_or_else(|| offset_mismatch(start, row.received))
                    });
                self.unmark(upload_id, mark, holds).await?;
            } else {
                self.append_claimed(upload_id, start, body, owner).await?;
            }
        }
        let (row, held) = self.owned_and_held(upload_id, owner).await?;
        // The finish holds a slot like any upload: it reads and hashes the whole object.
        let permit = self.0.limits.admit_upload(
            Some(session.agent_id.as_str()),
            held.saturating_sub(row.received),
        )?;
        let mark = self.keep_live(upload_id, &row, acting).await?;
        let path = object_store::path::Path::from(row.staging_path.as_str());
        let hashed = self
            .0
            .blobs
            .hash_upload(&path, row.received, row.last_chunk.as_deref())
            .await;
        let staged = self.unmark(upload_id, mark.clone(), hashed).await?;
        let digests = staged.digests;
        let matches = match expected {
            Digest::Blake3(id) => id == digests.blake3,
            Digest::Sha256(sha) => sha == digests.sha256,
        };
        if !matches {
            let id = upload_id.to_owned();
            let clock = std::sync::Arc::clone(&self.0.clock);
            let discarded = self
                .0
                .db
                .write(move |txn| {
                    // The re-hash may have taken long: an ended caller discards nothing.
                    acting.check(txn, &format_instant(clock.now()))?;
                    rows::upload_sessions::delete(txn, &id)
                })
                .await;
            self.unmark(upload_id, mark, discarded).await?;
            drop(staged);
            // The session is gone, committed; an object left here is removed at the next start.
            if let Err(error) = self.0.blobs.remove_upload(&path).await {
                tracing::warn!(%path, %error, "could not remove a discarded upload's object");
            }
            return Err(reject(
                ErrorCode::DigestMismatch,
                format!(
                    "the upload hashes to {} / {}, not {expected}; it was discarded",
                    digests.blake3, digests.sha256
                ),
            ));
        }
        let outcome = self
            .record_blob(
                digests,
                Some(staged),
                Recorder {
                    reader: &session.reader(),
                    acting: Some(acting),
                },
                Some(upload_id.to_owned()),
            )
            .await;
        drop(permit);
        self.unmark(upload_id, mark, outcome).await
    }

    /// Cancels an upload session: its row and its bytes go.
    pub async fn cancel_upload(
        &self,
        upload_id: &str,
        uploader: Uploader<'_>,
    ) -> Result<(), Error> {
        let owner = resumable_caller(uploader)?;
        // As for a finish: not yours is `not_found`, whoever is working on it.
        self.offset_for(upload_id, owner).await?;
        let _claim = self.0.upload_claims.claim(upload_id)?;
        let (id, looking, lease, acting) = (
            upload_id.to_owned(),
            owner.session.clone(),
            owner.lease.map(str::to_owned),
            owner.acting,
        );
        let clock = std::sync::Arc::clone(&self.0.clock);
        let path = self
            .0
            .db
            .write(move |txn| {
                acting.check(txn, &format_instant(clock.now()))?;
                let row = owned(txn, &id, &looking, lease.as_deref())?;
                rows::upload_sessions::delete(txn, &id)?;
                Ok(row.staging_path)
            })
            .await?;
        // The row is gone, committed: the cancel happened. An object that could not be removed
        // now is one no row names, which the next start removes; the answer stays a success.
        let object = object_store::path::Path::from(path.as_str());
        if let Err(error) = self.0.blobs.remove_upload(&object).await {
            tracing::warn!(%object, %error, "could not remove a cancelled upload's object");
        }
        Ok(())
    }

    /// Removes upload sessions idle since before `cutoff` (rows, then objects), skipping any a
    /// request is working on. Returns how many went.
    pub(crate) async fn sweep_upload_sessions(&self, cutoff: String) -> Result<u64, Error> {
        let idle = self
            .0
            .db
            .read({
                let cutoff = cutoff.clone();
                move |conn| rows::upload_sessions::idle_since(conn, &cutoff)
            })
            .await?;
        self.0.faults.upload_sweeps().pass().await;
        let mut n_removed = 0;
        for (upload_id, path) in idle {
            let Some(_claim) = self.0.upload_claims.try_claim(&upload_id) else {
                continue;
            };
            let id = upload_id.clone();
            let idle = cutoff.clone();
            let removed = self
                .0
                .db
                .write(move |txn| rows::upload_sessions::delete_idle(txn, &id, &idle))
                .await?;
            if !removed {
                continue;
            }
            self.0
                .blobs
                .remove_upload(&object_store::path::Path::from(path.as_str()))
                .await?;
            n_removed += 1;
        }
        Ok(n_removed)
    }
}

/// Start-up reconciliation: objects under `uploads/` that no session row names (a crash
/// between the sweep's or the cancel's row deletion and its file deletion) are removed. Runs
/// before the server accepts requests.
pub(crate) async fn remove_orphan_uploads(db: &Db, blobs: &Blobs) -> Result<usize, Error> {
    let files = blobs.local_upload_files()?;
    if files.is_empty() {
        return Ok(0);
    }
    let orphans = db
        .read(move |conn| {
            let mut orphans = Vec::new();
            for (path, name) in files {
                if !rows::upload_sessions::exists(conn, &name)? {
                    orphans.push(path);
                }
            }
            Ok(orphans)
        })
        .await?;
    for path in &orphans {
        tracing::warn!(path = %path.display(), "removing an upload object with no session row");
        std::fs::remove_file(path).map_err(Error::backend)?;
    }
    Ok(orphans.len())
}
