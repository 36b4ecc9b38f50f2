//! Legal holds (`hold.placed`, `hold.lifted`): the operator, or a Group's approver, places
//! one on an artifact, a WorkItem or a Mission; collection keeps what it holds and everything
//! that lineage needs (`artifacts/collection.rs`).
//!
//! - The operator's hold: its Events go to the Group of its WorkItem or Mission, or to every
//!   Group that published its artifact.
//! - An approver's hold is its Group's: placed through a session of that Group holding the
//!   `approver` role, on what that session sees (a WorkItem or Mission of a Mission its
//!   Membership covers, an artifact it may read); anything else answers `not_found`, as what
//!   does not exist does, so another Group learns nothing. Its Events go to that Group only
//!   and name the approver (`placedBy`, `liftedBy`: the Event's actor). The Group's approvers
//!   lift it; the operator's holds are lifted by the operator (`forbidden`). At most
//!   [`GROUP_HOLDS`] of a Group's are in force at once (`409 conflict`), and its approvers
//!   place at most [`GROUP_HOLDS`] a day, each at most [`APPROVER_HOLDS`] (`429
//!   rate_limited`, lifted ones counted), so the
//!   table and the log grow by a bounded amount a day. The session is checked again in the
//!   transaction. An approver is shown a hold as its own Group's only (`groups: [g]`): which
//!   other Groups published the same bytes is theirs to know.

use weft_api::lifecycle::views::{HoldView, Holds};
use weft_api::lifecycle::{HoldLifted, HoldPlaced, HoldTarget};
use weft_api::session::Role;
use weft_api::{ErrorCode, EventPayload, Id};

use super::handle::Lifespan;
use crate::access::{Reader, Session, can_read_artifact};
use crate::acting::Acting;
use crate::clock::format_instant;
use crate::error::{Error, reject};
use crate::events;
use crate::rows::holds::HoldRow;
use crate::sql::Connection;

/// Rows a page of holds reads, as a multiple of its `limit`.
const SCANNED: usize = 10;

/// Holds a Group's approvers may have in force at once, and place in a day.
pub const GROUP_HOLDS: u64 = 1_000;

/// Holds one approver may place in a day: a tenth of its Group's, so one approver (or one
/// stolen session) cannot spend the whole Group's day alone.
pub const APPROVER_HOLDS: u64 = 100;

/// Who places, lifts or lists holds.
#[derive(Clone, Copy, Debug)]
pub enum HoldBy<'a> {
    /// The operator, with the admin token.
    Operator,
    /// A session of Group `group` (the route's), which must hold the `approver` role.
    Approver { group: &'a Id, session: &'a Session },
}

/// An approver's session, checked before the writer: its own Group, the `approver` role.
struct Approver {
    group: Id,
    agent: Id,
    reader: Reader,
    acting: Acting,
}

impl HoldBy<'_> {
    fn approver(self) -> Result<Option<Approver>, Error> {
        let HoldBy::Approver { group, session } = self else {
            return Ok(None);
        };
        if session.group_id != *group || !session.roles.contains(&Role::Approver) {
            return Err(reject(
                ErrorCode::Forbidden,
                format!("holds in {group} are placed by its approvers, through their sessions"),
            ));
        }
        Ok(Some(Approver {
            group: group.clone(),
            agent: session.agent_id.clone(),
            reader: session.reader(),
            acting: Acting::session(session),
        }))
    }
}

impl Lifespan<'_> {
    /// Places a hold on `target` for `reason`; answers it with its new id. `not_found` for a
    /// WorkItem or Mission that does not exist, an artifact no Group published, or (for an
    /// approver) anything its session does not see.
    pub async fn place_hold(
        &self,
        target: HoldTarget,
        reason: String,
        by: HoldBy<'_>,
    ) -> Result<HoldView, Error> {
        let approver = by.approver()?;
        let clock = std::sync::Arc::clone(&self.0.clock);
        let hold_id = Id::parse("holdId", &format!("hold-{}", uuid::Uuid::now_v7()))?;
        self.0
            .db
            .write(move |txn| {
                if let Some(approver) = &approver {
                    approver.acting.check(txn, &format_instant(clock.now()))?;
                }
                crate::rows::blob_disposals::fence(txn)?;
                let groups = match &approver {
                    None => groups_of(txn, &target)?,
                    Some(approver) if sees(txn, &approver.reader, &target)? => {
                        vec![approver.group.clone()]
                    }
                    Some(_) => Vec::new(),
                };
                if groups.is_empty() {
                    let what = match &target {
                        HoldTarget::Artifact(id) => format!("artifact {id}"),
                        HoldTarget::WorkItemId(id) => format!("WorkItem {id}"),
                        HoldTarget::MissionId(id) => format!("Mission {id}"),
                    };
                    return Err(reject(
                        ErrorCode::NotFound,
                        format!("{what} does not exist"),
                    ));
                }
                // Judged and stamped at the time every Group it appends to is locked (a wait
                // for another server's batch may be long). An approver's is its own Group.
                lock_in_order(txn, &groups)?;
                let now = clock.now();
                if let Some(approver) = &approver {
                    let group = approver.group.as_str();
                    // Counted under the Group's lock (PostgreSQL, taken above): two servers'
                    // placements cannot both see room for one more.
                    // The session (and its approver role) again under the lock, which a
                    // Membership's removal or change takes: one committed since the check
                    // above is seen here.
                    approver.acting.check(txn, &format_instant(now))?;
                    if crate::rows::holds::in_force_of_group(txn, group)? >= GROUP_HOLDS {
                        return Err(reject(
                            ErrorCode::Conflict,
                            format!("{group} has {GROUP_HOLDS} holds in force: lift one first"),
                        ));
                    }
                    let day = format_instant(now - chrono::Duration::days(1));
                    if crate::rows::holds::placed_in_group_since(txn, group, &day)? >= GROUP_HOLDS {
                        return Err(reject(
                            ErrorCode::RateLimited,
                            format!("{group}'s approvers placed {GROUP_HOLDS} holds today"),
                        ));
                    }
                    let agent = approver.agent.as_str();
                    if crate::rows::holds::placed_by_since(txn, group, agent, &day)?
                        >= APPROVER_HOLDS
                    {
                        return Err(reject(
                            ErrorCode::RateLimited,
                            format!("{agent} placed {APPROVER_HOLDS} holds in {group} today"),
                        ));
                    }
                }
                let row = HoldRow {
                    hold_id: hold_id.clone(),
                    target: target.clone(),
                    reason: reason.clone(),
                    placed_at: now,
                    lifted_at: None,
                    placed_in: approver
                        .as_ref()
                        .map(|a| (a.group.clone(), a.agent.clone())),
                };
                crate::rows::holds::insert(txn, &row)?;
                if approver.is_none() {
                    // The Groups it is placed in, kept: its lifting and listing go to them.
                    crate::rows::hold_groups::insert(txn, hold_id.as_str(), &groups)?;
                }
                let payload = EventPayload::HoldPlaced(HoldPlaced {
                    hold_id: hold_id.clone(),
                    reason: reason.clone(),
                    target: target.clone(),
                    placed_by: approver.as_ref().map(|a| a.agent.clone()),
                });
                for group in &groups {
                    events::append(txn, group, &payload, now)?;
                }
                Ok(view(row, groups))
            })
            .await
    }

    /// Lifts hold `hold_id`: `not_found` for no such hold (or, for an approver, one it does
    /// not see); `forbidden` for an approver lifting the operator's; a hold lifted already
    /// answers as it was lifted (nothing appended).
    pub async fn lift_hold(&self, hold_id: Id, by: HoldBy<'_>) -> Result<HoldView, Error> {
        let approver = by.approver()?;
        let clock = std::sync::Arc::clone(&self.0.clock);
        self.0
            .db
            .write(move |txn| {
                if let Some(approver) = &approver {
                    approver.acting.check(txn, &format_instant(clock.now()))?;
                }
                crate::rows::blob_disposals::fence(txn)?;
                let missing = || reject(ErrorCode::NotFound, format!("no hold {hold_id}"));
                let Some(mut row) = crate::rows::holds::load(txn, hold_id.as_str())? else {
                    return Err(missing());
                };
                let groups = row_groups(txn, &row)?;
                if let Some(approver) = &approver {
                    // Its Group's lock, then the session again (as `place_hold` does): an
                    // approver's holds append to its own Group only.
                    crate::rows::groups::lock(txn, approver.group.as_str())?;
                    approver.acting.check(txn, &format_instant(clock.now()))?;
                    if !shown_to(txn, approver, &row, &groups)? {
                        return Err(missing());
                    }
                    if row.placed_in.as_ref().map(|(group, _)| group) != Some(&approver.group) {
                        return Err(reject(
                            ErrorCode::Forbidden,
                            format!("{hold_id} is the operator's: the operator lifts it"),
                        ));
                    }
                }
                // Stamped at the time every Group it appends to is locked (the approver's own
                // was locked above; the operator's, in Group order, here).
                lock_in_order(txn, &groups)?;
                let now = clock.now();
                if crate::rows::holds::lift(txn, hold_id.as_str(), now)? {
                    row.lifted_at = Some(now);
                    let payload = EventPayload::HoldLifted(HoldLifted {
                        hold_id: hold_id.clone(),
                        lifted_by: approver.as_ref().map(|a| a.agent.clone()),
                    });
                    for group in &groups {
                        events::append(txn, group, &payload, now)?;
                    }
                } else if row.lifted_at.is_none() {
                    // Lifted by another server since it was read (before the locks): answer
                    // as it was lifted, not as in force.
                    row = crate::rows::holds::load(txn, hold_id.as_str())?.ok_or_else(missing)?;
                }
                Ok(view(row, groups))
            })
            .await
    }

    /// A page of the holds, in force and lifted, by id after `after`: at most `limit`, and
    /// `next` unless the last was read. With `group_id`, those whose Events went to it. An
    /// approver lists its own Group's, and of those only what its session sees; its `next`
    /// names the last hold it was shown. The operator's page reads at most [`SCANNED`] times
    /// `limit` rows, so a `group` filter that keeps few still answers soon (with fewer holds
    /// and a `next`).
    pub async fn holds(
        &self,
        group_id: Option<Id>,
        by: HoldBy<'_>,
        after: Option<Id>,
        limit: usize,
    ) -> Result<Holds, Error> {
        let approver = by.approver()?;
        let group_id = approver.as_ref().map(|a| a.group.clone()).or(group_id);
        let limit = limit.max(1);
        self.0
            .db
            .read(move |conn| {
                let mut holds = Vec::new();
                let mut cursor = after.map(|id| id.to_string()).unwrap_or_default();
                let mut scanned = 0;
                loop {
                    let own = approver.as_ref().map(|a| a.group.as_str());
                    let rows = crate::rows::holds::page(conn, own, &cursor, limit as u64)?;
                    let exhausted = rows.len() < limit;
                    for row in rows {
                        scanned += 1;
                        cursor = row.hold_id.to_string();
                        let groups = row_groups(conn, &row)?;
                        if !group_id.as_ref().is_none_or(|group| groups.contains(group)) {
                            continue;
                        }
                        match &approver {
                            Some(approver) if !shown_to(conn, approver, &row, &groups)? => {}
                            Some(approver) => holds.push(view(row, vec![approver.group.clone()])),
                            None => holds.push(view(row, groups)),
                        }
                        if holds.len() == limit {
                            break;
                        }
                    }
                    if exhausted && holds.len() < limit {
                        return Ok(Holds { holds, next: None });
                    }
                    if holds.len() == limit {
                        let next = holds.last().map(|hold| hold.hold_id.clone());
                        return Ok(Holds { holds, next });
                    }
                    // The operator's page may stop at a hold it was not shown (it sees them
                    // all); an approver's never does, so its cursor names only holds it
                    // was shown (its rows are its Group's and the operator's).
                    if approver.is_none() && scanned >= SCANNED * limit {
                        let next = Some(crate::rows::id("holdId", &cursor)?);
                        return Ok(Holds { holds, next });
                    }
                }
            })
            .await
    }
}

/// Whether an approver is shown hold `row`: its Events went to the approver's Group, and its
/// session sees what it holds.
fn shown_to(
    conn: &Connection,
    approver: &Approver,
    row: &HoldRow,
    groups: &[Id],
) -> Result<bool, Error> {
    Ok(groups.contains(&approver.group) && sees(conn, &approver.reader, &row.target)?)
}

/// Whether `reader` (an approver's session) sees `target` in its Group.
fn sees(conn: &Connection, reader: &Reader, target: &HoldTarget) -> Result<bool, Error> {
    let Reader::Agent { group_id, .. } = reader else {
        return Ok(true);
    };
    Ok(match target {
        HoldTarget::Artifact(artifact) => can_read_artifact(conn, reader, artifact)?,
        HoldTarget::WorkItemId(work_item) => {
            crate::rows::work_items::place(conn, work_item.as_str())?
                .is_some_and(|(group, mission)| reader.sees_mission(&group, &mission))
        }
        HoldTarget::MissionId(mission) => {
            crate::rows::missions::group_of(conn, mission.as_str())?.as_deref()
                == Some(group_id.as_str())
                && reader.sees_mission(group_id.as_str(), mission.as_str())
        }
    })
}

/// The Groups whose logs carry hold `row`'s Events: its approver's Group, or for the
/// operator's, those it was placed in (`rows/hold_groups.rs`), never a Group that published
/// the held bytes afterwards; for one placed before those were kept, those of what it holds.
fn row_groups(conn: &Connection, row: &HoldRow) -> Result<Vec<Id>, Error> {
    if let Some((group, _)) = &row.placed_in {
        return Ok(vec![group.clone()]);
    }
    let placed_in = crate::rows::hold_groups::of(conn, row.hold_id.as_str())?;
    if placed_in.is_empty() {
        return groups_of(conn, &row.target);
    }
    Ok(placed_in)
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
        placed_by: row.placed_in.map(|(_, agent)| agent),
    }
}

/// Locks `groups` in Group order (the order every batch takes them in), before an operator's
/// hold appends to each; a lock already held is not taken again.
fn lock_in_order(txn: &crate::unit::Tx<'_>, groups: &[Id]) -> Result<(), Error> {
    let mut ordered: Vec<&str> = groups.iter().map(Id::as_str).collect();
    ordered.sort_unstable();
    ordered.dedup();
    for group in ordered {
        crate::rows::groups::lock(txn, group)?;
    }
    Ok(())
}
