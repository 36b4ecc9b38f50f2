//! Delivery of a Group's log: live following (replay, then live Events without gaps), ACK
//! cursors, and signed checkpoints (DESIGN §7–§8, DLV-1…DLV-8).
//!
//! Live Events come from the writer's post-commit broadcast, so any number of followers cost
//! no log read per Event; a follower reads the log only to catch up (at start, after falling
//! behind the broadcast buffer, or to fill a gap). Nothing here deletes history (DLV-7).

pub(crate) mod handle;
pub(crate) mod tlog;

use std::collections::VecDeque;
use std::sync::Arc;

use crate::sql::Connection;
use futures::Stream;
use tokio::sync::broadcast::error::RecvError;
use weft_api::dsse::CHECKPOINT_TYPE;
use weft_api::event::{Delivered, Withheld};
use weft_api::kinds;
use weft_api::session::Role;
use weft_api::views::{Checkpoint, Cursor, SignedCheckpoint};
use weft_api::{Envelope, ErrorCode, Event, EventPayload, Id};

use crate::access::Session;
use crate::access::{Reader, can_read_artifact, group_exists, membership};
use crate::clock::format_instant;
use crate::delivery::handle::Delivery;
use crate::engine::Engine;
use crate::error::Error;
use crate::error::reject;
use crate::events;

/// Events read from the log per catch-up query.
const CATCH_UP_PAGE: u32 = 10_000;

/// Whether `reader` may read `group_id`'s log, and with which roles.
fn group_access(
    conn: &Connection,
    group_id: &str,
    reader: &Reader,
) -> Result<Option<Vec<Role>>, Error> {
    match reader {
        Reader::Admin => {
            Ok(group_exists(conn, group_id)?.then(|| vec![Role::Coordinator, Role::Auditor]))
        }
        Reader::Agent {
            agent_id,
            group_id: own,
            ..
        } if own.as_str() == group_id => {
            Ok(membership(conn, group_id, agent_id.as_str())?.map(|(roles, _)| roles))
        }
        // A session acts in its own Group only: any other answers as to a non-member.
        Reader::Agent { .. } => Ok(None),
    }
}

fn not_visible(group_id: &Id) -> Error {
    reject(
        ErrorCode::NotFound,
        format!("no group {group_id} is visible to you"),
    )
}

pub(crate) use crate::events::head;

/// An Event as `reader` may receive it (CTX-5, DESIGN §11): whole, or, for a Mission-scoped
/// member and an Event of a Mission it does not cover, a `withheld` placeholder.
///
/// Which Events belong to a Mission: those whose payload names one (every Mission and WorkItem
/// Event, `artifact.published`, `evidence.recorded`); `artifact.integrity_failure` and
/// `artifact.repaired` name only an artifact, and are shown when the reader may read it.
/// Group-level Events (`group.created`, memberships, sessions, agents, and
/// `artifact.reuse_published`, whose point is to announce reusable knowledge) reach every
/// member, except a `membership.set` naming Missions the reader does not all see (unless it
/// is the reader's own). An Event this version cannot classify is withheld from a scoped
/// member.
pub(crate) fn deliver(
    conn: &Connection,
    reader: &Reader,
    event: Event,
) -> Result<Delivered, Error> {
    if reader.sees_whole_group() {
        return Ok(Delivered::Event(event));
    }
    let group = event.group_id.as_str();
    let visible = match EventPayload::of(&event) {
        Ok(Some(payload)) => match payload {
            // A publication stays its Mission's Event even once the Artifact is reusable (the
            // `artifact.reuse_published` Event says that), so a placeholder never turns whole.
            EventPayload::ArtifactPublished(p) => reader.sees_mission(group, p.mission_id.as_str()),
            EventPayload::EvidenceRecorded(p) => reader.sees_mission(group, p.mission_id.as_str()),
            EventPayload::Work(_, p) => reader.sees_mission(group, p.mission_id.as_str()),
            EventPayload::ContextPublished(p) => reader.sees_mission(group, p.mission_id.as_str()),
            EventPayload::RecordsDisposed(p) => reader.sees_mission(group, p.mission_id.as_str()),
            // A copy to or from another Group names no Mission of this one's reader: shown to
            // Group-wide readers only (returned above).
            EventPayload::ContextForwarded(_) => false,
            EventPayload::ArtifactIntegrityFailure(kinds::IntegrityFailure {
                artifact, ..
            })
            | EventPayload::ArtifactRepaired(kinds::ArtifactRepaired { artifact }) => {
                can_read_artifact(conn, reader, &artifact)?
            }
            // Lifecycle (issue #46): a Mission's policy, a hold and a disposition show to
            // whoever sees what they are about; the Group's own policy to every member.
            EventPayload::RetentionSet(p) => p
                .mission_id
                .as_ref()
                .is_none_or(|mission| reader.sees_mission(group, mission.as_str())),
            EventPayload::HoldPlaced(p) => sees_hold_target(conn, reader, group, &p.target)?,
            EventPayload::HoldLifted(p) => {
                match crate::rows::holds::load(conn, p.hold_id.as_str())? {
                    Some(hold) => sees_hold_target(conn, reader, group, &hold.target)?,
                    None => false,
                }
            }
            // Only to a reader who sees every Mission it names (one batch's, of one set).
            EventPayload::ArtifactDisposed(p) => p
                .missions
                .iter()
                .all(|mission| reader.sees_mission(group, mission.as_str())),
            // A Membership scoped to Missions names them: shown to a scoped member that sees
            // every one of them, or whose own Membership it is (other Missions' ids, and who
            // works where, are not its to learn).
            EventPayload::MembershipSet(p) => {
                p.missions.as_ref().is_none_or(|missions| {
                    missions
                        .iter()
                        .all(|mission| reader.sees_mission(group, mission.as_str()))
                }) || matches!(reader, Reader::Agent { agent_id, .. } if *agent_id == p.agent_id)
            }
            EventPayload::GroupCreated(_)
            | EventPayload::MembershipRemoved(_)
            | EventPayload::SessionOpened(_)
            | EventPayload::AgentDeactivated(_)
            | EventPayload::AgentKeyRotated(_)
            | EventPayload::GroupPolicySet(_)
            | EventPayload::ReusePublished(_) => true,
        },
        Ok(None) | Err(_) => false,
    };
    Ok(if visible {
        Delivered::Event(event)
    } else {
        Delivered::Withheld(Withheld::of(&event))
    })
}

/// Whether a Mission-scoped `reader` sees what a hold holds: its Mission, its WorkItem's
/// Mission, or an artifact it may read.
fn sees_hold_target(
    conn: &Connection,
    reader: &Reader,
    group: &str,
    target: &weft_api::lifecycle::HoldTarget,
) -> Result<bool, Error> {
    use weft_api::lifecycle::HoldTarget;
    Ok(match target {
        HoldTarget::MissionId(mission) => reader.sees_mission(group, mission.as_str()),
        HoldTarget::WorkItemId(work_item) => {
            crate::rows::work_items::place(conn, work_item.as_str())?
                .is_some_and(|(_, mission)| reader.sees_mission(group, &mission))
        }
        HoldTarget::Artifact(artifact) => can_read_artifact(conn, reader, artifact)?,
    })
}

struct Follower {
    inner: Arc<Engine>,
    group_id: String,
    last_sent: u64,
    live: tokio::sync::broadcast::Receiver<Event>,
    /// Changes when Events may have been missed (`db/follow.rs`, `Resyncs`): the stream then
    /// reads the log, instead of waiting for the Group's next Event to show the gap. `None`
    /// once its sender is gone.
    resyncs: Option<tokio::sync::watch::Receiver<u64>>,
    backlog: VecDeque<Event>,
    catching_up: bool,
    /// Set after an error was yielded: the stream then ends, and the client reconnects (and
    /// learns, for example, that it must restore from a snapshot).
    failed: bool,
    /// Who follows: a Mission-scoped member gets placeholders for other Missions' Events.
    reader: Reader,
}

impl Delivery<'_> {
    /// Events of `group_id` after `after`: first the log, then live Events as they commit,
    /// in order, without gaps, each exactly once per stream.
    pub async fn follow(
        &self,
        group_id: Id,
        after: u64,
        reader: &Reader,
    ) -> Result<impl Stream<Item = Result<Delivered, Error>> + Send + use<>, Error> {
        // Subscribe before looking at the log: anything committed from here on arrives live,
        // anything before is in the log.
        let live = self.0.db.subscribe();
        let resyncs = Some(self.0.db.subscribe_resyncs());
        let (checking, group) = (reader.clone(), group_id.clone());
        let head = self
            .0
            .db
            .read(move |conn| {
                if group_access(conn, group.as_str(), &checking)?.is_none() {
                    return Err(not_visible(&group));
                }
                let head = head(conn, group.as_str())?.0;
                if after <= head {
                    crate::events::check_online(conn, group.as_str(), after)?;
                }
                Ok(head)
            })
            .await?;
        if after > head {
            return Err(reject(
                ErrorCode::CursorAhead,
                format!("after={after} is past the head of the log ({head})"),
            ));
        }
        let follower = Follower {
            inner: Arc::clone(self.0),
            group_id: group_id.to_string(),
            last_sent: after,
            live,
            resyncs,
            backlog: VecDeque::new(),
            catching_up: true,
            failed: false,
            reader: reader.clone(),
        };
        Ok(futures::stream::unfold(
            follower,
            |mut follower| async move {
                loop {
                    if let Some(event) = follower.backlog.pop_front() {
                        if event.sequence <= follower.last_sent {
                            continue;
                        }
                        follower.last_sent = event.sequence;
                        if follower.reader.sees_whole_group() {
                            return Some((Ok(Delivered::Event(event)), follower));
                        }
                        // A scoped member: the placeholder decision may read the tables
                        // (reusable knowledge), so it runs on the read pool.
                        let reader = follower.reader.clone();
                        let delivered = follower
                            .inner
                            .db
                            .read(move |conn| deliver(conn, &reader, event))
                            .await;
                        if delivered.is_err() {
                            follower.failed = true;
                        }
                        return Some((delivered, follower));
                    }
                    if follower.catching_up {
                        let (group, after) = (follower.group_id.clone(), follower.last_sent);
                        match follower
                            .inner
                            .db
                            .read(move |conn| {
                                // Compacted while this follower was behind: restore (DLV-9).
                                crate::events::check_online(conn, &group, after)?;
                                events::read(conn, &group, after, CATCH_UP_PAGE)
                            })
                            .await
                        {
                            Ok(page) if page.is_empty() => follower.catching_up = false,
                            Ok(page) => follower.backlog.extend(page),
                            Err(error) => {
                                follower.failed = true;
                                return Some((Err(error), follower));
                            }
                        }
                        continue;
                    }
                    let received = match &mut follower.resyncs {
                        Some(resyncs) => tokio::select! {
                            changed = resyncs.changed() => {
                                match changed {
                                    Ok(()) => follower.catching_up = true,
                                    Err(_) => follower.resyncs = None,
                                }
                                continue;
                            }
                            received = follower.live.recv() => received,
                        },
                        None => follower.live.recv().await,
                    };
                    match received {
                        Ok(event)
                            if event.group_id != follower.group_id
                                || event.sequence <= follower.last_sent => {}
                        Ok(event) if event.sequence == follower.last_sent + 1 => {
                            follower.backlog.push_back(event)
                        }
                        // A gap (this follower fell behind) or a lag: catch up from the log.
                        Ok(_) | Err(RecvError::Lagged(_)) => follower.catching_up = true,
                        Err(RecvError::Closed) => return None,
                    }
                }
            },
        ))
    }

    /// Records an ACK (DLV-6): the cursor never moves backwards and never passes the head;
    /// an older ACK is a no-op that says so. History is never touched (DLV-7).
    pub async fn ack(
        &self,
        group_id: Id,
        session: &Session,
        sequence: u64,
    ) -> Result<Cursor, Error> {
        let now = self.0.clock.now();
        let reader = session.reader();
        let agent_id = session.agent_id.clone();
        self.0
            .db
            .write(move |txn| {
                if group_access(txn, group_id.as_str(), &reader)?.is_none() {
                    return Err(not_visible(&group_id));
                }
                let (head_sequence, _) = head(txn, group_id.as_str())?;
                if sequence > head_sequence {
                    return Err(reject(
                        ErrorCode::CursorAhead,
                        format!(
                            "sequence {sequence} is past the head of the log ({head_sequence})"
                        ),
                    ));
                }
                // The row decides whether it moves (DLV-6: never backwards, whichever server
                // took the other ACK); where it stands is read only when it did not move.
                let moved = crate::rows::cursors::advance(
                    txn,
                    group_id.as_str(),
                    agent_id.as_str(),
                    sequence,
                    &format_instant(now),
                )?;
                let current = match moved {
                    true => sequence,
                    false => crate::rows::cursors::get(txn, group_id.as_str(), agent_id.as_str())?
                        .unwrap_or(sequence),
                };
                Ok(Cursor {
                    group_id: group_id.to_string(),
                    agent_id: agent_id.to_string(),
                    sequence: current,
                    moved: Some(moved),
                })
            })
            .await
    }

    /// The caller's cursor in a Group; with `all`, every cursor (coordinators, auditors, admin).
    pub async fn cursors(
        &self,
        group_id: Id,
        reader: &Reader,
        all: bool,
    ) -> Result<Vec<Cursor>, Error> {
        let reader = reader.clone();
        self.0
            .db
            .read(move |conn| {
                let Some(roles) = group_access(conn, group_id.as_str(), &reader)? else {
                    return Err(not_visible(&group_id));
                };
                let see_all = all || matches!(reader, Reader::Admin);
                if see_all
                    && !roles
                        .iter()
                        .any(|r| matches!(r, Role::Coordinator | Role::Auditor))
                {
                    return Err(reject(
                        ErrorCode::Forbidden,
                        "all cursors are for coordinators and auditors",
                    ));
                }
                let me = match &reader {
                    Reader::Agent { agent_id, .. } => agent_id.to_string(),
                    Reader::Admin => String::new(),
                };
                let cursors = crate::rows::cursors::list(conn, group_id.as_str(), see_all, &me)?
                    .into_iter()
                    .map(|(agent_id, sequence)| Cursor {
                        group_id: group_id.to_string(),
                        agent_id,
                        sequence,
                        moved: None,
                    })
                    .collect();
                Ok(cursors)
            })
            .await
    }

    /// The Group's head `{groupId, sequence, hash}` signed by the authority key.
    pub async fn checkpoint(
        &self,
        group_id: Id,
        reader: &Reader,
    ) -> Result<SignedCheckpoint, Error> {
        let reader = reader.clone();
        let group = group_id.clone();
        let (sequence, hash) = self
            .0
            .db
            .read(move |conn| {
                if group_access(conn, group.as_str(), &reader)?.is_none() {
                    return Err(not_visible(&group));
                }
                head(conn, group.as_str())
            })
            .await?;
        let checkpoint = Checkpoint {
            group_id: group_id.to_string(),
            sequence,
            hash,
            created_at: format_instant(self.0.clock.now()),
        };
        let payload = serde_json::to_vec(&checkpoint).map_err(Error::backend)?;
        let envelope = Envelope::sign(&self.0.authority, CHECKPOINT_TYPE, &payload);
        Ok(SignedCheckpoint {
            envelope,
            checkpoint,
        })
    }
}

impl Delivery<'_> {
    /// A page of a Group's log after `after` (replay); a Mission-scoped reader gets `withheld`
    /// placeholders for other Missions' Events (CTX-5).
    pub async fn events(
        &self,
        group_id: Id,
        after: u64,
        limit: u32,
        reader: &Reader,
    ) -> Result<Vec<Delivered>, Error> {
        let reader = reader.clone();
        let limit = limit.clamp(1, 10_000);
        self.0
            .db
            .read(move |conn| {
                if group_access(conn, group_id.as_str(), &reader)?.is_none() {
                    return Err(not_visible(&group_id));
                }
                crate::events::check_online(conn, group_id.as_str(), after)?;
                events::read(conn, group_id.as_str(), after, limit)?
                    .into_iter()
                    .map(|event| deliver(conn, &reader, event))
                    .collect()
            })
            .await
    }
}

impl Delivery<'_> {
    /// The Events of `group_id` at `sequences` (at most 256), as `reader` gets them (whole,
    /// or withheld for another Mission's), in order, in one read; an Event compacted into an
    /// archive is absent (its sequence is not in the answer). `not_found` for a Group the
    /// reader does not see.
    pub async fn events_at(
        &self,
        group_id: Id,
        sequences: Vec<u64>,
        reader: &Reader,
    ) -> Result<Vec<Delivered>, Error> {
        if sequences.len() > 256 {
            return Err(reject(
                ErrorCode::BadRequest,
                "at most 256 Events are read at once",
            ));
        }
        let reader = reader.clone();
        self.0
            .db
            .read(move |conn| {
                if group_access(conn, group_id.as_str(), &reader)?.is_none() {
                    return Err(not_visible(&group_id));
                }
                events::read_at(conn, group_id.as_str(), &sequences)?
                    .into_iter()
                    .map(|event| deliver(conn, &reader, event))
                    .collect()
            })
            .await
    }

    /// What `agent_id` did in `group_id` that `reader` may see (issue #50): the Events whose
    /// actor it is (`EventPayload::actor`: the Commands it signed, what it published,
    /// reviewed and opened), newest first, before `before`, at most `limit` read from the
    /// online log; with the cursor of the next page (`None`: no older Event of it). An Event
    /// `reader` may not see is left out, not withheld, and never read: where else an Agent
    /// acted (even when) is not this reader's to learn. `not_found` for a Group the reader
    /// does not see.
    pub async fn actor_events(
        &self,
        group_id: Id,
        agent_id: Id,
        before: Option<u64>,
        limit: u32,
        reader: &Reader,
    ) -> Result<(Vec<weft_api::Event>, Option<u64>), Error> {
        let reader = reader.clone();
        let limit = limit.clamp(1, 1_000);
        self.0
            .db
            .read(move |conn| {
                if group_access(conn, group_id.as_str(), &reader)?.is_none() {
                    return Err(not_visible(&group_id));
                }
                // A Mission-scoped reader's Events are chosen in the query, so the cursor
                // (the last row read) is always an Event it was given.
                let missions = reader.missions_json();
                let read = events::read_by_actor(
                    conn,
                    group_id.as_str(),
                    agent_id.as_str(),
                    before,
                    limit,
                    missions.as_deref(),
                )?;
                let next = (read.len() == limit as usize)
                    .then(|| read.last().map(|event| event.sequence))
                    .flatten();
                let mut seen = Vec::with_capacity(read.len());
                for event in read {
                    if let Delivered::Event(event) = deliver(conn, &reader, event)? {
                        seen.push(event);
                    }
                }
                Ok((seen, next))
            })
            .await
    }
}

impl Delivery<'_> {
    /// Appends a filler Event of any type (the events benchmark's load) and returns its
    /// sequence once it is durable. Only with feature `bench-support`: the server appends
    /// typed Events only, each with the change it describes.
    #[cfg(feature = "bench-support")]
    pub async fn append(
        &self,
        group_id: Id,
        kind: &'static str,
        payload: serde_json::Value,
    ) -> Result<u64, Error> {
        let now = self.0.clock.now();
        self.0
            .db
            .write(move |txn| {
                if !group_exists(txn, group_id.as_str())? {
                    return Err(reject(
                        ErrorCode::UnknownGroup,
                        format!("group {group_id} does not exist"),
                    ));
                }
                events::append_raw(txn, &group_id, kind, payload.to_string(), now)
            })
            .await
    }
}
