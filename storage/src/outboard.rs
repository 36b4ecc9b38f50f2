//! BLAKE3 outboards: the hash tree of a blob without its bytes, so a range is verified
//! against the blob's address by reading only the chunk groups that cover it and the parent
//! hashes on their path to the root (issue #15).
//!
//! Format: bao-tree's post-order outboard (64-byte hash pairs, no size suffix) with chunk
//! groups of 16 KiB ([`weft_api::bao::BLOCK_SIZE`]), about 4 KiB per MiB of blob. It is built
//! while the upload is hashed ([`Builder`], on the BLAKE3 hasher's thread: the chaining value
//! of each 16 KiB group, merged into the tree once the size is known), stored as its own object
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
use weft_api::bao::{GROUP_BYTES, tree};

const GROUP: usize = GROUP_BYTES as usize;

/// Builds the BLAKE3 root and the post-order outboard of a stream of unknown length.
/// Holds 32 bytes per 16 KiB group until [`Builder::finish`] (2 MiB per GiB).
#[derive(Debug, Default)]
pub(crate) struct Builder {
    groups: Vec<ChainingValue>,
    partial: Vec<u8>,
    size: u64,
}

fn group_cv(index: usize, bytes: &[u8]) -> ChainingValue {
    let mut hasher = blake3::Hasher::new();
    hasher.set_input_offset(index as u64 * GROUP_BYTES);
    hasher.update(bytes);
    hasher.finalize_non_root()
}

impl Builder {
    pub(crate) fn update(&mut self, mut data: &[u8]) {
        self.size += data.len() as u64;
        while !data.is_empty() {
            // A full group is hashed only once a byte follows it: the last group of a blob
            // of one group is the root, hashed differently.
            if self.partial.len() == GROUP {
                let cv = group_cv(self.groups.len(), &self.partial);
                self.groups.push(cv);
                self.partial.clear();
            }
            if self.partial.is_empty() && data.len() > GROUP {
                let cv = group_cv(self.groups.len(), &data[..GROUP]);
                self.groups.push(cv);
                data = &data[GROUP..];
                continue;
            }
            let take = (GROUP - self.partial.len()).min(data.len());
            self.partial.extend_from_slice(&data[..take]);
            data = &data[take..];
        }
    }

    /// The BLAKE3 digest and the outboard (empty for a blob of one group).
    pub(crate) fn finish(mut self) -> ([u8; 32], Vec<u8>) {
        if self.groups.is_empty() {
            return (*blake3::hash(&self.partial).as_bytes(), Vec::new());
        }
        let last = group_cv(self.groups.len(), &self.partial);
        self.groups.push(last);
        let tree = tree(self.size);
        let mut out = Vec::with_capacity(tree.outboard_size() as usize);
        let mut stack: Vec<ChainingValue> = Vec::with_capacity(64);
        let mut leaves = self.groups.into_iter();
        let mut root = [0u8; 32];
        for item in tree.post_order_chunks_iter() {
            match item {
                BaoChunk::Leaf { .. } => stack.push(leaves.next().unwrap_or_default()),
                BaoChunk::Parent { is_root, .. } => {
                    let right = stack.pop().unwrap_or_default();
                    let left = stack.pop().unwrap_or_default();
                    out.extend_from_slice(&left);
                    out.extend_from_slice(&right);
                    if is_root {
                        root = *merge_subtrees_root(&left, &right, Mode::Hash).as_bytes();
                    } else {
                        stack.push(merge_subtrees_non_root(&left, &right, Mode::Hash));
                    }
                }
            }
        }
        (root, out)
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
