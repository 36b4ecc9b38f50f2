//! Reusable knowledge (CTX-6): an Artifact becomes readable and citable in every Mission of its
//! Group only once it is published as reusable, classified and approved by an Organization
//! approver's signed Evidence. The record keeps that provenance (the approval, its signer, the
//! Mission the Artifact came from) and its `artifact.reuse_published` Event announces it.
//!
//! Who may read or cite what is decided in `access.rs` (`can_read_artifact`, `may_cite`); this
//! file only writes and reads the record.

use crate::sql::Connection;
use weft_api::kinds;
use weft_api::manifest::Classification;
use weft_api::session::Role;
use weft_api::views::{ReuseRecord, ReuseRequest};
use weft_api::{ArtifactId, ErrorCode, EventPayload, Id};

use crate::access::Session;
use crate::access::{can_read_artifact, membership};
use crate::artifacts::handle::Artifacts;
use crate::clock::format_instant;
use crate::error::{Error, reject};
use crate::events::{self};

impl Artifacts<'_> {
    /// `POST /v1/artifacts/{digest}/reuse`: publishes `artifact` as reusable knowledge in the
    /// caller's Group. The caller is an approver of the Group that can read the Artifact (else
    /// `forbidden`, or `not_found` as for an Artifact that does not exist); the approval is
    /// that Group's Evidence about this Artifact with criterion `reuse`, recorded with approver
    /// standing, outcome `pass` and not superseded (else `unknown_evidence` when there is no such
    /// record, `evidence_missing` when the record is not such an approval). The same approval
    /// again answers the record (not new); another one for a reusable Artifact is `conflict`.
    pub async fn publish_reusable(
        &self,
        artifact: ArtifactId,
        request: ReuseRequest,
        session: &Session,
    ) -> Result<(ReuseRecord, bool), Error> {
        let reader = session.reader();
        let (group_id, agent_id) = (session.group_id.clone(), session.agent_id.clone());
        let acting = crate::acting::Acting::session(session);
        let clock = std::sync::Arc::clone(&self.0.clock);
        self.0
            .db
            .write(move |txn| {
                let group = group_id.as_str();
                // The Group's lock first (PostgreSQL): no records batch (`records.rs`) disposes
                // of the approval between its check and this record citing it.
                crate::rows::groups::lock(txn, group)?;
                // Judged and stamped at the time the lock is held (a wait for another server's
                // batch may be long). The session again, under the lock: another server's
                // cache may have served one that a key rotation or a deactivation ended.
                let now = clock.now();
                acting.check(txn, &format_instant(now))?;
                match membership(txn, group, agent_id.as_str())? {
                    Some((roles, _)) if roles.contains(&Role::Approver) => {}
                    _ => {
                        return Err(reject(
                            ErrorCode::Forbidden,
                            "only an Organization approver publishes reusable knowledge (CTX-6)",
                        ));
                    }
                }
                if !can_read_artifact(txn, &reader, &artifact)? {
                    return Err(reject(
                        ErrorCode::NotFound,
                        format!("no artifact {artifact} is visible to you"),
                    ));
                }
                // Reusable knowledge is read through its manifests: one must still be kept
                // in the Group (not only tombstones, issue #46).
                if !crate::rows::manifests::kept_in_group(txn, &artifact, group)? {
                    return Err(reject(
                        ErrorCode::NotFound,
                        format!(
                            "no manifest of {artifact} is kept in group {group}: its records were disposed of by policy"
                        ),
                    ));
                }
                if let Some(existing) = reuse_record(txn, group, &artifact)? {
                    if existing.approval == request.approval
                        && existing.classification == request.classification
                    {
                        return Ok((existing, false));
                    }
                    return Err(reject(
                        ErrorCode::Conflict,
                        format!(
                            "{artifact} is reusable already, under approval {}",
                            existing.approval
                        ),
                    ));
                }
                let (approved_by, mission_id) =
                    crate::standing::reuse_approval(txn, &reader, group, &artifact, &request.approval)?;
                let event = EventPayload::ReusePublished(kinds::ReusePublished {
                    approved_by: Id::parse("agentId", &approved_by)?,
                    artifact,
                    classification: request.classification,
                    evidence_id: request.approval,
                    mission_id: Id::parse("missionId", &mission_id)?,
                    published_by: agent_id.clone(),
                });
                let sequence = events::append(txn, &group_id, &event, now)?;
                let published_at = format_instant(now);
                crate::rows::reusable_artifacts::insert(
                    txn,
                    group,
                    &artifact,
                    &crate::rows::reusable_artifacts::Row {
                        classification: request.classification.as_str().to_owned(),
                        evidence_id: request.approval,
                        approved_by: approved_by.clone(),
                        mission_id: mission_id.clone(),
                        published_by: agent_id.to_string(),
                        sequence,
                        published_at: published_at.clone(),
                    },
                )?;
                Ok((
                    ReuseRecord {
                        artifact,
                        group_id: group_id.to_string(),
                        classification: request.classification,
                        approval: request.approval,
                        approved_by,
                        mission_id,
                        published_by: agent_id.to_string(),
                        published_at,
                        sequence,
                    },
                    true,
                ))
            })
            .await
    }
}

/// The reuse record of `artifact` in `group`, if it was published as reusable there.
pub(crate) fn reuse_record(
    conn: &Connection,
    group: &str,
    artifact: &ArtifactId,
) -> Result<Option<ReuseRecord>, Error> {
    let Some(crate::rows::reusable_artifacts::Row {
        classification,
        evidence_id,
        approved_by,
        mission_id,
        published_by,
        sequence,
        published_at,
    }) = crate::rows::reusable_artifacts::get(conn, group, artifact)?
    else {
        return Ok(None);
    };
    let classification: Classification =
        serde_json::from_value(serde_json::Value::String(classification))
            .map_err(Error::backend)?;
    Ok(Some(ReuseRecord {
        artifact: *artifact,
        group_id: group.to_owned(),
        classification,
        approval: evidence_id,
        approved_by,
        mission_id,
        published_by,
        published_at,
        sequence,
    }))
}
