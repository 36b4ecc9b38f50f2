//! Legal holds (`hold.placed`, `hold.lifted`): the operator places one on an artifact, a
//! WorkItem or a Mission; collection keeps what it holds and everything that lineage needs
//! (`artifacts/collection.rs`). A hold's Events go to the Group of its WorkItem or Mission, or
//! to every Group that published its artifact.

use weft_api::lifecycle::views::{HoldView, Holds};
use weft_api::lifecycle::{HoldLifted, HoldPlaced, HoldTarget};
use weft_api::{ErrorCode, EventPayload, Id};

use super::handle::Lifespan;
use crate::clock::format_instant;
use crate::error::{Error, reject};
use crate::events;
use crate::rows::holds::HoldRow;
use crate::sql::Connection;

impl Lifespan<'_> {
    /// Places a hold on `target` for `reason`; answers it with its new id. `not_found` for a
    /// WorkItem or Mission that does not exist, or an artifact no Group published.
    pub async fn place_hold(&self, target: HoldTarget, reason: String) -> Result<HoldView, Error> {
        let now = self.0.clock.now();
        let hold_id = Id::parse("holdId", &format!("hold-{}", uuid::Uuid::now_v7()))?;
        self.0
            .db
            .write(move |txn| {
                crate::rows::blob_disposals::fence(txn)?;
                let groups = groups_of(txn, &target)?;
                if groups.is_empty() {
                    let (code, what) = match &target {
                        HoldTarget::Artifact(id) => (ErrorCode::NotFound, format!("artifact {id}")),
                        HoldTarget::WorkItemId(id) => {
                            (ErrorCode::NotFound, format!("WorkItem {id}"))
                        }
                        HoldTarget::MissionId(id) => (ErrorCode::NotFound, format!("Mission {id}")),
                    };
                    return Err(reject(code, format!("{what} does not exist")));
                }
                let row = HoldRow {
                    hold_id: hold_id.clone(),
                    target: target.clone(),
                    reason: reason.clone(),
                    placed_at: now,
                    lifted_at: None,
                };
                crate::rows::holds::insert(txn, &row)?;
                let payload = EventPayload::HoldPlaced(HoldPlaced {
                    hold_id: hold_id.clone(),
                    reason: reason.clone(),
                    target: target.clone(),
                });
                for group in &groups {
                    events::append(txn, group, &payload, now)?;
                }
                Ok(view(row, groups))
            })
            .await
    }

    /// Lifts hold `hold_id`: `not_found` for no such hold; a hold lifted already answers as
    /// it was lifted (nothing appended).
    pub async fn lift_hold(&self, hold_id: Id) -> Result<HoldView, Error> {
        let now = self.0.clock.now();
        self.0
            .db
            .write(move |txn| {
                crate::rows::blob_disposals::fence(txn)?;
                let Some(mut row) = crate::rows::holds::load(txn, hold_id.as_str())? else {
                    return Err(reject(ErrorCode::NotFound, format!("no hold {hold_id}")));
                };
                let groups = groups_of(txn, &row.target)?;
                if crate::rows::holds::lift(txn, hold_id.as_str(), now)? {
                    row.lifted_at = Some(now);
                    let payload = EventPayload::HoldLifted(HoldLifted {
                        hold_id: hold_id.clone(),
                    });
                    for group in &groups {
                        events::append(txn, group, &payload, now)?;
                    }
                }
                Ok(view(row, groups))
            })
            .await
    }

    /// The holds, in force and lifted, by id; with `group_id`, those whose Events went to it.
    pub async fn holds(&self, group_id: Option<Id>) -> Result<Holds, Error> {
        self.0
            .db
            .read(move |conn| {
                let mut holds = Vec::new();
                for row in crate::rows::holds::all(conn)? {
                    let groups = groups_of(conn, &row.target)?;
                    if group_id.as_ref().is_none_or(|group| groups.contains(group)) {
                        holds.push(view(row, groups));
                    }
                }
                Ok(Holds { holds })
            })
            .await
    }
}

/// The Groups a hold on `target` belongs to, in order.
fn groups_of(conn: &Connection, target: &HoldTarget) -> Result<Vec<Id>, Error> {
    let groups = match target {
        HoldTarget::Artifact(artifact) => crate::rows::manifests::groups_of(conn, artifact)?,
        HoldTarget::WorkItemId(work_item) => {
            crate::rows::work_items::place(conn, work_item.as_str())?
                .map(|(group, _)| group)
                .into_iter()
                .collect()
        }
        HoldTarget::MissionId(mission) => crate::rows::missions::group_of(conn, mission.as_str())?
            .into_iter()
            .collect(),
    };
    groups
        .iter()
        .map(|group| crate::rows::id("groupId", group))
        .collect()
}

fn view(row: HoldRow, groups: Vec<Id>) -> HoldView {
    HoldView {
        hold_id: row.hold_id,
        target: row.target,
        reason: row.reason,
        placed_at: format_instant(row.placed_at),
        lifted_at: row.lifted_at.map(format_instant),
        groups,
    }
}
