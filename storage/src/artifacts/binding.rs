//! Lease-bound publication (issue #12, LSE-4/5, OFL-1/2): a manifest's `execution` must name
//! the current Execution Lease of its WorkItem, held by its producer under its ownership
//! epoch, whoever sends it (the producer's session, a capability token, or the operator
//! with an Agent-signed manifest).
//!
//! [`check`] runs last inside the publication's writer transaction, so the earlier refusals
//! keep their codes. A refusal appends nothing. One refusal leaves a trace: a manifest of a
//! fenced owner (OFL-2: its lease was of an ownership epoch older than the WorkItem's, so
//! the WorkItem was reassigned) is kept by [`keep_inert`] in `inert_publications`, in a
//! transaction of its own after the refused one, and is never a manifest: not in lineage,
//! listings or criteria, and no Event (the bad-input list: "nothing appended").
//!
//! This module does not decide when leases end: `work::expiry` does, and a lease is live
//! here exactly when it is unreleased and its `expires_at` is after now, as there.

use rusqlite::Connection;
use weft_api::{ArtifactId, ErrorCode, Manifest};

use crate::clock::format_instant;
use crate::error::{Error, reject};
use crate::rows::inert_publications;
use crate::rows::leases::{self, Claim, Ownership, Refusal};

/// Why a manifest's lease does not let it publish.
pub(crate) enum Stale {
    /// Refused, nothing kept.
    Refused(String),
    /// Refused, and its producer is a fenced owner of the WorkItem: kept as inert (OFL-2).
    Fenced(String),
}

impl Stale {
    /// The `stale_lease` refusal of a record that is never kept inert (Evidence).
    pub(crate) fn into_error_for(self, what: &str) -> Error {
        match self {
            Self::Refused(why) | Self::Fenced(why) => {
                reject(ErrorCode::StaleLease, format!("{what}: {why}"))
            }
        }
    }

    /// The `stale_lease` refusal the caller sees.
    pub(crate) fn into_error(self) -> Error {
        match self {
            Self::Refused(why) => reject(ErrorCode::StaleLease, why),
            Self::Fenced(why) => reject(
                ErrorCode::StaleLease,
                format!(
                    "{why}; the manifest was kept as an inert audit record (OFL-2; at most \
                     {MAX_INERT_PER_PRODUCER} per producer and WorkItem) and completes nothing"
                ),
            ),
        }
    }
}

/// Whether `manifest`, signed by `producer`, may publish at `now` (a `format_instant` text):
/// its lease exists, is of its WorkItem, held by `producer` under the manifest's ownership
/// epoch, and is the WorkItem's current Execution Lease (unreleased, unexpired, its owner and
/// epoch still the producer's). The WorkItem is known to exist (`require_work_item` ran).
pub(super) fn check(
    conn: &Connection,
    manifest: &Manifest,
    producer: &str,
    now: &str,
) -> Result<Result<(), Stale>, Error> {
    check_lease(
        conn,
        manifest.work_item_id.as_str(),
        manifest.execution.lease_id.as_str(),
        manifest.execution.ownership_epoch,
        producer,
        now,
    )
}

/// The rule of [`check`] for any signed record naming `lease_id` under `epoch` for
/// `work_item_id` (a manifest, or an owner's Evidence, DESIGN §5.1): `leases::Lease::admits`,
/// its refusals in words.
pub(crate) fn check_lease(
    conn: &Connection,
    work_item_id: &str,
    lease_id: &str,
    epoch: u64,
    producer: &str,
    now: &str,
) -> Result<Result<(), Stale>, Error> {
    let refused = |why: String| Ok(Err(Stale::Refused(why)));
    let Some(lease) = leases::load(conn, lease_id)? else {
        return refused(format!("no lease {lease_id} (LSE-4)"));
    };
    // The WorkItem exists: the caller checked it in this transaction.
    let (owner, current_epoch) = crate::rows::work_items::ownership(conn, work_item_id)?
        .ok_or(rusqlite::Error::QueryReturnedNoRows)?;
    let claim = Claim {
        lease_id,
        work_item_id,
        signer: Some((producer, epoch)),
        acts_for: Some(Ownership {
            owner: owner.as_deref(),
            ownership_epoch: current_epoch,
        }),
    };
    let refusal = match lease.admits(&claim, crate::rows::instant(now)?) {
        Ok(()) => return Ok(Ok(())),
        Err(refusal) => refusal,
    };
    match refusal {
        Refusal::OtherLease => refused(format!("no lease {lease_id} (LSE-4)")),
        Refusal::OtherWorkItem => refused(format!(
            "lease {lease_id} is of WorkItem {}, not {work_item_id}",
            lease.work_item_id
        )),
        Refusal::OtherHolder => refused(format!(
            "lease {lease_id} is held by {}, not {producer}",
            lease.agent_id
        )),
        Refusal::OtherEpoch => refused(format!(
            "lease {lease_id} is of ownership epoch {}, not {epoch}",
            lease.ownership_epoch
        )),
        Refusal::Fenced => Ok(Err(Stale::Fenced(format!(
            "{producer} was fenced: lease {lease_id} is of ownership epoch {epoch}, \
             WorkItem {work_item_id} is at {current_epoch} (OFL-1)"
        )))),
        Refusal::NotExecution => refused(format!(
            "lease {lease_id} is a {} lease; publish under an Execution Lease",
            lease.kind.as_str()
        )),
        Refusal::Ended => refused(format!(
            "lease {lease_id} ended (released or revoked) and is not the current lease of \
             {work_item_id} (LSE-5)"
        )),
        Refusal::Expired => refused(format!(
            "lease {lease_id} expired at {}",
            format_instant(lease.expires_at)
        )),
        Refusal::NotOwned => refused(format!(
            "{producer} no longer owns {work_item_id} under ownership epoch {epoch}"
        )),
    }
}

/// An inert audit record (OFL-2) of a fenced owner's manifest.
pub(super) struct Inert {
    pub(super) manifest_id: ArtifactId,
    pub(super) manifest: Manifest,
    pub(super) producer: String,
    pub(super) envelope_json: String,
    pub(super) received_at: String,
    pub(super) reason: String,
}

/// Inert records kept per (WorkItem, producer): enough to audit what a fenced owner sent
/// after it lost the work, not a store it can fill (issue #40: 5,000 refused manifests grew
/// the WorkItem view to 1.1 MB). Past it a refused manifest is not kept; the refusal stands.
pub(crate) const MAX_INERT_PER_PRODUCER: u64 = 64;

/// Keeps `inert` unless its manifest is kept already (the same bytes again add nothing) or
/// was published (it cannot have been: a fenced epoch never becomes current again), or its
/// producer has [`MAX_INERT_PER_PRODUCER`] kept for the WorkItem already.
pub(super) fn keep_inert(conn: &Connection, inert: &Inert) -> Result<(), Error> {
    let manifest = &inert.manifest;
    let kept = inert_publications::count_by(conn, manifest.work_item_id.as_str(), &inert.producer)?;
    if kept >= MAX_INERT_PER_PRODUCER {
        tracing::debug!(producer = %inert.producer, work_item = %manifest.work_item_id, "inert record cap reached; not kept");
        return Ok(());
    }
    inert_publications::insert(
        conn,
        &inert_publications::NewInert {
            manifest_id: &inert.manifest_id,
            manifest,
            producer: &inert.producer,
            envelope_json: &inert.envelope_json,
            received_at: &inert.received_at,
            reason: &inert.reason,
        },
    )?;
    Ok(())
}
