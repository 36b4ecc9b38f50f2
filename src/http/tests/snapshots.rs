//! Snapshot references (DESIGN §7, DLV-10): the signed reference names its `uri`, and a
//! client restores only a reference the authority signed whose state hashes as it says.

use std::sync::Arc;
use std::time::Duration;

use weft_api::Id;
use weft_api::subscription::Subscription;
use weft_api::views::SignedSnapshot;

use super::harness::*;

/// Issue #10 finding 9e (DLV-10): the signed reference carries `uri`; a restore refuses a
/// tampered signature and a tampered state digest, restoring and saving nothing, and takes
/// the genuine one.
#[tokio::test]
async fn restore_refuses_a_tampered_snapshot_reference() {
    let h = harness(Kind::Disk).await;
    let worker = h.agent("w1", "g1", &["worker"]).await;
    h.compacted(&worker, "g1").await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let serving = tokio::spawn(crate::serve(
        listener,
        h.app.clone(),
        Duration::from_secs(5),
        Duration::from_secs(30),
        futures::future::pending(),
    ));
    let client = weft_api::client::Client::new(base, Some(worker.token.clone()));
    let group = Id::parse("g", "g1").expect("id");
    let genuine: SignedSnapshot = client
        .snapshots(&group)
        .await
        .expect("snapshots")
        .snapshots
        .pop()
        .expect("one snapshot");
    let reference = &genuine.reference;
    assert_eq!(
        reference.uri.as_deref(),
        Some(format!("/v1/groups/g1/snapshots/blobs/{}", reference.state_digest).as_str()),
        "the signed reference names where its state is served"
    );
    let signed: weft_api::views::SnapshotReference = serde_json::from_slice(
        &base64::Engine::decode(
            &base64::engine::general_purpose::STANDARD,
            &genuine.envelope.payload,
        )
        .expect("payload"),
    )
    .expect("reference");
    assert_eq!(
        signed.uri, reference.uri,
        "uri is inside the signed payload"
    );

    let cursor_file = h.dir.path().join("cursor.json");
    let restored = Arc::new(std::sync::Mutex::new(0u32));
    let mut subscription = Subscription::new(client, group, cursor_file.clone());
    let count = Arc::clone(&restored);
    subscription.restore = Some(Box::new(move |_, _| {
        *count.lock().map_err(|_| "poisoned")? += 1;
        Ok(())
    }));

    let mut bad_signature = genuine.clone();
    bad_signature.envelope = with_sig(&genuine.envelope, |mut sig| {
        sig[0] ^= 1;
        sig
    });
    let mut bad_digest = genuine.clone();
    bad_digest.reference.state_digest = digest_of(b"another state").blake3;
    bad_digest.reference.uri = Some(format!(
        "/v1/groups/g1/snapshots/blobs/{}",
        bad_digest.reference.state_digest
    ));
    for (tampered, what) in [(bad_signature, "signature"), (bad_digest, "state digest")] {
        let refused = subscription.restore_snapshot(&tampered).await;
        assert!(refused.is_err(), "a tampered {what} is refused");
        assert_eq!(
            *restored.lock().expect("lock"),
            0,
            "{what}: nothing restored"
        );
        assert!(!cursor_file.exists(), "{what}: no cursor saved");
    }
    let resumed = subscription
        .restore_snapshot(&genuine)
        .await
        .expect("the genuine snapshot restores");
    assert_eq!(resumed, genuine.reference.sequence);
    assert_eq!(*restored.lock().expect("lock"), 1);
    serving.abort();
}

/// DLV-10: the restore verifies the state's hash, not only the reference's signature. The
/// reference is the genuine one (signed by the authority key, naming its own `uri`), but a
/// proxy in front of the server serves other bytes at that `uri`: the signature check passes,
/// so only the digest check can refuse it, with an integrity error naming the signed digest;
/// nothing is restored and no cursor saved.
#[tokio::test]
async fn dlv_10_restore_refuses_state_bytes_that_do_not_hash_to_the_signed_digest() {
    let h = harness(Kind::Disk).await;
    let worker = h.agent("w1", "g1", &["worker"]).await;
    h.compacted(&worker, "g1").await;
    // Everything goes to the real app, except snapshot state, which comes back altered.
    let proxy = axum::Router::new()
        .route(
            "/v1/groups/{group}/snapshots/blobs/{digest}",
            axum::routing::get(|| async { "a state the authority never signed" }),
        )
        .fallback_service(h.app.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    let serving = tokio::spawn(crate::serve(
        listener,
        proxy,
        Duration::from_secs(5),
        Duration::from_secs(30),
        futures::future::pending(),
    ));
    let client = weft_api::client::Client::new(base, Some(worker.token.clone()));
    let group = Id::parse("g", "g1").expect("id");
    let genuine: SignedSnapshot = client
        .snapshots(&group)
        .await
        .expect("snapshots")
        .snapshots
        .pop()
        .expect("one snapshot");
    let cursor_file = h.dir.path().join("cursor.json");
    let restored = Arc::new(std::sync::Mutex::new(0u32));
    let mut subscription = Subscription::new(client, group, cursor_file.clone());
    let count = Arc::clone(&restored);
    subscription.restore = Some(Box::new(move |_, _| {
        *count.lock().map_err(|_| "poisoned")? += 1;
        Ok(())
    }));
    match subscription.restore_snapshot(&genuine).await {
        Err(weft_api::client::Error::Integrity { expected, actual }) => {
            assert_eq!(expected, genuine.reference.state_digest.to_string());
            assert_ne!(actual, expected);
        }
        other => panic!("only the digest check refuses altered state bytes: {other:?}"),
    }
    assert_eq!(*restored.lock().expect("lock"), 0, "nothing restored");
    assert!(!cursor_file.exists(), "no cursor saved");
    serving.abort();
}
