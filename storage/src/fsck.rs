//! Counts and the offline check: `stats` for metrics and tests, `fsck` re-hashes every blob
//! and re-checks every row, signature and chain.
//!
//! fsck sorts what it finds in two: `problems` are damage (a missing or corrupt blob, a row
//! that contradicts its bytes, a bad signature, a broken chain) and `leftovers` are what a
//! crash harmlessly leaves (a blob file no row names, files in `staging/`), which the next
//! server start removes. `weft fsck` exits 1 on damage, 2 on leftovers only, 0 when clean.
//! Its one write: each intact blob's re-hash is recorded as its last verification (`fsck`),
//! which the auditor console shows.

use std::collections::HashSet;
use std::sync::Arc;

use crate::sql::Connection;
use futures::TryStreamExt as _;
use weft_api::dsse::MANIFEST_TYPE;
use weft_api::{ArtifactId, Digest, Envelope, Event, Manifest};

use crate::access::recorded_key;
use crate::artifacts::blob_row;
use crate::blobs::SpillGuard;
use crate::engine::Engine;
use crate::error::Error;
use crate::events::{self, to32};
use crate::fingerprint::{self, Fingerprint};
use crate::hashing::DualHasher;
use crate::outboard::Built;
use crate::rows;

/// Counts of everything the store holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub groups: u64,
    pub agents: u64,
    pub memberships: u64,
    pub sessions: u64,
    pub blobs: u64,
    pub blob_uploaders: u64,
    pub manifests: u64,
    pub derivations: u64,
    pub events: u64,
    pub evidence: u64,
    pub quarantined: u64,
    /// Blobs whose bytes a retention policy disposed of (their rows stay, issue #46).
    pub disposed: u64,
    /// Objects under `blobs/` in the backend.
    pub blob_objects: u64,
    /// Objects under `staging/` in the backend (uploads in flight or leftovers).
    pub staging_objects: u64,
}

/// What fsck found.
#[derive(Clone, Debug, Default)]
pub struct FsckReport {
    pub n_blobs: u64,
    pub n_bytes: u64,
    pub n_manifests: u64,
    pub n_events: u64,
    /// Damage: something acknowledged is missing, corrupt or does not verify.
    pub problems: Vec<String>,
    /// Harmless crash leftovers that the next server start removes.
    pub leftovers: Vec<String>,
    /// On a shared index: blob objects younger than [`IN_FLIGHT`] without a row yet (another
    /// server's upload between placing its bytes and committing its row), neither damage nor
    /// leftovers.
    pub in_flight: u64,
}

/// How young a blob object without a row is taken for an upload in flight on a shared index:
/// far longer than an upload takes from placing its bytes to committing its row.
pub(crate) const IN_FLIGHT: chrono::Duration = chrono::Duration::minutes(10);

/// Re-checks one stored manifest: its id, its signature by the registered producer key, and
/// that it describes the blob it is filed under.
fn check_manifest(
    conn: &Connection,
    manifest_id: &ArtifactId,
    blake3: &[u8],
    envelope: &str,
    producer: &str,
) -> Result<(), String> {
    let envelope: Envelope =
        serde_json::from_str(envelope).map_err(|e| format!("envelope unreadable: {e}"))?;
    let keyid = envelope.signer_keyid().map_err(|e| e.to_string())?;
    let (agent_id, key) = recorded_key(conn, &keyid)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("signing key {keyid} is not registered"))?;
    if agent_id.as_str() != producer {
        return Err(format!("signed by {agent_id}, filed under {producer}"));
    }
    let payload = envelope
        .verify(MANIFEST_TYPE, &key)
        .map_err(|e| e.to_string())?;
    if ArtifactId::of(payload.value()) != *manifest_id {
        return Err("payload does not hash to the manifest id".into());
    }
    let manifest = Manifest::parse(payload.value()).map_err(|e| e.to_string())?;
    if manifest.content.blake3.0[..] != *blake3 {
        return Err("manifest describes other bytes than its row".into());
    }
    Ok(())
}

// The façade's counts and check, here so that the crate root names nothing of fsck's.
impl crate::Store {
    /// Row and object counts: for `/metrics`, and for tests asserting that a refused request
    /// changed nothing.
    pub async fn stats(&self) -> Result<Stats, Error> {
        self.inner.stats().await
    }

    /// Every table's rows hashed, and the object counts: for tests asserting that a refused
    /// request changed nothing, not even one column of one row. Reactions owed by earlier
    /// commits run first, so none lands between two fingerprints.
    pub async fn fingerprint(&self) -> Result<Fingerprint, Error> {
        self.reactions_settled().await;
        let mut fingerprint = self.inner.db.read(fingerprint::of_tables).await?;
        let stats = self.stats().await?;
        fingerprint.blob_objects = stats.blob_objects;
        fingerprint.staging_objects = stats.staging_objects;
        let mut listing: Vec<(String, u64)> =
            futures::TryStreamExt::try_collect::<Vec<_>>(self.inner.blobs.list())
                .await?
                .into_iter()
                .map(|(path, size)| (path.to_string(), size))
                .collect();
        // Resumable upload objects and outboards too: a refused write must leave them as they were.
        for prefix in ["uploads", "outboards"] {
            listing.extend(self.inner.blobs.listing(prefix).await?);
        }
        listing.sort();
        let mut hasher = blake3::Hasher::new();
        for (path, size) in listing {
            hasher.update(path.as_bytes());
            hasher.update(&size.to_be_bytes());
        }
        fingerprint.blob_listing = hasher.finalize().to_hex().to_string();
        Ok(fingerprint)
    }

    /// Re-hashes every blob and re-checks every row, signature and chain.
    pub async fn fsck(&self) -> Result<FsckReport, Error> {
        self.inner.fsck().await
    }
}

impl Engine {
    pub(crate) async fn stats(&self) -> Result<Stats, Error> {
        let mut stats = self
            .db
            .read(|conn| {
                Ok(Stats {
                    groups: rows::groups::count(conn)?,
                    agents: rows::agents::count(conn)?,
                    memberships: rows::memberships::count(conn)?,
                    sessions: rows::sessions::count(conn)?,
                    blobs: rows::blobs::count(conn)?,
                    blob_uploaders: rows::blob_uploaders::count(conn)?,
                    manifests: rows::manifests::count(conn)?,
                    derivations: rows::derivations::count(conn)?,
                    events: rows::events::count(conn)?,
                    evidence: rows::evidence::count(conn)?,
                    quarantined: rows::blobs::count_quarantined(conn)?,
                    disposed: rows::blobs::count_disposed(conn)?,
                    blob_objects: 0,
                    staging_objects: 0,
                })
            })
            .await?;
        let (blob_objects, staging_objects) = self.blobs.count_objects().await?;
        let inline = self.db.read(rows::blobs::count_inline).await?;
        // Stored copies: files, and blobs inline in the index.
        stats.blob_objects = blob_objects + inline;
        stats.staging_objects = staging_objects;
        Ok(stats)
    }

    /// A large intact blob's stored outboard against the one just computed from its bytes
    /// (spilled to a file as it was built on the local backend, so memory stays flat): a
    /// missing one is rebuilt (a leftover of a blob stored before outboards existed), a
    /// different one (its root is not the blob's address) is a problem, and is replaced.
    async fn check_outboard(
        &self,
        id: &ArtifactId,
        computed: Built,
        report: &mut FsckReport,
    ) -> Result<(), Error> {
        match self.blobs.outboard_is(id, &computed).await? {
            Some(true) => return Ok(()),
            Some(false) => report.problems.push(format!(
                "{id}: outboard does not match the blob's hash tree (replaced)"
            )),
            None => report
                .leftovers
                .push(format!("{id}: blob had no outboard (rebuilt)")),
        }
        match computed {
            Built::Memory(bytes) => self.blobs.put_outboard(id, bytes).await,
            Built::Spilled(path) => {
                // Computed unsynced (most are only compared): made durable before it is placed.
                let file = path.clone();
                tokio::task::spawn_blocking(move || std::fs::File::open(file)?.sync_all())
                    .await
                    .map_err(Error::backend)?
                    .map_err(Error::backend)?;
                self.blobs.place_spilled_outboard(id, &path)
            }
        }
    }

    pub(crate) async fn fsck(self: &Arc<Self>) -> Result<FsckReport, Error> {
        let mut report = FsckReport::default();
        for name in self.blobs.staging_entries().await? {
            let what = if name.ends_with(".outboard") {
                "outboard spilled by an upload, a rebuild or an fsck that did not finish"
            } else {
                "unfinished upload"
            };
            report.leftovers.push(format!(
                "staging/{name}: {what} (removed at the next start)"
            ));
        }
        // 1. Every blob object: hash it, compare with its name and its row.
        let mut objects = self.blobs.list_with_age();
        let mut on_disk = HashSet::new();
        let shared = self.db.is_shared();
        while let Some(object) = objects.try_next().await? {
            let (path, _, written) = object;
            let name = path.filename().unwrap_or_default().to_owned();
            let Ok(id) = ArtifactId::parse(&format!("blake3:{name}")) else {
                report.problems.push(format!("{path}: not a blob name"));
                continue;
            };
            if crate::blobs::blob_path(&id) != path {
                report
                    .problems
                    .push(format!("{path}: stored under the wrong directory"));
            }
            on_disk.insert(id);
            report.n_blobs += 1;
            // The outboard computed as the blob is hashed: spilled to a file in `staging/` on
            // the local backend, removed on every way out but its placing.
            let spill = self.blobs.spill_path(&id, "fsck-");
            let _spilled = SpillGuard(spill.as_ref().map(|(path, _)| path.clone()));
            let mut hasher = match spill {
                Some((path, faults)) => DualHasher::spilling_unsynced_to(path, faults),
                None => DualHasher::default(),
            };
            let mut stream = self.blobs.read(&id).await?;
            while let Some(chunk) = stream.try_next().await? {
                hasher.update(chunk).await?;
            }
            let (digests, _, outboard) = hasher.finish_with_outboard().await?;
            report.n_bytes += digests.size;
            if digests.blake3 == id
                && let Some(outboard) = outboard
            {
                self.check_outboard(&id, outboard, &mut report).await?;
            }
            if digests.blake3 != id {
                report
                    .problems
                    .push(format!("{path}: content hashes to {}", digests.blake3));
            }
            let row = self
                .db
                .read(move |conn| blob_row(conn, &Digest::Blake3(id)))
                .await?;
            match row {
                // On a shared index another server's upload places its bytes before its row
                // commits: a young object without one is in flight, not left over.
                None if shared && chrono::Utc::now() - written < IN_FLIGHT => {
                    report.in_flight += 1;
                }
                None => report.leftovers.push(format!(
                    "{id}: blob object has no index row (harmless: it holds the bytes its digest names; the sweep removes it once {} minutes old)",
                    crate::artifacts::STRAY_AGE.num_minutes()
                )),
                Some((indexed, quarantined)) => {
                    if digests.blake3 == id
                        && (indexed.sha256 != digests.sha256 || indexed.size != digests.size)
                    {
                        report.problems.push(format!(
                            "{id}: index says {} / {} bytes",
                            indexed.sha256, indexed.size
                        ));
                    }
                    if quarantined && disposed(self, id).await? {
                        report.leftovers.push(format!(
                            "{id}: bytes disposed of by policy; the next collection deletes the file"
                        ));
                    } else if quarantined {
                        report.problems.push(format!("{id}: quarantined"));
                    } else if digests.blake3 == id
                        && indexed.sha256 == digests.sha256
                        && indexed.size == digests.size
                    {
                        // The auditor's "last verified" (schema V15): intact, by fsck.
                        self.record_verified(id, "fsck".to_owned()).await?;
                    }
                }
            }
        }
        // 1b. Every inline blob (issue #15): hash its bytes, compare with its row.
        let inline: Vec<ArtifactId> = self.db.read(rows::blobs::all_inline).await?;
        for id in inline {
            let (bytes, row) = self
                .db
                .read(move |conn| {
                    Ok((
                        crate::artifacts::inline_bytes(conn, &id)?,
                        blob_row(conn, &Digest::Blake3(id))?,
                    ))
                })
                .await?;
            let Some(bytes) = bytes else { continue };
            on_disk.insert(id);
            report.n_blobs += 1;
            report.n_bytes += bytes.len() as u64;
            let digests = weft_api::digest::Hasher::digest(&bytes);
            match row {
                Some((indexed, quarantined)) if indexed == digests => {
                    if quarantined {
                        report.problems.push(format!("{id}: quarantined"));
                    } else {
                        self.record_verified(id, "fsck".to_owned()).await?;
                    }
                }
                _ => report.problems.push(format!(
                    "{id}: inline bytes hash to {} / {} ({} bytes)",
                    digests.blake3, digests.sha256, digests.size
                )),
            }
        }
        // 1c. Inline copies no blob row names (none should exist: a copy goes with its row).
        let unnamed: u64 = self.db.read(rows::inline_bytes::count_unnamed).await?;
        if unnamed > 0 {
            report
                .problems
                .push(format!("{unnamed} inline copies that no blob row names"));
        }
        // 1d. Outboards no blob row names, in a directory or a bucket: a crash between an
        // outboard's placing and its blob's rename (the outboard goes first) leaves one; on a
        // shared index a young one is another server's upload in flight.
        let outboards = self.blobs.outboard_objects().await?;
        let unnamed = self
            .db
            .read(move |conn| {
                let mut unnamed = Vec::new();
                for (id, written) in outboards {
                    if !rows::blobs::exists(conn, &id)? {
                        unnamed.push((id, written));
                    }
                }
                Ok(unnamed)
            })
            .await?;
        for (id, written) in unnamed {
            if shared && chrono::Utc::now() - written < IN_FLIGHT {
                report.in_flight += 1;
                continue;
            }
            report.leftovers.push(format!(
                "{id}: outboard has no blob row (the sweep removes it once {} minutes old)",
                crate::artifacts::STRAY_AGE.num_minutes()
            ));
        }
        // 1e. Objects of resumable uploads whose session row is gone (a crash between a
        // cancel's, a finish's or the sweep's row and its objects): no upload needs them.
        let (uploads, _) = self.blobs.walk_uploads(None, usize::MAX).await?;
        let rowless = self
            .db
            .read(move |conn| {
                let mut rowless = Vec::new();
                for (id, key, _) in uploads {
                    if !rows::upload_sessions::exists(conn, &id)? {
                        rowless.push(key);
                    }
                }
                Ok(rowless)
            })
            .await?;
        for key in rowless {
            report.leftovers.push(format!(
                "{key}: upload object with no session row (harmless: no upload needs it; the sweep removes it once {} minutes old)",
                crate::artifacts::STRAY_AGE.num_minutes()
            ));
        }
        // 2. Rows, signatures and chains, on one read connection.
        let (n_manifests, n_events, problems) = self
            .db
            .read(move |conn| {
                let mut problems = Vec::new();
                for id in rows::blobs::all(conn)? {
                    if on_disk.contains(&id) {
                        continue;
                    }
                    // A tombstone (issue #46): its bytes went by policy, with an Event.
                    if rows::blobs::is_disposed(conn, &id)? {
                        if rows::blob_dispositions::latest(conn, None, &id)?.is_none() {
                            problems.push(format!("{id}: disposed of with no artifact.disposed Event"));
                        }
                        continue;
                    }
                    problems.push(format!("{id}: index row without a blob"));
                }
                let mut n_manifests = 0u64;
                let rows = crate::rows::manifests::all_for_fsck(conn)?;
                for (manifest_id, blake3, envelope, producer, disposed) in rows {
                    n_manifests += 1;
                    let manifest_id = ArtifactId(to32(manifest_id)?);
                    // A tombstone (issue #46): its record went by policy; its
                    // `records.disposed` Event is checked with the other named Events.
                    if disposed.is_some() {
                        if !envelope.is_empty() {
                            problems.push(format!(
                                "manifest {manifest_id}: disposed of, but its envelope is still stored"
                            ));
                        }
                        continue;
                    }
                    if let Err(problem) =
                        check_manifest(conn, &manifest_id, &blake3, &envelope, &producer)
                    {
                        problems.push(format!("manifest {manifest_id}: {problem}"));
                    }
                }
                problems.extend(crate::context::check_rows(conn)?);
                problems.extend(crate::fsck_log::check_named_events(conn)?);
                let mut n_events = 0u64;
                let groups = crate::rows::groups::ids(conn)?;
                for group in groups {
                    let mut head = (0u64, weft_api::EventHash::GENESIS);
                    // The Mission and WorkItem rows must be what the log folds to; a compacted
                    // Group's fold would start from its snapshot's state document, so only a
                    // whole online log is folded here.
                    let mut work = Some(weft_api::work::events::WorkProjection::default());
                    // Compacted history: each snapshot's signature, and its archive is checked
                    // below (async); here the online chain continues from the last snapshot.
                    if let Some((sequence, hash)) = events::compacted(conn, &group)? {
                        head = (sequence, hash);
                        work = None;
                    }
                    loop {
                        let batch = events::read(conn, &group, head.0, 10_000)?;
                        if batch.is_empty() {
                            break;
                        }
                        n_events += batch.len() as u64;
                        if let Some(work) = work.as_mut() {
                            for event in &batch {
                                if let Ok(Some(weft_api::EventPayload::Work(_, payload))) =
                                    weft_api::EventPayload::of(event)
                                {
                                    work.apply(event.sequence, &payload);
                                }
                            }
                        }
                        // The actor index (V28) says what each payload says (issue #50).
                        let actors =
                            crate::rows::events::actors_after(conn, &group, head.0, 10_000)?;
                        for (event, (sequence, stored)) in batch.iter().zip(&actors) {
                            let named = weft_api::EventPayload::of(event)
                                .ok()
                                .flatten()
                                .and_then(|payload| payload.actor().map(|id| id.to_string()));
                            if event.sequence == *sequence && named != *stored {
                                problems.push(format!(
                                    "group {group}: Event {sequence} is indexed as acted by {stored:?}, its payload says {named:?}"
                                ));
                            }
                        }
                        match weft_api::event::verify_chain(head.0, head.1, &batch) {
                            Ok(next) => head = next,
                            Err(problem) => {
                                problems.push(format!("group {group}: {problem}"));
                                break;
                            }
                        }
                    }
                    if let Some(work) = work {
                        problems.extend(crate::work::check_projection(conn, &group, &work)?);
                    }
                    // The Merkle tree (issue #45) is exactly the log.
                    let (log_head, _) = events::head(conn, &group)?;
                    problems.extend(crate::tlog::check(conn, &group, log_head)?);
                }
                Ok((n_manifests, n_events, problems))
            })
            .await?;
        report.n_manifests = n_manifests;
        report.n_events = n_events;
        report.problems.extend(problems);
        // 3. Compacted history: every snapshot signed by the authority, every archive a chain
        //    that continues the previous one and ends at the signed chain hash.
        let groups: Vec<String> = self.db.read(crate::rows::snapshots::groups).await?;
        for group in groups {
            let snapshots = self
                .db
                .read({
                    let group = group.clone();
                    move |conn| crate::events::snapshots(conn, &group)
                })
                .await?;
            let mut head = (0u64, weft_api::EventHash::GENESIS);
            for snapshot in snapshots {
                let (_, authority) = self.authority_key();
                if snapshot
                    .envelope
                    .verify(weft_api::dsse::SNAPSHOT_TYPE, &authority)
                    .is_err()
                {
                    report.problems.push(format!(
                        "group {group}: snapshot {} is not signed by the authority key",
                        snapshot.reference.sequence
                    ));
                }
                let content = crate::compaction::handle::Compaction(self)
                    .open_group_blob(snapshot.archive)
                    .await;
                let bytes = match content {
                    Ok(content) => {
                        content
                            .into_body(None)
                            .try_fold(Vec::new(), |mut all, chunk| async move {
                                all.extend_from_slice(&chunk);
                                Ok(all)
                            })
                            .await
                    }
                    Err(error) => Err(error),
                };
                let Ok(bytes) = bytes else {
                    report.problems.push(format!(
                        "group {group}: archive {} unreadable or corrupt",
                        snapshot.archive
                    ));
                    continue;
                };
                let archived: Result<Vec<Event>, _> = bytes
                    .split(|b| *b == b'\n')
                    .filter(|line| !line.is_empty())
                    .map(serde_json::from_slice)
                    .collect();
                match archived.map_err(|e| e.to_string()).and_then(|events| weft_api::event::verify_chain(head.0, head.1, &events)) {
                    Ok(next) if next == (snapshot.reference.sequence, snapshot.reference.event_chain_hash) => head = next,
                    Ok(_) => report.problems.push(format!("group {group}: archive of snapshot {} does not end at its signed chain hash", snapshot.reference.sequence)),
                    Err(problem) => report.problems.push(format!("group {group}: archive of snapshot {}: {problem}", snapshot.reference.sequence)),
                }
                report.n_events += snapshot.reference.sequence - snapshot.from_sequence + 1;
            }
        }
        Ok(report)
    }
}

/// Whether blob `id` was disposed of by policy (a tombstone, not damage).
async fn disposed(engine: &crate::engine::Engine, id: ArtifactId) -> Result<bool, Error> {
    engine
        .db
        .read(move |conn| rows::blobs::is_disposed(conn, &id))
        .await
}
