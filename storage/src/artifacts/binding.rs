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

use crate::sql::Connection;
use weft_api::{ArtifactId, ErrorCode, Manifest};

pub(crate) use crate::access::lease::Stale;
use crate::access::lease::check_loaded_lease;
use crate::error::{Error, reject};
use crate::rows::inert_publications;

/// The `stale_lease` refusal a publication's caller sees.
pub(crate) fn refusal(stale: Stale) -> Error {
    match stale {
        Stale::Refused(why) => reject(ErrorCode::StaleLease, why),
        Stale::Fenced(why) => reject(
            ErrorCode::StaleLease,
            format!(
                "{why}; the manifest was kept as an inert audit record (OFL-2; at most \
                 {MAX_INERT_PER_PRODUCER} per producer and WorkItem) and completes nothing"
            ),
        ),
    }
}

/// Whether `manifest`, signed by `producer`, may publish at `now` (a `format_instant` text):
/// its lease exists, is of its WorkItem, held by `producer` under the manifest's ownership
/// epoch, and is the WorkItem's current Execution Lease (unreleased, unexpired, its owner and
/// epoch still the producer's). The WorkItem is known to exist (`require_work_item` ran).
pub(super) fn check(
    lease: Option<crate::rows::leases::Lease>,
    manifest: &Manifest,
    producer: &str,
    now: &str,
    ownership: (Option<&str>, u64),
) -> Result<Result<(), Stale>, Error> {
    check_loaded_lease(
        lease,
        manifest.work_item_id.as_str(),
        manifest.execution.lease_id.as_str(),
        manifest.execution.ownership_epoch,
        producer,
        now,
        ownership,
    )
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
