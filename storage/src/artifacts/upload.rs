//! Uploads: a byte stream is hashed (BLAKE3 + SHA-256) while it is staged, promoted to its
//! digest path only when the digests check out, and only then recorded as a blob row.
//!
//! Who may upload, and how much: only a role that produces (worker, coordinator, reviewer; an
//! auditor only reads) in the session's Group, within the admission limits of `limits.rs`
//! (uploads in flight per Agent and in all, and bytes an Agent holds uploaded but uncited).
//!
//! No timing oracle: bytes the uploader cannot already see take the full path (staged,
//! fsynced, promoted) even when another Group holds them, so they cost what new bytes cost;
//! only bytes it may already see take the hash-only fast path. A HEAD reads alike either way.

use crate::sql::Connection;
use bytes::Bytes;
use futures::Stream;
use weft_api::session::Role;
use weft_api::{Digest, Digests, ErrorCode};

use super::blob_row;
use crate::access::{Reader, Session, can_see_blob, membership};
use crate::acting::Acting;
use crate::artifacts::handle::Artifacts;
use crate::blobs::Staged;
use crate::clock::format_instant;
use crate::error::{Error, reject};

/// What an upload did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UploadOutcome {
    pub digests: Digests,
    /// `true` when the uploader could already see these bytes before this upload. Only then
    /// does the server say "already present": anything else would tell one Group what
    /// another holds.
    pub already_visible: bool,
}

/// Who uploads: the operator (admin token), or an Agent through its session, or through a
/// capability token (scope `blob:write`, checked by the caller) as its lease's owner; the
/// Agent's roles in the session's Group decide whether it may.
#[derive(Clone, Copy, Debug)]
pub enum Uploader<'a> {
    Admin,
    Agent(&'a Session),
    Token(&'a crate::access::Grant),
}

impl<'a> Uploader<'a> {
    /// What this uploader may see (for "already present" and the fast path).
    fn reader(&self) -> Reader {
        match self.session() {
            None => Reader::Admin,
            Some(session) => session.reader(),
        }
    }

    /// A capability token uploads only with `blob:write` (LSE-6); the routes check it before
    /// the body, and so does the storage, whoever calls it.
    pub(crate) fn admitted(&self) -> Result<(), Error> {
        match self {
            Self::Token(grant) => grant.require(weft_api::work::views::TokenScope::BlobWrite),
            Self::Admin | Self::Agent(_) => Ok(()),
        }
    }

    /// The Agent's session the bytes count against: a token's is its lease owner's.
    pub(crate) fn session(&self) -> Option<&'a Session> {
        match *self {
            Self::Admin => None,
            Self::Agent(session) => Some(session),
            Self::Token(grant) => Some(grant.session()),
        }
    }

    /// What must still be live when the blob is recorded (the operator's token is not
    /// revoked but replaced with the server).
    pub(crate) fn acting(&self) -> Option<Acting> {
        match *self {
            Self::Admin => None,
            Self::Agent(session) => Some(Acting::session(session)),
            Self::Token(grant) => Some(Acting::token(grant)),
        }
    }
}

/// Who records a blob: what it may see, and what must still be live (its session or
/// capability token; nothing for the operator) when the blob is recorded.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Recorder<'a> {
    pub(crate) reader: &'a Reader,
    pub(crate) acting: Option<Acting>,
}

/// Roles that produce bytes: workers (artifacts), coordinators (plans, context), reviewers
/// (Evidence attachments). Auditors and any role added later only read, so they may not upload.
const UPLOADING_ROLES: [Role; 3] = [Role::Worker, Role::Coordinator, Role::Reviewer];

/// SQL condition, on a blob digest column `{0}`, that no manifest, Evidence, schema or
/// snapshot cites it: such a blob counts against its uploaders' cap and is swept when old.
pub(crate) fn uncited(column: &str) -> String {
    format!(
        "NOT {} AND NOT {} AND NOT {} AND NOT {}",
        crate::rows::manifests::cites_column(column),
        crate::rows::evidence_artifacts::cites_column(column),
        crate::rows::schemas::cites_column(column),
        crate::rows::snapshots::cites_column(column),
    )
}

/// Refuses a session whose Membership holds no producing role (auditors only read).
pub(crate) fn require_uploading_role(conn: &Connection, session: &Session) -> Result<(), Error> {
    let roles = membership(conn, session.group_id.as_str(), session.agent_id.as_str())?
        .map(|(roles, _)| roles)
        .unwrap_or_default();
    if roles.iter().any(|role| UPLOADING_ROLES.contains(role)) {
        Ok(())
    } else {
        Err(reject(
            ErrorCode::Forbidden,
            "only a worker, coordinator or reviewer of the session's group may upload",
        ))
    }
}

/// What an Agent holds without a citation: its uncited blobs and its open resumable upload
/// sessions' bytes (`resumable.rs`), so chunking is no way around the cap (0 without a cap:
/// nothing is read). The blobs are the bound `limits` keeps from the Agent's last exact sum
/// while it is far enough below the cap (`Limits::uncited_bound`), else their exact sum (it
/// walks every upload of the Agent), kept for the next. The sessions' bytes and the Agent's
/// upload total (`rows/agent_upload_totals.rs`) are read in one statement (a session ends in
/// the transaction that adds its blob to the total: counted on one side or the other), the
/// exact sum after it, so an upload that commits between them is counted twice, never not
/// at all.
pub(crate) fn held_bytes(
    conn: &Connection,
    agent_id: &str,
    limits: &crate::limits::Limits,
    largest_upload: u64,
) -> Result<u64, Error> {
    if !limits.caps_uncited() {
        return Ok(0);
    }
    let (sessions, total) = crate::rows::upload_sessions::held_with(
        conn,
        agent_id,
        crate::rows::agent_upload_totals::OF_AGENT,
    )?;
    let blobs = match limits.uncited_bound(agent_id, total, largest_upload) {
        Some(bound) => bound,
        None => {
            let exact = unpublished_bytes(conn, agent_id)?;
            limits.set_uncited_bound(agent_id, exact, total);
            exact
        }
    };
    Ok(blobs.saturating_add(sessions))
}

/// Bytes `agent_id` uploaded that nothing cites yet.
fn unpublished_bytes(conn: &Connection, agent_id: &str) -> Result<u64, Error> {
    crate::rows::blobs::uploaded_bytes_where(conn, agent_id, &uncited("blobs.blake3"))
}

/// Whether the transaction that records a blob also cites it (a publication of its bytes),
/// so it never counts against its uploader's uncited bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cited {
    Not,
    InTheSameTransaction,
}

/// What the upload needs to know before it reads the body.
struct Before {
    /// The claimed digest is stored, healthy, and the uploader may already see it.
    known_and_visible: bool,
    stored_unpublished: u64,
}

impl Artifacts<'_> {
    /// Streams `body` into the store. With `expected`, the computed digest must match it.
    /// Only producing roles may upload, within the admission limits of `Options::quotas`.
    pub async fn upload<S>(
        &self,
        body: S,
        expected: Option<Digest>,
        uploader: Uploader<'_>,
    ) -> Result<UploadOutcome, Error>
    where
        S: Stream<Item = Result<Bytes, std::io::Error>> + Send,
    {
        uploader.admitted()?;
        let reader = uploader.reader();
        let session = uploader.session().cloned();
        let looking = reader.clone();
        // The exact uncited sum walks every upload of the Agent; a bound kept in memory
        // stands in for it while it is far enough below the cap (issue #15: it made each
        // upload cost the Agent's history).
        let limits = self.0.limits.clone();
        let largest_upload = self.0.max_upload_bytes;
        let before = self
            .0
            .db
            .read(move |conn| {
                let mut stored_unpublished = 0;
                if let Some(session) = &session {
                    require_uploading_role(conn, session)?;
                    let agent = session.agent_id.as_str();
                    stored_unpublished = held_bytes(conn, agent, &limits, largest_upload)?;
                }
                let known_and_visible = match &expected {
                    Some(digest) => match blob_row(conn, digest)? {
                        Some((digests, false)) => can_see_blob(conn, &looking, &digests.blake3)?,
                        _ => false,
                    },
                    None => false,
                };
                Ok(Before {
                    known_and_visible,
                    stored_unpublished,
                })
            })
            .await?;
        let agent = uploader.session().map(|session| session.agent_id.as_str());
        let permit = self
            .0
            .limits
            .admit_upload(agent, before.stored_unpublished)?;
        let counted = permit.metered(body);
        // Only bytes the uploader may already see skip staging. Bytes another Group holds are
        // staged, fsynced and promoted like new bytes (promotion then finds them present and
        // drops the copy), so the answer takes as long as for new bytes.
        let (digests, staged) = if before.known_and_visible {
            let digests = self
                .0
                .blobs
                .hash_only(counted, self.0.max_upload_bytes)
                .await?;
            self.0.upload_counters.hashed_only();
            (digests, None)
        } else {
            let staged = self
                .0
                .blobs
                .stage(counted, self.0.max_upload_bytes, self.0.inline_blob_bytes)
                .await?;
            self.0.upload_counters.staged(staged.digests.size);
            (staged.digests, Some(staged))
        };
        if let Some(expected) = expected
            && !expected.names(&digests.blake3, &digests.sha256)
        {
            // `staged` is dropped here, which deletes the staged bytes.
            return Err(reject(
                ErrorCode::DigestMismatch,
                format!(
                    "the body hashes to {} / {}, not {expected}",
                    digests.blake3, digests.sha256
                ),
            ));
        }
        let by = Recorder {
            reader: &reader,
            acting: uploader.acting(),
        };
        let outcome = self.record_blob(digests, staged, by, None).await;
        drop(permit);
        outcome
    }

    /// Promotes `staged` (if any) and records the blob and its uploader. `finishing` names a
    /// resumable upload session whose row goes in the same transaction as the blob row.
    pub(crate) async fn record_blob(
        &self,
        digests: Digests,
        staged: Option<Staged>,
        by: Recorder<'_>,
        finishing: Option<String>,
    ) -> Result<UploadOutcome, Error> {
        let already_visible = self
            .record_blob_and(digests, staged, by, finishing, Cited::Not, |_, visible| {
                Ok(visible)
            })
            .await?;
        Ok(UploadOutcome {
            digests,
            already_visible,
        })
    }

    /// [`Engine::record_blob`], and `then` in the same transaction after the blob's rows
    /// (given whether the uploader could already see the blob; `false` when `cited`, which
    /// does not ask): a publication of the bytes
    /// (`with_content.rs`) commits with them or not at all, and a failed `then` undoes the
    /// promotion as a failed commit does. Answers what `then` answered.
    pub(crate) async fn record_blob_and<T: Send + 'static>(
        &self,
        digests: Digests,
        staged: Option<Staged>,
        by: Recorder<'_>,
        finishing: Option<String>,
        cited: Cited,
        then: impl FnOnce(&crate::unit::Tx<'_>, bool) -> Result<T, Error> + Send + 'static,
    ) -> Result<T, Error> {
        // The sweep of uncited blobs deletes rows and then files; holding this shared guard
        // from promotion to the row keeps it from deleting a file this upload just found
        // present and is about to record.
        let Recorder {
            reader: uploader,
            acting,
        } = by;
        let uploader_group = match uploader {
            Reader::Agent { group_id, .. } => Some(group_id.to_string()),
            Reader::Admin => None,
        };
        let not_swept = self.0.sweep_lock.read().await;
        // What the index says of the blob now: read before a file is promoted (which needs
        // it), else in the transaction that records the blob (one hop fewer for small ones).
        let blake3 = digests.blake3;
        let before = move |conn: &Connection, reader: &Reader| -> Result<(bool, bool), Error> {
            let row = blob_row(conn, &Digest::Blake3(blake3))?;
            // Whether the uploader could already see the bytes only decides a plain upload's
            // 200 or 201; a publication of its bytes answers neither, so it skips the look-ups
            // (random index pages in the writer's transaction). A plain upload pays them
            // whether or not the bytes are new: what another Group holds costs what new
            // bytes cost (the header above).
            let visible = match cited {
                Cited::InTheSameTransaction => false,
                Cited::Not => can_see_blob(conn, reader, &blake3)?,
            };
            Ok((matches!(row, Some((_, true))), visible))
        };
        let mut inline = None;
        let mut read_before = None;
        // The disposals of blob files this upload had seen before promoting its bytes (on an
        // index several servers share: `artifacts/disposal.rs`).
        let mut seen_disposals = None;
        let mut promoted = false;
        if let Some(mut staged) = staged {
            match staged.inline.take() {
                // Small bytes go into the index with their row, below.
                Some(bytes) => inline = Some(bytes),
                // Blob first, index second. A quarantined blob is replaced by the good bytes.
                None => {
                    let reader = uploader.clone();
                    let at = format_instant(self.0.clock.now());
                    let ((quarantined, visible), disposals) = self
                        .0
                        .db
                        .read(move |conn| {
                            Ok((
                                before(conn, &reader)?,
                                crate::rows::blob_disposals::seen(conn, &at)?,
                            ))
                        })
                        .await?;
                    read_before = Some((quarantined, visible));
                    seen_disposals = Some(disposals);
                    promoted = self.0.blobs.promote(staged, quarantined).await?;
                }
            }
        }
        let session_object = finishing.as_deref().map(crate::blobs::upload_path);
        let clock = std::sync::Arc::clone(&self.0.clock);
        let uploader = uploader.clone();
        let generation = self.0.hot.generation();
        let hot = inline.clone();
        let repairs = std::sync::Arc::clone(&self.0.repairs);
        // Bytes only hashed (the uploader could see them when it began) rely on the row
        // found then: it must still be there when this one is written.
        let hashed_only = inline.is_none() && read_before.is_none() && !promoted;
        self.0.faults.promoted().pass().await;
        // The uploader's Group's lane (`db/writer.rs`); the operator's in the first. Bytes
        // that repair a quarantined blob append `artifact.repaired` to every Group that
        // published it: that job runs with no lane, so before any Group job of its batch
        // takes a lock, and takes every Group's lock it needs at once, in Group order (the
        // order every batch and every quarantine takes them), then ends its transaction
        // (issue #43). A file's repair is known before (read above); small bytes learn it
        // under their Group's lock, and then run again in order (`Db::write_in_or_in_order`).
        let repairs_file = read_before.is_some_and(|(quarantined, _)| quarantined) && promoted;
        let lane = uploader_group.clone().filter(|_| !repairs_file);
        // Taken by the run that records the blob (the first run to get that far).
        let then = std::sync::Mutex::new(Some(then));
        let job = move |txn: &crate::unit::Tx<'_>, in_order: bool| {
            // The Groups that published the blob, locked with the uploader's, in order.
            let mut published = None;
            if repairs_file || in_order {
                let groups_of = crate::rows::manifests::groups_of(txn, &digests.blake3)?;
                let mut groups = groups_of.clone();
                groups.extend(uploader_group.clone());
                groups.sort();
                groups.dedup();
                for group in &groups {
                    crate::rows::groups::lock(txn, group)?;
                }
                published = Some(groups_of);
            }
            // Bytes may have streamed for long: the caller must still be live now, or
            // nothing of them is recorded (LSE-7; an ended caller hears why, first), under
            // its Group's lock (PostgreSQL), so no fence commits between check and record.
            if let Some(group) = &uploader_group {
                crate::rows::groups::lock(txn, group)?;
            }
            // Judged and stamped at the time the locks are held: a wait for another server's
            // batch may be long, and a caller that died meanwhile must not record, nor an
            // `artifact.repaired` be stamped before the Events committed ahead of it.
            let now = clock.now();
            // The Group's quota, read with the liveness check (one round trip on PostgreSQL).
            let quota = super::quota::settings_ahead(txn, &uploader)?;
            if let Some(acting) = &acting {
                acting.check(txn, &format_instant(now))?;
            }
            // Another server deleted this blob's rows and is deleting, or has deleted, the
            // file this upload may have found present: record nothing; a retry stores the
            // bytes again.
            if let Some(seen) = seen_disposals
                && crate::rows::blob_disposals::disposed_since(txn, seen, &blake3.0)?
            {
                return Err(super::disposal::swept_meanwhile());
            }
            if hashed_only {
                crate::rows::blob_disposals::fence(txn)?;
                if crate::rows::blobs::inline_id(txn, &blake3)?.is_none() {
                    return Err(super::disposal::swept_meanwhile());
                }
                super::disposal::not_gone_meanwhile(txn, &blake3)?;
            }
            // The blob's inline copy as it is now (nothing is written before `record_row`),
            // sent ahead: it travels with the reads below.
            let inline_now = crate::rows::blobs::inline_id_ahead(txn, &blake3)?;
            // The Group's quota (issue #46): read before any row, held after (`quota.rs`).
            let owed = super::quota::needs(txn, &uploader, &digests, quota)?;
            let (quarantined, already_visible) = match read_before {
                Some(read) => read,
                None => before(txn, &uploader)?,
            };
            // Only bytes this call wrote can repair a quarantined blob: bytes that were
            // only hashed (the blob was healthy when the upload began) repair nothing.
            let repair = quarantined && (inline.is_some() || promoted);
            // Only a run holding every publishing Group's lock may repair (it appends there).
            let repairing = match (repair, published) {
                (true, None) => return Err(Error::InOrder),
                (repair, published) => published.filter(|_| repair),
            };
            record_row(txn, &digests, now, (inline.as_deref(), inline_now), repair)?;
            // Pending from here until the guard, delivered with the answer after the
            // commit, is dropped: no read of the replaced copy quarantines the repaired
            // blob, whether it began earlier or its snapshot predates the commit
            // (`repairs.rs`).
            let pending = repair.then(|| repairs.begin(digests.blake3));
            // Every Group that heard of the quarantine hears of the repair (issue #10
            // finding 9c).
            let repaired = repair && crate::rows::blobs::repair(txn, &digests.blake3, now)?;
            if let (true, Some(groups)) = (repaired, &repairing) {
                super::repair::append_repaired(txn, digests.blake3, now, groups)?;
                // Bytes back after a disposal count again for every Group citing them: no
                // quota bound counted before holds (`quota.rs`).
                crate::rows::usage_epoch::advance(txn)?;
            }
            if let Some(owed) = owed {
                super::quota::admit(txn, &digests, owed, repaired)?;
            }
            if let Some(upload_id) = &finishing {
                crate::rows::upload_sessions::delete(txn, upload_id)?;
            }
            // A publication of its bytes writes no uploader row: its manifest, committed
            // in this transaction or nothing is, is what lets the publisher see the bytes,
            // keeps them from the sweep and off its uncited bytes; the row would only add
            // a random page of a digest-keyed B-tree to every small publication's commit.
            if let (
                Reader::Agent {
                    agent_id, group_id, ..
                },
                Cited::Not,
            ) = (&uploader, cited)
            {
                // `uploaded_at` moves with every upload: the sweep keeps a blob someone
                // uploaded recently, however old its first copy is.
                crate::rows::blob_uploaders::record(
                    txn,
                    &digests.blake3,
                    agent_id.as_str(),
                    group_id.as_str(),
                    now,
                )?;
                // Every server's bound on the uploader's uncited bytes grows by it (`limits.rs`).
                crate::rows::agent_upload_totals::add(
                    txn,
                    agent_id.as_str(),
                    group_id.as_str(),
                    digests.size,
                )?;
            }
            let then = then
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take()
                .ok_or_else(|| {
                    Error::backend(std::io::Error::other("an upload's job recorded twice"))
                })?;
            then(txn, already_visible).map(|answer| (answer, pending))
        };
        let written = self.0.db.write_in_or_in_order(lane.as_deref(), job).await;
        let answer = match written {
            Ok((answer, _ended)) => answer,
            Err(error) => {
                // Nothing of a failed upload stays (issue #15, fault injection): the blob this
                // call promoted goes (a session's object was linked, not moved: kept for the retry).
                if promoted {
                    drop(not_swept);
                    self.undo_promotion(digests.blake3).await;
                }
                return Err(error);
            }
        };
        drop(not_swept);
        // Just hashed on the way in: a reader soon after is answered from memory (`hot.rs`).
        if let Some(bytes) = hot {
            self.0
                .hot
                .insert(crate::engine::hot::HotBlob { digests, bytes }, generation);
        }
        if let Some(object) = &session_object
            && let Err(error) = self.0.blobs.remove_upload(object).await
        {
            // Its row is gone: start-up removes the object if this could not.
            tracing::warn!(%object, %error, "could not remove a finished upload's object");
        }
        Ok(answer)
    }

    /// Removes the blob a failed upload promoted, unless a row names it by now: another
    /// upload of the same bytes may have found it present and recorded it. The sweep's
    /// exclusive guard waits out every upload between its promotion and its row.
    ///
    /// On an index several servers share, the removal is a disposal of one blob recorded
    /// with the check that no row names it (`disposal.rs`): an upload of the same bytes on
    /// another server that found the file present then refuses to record its row.
    async fn undo_promotion(&self, id: weft_api::ArtifactId) {
        let _alone = self.0.sweep_lock.write().await;
        if let Err(error) = self.dispose_rowless(vec![id]).await {
            // Left as an object no row names: start-up or the sweep of strays removes it.
            tracing::error!(%id, %error, "could not undo the promotion of a failed upload");
        }
    }

    /// The digests of a blob if `reader` may know it exists (it uploaded it, or it is
    /// published in one of the reader's Groups).
    pub async fn blob(&self, digest: Digest, reader: &Reader) -> Result<Option<Digests>, Error> {
        let reader = reader.clone();
        self.0
            .db
            .read(move |conn| {
                let Some((digests, _)) = blob_row(conn, &digest)? else {
                    // Another Group's blob's reads, on no bytes: timing tells nothing (#40).
                    can_see_blob(conn, &reader, &weft_api::ArtifactId([0; 32]))?;
                    return Ok(None);
                };
                Ok(can_see_blob(conn, &reader, &digests.blake3)?.then_some(digests))
            })
            .await
    }
}

/// The blob's inline copy as the job read it ahead: no row (`None`), no copy, or its id
/// (`rows::blobs::inline_id_ahead`).
type InlineNow = crate::sql::Ahead<Option<Option<i64>>, Error>;

/// Writes blob `digests`' row, and its inline copy when `inline` holds its (verified) bytes:
/// a new blob gets both; a blob stored as a file gains the copy; an intact copy is kept.
/// `repair` (a quarantined blob, and this call wrote verified bytes): the copy is replaced
/// by `inline`, or dropped when the bytes went to a file, which reads then use.
fn record_row(
    txn: &crate::unit::Tx<'_>,
    digests: &Digests,
    now: chrono::DateTime<chrono::Utc>,
    (inline, inline_now): (Option<&[u8]>, InlineNow),
    repair: bool,
) -> Result<(), Error> {
    use crate::rows::{blobs, inline_bytes};
    let blake3 = &digests.blake3;
    match (inline_now.get(txn)?, inline) {
        (None, inline) => {
            let inline_id = inline
                .map(|bytes| inline_bytes::insert(txn, bytes))
                .transpose()?;
            blobs::insert(txn, digests, now, inline_id)?;
        }
        (Some(None), Some(bytes)) => {
            let inline_id = inline_bytes::insert(txn, bytes)?;
            blobs::set_inline(txn, blake3, inline_id)?;
        }
        (Some(Some(inline_id)), Some(bytes)) if repair => {
            inline_bytes::replace(txn, inline_id, bytes)?;
        }
        (Some(Some(inline_id)), None) if repair => {
            blobs::clear_inline(txn, blake3)?;
            inline_bytes::delete(txn, inline_id)?;
        }
        (Some(_), _) => {}
    }
    Ok(())
}
