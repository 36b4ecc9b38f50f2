//! Online-log retention: compaction of old Events into signed snapshots (DLV-9, DLV-10).
//!
//! With a retention window of N Events per Group, the Events before the newest N leave the
//! `events` table, but nothing authoritative is lost: they are first written, as JSON lines,
//! to an archive artifact in the blob store (content-addressed, verified on every read), the
//! Group's projected state at that sequence is written as a state artifact, and a snapshot
//! reference `{groupId, sequence, stateDigest, eventChainHash, createdAt}` is signed with the
//! authority key. Only then, in one transaction that re-checks the chain, are the rows
//! removed. Acknowledgements never trigger any of this (DLV-7).
//!
//! Crash story: blobs are written before the transaction; a crash before it leaves orphan
//! blobs (harmless, reported by fsck) and the Events still online.

pub(crate) mod handle;

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures::{StreamExt as _, TryStreamExt as _};
use weft_api::dsse::SNAPSHOT_TYPE;
use weft_api::event::EventHash;
use weft_api::views::{SignedSnapshot, SnapshotReference};
use weft_api::{ArtifactId, Digest, Digests, Envelope, GroupState, Id};

use crate::access::Reader;
use crate::clock::format_instant;
use crate::compaction::handle::Compaction;
use crate::content::Content;
use crate::error::Error;
use crate::error::reject;
use crate::events::{self, to32};

/// Which Events stay online: the newest `events`, and/or those younger than `age`. With both,
/// an Event stays if either keeps it. The newest Event always stays online.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Retention {
    pub events: Option<u64>,
    pub age: Option<chrono::Duration>,
}

impl Retention {
    pub fn events(n: u64) -> Self {
        Self {
            events: Some(n),
            age: None,
        }
    }
    pub fn age(age: chrono::Duration) -> Self {
        Self {
            events: None,
            age: Some(age),
        }
    }
}

/// Events per archive read.
const PAGE: u32 = 10_000;

impl Compaction<'_> {
    /// Compacts every Group's online log down to what `retain` keeps (always at least the
    /// newest Event), archiving older Events and signing a snapshot reference for each.
    pub async fn compact(&self, retain: Retention) -> Result<Vec<(String, u64)>, Error> {
        let groups: Vec<String> = self.0.db.read(crate::rows::groups::ids).await?;
        let mut compacted = Vec::new();
        for group in groups {
            if let Some(sequence) = self.compact_group(&group, retain).await? {
                compacted.push((group, sequence));
            }
        }
        Ok(compacted)
    }

    async fn compact_group(&self, group: &str, retain: Retention) -> Result<Option<u64>, Error> {
        if retain.events.is_none() && retain.age.is_none() {
            return Ok(None);
        }
        let group_owned = group.to_owned();
        let cutoff = retain
            .age
            .map(|age| format_instant(self.0.clock.now() - age));
        let (head_sequence, aged_through, previous) = self
            .0
            .db
            .read(move |conn| {
                let (head, _) = events::head(conn, &group_owned)?;
                // The newest Event older than the age limit (instants compare as text: one format).
                let aged_through: Option<u64> = match &cutoff {
                    Some(cutoff) => crate::rows::events::newest_before(conn, &group_owned, cutoff)?,
                    None => None,
                };
                let previous = crate::rows::snapshots::newest(conn, &group_owned)?;
                Ok((head, aged_through, previous))
            })
            .await?;
        // The newest Event always stays online; with both limits an Event stays if either
        // keeps it, so only what both release is compacted.
        let by_count = retain
            .events
            .map(|n| head_sequence.saturating_sub(n.max(1)));
        let by_age = retain.age.map(|_| {
            aged_through
                .unwrap_or(0)
                .min(head_sequence.saturating_sub(1))
        });
        let through = match (by_count, by_age) {
            (Some(count), Some(age)) => count.min(age),
            (Some(limit), None) | (None, Some(limit)) => limit,
            (None, None) => 0,
        };
        if through == 0 {
            return Ok(None);
        }
        let (from_exclusive, start_hash, mut state) = match previous {
            Some((sequence, _, _)) if sequence >= through => return Ok(None),
            Some((sequence, hash, state_blake3)) => {
                let bytes = self
                    .read_authority_blob(ArtifactId(to32(state_blake3)?))
                    .await?;
                let state: GroupState = serde_json::from_slice(&bytes).map_err(Error::backend)?;
                (sequence, EventHash(to32(hash)?), state)
            }
            None => (
                0,
                EventHash::GENESIS,
                GroupState {
                    group_id: group.to_owned(),
                    ..GroupState::default()
                },
            ),
        };
        // 1. The archive: Events (from_exclusive, through] as JSON lines, chain-checked as read.
        let folded = Arc::new(Mutex::new((
            std::mem::take(&mut state),
            from_exclusive,
            start_hash,
            None::<String>,
        )));
        let pages = futures::stream::try_unfold((from_exclusive, Arc::clone(&folded)), {
            let inner = Arc::clone(self.0);
            let group = group.to_owned();
            move |(after, folded)| {
                let (inner, group) = (Arc::clone(&inner), group.clone());
                async move {
                    if after >= through {
                        return Ok(None);
                    }
                    let limit = PAGE.min((through - after) as u32);
                    let page = inner
                        .db
                        .read(move |conn| events::read(conn, &group, after, limit))
                        .await?;
                    let Some(last) = page.last().map(|e| e.sequence) else {
                        return Err(Error::backend(std::io::Error::other(
                            "the log ended before the compaction point",
                        )));
                    };
                    let mut lines = Vec::with_capacity(page.len() * 400);
                    // Short critical section, no await inside.
                    let mut guard = folded.lock().unwrap_or_else(|p| p.into_inner());
                    let (state, sequence, head, broken) = &mut *guard;
                    match weft_api::event::verify_chain(*sequence, *head, &page) {
                        Ok((next_sequence, next_head)) => {
                            (*sequence, *head) = (next_sequence, next_head)
                        }
                        Err(problem) => *broken = Some(problem),
                    }
                    for event in &page {
                        state.apply(event);
                        serde_json::to_writer(&mut lines, event).map_err(Error::backend)?;
                        lines.push(b'\n');
                    }
                    drop(guard);
                    Ok(Some((
                        Ok::<_, std::io::Error>(Bytes::from(lines)),
                        (last, folded),
                    )))
                }
            }
        });
        // Errors of the page reader end the stream; they surface through the stage's body error.
        let archive_stream = pages.map(|item| match item {
            Ok(chunk) => chunk,
            Err(error) => Err(std::io::Error::other(error.to_string())),
        });
        // Archives and state documents are files whatever their size (inline limit 0).
        let archive = match self.0.blobs.stage(archive_stream, u64::MAX, 0).await {
            Ok(archive) => archive,
            Err(_) if self.compacted_meanwhile(group, from_exclusive).await? => return Ok(None),
            Err(error) => return Err(error),
        };
        let (state, sequence, chain_hash, broken) = {
            let guard = folded.lock().unwrap_or_else(|p| p.into_inner());
            guard.clone()
        };
        if (broken.is_some() || sequence != through)
            && self.compacted_meanwhile(group, from_exclusive).await?
        {
            return Ok(None);
        }
        if let Some(problem) = broken {
            return Err(Error::backend(std::io::Error::other(format!(
                "refusing to compact a broken chain in {group}: {problem}"
            ))));
        }
        if sequence != through {
            return Err(Error::backend(std::io::Error::other(
                "the archive does not end at the compaction point",
            )));
        }
        // 2. The projected state.
        let state_bytes = serde_json::to_vec(&state).map_err(Error::backend)?;
        let state_blob = self
            .0
            .blobs
            .stage(
                futures::stream::iter([Ok::<_, std::io::Error>(Bytes::from(state_bytes))]),
                u64::MAX,
                0,
            )
            .await?;
        let (archive_digests, state_digests) = (archive.digests, state_blob.digests);
        // Like an upload: the sweep may not delete a file between its promotion and its row;
        // on a shared index, another server's sweep of strays records what it deletes, and a
        // promotion that found one of those objects present records no row for it (below).
        let _not_swept = self.0.sweep_lock.read().await;
        let at = format_instant(self.0.clock.now());
        let seen = self
            .0
            .db
            .read(move |conn| crate::rows::blob_disposals::seen(conn, &at))
            .await?;
        self.0.blobs.promote(archive, false).await?;
        self.0.blobs.promote(state_blob, false).await?;
        self.0.faults.promoted().pass().await;
        // 3. The signed reference.
        let reference = SnapshotReference {
            group_id: group.to_owned(),
            sequence: through,
            state_digest: state_digests.blake3,
            event_chain_hash: chain_hash,
            created_at: format_instant(self.0.clock.now()),
            uri: Some(format!(
                "/v1/groups/{group}/snapshots/blobs/{}",
                state_digests.blake3
            )),
        };
        let payload = serde_json::to_vec(&reference).map_err(Error::backend)?;
        let envelope_json =
            serde_json::to_string(&Envelope::sign(&self.0.authority, SNAPSHOT_TYPE, &payload))
                .map_err(Error::backend)?;
        // 4. One transaction: blob rows, the snapshot row, and only then the rows leave.
        let (group, now) = (group.to_owned(), self.0.clock.now());
        let compacted = self
            .0
            .db
            .write(move |txn| {
                // Several servers may compact one Group at once (issue #43): under the Group's
                // lock, only one whose starting snapshot is still the newest goes on.
                crate::rows::groups::lock(txn, &group)?;
                let newest = crate::rows::snapshots::newest(txn, &group)?;
                if newest.map_or(0, |(sequence, _, _)| sequence) != from_exclusive {
                    return Ok(false);
                }
                let hash_at = crate::rows::events::hash_at(txn, &group, through)?;
                if hash_at.map(to32).transpose()? != Some(chain_hash.0) {
                    return Err(reject(
                        weft_api::ErrorCode::Conflict,
                        "the log changed under the compaction",
                    ));
                }
                for digests in [archive_digests, state_digests] {
                    if crate::rows::blob_disposals::disposed_since(txn, seen, &digests.blake3.0)? {
                        return Err(reject(
                            weft_api::ErrorCode::StorageUnavailable,
                            "another server deleted an object this compaction placed",
                        ));
                    }
                    crate::rows::blobs::insert_if_absent(txn, &digests, now)?;
                }
                crate::rows::snapshots::insert(
                    txn,
                    &group,
                    through,
                    from_exclusive + 1,
                    &state_digests.blake3.0,
                    &archive_digests.blake3.0,
                    &chain_hash.0,
                    &envelope_json,
                )?;
                crate::rows::events::delete_through(txn, &group, through)?;
                Ok(true)
            })
            .await?;
        if !compacted {
            tracing::info!(%through, "another server compacted this Group first");
            return Ok(None);
        }
        tracing::info!(%through, n_archived = through - from_exclusive, "compacted the online log into a snapshot");
        Ok(Some(through))
    }

    /// Reads a whole authority blob (state documents), verified.
    async fn read_authority_blob(&self, blake3: ArtifactId) -> Result<Vec<u8>, Error> {
        let content = self.open_group_blob(blake3).await?;
        content
            .into_body(None)
            .try_fold(Vec::new(), |mut all, chunk| async move {
                all.extend_from_slice(&chunk);
                Ok(all)
            })
            .await
    }

    /// The Events a snapshot's archive holds, in order, every byte verified as read (the
    /// chain is the caller's to check).
    pub(crate) async fn archived_events(
        &self,
        archive: ArtifactId,
    ) -> Result<Vec<weft_api::Event>, Error> {
        let bytes = self
            .open_group_blob(archive)
            .await?
            .into_body(None)
            .try_fold(Vec::new(), |mut all, chunk| async move {
                all.extend_from_slice(&chunk);
                Ok(all)
            })
            .await?;
        bytes
            .split(|b| *b == b'\n')
            .filter(|line| !line.is_empty())
            .map(|line| serde_json::from_slice(line).map_err(Error::backend))
            .collect()
    }

    /// Whether another server compacted `group` past `from` while this one read its log
    /// (several servers over one PostgreSQL, issue #43): the rows this one was archiving left
    /// under it, so there is nothing left to do, and nothing is wrong.
    async fn compacted_meanwhile(&self, group: &str, from: u64) -> Result<bool, Error> {
        let group = group.to_owned();
        let newest = self
            .0
            .db
            .read(move |conn| crate::rows::snapshots::newest(conn, &group))
            .await?;
        Ok(newest.is_some_and(|(newest, _, _)| newest > from))
    }

    /// Opens a snapshot's state or archive blob for reading (verified like any artifact).
    pub(crate) async fn open_group_blob(&self, blake3: ArtifactId) -> Result<Content, Error> {
        let digests = self
            .0
            .db
            .read(move |conn| crate::artifacts::blob_row(conn, &Digest::Blake3(blake3)))
            .await?
            .map(|(digests, _)| digests)
            .ok_or_else(|| reject(weft_api::ErrorCode::NotFound, format!("no blob {blake3}")))?;
        let raw = self.0.raw_bytes(&digests).await?;
        Ok(Content::new(
            digests,
            "application/json".into(),
            raw,
            Arc::clone(self.0),
        ))
    }

    /// The signed snapshot references of a Group, oldest first.
    pub async fn snapshots(
        &self,
        group_id: Id,
        reader: &Reader,
    ) -> Result<Vec<SignedSnapshot>, Error> {
        let reader = reader.clone();
        self.0
            .db
            .read(move |conn| {
                let visible = match &reader {
                    Reader::Admin => crate::access::group_exists(conn, group_id.as_str())?,
                    // A snapshot's state document and archive cover every Mission of
                    // the Group: a Mission-scoped member does not get them (CTX-5).
                    Reader::Agent { scope, .. } if *scope != crate::access::MissionScope::Group => {
                        false
                    }
                    Reader::Agent {
                        agent_id,
                        group_id: own,
                        ..
                    } => {
                        own == &group_id
                            && crate::access::membership(
                                conn,
                                group_id.as_str(),
                                agent_id.as_str(),
                            )?
                            .is_some()
                    }
                };
                if !visible {
                    return Err(reject(
                        weft_api::ErrorCode::NotFound,
                        format!("no group {group_id} is visible to you"),
                    ));
                }
                events::snapshots(conn, group_id.as_str())
            })
            .await
    }
}

impl Compaction<'_> {
    /// The digests of a snapshot's state document or Event archive of a Group, for a reader
    /// who may see that Group's snapshots (what a HEAD answers; nothing is opened).
    pub async fn snapshot_blob_digests(
        &self,
        group_id: Id,
        blob: ArtifactId,
        reader: &Reader,
    ) -> Result<Digests, Error> {
        let snapshots = self.snapshots(group_id, reader).await?;
        let not_found = || {
            reject(
                weft_api::ErrorCode::NotFound,
                format!("{blob} is not a snapshot blob of this group"),
            )
        };
        if !snapshots
            .iter()
            .any(|s| s.archive == blob || s.reference.state_digest == blob)
        {
            return Err(not_found());
        }
        self.0
            .db
            .read(move |conn| crate::artifacts::blob_row(conn, &Digest::Blake3(blob)))
            .await?
            .map(|(digests, _)| digests)
            .ok_or_else(not_found)
    }

    /// Opens a snapshot's state document or Event archive of a Group, verified as it streams.
    pub async fn open_snapshot_blob(
        &self,
        group_id: Id,
        blob: ArtifactId,
        reader: &Reader,
    ) -> Result<Content, Error> {
        let digests = self.snapshot_blob_digests(group_id, blob, reader).await?;
        // A download like an artifact's content: one of the reader's slots, taken before the
        // blob is opened (a refusal opens nothing), and carried by the body.
        let slot = crate::content::admit_download(self.0, reader)?;
        let raw = self.0.raw_bytes(&digests).await?;
        Ok(Content::new(digests, "application/json".into(), raw, Arc::clone(self.0)).holding(slot))
    }
}
