//! Stop 37, end to end over a real socket: an HTTP/2 client that opens a download and never
//! opens its stream's flow-control window stalls nothing on the connection, so the accept
//! loop's write timeout never fires; the download's watcher (`storage/src/downloads.rs`)
//! cuts the body once hyper has not polled it for the idle timeout, and its slot comes back.
//!
//! Real time, about one second: the idle timeout is counted in whole seconds and the server
//! runs on the real clock here (the watcher's own tests use a paused one).

use std::time::Duration;

use super::harness::*;

#[tokio::test]
async fn a_stalled_http2_download_is_cut_and_gives_its_slot_back() {
    let h = harness_with(Kind::Disk, |config| {
        config.max_upload_bytes = 64 * 1024 * 1024;
        config.max_downloads_per_agent = 1;
        config.body_idle_timeout_secs = 1;
    })
    .await;
    let worker = h.agent("w1", "g1", &["worker"]).await;
    let large: Vec<u8> = (0..16 * 1024 * 1024u32).map(|i| (i % 251) as u8).collect();
    let file = h.put(&worker, "g1", &large, &[]).await;

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(crate::serve::serve(
        listener,
        h.app.clone(),
        Duration::from_secs(10),
        Duration::from_secs(1),
        async move {
            let _ = stopped.await;
        },
    ));
    // One connection, HTTP/2 from the first byte, and a 64 KiB stream window that this
    // client opens further only as the body is read.
    let client = reqwest::Client::builder()
        .http2_prior_knowledge()
        .http2_initial_stream_window_size(65_535)
        .build()
        .expect("client");
    let url = format!("http://{address}/v1/artifacts/{file}/content");
    let get = || client.get(&url).bearer_auth(&worker.token).send();

    let stalled = get().await.expect("answered");
    assert_eq!(stalled.status(), reqwest::StatusCode::OK);
    assert_eq!(stalled.version(), reqwest::Version::HTTP_2);
    let refused = get().await.expect("answered");
    assert_eq!(
        refused.status(),
        reqwest::StatusCode::TOO_MANY_REQUESTS,
        "the one slot is held by the stalled stream"
    );

    // Within a few idle timeouts the stalled body is cut and the slot is back: the same
    // Agent, on the same connection, reads the whole file.
    let mut whole = None;
    for _ in 0..40 {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let answer = get().await.expect("answered");
        if answer.status() == reqwest::StatusCode::OK {
            whole = Some(answer.bytes().await.expect("the whole body"));
            break;
        }
        assert_eq!(answer.status(), reqwest::StatusCode::TOO_MANY_REQUESTS);
    }
    let whole = whole.expect("the slot came back within 10 s");
    assert!(whole[..] == large[..], "the second read is whole and right");
    // The stalled answer never completes as if whole: reading it on ends in an error.
    let rest = stalled.bytes().await;
    assert!(rest.is_err(), "a cut body is not a short success");

    let _ = stop.send(());
    assert!(server.await.expect("joins").expect("serves"));
}
