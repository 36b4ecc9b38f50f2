//! Benchmark support (cargo feature `bench-support`, enabled only for `cargo bench`): a bulk
//! loader that writes a synthetic provenance DAG into the same tables the publication path
//! writes (through `rows/`), and the recursive-CTE lineage query the in-memory index is compared
//! against (its SQL in `rows/derivations.rs`).
//! Tests use [`tamper`] to corrupt a stopped or running server's index behind its back (the
//! SQL is in the `rows/` file of each table). Never compiled into the server.

use weft_api::{ArtifactId, Digests, Id, Sha256Digest};

use crate::error::Error;
use crate::{Reader, Store};

/// What `load_synthetic_dag` built.
#[derive(Debug)]
pub struct SyntheticDag {
    /// The artifact ids, in publication order.
    pub ids: Vec<ArtifactId>,
    /// Derivation edges written.
    pub edges: usize,
    /// How much the process's resident memory grew while the lineage index was built from the
    /// tables (Linux `VmRSS`; `None` elsewhere).
    pub index_rss_bytes: Option<u64>,
    /// How long reading the publications back and building the index took (what a restart
    /// pays).
    pub index_rebuild: std::time::Duration,
}

/// The process's resident set size, from `/proc/self/status`.
fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Appends `n` small Events to Group `group_id` (which must exist), 10,000 per transaction:
/// a log (and its Merkle tree) of millions in minutes, for the transparency-log benchmark.
pub async fn load_events(store: &Store, group_id: &Id, n: u64) -> Result<(), Error> {
    let mut done = 0;
    while done < n {
        let count = (n - done).min(10_000);
        let (group, now) = (group_id.clone(), store.now());
        store
            .inner
            .db
            .write(move |tx| {
                for i in done..done + count {
                    crate::events::append_raw(
                        tx,
                        &group,
                        "bench.tick",
                        format!(r#"{{"n":{i}}}"#),
                        now,
                    )?;
                }
                Ok(())
            })
            .await?;
        done += count;
    }
    Ok(())
}

/// Sets where the sweep of uncited blobs goes on from (after digest `after`; empty: the first
/// blob; a server starts at a random digest) and how many blobs each of its rounds examines
/// (`artifacts/sweep.rs`, `SWEEP_WINDOW` by default), so a test can walk a few blobs in
/// several rounds, or start a walk where it likes.
pub fn set_sweep_walk(store: &Store, after: &[u8], blobs: u64) {
    let mut walk = store
        .inner
        .sweep_walk
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    *walk = (after.to_vec(), blobs.max(1));
}

/// Teaches the writer's connection of Group `group_id` that WorkItem `work_item_id` is in
/// Mission `mission_id`, rightly or not (`rows::work_items::mission_known`, PostgreSQL only):
/// a test that the guess is checked against the row before its Mission is used.
pub async fn teach_mission(
    store: &Store,
    group_id: &str,
    work_item_id: &str,
    mission_id: &str,
) -> Result<(), Error> {
    let (work_item, mission) = (work_item_id.to_owned(), mission_id.to_owned());
    store
        .inner
        .db
        .write_in(group_id, move |tx| {
            crate::rows::work_items::learn_mission(tx, &work_item, &mission);
            Ok(())
        })
        .await
}

/// Answers trimmed per transaction past the horizon (`lifespan/answers.rs`), for tests that
/// size a backlog.
pub const ANSWER_BATCH: u64 = crate::lifespan::ANSWER_BATCH;

/// Keeps `n` answered Commands of Agent `agent_id` in Group `group_id`, answered at `at`, as
/// an accepted Command keeps its answer (`rows/commands.rs`): a backlog for the trimming of
/// answers past the horizon to work through.
pub async fn keep_answers(
    store: &Store,
    group_id: &str,
    agent_id: &str,
    n: u64,
    at: chrono::DateTime<chrono::Utc>,
) -> Result<(), Error> {
    let (group, agent) = (group_id.to_owned(), agent_id.to_owned());
    store
        .inner
        .db
        .write(move |tx| {
            for i in 0..n {
                crate::rows::commands::insert(
                    tx,
                    &format!("kept-{i}"),
                    &group,
                    &agent,
                    &[0u8; 32],
                    r#"{"commandId":"kept","events":[]}"#,
                    "{}",
                    at,
                )?;
            }
            Ok(())
        })
        .await
}

/// Writes `n` artifacts, each derived from 0–3 earlier ones (about `2 n` edges), published
/// in one Group, then rebuilds the lineage index from the tables exactly as a restart would.
pub async fn load_synthetic_dag(store: &Store, n: usize, seed: u64) -> Result<SyntheticDag, Error> {
    let group = Id::parse("groupId", "bench")?;
    store.directory().create_group(group.clone()).await?;
    let key = weft_api::dsse::generate_key().verifying_key();
    store
        .directory()
        .register_agent(Id::parse("agentId", "bench-agent")?, key, "1".into())
        .await?;
    let ids: Vec<ArtifactId> = (0..n)
        .map(|i| ArtifactId(*blake3::hash(&(i as u64).to_le_bytes()).as_bytes()))
        .collect();
    let mut state = seed | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut edges: Vec<Vec<usize>> = Vec::with_capacity(n);
    for i in 0..n {
        // 0, 1, 2 or 3 sources with weights 1:2:3:4 (mean 2), so about 2 n edges.
        let n_sources = match next() % 10 {
            0 => 0,
            1..=2 => 1,
            3..=5 => 2,
            _ => 3,
        }
        .min(i);
        let mut sources: Vec<usize> = (0..n_sources)
            .map(|_| (next() % i as u64) as usize)
            .collect();
        sources.sort_unstable();
        sources.dedup();
        edges.push(sources);
    }
    const BATCH: usize = 20_000;
    let now = store.inner.clock.now();
    for start in (0..n).step_by(BATCH) {
        let end = (start + BATCH).min(n);
        let batch_ids = ids[start..end].to_vec();
        let batch_edges: Vec<Vec<ArtifactId>> = edges[start..end]
            .iter()
            .map(|s| s.iter().map(|&j| ids[j]).collect())
            .collect();
        store
            .inner
            .db
            .write(move |txn| {
                for (offset, (id, sources)) in batch_ids.iter().zip(&batch_edges).enumerate() {
                    let i = start + offset;
                    let manifest_id = ArtifactId(*blake3::hash(&id.0).as_bytes());
                    let digests = Digests {
                        blake3: *id,
                        sha256: Sha256Digest(manifest_id.0),
                        size: 1,
                    };
                    crate::rows::blobs::insert(txn, &digests, now, None)?;
                    crate::rows::manifests::insert(
                        txn,
                        &crate::rows::manifests::New {
                            manifest_id: &manifest_id,
                            blake3: id,
                            group_id: "bench",
                            mission_id: &format!("m-{}", i / 10_000),
                            work_item_id: &format!("w-{}", i / 100),
                            producer: "bench-agent",
                            media_type: "application/json",
                            lease_id: "lease",
                            ownership_epoch: 1,
                            classification: "internal",
                            created_at: "bench",
                            envelope: "{}",
                            sequence: i as u64 + 1,
                            name: None,
                        },
                    )?;
                    for source in sources {
                        crate::rows::derivations::insert(txn, id, source, &manifest_id)?;
                    }
                }
                Ok(())
            })
            .await?;
    }
    let rebuild = std::time::Instant::now();
    let (publications, last) = store
        .inner
        .db
        .read(|conn| crate::lineage_index::load_publications_after(conn, 0))
        .await?;
    let edges = publications.iter().map(|p| p.sources.len()).sum();
    let before = resident_bytes();
    store.inner.lineage.catch_up(&publications, last);
    let after = resident_bytes();
    let index_rebuild = rebuild.elapsed();
    drop(publications);
    Ok(SyntheticDag {
        ids,
        edges,
        index_rss_bytes: before.zip(after).map(|(b, a)| a.saturating_sub(b)),
        index_rebuild,
    })
}

/// The same ancestors/descendants query as a recursive CTE over `derivations`, returning what
/// the index answer carries (each reached artifact's depth and its visible manifests' key
/// fields), visibility checked against the reader's Groups. Returns how many rows it produced.
pub async fn cte_lineage(
    store: &Store,
    root: ArtifactId,
    descendants: bool,
    depth: Option<u32>,
    limit: usize,
    reader: &Reader,
) -> Result<usize, Error> {
    let group = match reader {
        Reader::Admin => None,
        Reader::Agent { group_id, .. } => Some(group_id.to_string()),
    };
    store
        .inner
        .db
        .read(move |conn| {
            crate::rows::derivations::cte_lineage(
                conn,
                &root,
                descendants,
                depth,
                group.as_deref(),
                limit,
            )
        })
        .await
}

/// One Execution Lease as a publication names it: (WorkItem, lease id, ownership epoch,
/// producer).
pub type LeaseRef = (String, String, u64, String);

/// Runs the publication's lease check (`access::lease::check_lease`, LSE-4/5: the one a
/// manifest or an owner's Evidence pays inside its writer transaction) `rounds` times over
/// `leases` on the writer's connection, as publication does; answers the mean time of one
/// check. Every lease must be current, or this fails.
pub async fn time_lease_checks(
    store: &Store,
    leases: Vec<LeaseRef>,
    rounds: usize,
) -> Result<std::time::Duration, Error> {
    let now = crate::clock::format_instant(store.inner.clock.now());
    store
        .inner
        .db
        .write(move |tx| {
            let started = std::time::Instant::now();
            for _ in 0..rounds {
                for (work_item, lease, epoch, producer) in &leases {
                    let (_, _, owner, current) =
                        crate::rows::work_items::place_and_ownership(tx, work_item)?
                            .ok_or(crate::sql::SqlError::NoRows)?;
                    let ownership = (owner.as_deref(), current);
                    if let Err(stale) = crate::access::lease::check_lease(
                        tx, work_item, lease, *epoch, producer, &now, ownership,
                    )? {
                        return Err(crate::artifacts::binding::refusal(stale));
                    }
                }
            }
            Ok(started.elapsed() / (rounds * leases.len()).max(1) as u32)
        })
        .await
}

/// Cites an uploaded blob with a manifest row in Group `bench` (as `load_synthetic_dag`
/// does), so `open_content` finds a media type for it: the range benchmark's setup.
pub async fn cite_blob(store: &Store, blake3: ArtifactId) -> Result<(), Error> {
    let group = Id::parse("groupId", "bench")?;
    store.directory().create_group(group).await?;
    let key = weft_api::dsse::generate_key().verifying_key();
    store
        .directory()
        .register_agent(Id::parse("agentId", "bench-agent")?, key, "1".into())
        .await?;
    store
        .inner
        .db
        .write(move |txn| {
            let manifest_id = ArtifactId(*blake3::hash(&blake3.0).as_bytes());
            crate::rows::manifests::insert(
                txn,
                &crate::rows::manifests::New {
                    manifest_id: &manifest_id,
                    blake3: &blake3,
                    group_id: "bench",
                    mission_id: "m",
                    work_item_id: "w",
                    producer: "bench-agent",
                    media_type: "application/octet-stream",
                    lease_id: "lease",
                    ownership_epoch: 1,
                    classification: "internal",
                    created_at: "bench",
                    envelope: "{}",
                    sequence: 1,
                    name: None,
                },
            )?;
            Ok(())
        })
        .await
}

/// The Range read as it was before outboards (issue #15), the benchmark's baseline: every
/// stored byte re-hashed, the range's bytes kept.
pub fn full_rehash_range(
    content: crate::Content,
    range: std::ops::Range<u64>,
) -> futures::stream::BoxStream<'static, Result<bytes::Bytes, Error>> {
    content.into_full_rehash_body(range)
}

pub mod postgres;

/// Corrupting an index file behind the server's back, as a disk fault or an intruder would
/// (tests of what fsck and verify-on-read then say). Each opens `index` (an `index.sqlite`)
/// on its own connection and answers how many rows it changed.
pub mod tamper {
    use std::path::Path;

    use crate::sql::Connection;
    use weft_api::ArtifactId;

    use crate::error::Error;

    fn open(index: &Path) -> Result<Connection, Error> {
        Ok(Connection::from_sqlite(rusqlite::Connection::open(index)?))
    }

    /// Replaces the inline copy of blob `id` with `bytes`.
    pub fn inline_bytes(index: &Path, id: &ArtifactId, bytes: &[u8]) -> Result<usize, Error> {
        crate::rows::inline_bytes::tamper_of_blob(&open(index)?, &id.0, bytes)
    }

    /// Replaces the SHA-256 the index records for blob `id`.
    pub fn sha256(index: &Path, id: &ArtifactId, sha256: [u8; 32]) -> Result<usize, Error> {
        crate::rows::blobs::tamper_sha256(&open(index)?, &id.0, &sha256)
    }

    /// Rewrites the payload of Event `sequence` of Group `group_id` (its hash no longer
    /// matches its content).
    pub fn event_payload(
        index: &Path,
        group_id: &str,
        sequence: u64,
        payload: &str,
    ) -> Result<usize, Error> {
        crate::rows::events::tamper_payload(&open(index)?, group_id, sequence, payload)
    }

    /// Relinks Event `sequence` of Group `group_id` to `prev_hash`, rehashed: whole, but not
    /// chained to the Event before it.
    pub fn event_link(
        index: &Path,
        group_id: &str,
        sequence: u64,
        prev_hash: [u8; 32],
    ) -> Result<usize, Error> {
        crate::rows::events::tamper_link(&open(index)?, group_id, sequence, prev_hash)
    }

    /// Rewrites the indexed actor of Event `sequence` of Group `group_id`.
    pub fn event_actor(
        index: &Path,
        group_id: &str,
        sequence: u64,
        actor: &str,
    ) -> Result<usize, Error> {
        crate::rows::events::tamper_actor(&open(index)?, group_id, sequence, actor)
    }

    /// Rewrites the type WorkItem `work_item_id`'s history entry at `sequence` says its Event
    /// is (the look-ups by type trust it).
    pub fn history_type(
        index: &Path,
        work_item_id: &str,
        sequence: u64,
        kind: &str,
    ) -> Result<usize, Error> {
        crate::rows::work_history::tamper_type(&open(index)?, work_item_id, sequence, kind)
    }

    /// Flips a bit of stored hash `index` of Group `group_id`'s Merkle tree.
    pub fn tree_hash(index: &Path, group_id: &str, stored: u64) -> Result<usize, Error> {
        crate::rows::tlog_hashes::tamper(&open(index)?, group_id, stored)
    }

    /// Removes every Group's Merkle tree (as before schema version 31); answers how many
    /// stored hashes went.
    pub fn forget_trees(index: &Path) -> Result<usize, Error> {
        crate::rows::tlog_hashes::forget_all(&open(index)?)
    }

    /// Removes the newest `n` Events of Group `group_id`; answers how many went and the
    /// sequence of the head they went from.
    pub fn cut_log_tail(index: &Path, group_id: &str, n: u64) -> Result<(usize, u64), Error> {
        crate::rows::events::cut_tail(&open(index)?, group_id, n)
    }
}

/// What `load_expired` wrote: the bytes a retention policy now names.
#[derive(Clone, Copy, Debug)]
pub struct Expired {
    /// Small artifacts, stored inline in the index, and their bytes.
    pub small: u64,
    pub small_bytes: u64,
    /// Large artifacts, stored as blob files, and their bytes.
    pub large: u64,
    pub large_bytes: u64,
}

/// Writes `n_small` artifacts of `small_size` bytes (inline in the index) and `n_large` of
/// `large_size` bytes (blob files), published in Mission `m-gc` of Group `gc`, which ended 30
/// days ago, uploaded as long ago; Group `gc` keeps bytes one day after a Mission's end. So a
/// collection may dispose of every one of them. Through the same `rows/` the server writes.
pub async fn load_expired(
    store: &Store,
    n_small: u64,
    small_size: usize,
    n_large: u64,
    large_size: usize,
    keep_records_seconds: Option<u64>,
) -> Result<Expired, Error> {
    use weft_api::lifecycle::Retention;
    use weft_api::work::machine::MissionState;
    let group = Id::parse("groupId", "gc")?;
    store.directory().create_group(group.clone()).await?;
    let key = weft_api::dsse::generate_key().verifying_key();
    store
        .directory()
        .register_agent(Id::parse("agentId", "gc-agent")?, key, "1".into())
        .await?;
    let long_ago = store.inner.clock.now() - chrono::Duration::days(30);
    store
        .inner
        .db
        .write(move |txn| {
            let mut mission = crate::rows::missions::MissionRow {
                mission_id: Id::parse("missionId", "m-gc")?,
                group_id: Id::parse("groupId", "gc")?,
                title: "expired".into(),
                priority_class: weft_api::work::contract::Level::Normal,
                budget: Default::default(),
                state: MissionState::Active,
                revision: 1,
                parent_work_item_id: None,
                child_failure_policy: None,
            };
            crate::rows::missions::insert(txn, &mission, 1)?;
            mission.state = MissionState::Cancelled;
            crate::rows::missions::save_state(txn, &mission, long_ago)?;
            crate::rows::retention_policies::set(
                txn,
                &crate::rows::retention_policies::PolicyRow {
                    group_id: Id::parse("groupId", "gc")?,
                    mission_id: None,
                    classification: None,
                    retention: Retention {
                        keep_bytes_seconds: Some(86_400),
                        keep_records_seconds,
                    },
                    sequence: 1,
                },
            )?;
            Ok(())
        })
        .await?;
    let bytes_of = |kind: &str, i: u64, size: usize| -> Vec<u8> {
        let mut hasher = blake3::Hasher::new();
        hasher.update(kind.as_bytes());
        hasher.update(&i.to_le_bytes());
        let mut bytes = vec![0u8; size];
        hasher.finalize_xof().fill(&mut bytes);
        bytes
    };
    let manifest = |txn: &crate::sql::Connection, digests: &Digests, i: u64| {
        let manifest_id = ArtifactId(*blake3::hash(&digests.blake3.0).as_bytes());
        crate::rows::manifests::insert(
            txn,
            &crate::rows::manifests::New {
                manifest_id: &manifest_id,
                blake3: &digests.blake3,
                group_id: "gc",
                mission_id: "m-gc",
                work_item_id: &format!("w-gc-{}", i / 100),
                producer: "gc-agent",
                media_type: "application/octet-stream",
                lease_id: "lease",
                ownership_epoch: 1,
                classification: "internal",
                created_at: "bench",
                envelope: "{}",
                sequence: i + 1,
                name: None,
            },
        )
        .map(|_| ())
    };
    // Small transactions: a job's savepoint costs grow with the pages it dirtied.
    const BATCH: u64 = 2_000;
    for start in (0..n_small).step_by(BATCH as usize) {
        let end = (start + BATCH).min(n_small);
        let blobs: Vec<(Digests, Vec<u8>)> = (start..end)
            .map(|i| {
                let bytes = bytes_of("small", i, small_size);
                (weft_api::digest::Hasher::digest(&bytes), bytes)
            })
            .collect();
        store
            .inner
            .db
            .write(move |txn| {
                for (offset, (digests, bytes)) in blobs.iter().enumerate() {
                    let inline = crate::rows::inline_bytes::insert(txn, bytes)?;
                    crate::rows::blobs::insert(txn, digests, long_ago, Some(inline))?;
                    manifest(txn, digests, start + offset as u64)?;
                }
                Ok(())
            })
            .await?;
    }
    for i in 0..n_large {
        let bytes = bytes_of("large", i, large_size);
        let digests = weft_api::digest::Hasher::digest(&bytes);
        store
            .inner
            .blobs
            .put_whole(&digests.blake3, bytes.into())
            .await?;
        store
            .inner
            .db
            .write(move |txn| {
                crate::rows::blobs::insert(txn, &digests, long_ago, None)?;
                manifest(txn, &digests, n_small + i)
            })
            .await?;
    }
    Ok(Expired {
        small: n_small,
        small_bytes: n_small * small_size as u64,
        large: n_large,
        large_bytes: n_large * large_size as u64,
    })
}
