//! Spending budgets (CON-1.7, OFL-10…12, DESIGN §12): the budget lineage of a WorkItem (its
//! own budget, its Mission's, then each enclosing parent WorkItem's and Mission's, following
//! `missions.parent_work_item_id`), its spend read from the rows, and the charge of a usage
//! delta to all of it, in the Command's writer transaction. Whether a delta fits is
//! `weft_api::work::budget::charge`; this module only reads and writes the `spent` columns.
//!
//! The parent WorkItem of a child Mission is on the lineage: its child Mission is how it is
//! being done, so what the child spends, the parent WorkItem spends.

use crate::sql::Connection;
use weft_api::ErrorCode;
use weft_api::work::budget::charge;
use weft_api::work::contract::Budgets;
use weft_api::work::views::BudgetView;

use super::{WorkRow, load_mission, load_work_item};
use crate::error::{Error, reject};
use crate::rows::{missions, work_items};
use crate::unit::Tx;

/// Deepest nesting of child Missions followed; deeper is refused rather than walked forever.
const MAX_DEPTH: usize = 64;

/// One budget on a lineage.
#[derive(Clone, Debug, PartialEq)]
enum Holder {
    WorkItem(String),
    Mission(String),
}

impl Holder {
    fn describe(&self) -> String {
        match self {
            Self::WorkItem(id) => format!("WorkItem {id}"),
            Self::Mission(id) => format!("Mission {id}"),
        }
    }
}

/// The lineage of `row`, innermost first, with each budget's limit and spend.
fn lineage(conn: &Connection, row: &WorkRow) -> Result<Vec<(Holder, BudgetView)>, Error> {
    let mut lines = Vec::new();
    let mut work_item = row.clone();
    loop {
        if lines.len() >= 2 * MAX_DEPTH {
            return Err(reject(
                ErrorCode::BudgetExceeded,
                format!(
                    "the budget lineage of {} is deeper than {MAX_DEPTH} Missions",
                    row.work_item_id
                ),
            ));
        }
        lines.push((
            Holder::WorkItem(work_item.work_item_id.to_string()),
            BudgetView {
                limit: work_item.contract.budgets.clone(),
                spent: work_items::spent(conn, &work_item.work_item_id)?,
            },
        ));
        let Some(mission) = load_mission(conn, &work_item.mission_id)? else {
            return Ok(lines);
        };
        lines.push((
            Holder::Mission(mission.mission_id.to_string()),
            BudgetView {
                limit: mission.budget.clone(),
                spent: missions::spent(conn, &mission.mission_id)?,
            },
        ));
        let Some(parent) = mission.parent_work_item_id.as_deref() else {
            return Ok(lines);
        };
        let Some(parent) = load_work_item(conn, parent)? else {
            return Ok(lines);
        };
        work_item = parent;
    }
}

/// Charges `delta` to every budget on the lineage of `row` (OFL-11 step 2), or refuses it
/// whole with `budget_exceeded`, naming the first budget and dimension it would overflow
/// (OFL-12: nothing is written before the answer is known).
///
/// `whole_group`: whether the caller sees the whole Group. A Mission-scoped caller is told
/// only which dimension of an enclosing budget (above its own WorkItem and Mission) would
/// overflow, never that budget's holder, limit or spend (CTX-5).
pub(super) fn charge_lineage(
    tx: &Tx<'_>,
    row: &WorkRow,
    delta: &Budgets,
    whole_group: bool,
) -> Result<(), Error> {
    let lines = lineage(tx, row)?;
    let views: Vec<BudgetView> = lines.iter().map(|(_, view)| view.clone()).collect();
    let after = charge(&views, delta).map_err(|overflow| {
        let (holder, view) = &lines[overflow.level];
        let dimension = overflow.dimension.as_str();
        let why = if whole_group || overflow.level < 2 {
            format!(
                "the usage would overflow the {dimension} budget of {} (limit {}, spent {}; OFL-12)",
                holder.describe(),
                amount(&view.limit, overflow.dimension),
                amount(&view.spent, overflow.dimension),
            )
        } else {
            format!("the usage would overflow the {dimension} budget of an enclosing Mission (OFL-12)")
        };
        reject(ErrorCode::BudgetExceeded, why)
    })?;
    for ((holder, _), spent) in lines.iter().zip(after) {
        match holder {
            Holder::WorkItem(id) => work_items::set_spent(tx, id, &spent)?,
            Holder::Mission(id) => missions::set_spent(tx, id, &spent)?,
        }
    }
    Ok(())
}

/// One dimension of `budgets`, as text for a message.
fn amount(budgets: &Budgets, dimension: weft_api::work::budget::Dimension) -> String {
    use weft_api::work::budget::Dimension as D;
    match dimension {
        D::Financial => budgets.financial.to_string(),
        D::Tokens => budgets.tokens.to_string(),
        D::ToolCalls => budgets.tool_calls.to_string(),
        D::ComputeSeconds => budgets.compute_seconds.to_string(),
        D::WallClockSeconds => budgets.wall_clock_seconds.to_string(),
        D::SideEffects => budgets.side_effects.to_string(),
    }
}

/// Where the `spent` of the Group's WorkItems and Missions differs from the fold of its log
/// (fsck): each WorkItem's own usage (`WorkItemProjection::usage`) added to every budget on
/// its lineage.
pub(crate) fn check_spent(
    conn: &Connection,
    group_id: &str,
    folded: &weft_api::work::events::WorkProjection,
) -> Result<Vec<String>, Error> {
    let mut expected: std::collections::BTreeMap<(bool, String), Budgets> = Default::default();
    for (work_item_id, projection) in &folded.work_items {
        if projection.usage.is_zero() {
            continue;
        }
        let Some(row) = load_work_item(conn, work_item_id)? else {
            continue;
        };
        for (holder, _) in lineage(conn, &row)? {
            let key = match holder {
                Holder::WorkItem(id) => (false, id),
                Holder::Mission(id) => (true, id),
            };
            let sum = expected.entry(key).or_default();
            *sum = sum.saturating_add(&projection.usage);
        }
    }
    let mut problems = Vec::new();
    for is_mission in [false, true] {
        let rows = if is_mission {
            missions::spent_of_group(conn, group_id)?
        } else {
            work_items::spent_of_group(conn, group_id)?
        };
        for (id, spent) in rows {
            let wanted = expected
                .get(&(is_mission, id.clone()))
                .cloned()
                .unwrap_or_default();
            if !spent.same_spend(&wanted) {
                problems.push(format!(
                    "group {group_id}: {} {id} has spent {spent:?} in the index, {wanted:?} by its log",
                    if is_mission { "Mission" } else { "WorkItem" }
                ));
            }
        }
    }
    Ok(problems)
}
