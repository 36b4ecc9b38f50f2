//! weft on Garage side by side with Garage's own S3 API (issue #42), one client for both.
//!
//! `cargo bench --bench garage` (release; needs Garage: `WEFT_GARAGE`, `garage` on `PATH`, or
//! the copy `scripts/test` installs). Starts one Garage node on loopback and the release
//! `weft serve --blobs s3://…` over it, enrols a Worker with a started WorkItem, then per
//! round, with one reqwest client (HTTP/1.1 keep-alive) for both servers:
//! - a `GB_LARGE_MIB` (1024) MiB file: PUT and GET in MB/s. Garage through presigned URLs
//!   (SigV4, unsigned payload, `Content-Length` set), weft through `PUT /v1/blobs/{digest}`
//!   (hashed both ways, multipart to Garage, placed by copy, durable) then, after its
//!   publication, the verified `GET /v1/artifacts/{d}/content`;
//! - `GB_SMALL` (1000) 4 KiB objects on 16 connections: PUT and GET per second (weft keeps
//!   them inline in its index and its verified memory cache, as the issue allows);
//!
//! and once, at the end, the server's peak RSS (`VmHWM`) after a `GB_RSS_GIB` (4) GiB upload
//! through `POST /v1/blobs` (0 skips it). The figures are medians over `GB_ROUNDS` (3) rounds,
//! with the weft/Garage ratios, because the machine is shared.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use object_store::signer::Signer as _;
use weft_api::digest::Digests;

// Shared with `side_by_side.rs`, which uses all of it.
#[allow(dead_code)]
#[path = "common/weft.rs"]
mod weft_process;
use weft_process::{Worker, enrol, manifest, start_weft_with};

const CONNECTIONS: usize = 16;
const SMALL: usize = 4096;

fn setting(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Garage's own S3 API, for presigned URLs under `direct/`.
fn garage_signer(garage: &weft_testkit::Garage) -> object_store::aws::AmazonS3 {
    object_store::aws::AmazonS3Builder::new()
        .with_bucket_name(weft_testkit::BUCKET)
        .with_region(weft_testkit::REGION)
        .with_endpoint(garage.nodes[0].endpoint())
        .with_allow_http(true)
        .with_access_key_id(weft_testkit::KEY_ID)
        .with_secret_access_key(weft_testkit::KEY_SECRET)
        .build()
        .expect("an S3 client for Garage")
}

async fn presigned(
    signer: &object_store::aws::AmazonS3,
    method: object_store::signer::Method,
    key: &str,
) -> String {
    signer
        .signed_url(
            method,
            &object_store::path::Path::from(key),
            Duration::from_secs(3600),
        )
        .await
        .expect("a presigned URL")
        .to_string()
}

/// Streams the file at `path` as a request body of known length.
async fn file_body(path: &Path) -> (reqwest::Body, u64) {
    let file = tokio::fs::File::open(path).await.expect("large file");
    let size = file.metadata().await.expect("metadata").len();
    let stream = tokio_util::io::ReaderStream::with_capacity(file, 1 << 20);
    (reqwest::Body::wrap_stream(stream), size)
}

/// MB/s of a request that sends or receives `bytes`, its body read to the end.
async fn timed(bytes: u64, request: reqwest::RequestBuilder) -> f64 {
    let started = Instant::now();
    let answer = request.send().await.expect("request");
    let status = answer.status();
    let mut body = answer.bytes_stream();
    let mut received = 0u64;
    while let Some(chunk) = body.next().await {
        received += chunk.expect("body").len() as u64;
    }
    assert!(status.is_success(), "{status}");
    let _ = received;
    bytes as f64 / 1e6 / started.elapsed().as_secs_f64()
}

/// Runs `request(i)` for i in 0..count on CONNECTIONS tasks; answers requests per second.
async fn rate<F, Fut>(count: usize, request: F) -> f64
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = reqwest::Result<reqwest::Response>> + Send,
{
    let request = Arc::new(request);
    let next = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let started = Instant::now();
    let tasks: Vec<_> = (0..CONNECTIONS)
        .map(|_| {
            let (request, next) = (Arc::clone(&request), Arc::clone(&next));
            tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if i >= count {
                        break;
                    }
                    let answer = request(i).await.expect("request");
                    let status = answer.status();
                    let body = answer.bytes().await.expect("body");
                    assert!(status.is_success(), "{status}: {body:?}");
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("task");
    }
    count as f64 / started.elapsed().as_secs_f64()
}

/// Writes `mib` MiB of random bytes whose first eight are `round`, and hashes them.
fn large_file(path: &Path, mib: usize, round: usize) -> Digests {
    use std::io::Write as _;
    let mut file = std::io::BufWriter::new(std::fs::File::create(path).expect("large file"));
    let mut block = vec![0u8; 1 << 20];
    for i in 0..mib {
        block.iter_mut().for_each(|b| *b = rand::random());
        if i == 0 {
            block[..8].copy_from_slice(&(round as u64).to_le_bytes());
        }
        file.write_all(&block).expect("write");
    }
    file.flush().expect("flush");
    drop(file);
    let mut hasher = weft_api::digest::Hasher::default();
    let mut reader = std::fs::File::open(path).expect("large file");
    let mut buffer = vec![0u8; 1 << 20];
    loop {
        let n = std::io::Read::read(&mut reader, &mut buffer).expect("read");
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
    }
    hasher.finish()
}

async fn publish(client: &reqwest::Client, worker: &Worker, digests: &Digests) {
    let answer = client
        .post(format!("{}/v1/artifacts", worker.url))
        .bearer_auth(&worker.token)
        .json(&manifest(worker, digests))
        .send()
        .await
        .expect("publish");
    assert!(answer.status().is_success(), "publish: {}", answer.status());
}

#[derive(Default)]
struct Figures {
    large_put: (Vec<f64>, Vec<f64>),
    large_get: (Vec<f64>, Vec<f64>),
    small_put: (Vec<f64>, Vec<f64>),
    small_get: (Vec<f64>, Vec<f64>),
}

fn print_pair(name: &str, unit: &str, (garage, weft): &(Vec<f64>, Vec<f64>)) {
    if garage.is_empty() {
        return;
    }
    let ratios: Vec<f64> = weft.iter().zip(garage).map(|(w, g)| w / g).collect();
    println!(
        "{name:<12} Garage {:>9.1} {unit}   weft {:>9.1} {unit}   weft/Garage {:.2}",
        median(garage.clone()),
        median(weft.clone()),
        median(ratios)
    );
}

/// A line of `/proc/<pid>/status` (`VmRSS:`, `VmHWM:`), its value only.
fn proc_status(pid: u32, field: &str) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|line| line.starts_with(field))
                .map(|line| line[field.len()..].trim().to_owned())
        })
        .unwrap_or_else(|| "?".to_owned())
}

fn main() {
    let Some(garage) = weft_testkit::Garage::start(1) else {
        eprintln!("no Garage binary: set WEFT_GARAGE or run scripts/test once");
        std::process::exit(2);
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let location = garage.location(0, "weft");
    let credentials = garage.credentials_file().to_str().expect("utf-8 path");
    let (server, url) = start_weft_with(
        dir.path(),
        &[
            "--blobs",
            &location,
            "--s3-credentials-file",
            credentials,
            "--max-upload-bytes",
            "64GiB",
        ],
        &[],
    );
    let worker = enrol(dir.path(), &url);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(CONNECTIONS)
        .build()
        .expect("client");
    let signer = garage_signer(&garage);
    let (rounds, large_mib, small) = (
        setting("GB_ROUNDS", 3),
        setting("GB_LARGE_MIB", 1024),
        setting("GB_SMALL", 1000),
    );
    println!(
        "weft on Garage vs Garage's S3 API, one node on loopback: {rounds} rounds, {large_mib} MiB, {small} x 4 KiB"
    );
    let mut figures = Figures::default();
    let large = dir.path().join("large.bin");
    for round in 0..rounds {
        runtime.block_on(async {
            if large_mib > 0 {
                let digests = large_file(&large, large_mib, round);
                let bytes = digests.size;
                let key = format!("direct/large-{round}");
                let put_url = presigned(&signer, object_store::signer::Method::PUT, &key).await;
                let (body, size) = file_body(&large).await;
                let garage_put = timed(
                    bytes,
                    client
                        .put(put_url)
                        .header("content-length", size)
                        .body(body),
                )
                .await;
                let (body, size) = file_body(&large).await;
                let weft_put = timed(
                    bytes,
                    client
                        .put(format!("{url}/v1/blobs/{}", digests.blake3))
                        .bearer_auth(&worker.token)
                        .header("content-length", size)
                        .body(body),
                )
                .await;
                publish(&client, &worker, &digests).await;
                let get_url = presigned(&signer, object_store::signer::Method::GET, &key).await;
                let garage_get = timed(bytes, client.get(get_url)).await;
                let weft_get = timed(
                    bytes,
                    client
                        .get(format!("{url}/v1/artifacts/{}/content", digests.blake3))
                        .bearer_auth(&worker.token),
                )
                .await;
                figures.large_put.0.push(garage_put);
                figures.large_put.1.push(weft_put);
                figures.large_get.0.push(garage_get);
                figures.large_get.1.push(weft_get);
            }
            if small > 0 {
                let objects: Arc<Vec<(bytes::Bytes, Digests)>> = Arc::new(
                    (0..small)
                        .map(|_| {
                            let bytes: Vec<u8> = (0..SMALL).map(|_| rand::random()).collect();
                            let digests = weft_api::digest::Hasher::digest(&bytes);
                            (bytes::Bytes::from(bytes), digests)
                        })
                        .collect(),
                );
                let mut put_urls = Vec::with_capacity(small);
                let mut get_urls = Vec::with_capacity(small);
                for i in 0..small {
                    let key = format!("direct/small-{round}-{i}");
                    put_urls
                        .push(presigned(&signer, object_store::signer::Method::PUT, &key).await);
                    get_urls
                        .push(presigned(&signer, object_store::signer::Method::GET, &key).await);
                }
                let (put_urls, get_urls) = (Arc::new(put_urls), Arc::new(get_urls));
                let (c, o, u) = (client.clone(), Arc::clone(&objects), Arc::clone(&put_urls));
                let garage_put = rate(small, move |i| {
                    c.put(u[i].clone()).body(o[i].0.clone()).send()
                })
                .await;
                let (c, o, w, t) = (
                    client.clone(),
                    Arc::clone(&objects),
                    url.clone(),
                    worker.token.clone(),
                );
                let weft_put = rate(small, move |i| {
                    c.put(format!("{w}/v1/blobs/{}", o[i].1.blake3))
                        .bearer_auth(&t)
                        .body(o[i].0.clone())
                        .send()
                })
                .await;
                for (_, digests) in objects.iter() {
                    publish(&client, &worker, digests).await;
                }
                let (c, u) = (client.clone(), Arc::clone(&get_urls));
                let garage_get = rate(small, move |i| c.get(u[i].clone()).send()).await;
                let (c, o, w, t) = (
                    client.clone(),
                    Arc::clone(&objects),
                    url.clone(),
                    worker.token.clone(),
                );
                let weft_get = rate(small, move |i| {
                    c.get(format!("{w}/v1/artifacts/{}/content", o[i].1.blake3))
                        .bearer_auth(&t)
                        .send()
                })
                .await;
                figures.small_put.0.push(garage_put);
                figures.small_put.1.push(weft_put);
                figures.small_get.0.push(garage_get);
                figures.small_get.1.push(weft_get);
            }
        });
        println!("round {} done", round + 1);
    }
    print_pair("large PUT", "MB/s ", &figures.large_put);
    print_pair("large GET", "MB/s ", &figures.large_get);
    print_pair("4 KiB PUT", "req/s", &figures.small_put);
    print_pair("4 KiB GET", "req/s", &figures.small_get);

    let rss_gib = setting("GB_RSS_GIB", 4);
    if rss_gib > 0 {
        let total = (rss_gib as u64) << 30;
        let block = bytes::Bytes::from(
            (0..1 << 20)
                .map(|_| rand::random::<u8>())
                .collect::<Vec<u8>>(),
        );
        let stream = futures::stream::iter(0..total >> 20).map(move |i| {
            // Every MiB differs (its first eight bytes are its index), so nothing repeats.
            let mut chunk = block.to_vec();
            chunk[..8].copy_from_slice(&i.to_le_bytes());
            Ok::<_, std::io::Error>(bytes::Bytes::from(chunk))
        });
        // The peak so far belongs to the phases above: reset it (Linux ≥ 4.0), and note
        // where the upload starts from.
        let pid = server.0.id();
        let _ = std::fs::write(format!("/proc/{pid}/clear_refs"), "5");
        let before = proc_status(pid, "VmRSS:");
        let started = Instant::now();
        let answer = runtime.block_on(
            client
                .post(format!("{url}/v1/blobs"))
                .bearer_auth(&worker.token)
                .header("content-length", total)
                .body(reqwest::Body::wrap_stream(stream))
                .send(),
        );
        let status = answer.expect("upload").status();
        assert!(status.is_success(), "{status}");
        println!(
            "{rss_gib} GiB upload in {:.1} s; server RSS before {before}, peak during {}",
            started.elapsed().as_secs_f64(),
            proc_status(pid, "VmHWM:")
        );
    }
    drop(server);
}
