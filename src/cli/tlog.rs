//! `weft events verify`'s transparency-log check (issue #45): the Group's checkpoint, signed by
//! the Authority and cosigned by at least `--quorum` of the `--witness` keys, must commit to
//! exactly the log this client downloaded: the RFC 6962 root of the Events' canonical bytes,
//! recomputed here leaf by leaf (archived and online Events alike, O(log n) memory), equals the
//! checkpoint's root at its size. A Mission-scoped reader gets another Mission's Event as a
//! placeholder, so its leaf hash comes from the level-0 hash tile that holds it; the root still
//! binds it, and the witnesses saw that same root.
//!
//! With `--since-checkpoint FILE`, the transparency-log checkpoint this client verified last
//! is kept in `FILE.tlog`: the next run requires a consistency proof from that tree to the
//! one it just verified the log against (never a checkpoint fetched again, which a server
//! could answer differently), so a server that shows this client a shorter or forked history
//! is caught.

use anyhow::bail;
use ed25519_dalek::VerifyingKey;
use weft_api::Id;
use weft_api::client::Client;
use weft_api::event::Delivered;
use weft_api::tlog::witness::WitnessKey;
use weft_api::tlog::{self, Frontier, TreeHead};

/// The checkpoint being checked, and the root of the leaves fed so far.
pub(super) struct TreeCheck {
    head: TreeHead,
    frontier: Frontier,
    /// The level-0 hash tile last fetched for a placeholder (its index and bytes): leaves come
    /// in order, so one is enough.
    tile: Option<(u64, Vec<u8>)>,
    /// The witnesses that cosigned the checkpoint.
    pub(super) witnesses: Vec<String>,
    /// The checkpoint's note as served, cosignatures included.
    note: String,
}

/// A transparency-log checkpoint `weft events verify` checked the log against: its tree and
/// its note as served.
#[derive(Clone, Debug)]
pub(super) struct CheckedTree {
    pub(super) head: TreeHead,
    pub(super) note: String,
}

impl TreeCheck {
    /// The Group's checkpoint, refused unless one of `authority` signed it under the Group's
    /// origin and `quorum` of `witnesses` cosigned it.
    pub(super) async fn fetch(
        api: &Client,
        group: &Id,
        authority: &[VerifyingKey],
        witnesses: &[WitnessKey],
        quorum: usize,
    ) -> anyhow::Result<Self> {
        let note = api
            .get_text(&format!("/v1/groups/{group}/tlog/checkpoint"), &[])
            .await?;
        let mut refusal = None;
        for key in authority {
            match tlog::witness::open_witnessed(
                note.as_bytes(),
                key,
                &tlog::origin(key, group.as_str()),
                witnesses,
                quorum,
            ) {
                Ok((head, cosigned)) => {
                    return Ok(Self {
                        head,
                        frontier: Frontier::default(),
                        tile: None,
                        witnesses: cosigned,
                        note,
                    });
                }
                Err(rejection) => refusal = Some(rejection.message),
            }
        }
        bail!(
            "the transparency-log checkpoint is refused: {}",
            refusal.unwrap_or_else(|| "no authority key".into())
        )
    }

    /// Feeds one Event of the log, in order (those past the checkpoint's size are ignored).
    pub(super) async fn feed(
        &mut self,
        api: &Client,
        group: &Id,
        delivered: &Delivered,
    ) -> anyhow::Result<()> {
        if delivered.sequence() > self.head.size || delivered.sequence() <= self.frontier.size() {
            return Ok(());
        }
        if delivered.sequence() != self.frontier.size() + 1 {
            bail!(
                "the log skips from {} to {}",
                self.frontier.size(),
                delivered.sequence()
            );
        }
        let leaf = match delivered.event() {
            Some(event) => tlog::leaf_hash(&event.canonical_bytes()),
            None => {
                self.withheld_leaf(api, group, delivered.sequence() - 1)
                    .await?
            }
        };
        self.frontier.push(leaf);
        Ok(())
    }

    /// Leaf `index`'s hash from the level-0 tile that holds it, as wide as the checkpoint's tree.
    async fn withheld_leaf(
        &mut self,
        api: &Client,
        group: &Id,
        index: u64,
    ) -> anyhow::Result<[u8; 32]> {
        let tile = index / tlog::TILE_WIDTH;
        if self.tile.as_ref().is_none_or(|(at, _)| *at != tile) {
            let width = (self.head.size - tile * tlog::TILE_WIDTH).min(tlog::TILE_WIDTH);
            let path = tlog::hash_tile_path(0, tile, width);
            let mut bytes = Vec::new();
            api.download_path(&format!("/v1/groups/{group}/tlog/{path}"), &mut bytes)
                .await?;
            if bytes.len() as u64 != width * 32 {
                bail!("{path} is {} bytes, not {}", bytes.len(), width * 32);
            }
            self.tile = Some((tile, bytes));
        }
        let Some((_, bytes)) = &self.tile else {
            bail!("no tile");
        };
        let at = usize::try_from(index % tlog::TILE_WIDTH)? * 32;
        Ok(bytes[at..at + 32].try_into()?)
    }

    /// The checkpoint, once the leaves fed made exactly its tree, and its cosigners.
    pub(super) fn checked(self) -> anyhow::Result<(CheckedTree, Vec<String>)> {
        self.finish()?;
        Ok((
            CheckedTree {
                head: self.head,
                note: self.note,
            },
            self.witnesses,
        ))
    }

    /// Whether the leaves fed make exactly the checkpoint's tree.
    fn finish(&self) -> anyhow::Result<u64> {
        if self.frontier.size() < self.head.size {
            bail!(
                "the log ends at {} before the transparency-log checkpoint's tree of {}",
                self.frontier.size(),
                self.head.size
            );
        }
        if self.frontier.root() != self.head.root {
            bail!(
                "the Merkle tree of the log's first {} Events is not the one the transparency-log checkpoint signs",
                self.head.size
            );
        }
        Ok(self.head.size)
    }
}

/// `--since-checkpoint`'s tree: the checkpoint in `file` (the last one this client verified)
/// must be extended, consistently, by `now` (the one the log was just verified against), which
/// then replaces it. Answers `now`'s size.
pub(super) async fn since(
    api: &Client,
    group: &Id,
    authority: &[VerifyingKey],
    file: &std::path::Path,
    now: &CheckedTree,
) -> anyhow::Result<u64> {
    use anyhow::Context as _;
    let open = |note: &[u8]| {
        authority.iter().find_map(|key| {
            tlog::open_checkpoint(note, key, &tlog::origin(key, group.as_str())).ok()
        })
    };
    if let Ok(saved) = std::fs::read(file) {
        let Some(seen) = open(&saved) else {
            bail!(
                "{} is not a transparency-log checkpoint of {group} by the Authority",
                file.display()
            );
        };
        if now.head.size < seen.size {
            bail!(
                "the transparency log's tree of {} is smaller than the tree of {} seen before",
                now.head.size,
                seen.size
            );
        }
        let proof = api
            .get_text(
                &format!("/v1/groups/{group}/tlog/proof/consistency"),
                &[
                    ("from", seen.size.to_string()),
                    ("to", now.head.size.to_string()),
                ],
            )
            .await?;
        let proof: tlog::Proof = serde_json::from_str(&proof)?;
        if tlog::check_consistency(&proof, seen, now.head).is_err() {
            bail!(
                "the transparency log's tree of {} does not extend the tree of {} seen before: a forked history",
                now.head.size,
                seen.size
            );
        }
    }
    let partial = file.with_extension("tlog.partial");
    std::fs::write(&partial, now.note.as_bytes())
        .with_context(|| format!("writing {}", partial.display()))?;
    std::fs::rename(&partial, file).with_context(|| format!("writing {}", file.display()))?;
    Ok(now.head.size)
}
