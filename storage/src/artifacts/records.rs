//! Records disposal (issue #46): a Mission's records (the signed envelopes of its manifests
//! and Evidence) are deleted once its retention policy's `keepRecords` has passed since it
//! ended (`weft_api::lifecycle::records_due`, never early), unless something still needs them.
//! Each row stays as a tombstone (ids, digests, verdict columns and the sequence of the Event
//! that wrote it) naming the `records.disposed` Event that says what went, under which policy
//! and why: lineage still shows the node, the log still verifies, a WorkItem's criteria still
//! weigh a disposed verdict, and a read of the record answers 410 `disposed` with that
//! Event's sequence. A tombstone manifest still lets its Group's readers see bytes that are
//! still kept (bytes follow `keepBytes`, records `keepRecords`; access is not a record).
//!
//! What keeps a record past its policy:
//! - a hold in force on its Mission or WorkItem; for a manifest, a hold reaching its artifact
//!   (holds reach up the lineage, `keeping.rs`); for Evidence, one reaching an artifact it
//!   cites;
//! - for a manifest, its artifact being reusable knowledge (its readers keep reading it); for
//!   Evidence, being the signed approval of reusable knowledge.
//!
//! Each batch runs in one transaction: it takes the disposal lock exclusively (PostgreSQL;
//! holds take it shared before they are placed, wherever their Group, `lifespan/holds.rs`)
//! and the Mission's Group's lock (reusable knowledge takes it before citing an approval),
//! then reads the policies and every hold in force afresh, decides, appends one
//! `records.disposed` Event and marks the rows with its sequence. A hold either committed
//! first, and keeps them, or comes after and finds them disposed of. The job names no lane,
//! so it runs before any Group job of its writer's batch takes a lock, and waits for a lock
//! only briefly (a busy index: the next round); a batch is decided first without a lock,
//! and one that would dispose of nothing takes none. A crash leaves the batch whole or absent.
//! The batches walk each Mission's rows by rowid, so kept records never stall the rest.

use chrono::{DateTime, Utc};
use weft_api::lifecycle::views::{CollectionReport, RecordsDisposalView};
use weft_api::lifecycle::{DisposedEvidence, DisposedManifest, RecordsDisposed, records_due};
use weft_api::{EventPayload, Id};

use super::keeping::{HeldCache, Policies};
use crate::artifacts::handle::Artifacts;
use crate::clock::format_instant;
use crate::error::Error;
use crate::events;
use crate::rows;
use crate::sql::Connection;

/// Records of each table decided per transaction (one `records.disposed` Event at most).
const BATCH: u64 = 256;

/// The most cited artifacts one Event names for its disposed Evidence.
const MAX_NAMED: usize = 4_096;

/// Where a Mission's walk stands: the last rowid decided in each table.
#[derive(Clone, Copy, Default)]
struct Cursor {
    manifests: u64,
    evidence: u64,
}

/// What one batch decided.
struct Decided {
    manifests: Vec<DisposedManifest>,
    evidence: Vec<DisposedEvidence>,
    /// Past the policy, but held or approving reusable knowledge.
    kept: u64,
    policies: std::collections::BTreeSet<String>,
    reason: Option<String>,
    cursor: Cursor,
    /// Whether either table may hold more rows after the cursor.
    more: bool,
}

impl Artifacts<'_> {
    /// Disposes of every record past its Mission's `keepRecords` that nothing keeps (or, in a
    /// dry run, says what would go), starting no batch after `deadline`. Runs after the
    /// bytes' collection (`collection.rs`): records never go before the bytes they describe
    /// would under the same policy.
    pub(super) async fn collect_records(
        &self,
        report: &mut CollectionReport,
        deadline: Option<std::time::Instant>,
    ) -> Result<(), Error> {
        let now = self.0.clock.now();
        let missions = self.0.db.read(move |conn| due_missions(conn, now)).await?;
        'missions: for (mission, group) in missions {
            let mut cursor = Cursor::default();
            loop {
                if deadline.is_some_and(|deadline| std::time::Instant::now() >= deadline) {
                    break 'missions;
                }
                let (decided, sequence) = match self
                    .records_batch(&group, &mission, cursor, report.dry_run)
                    .await
                {
                    Ok(batch) => batch,
                    // Another server's writers held a lock past the brief wait: next round.
                    Err(error) if error.code() == weft_api::ErrorCode::StorageUnavailable => {
                        tracing::debug!(%error, "records collection waits for its next round");
                        break 'missions;
                    }
                    Err(error) => return Err(error),
                };
                report.records_kept += decided.kept;
                if !decided.manifests.is_empty() || !decided.evidence.is_empty() {
                    report.records.push(RecordsDisposalView {
                        group_id: group.clone(),
                        mission_id: mission.clone(),
                        manifests: decided.manifests.len() as u64,
                        evidence: decided.evidence.len() as u64,
                        policy: join(&decided.policies),
                        reason: decided.reason.clone().unwrap_or_default(),
                        sequence,
                    });
                }
                if !decided.more {
                    break;
                }
                cursor = decided.cursor;
            }
        }
        let (manifests, evidence) = report.records.iter().fold((0, 0), |(m, e), view| {
            (m + view.manifests, e + view.evidence)
        });
        if !report.dry_run && manifests + evidence > 0 {
            metrics::counter!("weft_gc_disposed_records_total").increment(manifests + evidence);
            tracing::info!(
                manifests,
                evidence,
                "collection disposed of expired records"
            );
        }
        Ok(())
    }

    /// One batch of one Mission: decided and (unless `dry_run`) disposed of in one
    /// transaction (see the module docs for its locks). Answers what it decided and the
    /// `records.disposed` Event's sequence when it appended one.
    async fn records_batch(
        &self,
        group: &Id,
        mission: &Id,
        cursor: Cursor,
        dry_run: bool,
    ) -> Result<(Decided, Option<u64>), Error> {
        let now = self.0.clock.now();
        let (group, mission) = (group.clone(), mission.clone());
        if dry_run {
            return self
                .0
                .db
                .read(move |conn| Ok((decide(conn, &group, &mission, cursor, now)?, None)))
                .await;
        }
        // Decided first on a read connection, with no lock: a batch whose records are all
        // kept (held, reusable) or not yet due changes nothing, and takes no lock.
        let (g, m) = (group.clone(), mission.clone());
        let first = self
            .0
            .db
            .read(move |conn| decide(conn, &g, &m, cursor, now))
            .await?;
        if first.manifests.is_empty() && first.evidence.is_empty() {
            return Ok((first, None));
        }
        self.0
            .db
            .write(move |txn| {
                rows::blob_disposals::exclude(txn)?;
                rows::blob_disposals::wait_briefly(txn, true)?;
                rows::groups::lock(txn, group.as_str())?;
                let decided = decide(txn, &group, &mission, cursor, now)?;
                rows::blob_disposals::wait_briefly(txn, false)?;
                if decided.manifests.is_empty() && decided.evidence.is_empty() {
                    return Ok((decided, None));
                }
                let payload = EventPayload::RecordsDisposed(RecordsDisposed {
                    mission_id: mission.clone(),
                    manifests: decided.manifests.clone(),
                    evidence: decided.evidence.clone(),
                    policy: join(&decided.policies),
                    reason: decided.reason.clone().unwrap_or_default(),
                    disposed_at: format_instant(now),
                });
                let sequence = events::append(txn, &group, &payload, now)?;
                for manifest in &decided.manifests {
                    rows::manifests::dispose_record(txn, &manifest.manifest_id, sequence)?;
                }
                for evidence in &decided.evidence {
                    rows::evidence::dispose_record(txn, &evidence.evidence_id, sequence)?;
                }
                Ok((decided, Some(sequence)))
            })
            .await
    }
}

fn join(policies: &std::collections::BTreeSet<String>) -> String {
    policies.iter().cloned().collect::<Vec<_>>().join("; ")
}

/// The Missions whose records some policy may let go at `now` and that still keep some:
/// (Mission, Group), oldest end first.
fn due_missions(conn: &Connection, now: DateTime<Utc>) -> Result<Vec<(Id, Id)>, Error> {
    let policies = Policies::load(conn)?;
    if policies.is_empty() {
        return Ok(Vec::new());
    }
    let mut found = Vec::new();
    for (mission, group, ended) in rows::missions::ended(conn)? {
        let due = policies
            .any_of(&group, &mission)
            .iter()
            .any(|policy| records_due(Some(ended), Some(policy)).is_some_and(|due| due <= now));
        if due
            && (!rows::manifests::records_kept_of_mission(conn, mission.as_str(), 0, 1)?.is_empty()
                || !rows::evidence::records_kept_of_mission(conn, mission.as_str(), 0, 1)?
                    .is_empty())
        {
            found.push((mission, group));
        }
    }
    Ok(found)
}

/// Decides on the next batch of Mission `mission`'s kept records after `cursor`, with the
/// holds in force read now (a hold's reach grows with what its Mission publishes: never
/// cached across transactions).
fn decide(
    conn: &Connection,
    group: &Id,
    mission: &Id,
    cursor: Cursor,
    now: DateTime<Utc>,
) -> Result<Decided, Error> {
    let policies = Policies::load(conn)?;
    let mut held = HeldCache::default();
    held.refresh(conn)?;
    let ended = rows::missions::ended_at(conn, mission.as_str())?;
    let mut reason = None;
    // Past its policy (`Some(name)`), or not yet (`None`).
    let mut past = |class| -> Option<String> {
        let (retention, name) = policies.of(group, mission, class)?;
        let due = records_due(ended, Some(&retention)).filter(|due| *due <= now)?;
        if let Some(ended) = ended {
            reason.get_or_insert_with(|| {
                format!(
                    "Mission {mission} ended {}, records due {}",
                    format_instant(ended),
                    format_instant(due)
                )
            });
        }
        Some(name)
    };
    let mut names = std::collections::BTreeSet::new();
    let mut next = cursor;
    let mut kept = 0;
    let manifests =
        rows::manifests::records_kept_of_mission(conn, mission.as_str(), cursor.manifests, BATCH)?;
    let mut more = manifests.len() as u64 == BATCH;
    let mut gone_manifests = Vec::new();
    for record in manifests {
        next.manifests = record.rowid;
        let Some(name) = past(Some(record.classification)) else {
            continue;
        };
        if held.holds_work(mission, &record.work_item_id)
            || held.holds_blob_for(group, &record.artifact)
            || rows::reusable_artifacts::anywhere(conn, &record.artifact)?
        {
            kept += 1;
            continue;
        }
        names.insert(name);
        gone_manifests.push(DisposedManifest {
            manifest_id: record.manifest_id,
            artifact: record.artifact,
        });
    }
    let evidence =
        rows::evidence::records_kept_of_mission(conn, mission.as_str(), cursor.evidence, BATCH)?;
    more |= evidence.len() as u64 == BATCH;
    let mut gone_evidence = Vec::new();
    // Artifacts the Event names for the disposed Evidence: bounded, so one Event stays small
    // (a record cites at most 1,024; the rest go in the next batch).
    let mut named = 0;
    for (rowid, evidence_id, work_item) in evidence {
        let Some(name) = past(None) else {
            next.evidence = rowid;
            continue;
        };
        let cited = rows::evidence_artifacts::cited_by_record(conn, &evidence_id)?;
        if !gone_evidence.is_empty() && named + cited.len() > MAX_NAMED {
            more = true;
            break;
        }
        next.evidence = rowid;
        let cites_held = cited.iter().any(|blob| held.holds_blob_for(group, blob));
        if held.holds_work(mission, &work_item)
            || cites_held
            || rows::reusable_artifacts::approves(conn, &evidence_id)?
        {
            kept += 1;
            continue;
        }
        names.insert(name);
        named += cited.len();
        gone_evidence.push(DisposedEvidence {
            evidence_id,
            artifacts: cited,
        });
    }
    Ok(Decided {
        manifests: gone_manifests,
        evidence: gone_evidence,
        kept,
        policies: names,
        reason,
        cursor: next,
        more,
    })
}
