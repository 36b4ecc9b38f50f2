//! The oracle, run against a restarted server: the Group's log replays from 0 with an unbroken
//! chain re-hashed here (`verify_chain`), every acknowledged publication, Evidence record and
//! Command has its Event at the sequence its answer named, every Event the subscriber received
//! is still there with the same hash, the signed checkpoint is the replay's head, the ACKed
//! cursor is not behind, and acknowledged blobs, manifests and Evidence read back (blob bytes
//! re-hashed by the client as well as verified by the server). Reads cover what earlier runs
//! did not check, plus a random sample of what they did; a full run reads everything.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use futures::StreamExt as _;
use rand::Rng as _;
use rand::rngs::StdRng;
use weft_api::client::Client;
use weft_api::event::{Delivered, EventHash, verify_chain};
use weft_api::{ArtifactId, Digest};

use super::record::{Answer, Blob, Publication, Record};
use super::server::World;

const READERS: usize = 4;

/// What one oracle run found.
#[derive(Debug, Default)]
pub(super) struct Outcome {
    pub(super) checks: u64,
    pub(super) losses: Vec<String>,
}

impl Outcome {
    fn lost(&mut self, text: String) {
        self.checks += 1;
        self.losses.push(text);
    }
    fn held(&mut self) {
        self.checks += 1;
    }
    fn check(&mut self, held: bool, text: impl FnOnce() -> String) {
        if held { self.held() } else { self.lost(text()) }
    }
}

/// What an acknowledged write says must be at a sequence of the log.
enum Expect {
    Published(ArtifactId, usize),
    Evidence(ArtifactId, usize),
    Command(String, String, usize),
}

/// Runs the oracle after `kill`'s restart. `sample` older items of each kind are read again
/// unless `full`, which reads every one.
pub(super) async fn check(
    url: &str,
    world: &World,
    record: &Arc<Mutex<Record>>,
    kill: usize,
    sample: usize,
    full: bool,
    rng: &mut StdRng,
) -> Outcome {
    let client = Client::new(url, Some(world.token.clone()));
    let token = world.token.as_str();
    let mut outcome = Outcome::default();
    let (expected, seen, acked_cursor, charges) = {
        let record = record.lock().unwrap_or_else(|e| e.into_inner());
        let count = |answer| {
            let charges = record.charges.iter();
            charges.filter(|charge| charge.answer == answer).count() as u64
        };
        let charges = (count(Answer::Acked), count(Answer::Pending));
        let mut expected: HashMap<u64, Vec<Expect>> = HashMap::new();
        for p in &record.publications {
            let at = expected.entry(p.sequence).or_default();
            at.push(Expect::Published(p.artifact, p.kill));
        }
        for e in &record.evidence {
            let at = expected.entry(e.sequence).or_default();
            at.push(Expect::Evidence(e.evidence_id, e.kill));
        }
        for c in &record.commands {
            for (sequence, kind) in &c.events {
                let at = expected.entry(*sequence).or_default();
                at.push(Expect::Command(c.command_id.clone(), kind.clone(), c.kill));
            }
        }
        (expected, record.seen.clone(), record.acked_cursor, charges)
    };
    // Exactly once: every acknowledged charge is in the WorkItem's spend, none twice (one
    // token each; one whose answer was cut may or may not be, until it is re-sent; a refused
    // one is not). At the end every charge must have been answered, and the spend must be
    // exactly the acknowledged ones.
    let (acked, pending) = charges;
    match client.work_item(&world.work_item).await {
        Ok(view) => {
            let spent = view.budget.spent.tokens;
            outcome.check(acked <= spent && spent <= acked + pending, || {
                format!(
                    "after kill {kill}: {spent} tokens spent, but {acked} charges acknowledged and {pending} unanswered"
                )
            });
            if full {
                outcome.check(pending == 0 && spent == acked, || {
                    format!(
                        "at the end: {spent} tokens spent for {acked} charges acknowledged, {pending} never answered"
                    )
                });
            }
        }
        Err(e) => outcome.lost(format!("after kill {kill}: the WorkItem: {e}")),
    }

    let hashes = replay(&client, world, kill, &expected, &mut outcome).await;
    let head = hashes.len() as u64;
    for sequence in expected.keys().filter(|sequence| **sequence > head) {
        outcome.lost(format!(
            "after kill {kill}: acknowledged Event {sequence} is past the head {head}"
        ));
    }
    for (sequence, hash) in &seen {
        let found = hashes.get(*sequence as usize - 1);
        outcome.check(found == Some(hash), || {
            format!(
                "after kill {kill}: Event {sequence} the subscriber received is gone or changed"
            )
        });
    }
    match client.checkpoint(&world.group).await {
        Ok(signed) => {
            let at_head = hashes.last().copied().unwrap_or(EventHash::GENESIS);
            outcome.check(
                signed.checkpoint.sequence == head && signed.checkpoint.hash == at_head,
                || {
                    format!(
                        "after kill {kill}: checkpoint {} is not the replay's head {head}",
                        signed.checkpoint.sequence
                    )
                },
            );
        }
        Err(e) => outcome.lost(format!("after kill {kill}: checkpoint: {e}")),
    }
    let cursors = client
        .get_text(&format!("/v1/groups/{}/cursors", world.group), &[])
        .await
        .map_err(|e| e.to_string())
        .and_then(|text| {
            serde_json::from_str::<weft_api::views::Cursors>(&text).map_err(|e| e.to_string())
        });
    match cursors {
        Ok(cursors) => {
            let ours = cursors
                .cursors
                .iter()
                .find(|cursor| world.agent == cursor.agent_id)
                .map_or(0, |cursor| cursor.sequence);
            outcome.check(ours >= acked_cursor, || {
                format!("after kill {kill}: cursor {ours} is behind the ACKed {acked_cursor}")
            });
        }
        Err(e) => outcome.lost(format!("after kill {kill}: cursors: {e}")),
    }

    let reads = Reads {
        client: &client,
        token,
        kill,
        sample,
        full,
    };
    read_back(&reads, record, rng, &mut outcome).await;
    outcome
}

/// Replays the whole log from 0, re-hashing the chain, and checks each expected Event.
/// Answers the hashes by sequence (index = sequence - 1).
async fn replay(
    client: &Client,
    world: &World,
    kill: usize,
    expected: &HashMap<u64, Vec<Expect>>,
    outcome: &mut Outcome,
) -> Vec<EventHash> {
    let mut hashes = Vec::new();
    let (mut sequence, mut head) = (0u64, EventHash::GENESIS);
    loop {
        let page = match client.events(&world.group, sequence, 10_000).await {
            Ok(page) => page,
            Err(e) => {
                outcome.lost(format!("after kill {kill}: replay after {sequence}: {e}"));
                return hashes;
            }
        };
        if page.is_empty() {
            break;
        }
        match verify_chain(sequence, head, &page) {
            Ok((next, hash)) => (sequence, head) = (next, hash),
            Err(e) => {
                outcome.lost(format!("after kill {kill}: the chain breaks: {e}"));
                return hashes;
            }
        }
        outcome.held();
        for delivered in &page {
            hashes.push(delivered.hash());
            if let Some(wanted) = expected.get(&delivered.sequence()) {
                for expect in wanted {
                    check_event(delivered, expect, kill, outcome);
                }
            }
        }
    }
    hashes
}

fn check_event(delivered: &Delivered, expect: &Expect, kill: usize, outcome: &mut Outcome) {
    let sequence = delivered.sequence();
    let Some(event) = delivered.event() else {
        return outcome.lost(format!("after kill {kill}: Event {sequence} is withheld"));
    };
    let payload = event.payload.get();
    let (held, what, acked) = match expect {
        Expect::Published(artifact, acked) => (
            event.kind == "artifact.published" && payload.contains(&artifact.to_string()),
            format!("the publication of {artifact}"),
            acked,
        ),
        Expect::Evidence(id, acked) => (
            event.kind == "evidence.recorded" && payload.contains(&id.to_string()),
            format!("Evidence {id}"),
            acked,
        ),
        Expect::Command(command_id, kind, acked) => (
            event.kind == *kind && event.causation_command_id.as_deref() == Some(command_id),
            format!("Command {command_id} ({kind})"),
            acked,
        ),
    };
    outcome.check(held, || {
        format!(
            "after kill {kill}: {what}, acknowledged in burst {acked}, is not Event {sequence} (found {})",
            event.kind
        )
    });
}

/// Indices to read: everything from `checked` on, plus up to `sample` earlier ones (or all).
fn pick(total: usize, checked: usize, sample: usize, full: bool, rng: &mut StdRng) -> Vec<usize> {
    if full {
        return (0..total).collect();
    }
    let mut picked: Vec<usize> = (0..sample.min(checked))
        .map(|_| rng.random_range(0..checked))
        .collect();
    picked.extend(checked..total);
    picked
}

/// How an oracle run reads back.
struct Reads<'a> {
    client: &'a Client,
    token: &'a str,
    kill: usize,
    sample: usize,
    full: bool,
}

async fn read_back(
    reads: &Reads<'_>,
    record: &Arc<Mutex<Record>>,
    rng: &mut StdRng,
    outcome: &mut Outcome,
) {
    let Reads {
        client,
        token,
        kill,
        sample,
        full,
    } = *reads;
    let (blobs, publications, evidence) = {
        let record = record.lock().unwrap_or_else(|e| e.into_inner());
        let blobs: Vec<Blob> = pick(record.blobs.len(), record.checked_blobs, sample, full, rng)
            .into_iter()
            .map(|i| record.blobs[i].clone())
            .collect();
        let publications: Vec<Publication> = pick(
            record.publications.len(),
            record.checked_publications,
            sample,
            full,
            rng,
        )
        .into_iter()
        .map(|i| record.publications[i].clone())
        .collect();
        let evidence: Vec<_> = pick(
            record.evidence.len(),
            record.checked_evidence,
            sample,
            full,
            rng,
        )
        .into_iter()
        .map(|i| record.evidence[i].clone())
        .collect();
        (blobs, publications, evidence)
    };
    let (n_blobs, n_publications, n_evidence, published) = {
        let record = record.lock().unwrap_or_else(|e| e.into_inner());
        let published: HashSet<ArtifactId> =
            record.publications.iter().map(|p| p.artifact).collect();
        (
            record.blobs.len(),
            record.publications.len(),
            record.evidence.len(),
            published,
        )
    };

    let http = reqwest::Client::new();
    let answers: Vec<Result<(), String>> = futures::stream::iter(blobs)
        .map(|blob| {
            let published = published.contains(&blob.digest);
            let http = &http;
            async move {
                let held = if published {
                    read_content(client, &blob).await
                } else {
                    head_blob(http, client.base(), token, &blob).await
                };
                held.map_err(|e| {
                    format!(
                        "{} ({:?}, {} B, {}, acknowledged in burst {}): {e}",
                        blob.digest,
                        blob.kind,
                        blob.size,
                        if published {
                            "published"
                        } else {
                            "never published"
                        },
                        blob.kill
                    )
                })
            }
        })
        .buffer_unordered(READERS)
        .collect()
        .await;
    tally(answers, kill, "blob", outcome);

    let answers: Vec<Result<(), String>> = futures::stream::iter(publications)
        .map(|publication| async move {
            match client.artifact(&Digest::Blake3(publication.artifact)).await {
                Ok(view)
                    if view
                        .manifests
                        .iter()
                        .any(|m| m.manifest_id == publication.manifest_id) =>
                {
                    Ok(())
                }
                Ok(_) => Err(format!(
                    "manifest {} of {} (burst {}) is not listed",
                    publication.manifest_id, publication.artifact, publication.kill
                )),
                Err(e) => Err(format!(
                    "artifact {} (burst {}): {e}",
                    publication.artifact, publication.kill
                )),
            }
        })
        .buffer_unordered(READERS)
        .collect()
        .await;
    tally(answers, kill, "manifest", outcome);

    let answers: Vec<Result<(), String>> = futures::stream::iter(evidence)
        .map(|evidence| async move {
            let path = format!("/v1/evidence/{}", evidence.evidence_id);
            match client.get_text(&path, &[]).await {
                Ok(text) if text.contains(&evidence.evidence_id.to_string()) => Ok(()),
                Ok(text) => Err(format!(
                    "{path} answered {}",
                    text.chars().take(200).collect::<String>()
                )),
                Err(e) => Err(format!(
                    "Evidence {} (burst {}): {e}",
                    evidence.evidence_id, evidence.kill
                )),
            }
        })
        .buffer_unordered(READERS)
        .collect()
        .await;
    tally(answers, kill, "Evidence", outcome);

    let mut record = record.lock().unwrap_or_else(|e| e.into_inner());
    record.checked_blobs = n_blobs;
    record.checked_publications = n_publications;
    record.checked_evidence = n_evidence;
}

/// A published blob: the content GET, verified by the server while it streams and re-hashed
/// here (`Client::download` fails on other bytes).
async fn read_content(client: &Client, blob: &Blob) -> Result<(), String> {
    let mut sink = tokio::io::sink();
    match client
        .download(&Digest::Blake3(blob.digest), &mut sink, |_, _| {})
        .await
    {
        Ok(digests) if digests.size == blob.size => Ok(()),
        Ok(digests) => Err(format!("read back {} bytes", digests.size)),
        Err(e) => Err(e.to_string()),
    }
}

/// A blob nothing published: only its uploader may know it, through `HEAD /v1/blobs/{d}`
/// (the content route serves published artifacts); fsck re-hashes its bytes.
async fn head_blob(
    http: &reqwest::Client,
    base: &str,
    token: &str,
    blob: &Blob,
) -> Result<(), String> {
    let response = http
        .head(format!("{base}/v1/blobs/{}", blob.digest))
        .bearer_auth(token)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let size = response
        .headers()
        .get(reqwest::header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok()?.parse::<u64>().ok());
    match (response.status().is_success(), size) {
        (true, Some(size)) if size == blob.size => Ok(()),
        (true, size) => Err(format!("HEAD answered size {size:?}")),
        (false, _) => Err(format!("HEAD answered {}", response.status())),
    }
}

fn tally(answers: Vec<Result<(), String>>, kill: usize, what: &str, outcome: &mut Outcome) {
    for answer in answers {
        match answer {
            Ok(()) => outcome.held(),
            Err(e) => outcome.lost(format!("after kill {kill}: {what} lost: {e}")),
        }
    }
}
