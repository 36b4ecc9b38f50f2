//! BLAKE3 outboards: the hash tree of a blob without its bytes, so a range is verified
//! against the blob's address by reading only the chunk groups that cover it and the parent
//! hashes on their path to the root (issue #15).
//!
//! Format: bao-tree's post-order outboard (64-byte hash pairs, no size suffix) with chunk
//! groups of 16 KiB ([`weft_api::bao::BLOCK_SIZE`]), about 4 KiB per MiB of blob. It is built
//! while the upload is hashed ([`Builder`], on the BLAKE3 hasher's thread: BLAKE3's chaining
//! value stack over 16 KiB groups, each merge one hash pair), stored as its own object
//! `outboards/<hex>` and only ever trusted through the root taken from the index: a wrong
//! outboard fails verification, it never makes wrong bytes pass.

use std::collections::HashMap;
use std::io;

use bao_tree::blake3::hazmat::{
    ChainingValue, HasherExt as _, Mode, merge_subtrees_non_root, merge_subtrees_root,
};
use bao_tree::io::sync::{Outboard, ReadAt};
use bao_tree::iter::BaoChunk;
use bao_tree::{BaoTree, TreeNode};
use weft_api::bao::GROUP_BYTES;

const GROUP: usize = GROUP_BYTES as usize;

/// Builds the BLAKE3 root and the post-order outboard of a stream of unknown length.
///
/// BLAKE3's own chaining-value stack over 16 KiB groups: a group is hashed once a byte
/// follows it, and each merge of two complete subtrees is a node of the final tree whose
/// place does not depend on the size (bao-tree's "stable" nodes, in post-order), so its pair
/// is appended at once; the right edge is merged at [`Builder::finish`]. State: at most 64
/// chaining values and one group, plus the outboard itself (64 bytes per group, 4 MiB per GiB).
#[derive(Debug, Default)]
pub(crate) struct Builder {
    stack: Vec<ChainingValue>,
    n_groups: u64,
    partial: Vec<u8>,
    out: Vec<u8>,
    /// Where the pairs go as they are made (an upload on the local backend), so the outboard
    /// never sits whole in memory; the first write error is kept for [`Builder::finish_spilled`].
    spill: Option<(io::BufWriter<std::fs::File>, Option<io::Error>)>,
    /// Write faults of the spill file (tests only).
    faults: crate::faults::Faults,
    /// The spill file is not fsynced at the end (its user syncs it if it keeps it).
    unsynced: bool,
}

/// A finished outboard: in memory, or in the file it was spilled to as it was built.
#[derive(Debug)]
pub(crate) enum Built {
    Memory(Vec<u8>),
    Spilled(std::path::PathBuf),
}

/// Pairs held in memory before they are written to the spill file.
const SPILL_AT: usize = 64 * 1024;

fn group_cv(index: u64, bytes: &[u8]) -> ChainingValue {
    let mut hasher = blake3::Hasher::new();
    hasher.set_input_offset(index * GROUP_BYTES);
    hasher.update(bytes);
    hasher.finalize_non_root()
}

impl Builder {
    /// A builder that writes the outboard to `file` as it goes (memory stays at one buffer).
    pub(crate) fn spilling(file: std::fs::File, faults: crate::faults::Faults) -> Self {
        Self {
            spill: Some((io::BufWriter::new(file), None)),
            faults,
            ..Self::default()
        }
    }

    /// A spilling builder whose file [`Builder::finish_spilled`] does not fsync: for a file
    /// that is usually thrown away (fsck's copy to compare), synced by its user if kept.
    pub(crate) fn unsynced(self) -> Self {
        Self {
            unsynced: true,
            ..self
        }
    }

    fn maybe_spill(&mut self, at_least: usize) {
        if let Some((writer, failed)) = &mut self.spill
            && self.out.len() >= at_least
        {
            if failed.is_none()
                && let Err(error) = self
                    .faults
                    .check(crate::faults::FaultSite::Outboard)
                    .and_then(|()| io::Write::write_all(writer, &self.out))
            {
                *failed = Some(error);
            }
            self.out.clear();
        }
    }

    /// [`Builder::finish`] of a spilling builder: the root, once every pair is written and the
    /// file fsynced unless [`Builder::unsynced`] (`None` for the outboard: it is in the file).
    pub(crate) fn finish_spilled(mut self) -> io::Result<([u8; 32], Option<Vec<u8>>)> {
        let spill = self.spill.take();
        let unsynced = self.unsynced;
        let faults = std::mem::take(&mut self.faults);
        let (root, out) = self.finish();
        match spill {
            None => Ok((root, Some(out))),
            Some((mut writer, failed)) => {
                if let Some(error) = failed {
                    return Err(error);
                }
                faults.check(crate::faults::FaultSite::Outboard)?;
                io::Write::write_all(&mut writer, &out)?;
                let file = writer
                    .into_inner()
                    .map_err(io::IntoInnerError::into_error)?;
                if !unsynced {
                    faults.check(crate::faults::FaultSite::Outboard)?;
                    file.sync_all()?;
                }
                Ok((root, None))
            }
        }
    }

    pub(crate) fn update(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            // A full group is hashed only once a byte follows it: the last group of a blob
            // of one group is the root, hashed differently.
            if self.partial.len() == GROUP {
                let cv = group_cv(self.n_groups, &self.partial);
                self.push(cv);
                self.partial.clear();
            }
            if self.partial.is_empty() && data.len() > GROUP {
                let cv = group_cv(self.n_groups, &data[..GROUP]);
                self.push(cv);
                data = &data[GROUP..];
                continue;
            }
            let take = (GROUP - self.partial.len()).min(data.len());
            self.partial.extend_from_slice(&data[..take]);
            data = &data[take..];
        }
    }

    /// Adds the chaining value of a group that more bytes follow, merging complete subtrees.
    fn push(&mut self, mut cv: ChainingValue) {
        self.n_groups += 1;
        let mut total = self.n_groups;
        while total & 1 == 0 {
            let Some(left) = self.stack.pop() else { break };
            self.out.extend_from_slice(&left);
            self.out.extend_from_slice(&cv);
            cv = merge_subtrees_non_root(&left, &cv, Mode::Hash);
            total >>= 1;
        }
        self.stack.push(cv);
        self.maybe_spill(SPILL_AT);
    }

    /// The BLAKE3 digest and the outboard (empty for a blob of one group).
    pub(crate) fn finish(mut self) -> ([u8; 32], Vec<u8>) {
        if self.n_groups == 0 {
            return (*blake3::hash(&self.partial).as_bytes(), Vec::new());
        }
        let mut cv = group_cv(self.n_groups, &self.partial);
        let mut root = [0u8; 32];
        while let Some(left) = self.stack.pop() {
            self.out.extend_from_slice(&left);
            self.out.extend_from_slice(&cv);
            if self.stack.is_empty() {
                root = *merge_subtrees_root(&left, &cv, Mode::Hash).as_bytes();
            } else {
                cv = merge_subtrees_non_root(&left, &cv, Mode::Hash);
            }
        }
        (root, self.out)
    }
}

/// The nodes whose hash pairs verifying `ranges` needs, with their byte offsets in the
/// outboard, and the byte span of the chunk groups that cover the ranges.
pub(crate) fn plan(
    tree: &BaoTree,
    ranges: &bao_tree::ChunkRanges,
) -> (Vec<(TreeNode, u64)>, std::ops::Range<u64>) {
    let mut nodes = Vec::new();
    let mut span: Option<std::ops::Range<u64>> = None;
    for item in tree.ranges_pre_order_chunks_iter_ref(ranges, 0) {
        match item {
            BaoChunk::Parent { node, .. } => {
                if let Some(offset) = tree.post_order_offset(node) {
                    nodes.push((node, offset.value() * 64));
                }
            }
            BaoChunk::Leaf {
                start_chunk, size, ..
            } => {
                let start = start_chunk.to_bytes();
                let end = start + size as u64;
                span = Some(match span {
                    None => start..end,
                    Some(span) => span.start.min(start)..span.end.max(end),
                });
            }
        }
    }
    (nodes, span.unwrap_or(0..0))
}

/// The few hash pairs of an outboard that one range needs, with the root from the index.
#[derive(Debug)]
pub(crate) struct Partial {
    pub(crate) root: blake3::Hash,
    pub(crate) tree: BaoTree,
    pub(crate) pairs: HashMap<TreeNode, (blake3::Hash, blake3::Hash)>,
}

impl Partial {
    pub(crate) fn insert(&mut self, node: TreeNode, pair: &[u8]) -> io::Result<()> {
        let bad = || io::Error::new(io::ErrorKind::UnexpectedEof, "short outboard");
        let left: [u8; 32] = pair
            .get(..32)
            .and_then(|s| s.try_into().ok())
            .ok_or_else(bad)?;
        let right: [u8; 32] = pair
            .get(32..64)
            .and_then(|s| s.try_into().ok())
            .ok_or_else(bad)?;
        self.pairs
            .insert(node, (blake3::Hash::from(left), blake3::Hash::from(right)));
        Ok(())
    }
}

impl Outboard for Partial {
    fn root(&self) -> blake3::Hash {
        self.root
    }
    fn tree(&self) -> BaoTree {
        self.tree
    }
    fn load(&self, node: TreeNode) -> io::Result<Option<(blake3::Hash, blake3::Hash)>> {
        match self.pairs.get(&node) {
            Some(pair) => Ok(Some(*pair)),
            // A node the plan did not fetch is an outboard stored by design (a range outside
            // the plan cannot happen): report it as missing, which fails the encoding.
            None => Err(io::Error::new(
                io::ErrorKind::NotFound,
                "hash pair not fetched",
            )),
        }
    }
}

/// Bytes of a blob starting at `base`: the chunk groups a range needs.
#[derive(Debug)]
pub(crate) struct Window {
    pub(crate) base: u64,
    pub(crate) bytes: bytes::Bytes,
}

impl ReadAt for Window {
    fn read_at(&self, pos: u64, buf: &mut [u8]) -> io::Result<usize> {
        let Some(from) = pos.checked_sub(self.base) else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "before the window",
            ));
        };
        let from = from as usize;
        if from >= self.bytes.len() {
            return Ok(0);
        }
        let n = buf.len().min(self.bytes.len() - from);
        buf[..n].copy_from_slice(&self.bytes[from..from + n]);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bao_tree::io::outboard::PostOrderMemOutboard;

    /// The streamed builder agrees with bao-tree's own outboard and with BLAKE3, at the group
    /// boundaries and fed in uneven pieces.
    #[test]
    fn agrees_with_bao_tree_and_blake3() {
        for size in [
            1,
            GROUP - 1,
            GROUP,
            GROUP + 1,
            2 * GROUP,
            5 * GROUP + 3,
            1 << 20,
            (1 << 20) + 1,
        ] {
            let data: Vec<u8> = (0..size).map(|i| (i * 13 % 251) as u8).collect();
            let mut builder = Builder::default();
            for piece in data.chunks(7919) {
                builder.update(piece);
            }
            let (root, outboard) = builder.finish();
            assert_eq!(root, *blake3::hash(&data).as_bytes(), "size {size}");
            let reference = PostOrderMemOutboard::create(&data, weft_api::bao::BLOCK_SIZE);
            assert_eq!(outboard, reference.data, "size {size}");
        }
    }
}
