//! What the built-in reviewer checks after a submission (EVD-3), read from the WorkItem's
//! rows: its Group and Mission, its latest submission's artifacts, and each criterion's
//! required methods.

use crate::sql::Connection;
use weft_api::Id;
use weft_api::work::machine::WorkState;

use crate::error::Error;

/// What the built-in reviewer checks after a submission (EVD-3): the WorkItem's Group and
/// Mission, its last submission's artifacts, and each criterion's required methods.
pub(crate) struct SubmissionPlan {
    pub(crate) group_id: Id,
    pub(crate) mission_id: Id,
    pub(crate) artifacts: Vec<weft_api::ArtifactId>,
    pub(crate) criteria: Vec<(String, Vec<weft_api::evidence::MethodKind>)>,
}

/// The plan for the review of the submission appended at `sequence`: `None` unless the
/// WorkItem is `submitted` and that is its latest submission (a review that runs late reviews
/// only a submission still standing, and each submission once).
pub(crate) fn submission_plan(
    conn: &Connection,
    work_item_id: &str,
    sequence: u64,
) -> Result<Option<SubmissionPlan>, Error> {
    let Some(row) = crate::rows::work_items::load(conn, work_item_id)? else {
        return Ok(None);
    };
    if row.state != WorkState::Submitted {
        return Ok(None);
    }
    let detail =
        crate::rows::work_history::last_submission(conn, &row.group_id, &row.work_item_id)?;
    let artifacts = match detail {
        Some((latest, _)) if latest != sequence => return Ok(None),
        Some((_, payload)) => {
            let event: weft_api::work::events::WorkEvent = crate::rows::from_json(&payload)?;
            serde_json::from_value(event.detail["artifacts"].clone()).map_err(Error::backend)?
        }
        None => Vec::new(),
    };
    Ok(Some(SubmissionPlan {
        group_id: Id::parse("groupId", &row.group_id)?,
        mission_id: Id::parse("missionId", &row.mission_id)?,
        artifacts,
        criteria: row
            .contract
            .acceptance_criteria
            .iter()
            .map(|c| (c.id.to_string(), c.required_evidence.clone()))
            .collect(),
    }))
}
