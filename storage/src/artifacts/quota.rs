//! Each Group's quota at upload (issue #46): the rule is `weft_api::lifecycle::views::Quota`,
//! checked in the transaction that records the blob.
//!
//! Counting a Group's usage walks every blob it holds, so the check keeps a running upper
//! bound of it on the Group's row (`groups.usage_*_bound`) and counts exactly only when the
//! bound says the new bytes might not fit:
//! - a blob the Group counts already costs nothing (two indexed look-ups, [`needs`]);
//! - otherwise the bound plus the new blob fits: admitted, the bound grows by it ([`admit`]);
//! - otherwise the exact count decides, and becomes the bound.
//!
//! The bound stays an upper bound: what leaves a Group's usage (a disposal, a sweep) only makes
//! it loose, and the exact count tightens it at the quota's edge. What enters a Group's usage
//! outside an upload voids it: a publication citing stored bytes new to the Group forgets it
//! ([`forget_if_new`]), a quota set anew forgets it (`lifespan/usage.rs`), and bytes uploaded
//! again after a disposal, which count again for every Group citing them, move the
//! `usage_epoch` counter (`rows/usage_epoch.rs`) that a bound is valid in. The counter is read
//! before the exact count, so a repair committed between them voids the bound made from it.
//!
//! Locks (PostgreSQL): [`admit`] takes the Group's row lock, so two servers' uploads cannot
//! both fit into the last room; it runs after the upload's blob row (and any repair) is
//! written, as a publication takes its Group's lock after its bytes' row, so no two writers
//! take the blob row and a Group's row in opposite orders. A refused upload costs the exact
//! count.

use weft_api::lifecycle::views::Quota;
use weft_api::{ArtifactId, Digests, Id};

use crate::access::Reader;

use crate::error::Error;
use crate::rows::{groups, usage_epoch};
use crate::sql::Connection;

/// What an upload owes its Group's quota, read before its rows are written.
pub(super) struct Needs {
    group_id: Id,
    quota: Quota,
    /// The Group's rows cite the blob already (its bytes were disposed of and come back).
    cited: bool,
}

/// `None` for the operator's upload, or when the uploader's Group has no quota or counts the
/// blob already (new bytes cost nothing more); else what [`admit`] needs.
pub(super) fn needs(
    conn: &Connection,
    uploader: &Reader,
    digests: &Digests,
) -> Result<Option<Needs>, Error> {
    let Reader::Agent { group_id, .. } = uploader else {
        return Ok(None);
    };
    let Some(quota) = groups::quota(conn, group_id.as_str())?.filter(|q| q.limits()) else {
        return Ok(None);
    };
    let cited = groups::counts(conn, group_id.as_str(), &digests.blake3)?;
    if cited && !crate::rows::blobs::is_disposed(conn, &digests.blake3)? {
        return Ok(None);
    }
    let group_id = group_id.clone();
    Ok(Some(Needs {
        group_id,
        quota,
        cited,
    }))
}

/// Holds the upload's new bytes to its Group's quota
/// (`weft_api::lifecycle::views::Quota::admits`), after its blob row is written and before its
/// uploader row is.
pub(super) fn admit(
    conn: &crate::unit::Tx<'_>,
    digests: &Digests,
    needs: Needs,
) -> Result<(), Error> {
    let Needs {
        group_id,
        quota,
        cited,
    } = needs;
    let group_id = group_id.as_str();
    groups::lock(conn, group_id)?;
    let epoch = usage_epoch::current(conn)?;
    let size = digests.size;
    if let Some((artifacts, bytes, counted_in)) = groups::usage_bound(conn, group_id)?
        && counted_in == epoch
        && quota.admits(group_id, artifacts, bytes, size).is_ok()
    {
        let bound = (artifacts + 1, bytes + size, epoch);
        return groups::set_usage_bound(conn, group_id, Some(bound));
    }
    let (mut artifacts, mut bytes) = groups::usage(conn, group_id)?;
    // Cited bytes that came back in this transaction are in that count already: not twice.
    if cited && !crate::rows::blobs::is_disposed(conn, &digests.blake3)? {
        artifacts = artifacts.saturating_sub(1);
        bytes = bytes.saturating_sub(size);
    }
    quota.admits(group_id, artifacts, bytes, size)?;
    groups::set_usage_bound(conn, group_id, Some((artifacts + 1, bytes + size, epoch)))
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
