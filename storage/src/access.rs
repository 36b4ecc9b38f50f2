//! Who is asking and what they may see: the [`Reader`], a live [`Session`] (`session.rs`)
//! and a capability token's [`Grant`] (`grant.rs`), and the row helpers that answer "is this
//! Agent a member, may it read this artifact or know this blob, does this WorkItem exist
//! for it, which Agent holds this key". A leaf over `rows/`: it knows no feature and not the
//! engine (the signature check that uses these is `signatures.rs`).
//!
//! Mission isolation (CTX-5) is decided here and nowhere else: a Membership may cover only
//! some Missions of its Group ([`MissionScope`]), and every read path asks [`Reader::sees_mission`]
//! (or [`can_read_artifact`], which adds the reusable-knowledge exception of CTX-6), while
//! every citation asks [`may_cite`].

pub(crate) mod grant;
pub(crate) mod lease;
pub(crate) mod session;

pub use grant::Grant;
pub use session::Session;

use std::collections::BTreeSet;

use crate::sql::Connection;
use ed25519_dalek::VerifyingKey;
use weft_api::session::Role;
use weft_api::{ArtifactId, ErrorCode, Id, KeyId};

use crate::error::{Error, reject};
use crate::events::to32;

/// Which Missions of its Group a Membership covers (CTX-5).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum MissionScope {
    /// The whole Group: every Membership without `missions`, and every coordinator and auditor.
    #[default]
    Group,
    /// Only these Missions: content of any other Mission of the Group answers as if it did
    /// not exist, and its Events reach the member as `withheld` placeholders.
    Missions(BTreeSet<String>),
}

impl MissionScope {
    /// Whether the scope covers Mission `mission_id`.
    pub fn covers(&self, mission_id: &str) -> bool {
        match self {
            Self::Group => true,
            Self::Missions(missions) => missions.contains(mission_id),
        }
    }
}

/// Who is asking.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reader {
    /// The operator, with the admin token: sees everything.
    Admin,
    /// An Agent acting through a session of one Group: sees what that Group published and
    /// nothing of its other Groups (a session acts in its own Group only), and of its Group
    /// only the Missions its Membership covers.
    Agent {
        agent_id: Id,
        group_id: Id,
        scope: MissionScope,
    },
}

impl Reader {
    /// The one question every read path asks (CTX-5): may this reader see the content of
    /// Mission `mission_id` of Group `group_id`?
    pub fn sees_mission(&self, group_id: &str, mission_id: &str) -> bool {
        match self {
            Self::Admin => true,
            Self::Agent {
                group_id: own,
                scope,
                ..
            } => own.as_str() == group_id && scope.covers(mission_id),
        }
    }

    /// Whether this reader sees every Mission of the Groups it reads.
    pub fn sees_whole_group(&self) -> bool {
        matches!(
            self,
            Self::Admin
                | Self::Agent {
                    scope: MissionScope::Group,
                    ..
                }
        )
    }

    /// The calling Agent, if not the operator.
    pub fn agent(&self) -> Option<&Id> {
        match self {
            Self::Admin => None,
            Self::Agent { agent_id, .. } => Some(agent_id),
        }
    }

    /// Whether this reader may act in `group_id` at all: the operator anywhere, a session
    /// only in its own Group.
    pub fn in_group(&self, group_id: &str) -> bool {
        match self {
            Self::Admin => true,
            Self::Agent { group_id: own, .. } => own.as_str() == group_id,
        }
    }
}

/// Whether `reader` may see artifact `blake3`: it is published in the reader's Group for a
/// Mission the reader's Membership covers, or published there as reusable knowledge (CTX-6).
pub(crate) fn can_read_artifact(
    conn: &Connection,
    reader: &Reader,
    blake3: &ArtifactId,
) -> Result<bool, Error> {
    let visible = match reader {
        Reader::Admin => crate::rows::manifests::any_cites(conn, blake3)?,
        Reader::Agent {
            group_id, scope, ..
        } => {
            let missions = artifact_missions(conn, group_id.as_str(), blake3)?;
            missions.iter().any(|mission| scope.covers(mission))
                || (!missions.is_empty() && reusable(conn, group_id.as_str(), blake3)?)
                || (*scope == MissionScope::Group
                    && forwarded_from(conn, group_id.as_str(), blake3)?.is_some())
        }
    };
    Ok(visible)
}

/// The Groups `blake3` was forwarded from into `group_id` with a Context Package (CTX-7);
/// `None` when it was not forwarded there.
pub(crate) fn forwarded_from(
    conn: &Connection,
    group_id: &str,
    blake3: &ArtifactId,
) -> Result<Option<Vec<String>>, Error> {
    let groups = crate::rows::forwarded_artifacts::from_groups(conn, group_id, blake3)?;
    Ok((!groups.is_empty()).then_some(groups))
}

impl Reader {
    /// The Groups whose publications the reader sees (`None`: the admin sees all).
    pub(crate) fn visible_groups(&self) -> Option<Vec<String>> {
        match self {
            Self::Admin => None,
            Self::Agent { group_id, .. } => Some(vec![group_id.to_string()]),
        }
    }

    /// Who looks an artifact up, as the visibility lookup takes it
    /// (`rows::manifests::visible_manifests`).
    pub(crate) fn seer(&self) -> crate::rows::Seer<'_> {
        match self {
            Self::Admin => crate::rows::Seer::Operator,
            Self::Agent { group_id, .. } => crate::rows::Seer::Agent {
                group_id: group_id.as_str(),
                missions_json: self.missions_json(),
            },
        }
    }

    /// The Missions a scoped reader covers as a JSON array, for SQL filters written
    /// `mission_id IN (SELECT value FROM json_each(?))`; `None` when it sees the whole Group.
    pub(crate) fn missions_json(&self) -> Option<String> {
        match self {
            Self::Agent {
                scope: MissionScope::Missions(missions),
                ..
            } => Some(
                serde_json::Value::from(missions.iter().cloned().collect::<Vec<_>>()).to_string(),
            ),
            _ => None,
        }
    }
}

/// The Missions of Group `group_id` that published artifact `blake3` (one per manifest).
pub(crate) fn artifact_missions(
    conn: &Connection,
    group_id: &str,
    blake3: &ArtifactId,
) -> Result<BTreeSet<String>, Error> {
    crate::rows::manifests::missions_of(conn, group_id, blake3)
}

/// Whether artifact `blake3` was published as reusable knowledge in Group `group_id` (CTX-6).
pub(crate) fn reusable(
    conn: &Connection,
    group_id: &str,
    blake3: &ArtifactId,
) -> Result<bool, Error> {
    crate::rows::reusable_artifacts::is_reusable(conn, group_id, blake3)
}

/// Whether content of Mission `mission_id` may cite artifact `blake3` (as a manifest source, an
/// Evidence artifact, or a Context Package's artifact): `producer` must be able to read it, and
/// it must be the same Mission's (some manifest of `mission_id` in the producer's Group) or
/// published as reusable knowledge (CTX-5, CTX-6). `Err` is the refusal: `unknown_source` when
/// the producer cannot see the artifact at all (no existence oracle), `not_reusable` when it
/// can but the artifact belongs to other Missions only.
pub(crate) fn may_cite(
    conn: &Connection,
    producer: &Reader,
    mission_id: &str,
    blake3: &ArtifactId,
) -> Result<Result<(), Error>, Error> {
    if !can_read_artifact(conn, producer, blake3)? {
        return Ok(Err(reject(
            ErrorCode::UnknownSource,
            format!("source {blake3} is not published in a Mission you can read"),
        )));
    }
    let group_id = match producer {
        Reader::Agent { group_id, .. } => group_id.as_str(),
        // The operator publishes nothing; answer as for its first Group's view.
        Reader::Admin => return Ok(Ok(())),
    };
    if artifact_missions(conn, group_id, blake3)?.contains(mission_id)
        || reusable(conn, group_id, blake3)?
    {
        return Ok(Ok(()));
    }
    Ok(Err(reject(
        ErrorCode::NotReusable,
        format!(
            "{blake3} belongs to another Mission and was not published as reusable knowledge (CTX-6)"
        ),
    )))
}

/// A manifest or Evidence names a WorkItem that exists in its Group under its Mission
/// (issue #11: `workItemId` is a reference, not a label); another Group's WorkItem answers
/// as an unknown one.
///
/// A WorkItem of a Mission the `producer` cannot see (CTX-5) answers as an unknown one too,
/// never naming its Mission. Answers its owner and ownership epoch, which the lease check
/// that follows needs (`access::lease`).
pub(crate) fn require_work_item(
    conn: &Connection,
    producer: &Reader,
    group_id: &str,
    mission_id: &str,
    work_item_id: &str,
) -> Result<(Option<String>, u64), Error> {
    // Only where the WorkItem lives and who owns it: every publication asks, and the whole
    // row would parse its contract.
    let place = crate::rows::work_items::place_and_ownership(conn, work_item_id)?;
    work_item_placed(producer, group_id, mission_id, work_item_id, place)
}

/// [`require_work_item`] given the WorkItem's place and ownership, read already
/// (`rows::work_items::place_and_ownership`).
pub(crate) fn work_item_placed(
    producer: &Reader,
    group_id: &str,
    mission_id: &str,
    work_item_id: &str,
    place: Option<crate::rows::work_items::Placed>,
) -> Result<(Option<String>, u64), Error> {
    match place {
        Some((group, mission, owner, epoch)) if group == group_id && mission == mission_id => {
            Ok((owner, epoch))
        }
        Some((group, mission, _, _))
            if group == group_id && producer.sees_mission(group_id, &mission) =>
        {
            Err(reject(
                ErrorCode::MissionMismatch,
                format!("WorkItem {work_item_id} belongs to Mission {mission}, not {mission_id}"),
            ))
        }
        _ => Err(reject(
            ErrorCode::UnknownWorkItem,
            format!("no WorkItem {work_item_id} in {group_id}"),
        )),
    }
}

/// The Mission scope of a current Membership (the whole Group when it names none, or when it
/// was removed: a removed member reads nothing anyway).
pub(crate) fn mission_scope(
    conn: &Connection,
    group_id: &str,
    agent_id: &str,
) -> Result<MissionScope, Error> {
    let missions = crate::rows::memberships::scope(conn, group_id, agent_id)?;
    scope_of(missions.flatten())
}

/// The Mission scope a Membership's `missions` column says (`None`: the whole Group).
pub(crate) fn scope_of(missions: Option<String>) -> Result<MissionScope, Error> {
    match missions {
        None => Ok(MissionScope::Group),
        Some(text) => {
            let missions: BTreeSet<String> = serde_json::from_str(&text).map_err(Error::backend)?;
            Ok(MissionScope::Missions(missions))
        }
    }
}

/// A Reader for Agent `agent_id` in Group `group_id` with its Membership's current scope.
pub(crate) fn agent_reader(
    conn: &Connection,
    group_id: &Id,
    agent_id: &Id,
) -> Result<Reader, Error> {
    Ok(Reader::Agent {
        agent_id: agent_id.clone(),
        group_id: group_id.clone(),
        scope: mission_scope(conn, group_id.as_str(), agent_id.as_str())?,
    })
}

/// Whether `reader` may know blob `blake3` exists: it can read an artifact of those bytes or
/// uploaded them itself.
pub(crate) fn can_see_blob(
    conn: &Connection,
    reader: &Reader,
    blake3: &ArtifactId,
) -> Result<bool, Error> {
    if can_read_artifact(conn, reader, blake3)? {
        return Ok(true);
    }
    match reader {
        Reader::Admin => crate::rows::blobs::exists(conn, blake3),
        Reader::Agent {
            agent_id, group_id, ..
        } => crate::rows::blob_uploaders::uploaded(
            conn,
            blake3,
            agent_id.as_str(),
            group_id.as_str(),
        ),
    }
}

/// The active Agent whose current key this is, with the key and its card version: who may
/// sign something new with it. A retired key or a deactivated Agent's key is `None`.
/// Refuses (`unknown_key`) unless `keyid` is still the current key of active Agent `signer`:
/// a writer's transaction re-checking a key verified before it. Only whose key it is is
/// read, no curve point decompressed (that was 3.2 % of an Evidence record's server CPU,
/// issue #44).
pub(crate) fn key_still_the_signers(
    conn: &Connection,
    keyid: &KeyId,
    signer: &Id,
) -> Result<(), Error> {
    let agent = crate::rows::agents::active_id_by_keyid_ahead(conn, keyid.as_str())?;
    match agent.get(conn)? {
        Some(agent_id) if agent_id == signer.as_str() => Ok(()),
        _ => Err(reject(
            ErrorCode::UnknownKey,
            "the signing key was unregistered meanwhile",
        )),
    }
}

pub(crate) fn agent_by_keyid(
    conn: &Connection,
    keyid: &KeyId,
) -> Result<Option<(Id, VerifyingKey, String)>, Error> {
    let row = crate::rows::agents::active_by_keyid(conn, keyid.as_str())?;
    row.map(|(agent_id, key, card)| {
        let key = VerifyingKey::from_bytes(&to32(key)?).map_err(Error::backend)?;
        Ok((Id::parse("agentId", &agent_id)?, key, card))
    })
    .transpose()
}

/// Any key an Agent ever had, current or retired, with its Agent: for re-verifying what was
/// recorded with it (a retired key was refused for anything newer at the door).
pub(crate) fn recorded_key(
    conn: &Connection,
    keyid: &KeyId,
) -> Result<Option<(Id, VerifyingKey)>, Error> {
    let row = crate::rows::agent_keys::recorded(conn, keyid.as_str())?;
    row.map(|(agent_id, key)| {
        let key = VerifyingKey::from_bytes(&to32(key)?).map_err(Error::backend)?;
        Ok((Id::parse("agentId", &agent_id)?, key))
    })
    .transpose()
}

/// Why `keyid` may not sign anything new: retired, its Agent deactivated, or unknown.
pub(crate) fn key_refusal(conn: &Connection, keyid: &KeyId) -> Result<Error, Error> {
    let row = crate::rows::agent_keys::retirement(conn, keyid.as_str())?;
    Ok(match row {
        Some((_, Some(_))) => reject(
            ErrorCode::AgentDeactivated,
            format!("the agent of key {keyid} was deactivated"),
        ),
        Some((Some(retired_at), None)) => reject(
            ErrorCode::KeyRetired,
            format!("key {keyid} was retired at {retired_at}; sign with the current key"),
        ),
        _ => reject(
            ErrorCode::UnknownKey,
            format!("no agent is registered with key {keyid}"),
        ),
    })
}

/// Roles and epoch of a current Membership (`None` once removed).
pub(crate) fn membership(
    conn: &Connection,
    group_id: &str,
    agent_id: &str,
) -> Result<Option<(Vec<Role>, u64)>, Error> {
    crate::rows::memberships::current(conn, group_id, agent_id)
}

pub(crate) fn group_exists(conn: &Connection, group_id: &str) -> Result<bool, Error> {
    crate::rows::groups::exists(conn, group_id)
}
