//! Evidence: recording signed records, reading them by criterion, and the built-in
//! deterministic reviewer (EVD-3 steps 1, 2 and 5: integrity and schema checks whose results
//! are preserved as Evidence signed by the server's key).
//!
//! Long (about 680 lines) because recording checks every rule of EVD-1 and EVD-4 in one
//! place, in two halves: before the writer ([`Engine::prepare_evidence`]) and in its
//! transaction ([`Prepared::record`]), which the review's reaction (`reactions.rs`) calls too.

pub(crate) mod handle;
mod plan;
mod reviewer;
mod with_token;

use crate::sql::Connection;
use weft_api::evidence::{AUTHORITY_AGENT, Evidence, MethodKind, Outcome};
use weft_api::session::Role;
use weft_api::verdict::{Standing, may_claim, on_own_work};
use weft_api::views::{CriteriaView, EvidencePage, EvidenceRecord, EvidenceRecorded};
use weft_api::{ArtifactId, Envelope, ErrorCode, Id};

use crate::access::{Reader, can_read_artifact, group_exists, membership};
use crate::error::Error;
use crate::error::reject;
use crate::events::to32;
use crate::evidence::handle::Evidence as Handle;
use crate::signatures::{AuthorityMay, Signed};
use crate::standing::decode;

/// Filters of `GET /v1/evidence`.
#[derive(Clone, Debug, Default)]
pub struct EvidenceFilter {
    pub work_item_id: Option<Id>,
    pub criterion: Option<String>,
    pub outcome: Option<Outcome>,
    pub method: Option<MethodKind>,
    pub producer: Option<Id>,
    pub mission_id: Option<Id>,
    pub artifact: Option<ArtifactId>,
    /// Only the records that supersede this one (its corrections).
    pub supersedes: Option<ArtifactId>,
    /// Cursor from a previous page: only records older than it.
    pub after: Option<u64>,
    pub limit: u32,
}

/// Whether Evidence may cite `artifact` (EVD-4): published for its Mission in its Group, or
/// published there as reusable knowledge (CTX-6).
fn citable(conn: &Connection, artifact: &ArtifactId, evidence: &Evidence) -> Result<bool, Error> {
    let group = evidence.group_id.as_str();
    let in_mission = crate::rows::manifests::published_in_mission(
        conn,
        artifact,
        group,
        evidence.mission_id.as_str(),
    )?;
    Ok(in_mission || crate::rows::reusable_artifacts::get(conn, group, artifact)?.is_some())
}

/// A signed Evidence record whose signature and caller checked out, ready for the writer's
/// transaction ([`Prepared::record`]).
pub(crate) struct Prepared {
    signer: Id,
    keyid: weft_api::KeyId,
    evidence_id: ArtifactId,
    evidence: Evidence,
    is_authority: bool,
    envelope_json: String,
    /// The store's clock: the record is judged and stamped at the time it holds its Group's
    /// lock, not when it was prepared (a wait for the lock may be long on a shared index).
    clock: std::sync::Arc<dyn crate::clock::Clock>,
    /// Who records it when that must be checked again in its transaction (a capability
    /// token), at the same instant as the rest.
    acting: Option<crate::acting::Acting>,
}

impl Handle<'_> {
    /// Verifies and records a signed Evidence payload, appending `evidence.recorded`.
    pub async fn record_evidence(
        &self,
        envelope: Envelope,
        caller: &Reader,
    ) -> Result<(EvidenceRecorded, bool), Error> {
        self.record_evidence_as(envelope, caller, None).await
    }

    /// [`Self::record_evidence`] by `acting` (a capability token), checked again in the
    /// record's transaction once it holds its Group's lock, at the instant the rest is judged:
    /// a token revoked or expired after the check at the door, and before the commit, records
    /// nothing (`work/tokens.rs`: revocation takes effect at once). The Group's lock comes
    /// before the token's row, the order every use takes them in.
    pub(crate) async fn record_evidence_as(
        &self,
        envelope: Envelope,
        caller: &Reader,
        acting: Option<crate::acting::Acting>,
    ) -> Result<(EvidenceRecorded, bool), Error> {
        let mut prepared = self.prepare_evidence(envelope, caller).await?;
        prepared.acting = acting;
        // Not run again after a deadlock (`db/again.rs`): an `Idempotency-Key`'s claim is
        // armed for one run of the job, whose answer it stores with the work.
        let group = prepared.evidence.group_id.to_string();
        self.0.faults.publications().pass().await;
        self.0
            .db
            .write_in(&group, move |txn| prepared.record(txn))
            .await
    }

    /// Checks a signed Evidence record's signature and whether `caller` may record it: the
    /// part of [`Engine::record_evidence`] before the writer (the reviewer's reaction records
    /// several in one transaction of its own, `reactions.rs`).
    pub(crate) async fn prepare_evidence(
        &self,
        envelope: Envelope,
        caller: &Reader,
    ) -> Result<Prepared, Error> {
        let Signed {
            signer,
            keyid,
            payload_id: evidence_id,
            value,
        } = self
            .0
            .verify_signed::<Evidence>(&envelope, AuthorityMay::Sign)
            .await?;
        let evidence = value.into_inner();
        let is_authority = signer.as_str() == AUTHORITY_AGENT;
        match caller {
            Reader::Agent { agent_id, .. } if *agent_id != signer => {
                return Err(reject(
                    ErrorCode::ProducerMismatch,
                    "an agent records only Evidence it signed",
                ));
            }
            Reader::Agent { .. } if is_authority => {
                return Err(reject(
                    ErrorCode::ProducerMismatch,
                    "only the server records its own Evidence",
                ));
            }
            // A session acts in its own Group only: elsewhere it is not a member.
            Reader::Agent { group_id, .. } if *group_id != evidence.group_id => {
                return Err(reject(
                    ErrorCode::NotAMember,
                    format!("{signer} is not a member of {}", evidence.group_id),
                ));
            }
            _ => {}
        }
        let envelope_json = serde_json::to_string(&envelope).map_err(Error::backend)?;
        Ok(Prepared {
            signer,
            keyid,
            evidence_id,
            evidence,
            is_authority,
            envelope_json,
            clock: std::sync::Arc::clone(&self.0.clock),
            acting: None,
        })
    }
}

/// Group `group` exists; its lock is taken (PostgreSQL) before anything of it is read: a
/// fence committed by another writer (another server, or this one's first lane) then came
/// before these reads or waits for this record, and of two identical records sent at once
/// the second finds the first.
fn lock_group(txn: &crate::unit::Tx<'_>, group: &str) -> Result<(), Error> {
    if !group_exists(txn, group)? {
        return Err(reject(
            ErrorCode::UnknownGroup,
            format!("group {group} does not exist"),
        ));
    }
    crate::rows::groups::lock(txn, group)
}

/// The signer's standing in the record's Group (locked) and the Reader it records as, after
/// the checks on who signed: the key is still the signer's, its Membership's roles allow
/// recording (an approval of reusable knowledge is an approver's, CTX-6), and a
/// Mission-scoped member records for its Missions only (CTX-5).
fn producer(
    txn: &crate::unit::Tx<'_>,
    signer: &Id,
    keyid: &weft_api::KeyId,
    is_authority: bool,
    evidence: &Evidence,
) -> Result<(Reader, Standing), Error> {
    let group = evidence.group_id.as_str();
    let (producer, standing) = if is_authority {
        (Reader::Admin, Standing::Authority)
    } else {
        crate::access::key_still_the_signers(txn, keyid, signer)?;
        let standing = match membership(txn, group, signer.as_str())? {
            // CTX-6: approving reusable knowledge is an approver's Evidence, and
            // the only Evidence an approver records.
            Some((roles, _)) if evidence.is_reuse_approval() => {
                if !roles.contains(&Role::Approver) {
                    return Err(reject(
                        ErrorCode::Forbidden,
                        format!(
                            "only an Organization approver approves reusable knowledge (CTX-6); {signer} is not one in {group}"
                        ),
                    ));
                }
                Standing::Approver
            }
            Some((roles, _)) => match Standing::of_roles(&roles) {
                Some(standing) => standing,
                None => {
                    return Err(reject(
                        ErrorCode::Forbidden,
                        format!("{signer} may not record Evidence in {group}"),
                    ));
                }
            },
            None => {
                return Err(reject(
                    ErrorCode::NotAMember,
                    format!("{signer} is not a member of {group}"),
                ));
            }
        };
        (
            crate::access::agent_reader(txn, &evidence.group_id, signer)?,
            standing,
        )
    };
    // CTX-5: a Mission-scoped member records Evidence for its Missions only,
    // answered as for another Group whether or not the Mission exists.
    if !producer.sees_mission(group, evidence.mission_id.as_str()) {
        return Err(reject(
            ErrorCode::NotAMember,
            format!(
                "{signer} is not a member of Mission {} in {group}",
                evidence.mission_id
            ),
        ));
    }
    Ok((producer, standing))
}

impl Prepared {
    /// Records it in the writer's transaction, after the checks that need the index; `false`
    /// with the earlier record's sequence when the same record is there already.
    pub(crate) fn record(
        self,
        txn: &crate::unit::Tx<'_>,
    ) -> Result<(EvidenceRecorded, bool), Error> {
        let Prepared {
            signer,
            keyid,
            evidence_id,
            evidence,
            is_authority,
            envelope_json,
            clock,
            acting,
        } = self;
        // The same record again is a retry, answered as the first time (idempotent, as a
        // manifest's: its id is the hash of a payload naming its signer, so only the signer
        // can send it). One whose envelope went by a retention policy (issue #46) is refused,
        // naming the disposal (recording it again would only be disposed of again); the
        // signer's checks come first, so one since removed or scoped out of the Mission
        // (CTX-5) learns nothing of the disposal. The server's own review, run again,
        // finds it recorded.
        lock_group(txn, evidence.group_id.as_str())?;
        let now = clock.now();
        if let Some(acting) = acting {
            acting.check(txn, &crate::clock::format_instant(now))?;
        }
        if let Some((sequence, disposed)) = crate::rows::evidence::sequence_of(txn, &evidence_id)? {
            if let Some(disposed) = disposed.filter(|_| !is_authority) {
                producer(txn, &signer, &keyid, is_authority, &evidence)?;
                return Err(Error::RecordDisposed(evidence_id, disposed));
            }
            return Ok((
                EvidenceRecorded {
                    evidence_id,
                    sequence,
                },
                false,
            ));
        }
        let (producer, standing) = producer(txn, &signer, &keyid, is_authority, &evidence)?;
        let group = evidence.group_id.as_str();
        // Separation of duties: on work it did itself a producer's word is a Worker's
        // claim, whatever its roles (it may not review itself, nor supersede another's
        // record there).
        let own_work = standing != Standing::Worker
            && !is_authority
            && crate::standing::did_the_work(txn, &evidence, signer.as_str())?;
        let standing = if own_work {
            on_own_work(standing)
        } else {
            standing
        };
        // EVD-1: a method kind is claimed only by a standing allowed to produce it.
        let method = evidence.method.kind;
        if !may_claim(standing, method) {
            let why = if own_work {
                format!(
                    "{signer} did this work (separation of duties), so its Evidence on it is a worker's claim: "
                )
            } else {
                String::new()
            };
            return Err(reject(
                ErrorCode::Forbidden,
                format!(
                    "{why}a {} may not record Evidence of method {}",
                    standing.as_str(),
                    method.as_str()
                ),
            ));
        }
        // On a shared index, a collection batch deciding on a cited blob has committed or has
        // not begun (`artifacts/collection.rs`): a batch that began later sees this citation.
        if !evidence.artifacts.is_empty() {
            crate::rows::blob_disposals::fence(txn)?;
        }
        for artifact in &evidence.artifacts {
            if !can_read_artifact(txn, &producer, artifact)? {
                return Err(reject(
                    ErrorCode::UnknownArtifact,
                    format!("{artifact} is not published in a group {signer} can read"),
                ));
            }
            // EVD-4's "referenced Artifacts": any the producer can read that was
            // published for this Mission in this Group (another WorkItem's reference
            // data included), or reusable knowledge of the Group (issue #40).
            if !citable(txn, artifact, &evidence)? {
                return Err(reject(
                    ErrorCode::MissionMismatch,
                    format!(
                        "{artifact} is neither published for Mission {} in {group} nor reusable there",
                        evidence.mission_id
                    ),
                ));
            }
            // Issue #46: Evidence cites bytes a reviewer can fetch; bytes a retention policy
            // disposed of are gone (their manifest is a tombstone).
            if crate::rows::blobs::is_disposed(txn, artifact)? {
                return Err(reject(
                    ErrorCode::Disposed,
                    format!(
                        "the bytes of {artifact} were disposed of by a retention policy: upload them again, then cite them"
                    ),
                ));
            }
        }
        if let Some(earlier) = &evidence.supersedes {
            crate::standing::check_supersedes(txn, earlier, &evidence, &signer, standing)?;
        }
        let ownership = crate::access::require_work_item(
            txn,
            &producer,
            group,
            evidence.mission_id.as_str(),
            evidence.work_item_id.as_str(),
        )?;
        check_execution(txn, &evidence, signer.as_str(), now, ownership)?;
        let sequence = crate::weighing::insert_record(
            txn,
            evidence_id,
            &evidence,
            &signer,
            &envelope_json,
            standing,
            now,
        )?;
        Ok((
            EvidenceRecorded {
                evidence_id,
                sequence,
            },
            true,
        ))
    }
}

impl Handle<'_> {
    /// Evidence matching `filter`, newest first, visible to `reader`.
    pub async fn list_evidence(
        &self,
        filter: EvidenceFilter,
        reader: &Reader,
    ) -> Result<EvidencePage, Error> {
        let reader = reader.clone();
        let limit = filter.limit.clamp(1, 1000);
        self.0
            .db
            .read(move |conn| {
                let query = crate::rows::evidence::ListQuery {
                    work_item_id: filter.work_item_id.as_ref().map(Id::to_string),
                    criterion: filter.criterion.as_deref(),
                    outcome: filter.outcome.map(|v| v.as_str()),
                    method_kind: filter.method.map(|v| v.as_str()),
                    producer: filter.producer.as_ref().map(Id::to_string),
                    mission_id: filter.mission_id.as_ref().map(Id::to_string),
                    artifact: filter.artifact,
                    supersedes: filter.supersedes,
                    before: filter.after,
                    limit,
                };
                let rows = crate::rows::evidence::list(conn, &query, &reader.seer())?;
                let mut items = Vec::new();
                let mut next = None;
                let mut last_rowid = 0;
                for (index, (rowid, evidence_id, group_id, sequence, envelope)) in
                    rows.into_iter().enumerate()
                {
                    if index as u32 == limit {
                        next = Some(last_rowid);
                        break;
                    }
                    last_rowid = rowid;
                    let (envelope, evidence) = decode(&envelope)?;
                    items.push(EvidenceRecord {
                        evidence_id: ArtifactId(to32(evidence_id)?),
                        group_id,
                        sequence,
                        envelope,
                        evidence,
                    });
                }
                Ok(EvidencePage { items, next })
            })
            .await
    }

    pub async fn evidence(
        &self,
        evidence_id: ArtifactId,
        reader: &Reader,
    ) -> Result<EvidenceRecord, Error> {
        let reader = reader.clone();
        self.0
            .db
            .read(move |conn| {
                let row = crate::rows::evidence::visible_one(conn, &evidence_id, &reader.seer())?;
                let Some((group_id, sequence, envelope, disposed)) = row else {
                    return Err(reject(
                        ErrorCode::NotFound,
                        format!("no Evidence {evidence_id} is visible to you"),
                    ));
                };
                // Its signed envelope went by policy (issue #46): 410, naming the Event.
                if let Some(disposed) = disposed {
                    return Err(Error::RecordDisposed(evidence_id, disposed));
                }
                let (envelope, evidence) = decode(&envelope)?;
                Ok(EvidenceRecord {
                    evidence_id,
                    group_id,
                    sequence,
                    envelope,
                    evidence,
                })
            })
            .await
    }

    /// For every criterion of a WorkItem of one Mission with Evidence: the verdict in force (a
    /// review outranks a Worker's claim, EVD-1), counts by outcome, producers, and whether
    /// the records in force of the verdict's rank disagree. `mission_id` is required when
    /// the WorkItem id has Evidence under more than one Mission the reader can see.
    pub async fn criteria(
        &self,
        work_item_id: Id,
        mission_id: Option<Id>,
        reader: &Reader,
    ) -> Result<CriteriaView, Error> {
        let reader = reader.clone();
        self.0
            .db
            .read(move |conn| {
                crate::weighing::criteria_of(conn, &work_item_id, mission_id.as_ref(), &reader)
            })
            .await
    }

    /// Registers a schema URI as naming a published schema artifact, for the reviewer.
    pub async fn register_schema(&self, uri: String, artifact: ArtifactId) -> Result<(), Error> {
        if uri.is_empty()
            || uri.len() > 2048
            || !(uri.starts_with("https://")
                || uri.starts_with("http://")
                || uri.starts_with("urn:"))
        {
            return Err(reject(
                ErrorCode::BadRequest,
                "uri must be an absolute http(s) or urn URI of at most 2048 bytes",
            ));
        }
        self.0
            .db
            .write(move |txn| {
                if !can_read_artifact(txn, &Reader::Admin, &artifact)? {
                    return Err(reject(
                        ErrorCode::UnknownArtifact,
                        format!("{artifact} is not a published artifact"),
                    ));
                }
                crate::rows::schemas::register(txn, &uri, &artifact)
            })
            .await
    }
}

/// DESIGN §5.1, issue #12 (LSE-4/5): the WorkItem's owner names the Execution Lease its
/// Evidence was produced under, checked like a manifest's (`access::lease`); anyone
/// else naming one is checked the same way. A stale or missing lease is `stale_lease`.
fn check_execution(
    conn: &Connection,
    evidence: &Evidence,
    signer: &str,
    now: chrono::DateTime<chrono::Utc>,
    (owner, ownership_epoch): (Option<String>, u64),
) -> Result<(), Error> {
    let Some(execution) = &evidence.execution else {
        if owner.as_deref() == Some(signer) {
            return Err(reject(
                ErrorCode::StaleLease,
                format!(
                    "{signer} owns WorkItem {}: its Evidence names the current Execution Lease (execution.leaseId, LSE-4)",
                    evidence.work_item_id
                ),
            ));
        }
        return Ok(());
    };
    let now = crate::clock::format_instant(now);
    match crate::access::lease::check_lease(
        conn,
        evidence.work_item_id.as_str(),
        execution.lease_id.as_str(),
        execution.ownership_epoch,
        signer,
        &now,
        (owner.as_deref(), ownership_epoch),
    )? {
        Ok(()) => Ok(()),
        // Evidence of a fenced owner is refused like any stale one: only manifests are kept
        // as inert records (OFL-2 names results).
        Err(stale) => Err(stale.into_error_for("Evidence")),
    }
}
