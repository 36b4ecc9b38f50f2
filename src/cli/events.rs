//! A Group's event log: `weft events tail` (pages, or live with `--follow`) and
//! `weft events verify`, which re-checks the whole hash chain, compacted archives included,
//! against the checkpoint and snapshot references the server's authority key signed.

use anyhow::bail;
use weft_api::Id;
use weft_api::client::Client;
use weft_api::event::Delivered;
use weft_api::tlog::witness::WitnessKey;

use super::args::{ClientArgs, EventsAction};

/// `weft events tail`, `weft events by` and `weft events verify`.
pub(super) async fn run(client: &ClientArgs, action: EventsAction) -> anyhow::Result<()> {
    let (_, api) = client.session()?;
    match action {
        EventsAction::Tail {
            group,
            after,
            follow,
        } => tail(&api, &group, after, follow).await,
        EventsAction::By {
            group,
            actor,
            limit,
        } => by(&api, &group, &actor, limit).await,
        EventsAction::Verify {
            group,
            authority_key,
            since_checkpoint,
            witnesses,
            quorum,
            json,
        } => {
            let witnesses = witnesses
                .iter()
                .map(|vkey| {
                    WitnessKey::parse(vkey).map_err(|e| anyhow::anyhow!("--witness: {}", e.message))
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            let quorum = quorum.unwrap_or(witnesses.len());
            anyhow::ensure!(
                quorum <= witnesses.len(),
                "--quorum {quorum} is more than the {} witnesses named",
                witnesses.len()
            );
            let policy = Policy { witnesses, quorum };
            // The checkpoint seen before, read first: the chain verified below also answers
            // its hash at that sequence, so nothing about it is fetched again afterwards.
            let saved = match &since_checkpoint {
                Some(file) => saved_checkpoint(file)?,
                None => None,
            };
            let watch = saved.as_ref().map(|saved| saved.checkpoint.sequence);
            let verified =
                verify(&api, &group, authority_key.as_deref(), Some(&policy), watch).await?;
            if !json {
                verified.say();
            }
            let since_ok = match &since_checkpoint {
                Some(file) => Some(since(&api, &group, &verified, saved, file, json).await?),
                None => None,
            };
            if json {
                let out = serde_json::json!({
                    "ok": true,
                    "groupId": group,
                    "events": verified.events,
                    "checkpoint": verified.checkpoint,
                    "treeSize": verified.tree,
                    "cosignedBy": verified.cosigned,
                    "notOlderThanSeen": since_ok,
                });
                println!("{out}");
            }
            Ok(())
        }
    }
}

/// What `verify` found: the chain's length from genesis, the signed checkpoint it matches,
/// and the transparency-log tree it matches (with the witnesses that cosigned it).
#[derive(Clone, Debug)]
pub(super) struct Verified {
    pub(super) events: u64,
    pub(super) checkpoint: u64,
    pub(super) tree: Option<u64>,
    pub(super) cosigned: Vec<String>,
    /// The Authority's keys the checkpoints were checked with.
    authority: Vec<ed25519_dalek::VerifyingKey>,
    /// The signed checkpoint the chain matches.
    signed: weft_api::views::SignedCheckpoint,
    /// The transparency-log checkpoint the log makes.
    checked_tree: Option<super::tlog::CheckedTree>,
    /// The verified chain's hash at the sequence `verify` was asked to watch.
    watched: Option<weft_api::EventHash>,
}

/// Which witnesses' cosignatures `verify` requires, and how many.
pub(super) struct Policy {
    pub(super) witnesses: Vec<WitnessKey>,
    pub(super) quorum: usize,
}

impl Verified {
    /// The line `weft events verify` prints.
    pub(super) fn say(&self) {
        let tree = match (self.tree, self.cosigned.is_empty()) {
            (Some(size), true) => {
                format!("; its first {size} make the transparency log's signed tree")
            }
            (Some(size), false) => format!(
                "; its first {size} make the transparency log's signed tree, cosigned by {}",
                self.cosigned.join(", ")
            ),
            (None, _) => String::new(),
        };
        println!(
            "ok: {} events chain from genesis; sequence {} matches the signed checkpoint{tree}",
            self.events, self.checkpoint
        );
    }
}

/// The checkpoint `weft events verify --since-checkpoint FILE` saved last, if `file` exists
/// (its signature is checked by [`since`], with the keys the log was verified with).
fn saved_checkpoint(
    file: &std::path::Path,
) -> anyhow::Result<Option<weft_api::views::SignedCheckpoint>> {
    use anyhow::Context as _;
    if !file.exists() {
        return Ok(None);
    }
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    let saved = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a signed checkpoint", file.display()))?;
    Ok(Some(saved))
}

/// `weft events verify --since-checkpoint FILE` (issue #40): the log must still hold the
/// checkpoint `saved` from `file`, the last one this client verified, at its sequence and
/// hash, so a server whose log lost its tail (and signs a head older than what it once signed)
/// is caught. Judged against what `verified` checked (its signed checkpoint, its chain, its
/// transparency-log tree), never against anything fetched again: a server could answer a
/// second request from another history. On success what was verified replaces the file.
async fn since(
    api: &Client,
    group: &str,
    verified: &Verified,
    saved: Option<weft_api::views::SignedCheckpoint>,
    file: &std::path::Path,
    quiet: bool,
) -> anyhow::Result<u64> {
    use anyhow::Context as _;
    let group_id = Id::parse("group", group)?;
    let authority = &verified.authority;
    let current = &verified.signed;
    if let Some(saved) = saved {
        if !authority.iter().any(|key| {
            saved
                .envelope
                .verify(weft_api::dsse::CHECKPOINT_TYPE, key)
                .is_ok_and(|payload| {
                    serde_json::from_slice::<weft_api::views::Checkpoint>(payload.value())
                        .ok()
                        .as_ref()
                        == Some(&saved.checkpoint)
                })
        }) {
            bail!(
                "{} is not signed by the server's authority key",
                file.display()
            );
        }
        let seen = &saved.checkpoint;
        if seen.group_id != group {
            bail!(
                "{} is a checkpoint of {}, not {group}",
                file.display(),
                seen.group_id
            );
        }
        if current.checkpoint.sequence < seen.sequence {
            bail!(
                "the log's head {} is older than the checkpoint {} seen before: its tail was cut",
                current.checkpoint.sequence,
                seen.sequence
            );
        }
        // Fail closed: only the verified chain's hash at the saved sequence passes.
        if seen.sequence > 0 && verified.watched != Some(seen.hash) {
            bail!(
                "the log at sequence {} is not the checkpoint seen before",
                seen.sequence
            );
        }
    }
    // The transparency log's tree too (issue #45): it may only have grown, consistently.
    let Some(tree) = &verified.checked_tree else {
        bail!("the log was verified without its transparency-log checkpoint");
    };
    let mut tree_file = file.as_os_str().to_owned();
    tree_file.push(".tlog");
    let tree = super::tlog::since(
        api,
        &group_id,
        authority,
        std::path::Path::new(&tree_file),
        tree,
    )
    .await?;
    // Replaced whole or not at all: a crash mid-write must not lose the checkpoint seen.
    let partial = file.with_extension("partial");
    std::fs::write(&partial, serde_json::to_vec_pretty(current)?)
        .with_context(|| format!("writing {}", partial.display()))?;
    std::fs::rename(&partial, file).with_context(|| format!("writing {}", file.display()))?;
    if !quiet {
        println!(
            "ok: the head {} is not older than the checkpoint seen before; the tree of {tree} extends the one seen before",
            current.checkpoint.sequence
        );
    }
    Ok(current.checkpoint.sequence)
}

/// `weft events tail`: Events as JSON lines after `after`, page by page until the end of the
/// log, or, with `follow`, from the live stream until the server closes it.
async fn tail(api: &Client, group: &str, after: u64, follow: bool) -> anyhow::Result<()> {
    use futures::StreamExt as _;
    let group = Id::parse("group", group)?;
    if !follow {
        let mut after = after;
        loop {
            let page = api.events(&group, after, 1000).await?;
            let Some(last) = page.last() else { break };
            after = last.sequence();
            for event in &page {
                println!("{}", serde_json::to_string(event)?);
            }
        }
        return Ok(());
    }
    let response = api.event_stream(&group, after).await?;
    let mut body = response.bytes_stream();
    let mut decoder = weft_api::subscription::SseDecoder::default();
    while let Some(chunk) = body.next().await {
        for frame in decoder.push(&chunk?) {
            println!("{}", frame.data);
        }
    }
    Ok(())
}

/// `weft events by`: the Agent's acts, page after page, newest first, as JSON lines.
async fn by(api: &Client, group: &str, actor: &str, limit: Option<u64>) -> anyhow::Result<()> {
    let group = Id::parse("group", group)?;
    let actor = Id::parse("actor", actor)?;
    let mut left = limit.unwrap_or(u64::MAX);
    let mut before = None;
    while left > 0 {
        let page = api
            .actor_events(&group, &actor, before, left.min(1000) as u32)
            .await?;
        for event in &page.events {
            println!("{}", serde_json::to_string(event)?);
        }
        left = left.saturating_sub(page.events.len() as u64);
        match page.before {
            Some(next) => before = Some(next),
            None => break,
        }
    }
    Ok(())
}

/// `weft events verify`: the checkpoint's signature, each compacted archive against its signed
/// snapshot reference, then the online chain from where the archives end; the chain must agree
/// with the checkpoint at its sequence. Answers the signed checkpoint's sequence (`weft
/// context verify` checks a compacted range with it), and the chain's hash at `watch`.
pub(super) async fn verify(
    api: &Client,
    group: &str,
    pinned: Option<&str>,
    policy: Option<&Policy>,
    watch: Option<u64>,
) -> anyhow::Result<Verified> {
    let group = Id::parse("group", group)?;
    // The checkpoint first: the chain read afterwards must reach at least its head.
    let authority = authority_keys(api, pinned).await?;
    let signed = trusted_checkpoint(api, &group, &authority).await?;
    // And the transparency log's (issue #45), whose tree the log read below must make.
    let mut tree = match policy {
        Some(policy) => Some(
            super::tlog::TreeCheck::fetch(
                api,
                &group,
                &authority,
                &policy.witnesses,
                policy.quorum,
            )
            .await?,
        ),
        None => None,
    };
    let (mut sequence, mut head) = (0u64, weft_api::EventHash::GENESIS);
    let mut watched = watch.map(|sequence| Watched {
        sequence,
        hash: None,
    });
    // Compacted history first: each archive, chained on from the previous one, must end
    // at the chain hash its authority-signed snapshot reference states.
    for snapshot in api.snapshots(&group).await?.snapshots {
        let signed_ok = authority.iter().any(|key| {
            snapshot
                .envelope
                .verify(weft_api::dsse::SNAPSHOT_TYPE, key)
                .is_ok_and(|payload| {
                    serde_json::from_slice::<weft_api::views::SnapshotReference>(payload.value())
                        .ok()
                        .as_ref()
                        == Some(&snapshot.reference)
                })
        });
        if !signed_ok {
            bail!(
                "snapshot {} is not signed by the server's authority key",
                snapshot.reference.sequence
            );
        }
        let mut archive = Vec::new();
        let digests = api
            .download_path(
                &format!("/v1/groups/{group}/snapshots/blobs/{}", snapshot.archive),
                &mut archive,
            )
            .await?;
        if digests.blake3 != snapshot.archive {
            bail!("archive {} does not hash to its name", snapshot.archive);
        }
        let events: Vec<weft_api::Event> = archive
            .split(|b| *b == b'\n')
            .filter(|line| !line.is_empty())
            .map(serde_json::from_slice)
            .collect::<Result<_, _>>()?;
        (sequence, head) = weft_api::event::verify_chain(sequence, head, &events)
            .map_err(|problem| anyhow::anyhow!("archive chain broken: {problem}"))?;
        if let Some(watched) = watched.as_mut() {
            watched.see(events.iter().map(|e| (e.sequence, e.hash)));
        }
        if let Some(tree) = tree.as_mut() {
            for event in events {
                tree.feed(api, &group, &Delivered::from(event)).await?;
            }
        }
        if (sequence, head)
            != (
                snapshot.reference.sequence,
                snapshot.reference.event_chain_hash,
            )
        {
            bail!(
                "archive of snapshot {} does not end at its signed chain hash",
                snapshot.reference.sequence
            );
        }
    }
    let at = (signed.checkpoint.sequence == sequence).then_some(head);
    let hash_at_checkpoint;
    (sequence, _, hash_at_checkpoint) = chain_onwards(
        api,
        &group,
        (sequence, head),
        (&signed.checkpoint, false),
        at,
        "chain broken",
        (tree.as_mut(), watched.as_mut()),
    )
    .await?;
    let (checked_tree, cosigned) = match tree {
        Some(tree) => {
            let (checked, cosigned) = tree.checked()?;
            (Some(checked), cosigned)
        }
        None => (None, Vec::new()),
    };
    match hash_at_checkpoint {
        Some(hash) if hash == signed.checkpoint.hash => Ok(Verified {
            events: sequence,
            checkpoint: signed.checkpoint.sequence,
            tree: checked_tree.as_ref().map(|tree| tree.head.size),
            cosigned,
            authority,
            signed,
            checked_tree,
            watched: watched.and_then(|watched| watched.hash),
        }),
        Some(_) => bail!(
            "the chain disagrees with the signed checkpoint at sequence {}",
            signed.checkpoint.sequence
        ),
        None => bail!(
            "the log ends before the signed checkpoint ({})",
            signed.checkpoint.sequence
        ),
    }
}

/// The keys `verify` trusts: with a pinned key (issue #10 finding 9d) that key alone, and the
/// server must still serve it (a server whose key changed is refused, not believed);
/// without, the keys the server serves.
pub(super) async fn authority_keys(
    api: &Client,
    pinned: Option<&str>,
) -> anyhow::Result<Vec<ed25519_dalek::VerifyingKey>> {
    let served = api.authority_keys().await?;
    let served: Vec<(String, ed25519_dalek::VerifyingKey)> = served
        .keys
        .iter()
        .filter_map(|key| {
            let parsed = weft_api::dsse::parse_public_key(&key.public_key).ok()?;
            Some((weft_api::KeyId::of(&parsed).to_string(), parsed))
        })
        .collect();
    let Some(pinned) = pinned else {
        return Ok(served.into_iter().map(|(_, key)| key).collect());
    };
    let pinned = pinned.trim();
    let wanted = if pinned.starts_with("ed25519:") {
        pinned.to_owned()
    } else {
        let key = weft_api::dsse::parse_public_key(pinned).map_err(|error| {
            anyhow::anyhow!("--authority-key is neither a keyid nor a base64 key: {error}")
        })?;
        weft_api::KeyId::of(&key).to_string()
    };
    match served.into_iter().find(|(keyid, _)| *keyid == wanted) {
        Some((_, key)) => Ok(vec![key]),
        None => {
            bail!("the server's authority key is not the pinned key {wanted}: refusing to trust it")
        }
    }
}

/// The Group's head checkpoint, refused unless signed by one of the `authority` keys.
pub(super) async fn trusted_checkpoint(
    api: &Client,
    group: &Id,
    authority: &[ed25519_dalek::VerifyingKey],
) -> anyhow::Result<weft_api::views::SignedCheckpoint> {
    let signed = api.checkpoint(group).await?;
    let trusted = authority.iter().any(|key| {
        signed
            .envelope
            .verify(weft_api::dsse::CHECKPOINT_TYPE, key)
            .is_ok_and(|payload| {
                serde_json::from_slice::<weft_api::views::Checkpoint>(payload.value())
                    .ok()
                    .as_ref()
                    == Some(&signed.checkpoint)
            })
    });
    if !trusted {
        bail!("the checkpoint is not signed by the server's authority key");
    }
    Ok(signed)
}

/// A sequence whose hash a chain check notes as it passes.
pub(super) struct Watched {
    sequence: u64,
    hash: Option<weft_api::EventHash>,
}

impl Watched {
    /// Notes the hash at the watched sequence among `events` (sequence, hash), if there.
    fn see(&mut self, events: impl IntoIterator<Item = (u64, weft_api::EventHash)>) {
        if let Some((_, hash)) = events.into_iter().find(|(at, _)| *at == self.sequence) {
            self.hash = Some(hash);
        }
    }
}

/// Reads and chain-checks the log after `from` (sequence, hash) page by page, to its end or
/// (with `stop_at_checkpoint`) until it reaches the checkpoint's sequence; answers the last
/// sequence and hash, and the hash at the checkpoint's sequence (`at` if already seen). With
/// `tree`, each Event also feeds the transparency-log check; with `watched`, the hash at its
/// sequence is noted.
pub(super) async fn chain_onwards(
    api: &Client,
    group: &Id,
    from: (u64, weft_api::EventHash),
    (checkpoint, stop_at_checkpoint): (&weft_api::views::Checkpoint, bool),
    mut at: Option<weft_api::EventHash>,
    broken: &str,
    (mut tree, mut watched): (Option<&mut super::tlog::TreeCheck>, Option<&mut Watched>),
) -> anyhow::Result<(u64, weft_api::EventHash, Option<weft_api::EventHash>)> {
    let (mut sequence, mut head) = from;
    while !stop_at_checkpoint || sequence < checkpoint.sequence {
        let page = api.events(group, sequence, 1000).await?;
        if page.is_empty() {
            break;
        }
        (sequence, head) = weft_api::event::verify_chain(sequence, head, &page)
            .map_err(|problem| anyhow::anyhow!("{broken}: {problem}"))?;
        if let Some(tree) = tree.as_deref_mut() {
            for delivered in &page {
                tree.feed(api, group, delivered).await?;
            }
        }
        if let Some(event) = page.iter().find(|e| e.sequence() == checkpoint.sequence) {
            at = Some(event.hash());
        }
        if let Some(watched) = watched.as_deref_mut() {
            watched.see(page.iter().map(|e| (e.sequence(), e.hash())));
        }
    }
    Ok((sequence, head, at))
}
