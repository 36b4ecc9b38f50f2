//! Durability of the store across crashes and processes (issue #10 findings 8, 9a, 10):
//! start-up reconciliation of crash leftovers, owner-only modes, and idempotent answers
//! committed with their work. Integration tests: only the public façade.

use bytes::Bytes;
use weft_api::session::{Membership, Role};
use weft_api::{ErrorCode, Id};
use weft_storage::{Claimed, IdempotentRequest, Options, Store, answer_with, with_idempotency};

fn body(bytes: &'static [u8]) -> impl futures::Stream<Item = std::io::Result<Bytes>> + Send {
    futures::stream::iter([Ok(Bytes::from_static(bytes))])
}

/// Issue #10 finding 10: a blob file a crash left without its index row (killed between
/// promotion and commit) is removed at the next start, and fsck then finds nothing; before
/// the restart fsck calls it a leftover, not damage.
#[tokio::test]
async fn start_up_removes_blob_files_without_a_row() {
    let dir = tempfile::tempdir().expect("dir");
    let store = Store::open(Options::on_disk(dir.path()))
        .await
        .expect("open");
    store
        .artifacts()
        .upload(body(b"acknowledged"), None, weft_storage::Uploader::Admin)
        .await
        .expect("upload");
    drop(store);
    let orphan_bytes = b"promoted, then the process was killed";
    let hex = blake3::hash(orphan_bytes).to_hex();
    let shard = dir.path().join("blobs/blake3").join(&hex[..2]);
    std::fs::create_dir_all(&shard).expect("mkdir");
    let orphan = shard.join(hex.as_str());
    std::fs::write(&orphan, orphan_bytes).expect("write");
    std::fs::write(dir.path().join("staging/partial"), b"x").expect("write");

    let mut offline = Options::on_disk(dir.path());
    offline.sweep_staging = false;
    let report = Store::open(offline)
        .await
        .expect("open")
        .fsck()
        .await
        .expect("fsck");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!(report.leftovers.len(), 2, "{:?}", report.leftovers);
    assert!(orphan.exists(), "fsck changes nothing");

    let store = Store::open(Options::on_disk(dir.path()))
        .await
        .expect("reopen");
    assert!(!orphan.exists(), "the orphan is removed at start");
    let report = store.fsck().await.expect("fsck");
    assert!(
        report.problems.is_empty() && report.leftovers.is_empty(),
        "{report:?}"
    );
    assert_eq!(report.n_blobs, 1, "the acknowledged blob stays");
}

/// Issue #10 finding 9a: the data directory, every directory and blob file under it and
/// the index (with its WAL files) are owner-only, and start-up fixes older modes.
#[cfg(unix)]
#[tokio::test]
async fn the_data_directory_is_owner_only() {
    use std::os::unix::fs::PermissionsExt as _;
    let parent = tempfile::tempdir().expect("dir");
    let dir = parent.path().join("data");
    std::fs::create_dir_all(dir.join("blobs/blake3/ff")).expect("mkdir");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let store = Store::open(Options::on_disk(&dir)).await.expect("open");
    store
        .artifacts()
        .upload(body(b"private bytes"), None, weft_storage::Uploader::Admin)
        .await
        .expect("upload");
    let mut checked = 0;
    let mut pending = vec![dir.clone()];
    while let Some(path) = pending.pop() {
        let mode = std::fs::metadata(&path).expect("stat").permissions().mode() & 0o777;
        if path.is_dir() {
            assert_eq!(mode, 0o700, "{}", path.display());
            for entry in std::fs::read_dir(&path).expect("ls") {
                pending.push(entry.expect("entry").path());
            }
        } else {
            assert_eq!(mode, 0o600, "{}", path.display());
        }
        checked += 1;
    }
    for name in ["index.sqlite", "index.sqlite-wal", "index.sqlite-shm"] {
        assert!(dir.join(name).exists(), "{name}");
    }
    assert!(checked >= 8, "{checked}");
}

fn id(text: &str) -> Id {
    Id::parse("id", text).expect("id")
}

fn request(store: &Store, key: &str, hash: u8) -> IdempotentRequest {
    IdempotentRequest {
        scope: "admin".into(),
        key: key.into(),
        request_hash: [hash; 32],
        received_at: store.now(),
    }
}

type RenderFn = fn(&Membership) -> Option<(u16, Vec<u8>)>;

fn render(membership: &Membership) -> Option<(u16, Vec<u8>)> {
    Some((200, serde_json::to_vec(membership).expect("json")))
}

/// A Group g1 with a registered Agent w1 (Membership epoch 1).
async fn store_with_member(dir: &std::path::Path) -> Store {
    let store = Store::open(Options::on_disk(dir)).await.expect("open");
    store
        .directory()
        .create_group(id("g1"))
        .await
        .expect("group");
    let key = ed25519_dalek::SigningKey::from_bytes(&[7; 32]).verifying_key();
    store
        .directory()
        .register_agent(id("w1"), key, "1".into())
        .await
        .expect("agent");
    store
        .directory()
        .set_membership(id("g1"), id("w1"), vec![Role::Worker])
        .await
        .expect("membership");
    store
}

async fn set_roles(
    store: &Store,
    request: IdempotentRequest,
    renderer: RenderFn,
) -> (Result<Membership, weft_storage::Error>, Option<Claimed>) {
    with_idempotency(request, async {
        answer_with::<Membership>(renderer);
        store
            .directory()
            .set_membership(id("g1"), id("w1"), vec![Role::Reviewer])
            .await
    })
    .await
}

/// Issue #10 finding 8 (DLV-11): the stored answer is committed in the transaction of the
/// work: a failure after the work and before the commit leaves neither the change, its
/// Event nor the answer; a success leaves all three.
#[tokio::test]
async fn the_answer_commits_with_the_work_or_not_at_all() {
    let dir = tempfile::tempdir().expect("dir");
    let store = store_with_member(dir.path()).await;
    let before = store.fingerprint().await.expect("fingerprint");
    let events_before = store.stats().await.expect("stats").events;
    let (outcome, claimed) = set_roles(&store, request(&store, "k1", 1), |_| {
        panic!("the process fails after the work, before the commit")
    })
    .await;
    assert!(outcome.is_err());
    assert_eq!(claimed, None);
    assert_eq!(
        before,
        store.fingerprint().await.expect("fingerprint"),
        "nothing kept"
    );
    assert_eq!(
        store
            .idempotent_answer("admin".into(), "k1".into())
            .await
            .expect("read"),
        None
    );

    let (outcome, claimed) = set_roles(&store, request(&store, "k1", 1), render).await;
    let membership = outcome.expect("the work ran");
    assert_eq!(membership.epoch, 2);
    let stored = store
        .idempotent_answer("admin".into(), "k1".into())
        .await
        .expect("read")
        .expect("the answer is stored with the work");
    assert_eq!(claimed, Some(Claimed::Stored(stored.clone())));
    assert_eq!(stored.body, serde_json::to_vec(&membership).expect("json"));
    assert_eq!(
        store.stats().await.expect("stats").events,
        events_before + 1
    );
}

/// Issue #10 finding 8: a second process (here: the store reopened after the first one
/// stopped right after its commit, before any later step) replays the stored answer and
/// does not redo the work; the key with another request is refused.
#[tokio::test]
async fn another_process_replays_rather_than_redoes() {
    let dir = tempfile::tempdir().expect("dir");
    let first = store_with_member(dir.path()).await;
    let (outcome, claimed) = set_roles(&first, request(&first, "k1", 1), render).await;
    assert_eq!(outcome.expect("work").epoch, 2);
    let Some(Claimed::Stored(answer)) = claimed else {
        panic!("stored with the work: {claimed:?}");
    };
    drop(first);

    let second = Store::open(Options::on_disk(dir.path()))
        .await
        .expect("reopen");
    let before = second.fingerprint().await.expect("fingerprint");
    let (outcome, claimed) = set_roles(&second, request(&second, "k1", 1), render).await;
    assert_eq!(
        outcome.map_err(|e| e.code()),
        Err(ErrorCode::IdempotencyKeyReused)
    );
    assert_eq!(claimed, Some(Claimed::Replay(answer)));
    let (outcome, claimed) = set_roles(&second, request(&second, "k1", 2), render).await;
    assert_eq!(
        outcome.map_err(|e| e.code()),
        Err(ErrorCode::IdempotencyKeyReused)
    );
    assert_eq!(claimed, None, "another request is refused, not replayed");
    assert_eq!(
        before,
        second.fingerprint().await.expect("fingerprint"),
        "not redone"
    );
}

fn owned_body(bytes: Vec<u8>) -> impl futures::Stream<Item = std::io::Result<Bytes>> + Send {
    futures::stream::iter([Ok(Bytes::from(bytes))])
}

fn blob_files(dir: &std::path::Path) -> usize {
    fn walk(dir: &std::path::Path) -> usize {
        std::fs::read_dir(dir).map_or(0, |entries| {
            entries
                .flatten()
                .map(|entry| {
                    let path = entry.path();
                    if path.is_dir() { walk(&path) } else { 1 }
                })
                .sum()
        })
    }
    walk(&dir.join("blobs"))
}

/// A store on `dir` whose blobs up to `inline` bytes are stored in the index.
async fn store_with_inline(
    dir: &std::path::Path,
    inline: u64,
) -> Result<Store, weft_storage::Error> {
    let mut options = Options::on_disk(dir);
    options.inline_blob_bytes = inline;
    Store::open(options).await
}

/// A disk fault in the index: blob `blake3`'s inline copy becomes `bytes` (the store closed).
fn tamper_inline(dir: &std::path::Path, blake3: &weft_api::ArtifactId, bytes: Vec<u8>) {
    let index = rusqlite::Connection::open(dir.join("index.sqlite")).expect("index");
    let changed = index
        .execute(
            "UPDATE inline_bytes SET bytes = ?1 WHERE id = (SELECT inline_id FROM blobs WHERE blake3 = ?2)",
            rusqlite::params![bytes, &blake3.0[..]],
        )
        .expect("tamper");
    assert_eq!(changed, 1, "an inline copy to tamper with");
}

/// Issue #15: blobs up to the inline threshold live in the index with their row (no file),
/// larger ones are files; the threshold may change between restarts without losing
/// anything, and fsck hashes both kinds (and finds a tampered inline copy).
#[tokio::test]
async fn small_blobs_live_in_the_index_and_a_new_threshold_loses_nothing() {
    let dir = tempfile::tempdir().expect("dir");
    let open = |inline: u64| store_with_inline(dir.path(), inline);
    let admin = || weft_storage::Uploader::Admin;
    let store = open(1024).await.expect("open");
    let small = store
        .artifacts()
        .upload(owned_body(vec![1; 1024]), None, admin())
        .await
        .expect("small");
    store
        .artifacts()
        .upload(owned_body(vec![2; 1025]), None, admin())
        .await
        .expect("large");
    assert_eq!(
        blob_files(dir.path()),
        1,
        "only the blob above 1 KiB is a file"
    );
    drop(store);

    let store = open(0).await.expect("reopen with every blob a file");
    store
        .artifacts()
        .upload(owned_body(vec![3; 10]), None, admin())
        .await
        .expect("tiny");
    assert_eq!(blob_files(dir.path()), 2);
    let report = store.fsck().await.expect("fsck");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert_eq!((report.n_blobs, report.n_bytes), (3, 1024 + 1025 + 10));
    drop(store);

    let store = open(1 << 20).await.expect("reopen with a larger threshold");
    store
        .artifacts()
        .upload(owned_body(vec![4; 4096]), None, admin())
        .await
        .expect("inline again");
    assert_eq!(blob_files(dir.path()), 2);
    let stats = store.stats().await.expect("stats");
    assert_eq!((stats.blobs, stats.blob_objects), (4, 4));
    // The same bytes again: a blob stored as a file gains an inline copy in its row; one
    // already inline keeps the copy it has.
    for bytes in [vec![2; 1025], vec![1; 1024]] {
        store
            .artifacts()
            .upload(owned_body(bytes), None, admin())
            .await
            .expect("again");
    }
    let stats = store.stats().await.expect("stats");
    assert_eq!((stats.blobs, stats.blob_objects), (4, 5));
    assert_eq!(blob_files(dir.path()), 2);
    drop(store);

    // A disk fault in the index: fsck names the blob.
    tamper_inline(dir.path(), &small.digests.blake3, vec![9u8; 1024]);
    let mut offline = Options::on_disk(dir.path());
    offline.sweep_staging = false;
    let report = Store::open(offline)
        .await
        .expect("open")
        .fsck()
        .await
        .expect("fsck");
    assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
    assert!(
        report.problems[0].starts_with(&small.digests.blake3.to_string()),
        "{:?}",
        report.problems
    );
}

/// Issue #15: a quarantined small blob repaired by bytes that now go to a file (a lower
/// threshold here; a resumable upload always does) loses its damaged inline copy, which
/// reads would otherwise still prefer, and fsck then finds every copy intact.
#[tokio::test]
async fn a_file_that_repairs_an_inline_blob_replaces_its_copy() {
    let dir = tempfile::tempdir().expect("dir");
    let open = |inline: u64| store_with_inline(dir.path(), inline);
    let admin = || weft_storage::Uploader::Admin;
    let bytes = vec![7u8; 2048];
    let store = open(1 << 20).await.expect("open");
    let blob = store
        .artifacts()
        .upload(owned_body(bytes.clone()), None, admin())
        .await
        .expect("inline");
    drop(store);
    // A disk fault in the inline copy, found and quarantined by a read.
    tamper_inline(dir.path(), &blob.digests.blake3, vec![8u8; 2048]);
    let index = rusqlite::Connection::open(dir.path().join("index.sqlite")).expect("index");
    index
        .execute(
            "UPDATE blobs SET quarantined_at = '2026-01-01T00:00:00Z' WHERE blake3 = ?1",
            [&blob.digests.blake3.0[..]],
        )
        .expect("quarantine");
    drop(index);

    let store = open(0).await.expect("reopen with every blob a file");
    store
        .artifacts()
        .upload(owned_body(bytes), None, admin())
        .await
        .expect("repair");
    let stats = store.stats().await.expect("stats");
    assert_eq!(
        (stats.blobs, stats.blob_objects, stats.quarantined),
        (1, 1, 0),
        "one file, no inline copy left, repaired"
    );
    assert_eq!(blob_files(dir.path()), 1);
    let report = store.fsck().await.expect("fsck");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    drop(store);
    // An inline copy that no row names (none is ever written so): fsck reports it.
    let index = rusqlite::Connection::open(dir.path().join("index.sqlite")).expect("index");
    index
        .execute("INSERT INTO inline_bytes (bytes) VALUES (x'00')", [])
        .expect("stray copy");
    drop(index);
    let report = open(0).await.expect("reopen").fsck().await.expect("fsck");
    assert_eq!(
        report.problems,
        vec!["1 inline copies that no blob row names".to_owned()]
    );
}

/// Bytes that were only hashed, because the blob was healthy and visible when the upload
/// began, repair nothing: a quarantine that lands while the body is read stays, and no
/// `artifact.repaired` is claimed (the review of stop 30). The upload is refused as retryable
/// (it stored no byte the blob could be read from); sent again, the bytes take the full path
/// and repair it.
#[tokio::test]
async fn bytes_only_hashed_do_not_repair_a_quarantine_that_landed_meanwhile() {
    let dir = tempfile::tempdir().expect("dir");
    let store = Store::open(Options::on_disk(dir.path()))
        .await
        .expect("open");
    let admin = || weft_storage::Uploader::Admin;
    let bytes = vec![5u8; 1000];
    let bytes_again = bytes.clone();
    let blob = store
        .artifacts()
        .upload(owned_body(bytes.clone()), None, admin())
        .await
        .expect("first");
    let index_path = dir.path().join("index.sqlite");
    let blake3 = blob.digests.blake3.0.to_vec();
    // Named by its digest: the upload looks it up first and, finding it healthy and
    // visible, only hashes the body.
    let claimed = Some(weft_api::Digest::Blake3(blob.digests.blake3));
    // The body quarantines the blob when it is first read: after the upload decided the
    // bytes were known and healthy, before its transaction.
    let body = futures::stream::once(async move {
        let index = rusqlite::Connection::open(&index_path).expect("index");
        index
            .busy_timeout(std::time::Duration::from_secs(5))
            .expect("busy timeout");
        index
            .execute(
                "UPDATE blobs SET quarantined_at = '2026-01-01T00:00:00Z' WHERE blake3 = ?1",
                [&blake3],
            )
            .expect("quarantine");
        Ok(Bytes::from(bytes))
    });
    let refused = store
        .artifacts()
        .upload(body, claimed, admin())
        .await
        .expect_err("the bytes were only hashed");
    assert_eq!(refused.code(), weft_api::ErrorCode::StorageUnavailable);
    assert_eq!(store.stats().await.expect("stats").quarantined, 1);
    store
        .artifacts()
        .upload(owned_body(bytes_again), claimed, admin())
        .await
        .expect("sent again");
    assert_eq!(store.stats().await.expect("stats").quarantined, 0);
}
