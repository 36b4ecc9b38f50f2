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
/// `None`: no such lease), claims no more grace than the contract grants, and was disconnected
/// no later than it buffered (`offline_binding_mismatch`); the WorkItem still has that owner under that ownership epoch
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
    let grace = super::capped_seconds(binding.grace_seconds);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> DateTime<FixedOffset> {
        let start: DateTime<FixedOffset> = "2026-12-01T00:00:00Z".parse().expect("instant");
        start + chrono::Duration::seconds(seconds)
    }

    fn id(text: &str) -> Id {
        Id::parse("id", text).expect("id")
    }

    /// A binding buffered at +50 s under a lease of +0…+300 s with 120 s of grace.
    fn case() -> (Binding, LeaseRecord, Current) {
        let binding = Binding {
            agent_id: id("w1"),
            group_id: id("g1"),
            work_item_id: id("wi"),
            session_epoch: 1,
            ownership_epoch: 1,
            lease_id: id("lease-1"),
            disconnected_at: at(40),
            buffered_at: at(50),
            grace_seconds: 120,
            lease_expires_at: at(300),
            usage: Budgets::default(),
        };
        let lease = LeaseRecord {
            work_item_id: "wi".into(),
            agent_id: "w1".into(),
            session_epoch: 1,
            ownership_epoch: 1,
            started_at: at(0),
            expires_at: at(300),
            closed_at: None,
        };
        let current = Current {
            work_item_id: "wi".into(),
            owner: Some("w1".into()),
            ownership_epoch: 1,
            contract_grace_seconds: 120,
            now: at(1000),
        };
        (binding, lease, current)
    }

    #[test]
    fn the_window_is_lease_start_to_expiry_plus_grace_inclusive() {
        let (mut binding, lease, current) = case();
        for (seconds, fits) in [
            (-1, false),
            (0, true),
            (300, true),
            (420, true),
            (421, false),
        ] {
            binding.buffered_at = at(seconds);
            binding.disconnected_at = at(seconds);
            let answer = judge(&binding, Some(&lease), &current);
            assert_eq!(answer.is_ok(), fits, "+{seconds} s: {answer:?}");
        }
    }

    #[test]
    fn closing_counts_from_the_close_instant_on() {
        let (binding, mut lease, current) = case();
        lease.closed_at = Some(at(51));
        assert_eq!(judge(&binding, Some(&lease), &current), Ok(()));
        lease.closed_at = Some(at(50));
        assert_eq!(
            judge(&binding, Some(&lease), &current),
            Err(ErrorCode::OfflineLeaseClosed)
        );
    }

    #[test]
    fn a_fenced_owner_is_not_a_changed_owner_but_a_new_epoch_is() {
        let (binding, lease, mut current) = case();
        current.owner = None;
        assert_eq!(judge(&binding, Some(&lease), &current), Ok(()));
        current.owner = Some("w1".into());
        current.ownership_epoch = 2;
        assert_eq!(
            judge(&binding, Some(&lease), &current),
            Err(ErrorCode::OfflineOwnerChanged)
        );
    }

    #[test]
    fn the_bound_work_item_answers_before_the_lease_record() {
        let (binding, _, mut current) = case();
        current.work_item_id = "wi-other".into();
        assert_eq!(
            judge(&binding, None, &current),
            Err(ErrorCode::OfflineWrongWorkItem)
        );
        current.work_item_id = "wi".into();
        assert_eq!(
            judge(&binding, None, &current),
            Err(ErrorCode::OfflineBindingMismatch)
        );
    }

    #[test]
    fn more_grace_than_the_contract_grants_is_a_mismatch() {
        let (mut binding, lease, current) = case();
        binding.grace_seconds = 121;
        assert_eq!(
            judge(&binding, Some(&lease), &current),
            Err(ErrorCode::OfflineBindingMismatch)
        );
    }

    #[test]
    fn the_extension_round_trips() {
        let (binding, ..) = case();
        let extension = super::super::command::Extension::offline(&binding);
        assert!(extension.critical);
        assert_eq!(extension.urn, OFFLINE_EXTENSION);
        let back: Binding = serde_json::from_value(extension.value).expect("parses");
        assert_eq!(back, binding);
    }
}
