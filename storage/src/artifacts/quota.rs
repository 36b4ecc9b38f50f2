//! Each Group's quota at upload (issue #46): the rule is `weft_api::lifecycle::views::Quota`,
//! the usage `rows::blobs::usage_of_group`, read in the transaction that records the blob.

use weft_api::Digests;

use crate::error::Error;
use crate::sql::Connection;

/// Holds new bytes for Group `group_id` to its quota (`weft_api::lifecycle::views::Quota::admits`):
/// a blob it counts already costs nothing more.
pub(super) fn check(conn: &Connection, group_id: &str, digests: &Digests) -> Result<(), Error> {
    let Some(quota) = crate::rows::groups::quota(conn, group_id)?.filter(|q| q.limits()) else {
        return Ok(());
    };
    if crate::rows::groups::counts(conn, group_id, &digests.blake3)?
        && !crate::rows::blobs::is_disposed(conn, &digests.blake3)?
    {
        return Ok(());
    }
    let (artifacts, bytes) = crate::rows::groups::usage(conn, group_id)?;
    Ok(quota.admits(group_id, artifacts, bytes, digests.size)?)
}
