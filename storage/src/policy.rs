//! The Group's policy, set by the operator (SCH-6, SCH-7): the highest `priorityClass` a
//! Coordinator's `mission.create` may ask for. A Coordinator supplies urgency, deadline and
//! business impact (the contract's fields); the Organization's priority is escalated through
//! this policy, never by the Coordinator itself, so a Coordinator cannot force its Mission
//! ahead of others. A Group's ceiling is `normal` until the operator sets it.
//!
//! The ceiling is a column of `groups`, changed with its `group.policy_set` Event in one
//! transaction (`directory/policy.rs`); `mission.create` reads it in the Command's own
//! transaction (here).

use crate::sql::Connection;
use weft_api::ErrorCode;
use weft_api::work::contract::Level;

use crate::error::{Error, reject};
use crate::work::name;

/// SCH-6: refuses a `mission.create` asking for a priority above its Group's ceiling.
pub(crate) fn check_mission_priority(
    conn: &Connection,
    group_id: &str,
    requested: Level,
) -> Result<(), Error> {
    let ceiling = crate::rows::groups::priority_ceiling(conn, group_id)?.unwrap_or(Level::Normal);
    if requested > ceiling {
        return Err(reject(
            ErrorCode::Forbidden,
            format!(
                "priorityClass {} is above {group_id}'s ceiling {} (SCH-6: a Coordinator cannot \
                 force its Mission ahead; SCH-7: the operator raises the ceiling, \
                 PUT /v1/admin/groups/{group_id}/policy)",
                name(&requested)?,
                name(&ceiling)?
            ),
        ));
    }
    Ok(())
}
