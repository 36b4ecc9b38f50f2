//! Fast restart (issue #15): a snapshot reads back as the very index it was taken of and
//! answers as a rebuild from the tables does; the rows committed after it (a crash before the
//! next snapshot included) are read at open; a torn, corrupt, foreign or too-new file falls
//! back to the rebuild; an in-memory store keeps none.

use proptest::prelude::*;
use weft_api::Id;
use weft_api::digest::{ArtifactId, Digests};

use super::coverage::Coverage;
use super::tests::{
    Published, artifact_id, group_name, history, index_of, publication, simple_query,
};
use super::*;
use crate::rows;
use crate::{Options, Store};

/// Every answer the index gives about artifacts `0..n_artifacts`: walks from each root in
/// every direction, WorkItem and Mission scopes and paths, for three readers.
fn answers(index: &Index, n_artifacts: usize) -> Vec<String> {
    let readers = [
        None,
        Some(vec![group_name(0)]),
        Some(vec![group_name(1), group_name(2)]),
    ];
    let mut answers = Vec::new();
    for reader in &readers {
        let audience = Audience::of_groups(reader.as_deref());
        for root in 0..n_artifacts {
            for direction in [
                Direction::Ancestors,
                Direction::Descendants,
                Direction::Both,
            ] {
                let query = simple_query(direction, None, 1000);
                answers.push(format!(
                    "{:?}",
                    index.traverse(&artifact_id(root), &query, &audience)
                ));
            }
            let to = artifact_id(root / 2);
            answers.push(format!(
                "{:?}",
                index.path(&artifact_id(root), &to, 10, &audience)
            ));
        }
        let query = simple_query(Direction::Ancestors, None, 1000);
        for w in 0..5 {
            answers.push(format!(
                "{:?}",
                index.scope(Scope::WorkItem, &format!("w{w}"), &query, &audience)
            ));
        }
        for m in 0..2 {
            answers.push(format!(
                "{:?}",
                index.scope(Scope::Mission, &format!("m{m}"), &query, &audience)
            ));
        }
    }
    answers
}

fn n_artifacts(history: &[Published]) -> usize {
    history.iter().map(|p| p.artifact + 1).max().unwrap_or(0)
}

/// An index read back from `bytes` (panics on a refused file: tests only).
fn read_back(bytes: &[u8]) -> Index {
    let (graph, coverage) = snapshot::decode(bytes).expect("the snapshot reads back");
    Index {
        coverage: Mutex::new(coverage),
        ..read_back_graph(graph)
    }
}

/// An index of `graph` alone.
fn read_back_graph(graph: Graph) -> Index {
    Index {
        graph: RwLock::new(graph),
        coverage: Default::default(),
        saved_through: Default::default(),
        saving: Mutex::new(()),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Byte-identical re-encoding means every array, edge list, name and Group number came
    /// back as it was; the answers are then checked too.
    #[test]
    fn a_snapshot_reads_back_as_the_index_it_was_taken_of(history in history()) {
        let index = index_of(&history);
        let (bytes, through) = index.encode();
        prop_assert_eq!(through, history.len() as u64);
        let restored = read_back(&bytes);
        prop_assert_eq!(&restored.encode().0, &bytes);
        prop_assert_eq!(answers(&restored, n_artifacts(&history)), answers(&index, n_artifacts(&history)));
    }

    /// A snapshot of the first `k` rows plus a catch-up of the rest is the full rebuild.
    #[test]
    fn rows_after_a_snapshot_are_caught_up(history in history(), split in any::<prop::sample::Index>()) {
        let k = split.index(history.len() + 1);
        let restored = read_back(&index_of(&history[..k]).encode().0);
        let rest: Vec<Publication> = history.iter().enumerate().skip(k).map(|(i, p)| publication(i, p)).collect();
        restored.catch_up(&rest, rest.last().map(|p| (p.rowid, p.manifest_id)));
        let rebuilt = index_of(&history);
        prop_assert_eq!(&restored.encode().0, &rebuilt.encode().0);
        prop_assert_eq!(answers(&restored, n_artifacts(&history)), answers(&rebuilt, n_artifacts(&history)));
    }

    /// A flipped bit anywhere, or a file cut anywhere, is refused (never a panic, never a
    /// different index).
    #[test]
    fn a_damaged_snapshot_is_refused(history in history(), at in any::<prop::sample::Index>(), bit in 0u8..8) {
        let (bytes, _) = index_of(&history).encode();
        let at = at.index(bytes.len());
        let mut flipped = bytes.clone();
        flipped[at] ^= 1 << bit;
        prop_assert!(snapshot::decode(&flipped).is_err());
        prop_assert!(snapshot::decode(&bytes[..at]).is_err());
    }

    /// Past the digest, every count and index is still checked: damaged bytes carrying a
    /// digest that matches them (a bug in the writer, not the disk) decode or are refused,
    /// on all three decoding threads, never a panic or an index that points outside.
    #[test]
    fn damaged_bytes_with_a_matching_digest_never_panic(history in history(), at in any::<prop::sample::Index>(), bit in 0u8..8, cut in any::<prop::sample::Index>()) {
        let (bytes, _) = index_of(&history).encode();
        let (head, body) = (16, 16 + 32);
        let redigest = |mut file: Vec<u8>| {
            let digest = *blake3::hash(&file[body..]).as_bytes();
            file[head..body].copy_from_slice(&digest);
            file
        };
        let mut flipped = bytes.clone();
        let at = body + at.index(bytes.len() - body);
        flipped[at] ^= 1 << bit;
        if let Ok((graph, _)) = snapshot::decode(&redigest(flipped)) {
            let restored = read_back_graph(graph);
            // Whatever it decoded to, every walk stays inside it.
            answers(&restored, n_artifacts(&history) + 1);
        }
        let cut = body + cut.index(bytes.len() - body);
        prop_assert!(snapshot::decode(&redigest(bytes[..cut].to_vec())).is_err());
    }
}

#[test]
fn a_row_is_covered_only_when_every_row_below_it_is_in() {
    let id = |n: u8| ArtifactId([n; 32]);
    let mut coverage = Coverage::default();
    coverage.note(2, id(2)); // row 1 is committed but not added yet
    assert_eq!(coverage.through, (0, ArtifactId([0; 32])));
    coverage.note(4, id(4));
    coverage.note(1, id(1));
    assert_eq!(coverage.through, (2, id(2)), "1 and 2 are in; 3 is not");
    assert_eq!(coverage.ahead.keys().copied().collect::<Vec<_>>(), vec![4]);
    coverage.note(2, id(2)); // again: nothing changes
    assert_eq!(coverage.through, (2, id(2)));
    // A read of the tables saw rows up to 5, and the index now has them all.
    coverage.caught_up(Some((5, id(5))));
    assert_eq!(
        coverage,
        Coverage {
            through: (5, id(5)),
            ahead: Default::default()
        }
    );
    coverage.caught_up(None);
    assert_eq!(coverage.through, (5, id(5)));
}

/// Writes manifests `from..to` straight into the tables, as committed publications whose
/// index update never happened (what a crash after the commit leaves): artifact `i` is
/// derived from `i / 2` and `i / 3`, in Groups g0/g1, Missions m0–m2, WorkItems w0–w3.
/// `salt` makes another database's ids differ.
async fn commit_rows(store: &Store, from: usize, to: usize, salt: &str) {
    if from == 0 {
        for group in ["g0", "g1"] {
            store
                .directory()
                .create_group(Id::parse("groupId", group).expect("a valid id"))
                .await
                .expect("the test store answers");
        }
        let key = weft_api::dsse::generate_key().verifying_key();
        store
            .directory()
            .register_agent(
                Id::parse("agentId", "producer").expect("a valid id"),
                key,
                "1".into(),
            )
            .await
            .expect("the test store answers");
    }
    let salt = salt.to_owned();
    store
        .inner
        .db
        .write(move |txn| {
            let id = |i: usize| {
                ArtifactId(*blake3::hash(format!("{salt} artifact {i}").as_bytes()).as_bytes())
            };
            let at = chrono::Utc::now();
            for i in from..to {
                let manifest_id =
                    ArtifactId(*blake3::hash(format!("{salt} manifest {i}").as_bytes()).as_bytes());
                let digests = Digests {
                    blake3: id(i),
                    sha256: weft_api::digest::Sha256Digest(manifest_id.0),
                    size: i as u64,
                };
                rows::blobs::insert(txn, &digests, at, None)?;
                rows::manifests::insert(
                    txn,
                    &rows::manifests::New {
                        manifest_id: &manifest_id,
                        blake3: &id(i),
                        group_id: &format!("g{}", i % 2),
                        mission_id: &format!("m{}", i % 3),
                        work_item_id: &format!("w{}", i % 4),
                        producer: "producer",
                        media_type: "text/plain",
                        lease_id: "lease",
                        ownership_epoch: 1,
                        classification: "internal",
                        created_at: "test",
                        envelope: "{}",
                        sequence: i as u64 + 1,
                        name: None,
                    },
                )?;
                let mut sources = vec![i / 3, i / 2];
                sources.dedup();
                for source in sources.into_iter().filter(|&s| s < i) {
                    rows::derivations::insert(txn, &id(i), &id(source), &manifest_id)?;
                }
            }
            Ok(())
        })
        .await
        .expect("the test store answers");
}

/// The index as a rebuild from `store`'s tables makes it, encoded.
async fn rebuilt(store: &Store) -> Vec<u8> {
    let (publications, last) = store
        .inner
        .db
        .read(|conn| load_publications_after(conn, 0))
        .await
        .expect("the test store answers");
    let index = Index::default();
    index.catch_up(&publications, last);
    index.encode().0
}

async fn open(dir: &std::path::Path) -> Store {
    Store::open(Options::on_disk(dir))
        .await
        .expect("the test store answers")
}

fn snapshot_file(dir: &std::path::Path) -> std::path::PathBuf {
    dir.join("index.sqlite-lineage")
}

#[tokio::test]
async fn a_restart_reads_the_snapshot_and_then_the_rows_after_it() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let store = open(dir.path()).await;
    assert_eq!(
        store.lineage().lineage_start(),
        LineageStart::Rebuilt { manifests: 0 }
    );
    assert_eq!(
        store
            .lineage()
            .save_lineage_snapshot()
            .await
            .expect("the test store answers"),
        None,
        "nothing to save yet"
    );
    assert!(!snapshot_file(dir.path()).exists());
    commit_rows(&store, 0, 300, "a").await;
    // Saving first reads the rows the index has not seen.
    let saved = store
        .lineage()
        .save_lineage_snapshot()
        .await
        .expect("the save")
        .expect("a snapshot");
    assert_eq!((saved.through, saved.caught_up), (300, 300));
    assert_eq!(
        store
            .lineage()
            .save_lineage_snapshot()
            .await
            .expect("the test store answers"),
        None,
        "nothing new"
    );
    // Committed after the snapshot, then a crash: no newer snapshot.
    commit_rows(&store, 300, 400, "a").await;
    drop(store);
    let store = open(dir.path()).await;
    assert_eq!(
        store.lineage().lineage_start(),
        LineageStart::FromSnapshot { caught_up: 100 }
    );
    assert_eq!(store.inner.lineage.encode().0, rebuilt(&store).await);
    assert_eq!(store.inner.lineage.coverage().through.0, 400);
    // The next snapshot covers everything; a restart then catches up nothing.
    assert_eq!(
        store
            .lineage()
            .save_lineage_snapshot()
            .await
            .expect("the test store answers")
            .expect("the test store answers")
            .through,
        400
    );
    drop(store);
    let store = open(dir.path()).await;
    assert_eq!(
        store.lineage().lineage_start(),
        LineageStart::FromSnapshot { caught_up: 0 }
    );
    assert_eq!(store.inner.lineage.encode().0, rebuilt(&store).await);
}

#[tokio::test]
async fn a_torn_corrupt_foreign_or_too_new_snapshot_is_rebuilt_from_the_tables() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let store = open(dir.path()).await;
    commit_rows(&store, 0, 200, "a").await;
    store
        .lineage()
        .save_lineage_snapshot()
        .await
        .expect("the save")
        .expect("a snapshot");
    drop(store);
    let good = std::fs::read(snapshot_file(dir.path())).expect("the snapshot file");
    // Another database with the same first 150 rows (a backup restored from before the
    // snapshot), and one with other rows altogether.
    let (older, other) = (
        tempfile::tempdir().expect("a temporary directory"),
        tempfile::tempdir().expect("a temporary directory"),
    );
    let store = open(older.path()).await;
    commit_rows(&store, 0, 150, "a").await;
    drop(store);
    let store = open(other.path()).await;
    commit_rows(&store, 0, 250, "b").await;
    drop(store);
    let mut flipped = good.clone();
    flipped[good.len() / 2] ^= 0x10;
    for (name, dir, file) in [
        ("torn", dir.path(), good[..good.len() - 7].to_vec()),
        ("corrupt", dir.path(), flipped),
        ("too new for its database", older.path(), good.clone()),
        ("of another database", other.path(), good.clone()),
    ] {
        std::fs::write(snapshot_file(dir), &file).expect("writing the snapshot file");
        let store = open(dir).await;
        assert!(
            matches!(
                store.lineage().lineage_start(),
                LineageStart::Rebuilt { .. }
            ),
            "{name}"
        );
        assert_eq!(
            store.inner.lineage.encode().0,
            rebuilt(&store).await,
            "{name}"
        );
    }
    // The untouched file is still good.
    std::fs::write(snapshot_file(dir.path()), &good).expect("writing the snapshot file");
    assert_eq!(
        open(dir.path()).await.lineage().lineage_start(),
        LineageStart::FromSnapshot { caught_up: 0 }
    );
}

#[tokio::test]
async fn an_in_memory_store_keeps_no_snapshot() {
    let store = Store::open(Options::in_memory())
        .await
        .expect("the test store answers");
    commit_rows(&store, 0, 20, "a").await;
    assert_eq!(
        store
            .lineage()
            .save_lineage_snapshot()
            .await
            .expect("the test store answers"),
        None
    );
    assert_eq!(
        store.lineage().lineage_start(),
        LineageStart::Rebuilt { manifests: 0 }
    );
}
