//! Artifacts: upload (streamed, dual-hashed, promoted only when verified, within quotas),
//! publication of signed manifests, verified reads with quarantine, and the sweep of uploads
//! nothing cites. This file holds the blob row helper
//! the three share; each step has its own file.

use crate::sql::Cached as _;
use rusqlite::{Connection, OptionalExtension as _};
use weft_api::{ArtifactId, Digest, Digests, Sha256Digest};

use crate::error::Error;
use crate::events::to32;

pub(crate) mod binding;
pub(crate) mod handle;
pub(crate) use binding::check_lease;
mod hot;
pub use hot::HotStats;
pub(crate) use hot::{FastSet, Hot, HotBlob};
mod proofs;
mod publish;
mod ranges;
mod rebuild;
pub(crate) use rebuild::Rebuilds;
mod reads;
mod repairs;
pub(crate) use repairs::{Repairs, Seen};
mod resumable;
mod reuse;
pub(crate) use reuse::reuse_record;
mod sweep;
mod upload;
mod verification;
mod visible;
mod with_content;

pub use reads::{Content, ListFilter};
pub(crate) use reads::{admit_download, inline_bytes};
pub(crate) use resumable::{Claims, remove_orphan_uploads};
pub use sweep::SweepReport;
pub(crate) use upload::Counters;
pub use upload::{UploadCounters, UploadOutcome, Uploader};
pub use verification::Verification;

/// A blob row: digests and whether it is quarantined.
pub(crate) fn blob_row(
    conn: &Connection,
    digest: &Digest,
) -> Result<Option<(Digests, bool)>, Error> {
    let (sql, key) = match digest {
        Digest::Blake3(id) => (
            "SELECT blake3, sha256, size, quarantined_at FROM blobs WHERE blake3 = ?1",
            id.0,
        ),
        Digest::Sha256(sha) => (
            "SELECT blake3, sha256, size, quarantined_at FROM blobs WHERE sha256 = ?1",
            sha.0,
        ),
    };
    conn.row(sql, [&key[..]], |row| {
        Ok((
            row.get::<_, Vec<u8>>(0)?,
            row.get::<_, Vec<u8>>(1)?,
            row.get::<_, u64>(2)?,
            row.get::<_, Option<String>>(3)?,
        ))
    })
    .optional()?
    .map(|(blake3, sha256, size, quarantined)| {
        Ok((digests_of(blake3, sha256, size)?, quarantined.is_some()))
    })
    .transpose()
}

/// A blob row (digests, quarantined) with its inline bytes: `None` for a file blob, or a
/// quarantined one.
pub(crate) type BlobWithInline = (Digests, bool, Option<Vec<u8>>);

/// A blob row with its inline bytes in one statement, so from one read transaction and one
/// snapshot: the whole read of a small GET whose visibility was decided from memory.
pub(crate) fn blob_with_inline(
    conn: &Connection,
    id: &ArtifactId,
) -> Result<Option<BlobWithInline>, Error> {
    conn.row(
        "SELECT b.blake3, b.sha256, b.size, b.quarantined_at, i.bytes FROM blobs b
         LEFT JOIN inline_bytes i ON i.id = b.inline_id AND b.quarantined_at IS NULL
         WHERE b.blake3 = ?1",
        [&id.0[..]],
        |row| {
            Ok((
                row.get::<_, Vec<u8>>(0)?,
                row.get::<_, Vec<u8>>(1)?,
                row.get::<_, u64>(2)?,
                row.get::<_, Option<String>>(3)?,
                row.get::<_, Option<Vec<u8>>>(4)?,
            ))
        },
    )
    .optional()?
    .map(|(blake3, sha256, size, quarantined, inline)| {
        Ok((
            digests_of(blake3, sha256, size)?,
            quarantined.is_some(),
            inline,
        ))
    })
    .transpose()
}

fn digests_of(blake3: Vec<u8>, sha256: Vec<u8>, size: u64) -> Result<Digests, Error> {
    Ok(Digests {
        blake3: ArtifactId(to32(blake3)?),
        sha256: Sha256Digest(to32(sha256)?),
        size,
    })
}
