//! Whether a signed record may claim a lease (LSE-4/5, OFL-1/2): a manifest's or an owner
//! Evidence's `execution` names a lease of its WorkItem, held by its signer under an ownership
//! epoch. The rule is `rows::leases::Lease::admits`; this file says its refusals in words, the
//! same for every feature that binds a record to a lease (`artifacts/binding.rs` for
//! manifests, `evidence/` for owner Evidence), so neither reaches into the other.

use crate::sql::Connection;
use weft_api::ErrorCode;

use crate::clock::format_instant;
use crate::error::{Error, reject};
use crate::rows::leases::{self, Claim, Ownership, Refusal};

/// Why a record's lease does not let it stand.
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
}

/// The rule for any signed record naming `lease_id` under `epoch` for
/// `work_item_id` (a manifest, or an owner's Evidence, DESIGN §5.1): `leases::Lease::admits`,
/// its refusals in words. `ownership`: the WorkItem's owner and ownership epoch, read in this
/// transaction (`access::require_work_item`).
pub(crate) fn check_lease(
    conn: &Connection,
    work_item_id: &str,
    lease_id: &str,
    epoch: u64,
    producer: &str,
    now: &str,
    ownership: (Option<&str>, u64),
) -> Result<Result<(), Stale>, Error> {
    let lease = leases::load(conn, lease_id)?;
    check_loaded_lease(
        lease,
        work_item_id,
        lease_id,
        epoch,
        producer,
        now,
        ownership,
    )
}

/// [`check_lease`] given the lease named, loaded already (`leases::load`, `None`: there is
/// none of that id).
pub(crate) fn check_loaded_lease(
    lease: Option<leases::Lease>,
    work_item_id: &str,
    lease_id: &str,
    epoch: u64,
    producer: &str,
    now: &str,
    ownership: (Option<&str>, u64),
) -> Result<Result<(), Stale>, Error> {
    let refused = |why: String| Ok(Err(Stale::Refused(why)));
    let Some(lease) = lease else {
        return refused(format!("no lease {lease_id} (LSE-4)"));
    };
    let (owner, current_epoch) = ownership;
    let claim = Claim {
        lease_id,
        work_item_id,
        signer: Some((producer, epoch)),
        acts_for: Some(Ownership {
            owner,
            ownership_epoch: current_epoch,
        }),
    };
    let refusal = match lease.admits(&claim, crate::rows::instant(now)?) {
        Ok(()) => return Ok(Ok(())),
        Err(refusal) => refusal,
    };
    match refusal {
        Refusal::OtherLease => refused(format!("no lease {lease_id} (LSE-4)")),
        // Not naming the lease's WorkItem: it may be another Group's.
        Refusal::OtherWorkItem => refused(format!(
            "lease {lease_id} is not of WorkItem {work_item_id} (LSE-4)"
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
