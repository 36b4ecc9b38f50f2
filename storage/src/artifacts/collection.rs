//! Provenance-aware collection (issue #46): the bytes of a blob are disposed of only when
//! every record citing it is past what its retention policy keeps and nothing else needs them;
//! the manifests stay (tombstones), and each Group that published the blob gets an
//! `artifact.disposed` Event naming the policy and why (one per batch and set of Missions).
//!
//! What keeps a blob (checked for each blob in the transaction that disposes of it):
//! - a manifest or Evidence record whose Mission is live, has no policy, or is not yet past
//!   `weft_api::lifecycle::bytes_due` (which adds a clock margin: never early);
//! - a hold in force on it, on a WorkItem or Mission citing it, or on anything derived from
//!   it (holds reach up the lineage: what a held artifact was made from is kept);
//! - an upload within the unpublished-blob TTL (a Worker about to cite it), a schema, a
//!   snapshot, a Context Package, or reusable knowledge.
//!
//! Concurrency. Candidates are found outside any lock (the Missions past their policy, then
//! their artifacts, a page of [`BATCH`] at a time), then decided and disposed of in batches of [`BATCH`]. Each batch holds the
//! sweep lock exclusively from its transaction to its last file deletion, so an upload
//! between promotion and its row (which holds it shared) either committed first, moving the
//! blob's last upload to now and keeping it, or comes after and finds the blob disposed of:
//! it then writes the bytes again and its row repairs the blob (`upload.rs`). A publication
//! reads the blob's row in its own transaction: on SQLite the one writer orders them; on a
//! shared index the batch locks each blob's row (`FOR UPDATE SKIP LOCKED`) and takes the
//! disposal lock that publications and uploads fence on (`disposal.rs`), so a publication
//! either committed first (its manifest then keeps the blob) or sees it disposed of.
//!
//! Crash story: rows first (marked disposed and `disposal_pending`, with their Events), files
//! second, then the pending mark is cleared. A crash between leaves files no read serves (the
//! row is unreadable) and fsck does not report; the next collection deletes them first.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use weft_api::lifecycle::views::{CollectionReport, DisposalView};
use weft_api::lifecycle::{ArtifactDisposed, DisposedArtifact, bytes_due};
use weft_api::work::machine::WorkState;
use weft_api::{ArtifactId, EventPayload, Id};

use super::disposal::Begun;
use super::keeping::{HeldCache, Policies};
use crate::artifacts::handle::Artifacts;
use crate::clock::format_instant;
use crate::error::Error;
use crate::events;
use crate::rows;
use crate::sql::Connection;

/// Blobs decided (and disposed of) per transaction and per hold of the sweep lock: uploads
/// wait at most one batch.
pub(crate) const BATCH: usize = 256;

/// What a Group's `artifact.disposed` Event tells of a blob: only its own citations' Missions,
/// policies and reasons. Which other Groups published the same bytes, or which Missions'
/// Evidence cites them, and when those ended, is theirs to know; the operator's report has
/// it all.
#[derive(Debug)]
struct Told {
    group: Id,
    missions: Vec<Id>,
    policy: String,
    reason: String,
}

/// What one batch decided about one blob.
enum Decision {
    /// Disposed of (or, in a dry run, would be): the operator's view, and per Group that
    /// published it its Missions and what of the policies and reasons is theirs ([`Told`]).
    Dispose(DisposalView, weft_api::Sha256Digest, Vec<Told>),
    /// Past its Mission's policy, but something needs it.
    Keep,
    /// Not collectable now: disposed of already, quarantined, or held by another writer.
    Skip,
}

impl Artifacts<'_> {
    /// Runs collection: every blob whose citations are all past their policies and that
    /// nothing holds is disposed of (rows and Events, then files), at most `limit` of them.
    /// `dry_run` changes nothing and answers what would go. The server also runs it on an
    /// interval (`weft serve --gc-interval-secs`).
    pub async fn collect(&self, dry_run: bool, limit: usize) -> Result<CollectionReport, Error> {
        self.collect_until(dry_run, limit, None).await
    }

    /// [`Artifacts::collect`], starting no batch after `deadline` (a request's time budget):
    /// what is left goes in the next call.
    pub async fn collect_until(
        &self,
        dry_run: bool,
        limit: usize,
        deadline: Option<std::time::Instant>,
    ) -> Result<CollectionReport, Error> {
        let mut report = CollectionReport {
            dry_run,
            ..CollectionReport::default()
        };
        if !dry_run {
            self.finish_pending_disposals().await?;
        }
        let now = self.0.clock.now();
        let due = self.0.db.read(move |conn| due_missions(conn, now)).await?;
        let mut held = HeldCache::default();
        // Each due Mission's blobs are read a page at a time (a cursor on the digest), so a
        // call costs what it decides, not the whole candidate list; a blob two Missions cite
        // is decided once per call.
        let mut seen = BTreeSet::new();
        let mut pages = due.into_iter().map(|mission| (mission, None));
        let mut current = pages.next();
        while let Some((mission, after)) = current.take() {
            if report.disposed.len() >= limit
                || deadline.is_some_and(|deadline| std::time::Instant::now() >= deadline)
            {
                break;
            }
            let room = limit - report.disposed.len();
            let of = mission.clone();
            let page = self
                .0
                .db
                .read(move |conn| {
                    rows::manifests::kept_of_mission(conn, of.as_str(), after, BATCH as u64)
                })
                .await?;
            current = match page.last() {
                Some(last) if page.len() == BATCH => Some((mission, Some(*last))),
                _ => pages.next(),
            };
            let batch: Vec<ArtifactId> = page
                .into_iter()
                .filter(|blob| seen.insert(*blob))
                .take(room)
                .collect();
            if batch.is_empty() {
                continue;
            }
            // Each batch holds the writer (and the sweep lock) briefly; then collection steps
            // aside for `collection_pause_ratio` times as long, so Workers keep publishing.
            let started = std::time::Instant::now();
            let (views, kept, stop) = self.collect_batch(batch, dry_run, &mut held).await?;
            let mut pause = started.elapsed() * self.0.collection_pause_ratio;
            // Never past the call's deadline: a long batch (large files) times eight would
            // otherwise outlast the request (a 408 with the work done).
            if let Some(deadline) = deadline {
                pause = pause.min(deadline.saturating_duration_since(std::time::Instant::now()));
            }
            if !pause.is_zero() && !stop && !dry_run {
                tokio::time::sleep(pause).await;
            }
            report.kept += kept;
            for view in views {
                report.blobs += 1;
                report.bytes += view.size;
                report.disposed.push(view);
            }
            if stop {
                break;
            }
        }
        // Then the records past `keepRecords` (`records.rs`).
        self.collect_records(&mut report, deadline).await?;
        if !dry_run && report.blobs > 0 {
            metrics::counter!("weft_gc_disposed_blobs_total").increment(report.blobs);
            metrics::counter!("weft_gc_disposed_bytes_total").increment(report.bytes);
            tracing::info!(
                blobs = report.blobs,
                bytes = report.bytes,
                kept = report.kept,
                "collection disposed of expired bytes"
            );
        }
        Ok(report)
    }

    /// One batch: decided and disposed of in one transaction under the sweep lock, then its
    /// files deleted. Answers what went, how many were kept, and whether to stop (another
    /// server is deleting a batch's files).
    async fn collect_batch(
        &self,
        batch: Vec<ArtifactId>,
        dry_run: bool,
        held: &mut HeldCache,
    ) -> Result<(Vec<DisposalView>, u64, bool), Error> {
        let _exclusive = self.0.sweep_lock.write().await;
        let now = self.0.clock.now();
        let ttl = self.0.unpublished_blob_ttl;
        let mut cache = std::mem::take(held);
        let decide = move |conn: &Connection,
                           cache: &mut HeldCache|
              -> Result<Vec<(ArtifactId, Decision)>, Error> {
            let policies = Policies::load(conn)?;
            let held = cache.refresh(conn)?;
            let mut ends = BTreeMap::new();
            batch
                .iter()
                .map(|blob| {
                    let decision = decide(conn, blob, now, ttl, &policies, held, &mut ends)?;
                    Ok((*blob, decision))
                })
                .collect()
        };
        if dry_run {
            let (decided, cache) = self
                .0
                .db
                .read(move |conn| {
                    let decided = decide(conn, &mut cache)?;
                    Ok((decided, cache))
                })
                .await?;
            *held = cache;
            return Ok(summarise(decided, false));
        }
        let written = self
            .0
            .db
            .write(move |txn| {
                let begun = Begun::begin(txn, now)?;
                if matches!(begun, Begun::Busy) {
                    return Ok((Vec::new(), cache, begun, true));
                }
                rows::blob_disposals::wait_briefly(txn, true)?;
                let decided = decide(txn, &mut cache)?;
                let mut gone = Vec::new();
                // One Event per Group and set of its Missions for the whole batch: the log
                // grows by a few Events per batch, not one per blob.
                let mut by_group: BTreeMap<(Id, Vec<Id>), Vec<DisposedArtifact>> = BTreeMap::new();
                for (blob, decision) in &decided {
                    let Decision::Dispose(view, sha256, groups) = decision else {
                        continue;
                    };
                    rows::inline_bytes::delete_of_blob(txn, &blob.0)?;
                    if !rows::blobs::dispose(txn, blob, now)? {
                        continue;
                    }
                    for told in groups {
                        by_group
                            .entry((told.group.clone(), told.missions.clone()))
                            .or_default()
                            .push(DisposedArtifact {
                                artifact: *blob,
                                policy: told.policy.clone(),
                                reason: told.reason.clone(),
                                sha256: *sha256,
                                size: view.size,
                            });
                    }
                    gone.push(blob.0);
                }
                // Usage shrank: a count of the epoch before no longer bounds it from below
                // (`quota.rs`).
                if !gone.is_empty() {
                    rows::usage_epoch::advance(txn)?;
                }
                for ((group, missions), artifacts) in by_group {
                    let ids: Vec<ArtifactId> = artifacts.iter().map(|d| d.artifact).collect();
                    let payload = EventPayload::ArtifactDisposed(ArtifactDisposed {
                        artifacts,
                        disposed_at: format_instant(now),
                        missions,
                    });
                    let sequence = events::append(txn, &group, &payload, now)?;
                    for blob in &ids {
                        rows::blob_dispositions::insert(txn, group.as_str(), blob, sequence, now)?;
                    }
                }
                begun.record(txn, now, &gone)?;
                rows::blob_disposals::wait_briefly(txn, false)?;
                Ok((decided, cache, begun, false))
            })
            .await;
        let (decided, cache, begun, busy) = match written {
            Ok(written) => written,
            // Another server's writers held the disposal lock past its wait: next round.
            Err(error) if error.code() == weft_api::ErrorCode::StorageUnavailable => {
                tracing::debug!(%error, "collection waits for its next round");
                return Ok((Vec::new(), 0, true));
            }
            Err(error) => return Err(error),
        };
        *held = cache;
        if busy {
            return Ok((Vec::new(), 0, true));
        }
        let (views, kept, _) = summarise(decided, false);
        let files: Vec<ArtifactId> = views.iter().map(|view| view.artifact).collect();
        for id in &files {
            self.0.hot.forget(id);
        }
        let (done, failed) = self.delete_disposed(begun, &files).await?;
        self.0
            .db
            .write(move |txn| rows::blobs::disposal_done(txn, &done))
            .await?;
        if let Some(error) = failed {
            // The rest stay marked: the next collection finishes them first.
            return Err(error);
        }
        Ok((views, kept, false))
    }

    /// Deletes the files of blobs a collection disposed of but stopped before deleting (a
    /// crash, a failed deletion), and clears their mark. The marks are read under the sweep
    /// lock, in the transaction that begins the batch (on a shared index), after it holds the
    /// disposal lock every server's uploads fence on: an upload of the same bytes that brought
    /// a blob back (`rows/blobs.rs`, `repair`) committed first and cleared its mark, so keeps
    /// its file, or comes after and finds the batch, and is refused. A file that cannot be
    /// deleted keeps its mark for a later round; it stops no collection (only this round of
    /// finishing), nor does another server's disposal holding the lock.
    async fn finish_pending_disposals(&self) -> Result<(), Error> {
        loop {
            // Most rounds have none: read without any lock first.
            let any = self
                .0
                .db
                .read(|conn| rows::blobs::disposal_pending(conn, 1))
                .await?;
            if any.is_empty() {
                return Ok(());
            }
            let _exclusive = self.0.sweep_lock.write().await;
            let now = self.0.clock.now();
            let begun = self
                .0
                .db
                .write(move |txn| {
                    // The disposal lock first: the marks read after it are what every
                    // upload committed before it left them.
                    let begun = Begun::begin(txn, now)?;
                    if matches!(begun, Begun::Busy) {
                        // Another server is deleting a batch's files: a later round.
                        return Ok((begun, Vec::new()));
                    }
                    let pending = rows::blobs::disposal_pending(txn, BATCH as u64)?;
                    let digests: Vec<[u8; 32]> = pending.iter().map(|id| id.0).collect();
                    begun.record(txn, now, &digests)?;
                    Ok((begun, pending))
                })
                .await;
            let (begun, pending) = match begun {
                Ok(begun) => begun,
                // Another server's writers held the disposal lock past its wait: next round.
                Err(error) if error.code() == weft_api::ErrorCode::StorageUnavailable => {
                    tracing::debug!(%error, "finishing a collection waits for its next round");
                    return Ok(());
                }
                Err(error) => return Err(error),
            };
            if pending.is_empty() {
                return Ok(());
            }
            let (done, failed) = self.delete_disposed(begun, &pending).await?;
            let finished = done.len() == pending.len();
            tracing::info!(files = done.len(), "finished an interrupted collection");
            self.0
                .db
                .write(move |txn| rows::blobs::disposal_done(txn, &done))
                .await?;
            if !finished {
                if let Some(error) = failed {
                    tracing::warn!(%error, "files of an interrupted collection stay for a later round");
                }
                return Ok(());
            }
        }
    }
}

fn summarise(decided: Vec<(ArtifactId, Decision)>, _: bool) -> (Vec<DisposalView>, u64, bool) {
    let mut views = Vec::new();
    let mut kept = 0;
    for (_, decision) in decided {
        match decision {
            Decision::Dispose(view, ..) => views.push(view),
            Decision::Keep => kept += 1,
            Decision::Skip => {}
        }
    }
    (views, kept, false)
}

/// The Missions whose blobs are worth deciding on at `now`: those past their policy's
/// `keepBytes` (a superset of what may go: every other citation is checked per blob).
fn due_missions(conn: &Connection, now: DateTime<Utc>) -> Result<Vec<Id>, Error> {
    let policies = Policies::load(conn)?;
    if policies.is_empty() {
        return Ok(Vec::new());
    }
    let mut found = Vec::new();
    for (mission, group, ended) in rows::missions::ended(conn)? {
        let due = policies.any_of(&group, &mission).iter().any(|policy| {
            bytes_due(Some(ended), Some(policy), false).is_some_and(|due| due <= now)
        });
        if due {
            found.push(mission);
        }
    }
    Ok(found)
}

/// Decides on one blob in the deciding transaction (see the module docs for what keeps it).
fn decide(
    conn: &Connection,
    blob: &ArtifactId,
    now: DateTime<Utc>,
    ttl: chrono::Duration,
    policies: &Policies,
    held: &BTreeSet<ArtifactId>,
    ends: &mut BTreeMap<Id, Option<DateTime<Utc>>>,
) -> Result<Decision, Error> {
    let Some(row) = rows::blobs::collectable(conn, blob)? else {
        return Ok(Decision::Skip);
    };
    if row.unreadable {
        return Ok(Decision::Skip);
    }
    if held.contains(blob)
        || row.last_upload > now - ttl
        || rows::blobs::cited_by_the_store(conn, blob)?
        || rows::context_packages::any_cites(conn, blob)?
        || rows::reusable_artifacts::anywhere(conn, blob)?
    {
        return Ok(Decision::Keep);
    }
    // Each citation's due instant; the blob goes only when all are past. What let it go is
    // gathered for the operator (all of it) and per publishing Group (its own citations).
    #[derive(Default)]
    struct Why {
        missions: BTreeSet<Id>,
        reasons: BTreeMap<Id, String>,
        governing: BTreeSet<String>,
    }
    let mut groups: BTreeMap<Id, Why> = BTreeMap::new();
    let mut reasons = BTreeMap::new();
    let mut governing = BTreeSet::new();
    let manifests = rows::manifests::citations(conn, blob)?;
    let evidence = rows::evidence::citations(conn, blob)?;
    let cited = manifests
        .iter()
        .map(|(group, mission, work_item, class)| (group, mission, work_item, Some(*class), false))
        .chain(
            evidence
                .iter()
                .map(|(group, mission, work_item)| (group, mission, work_item, None, true)),
        );
    for (group, mission, work_item, class, by_evidence) in cited {
        // A batch's blobs mostly share their Missions: each end is read once per batch.
        let ended = match ends.get(mission) {
            Some(ended) => *ended,
            None => {
                let ended = rows::missions::ended_at(conn, mission.as_str())?;
                ends.insert(mission.clone(), ended);
                ended
            }
        };
        let policy = policies.of(group, mission, class);
        let verified = by_evidence
            && rows::work_items::load(conn, work_item.as_str())?
                .is_some_and(|row| row.state == WorkState::Verified);
        let due = bytes_due(
            ended,
            policy.as_ref().map(|(retention, _)| retention),
            verified,
        );
        let Some(due) = due.filter(|due| *due <= now) else {
            return Ok(Decision::Keep);
        };
        let told = (!by_evidence).then(|| {
            let why = groups.entry(group.clone()).or_default();
            why.missions.insert(mission.clone());
            why
        });
        if let (Some(ended), Some((_, name))) = (ended, policy) {
            let reason = format!(
                "Mission {mission} ended {}, due {}",
                format_instant(ended),
                format_instant(due)
            );
            if let Some(why) = told {
                why.reasons.insert(mission.clone(), reason.clone());
                why.governing.insert(name.clone());
            }
            reasons.insert(mission.clone(), reason);
            governing.insert(name);
        }
    }
    if groups.is_empty() {
        return Ok(Decision::Keep);
    }
    let view = DisposalView {
        artifact: *blob,
        size: row.size,
        groups: groups.keys().cloned().collect(),
        policy: governing.into_iter().collect::<Vec<_>>().join("; "),
        reason: reasons.into_values().collect::<Vec<_>>().join("; "),
    };
    let groups = groups
        .into_iter()
        .map(|(group, why)| Told {
            group,
            missions: why.missions.into_iter().collect(),
            policy: why.governing.into_iter().collect::<Vec<_>>().join("; "),
            reason: why.reasons.into_values().collect::<Vec<_>>().join("; "),
        })
        .collect();
    Ok(Decision::Dispose(view, row.sha256, groups))
}
