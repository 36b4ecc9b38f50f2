//! What a producer's standing lets it do with Evidence (EVD-1): separation of duties (who did
//! the work a record judges; such a producer's word weighs as a Worker's,
//! `verdict::on_own_work`, both when it records, in the record's transaction, and whenever
//! records are weighed, so doing the work after recording a review does not keep the review),
//! whether a producer may supersede the record it names, and whether a record is an
//! approver's approval of reusable knowledge (CTX-6). A leaf over `rows/`, shared by the
//! features that weigh Evidence: recording it (`evidence/`), accepting work (`work/checks.rs`)
//! and publishing reusable knowledge (`artifacts/reuse.rs`).

use std::collections::BTreeSet;

use crate::sql::Connection;
use base64::Engine as _;
use weft_api::dsse::BASE64;
use weft_api::evidence::MethodKind;
use weft_api::evidence::{Evidence, Outcome};
use weft_api::verdict::{
    Standing, may_supersede, may_supersede_method, may_supersede_producer, on_own_work,
};
use weft_api::{ArtifactId, Envelope, ErrorCode, Id};

use crate::error::{Error, reject};

/// Separation of duties: the Agents who did the work of WorkItem `work_item` in `group`, at
/// any time so far: its owner and every Agent that held a lease of it (leases are never
/// deleted, so a reassignment does not forget one; a manifest for a WorkItem is accepted only
/// under its producer's own lease, so every producer is among them). Empty for a WorkItem of
/// another Group, so nothing here tells a caller about one. Two indexed look-ups.
pub(crate) fn worked_on(
    conn: &Connection,
    work_item: &str,
    group: &str,
) -> Result<BTreeSet<String>, Error> {
    let mut agents = crate::rows::leases::holders(conn, work_item, group)?;
    agents.extend(crate::rows::work_items::owner_in(conn, work_item, group)?);
    Ok(agents)
}

/// The Evidence records of `work_item` superseded now: those a later record names in
/// `supersedes` whose producer, weighed now ([`weighed`]), may supersede it (its own record,
/// or a reviewer's or coordinator's that did not do the work). A correction recorded before
/// its producer took the work stops counting once it does, as its verdict does.
pub(crate) fn superseded(
    conn: &Connection,
    work_item: &str,
    workers: &BTreeSet<String>,
) -> Result<BTreeSet<Vec<u8>>, Error> {
    let rows = crate::rows::evidence::corrections(conn, work_item)?;
    let mut superseded = BTreeSet::new();
    for (earlier, corrector, standing, producer, earlier_method, method, earlier_standing) in rows {
        let now = weighed(stored(&standing)?, &corrector, workers);
        // A correction of the Authority's record by anyone else does not count (kept from
        // before the rule, it would now be refused).
        if !may_supersede_producer(stored(&earlier_standing)?, now) {
            continue;
        }
        // Records kept before issue #40 may name a deterministic check from another method:
        // they do not count, as they would now be refused.
        if may_supersede(now, corrector == producer)
            && may_supersede_method(stored_method(&earlier_method)?, stored_method(&method)?)
        {
            superseded.insert(earlier);
        }
    }
    Ok(superseded)
}

/// A method kind as the `evidence` table stores it.
fn stored_method(text: &str) -> Result<MethodKind, Error> {
    serde_json::from_value(serde_json::Value::String(text.to_owned()))
        .map_err(|_| Error::backend(std::io::Error::other(format!("unknown method {text}"))))
}

/// A standing as the `evidence` table stores it.
pub(crate) fn stored(text: &str) -> Result<Standing, Error> {
    text.parse()
        .map_err(|()| Error::backend(std::io::Error::other(format!("unknown standing {text}"))))
}

/// The standing `recorded` (as stored with a record by `producer`) weighs with now: a
/// Worker's if `producer` did the work (`workers`, from [`worked_on`]), whenever that
/// happened, before or after the record; so a reviewer that records first and takes the
/// work later has not reviewed itself.
pub(crate) fn weighed(recorded: Standing, producer: &str, workers: &BTreeSet<String>) -> Standing {
    if workers.contains(producer) {
        on_own_work(recorded)
    } else {
        recorded
    }
}

/// Separation of duties at record time: whether `agent` did the work `evidence` judges (see
/// [`worked_on`]) or published, in the Evidence's Group, an Artifact the Evidence cites.
pub(crate) fn did_the_work(
    txn: &Connection,
    evidence: &Evidence,
    agent: &str,
) -> Result<bool, Error> {
    let (work_item, group) = (evidence.work_item_id.as_str(), evidence.group_id.as_str());
    if worked_on(txn, work_item, group)?.contains(agent) {
        return Ok(true);
    }
    for artifact in &evidence.artifacts {
        let published = crate::rows::manifests::published_by(txn, artifact, group, agent)?;
        if published {
            return Ok(true);
        }
    }
    Ok(false)
}

/// EVD-1 for a correction: the superseded record must be of the same Group (else it is
/// unknown: another Group's Evidence is never confirmed to exist), Mission, WorkItem and
/// criterion, and the corrector its producer or a reviewer or coordinator.
pub(crate) fn check_supersedes(
    conn: &Connection,
    earlier: &ArtifactId,
    evidence: &Evidence,
    signer: &Id,
    standing: Standing,
) -> Result<(), Error> {
    let target = crate::rows::evidence::target(conn, earlier)?;
    let Some((group_id, mission_id, work_item_id, criterion, producer, method, earlier_standing)) =
        target
    else {
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
    // Another Mission's record is not this one's to correct; to a producer scoped away from
    // that Mission it is not there at all (CTX-5), so it answers as an unknown one to all.
    if mission_id != evidence.mission_id.as_str() {
        return Err(reject(
            ErrorCode::UnknownEvidence,
            format!("supersedes names unknown Evidence {earlier}"),
        ));
    }
    if work_item_id != evidence.work_item_id.as_str() || criterion != evidence.criterion {
        return Err(reject(
            ErrorCode::SupersedesMismatch,
            "supersedes names Evidence of another WorkItem or criterion",
        ));
    }
    if !may_supersede_method(stored_method(&method)?, evidence.method.kind) {
        return Err(reject(
            ErrorCode::SupersedesMismatch,
            format!("{earlier} is a {method}: only a re-run of the same check supersedes it"),
        ));
    }
    if !may_supersede_producer(stored(&earlier_standing)?, standing) {
        return Err(reject(
            ErrorCode::Forbidden,
            format!(
                "{earlier} is the Authority's own check: only a new run of the built-in reviewer outweighs it"
            ),
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

/// A recorded Evidence's envelope, as the `evidence` table keeps it, and its payload.
pub(crate) fn decode(envelope_json: &str) -> Result<(Envelope, Evidence), Error> {
    let envelope: Envelope = serde_json::from_str(envelope_json).map_err(Error::backend)?;
    let payload = BASE64.decode(&envelope.payload).map_err(Error::backend)?;
    let evidence = Evidence::parse(&payload)?;
    Ok((envelope, evidence))
}

/// The approval's signer and Mission, if `evidence_id` is an approver's passing, unsuperseded
/// `reuse` Evidence about `artifact` in `group`.
///
/// Evidence of a Mission `reader` does not see answers as absent (CTX-5: `unknown_evidence`,
/// where `evidence_missing` told a Mission-scoped caller that it exists).
pub(crate) fn reuse_approval(
    conn: &Connection,
    reader: &crate::access::Reader,
    group: &str,
    artifact: &ArtifactId,
    evidence_id: &ArtifactId,
) -> Result<(String, String), Error> {
    let row = crate::rows::evidence::approval(conn, evidence_id, group)?
        .filter(|(_, mission_id, _, _)| reader.sees_mission(group, mission_id));
    let Some((producer, mission_id, standing, envelope)) = row else {
        return Err(reject(
            ErrorCode::UnknownEvidence,
            format!("no Evidence {evidence_id} in {group}"),
        ));
    };
    let (_, evidence) = decode(&envelope)?;
    let superseded = crate::rows::evidence::is_superseded(conn, evidence_id)?;
    // Separation of duties at weigh time: an approver that did the work since is a worker.
    let workers = worked_on(conn, evidence.work_item_id.as_str(), group)?;
    let approver_now = standing == Standing::Approver.as_str() && !workers.contains(&producer);
    let approves = approver_now
        && evidence.is_reuse_approval()
        && evidence.subject.id == artifact.to_string()
        && evidence.result.outcome == Outcome::Pass
        && !superseded;
    if !approves {
        return Err(reject(
            ErrorCode::EvidenceMissing,
            format!(
                "{evidence_id} is not an approver's passing, current `reuse` Evidence about {artifact} (CTX-6)"
            ),
        ));
    }
    Ok((producer, mission_id))
}
