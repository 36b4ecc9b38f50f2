//! What a producer's standing lets it do with one Evidence record (EVD-1), checked in the
//! record's transaction: separation of duties (whether the producer did the work the record
//! judges; `mod.rs` then weighs its word as a Worker's, `verdict::on_own_work`) and whether it
//! may supersede the record it names.

use rusqlite::{Connection, OptionalExtension as _, params};
use weft_api::evidence::Evidence;
use weft_api::verdict::{Standing, may_supersede};
use weft_api::{ArtifactId, ErrorCode, Id};

use crate::error::{Error, reject};
use crate::sql::Cached as _;

/// Separation of duties: whether `agent` did the work `evidence` judges: it owns or has held
/// a lease of the WorkItem, published an Artifact for it, or published an Artifact the
/// Evidence cites.
pub(super) fn did_the_work(
    txn: &Connection,
    evidence: &Evidence,
    agent: &str,
) -> Result<bool, Error> {
    let (work_item, group) = (evidence.work_item_id.as_str(), evidence.group_id.as_str());
    let on_the_work_item: bool = txn.row(
        "SELECT EXISTS (SELECT 1 FROM work_items WHERE work_item_id = ?1 AND group_id = ?2 AND owner = ?3)
             OR EXISTS (SELECT 1 FROM leases WHERE work_item_id = ?1 AND agent_id = ?3)
             OR EXISTS (SELECT 1 FROM manifests WHERE work_item_id = ?1 AND group_id = ?2 AND producer = ?3)",
        [work_item, group, agent],
        |row| row.get(0),
    )?;
    if on_the_work_item {
        return Ok(true);
    }
    for artifact in &evidence.artifacts {
        let published: bool = txn.row(
            "SELECT EXISTS (SELECT 1 FROM manifests WHERE blake3 = ?1 AND producer = ?2)",
            params![&artifact.0[..], agent],
            |row| row.get(0),
        )?;
        if published {
            return Ok(true);
        }
    }
    Ok(false)
}

/// EVD-1 for a correction: the superseded record must be of the same Group (else it is
/// unknown: another Group's Evidence is never confirmed to exist), Mission, WorkItem and
/// criterion, and the corrector its producer or a reviewer or coordinator.
pub(super) fn check_supersedes(
    conn: &Connection,
    earlier: &ArtifactId,
    evidence: &Evidence,
    signer: &Id,
    standing: Standing,
) -> Result<(), Error> {
    let target: Option<(String, String, String, String, String)> = conn
        .row(
            "SELECT group_id, mission_id, work_item_id, criterion, producer FROM evidence WHERE evidence_id = ?1",
            [&earlier.0[..]],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?, row.get(4)?)),
        )
        .optional()?;
    let Some((group_id, mission_id, work_item_id, criterion, producer)) = target else {
        return Err(reject(
            ErrorCode::UnknownEvidence,
            format!("supersedes names unknown Evidence {earlier}"),
        ));
    };
    if group_id != evidence.group_id.as_str() {
        return Err(reject(
            ErrorCode::UnknownEvidence,
            format!("supersedes names unknown Evidence {earlier}"),
        ));
    }
    if mission_id != evidence.mission_id.as_str()
        || work_item_id != evidence.work_item_id.as_str()
        || criterion != evidence.criterion
    {
        return Err(reject(
            ErrorCode::SupersedesMismatch,
            "supersedes names Evidence of another Mission, WorkItem or criterion",
        ));
    }
    if !may_supersede(standing, producer == signer.as_str()) {
        return Err(reject(
            ErrorCode::Forbidden,
            format!(
                "only {producer}, or a reviewer or coordinator of {group_id}, may supersede {earlier}"
            ),
        ));
    }
    Ok(())
}
