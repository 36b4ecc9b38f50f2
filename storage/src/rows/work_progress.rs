//! The `work_progress` table: the only SQL that names it. One row per WorkItem, its latest
//! structured progress report (PRG-1), replaced by each `work.progress`.

use crate::sql::{Connection, OptionalExtension as _, params};
use weft_api::work::command::WorkProgress;
use weft_api::work::views::ProgressView;

use super::{from_json, to_json};
use crate::error::Error;
use crate::sql::Cached as _;
use crate::unit::{Conn, Tx};

/// fsck's rows naming an Event through a WorkItem's Group (as `group_id`, `sequence`): each
/// progress report's `work.progress`.
pub(crate) const PROGRESS_EVENTS: &str =
    "SELECT w.group_id AS group_id, p.sequence AS sequence FROM work_progress p
     JOIN work_items w ON w.work_item_id = p.work_item_id";

/// What the job's memo remembers a WorkItem's latest report under: the view of the report
/// a `work.progress` just wrote answers it without reading it back.
const LATEST: &str = "work_progress.latest";

/// `report` is WorkItem `work_item_id`'s latest, made by `agent_id` at `reported_at` and
/// recorded by the Event at `sequence`.
pub(crate) fn replace(
    tx: &Tx<'_>,
    work_item_id: &str,
    sequence: u64,
    agent_id: &str,
    reported_at: &str,
    report: &WorkProgress,
) -> Result<(), Error> {
    let conn: &Connection = tx;
    conn.run_later(
        "INSERT INTO work_progress (work_item_id, sequence, agent_id, reported_at, report)
         VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (work_item_id) DO UPDATE SET sequence = excluded.sequence,
             agent_id = excluded.agent_id, reported_at = excluded.reported_at,
             report = excluded.report",
        params![
            work_item_id,
            sequence,
            agent_id,
            reported_at,
            to_json(report)?
        ],
    )?;
    let view = ProgressView {
        sequence,
        agent_id: agent_id.to_owned(),
        reported_at: reported_at.to_owned(),
        report: report.clone(),
    };
    tx.loaded().remember(LATEST, work_item_id, Some(view));
    Ok(())
}

/// The latest progress report of a WorkItem (remembered by the writer's job).
pub(crate) fn latest(
    c: &(impl Conn + ?Sized),
    work_item_id: &str,
) -> Result<Option<ProgressView>, Error> {
    match c.memo() {
        Some(memo) => memo.load(LATEST, work_item_id, || read(c.conn(), work_item_id)),
        None => read(c.conn(), work_item_id),
    }
}

fn read(conn: &Connection, work_item_id: &str) -> Result<Option<ProgressView>, Error> {
    let found: Option<(u64, String, String, String)> = conn
        .row(
            "SELECT sequence, agent_id, reported_at, report FROM work_progress WHERE work_item_id = ?1",
            [work_item_id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
        )
        .optional()?;
    found
        .map(|(sequence, agent_id, reported_at, report)| {
            Ok(ProgressView {
                sequence,
                agent_id,
                reported_at,
                report: from_json(&report)?,
            })
        })
        .transpose()
}
