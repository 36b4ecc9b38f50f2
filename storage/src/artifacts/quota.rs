//! Each Group's quota at upload (issue #46): the rule is `weft_api::lifecycle::views::Quota`,
//! checked in the transaction that records the blob.
//!
//! Counting a Group's usage walks every blob it holds, so the check keeps a running upper
//! bound of it on the Group's row (`groups.usage_*_bound`) and counts exactly only when the
//! bound says the new bytes might not fit:
//! - a blob the Group counts already costs nothing (two indexed look-ups);
//! - otherwise the bound plus the new blob fits: admitted, the bound grows by it;
//! - otherwise the exact count decides, and becomes the bound.
//!
//! The bound stays an upper bound: what leaves a Group's usage (a disposal, a sweep) only makes
//! it loose, and the exact count tightens it at the quota's edge; what enters a Group's usage
//! outside an upload forgets it (`None`, counted again at the next upload): a publication
//! citing a blob the Group did not upload ([`forget_if_new`]), and bytes uploaded again after
//! a disposal, which count again for every Group citing them (`rows::groups::forget_usage_bounds`).
//! On PostgreSQL the check takes the Group's row lock, so two servers' uploads cannot both
//! fit into the last room. A refused upload costs the exact count.

use weft_api::{ArtifactId, Digests};

use crate::error::Error;
use crate::rows::groups;
use crate::sql::Connection;

/// Holds new bytes for Group `group_id` to its quota (`weft_api::lifecycle::views::Quota::admits`):
/// a blob it counts already costs nothing more.
pub(super) fn check(conn: &Connection, group_id: &str, digests: &Digests) -> Result<(), Error> {
    let Some(quota) = groups::quota(conn, group_id)?.filter(|q| q.limits()) else {
        return Ok(());
    };
    if groups::counts(conn, group_id, &digests.blake3)?
        && !crate::rows::blobs::is_disposed(conn, &digests.blake3)?
    {
        return Ok(());
    }
    groups::lock(conn, group_id)?;
    let size = digests.size;
    if let Some((artifacts, bytes)) = groups::usage_bound(conn, group_id)?
        && quota.admits(group_id, artifacts, bytes, size).is_ok()
    {
        return groups::set_usage_bound(conn, group_id, Some((artifacts + 1, bytes + size)));
    }
    let (artifacts, bytes) = groups::usage(conn, group_id)?;
    quota.admits(group_id, artifacts, bytes, size)?;
    groups::set_usage_bound(conn, group_id, Some((artifacts + 1, bytes + size)))
}

/// Before a manifest of Group `group_id` citing `blake3` is recorded: if the Group did not
/// count the blob, its usage grows outside an upload, and its bound is forgotten.
pub(super) fn forget_if_new(
    conn: &Connection,
    group_id: &str,
    blake3: &ArtifactId,
) -> Result<(), Error> {
    if groups::usage_bound(conn, group_id)?.is_some() && !groups::counts(conn, group_id, blake3)? {
        groups::set_usage_bound(conn, group_id, None)?;
    }
    Ok(())
}
