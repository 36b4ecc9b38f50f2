//! Verified ranges: the proof format a client asks for with
//! `Accept: application/vnd.weft.bao` (or `?proof=bao`) on `GET /v1/artifacts/{d}/content`.
//!
//! The body is bao-tree 0.17's range encoding (`encode_ranges_validated`) of the BLAKE3 tree
//! of the artifact with chunk groups of 16 KiB (`BlockSize::from_chunk_log(4)`), for the 1 KiB
//! chunks that cover the requested byte range: the parent hash pairs (64 bytes each, pre-order)
//! on the path from the root to those chunk groups, interleaved with the groups' bytes. A client
//! that knows only the digest (`blake3:…`, the tree's root) and the artifact's size (the total
//! of `Content-Range`) verifies it with [`verify_range`], which needs no I/O.

use std::ops::Range;

use bao_tree::io::BaoContentItem;
use bao_tree::io::sync::DecodeResponseIter;
use bao_tree::{BaoTree, BlockSize, ChunkNum, ChunkRanges};

use crate::digest::ArtifactId;

/// The media type of a proof response.
pub const MEDIA_TYPE: &str = "application/vnd.weft.bao";

/// The header of a proof answer naming the content range it proves and the content's size,
/// `bytes a-b/SIZE` (the proof is its own representation, so not `Content-Range`).
pub const PROOF_RANGE_HEADER: &str = "weft-proof-range";
/// log2 of the chunks (1 KiB each) per chunk group: 16 KiB groups.
pub const CHUNK_LOG: u8 = 4;
/// The chunk group the outboards and proofs use.
pub const BLOCK_SIZE: BlockSize = BlockSize::from_chunk_log(CHUNK_LOG);
/// Bytes per chunk group.
pub const GROUP_BYTES: u64 = 1024 << CHUNK_LOG;

/// The tree of an artifact of `size` bytes.
pub fn tree(size: u64) -> BaoTree {
    BaoTree::new(size, BLOCK_SIZE)
}

/// The 1 KiB chunks that cover `range` (a non-empty byte range).
pub fn chunk_ranges(range: &Range<u64>) -> ChunkRanges {
    let start = ChunkNum(range.start / 1024);
    let end = ChunkNum(range.end.div_ceil(1024));
    ChunkRanges::from(start..end)
}

/// Why a proof did not verify.
#[derive(Debug, thiserror::Error)]
pub enum ProofError {
    #[error("the proof does not verify against {0}: {1}")]
    Mismatch(ArtifactId, String),
    #[error("the proof does not cover the range {0:?}")]
    Incomplete(Range<u64>),
}

/// Verifies a proof of `range` of the artifact `root` (`size` bytes long) and returns exactly
/// the bytes of `range`. Any tampered hash or byte, a wrong size or a truncated proof fails.
pub fn verify_range(
    root: &ArtifactId,
    size: u64,
    range: Range<u64>,
    encoded: &[u8],
) -> Result<Vec<u8>, ProofError> {
    if range.start >= range.end || range.end > size {
        return Err(ProofError::Incomplete(range));
    }
    let ranges = chunk_ranges(&range);
    let hash = blake3::Hash::from_bytes(root.0);
    let mut out = vec![0u8; (range.end - range.start) as usize];
    let mut covered = 0u64;
    let mut reader = encoded;
    let items = DecodeResponseIter::new(hash, tree(size), &mut reader, &ranges);
    for item in items {
        let item = item.map_err(|error| ProofError::Mismatch(*root, error.to_string()))?;
        if let BaoContentItem::Leaf(leaf) = item {
            let leaf_range = leaf.offset..leaf.offset + leaf.data.len() as u64;
            let from = leaf_range.start.max(range.start);
            let to = leaf_range.end.min(range.end);
            if from < to {
                out[(from - range.start) as usize..(to - range.start) as usize].copy_from_slice(
                    &leaf.data
                        [(from - leaf_range.start) as usize..(to - leaf_range.start) as usize],
                );
                covered += to - from;
            }
        }
    }
    if covered != range.end - range.start {
        return Err(ProofError::Incomplete(range));
    }
    if !reader.is_empty() {
        return Err(ProofError::Mismatch(
            *root,
            "trailing bytes after the proof".into(),
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bao_tree::io::outboard::PreOrderMemOutboard;

    fn encode(data: &[u8], range: &Range<u64>) -> Vec<u8> {
        let outboard = PreOrderMemOutboard::create(data, BLOCK_SIZE);
        let mut encoded = Vec::new();
        bao_tree::io::sync::encode_ranges_validated(
            data,
            &outboard,
            &chunk_ranges(range),
            &mut encoded,
        )
        .expect("encoding");
        encoded
    }

    #[test]
    fn a_range_verifies_and_a_flipped_bit_anywhere_in_the_proof_does_not() {
        let data: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
        let root = ArtifactId(*blake3::hash(&data).as_bytes());
        for range in [0..1, 1000..70_000, 123_457..123_458, 299_000..300_000] {
            let encoded = encode(&data, &range);
            let bytes =
                verify_range(&root, data.len() as u64, range.clone(), &encoded).expect("verifies");
            assert_eq!(bytes, data[range.start as usize..range.end as usize]);
            for at in [0, encoded.len() / 2, encoded.len() - 1] {
                let mut tampered = encoded.clone();
                tampered[at] ^= 1;
                assert!(verify_range(&root, data.len() as u64, range.clone(), &tampered).is_err());
            }
            // A size that changes the tree's shape fails (one that does not is harmless: the
            // bytes served are still the ones under the root).
            let wrong_size = data.len() as u64 * 2;
            assert!(verify_range(&root, wrong_size, range.clone(), &encoded).is_err());
            assert!(
                verify_range(
                    &root,
                    data.len() as u64,
                    range.clone(),
                    &encoded[..encoded.len() - 1]
                )
                .is_err()
            );
        }
    }
}
