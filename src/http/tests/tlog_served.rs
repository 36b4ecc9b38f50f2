//! The checkpoint served with witnesses never goes back (issue #45, `rows/tlog_served.rs`):
//! cosignatures of an older tree that land after a newer one was served do not take it back.

use ed25519_dalek::SigningKey;
use weft_api::Id;
use weft_api::tlog::witness::{self, WitnessKey};
use weft_storage::Reader;

use super::harness::*;

/// `name`'s key, and its cosignature of `note`'s checkpoint.
fn witness_of(name: &str, seed: u8) -> (SigningKey, WitnessKey) {
    let key = SigningKey::from_bytes(&[seed; 32]);
    let vkey = witness::witness_vkey(name, &key.verifying_key());
    (key, WitnessKey::parse(&vkey).expect("a vkey"))
}

fn cosign(key: &SigningKey, name: &str, note: &str) -> String {
    // The checkpoint's text: the note up to the blank line that begins its signatures.
    let body = &note[..note.find("\n\n").expect("a signed note") + 1];
    witness::cosign(key, name, 1_700_000_000, body.as_bytes())
}

backends!(
    /// w1 cosigns the tree at 3 Events and it is served; w2 and w3, who read the tree at 2
    /// before it grew, cosign that afterwards. The served checkpoint stays at 3 (by count it
    /// went back to 2, which a client that saw 3 takes for a fork); once a majority cosigns
    /// 3 it carries their cosignatures.
    async fn a_late_cosignature_of_an_older_tree_does_not_take_the_checkpoint_back(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        h.put(&worker, "g1", b"one", &[]).await;
        let g1 = Id::parse("group", "g1").expect("id");
        let delivery = h.store.delivery();
        let witnesses: Vec<(&str, SigningKey, WitnessKey)> =
            [("w.test/a", 1), ("w.test/b", 2), ("w.test/c", 3)]
                .into_iter()
                .map(|(name, seed)| {
                    let (key, vkey) = witness_of(name, seed);
                    (name, key, vkey)
                })
                .collect();
        let names: Vec<String> = witnesses.iter().map(|(n, _, _)| (*n).to_owned()).collect();
        let older = delivery
            .tlog_checkpoint(g1.clone(), &Reader::Admin, &[])
            .await
            .expect("checkpoint");
        h.put(&worker, "g1", b"two", &[]).await;
        let newer = delivery
            .tlog_checkpoint(g1.clone(), &Reader::Admin, &[])
            .await
            .expect("checkpoint");
        assert!(newer.head.size > older.head.size, "{kind:?}");
        let record = |at: usize, checkpoint: &weft_storage::TlogCheckpoint| {
            let (name, key, vkey) = &witnesses[at];
            let line = cosign(key, name, &checkpoint.note);
            delivery.tlog_record_cosignature(g1.clone(), vkey, (checkpoint.head.size, line), &names)
        };
        let served = || delivery.tlog_checkpoint(g1.clone(), &Reader::Admin, &names);
        record(0, &newer).await.expect("w1 cosigns the newer tree");
        assert_eq!(served().await.expect("served").head, newer.head, "{kind:?}");
        record(1, &older).await.expect("w2 cosigns the older tree");
        record(2, &older).await.expect("w3 cosigns the older tree");
        let now = served().await.expect("served");
        assert_eq!(
            now.head, newer.head,
            "{kind:?}: the served checkpoint went back"
        );
        record(1, &newer).await.expect("w2 catches up");
        let now = served().await.expect("served");
        assert_eq!(now.head, newer.head, "{kind:?}");
        assert_eq!(
            now.note.matches("\n— w.test/").count(),
            2,
            "{kind:?}: {}",
            now.note
        );
    }
);
