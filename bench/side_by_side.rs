//! weft side by side with nginx WebDAV on loopback (issue #15), one load generator for both.
//! Long (about 730 lines) because it is a whole harness: it installs and configures nginx,
//! enrols a Worker with a leased WorkItem through the CLI, and drives both servers.
//!
//! `cargo bench --bench side_by_side` (release). Installs nginx from the distribution's
//! packages if it is missing (apt-get; root or sudo), starts nginx (WebDAV `PUT`, sendfile GET,
//! no fsync: this favours nginx) and the release `weft serve` on temporary directories on the
//! same disk, then runs interleaved rounds of:
//! - 4 KiB PUT per second: nginx `PUT /dav/…`, weft `PUT /v1/blobs/{digest}` (durable);
//! - 4 KiB durable publication per second (blob + signed manifest + Event, the envelopes
//!   signed before the clock starts) against nginx's 4 KiB PUT, both ways weft takes it: one
//!   request (`PUT /v1/artifacts/{digest}`, multipart: manifest and bytes, one transaction)
//!   and two (`PUT /v1/blobs/{digest}`, then `POST /v1/artifacts`);
//! - 4 KiB GET per second: nginx's static GET, weft's verified `GET /v1/artifacts/{d}/content`;
//! - 1 GiB PUT and GET in MB/s through `curl` (weft's GET re-hashes every byte it sends);
//! - `dd conv=fsync` of the same file: the disk's limit for a durable write.
//!
//! Each small phase also reports the CPU time (user + system, from `/proc`) its server and
//! the load generator spent per request: on this 2-core machine the three share the cores, so
//! CPU per request, not the disk, is what bounds a small-object rate.
//!
//! Every small request runs on 16 keep-alive connections of one reqwest client. The figures
//! are medians of the per-round values and ratios, because the machine is shared and nginx's
//! un-synced PUT swings with the disk's writeback state. Settings (environment):
//! `SBS_ROUNDS` (3), `SBS_SMALL` (4 KiB objects per round and phase, 4000), `SBS_LARGE_MIB`
//! (1024; 0 skips the large transfers), `SBS_LARGE_GETS` (5; pairs of 1 GiB GETs per round,
//! nginx's then weft's, the round's figure their median), `SBS_GET_PASSES` (1; reads each
//! small object this many times, for longer GET phases under a profiler).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Instant;

use weft_api::Envelope;
use weft_api::digest::Digests;

#[path = "side_by_side/cpu.rs"]
mod cpu;
#[path = "side_by_side/large.rs"]
mod large;
#[path = "common/weft.rs"]
#[allow(dead_code)] // the pre-signed Commands are other benches'
mod weft_process;
use cpu::{Cpu, Probes, per_request};
use weft_process::{
    BOUNDARY, Worker, enrol, free_port, manifest, multipart, start_weft, wait_until_listening,
};

const CONNECTIONS: usize = 16;
const SMALL: usize = 4096;

fn setting(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(default)
}

fn ensure_nginx() -> PathBuf {
    let found = |path: &str| Path::new(path).exists().then(|| PathBuf::from(path));
    if let Some(path) = found("/usr/sbin/nginx") {
        return path;
    }
    eprintln!("installing nginx from the distribution's packages");
    let root = Command::new("id")
        .arg("-u")
        .output()
        .map(|out| out.stdout.starts_with(b"0"))
        .unwrap_or(false);
    let apt = |args: &[&str]| {
        let mut command = if root {
            Command::new("apt-get")
        } else {
            let mut sudo = Command::new("sudo");
            sudo.arg("apt-get");
            sudo
        };
        command
            .args(args)
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|status| status.success())
    };
    if !apt(&["install", "-y", "-q", "nginx"]) {
        apt(&["update", "-q"]);
        assert!(
            apt(&["install", "-y", "-q", "nginx"]),
            "could not install nginx"
        );
    }
    found("/usr/sbin/nginx").expect("nginx installed")
}

/// nginx's master, stopped with SIGQUIT so its workers stop too (a SIGKILL would orphan them,
/// still holding the port and the bench's output pipe).
struct Nginx(Child);

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-QUIT", &self.0.id().to_string()])
            .status();
        let _ = self.0.wait();
    }
}

fn start_nginx(dir: &Path) -> (Nginx, String) {
    let nginx = ensure_nginx();
    let port = free_port();
    let (dav, temp) = (dir.join("dav"), dir.join("body"));
    std::fs::create_dir_all(&dav).expect("dav dir");
    std::fs::create_dir_all(&temp).expect("temp dir");
    let config = format!(
        "daemon off;\nworker_processes auto;\nuser root;\npid {pid};\nerror_log {err} warn;\n\
         events {{ worker_connections 1024; }}\n\
         http {{\n access_log off;\n sendfile on;\n tcp_nopush on;\n keepalive_requests 1000000;\n\
          client_body_temp_path {temp};\n client_max_body_size 0;\n\
          server {{\n  listen 127.0.0.1:{port};\n  root {dav};\n\
           location /dav/ {{ alias {dav}/; dav_methods PUT DELETE; create_full_put_path on; }}\n  }}\n}}\n",
        pid = dir.join("nginx.pid").display(),
        err = dir.join("nginx.err").display(),
        temp = temp.display(),
        dav = dav.display(),
    );
    let conf = dir.join("nginx.conf");
    std::fs::write(&conf, config).expect("nginx.conf");
    let child = Command::new(nginx)
        .args(["-e", "stderr", "-c"])
        .arg(&conf)
        .stderr(Stdio::null())
        .spawn()
        .expect("nginx starts");
    let url = format!("http://127.0.0.1:{port}");
    wait_until_listening(port);
    (Nginx(child), url)
}

/// `count` distinct random 4 KiB objects with their digests.
fn objects(count: usize) -> Vec<(Vec<u8>, Digests)> {
    (0..count)
        .map(|_| {
            let bytes: Vec<u8> = (0..SMALL).map(|_| rand::random::<u8>()).collect();
            let digests = weft_api::digest::Hasher::digest(&bytes);
            (bytes, digests)
        })
        .collect()
}

/// Runs `request(i)` for every i in 0..count on CONNECTIONS tasks; answers requests per
/// second. Every answer must be a success.
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
            let (request, next) = (request.clone(), next.clone());
            tokio::spawn(async move {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if i >= count {
                        break;
                    }
                    let answer = request(i).await.expect("request");
                    let status = answer.status();
                    let body = answer.bytes().await.expect("body");
                    assert!(
                        status.is_success(),
                        "{status}: {}",
                        String::from_utf8_lossy(&body)
                    );
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("task");
    }
    count as f64 / started.elapsed().as_secs_f64()
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn timed_mb_per_s(bytes: u64, run: impl FnOnce()) -> f64 {
    let started = Instant::now();
    run();
    bytes as f64 / 1e6 / started.elapsed().as_secs_f64()
}

fn run(program: &str, args: &[&str]) {
    let status = Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .status()
        .expect("runs");
    assert!(status.success(), "{program} {args:?} failed");
}

#[derive(Default)]
struct Figures {
    nginx_put: Vec<f64>,
    weft_put: Vec<f64>,
    publish: Vec<f64>,
    publish_one: Vec<f64>,
    nginx_get: Vec<f64>,
    weft_get: Vec<f64>,
    nginx_large_put: Vec<f64>,
    weft_large_put: Vec<f64>,
    nginx_large_get: Vec<f64>,
    weft_large_get: Vec<f64>,
    /// Server CPU milliseconds (user + system) per large GET: nginx's, weft's.
    nginx_large_get_cpu: Vec<f64>,
    weft_large_get_cpu: Vec<f64>,
    dd: Vec<f64>,
    ratios: std::collections::BTreeMap<&'static str, Vec<f64>>,
    /// Per phase: CPU microseconds per request on its server and in the load generator.
    cpu: std::collections::BTreeMap<&'static str, (Vec<f64>, Vec<f64>)>,
}

impl Figures {
    fn ratio(&mut self, name: &'static str, value: f64) {
        self.ratios.entry(name).or_default().push(value);
    }

    fn cpu(&mut self, name: &'static str, (server, client): (f64, f64)) {
        let entry = self.cpu.entry(name).or_default();
        entry.0.push(server);
        entry.1.push(client);
    }
}

fn main() {
    let rounds = setting("SBS_ROUNDS", 3);
    let small = setting("SBS_SMALL", 4000);
    let large_mib = setting("SBS_LARGE_MIB", 1024) as u64;
    let get_passes = setting("SBS_GET_PASSES", 1).max(1);
    let large_gets = setting("SBS_LARGE_GETS", 5).max(1);
    let dir =
        tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir on the target disk");
    let (nginx_process, nginx) = start_nginx(&dir.path().join("nginx"));
    let (weft_process, weft) = start_weft(dir.path());
    eprintln!("weft pid: {}", weft_process.0.id());
    let probes = Probes {
        nginx: Cpu::of(nginx_process.0.id()),
        weft: Cpu::of(weft_process.0.id()),
        client: Cpu(vec![std::process::id()]),
    };
    let worker = enrol(dir.path(), &weft);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(CONNECTIONS)
        .build()
        .expect("client");
    let mut large =
        (large_mib > 0).then(|| large::Large::create(dir.path(), large_mib, large_gets));
    let mut figures = Figures::default();
    for round in 0..rounds {
        eprintln!("round {} of {rounds}", round + 1);
        let puts = Arc::new(objects(small));
        let published = Arc::new(objects(small));
        let envelopes: Arc<Vec<Envelope>> = Arc::new(
            published
                .iter()
                .map(|(_, d)| manifest(&worker, d))
                .collect(),
        );
        // The one-request publications: the multipart bodies are built before the clock too.
        let one_step: Arc<Vec<(String, bytes::Bytes)>> = Arc::new(
            objects(small)
                .iter()
                .map(|(bytes, digests)| {
                    let envelope = manifest(&worker, digests);
                    (digests.blake3.to_string(), multipart(&envelope, bytes))
                })
                .collect(),
        );
        runtime.block_on(async {
            let (c, u, p) = (client.clone(), nginx.clone(), puts.clone());
            let before = probes.sample();
            let nginx_put = rate(small, move |i| {
                c.put(format!("{u}/dav/r{round}/o{i}"))
                    .body(p[i].0.clone())
                    .send()
            })
            .await;
            let (c, u, p, t) = (
                client.clone(),
                weft.clone(),
                puts.clone(),
                worker.token.clone(),
            );
            let nginx_put_cpu = per_request(before, probes.sample(), small, false);
            let before = probes.sample();
            let weft_put = rate(small, move |i| {
                c.put(format!("{u}/v1/blobs/{}", p[i].1.blake3))
                    .bearer_auth(&t)
                    .body(p[i].0.clone())
                    .send()
            })
            .await;
            let (c, u, p, e, t) = (
                client.clone(),
                weft.clone(),
                published.clone(),
                envelopes.clone(),
                worker.token.clone(),
            );
            let weft_put_cpu = per_request(before, probes.sample(), small, true);
            let before = probes.sample();
            let publish = rate(small, move |i| {
                let (c, u, p, e, t) = (c.clone(), u.clone(), p.clone(), e.clone(), t.clone());
                async move {
                    let blob = c
                        .put(format!("{u}/v1/blobs/{}", p[i].1.blake3))
                        .bearer_auth(&t)
                        .body(p[i].0.clone())
                        .send()
                        .await?;
                    assert!(blob.status().is_success(), "blob: {}", blob.status());
                    c.post(format!("{u}/v1/artifacts"))
                        .bearer_auth(&t)
                        .json(&e[i])
                        .send()
                        .await
                }
            })
            .await;
            let (c, u, b) = (client.clone(), weft.clone(), one_step.clone());
            let t = worker.token.clone();
            let publish_cpu = per_request(before, probes.sample(), small, true);
            eprintln!("phase: publication, one request");
            let before = probes.sample();
            let publish_one = rate(small, move |i| {
                let (digest, body) = &b[i];
                c.put(format!("{u}/v1/artifacts/{digest}"))
                    .bearer_auth(&t)
                    .header(
                        reqwest::header::CONTENT_TYPE,
                        format!("multipart/form-data; boundary={BOUNDARY}"),
                    )
                    .body(body.clone())
                    .send()
            })
            .await;
            let publish_one_cpu = per_request(before, probes.sample(), small, true);
            eprintln!("phase: nginx GET");
            let before = probes.sample();
            let (c, u) = (client.clone(), nginx.clone());
            let nginx_get = rate(small * get_passes, move |i| {
                c.get(format!("{u}/dav/r{round}/o{}", i % small)).send()
            })
            .await;
            let (c, u, p, t) = (
                client.clone(),
                weft.clone(),
                published.clone(),
                worker.token.clone(),
            );
            let nginx_get_cpu = per_request(before, probes.sample(), small * get_passes, false);
            eprintln!("phase: weft GET");
            let before = probes.sample();
            let weft_get = rate(small * get_passes, move |i| {
                c.get(format!(
                    "{u}/v1/artifacts/{}/content",
                    p[i % small].1.blake3
                ))
                .bearer_auth(&t)
                .send()
            })
            .await;
            let weft_get_cpu = per_request(before, probes.sample(), small * get_passes, true);
            figures.cpu("nginx 4 KiB PUT (no fsync)", nginx_put_cpu);
            figures.cpu("weft 4 KiB blob PUT (durable)", weft_put_cpu);
            figures.cpu("weft 4 KiB publication, one request", publish_one_cpu);
            figures.cpu("weft 4 KiB publication, two requests", publish_cpu);
            figures.cpu("nginx 4 KiB GET", nginx_get_cpu);
            figures.cpu("weft 4 KiB content GET (verified)", weft_get_cpu);
            figures.nginx_put.push(nginx_put);
            figures.weft_put.push(weft_put);
            figures.publish.push(publish);
            figures.publish_one.push(publish_one);
            figures.nginx_get.push(nginx_get);
            figures.weft_get.push(weft_get);
            figures.ratio("4 KiB PUT: weft (durable) / nginx", weft_put / nginx_put);
            figures.ratio(
                "4 KiB publication, one request / nginx 4 KiB PUT (goal >= 1.0)",
                publish_one / nginx_put,
            );
            figures.ratio(
                "4 KiB publication, two requests / nginx 4 KiB PUT",
                publish / nginx_put,
            );
            figures.ratio(
                "4 KiB GET: weft (verified) / nginx (goal >= 0.8)",
                weft_get / nginx_get,
            );
        });
        if let Some(large) = &mut large {
            let servers = large::Servers {
                dir: dir.path(),
                nginx: &nginx,
                weft: &weft,
                runtime: &runtime,
                client: &client,
                probes: &probes,
            };
            large.round(round, &servers, &worker, &mut figures);
        }
    }
    let _ = &worker.home;
    println!(
        "side by side, {rounds} rounds, medians ({small} x 4 KiB per phase, {CONNECTIONS} connections; {large_mib} MiB large)"
    );
    let line = |name: &str, values: &Vec<f64>, unit: &str| {
        if !values.is_empty() {
            println!("  {name:<44} {:>10.0} {unit}", median(values.clone()));
        }
    };
    line("nginx 4 KiB PUT (no fsync)", &figures.nginx_put, "/s");
    line("weft 4 KiB blob PUT (durable)", &figures.weft_put, "/s");
    line(
        "weft 4 KiB publication, one request",
        &figures.publish_one,
        "/s",
    );
    line(
        "weft 4 KiB publication, two requests",
        &figures.publish,
        "/s",
    );
    line("nginx 4 KiB GET", &figures.nginx_get, "/s");
    line("weft 4 KiB content GET (verified)", &figures.weft_get, "/s");
    line("dd conv=fsync", &figures.dd, "MB/s");
    line("nginx large PUT", &figures.nginx_large_put, "MB/s");
    line("weft large PUT (durable)", &figures.weft_large_put, "MB/s");
    line(
        "nginx large GET (sendfile)",
        &figures.nginx_large_get,
        "MB/s",
    );
    line("weft large GET (verified)", &figures.weft_large_get, "MB/s");
    line(
        "nginx large GET, server CPU",
        &figures.nginx_large_get_cpu,
        "ms",
    );
    line(
        "weft large GET, server CPU",
        &figures.weft_large_get_cpu,
        "ms",
    );
    println!(
        "CPU per request, microseconds (user + system from /proc; medians): its server, the load generator"
    );
    for (name, (server, client)) in &figures.cpu {
        println!(
            "  {name:<44} {:>8.1} {:>8.1}",
            median(server.clone()),
            median(client.clone())
        );
    }
    println!("ratios (median of the per-round ratios):");
    for (name, values) in &figures.ratios {
        let rounds: Vec<String> = values.iter().map(|v| format!("{v:.2}")).collect();
        println!(
            "  {name:<58} {:>6.2}x   rounds: {}",
            median(values.clone()),
            rounds.join(" ")
        );
    }
    cpu::print_ceilings(
        &figures.cpu,
        &[
            (
                "4 KiB publication, one request / nginx 4 KiB PUT",
                "weft 4 KiB publication, one request",
                "nginx 4 KiB PUT (no fsync)",
            ),
            (
                "4 KiB PUT: weft (durable) / nginx",
                "weft 4 KiB blob PUT (durable)",
                "nginx 4 KiB PUT (no fsync)",
            ),
            (
                "4 KiB GET: weft (verified) / nginx",
                "weft 4 KiB content GET (verified)",
                "nginx 4 KiB GET",
            ),
        ],
        median,
    );
    cpu::warn_if_slow_file_system(&figures.cpu);
}
