//! Issue #42: weft on Garage when Garage fails. Each test runs its own Garage (one node, or
//! three with replication factor 3) so it can stop nodes: stopped during an upload (503
//! `blob_store_unavailable`, nothing recorded, staging swept), during a download (the stream
//! ends in an error, never in unverified bytes), at start (the store refuses to open and
//! says why); a store that stops answering in time (bounded timeouts and retries, then the
//! same 503); and a three-node cluster that loses a node while Workers upload and read.
//! Without a Garage binary they pass after saying they skipped (see `garage_available`).

use axum::body::Body;
use axum::http::{Method, StatusCode};
use bytes::Bytes;
use futures::StreamExt as _;
use tower::ServiceExt as _;

use super::harness::*;

/// Larger than two 5 MiB parts, so an upload sends parts before its body ends.
const BIG: usize = 12 * 1024 * 1024;

fn sample(size: usize, seed: u8) -> Vec<u8> {
    (0..size)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

fn own_garage(nodes: usize) -> Option<weft_testkit::Garage> {
    if !garage_available() {
        return None;
    }
    // Started off the runtime's thread: the CLI calls block.
    std::thread::spawn(move || weft_testkit::Garage::start(nodes))
        .join()
        .expect("garage start-up thread")
}

fn big_uploads(config: &mut crate::config::Config) {
    config.max_upload_bytes = 64 * 1024 * 1024;
}

async fn read_back(h: &Harness, agent: &Agent, id: &str, bytes: &[u8]) {
    let answer = h
        .call(
            Method::GET,
            &format!("/v1/artifacts/{id}/content"),
            Some(&agent.token),
            Body::empty(),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert!(answer.body[..] == bytes[..], "other bytes for {id}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_stopped_during_an_upload_answers_503_and_keeps_nothing() {
    let Some(mut garage) = own_garage(1) else {
        return;
    };
    let h = harness_on_garage(&garage, big_uploads).await;
    let worker = h.agent("worker-s3", "g1", &["worker"]).await;
    let kept = sample(BIG, 1);
    let kept_id = h.put(&worker, "g1", &kept, &[]).await.to_string();
    let before = h.fingerprint().await;

    // The body's first 9 MiB go out (a part is sent), then Garage dies, then the rest comes.
    let bytes = sample(BIG, 2);
    let digests = digest_of(&bytes);
    let (sender, receiver) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(1);
    let body = Body::from_stream(tokio_stream_of(receiver));
    let put = request(
        Method::PUT,
        &format!("/v1/blobs/{}", digests.blake3),
        Some(&worker.token),
        body,
    );
    let app = h.app.clone();
    let answer = tokio::spawn(async move { app.oneshot(put).await });
    let head = Bytes::copy_from_slice(&bytes[..9 * 1024 * 1024]);
    sender.send(Ok(head)).await.expect("body taken");
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    tokio::task::block_in_place(|| garage.nodes[0].stop());
    let tail = Bytes::copy_from_slice(&bytes[9 * 1024 * 1024..]);
    let _ = sender.send(Ok(tail)).await;
    drop(sender);
    let response = answer.await.expect("joined").expect("infallible");
    let status = response.status();
    let retry_after = response.headers().get("retry-after").cloned();
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap_or_default();
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body:?}");
    let problem: serde_json::Value = serde_json::from_slice(&body).expect("problem+json");
    assert_eq!(problem["code"], "blob_store_unavailable");
    assert!(retry_after.is_some(), "a 503 says when to retry");

    // Garage back: the upload's abort could not reach it, so its multipart upload is still
    // open; nothing was recorded, and a restart aborts the upload its marker names.
    tokio::task::block_in_place(|| garage.nodes[0].start());
    assert_eq!(
        tokio::task::block_in_place(|| garage.settled_open_multipart_uploads(1)),
        1,
        "the cut upload's multipart upload is open until the sweep"
    );
    let h = restart(h).await;
    assert_unchanged(&before, &h.fingerprint().await, "the failed upload");
    assert_eq!(
        tokio::task::block_in_place(|| garage.settled_open_multipart_uploads(0)),
        0,
        "the start-up sweep aborted it"
    );
    read_back(&h, &worker, &kept_id, &kept).await;
    // Uploads go through again (one part: the restarted harness takes at most 4 MiB).
    let worker = h.agent("worker-s3", "g1", &["worker"]).await;
    h.upload(&worker, &sample(3 * 1024 * 1024, 4)).await;
}

fn tokio_stream_of(
    mut receiver: tokio::sync::mpsc::Receiver<Result<Bytes, std::io::Error>>,
) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> {
    futures::stream::poll_fn(move |cx| receiver.poll_recv(cx))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_stopped_during_a_download_ends_the_stream_in_an_error() {
    let Some(mut garage) = own_garage(1) else {
        return;
    };
    let h = harness_on_garage(&garage, |config| {
        big_uploads(config);
        // No memory cache in the way: every byte comes from Garage.
        config.hot_blob_bytes = 0;
    })
    .await;
    let worker = h.agent("worker-dl", "g1", &["worker"]).await;
    let bytes = sample(48 * 1024 * 1024, 3);
    let id = h.put(&worker, "g1", &bytes, &[]).await.to_string();
    let get = request(
        Method::GET,
        &format!("/v1/artifacts/{id}/content"),
        Some(&worker.token),
        Body::empty(),
    );
    let response = h.app.clone().oneshot(get).await.expect("infallible");
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = response.into_body().into_data_stream();
    let first = body.next().await.expect("a first chunk").expect("bytes");
    let mut received = first.len();
    tokio::task::block_in_place(|| garage.nodes[0].stop());
    let mut failed = false;
    while let Some(chunk) = body.next().await {
        match chunk {
            Ok(chunk) => received += chunk.len(),
            Err(_) => {
                failed = true;
                break;
            }
        }
    }
    assert!(failed, "the stream ended cleanly after {received} bytes");
    assert!(
        received < bytes.len(),
        "never the whole body without its check"
    );
    // Nothing was quarantined: once Garage is back the blob reads whole and verified.
    tokio::task::block_in_place(|| garage.nodes[0].start());
    read_back(&h, &worker, &id, &bytes).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_is_down_at_start_keeps_the_server_from_starting() {
    let Some(mut garage) = own_garage(1) else {
        return;
    };
    let h = harness_on_garage(&garage, |_| {}).await;
    let (location, credentials) = h.s3.clone().expect("on garage");
    tokio::task::block_in_place(|| garage.nodes[0].stop());
    let mut config = crate::config::Config::with_data_dir(h.dir.path().join("other"));
    config.blobs = Some(location);
    config.s3_credentials_file = Some(credentials);
    let error = weft_storage::Store::open(config.storage_options())
        .await
        .expect_err("no store without its blobs");
    let message = error.to_string();
    assert!(message.contains("S3 blob store"), "{message}");
    assert!(
        !message.contains(weft_testkit::KEY_SECRET),
        "no secret in {message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_three_node_cluster_keeps_serving_with_a_node_down() {
    let Some(mut garage) = own_garage(3) else {
        return;
    };
    let h = harness_on_garage(&garage, |config| {
        big_uploads(config);
        config.hot_blob_bytes = 0;
    })
    .await;
    let worker = h.agent("worker-3", "g1", &["worker"]).await;
    let mut stored = Vec::new();
    for seed in 0..2 {
        let bytes = sample(BIG, 10 + seed);
        let id = h.put(&worker, "g1", &bytes, &[]).await.to_string();
        stored.push((id, bytes));
    }
    // Node 2 dies: uploads and verified reads go on through node 0 (two of three replicas).
    tokio::task::block_in_place(|| garage.nodes[2].stop());
    for seed in 2..4 {
        let bytes = sample(BIG, 10 + seed);
        let id = h.put(&worker, "g1", &bytes, &[]).await.to_string();
        stored.push((id, bytes));
    }
    for (id, bytes) in &stored {
        read_back(&h, &worker, id, bytes).await;
    }
    // Node 2 returns; node 1 dies: everything, including what was written without node 2,
    // still reads back whole.
    tokio::task::block_in_place(|| {
        garage.nodes[2].start();
        // Back in the quorum before another node goes: with two of three down (one still
        // reconnecting) no quorum holds, as Garage's consistent mode intends.
        garage.wait_until_healthy();
        garage.nodes[1].stop();
    });
    for (id, bytes) in &stored {
        read_back(&h, &worker, id, bytes).await;
    }
}

/// A TCP relay to a Garage node that can stall: while stalled it forwards nothing, so a
/// request on an open connection waits forever and a new connection is accepted and never
/// answered, as a store that has stopped answering in time.
struct StallingRelay {
    url: String,
    stalled: tokio::sync::watch::Sender<bool>,
    connections: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl StallingRelay {
    async fn to(target: String) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("a port");
        let url = format!("http://{}", listener.local_addr().expect("address"));
        let (stalled, watch) = tokio::sync::watch::channel(false);
        let connections = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = std::sync::Arc::clone(&connections);
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let (watch, target) = (watch.clone(), target.clone());
                tokio::spawn(async move {
                    if *watch.borrow() {
                        // Accepted, never answered: what it sends goes nowhere.
                        let (mut from, _to) = client.into_split();
                        let _ = tokio::io::copy(&mut from, &mut tokio::io::sink()).await;
                        return;
                    }
                    let Ok(server) = tokio::net::TcpStream::connect(&target).await else {
                        return;
                    };
                    let (client_read, client_write) = client.into_split();
                    let (server_read, server_write) = server.into_split();
                    tokio::join!(
                        pump(client_read, server_write, watch.clone()),
                        pump(server_read, client_write, watch),
                    );
                });
            }
        });
        Self {
            url,
            stalled,
            connections,
            task,
        }
    }

    fn stall(&self, stalled: bool) {
        self.stalled.send_replace(stalled);
    }

    fn connections(&self) -> usize {
        self.connections.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Drop for StallingRelay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Copies `from` to `to`, holding every read while the relay is stalled.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut stalled: tokio::sync::watch::Receiver<bool>,
) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut buffer = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        if stalled.wait_for(|stalled| !*stalled).await.is_err() {
            break;
        }
        if to.write_all(&buffer[..n]).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}

/// Slow S3 answers: a store that stops answering is given up on in bounded time. Each
/// request times out (here after 500 ms, `timeout=` in the location; 120 s by default), is
/// retried with backoff on a new connection, and after the bounded retries the upload
/// answers 503 `blob_store_unavailable` and records nothing; once the store answers again,
/// uploads and verified reads go through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_stops_answering_is_given_up_on_in_bounded_time() {
    let Some(garage) = own_garage(1) else {
        return;
    };
    let target = garage.nodes[0].endpoint();
    let relay = StallingRelay::to(target.trim_start_matches("http://").to_owned()).await;
    let relay_url = relay.url.clone();
    let h = harness_on_garage(&garage, move |config| {
        big_uploads(config);
        let location = config.blobs.as_mut().expect("on Garage");
        location.endpoint = Some(relay_url);
        location.timeout = Some(std::time::Duration::from_millis(500));
        location.connect_timeout = Some(std::time::Duration::from_millis(500));
    })
    .await;
    let worker = h.agent("worker-slow", "g1", &["worker"]).await;
    let kept = sample(BIG, 5);
    let kept_id = h.put(&worker, "g1", &kept, &[]).await.to_string();
    let before = h.fingerprint().await;

    relay.stall(true);
    let opened = relay.connections();
    let started = std::time::Instant::now();
    let bytes = sample(BIG, 6);
    let digests = digest_of(&bytes);
    let answer = h
        .call(
            Method::PUT,
            &format!("/v1/blobs/{}", digests.blake3),
            Some(&worker.token),
            Body::from(bytes.clone()),
        )
        .await;
    let took = started.elapsed();
    println!(
        "a stalled store: 503 after {took:?}, {} connections opened",
        relay.connections() - opened
    );
    assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE, "{answer:?}");
    let problem: serde_json::Value = serde_json::from_slice(&answer.body).expect("problem+json");
    assert_eq!(problem["code"], "blob_store_unavailable");
    assert!(
        took < std::time::Duration::from_secs(40),
        "given up on in bounded time, not after minutes: {took:?}"
    );
    assert!(
        relay.connections() >= opened + 2,
        "a timed-out request is retried on a new connection ({} opened)",
        relay.connections() - opened
    );

    relay.stall(false);
    assert_unchanged(&before, &h.fingerprint().await, "the upload that timed out");
    read_back(&h, &worker, &kept_id, &kept).await;
    let id = h.put(&worker, "g1", &bytes, &[]).await.to_string();
    read_back(&h, &worker, &id, &bytes).await;
}
