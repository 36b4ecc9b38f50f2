//! Setting and showing retention policies (`retention.set`). A policy that would let go now
//! of what a hold keeps is refused with the holds (`held`): lift them first, or keep longer.

use weft_api::lifecycle::views::{Policies, PolicyView};
use weft_api::lifecycle::{
    HoldTarget, Retention, RetentionSet, bytes_due, format_duration, records_due,
};
use weft_api::manifest::Classification;
use weft_api::{ErrorCode, EventPayload, Id};

use super::handle::Lifespan;
use crate::error::{Error, reject};
use crate::events;
use crate::rows::retention_policies::PolicyRow;
use crate::sql::Connection;

impl Lifespan<'_> {
    /// Sets Group `group_id`'s retention policy, or Mission `mission_id`'s (which wins over the
    /// Group's for its artifacts), or one classification's of the Group's artifacts (which wins
    /// over the Group's, not over a Mission's). `unknown_group`, `not_found` for a Mission not of that
    /// Group, `held` when a hold in force keeps what it would let go now.
    pub async fn set_retention(
        &self,
        group_id: Id,
        mission_id: Option<Id>,
        classification: Option<Classification>,
        retention: Retention,
    ) -> Result<PolicyView, Error> {
        retention.check().map_err(Error::from)?;
        let now = self.0.clock.now();
        self.0
            .db
            .write(move |txn| {
                crate::rows::blob_disposals::fence(txn)?;
                if !crate::rows::groups::exists(txn, group_id.as_str())? {
                    return Err(reject(
                        ErrorCode::UnknownGroup,
                        format!("group {group_id} does not exist"),
                    ));
                }
                // The Group's lock before the holds are read (several servers): a hold placed
                // through another server meanwhile is seen, and refuses this policy.
                crate::rows::groups::lock(txn, group_id.as_str())?;
                if let Some(mission) = &mission_id
                    && crate::rows::missions::group_of(txn, mission.as_str())?.as_deref()
                        != Some(group_id.as_str())
                {
                    return Err(reject(
                        ErrorCode::NotFound,
                        format!("no Mission {mission} in group {group_id}"),
                    ));
                }
                let held = held_in_scope(txn, &group_id, mission_id.as_ref(), &retention, now)?;
                // A classification's policy reaches the Group's ended Missions as the Group's does
                // (`held_in_scope` is as cautious for it).
                if !held.is_empty() {
                    return Err(reject(
                        ErrorCode::Held,
                        format!(
                            "holds {} keep what this policy would let go now: lift them first, or keep longer",
                            held.join(", ")
                        ),
                    ));
                }
                let payload = RetentionSet {
                    classification,
                    group_id: group_id.clone(),
                    keep_bytes_seconds: retention.keep_bytes_seconds,
                    keep_records_seconds: retention.keep_records_seconds,
                    mission_id: mission_id.clone(),
                };
                let sequence =
                    events::append(txn, &group_id, &EventPayload::RetentionSet(payload), now)?;
                let row = PolicyRow {
                    group_id,
                    mission_id,
                    classification,
                    retention,
                    sequence,
                };
                crate::rows::retention_policies::set(txn, &row)?;
                Ok(view(row))
            })
            .await
    }

    /// Group `group_id`'s policies: its own, then its Missions'.
    pub async fn retention(&self, group_id: Id) -> Result<Policies, Error> {
        self.0
            .db
            .read(move |conn| {
                if !crate::rows::groups::exists(conn, group_id.as_str())? {
                    return Err(reject(
                        ErrorCode::UnknownGroup,
                        format!("group {group_id} does not exist"),
                    ));
                }
                let policies = crate::rows::retention_policies::of_group(conn, group_id.as_str())?
                    .into_iter()
                    .map(view)
                    .collect();
                Ok(Policies { group_id, policies })
            })
            .await
    }
}

fn view(row: PolicyRow) -> PolicyView {
    PolicyView {
        group_id: row.group_id,
        mission_id: row.mission_id,
        classification: row.classification,
        keep_bytes: row.retention.keep_bytes_seconds.map(format_duration),
        keep_records: row.retention.keep_records_seconds.map(format_duration),
        sequence: row.sequence,
    }
}

/// The holds in force on what `retention` would make due by `now` in its scope (the Group's
/// ended Missions without a policy of their own, or the one Mission): a hold on such a
/// Mission, a WorkItem of one, or an artifact one published.
fn held_in_scope(
    conn: &Connection,
    group_id: &Id,
    mission_id: Option<&Id>,
    retention: &Retention,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Vec<String>, Error> {
    let holds = crate::rows::holds::in_force(conn)?;
    if holds.is_empty() {
        return Ok(Vec::new());
    }
    // A Group's (or a classification's) policy reaches the Missions without one of their own.
    let own: std::collections::BTreeSet<Id> =
        crate::rows::retention_policies::of_group(conn, group_id.as_str())?
            .into_iter()
            .filter_map(|policy| policy.mission_id)
            .collect();
    let due_now = |mission: &str| -> Result<bool, Error> {
        let in_scope = match mission_id {
            Some(scope) => scope.as_str() == mission,
            None => !own.iter().any(|m| m.as_str() == mission),
        };
        if !in_scope {
            return Ok(false);
        }
        let ended = crate::rows::missions::ended_at(conn, mission)?;
        // Bytes, or (a policy of `keepRecords` alone) records: never due before the bytes.
        let due = bytes_due(ended, Some(retention), false).or(records_due(ended, Some(retention)));
        Ok(due.is_some_and(|due| due <= now))
    };
    let mut held = Vec::new();
    for hold in holds {
        // Another Group's approver's hold is that Group's: it keeps the bytes it shares with
        // this one (collection counts it as kept), but refuses nothing here.
        if hold
            .placed_in
            .as_ref()
            .is_some_and(|(group, _)| group != group_id)
        {
            continue;
        }
        let hit = match &hold.target {
            HoldTarget::MissionId(mission) => {
                crate::rows::missions::group_of(conn, mission.as_str())?.as_deref()
                    == Some(group_id.as_str())
                    && due_now(mission.as_str())?
            }
            HoldTarget::WorkItemId(work_item) => {
                match crate::rows::work_items::place(conn, work_item.as_str())? {
                    Some((group, mission)) if group == group_id.as_str() => due_now(&mission)?,
                    _ => false,
                }
            }
            HoldTarget::Artifact(artifact) => {
                let mut any = false;
                for mission in
                    crate::rows::manifests::missions_of(conn, group_id.as_str(), artifact)?
                {
                    if due_now(&mission)? {
                        any = true;
                        break;
                    }
                }
                any
            }
        };
        if hit {
            held.push(hold.hold_id.to_string());
        }
    }
    Ok(held)
}
