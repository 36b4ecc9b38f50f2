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
//! The bound stays an upper bound: what leaves a Group's usage (a disposal, a sweep) moves the
//! `usage_epoch` on, which voids it, and the exact count makes it anew. What enters a Group's usage
//! outside an upload voids it: a publication citing stored bytes new to the Group forgets it
//! ([`forget_if_new`]), a quota set anew forgets it (`lifespan/usage.rs`), and bytes uploaded
//! again after a disposal, which count again for every Group citing them, move the
//! `usage_epoch` counter (`rows/usage_epoch.rs`) that a bound is valid in. The counter is read
//! before the exact count, so a repair committed between them voids the bound made from it.
//!
//! At the quota's edge a refused upload would count again, each time, in the writer: a member
//! at its Group's quota could make every upload walk the Group's blobs. Within one
//! `usage_epoch` a Group's usage only grows, since whatever shrinks it (a disposal by
//! collection, the sweep of uncited blobs) moves the epoch on too; so an exact count is a
//! lower bound of the usage for the rest of its epoch, and the writer's connection keeps it
//! (`sql/lasting.rs`, [`at_least`]). An upload that does not fit beside it is refused without
//! counting. (Not kept: a count in a job that moved the epoch itself, whose move may roll back.)
//!
//! Locks (PostgreSQL): [`admit`] takes the Group's row lock, so two servers' uploads cannot
//! both fit into the last room; it runs after the upload's blob row (and any repair) is
//! written, as a publication takes its Group's lock after its bytes' row, so no two writers
//! take the blob row and a Group's row in opposite orders. A refused upload costs the exact
//! count once an epoch per writer connection.

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

/// The quota of `uploader`'s Group, sent ahead of its use in [`needs`] (`sql/ahead.rs`);
/// `None` for the operator's upload.
pub(super) type Settings = Option<crate::sql::Ahead<Option<Quota>, Error>>;

/// Sends the read of `uploader`'s Group's quota ahead: the upload's job sends it first, so it
/// travels with the job's next read (its caller's liveness check).
pub(super) fn settings_ahead(conn: &Connection, uploader: &Reader) -> Result<Settings, Error> {
    match uploader {
        Reader::Agent { group_id, .. } => Ok(Some(groups::quota_ahead(conn, group_id.as_str())?)),
        Reader::Admin => Ok(None),
    }
}

/// `None` for the operator's upload, or when the uploader's Group has no quota or counts the
/// blob already (new bytes cost nothing more); else what [`admit`] needs. `settings`: the
/// Group's quota as [`settings_ahead`] sent it.
pub(super) fn needs(
    conn: &Connection,
    uploader: &Reader,
    digests: &Digests,
    settings: Settings,
) -> Result<Option<Needs>, Error> {
    let (Reader::Agent { group_id, .. }, Some(settings)) = (uploader, settings) else {
        return Ok(None);
    };
    let Some(quota) = settings.get(conn)?.filter(|q| q.limits()) else {
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
    epoch_moved: bool,
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
    // At least what an earlier count of this epoch found: if the upload does not fit beside
    // that, it does not fit.
    if let Some((artifacts, bytes)) = at_least(conn, group_id, epoch) {
        quota.admits(group_id, artifacts, bytes, size)?;
    }
    let (mut artifacts, mut bytes) = groups::usage(conn, group_id)?;
    // Cited bytes that came back in this transaction are in that count already: not twice.
    if cited && !crate::rows::blobs::is_disposed(conn, &digests.blake3)? {
        artifacts = artifacts.saturating_sub(1);
        bytes = bytes.saturating_sub(size);
    }
    if !epoch_moved {
        conn.learn(
            AT_LEAST,
            &key(group_id, epoch),
            &format!("{artifacts} {bytes}"),
        );
    }
    quota.admits(group_id, artifacts, bytes, size)?;
    groups::set_usage_bound(conn, group_id, Some((artifacts + 1, bytes + size, epoch)))
}

/// What the writer's connection remembers of a Group's usage in an epoch (`sql/lasting.rs`):
/// `"{artifacts} {bytes}"`, at least.
const AT_LEAST: &str = "quota.usage_at_least";

fn key(group_id: &str, epoch: u64) -> String {
    format!("{epoch} {group_id}")
}

/// Group `group_id`'s usage is at least this, `(artifacts, bytes)`, as counted earlier in
/// `usage_epoch` `epoch`.
fn at_least(conn: &Connection, group_id: &str, epoch: u64) -> Option<(u64, u64)> {
    let known = conn.known(AT_LEAST, &key(group_id, epoch))?;
    let (artifacts, bytes) = known.split_once(' ')?;
    Some((artifacts.parse().ok()?, bytes.parse().ok()?))
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
