//! Context Packages (DESIGN §11, CTX-1…4, CTX-7): publishing a signed version in one writer
//! transaction with its `context.published` Event, and forwarding a version to another Group
//! with a `context.forwarded` Event in both. Reads and provenance are in `reads.rs`.
//!
//! A package is a summary, never state: nothing here changes a Mission or WorkItem, and the
//! log it cites stays the authority (CTX-1). Every check runs inside the transaction that would
//! write, so a refused package appends nothing and changes nothing.

pub(crate) mod handle;
mod reads;

pub(crate) use reads::check_rows;

use crate::sql::Connection;
use weft_api::context::{
    ContextForwardedAnswer, ContextPackage, ContextPublishedAnswer, ForwardRequest, Link,
    check_chain,
};
use weft_api::kinds::{ContextForwarded, ContextPublished};
use weft_api::manifest::Classification;
use weft_api::session::Role;
use weft_api::{ArtifactId, Envelope, ErrorCode, EventPayload, Id};

use crate::access::{Reader, Session, can_read_artifact, may_cite, membership, mission_scope};
use crate::acting::Acting;
use crate::clock::format_instant;
use crate::context::handle::Context;
use crate::error::{Error, reject};
use crate::events;
use crate::signatures::{AuthorityMay, Signed};

/// Roles that may write a Mission's context: those that do its work or judge it. An auditor
/// reads; an approver grants approvals.
const WRITERS: [Role; 3] = [Role::Worker, Role::Coordinator, Role::Reviewer];

/// The chain link of the version `context_id` indexed in `group_id`, if any.
fn link_by_id(conn: &Connection, group_id: &str, id: &ArtifactId) -> Result<Option<Link>, Error> {
    crate::rows::context_packages::link_by_id(conn, group_id, id)?
        .map(|(package_id, version, mission_id)| link(*id, &package_id, version, &mission_id))
        .transpose()
}

/// The latest version of `package_id` indexed in `group_id`, if any.
fn latest_link(conn: &Connection, group_id: &str, package_id: &str) -> Result<Option<Link>, Error> {
    crate::rows::context_packages::latest_link(conn, group_id, package_id)?
        .map(|(id, version, mission_id)| link(id, package_id, version, &mission_id))
        .transpose()
}

fn link(id: ArtifactId, package_id: &str, version: u64, mission_id: &str) -> Result<Link, Error> {
    Ok(Link {
        id,
        package_id: Id::parse("packageId", package_id)?,
        version,
        mission_id: Id::parse("missionId", mission_id)?,
    })
}

/// Whether `agent_id` is a member of `group_id` allowed to write context there:
/// `not_a_member` or `forbidden` otherwise. `need` narrows the roles (a forward needs a
/// coordinator).
fn check_writer(
    conn: &Connection,
    group_id: &str,
    agent_id: &str,
    need: &[Role],
) -> Result<(), Error> {
    match membership(conn, group_id, agent_id)? {
        None => Err(reject(
            ErrorCode::NotAMember,
            format!("{agent_id} is not a member of {group_id}"),
        )),
        Some((roles, _)) if roles.iter().any(|role| need.contains(role)) => Ok(()),
        Some(_) => Err(reject(
            ErrorCode::Forbidden,
            format!("{agent_id} may not write context in {group_id}"),
        )),
    }
}

/// The Mission and WorkItem scope must exist in the package's Group (a Mission of another
/// Group answers as one that does not exist).
fn check_scope(conn: &Connection, package: &ContextPackage) -> Result<(), Error> {
    let group = package.group_id.as_str();
    let mission = crate::rows::missions::group_of(conn, package.mission_id.as_str())?;
    if mission.as_deref() != Some(group) {
        return Err(reject(
            ErrorCode::NotFound,
            format!("no Mission {} in {group}", package.mission_id),
        ));
    }
    if let Some(work_item) = &package.work_item_id {
        let found = crate::rows::work_items::place(conn, work_item.as_str())?;
        if found != Some((group.to_owned(), package.mission_id.to_string())) {
            return Err(reject(
                ErrorCode::UnknownWorkItem,
                format!("no WorkItem {work_item} in Mission {}", package.mission_id),
            ));
        }
    }
    Ok(())
}

/// CTX-1: the cited range lies within the Group's log (from ≥ 1 and from ≤ to are checked by
/// the payload; the range is always of the payload's own Group).
fn check_range(conn: &Connection, package: &ContextPackage) -> Result<(), Error> {
    let (head, _) = events::head(conn, package.group_id.as_str())?;
    if package.source_events.to > head {
        return Err(reject(
            ErrorCode::EventsOutOfRange,
            format!(
                "sourceEvents reaches {} but the log of {} ends at {head}",
                package.source_events.to, package.group_id
            ),
        ));
    }
    Ok(())
}

/// Cited Artifacts must exist and be readable by the generator; one it cannot read answers
/// as one that does not exist.
fn check_artifacts(
    conn: &Connection,
    package: &ContextPackage,
    generator: &Reader,
) -> Result<(), Error> {
    for artifact in &package.artifacts {
        if !can_read_artifact(conn, generator, artifact)? {
            return Err(reject(
                ErrorCode::UnknownArtifact,
                format!(
                    "no artifact {artifact} is readable by {}",
                    package.generator.agent_id
                ),
            ));
        }
        // Another Mission's Artifact only once published as reusable knowledge (CTX-6).
        may_cite(conn, generator, package.mission_id.as_str(), artifact)??;
    }
    Ok(())
}

/// The highest classification of the Artifacts a package cites, as published in `group_id`
/// (`internal` when it cites none: a summary of a Group's log is internal to it).
fn classification(
    conn: &Connection,
    group_id: &str,
    artifacts: &[ArtifactId],
) -> Result<Classification, Error> {
    let mut highest = Classification::Internal;
    for artifact in artifacts {
        let found = crate::rows::manifests::classifications(conn, artifact, group_id)?;
        for text in found {
            let level: Classification =
                serde_json::from_value(serde_json::Value::String(text)).map_err(Error::backend)?;
            if level.rank() > highest.rank() {
                highest = level;
            }
        }
    }
    Ok(highest)
}

/// CTX-7: what may leave its Group. Public and internal knowledge may be forwarded to another
/// Group of the same Organization; confidential and restricted content never leaves its Group.
pub(crate) fn may_forward(level: Classification) -> bool {
    level.rank() <= Classification::Internal.rank()
}

impl Context<'_> {
    /// Publishes a Context Package version (`context.published`). `Ok((answer, false))` when
    /// this exact version was already published in the Group.
    pub async fn publish_context(
        &self,
        group_id: Id,
        envelope: Envelope,
        caller: &Reader,
    ) -> Result<(ContextPublishedAnswer, bool), Error> {
        let Signed {
            signer,
            keyid,
            payload_id: context_id,
            value,
        } = self
            .0
            .verify_signed::<ContextPackage>(&envelope, AuthorityMay::NotSign)
            .await?;
        let package = value.into_inner();
        if package.group_id != group_id {
            return Err(reject(
                ErrorCode::GroupMismatch,
                format!(
                    "the package is of {}, the route of {group_id}",
                    package.group_id
                ),
            ));
        }
        match caller {
            Reader::Agent { agent_id, .. } if *agent_id != signer => {
                return Err(reject(
                    ErrorCode::ProducerMismatch,
                    "an agent publishes only context it generated and signed",
                ));
            }
            Reader::Agent { group_id: own, .. } if *own != group_id => {
                return Err(reject(
                    ErrorCode::NotAMember,
                    format!("{signer} is not a member of {group_id}"),
                ));
            }
            _ => {}
        }
        let envelope_json = serde_json::to_string(&envelope).map_err(Error::backend)?;
        let clock = std::sync::Arc::clone(&self.0.clock);
        self.0
            .db
            .write(move |txn| {
                let group = group_id.as_str();
                // The Group's lock before the lookup (PostgreSQL): of two identical packages
                // sent through two servers at once, the second waits and finds the first.
                crate::rows::groups::lock(txn, group)?;
                // Stamped at the time the lock is held: not before the Events committed ahead.
                let now = clock.now();
                let existing = crate::rows::context_packages::sequence_of(txn, &context_id, group)?;
                let answer = |sequence| ContextPublishedAnswer {
                    context_id,
                    package_id: package.package_id.clone(),
                    version: package.version,
                    sequence,
                };
                if let Some(sequence) = existing {
                    return Ok((answer(sequence), false));
                }
                crate::access::key_still_the_signers(txn, &keyid, &signer)?;
                // CTX-4: the generator must be a member allowed to write the Mission.
                check_writer(txn, group, signer.as_str(), &WRITERS)?;
                let generator = Reader::Agent {
                    agent_id: signer.clone(),
                    group_id: group_id.clone(),
                    scope: mission_scope(txn, group, signer.as_str())?,
                };
                // A Mission-scoped generator writes context of its Missions only (CTX-5), and
                // learns nothing of the others: a Mission it does not cover answers exactly as
                // one that does not exist, before anything else looks at it.
                if !generator.sees_mission(group, package.mission_id.as_str()) {
                    return Err(reject(
                        ErrorCode::NotFound,
                        format!("no Mission {} in {group}", package.mission_id),
                    ));
                }
                check_scope(txn, &package)?;
                let new = package.link(context_id);
                // Versions of Missions the generator cannot see are not named to it: a
                // `previous` among them is unknown, and a package id they hold is taken.
                let named = match &package.previous {
                    Some(previous) => link_by_id(txn, group, previous)?
                        .filter(|link| generator.sees_mission(group, link.mission_id.as_str())),
                    None => None,
                };
                let latest = latest_link(txn, group, package.package_id.as_str())?;
                if latest
                    .as_ref()
                    .is_some_and(|link| !generator.sees_mission(group, link.mission_id.as_str()))
                {
                    return Err(reject(
                        ErrorCode::ContextOtherMission,
                        format!("package id {} is taken; choose another", package.package_id),
                    ));
                }
                check_chain(
                    &new,
                    package.previous.as_ref(),
                    named.as_ref(),
                    latest.as_ref(),
                )?;
                check_range(txn, &package)?;
                check_artifacts(txn, &package, &generator)?;
                let sequence = events::append(
                    txn,
                    &group_id,
                    &EventPayload::ContextPublished(ContextPublished {
                        artifacts: package.artifacts.clone(),
                        context_id,
                        generator: signer.clone(),
                        mission_id: package.mission_id.clone(),
                        package_id: package.package_id.clone(),
                        previous: package.previous,
                        source_events: package.source_events,
                        version: package.version,
                        work_item_id: package.work_item_id.clone(),
                    }),
                    now,
                )?;
                insert_row(
                    txn,
                    group,
                    &package,
                    context_id,
                    &envelope_json,
                    sequence,
                    None,
                )?;
                Ok((answer(sequence), true))
            })
            .await
    }

    /// CTX-7: copies a version of a package of the caller's Group, and the Artifacts it cites
    /// (by digest), into another Group. The forwarder must be a coordinator of both Groups
    /// (DESIGN §10) and the cited Artifacts' classification must allow it; `context.forwarded`
    /// is appended to both logs, each naming the other Group.
    pub async fn forward_context(
        &self,
        package_id: Id,
        request: ForwardRequest,
        session: Option<&Session>,
    ) -> Result<(ContextForwardedAnswer, bool), Error> {
        let Some(session) = session else {
            return Err(reject(
                ErrorCode::Forbidden,
                "a forward is an Agent's act: use a session of the source Group",
            ));
        };
        let (agent_id, from) = (session.agent_id.clone(), session.group_id.clone());
        let acting = Acting::session(session);
        let clock = std::sync::Arc::clone(&self.0.clock);
        let hot = std::sync::Arc::clone(&self.0.hot);
        self.0
            .db
            .write(move |txn| {
                // The role first: only a coordinator (who sees the whole Group) learns whether a
                // package or version exists; a Mission-scoped member learns nothing here.
                check_writer(txn, from.as_str(), agent_id.as_str(), &[Role::Coordinator])?;
                let record =
                    reads::version_row(txn, from.as_str(), package_id.as_str(), request.version)?
                        .ok_or_else(|| reads::no_package(&package_id))?;
                let to = request.to_group_id.clone();
                if to == from {
                    return Err(reject(
                        ErrorCode::BadRequest,
                        "toGroupId is the package's own Group",
                    ));
                }
                // Another Group the forwarder cannot write answers alike whether or not it exists.
                if !crate::access::group_exists(txn, to.as_str())? {
                    return Err(reject(
                        ErrorCode::NotAMember,
                        format!("{agent_id} is not a member of {to}"),
                    ));
                }
                // Both Groups' locks in the one order every writer takes them (`db/writer.rs`),
                // before the target is read: what it holds of this package (below) is what a
                // publication or another forward through another server left, and a forward
                // the other way, or a batch holding one of them, never waits on this one in a
                // circle.
                let (first, second) = if from.as_str() < to.as_str() {
                    (&from, &to)
                } else {
                    (&to, &from)
                };
                crate::rows::groups::lock(txn, first.as_str())?;
                crate::rows::groups::lock(txn, second.as_str())?;
                // Under both locks, what may end the session or the role (a Membership
                // removed, a key rotated, an Agent deactivated: each appends to the source
                // Group) has committed or waits: the session and the source role again, as
                // another server's cache may have served a session ended meanwhile. Judged and
                // stamped at the time the locks are held.
                let now = clock.now();
                acting.check(txn, &format_instant(now))?;
                check_writer(txn, from.as_str(), agent_id.as_str(), &[Role::Coordinator])?;
                check_writer(txn, to.as_str(), agent_id.as_str(), &[Role::Coordinator])?;
                let package = &record.package;
                let level = classification(txn, from.as_str(), &package.artifacts)?;
                if !may_forward(level) {
                    return Err(reject(
                        ErrorCode::ClassificationForbids,
                        format!(
                            "the package cites {} content, which never leaves its Group",
                            level.as_str()
                        ),
                    ));
                }
                let context_id = record.context_id;
                let answer = |from_sequence, to_sequence| ContextForwardedAnswer {
                    context_id,
                    from_group_id: from.clone(),
                    from_sequence,
                    to_group_id: to.clone(),
                    to_sequence,
                };
                let already =
                    crate::rows::context_packages::sequence_of(txn, &context_id, to.as_str())?;
                if let Some(to_sequence) = already {
                    return Ok((answer(record.sequence, to_sequence), false));
                }
                // The target's versions of this package id must all be copies from this same
                // source Group: a forwarded version never joins a chain published there (whose
                // readers may be scoped to a Mission the copy is not of).
                let (same_version, foreign) = crate::rows::context_packages::held_versions(
                    txn,
                    to.as_str(),
                    package.package_id.as_str(),
                    package.version,
                    from.as_str(),
                )?;
                if same_version || foreign {
                    return Err(reject(
                        ErrorCode::Conflict,
                        format!("{to} already holds another package {}", package.package_id),
                    ));
                }
                let event = |from_group_id: &Id, to_group_id: &Id| {
                    EventPayload::ContextForwarded(ContextForwarded {
                        artifacts: package.artifacts.clone(),
                        context_id,
                        forwarder: agent_id.clone(),
                        from_group_id: from_group_id.clone(),
                        package_id: package.package_id.clone(),
                        to_group_id: to_group_id.clone(),
                        version: package.version,
                    })
                };
                let from_sequence = events::append(txn, &from, &event(&from, &to), now)?;
                let to_sequence = events::append(txn, &to, &event(&from, &to), now)?;
                let envelope_json =
                    serde_json::to_string(&record.envelope).map_err(Error::backend)?;
                insert_row(
                    txn,
                    to.as_str(),
                    package,
                    context_id,
                    &envelope_json,
                    to_sequence,
                    Some((&from, &agent_id)),
                )?;
                for artifact in &package.artifacts {
                    // Before the commit: the fast read may only ever leave too many to the index.
                    hot.note_forwarded(*artifact);
                    // What the classification above weighed: the source's manifests now.
                    let up_to =
                        crate::rows::manifests::newest_row_in_group(txn, artifact, from.as_str())?;
                    crate::rows::forwarded_artifacts::insert(
                        txn,
                        to.as_str(),
                        artifact,
                        &context_id,
                        from.as_str(),
                        up_to,
                    )?;
                }
                Ok((answer(from_sequence, to_sequence), true))
            })
            .await
    }
}

fn insert_row(
    conn: &Connection,
    group_id: &str,
    package: &ContextPackage,
    context_id: ArtifactId,
    envelope_json: &str,
    sequence: u64,
    forwarded: Option<(&Id, &Id)>,
) -> Result<(), Error> {
    let artifacts = serde_json::to_string(&package.artifacts).map_err(Error::backend)?;
    crate::rows::context_packages::insert(
        conn,
        &crate::rows::context_packages::New {
            context_id: &context_id,
            group_id,
            package_id: package.package_id.as_str(),
            version: package.version,
            previous: package.previous.as_ref(),
            mission_id: package.mission_id.as_str(),
            work_item_id: package.work_item_id.as_ref().map(Id::as_str),
            events_from: package.source_events.from,
            events_to: package.source_events.to,
            artifacts: &artifacts,
            generator: package.generator.agent_id.as_str(),
            envelope: envelope_json,
            sequence,
            forwarded: forwarded.map(|(from, by)| (from.as_str(), by.as_str())),
        },
    )
}
