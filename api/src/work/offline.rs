//! Bounded offline execution (OFL-3…OFL-11, DESIGN §12): the critical binding a Worker puts
//! on every Command it buffers while the Authority is unreachable, and the pure judgement of a
//! binding against the lease record it names. Storage reads the record inside the Command's
//! writer transaction and asks [`judge`]; the client's offline journal builds [`Binding`]s.
//!
//! Which Commands may be buffered: `work.progress` and `work.checkpoint` only. OFL-3 lets a
//! cut-off Worker "buffer signed progress and checkpoints"; OFL-5 makes it reconcile before it
//! submits or causes any further side effect, so a buffered `work.submit` (or anything else)
//! is refused `invalid_command`.
//!
//! A Command says it is buffered by carrying the binding (the extension below, under its
//! URN). It must be marked critical (OFL-6): a non-critical one is `invalid_command`, since an
//! Authority that ignored it would apply the Command against the wrong lease.

use chrono::{DateTime, FixedOffset};
use serde::{Deserialize, Serialize};

use super::contract::Budgets;
use crate::error::ErrorCode;
use crate::id::Id;

/// The URN of the binding extension (OFL-6).
pub const OFFLINE_EXTENSION: &str = "urn:missionweaveprotocol:extension:bounded-offline-execution";

/// The binding's value (OFL-7, DESIGN §12): kept unchanged when the Worker rebases the
/// Command onto its new session (OFL-8).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Binding {
    pub agent_id: Id,
    pub group_id: Id,
    pub work_item_id: Id,
    /// The session the historical lease was granted under.
    pub session_epoch: u64,
    pub ownership_epoch: u64,
    /// The historical Execution Lease.
    pub lease_id: Id,
    pub disconnected_at: DateTime<FixedOffset>,
    /// When the Worker buffered the Command: what OFL-9 judges.
    pub buffered_at: DateTime<FixedOffset>,
    pub grace_seconds: u64,
    /// The historical lease's expiry as the Worker last knew it.
    pub lease_expires_at: DateTime<FixedOffset>,
    /// The resource-usage delta of the buffered work, charged at reconciliation (OFL-11).
    pub usage: Budgets,
}

/// What the Authority knows of the lease a binding names, as of the reconciling Command.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LeaseRecord {
    pub work_item_id: String,
    pub agent_id: String,
    pub session_epoch: u64,
    pub ownership_epoch: u64,
    pub started_at: DateTime<FixedOffset>,
    pub expires_at: DateTime<FixedOffset>,
    /// When the lease was closed by a release, a cancellation or a failure (or any other
    /// fencing); `None` while it runs, and when it only expired or was revoked by its Agent's
    /// replacement session (the reconnect itself does not close the window, DESIGN §12).
    pub closed_at: Option<DateTime<FixedOffset>>,
}

/// The WorkItem as it is when the buffered Command arrives.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Current {
    /// The WorkItem the Command's payload names.
    pub work_item_id: String,
    pub owner: Option<String>,
    pub ownership_epoch: u64,
    /// The contract's `leases.graceSeconds`: the most grace a binding may claim.
    pub contract_grace_seconds: u64,
    pub now: DateTime<FixedOffset>,
}

/// OFL-9 and DESIGN §12, in this order, the first failing answering: the bound WorkItem is the
/// Command's (`offline_wrong_work_item`); the binding agrees with the lease record (`lease`
/// `None`: no such lease) and claims no more grace than the contract grants
/// (`offline_binding_mismatch`); the WorkItem still has that owner under that ownership epoch
/// (`offline_owner_changed`: reassigned, or accepted again under a new epoch); `bufferedAt`
/// lies in `[lease start, lease expiry + grace]` and not in the future
/// (`offline_outside_grace`); and before the lease was closed (`offline_lease_closed`).
pub fn judge(
    binding: &Binding,
    lease: Option<&LeaseRecord>,
    current: &Current,
) -> Result<(), ErrorCode> {
    if binding.work_item_id.as_str() != current.work_item_id {
        return Err(ErrorCode::OfflineWrongWorkItem);
    }
    let Some(lease) = lease else {
        return Err(ErrorCode::OfflineBindingMismatch);
    };
    let agrees = lease.work_item_id == binding.work_item_id.as_str()
        && lease.agent_id == binding.agent_id.as_str()
        && lease.session_epoch == binding.session_epoch
        && lease.ownership_epoch == binding.ownership_epoch
        && lease.expires_at == binding.lease_expires_at
        && binding.grace_seconds <= current.contract_grace_seconds
        && binding.disconnected_at <= binding.buffered_at;
    if !agrees {
        return Err(ErrorCode::OfflineBindingMismatch);
    }
    let same_owner = current.ownership_epoch == binding.ownership_epoch
        && current
            .owner
            .as_deref()
            .is_none_or(|owner| owner == binding.agent_id.as_str());
    if !same_owner {
        return Err(ErrorCode::OfflineOwnerChanged);
    }
    let grace = chrono::Duration::seconds(
        i64::try_from(binding.grace_seconds)
            .unwrap_or(i64::MAX)
            .min(100 * 365 * 86_400),
    );
    let buffered = binding.buffered_at;
    if buffered < lease.started_at || buffered > lease.expires_at + grace || buffered > current.now
    {
        return Err(ErrorCode::OfflineOutsideGrace);
    }
    if lease.closed_at.is_some_and(|closed| buffered >= closed) {
        return Err(ErrorCode::OfflineLeaseClosed);
    }
    Ok(())
}
