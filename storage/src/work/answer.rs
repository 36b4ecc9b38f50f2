//! An accepted Command's answer (DESIGN §10: `201 {commandId, events, state}`), what is kept of
//! it for a retry, and the replay of a retry.
//!
//! Kept: the `commandId`, the Events, and which aggregate `state` is the view of (`stateOf`),
//! not the view itself. A WorkItem's view runs to kilobytes (its contract, the newest history
//! sequences, the lease's newest renewals); storing it with every Command made a
//! `lease.renew` write and serialise it twice more than its own Event (issue #44). A retry of
//! the same bytes gets the same `commandId` and Events and the aggregate's view as it is when
//! the retry is answered, which is what a client acting on the answer needs (an older view
//! would only earn it a `stale_revision`). Whoever retries must still see the aggregate: its
//! current Membership is read, and an aggregate outside it answers as an unknown one (CTX-5),
//! never its current state. A `state` that is no aggregate's view (`work.propose`'s proposal)
//! is kept whole, as are the answers stored before `stateOf` existed; both replay as stored.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use weft_api::ErrorCode;
use weft_api::work::views::{AppendedEvent, CommandAccepted};

use super::{MissionRow, WorkRow, load_mission, load_work_item};
use crate::error::{Error, reject};
use crate::unit::Tx;

/// An accepted Command's answer as the route sends it: [`CommandAccepted`]'s shape with
/// `state` already JSON, serialised once from the view (a `serde_json::Value` in between cost
/// a renewal 8 % of the server's CPU, issue #44).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Accepted {
    pub command_id: String,
    pub events: Vec<AppendedEvent>,
    pub state: Box<RawValue>,
    /// Whether this answer is replayed for a retried `commandId` (nothing was done this
    /// time). Not on the wire.
    #[serde(skip)]
    pub replayed: bool,
}

impl Accepted {
    /// The answer as the protocol's type (`state` parsed), for callers in this process.
    pub fn into_api(self) -> CommandAccepted {
        CommandAccepted {
            command_id: self.command_id,
            events: self.events,
            // `state` was serialised from a view or a value a moment ago: it parses.
            state: serde_json::from_str(self.state.get()).unwrap_or_default(),
            replayed: self.replayed,
        }
    }
}

/// JSON of `value`, as `state`.
fn raw(value: &impl Serialize) -> Result<Box<RawValue>, Error> {
    serde_json::value::to_raw_value(value).map_err(Error::backend)
}

/// What a Command's effect answers: the aggregate it leaves (its view is built once, after
/// the effect), or a `state` of its own.
pub(super) enum Answered {
    WorkItem(Box<WorkRow>),
    Mission(MissionRow),
    Value(serde_json::Value),
}

/// The aggregate a stored answer's `state` is the view of.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
enum StateOf {
    WorkItem(String),
    Mission(String),
}

/// The `answer` column of `commands`.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Kept {
    command_id: String,
    events: Vec<AppendedEvent>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    state_of: Option<StateOf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    state: Option<serde_json::Value>,
}

/// The answer of an accepted Command and the text kept for its retries.
pub(super) fn accepted(
    tx: &Tx<'_>,
    command_id: String,
    events: Vec<AppendedEvent>,
    answered: Answered,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<(Accepted, String), Error> {
    let (state, state_of, kept_state) = match answered {
        Answered::WorkItem(row) => (
            raw(&super::work_view(tx, &row, now)?)?,
            Some(StateOf::WorkItem(row.work_item_id.to_string())),
            None,
        ),
        Answered::Mission(row) => (
            raw(&super::mission_view(tx, &row)?)?,
            Some(StateOf::Mission(row.mission_id.to_string())),
            None,
        ),
        Answered::Value(value) => (raw(&value)?, None, Some(value)),
    };
    let kept = Kept {
        command_id,
        events,
        state_of,
        state: kept_state,
    };
    let text = serde_json::to_string(&kept).map_err(Error::backend)?;
    let answer = Accepted {
        command_id: kept.command_id,
        events: kept.events,
        state,
        replayed: false,
    };
    Ok((answer, text))
}

/// A retry's answer from the kept `text`, for `agent` of `group` as its Membership is now.
pub(super) fn replay(
    tx: &Tx<'_>,
    text: &str,
    group: &str,
    agent: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Accepted, Error> {
    // An answer kept before `stateOf` existed is the whole 201 body: its `state` as it was.
    let kept: Kept = serde_json::from_str(text).map_err(Error::backend)?;
    let state = match (kept.state_of, kept.state) {
        (Some(of), _) => current_view(tx, &of, group, agent, now)?,
        (None, Some(state)) => raw(&state)?,
        (None, None) => {
            return Err(Error::backend(std::io::Error::other(
                "a kept Command answer without a state",
            )));
        }
    };
    Ok(Accepted {
        command_id: kept.command_id,
        events: kept.events,
        state,
        replayed: true,
    })
}

/// The aggregate's view now, if `agent`'s current Membership in `group` may see it.
fn current_view(
    tx: &Tx<'_>,
    of: &StateOf,
    group: &str,
    agent: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Box<RawValue>, Error> {
    let Some((_, _, missions)) = crate::rows::memberships::current_with_scope(tx, group, agent)?
    else {
        return Err(reject(
            ErrorCode::StaleMembership,
            "the Membership was removed",
        ));
    };
    let scope = crate::access::scope_of(missions)?;
    match of {
        StateOf::WorkItem(id) => match load_work_item(tx, id)? {
            Some(row) if row.group_id == group && scope.covers(&row.mission_id) => {
                raw(&super::work_view(tx, &row, now)?)
            }
            _ => Err(reject(
                ErrorCode::UnknownWorkItem,
                format!("no WorkItem {id} in {group}"),
            )),
        },
        StateOf::Mission(id) => match load_mission(tx, id)? {
            Some(row) if row.group_id == group && scope.covers(id) => {
                raw(&super::mission_view(tx, &row)?)
            }
            _ => Err(reject(
                ErrorCode::NotFound,
                format!("no Mission {id} in {group}"),
            )),
        },
    }
}
