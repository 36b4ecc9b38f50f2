//! Pushing each Group's transparency-log checkpoints to witnesses (issue #45,
//! c2sp.org/tlog-witness): every `--witness-interval-ms`, for each Group whose tree grew since
//! a witness last cosigned it, the server sends that witness `add-checkpoint` (the checkpoint
//! note and the consistency proof from the size the witness holds), checks the cosignature it
//! answers against the witness's key and keeps it (`store.delivery().tlog_record_cosignature`);
//! the checkpoint route then serves the tree a majority cosigned, never a smaller one than it
//! served before. Witnesses are kept on common sizes so a majority forms
//! (`weft_api::tlog::witness::served`): one behind the newest cosigned tree is sent that tree,
//! and one that holds it waits (a few rounds at most) for a majority to hold it before it is
//! sent the tree as it is now.
//!
//! A witness that answers 409 holds another size: the push is retried once from that size (a
//! witness that restarted, or another server of the same index that pushed first). A witness
//! that is down, slow or refuses is logged and tried again next round; nothing waits on it,
//! and a write is never held for a witness. Each witness has its own pusher (one slow witness
//! delays no other), one request per Group at a time, each bounded by a timeout and its
//! answer by 4 KiB; one Group's failure does not stop the round.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use weft_api::Id;
use weft_api::tlog::witness::AddCheckpoint;
use weft_api::tlog::witness::served::{self, Next};
use weft_storage::{Reader, Store};

use crate::config::Witness;

/// How long one `add-checkpoint` may take.
const TIMEOUT: Duration = Duration::from_secs(5);

/// The longest answer read from a witness (a few cosignature lines).
const MAX_ANSWER: usize = 4 * 1024;

/// Starts one pusher per witness (nothing without witnesses), so a witness that is down or
/// slow delays no other.
pub fn start(store: Store, witnesses: Vec<Witness>, every: Duration) {
    let http = match reqwest::Client::builder().timeout(TIMEOUT).build() {
        Ok(http) => http,
        Err(error) => {
            tracing::error!(%error, "no HTTP client for the witnesses: checkpoints are not witnessed");
            return;
        }
    };
    let names: Arc<[String]> = witnesses.iter().map(|w| w.key.name.clone()).collect();
    for witness in witnesses {
        let (store, http, names) = (store.clone(), http.clone(), Arc::clone(&names));
        tokio::spawn(async move {
            // The size this witness holds, and the rounds it waited for a majority, by Group.
            let mut held: HashMap<String, (u64, u32)> = HashMap::new();
            let mut ticks = tokio::time::interval(every);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                if let Err(error) = round(&store, &http, (&witness, &names), &mut held).await {
                    tracing::warn!(witness = %witness.url, %error, "a round of witness pushes failed; retried next round");
                }
            }
        });
    }
}

/// One round: every Group whose tree this witness has not cosigned as it is now, each sent
/// what `served::next` says. `names` are every configured witness's.
async fn round(
    store: &Store,
    http: &reqwest::Client,
    (witness, names): (&Witness, &[String]),
    held: &mut HashMap<String, (u64, u32)>,
) -> anyhow::Result<()> {
    for group in store.directory().group_ids().await? {
        let (old, waited) = held.get(&group).copied().unwrap_or((0, 0));
        let outcome = async {
            let group_id = Id::parse("groupId", &group)?;
            let current = store
                .delivery()
                .tlog_checkpoint(group_id.clone(), &Reader::Admin, &[])
                .await?;
            // It holds the tree as it is: nothing to send, whatever the others cosigned (no
            // cosigned size is past the tree), so their cosignatures are not read.
            if old >= current.head.size {
                return anyhow::Ok(None);
            }
            let cosigned = store
                .delivery()
                .tlog_cosigned(group_id.clone(), names)
                .await?;
            let size = match served::next(old, &cosigned, names.len(), current.head.size, waited) {
                Next::Idle => return anyhow::Ok(None),
                Next::Wait => return anyhow::Ok(Some((old, waited + 1))),
                Next::Push(size) => size,
            };
            let checkpoint = if size == current.head.size {
                current
            } else {
                store
                    .delivery()
                    .tlog_checkpoint_at(group_id.clone(), size)
                    .await?
            };
            push(store, http, (witness, names), &group_id, &checkpoint, old)
                .await
                .map(|size| Some((size, 0)))
        }
        .await;
        match outcome {
            Ok(Some(now)) => {
                held.insert(group, now);
            }
            Ok(None) => {}
            Err(error) => {
                tracing::warn!(witness = %witness.url, group, %error, "the witness did not cosign");
            }
        }
    }
    Ok(())
}

/// Sends `checkpoint` to `witness` from the size `old`; answers the size it now holds.
async fn push(
    store: &Store,
    http: &reqwest::Client,
    (witness, names): (&Witness, &[String]),
    group_id: &Id,
    checkpoint: &weft_storage::TlogCheckpoint,
    old: u64,
) -> anyhow::Result<u64> {
    let mut old = old;
    for _ in 0..2 {
        let proof = store
            .delivery()
            .tlog_consistency(
                group_id.clone(),
                old,
                Some(checkpoint.head.size),
                &Reader::Admin,
            )
            .await?;
        let hashes = proof.hash_bytes().map_err(|r| anyhow::anyhow!(r.message))?;
        let body = AddCheckpoint {
            old,
            proof: hashes,
            note: checkpoint.note.clone().into_bytes(),
        }
        .to_body();
        let response = http
            .post(format!("{}/add-checkpoint", witness.url))
            .body(body)
            .send()
            .await?;
        let status = response.status();
        let mut body = Vec::new();
        let mut response = response;
        while let Some(chunk) = response.chunk().await? {
            body.extend_from_slice(&chunk);
            anyhow::ensure!(
                body.len() <= MAX_ANSWER,
                "the witness's answer is over {MAX_ANSWER} bytes"
            );
        }
        let text = String::from_utf8_lossy(&body);
        if status == reqwest::StatusCode::CONFLICT {
            // The witness holds another size: from there, if it is not ahead of this tree.
            let size: u64 = text.trim().parse()?;
            anyhow::ensure!(
                size <= checkpoint.head.size,
                "the witness holds a tree of {size}, larger than this server's {}",
                checkpoint.head.size
            );
            old = size;
            continue;
        }
        anyhow::ensure!(status.is_success(), "{status}: {}", text.trim());
        let line = text
            .lines()
            .find(|line| line.starts_with(&format!("— {} ", witness.key.name)))
            .ok_or_else(|| {
                anyhow::anyhow!("no cosignature line of {} in the answer", witness.key.name)
            })?;
        store
            .delivery()
            .tlog_record_cosignature(
                group_id.clone(),
                &witness.key,
                (checkpoint.head.size, format!("{line}\n")),
                names,
            )
            .await?;
        return Ok(checkpoint.head.size);
    }
    anyhow::bail!("the witness kept answering 409")
}
