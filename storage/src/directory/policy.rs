//! Setting the Group's policy (SCH-6, SCH-7; the rule and what it is for are in `policy.rs`):
//! the operator's `group.policy_set`, in one transaction with the `groups` row it changes.

use weft_api::work::contract::Level;
use weft_api::{ErrorCode, EventPayload, Id, kinds};

use crate::directory::handle::Directory;
use crate::error::{Error, reject};
use crate::events;

impl Directory<'_> {
    /// Sets the Group's policy (SCH-6, SCH-7): the highest `priorityClass` a `mission.create`
    /// may ask for (`group.policy_set`); `unknown_group` for a Group that does not exist.
    pub async fn set_group_policy(
        &self,
        group_id: Id,
        ceiling: Level,
    ) -> Result<kinds::GroupPolicySet, Error> {
        let now = self.0.clock.now();
        self.0
            .db
            .write(move |txn| {
                if !crate::rows::groups::set_priority_ceiling(txn, group_id.as_str(), ceiling)? {
                    return Err(reject(
                        ErrorCode::UnknownGroup,
                        format!("group {group_id} does not exist"),
                    ));
                }
                let policy = kinds::GroupPolicySet {
                    group_id: group_id.clone(),
                    mission_priority_ceiling: ceiling,
                };
                events::append(
                    txn,
                    &group_id,
                    &EventPayload::GroupPolicySet(policy.clone()),
                    now,
                )?;
                Ok(policy)
            })
            .await
    }
}
