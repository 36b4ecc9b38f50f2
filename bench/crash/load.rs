//! One burst of mixed load against one incarnation of the server, until the kill: uploaders
//! (blobs of all sizes, inline and file, some of 1 MiB or more so outboards are written, a few
//! resumable uploads through `/v1/uploads`), each upload usually followed by a signed
//! manifest citing it; an Evidence writer citing published artifacts; a Command writer
//! (`lease.renew`, and `work.progress` charging one token each); and an SSE subscriber that checks the chain as it reads and ACKs what it
//! received. Only answers received whole go into the [`Record`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt as _;
use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng as _};
use weft_api::client::{Client, Error};
use weft_api::digest::{Digests, Hasher};
use weft_api::event::{Delivered, EventHash};
use weft_api::evidence::{
    Evidence, EvidenceResult, Method, MethodKind, Outcome, Subject, SubjectKind,
};
use weft_api::manifest::{Classification, Content, Execution, Manifest, Producer};
use weft_api::views::UploadReceipt;

use super::record::{Blob, BlobKind, EvidenceAck, Publication, Record};
use super::server::World;

mod commands;
mod resumable;

pub(super) use commands::resend_charges;

const UPLOADERS: u64 = 2;

/// What every task of a burst shares.
struct Burst {
    world: Arc<World>,
    http: reqwest::Client,
    client: Client,
    url: String,
    record: Arc<Mutex<Record>>,
    kill: usize,
    stop: AtomicBool,
}

impl Burst {
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Runs `change` on the record (a short critical section, no await inside).
    fn note<T>(&self, change: impl FnOnce(&mut Record) -> T) -> T {
        let mut record = self.record.lock().unwrap_or_else(|e| e.into_inner());
        change(&mut record)
    }

    /// Counts a failed request: cut by the kill (transport), or refused (by code).
    fn failed(&self, what: &str, error: &Error) {
        let key = match error {
            Error::Http(_) | Error::Io(_) => return self.note(|r| r.cut += 1),
            Error::Api { status, body } => format!("{what}: {status} {}", body.code),
            Error::Integrity { .. } => {
                let text = format!("kill {}: a read answered other bytes: {error}", self.kill);
                return self.note(|r| r.losses.push(text));
            }
            Error::Protocol(text) => {
                format!("{what}: {}", text.chars().take(80).collect::<String>())
            }
        };
        self.note(|r| *r.refusals.entry(key).or_default() += 1);
    }
}

/// The running tasks of one burst.
pub(super) struct Load {
    burst: Arc<Burst>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

/// Starts the tasks against the server at `url`. `seed` and `kill` seed their random choices.
pub(super) fn start(
    world: Arc<World>,
    url: &str,
    record: Arc<Mutex<Record>>,
    seed: u64,
    kill: usize,
) -> Load {
    // A fresh connection pool per incarnation: the old connections died with the process.
    let http = reqwest::Client::new();
    let burst = Arc::new(Burst {
        client: Client::new(url, Some(world.token.clone())),
        world,
        http,
        url: url.to_owned(),
        record,
        kill,
        stop: AtomicBool::new(false),
    });
    let rng = |task: u64| StdRng::seed_from_u64(seed ^ ((kill as u64) << 8) ^ task);
    let mut tasks = Vec::new();
    for task in 0..UPLOADERS {
        tasks.push(tokio::spawn(uploader(burst.clone(), rng(task))));
    }
    tasks.push(tokio::spawn(evidence(burst.clone(), rng(100))));
    tasks.push(tokio::spawn(commands::commands(burst.clone(), rng(101))));
    tasks.push(tokio::spawn(subscriber(burst.clone())));
    Load { burst, tasks }
}

impl Load {
    /// After the kill: every task stops at its next failed request; a task still waiting
    /// after 10 s is aborted (what it was doing was not acknowledged).
    pub(super) async fn finish(self) {
        self.burst.stop.store(true, Ordering::Relaxed);
        for mut task in self.tasks {
            if tokio::time::timeout(Duration::from_secs(10), &mut task)
                .await
                .is_err()
            {
                task.abort();
            }
        }
    }
}

/// A blob size: mostly small (inline), some just around the 64 KiB threshold, some files, and
/// a few of 1 MiB or more so outboards are written.
fn draw_size(rng: &mut StdRng) -> usize {
    match rng.random_range(0..100) {
        0..55 => rng.random_range(0..=4096),
        55..75 => rng.random_range(4097..=65_536),
        75..78 => 65_536 + rng.random_range(0..=1),
        78..96 => rng.random_range(65_537..1_048_576),
        _ => rng.random_range(1_048_576..=3 << 20),
    }
}

/// `size` bytes no other upload of the campaign has: BLAKE3's output stream of a random
/// `key` (so a cut resumable upload can regenerate its bytes).
fn content(key: &[u8; 32], size: usize) -> Bytes {
    let mut bytes = vec![0u8; size];
    blake3::Hasher::new_keyed(key)
        .finalize_xof()
        .fill(&mut bytes);
    Bytes::from(bytes)
}

async fn uploader(burst: Arc<Burst>, mut rng: StdRng) {
    while !burst.stopped() {
        let pending = burst.note(|r| r.pending_uploads.pop());
        let (kind, digests, uploaded) = match pending {
            Some(job) => match resumable::upload(&burst, job).await {
                Some((digests, uploaded)) => (BlobKind::Resumable, digests, uploaded),
                None => continue,
            },
            None if rng.random_ratio(1, 25) => {
                let job = resumable::new_job(&mut rng, burst.kill);
                match resumable::upload(&burst, job).await {
                    Some((digests, uploaded)) => (BlobKind::Resumable, digests, uploaded),
                    None => continue,
                }
            }
            None => {
                let size = draw_size(&mut rng);
                let bytes = content(&rng.random(), size);
                let digests = Hasher::digest(&bytes);
                // Small bytes are also published with their manifest in one request.
                if size <= ONE_REQUEST_BYTES && rng.random_ratio(1, 3) {
                    publish_with_content(&burst, &bytes, &digests, BlobKind::of_size(size)).await;
                    continue;
                }
                let uploaded = put_blob(&burst, bytes, &digests).await;
                (BlobKind::of_size(size), digests, uploaded)
            }
        };
        let receipt = match uploaded {
            Ok(receipt) => receipt,
            Err(error) => {
                burst.failed(kind.label(), &error);
                pause(&burst).await;
                continue;
            }
        };
        if receipt.blake3 != digests.blake3 || receipt.size != digests.size {
            let text = format!(
                "kill {}: upload of {} answered {receipt:?}",
                burst.kill, digests.blake3
            );
            burst.note(|r| r.losses.push(text));
        }
        let blob = Blob {
            digest: digests.blake3,
            size: digests.size,
            kind,
            kill: burst.kill,
        };
        burst.note(|r| r.blobs.push(blob));
        if rng.random_ratio(4, 5) {
            publish(&burst, &digests).await;
        }
    }
}

/// After a refusal on a live server, a short pause so a refusing route does not spin.
async fn pause(burst: &Burst) {
    if !burst.stopped() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

async fn put_blob(burst: &Burst, bytes: Bytes, digests: &Digests) -> Result<UploadReceipt, Error> {
    let response = burst
        .http
        .put(format!("{}/v1/blobs/{}", burst.url, digests.blake3))
        .bearer_auth(&burst.world.token)
        .header(reqwest::header::CONTENT_TYPE, "application/octet-stream")
        .body(bytes)
        .send()
        .await?;
    let status = response.status();
    let body = response.bytes().await?;
    if !status.is_success() {
        return Err(match serde_json::from_slice(&body) {
            Ok(body) => Error::Api {
                status: status.as_u16(),
                body,
            },
            Err(_) => Error::Protocol(format!("PUT blob: {status}")),
        });
    }
    serde_json::from_slice(&body).map_err(|e| Error::Protocol(format!("PUT blob answer: {e}")))
}

/// Bytes up to this size are sometimes published with their manifest in one request
/// (`PUT /v1/artifacts/{digest}`), as `weft put` does.
const ONE_REQUEST_BYTES: usize = 64 * 1024;

/// Publishes `bytes` with their manifest in one request; an answer records both the blob
/// and the publication as acknowledged.
async fn publish_with_content(burst: &Burst, bytes: &[u8], digests: &Digests, kind: BlobKind) {
    let manifest = manifest_of(burst, digests);
    match burst
        .client
        .publish_with_content(&burst.world.key, &manifest, bytes)
        .await
    {
        Ok(published) => {
            if published.artifact != digests.blake3 {
                let text = format!(
                    "kill {}: publication with the bytes of {} answered {published:?}",
                    burst.kill, digests.blake3
                );
                burst.note(|r| r.losses.push(text));
            }
            let blob = Blob {
                digest: digests.blake3,
                size: digests.size,
                kind,
                kill: burst.kill,
            };
            let publication = Publication {
                artifact: published.artifact,
                manifest_id: published.manifest_id,
                sequence: published.sequence,
                kill: burst.kill,
            };
            burst.note(|r| {
                r.blobs.push(blob);
                r.publications.push(publication);
                r.with_content += 1;
            });
        }
        Err(error) => {
            burst.failed("publish with content", &error);
            pause(burst).await;
        }
    }
}

fn manifest_of(burst: &Burst, digests: &Digests) -> Manifest {
    let world = &burst.world;
    Manifest {
        content: Content {
            blake3: digests.blake3,
            sha256: digests.sha256,
            size: digests.size,
            media_type: "application/octet-stream".to_owned(),
            schema: None,
        },
        producer: Producer {
            agent_id: world.agent.clone(),
            agent_card_version: "1".to_owned(),
        },
        mission_id: world.mission.clone(),
        group_id: world.group.clone(),
        work_item_id: world.work_item.clone(),
        execution: Execution {
            lease_id: world.lease.clone(),
            ownership_epoch: world.ownership_epoch,
        },
        sources: Vec::new(),
        tools: Vec::new(),
        created_at: chrono::Utc::now().fixed_offset(),
        classification: Classification::Internal,
        retrieval_uri: format!("{}/v1/artifacts/{}/content", burst.url, digests.blake3),
        annotations: Default::default(),
    }
}

async fn publish(burst: &Burst, digests: &Digests) {
    let manifest = manifest_of(burst, digests);
    match burst.client.publish(&burst.world.key, &manifest).await {
        Ok(published) => {
            let publication = Publication {
                artifact: published.artifact,
                manifest_id: published.manifest_id,
                sequence: published.sequence,
                kill: burst.kill,
            };
            burst.note(|r| r.publications.push(publication));
        }
        Err(error) => burst.failed("publish", &error),
    }
}

async fn evidence(burst: Arc<Burst>, mut rng: StdRng) {
    let world = burst.world.clone();
    while !burst.stopped() {
        let pick = rng.random::<u32>() as usize;
        let cited = if rng.random_bool(0.5) {
            burst.note(|r| r.published(pick))
        } else {
            None
        };
        let evidence = Evidence {
            subject: Subject {
                kind: SubjectKind::WorkItem,
                id: world.work_item.to_string(),
            },
            mission_id: world.mission.clone(),
            group_id: world.group.clone(),
            work_item_id: world.work_item.clone(),
            criterion: "ac-1".to_owned(),
            method: Method {
                kind: MethodKind::AutomatedTest,
                name: "crash".to_owned(),
                version: "1".to_owned(),
            },
            result: EvidenceResult {
                outcome: Outcome::Pass,
                summary: format!("burst {}", burst.kill),
                metrics: Default::default(),
            },
            producer: Producer {
                agent_id: world.agent.clone(),
                agent_card_version: "1".to_owned(),
            },
            timestamp: chrono::Utc::now().fixed_offset(),
            artifacts: cited.into_iter().collect(),
            supersedes: None,
            execution: Some(Execution {
                lease_id: world.lease.clone(),
                ownership_epoch: world.ownership_epoch,
            }),
        };
        match burst.client.record_evidence(&world.key, &evidence).await {
            Ok(recorded) => {
                let ack = EvidenceAck {
                    evidence_id: recorded.evidence_id,
                    sequence: recorded.sequence,
                    kill: burst.kill,
                };
                burst.note(|r| r.evidence.push(ack));
            }
            Err(error) => burst.failed("Evidence", &error),
        }
        tokio::time::sleep(Duration::from_millis(rng.random_range(0..5))).await;
    }
}

/// Follows the Group's stream from the last ACKed cursor: each Event must continue the chain
/// the subscriber already holds (next sequence, `prevHash` = the previous hash, its hash
/// recomputed from its content), and an Event seen before a crash must come back unchanged.
/// ACKs the newest received sequence every few Events and when the stream goes quiet.
async fn subscriber(burst: Arc<Burst>) {
    let (after, mut head) = burst.note(|r| {
        let after = r.acked_cursor;
        let head = match after {
            0 => Some(EventHash::GENESIS),
            _ => r.seen.get(&after).copied(),
        };
        (after, head)
    });
    let mut last = after;
    let Ok(response) = burst.client.event_stream(&burst.world.group, after).await else {
        return burst.note(|r| r.cut += 1);
    };
    let mut stream = response.bytes_stream();
    let mut pending = Vec::<u8>::new();
    let mut unacked = 0u32;
    while !burst.stopped() {
        let next = tokio::time::timeout(Duration::from_millis(30), stream.next()).await;
        match next {
            Ok(Some(Ok(chunk))) => pending.extend_from_slice(&chunk),
            Ok(Some(Err(_)) | None) => return burst.note(|r| r.cut += 1),
            Err(_quiet) => {
                if unacked > 0 && ack(&burst, last).await.is_err() {
                    return;
                }
                unacked = 0;
                continue;
            }
        }
        while let Some(end) = pending.windows(2).position(|pair| pair == b"\n\n") {
            let frame: Vec<u8> = pending.drain(..end + 2).collect();
            let Some(delivered) = parse_frame(&frame) else {
                continue;
            };
            check_link(&burst, &mut head, last, &delivered);
            last = delivered.sequence();
            head = Some(delivered.hash());
            unacked += 1;
        }
        if unacked >= 8 {
            if ack(&burst, last).await.is_err() {
                return;
            }
            unacked = 0;
        }
    }
}

/// The `data:` line of one SSE frame as an Event (keep-alive comments and other frames: none).
fn parse_frame(frame: &[u8]) -> Option<Delivered> {
    let text = std::str::from_utf8(frame).ok()?;
    let data = text.lines().find_map(|line| line.strip_prefix("data: "))?;
    serde_json::from_str(data).ok()
}

fn check_link(burst: &Burst, head: &mut Option<EventHash>, last: u64, delivered: &Delivered) {
    let sequence = delivered.sequence();
    let mut problems = Vec::new();
    if sequence != last + 1 {
        problems.push(format!(
            "expected sequence {}, received {sequence}",
            last + 1
        ));
    }
    if head.is_some_and(|head| head != delivered.prev_hash()) {
        problems.push(format!(
            "sequence {sequence}: prevHash is not the previous hash"
        ));
    }
    if delivered
        .event()
        .is_some_and(|event| event.computed_hash() != event.hash)
    {
        problems.push(format!(
            "sequence {sequence}: hash does not match its content"
        ));
    }
    burst.note(|r| {
        match r.seen.insert(sequence, delivered.hash()) {
            Some(before) if before != delivered.hash() => problems.push(format!(
                "sequence {sequence} came back with another hash after a crash"
            )),
            _ => {}
        }
        for problem in problems {
            r.losses
                .push(format!("kill {}: stream: {problem}", burst.kill));
        }
    });
}

/// ACKs `sequence`; only an answered ACK moves the record's cursor.
async fn ack(burst: &Burst, sequence: u64) -> Result<(), ()> {
    match burst.client.ack(&burst.world.group, sequence).await {
        Ok(cursor) => {
            burst.note(|r| {
                r.acks += 1;
                r.acked_cursor = r.acked_cursor.max(sequence);
                if cursor.sequence < sequence {
                    r.losses.push(format!(
                        "kill {}: ACK of {sequence} answered cursor {}",
                        burst.kill, cursor.sequence
                    ));
                }
            });
            Ok(())
        }
        Err(error) => {
            burst.failed("ACK", &error);
            Err(())
        }
    }
}
