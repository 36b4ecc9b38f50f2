//! Who is asking and what they may see: the [`Reader`], the row helpers that answer
//! "is this Agent a member, may it read this artifact or know this blob", and the one
//! signature check every signed payload goes through.

use ed25519_dalek::VerifyingKey;
use rusqlite::{Connection, OptionalExtension as _, params};
use weft_api::evidence::AUTHORITY_AGENT;
use weft_api::session::Role;
use weft_api::{ArtifactId, Envelope, ErrorCode, Id, KeyId};
use weft_api::{SignedPayload, Verified};

use crate::engine::Engine;
use crate::error::{Error, reject};
use crate::events::to32;

/// Who is asking.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reader {
    /// The operator, with the admin token: sees everything.
    Admin,
    /// An Agent acting through a session of one Group: sees what that Group published and
    /// nothing of its other Groups (a session acts in its own Group only).
    Agent { agent_id: Id, group_id: Id },
}

impl Reader {
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

/// Whether `reader` may see artifact `blake3` (it is published in one of the reader's Groups).
pub(crate) fn can_read_artifact(
    conn: &Connection,
    reader: &Reader,
    blake3: &ArtifactId,
) -> Result<bool, Error> {
    let visible = match reader {
        Reader::Admin => conn
            .query_row(
                "SELECT 1 FROM manifests WHERE blake3 = ?1 LIMIT 1",
                [&blake3.0[..]],
                |_| Ok(()),
            )
            .optional()?
            .is_some(),
        // A Context Package forwarded to the Group brings the Artifacts it cites (CTX-7).
        Reader::Agent { group_id, .. } => conn
            .query_row(
                "SELECT 1 FROM manifests WHERE blake3 = ?1 AND group_id = ?2
                 UNION ALL SELECT 1 FROM forwarded_artifacts WHERE blake3 = ?1 AND group_id = ?2
                 LIMIT 1",
                params![&blake3.0[..], group_id.as_str()],
                |_| Ok(()),
            )
            .optional()?
            .is_some(),
    };
    Ok(visible)
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
        Reader::Admin => Ok(conn
            .query_row(
                "SELECT 1 FROM blobs WHERE blake3 = ?1",
                [&blake3.0[..]],
                |_| Ok(()),
            )
            .optional()?
            .is_some()),
        Reader::Agent { agent_id, group_id } => Ok(conn
            .query_row(
                "SELECT 1 FROM blob_uploaders WHERE blake3 = ?1 AND agent_id = ?2 AND group_id = ?3",
                params![&blake3.0[..], agent_id.as_str(), group_id.as_str()],
                |_| Ok(()),
            )
            .optional()?
            .is_some()),
    }
}

/// The active Agent whose current key this is, with the key and its card version: who may
/// sign something new with it. A retired key or a deactivated Agent's key is `None`.
pub(crate) fn agent_by_keyid(
    conn: &Connection,
    keyid: &KeyId,
) -> Result<Option<(Id, VerifyingKey, String)>, Error> {
    let row = conn
        .query_row(
            "SELECT agent_id, public_key, agent_card_version FROM agents
             WHERE keyid = ?1 AND deactivated_at IS NULL",
            [keyid.as_str()],
            |row| {
                Ok((
                    row.get::<_, String>(0)?,
                    row.get::<_, Vec<u8>>(1)?,
                    row.get::<_, String>(2)?,
                ))
            },
        )
        .optional()?;
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
    let row = conn
        .query_row(
            "SELECT agent_id, public_key FROM agent_keys WHERE keyid = ?1",
            [keyid.as_str()],
            |row| Ok((row.get::<_, String>(0)?, row.get::<_, Vec<u8>>(1)?)),
        )
        .optional()?;
    row.map(|(agent_id, key)| {
        let key = VerifyingKey::from_bytes(&to32(key)?).map_err(Error::backend)?;
        Ok((Id::parse("agentId", &agent_id)?, key))
    })
    .transpose()
}

/// Why `keyid` may not sign anything new: retired, its Agent deactivated, or unknown.
fn key_refusal(conn: &Connection, keyid: &KeyId) -> Result<Error, Error> {
    let row: Option<(Option<String>, Option<String>)> = conn
        .query_row(
            "SELECT k.retired_at, a.deactivated_at FROM agent_keys k
             JOIN agents a ON a.agent_id = k.agent_id WHERE k.keyid = ?1",
            [keyid.as_str()],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .optional()?;
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
    let row = conn
        .query_row(
            "SELECT roles, epoch FROM memberships
             WHERE group_id = ?1 AND agent_id = ?2 AND removed_at IS NULL",
            params![group_id, agent_id],
            |row| Ok((row.get::<_, String>(0)?, row.get::<_, u64>(1)?)),
        )
        .optional()?;
    row.map(|(roles, epoch)| {
        let roles: Vec<Role> = serde_json::from_str(&roles).map_err(Error::backend)?;
        Ok((roles, epoch))
    })
    .transpose()
}

pub(crate) fn group_exists(conn: &Connection, group_id: &str) -> Result<bool, Error> {
    Ok(conn
        .query_row(
            "SELECT 1 FROM groups WHERE group_id = ?1",
            [group_id],
            |_| Ok(()),
        )
        .optional()?
        .is_some())
}

impl Engine {
    /// The Groups whose publications the reader sees (`None`: the admin sees all).
    pub(crate) fn reader_groups(&self, reader: &Reader) -> Option<Vec<String>> {
        match reader {
            Reader::Admin => None,
            Reader::Agent { group_id, .. } => Some(vec![group_id.to_string()]),
        }
    }
}

/// A payload whose DSSE signature checked out against its signer's registered key, parsed
/// through the one parsing path, and whose claimed producer is that signer.
#[derive(Debug)]
pub(crate) struct Signed<T> {
    /// The registered Agent whose key signed it (or the authority).
    pub(crate) signer: Id,
    /// The key that signed it.
    pub(crate) keyid: KeyId,
    /// `blake3:` of the payload bytes: the id of a manifest or Evidence record.
    pub(crate) payload_id: ArtifactId,
    pub(crate) value: Verified<T>,
}

/// Whether the server's own key may sign this payload (only its reviewer's Evidence).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AuthorityMay {
    Sign,
    NotSign,
}

impl Engine {
    /// The one signature check: resolve `keyid` to a registered Agent (or, where allowed, the
    /// authority), verify the envelope strictly as `T`'s payload type, parse the payload, and
    /// require that the payload's claimed producer and agent card version are the signer's.
    pub(crate) async fn verify_signed<T: SignedPayload>(
        &self,
        envelope: &Envelope,
        authority: AuthorityMay,
    ) -> Result<Signed<T>, Error> {
        let keyid = envelope.signer_keyid()?;
        let (authority_keyid, authority_key) = self.authority_key();
        let (signer, key, card_version) =
            if authority == AuthorityMay::Sign && keyid == authority_keyid {
                (
                    Id::parse("agentId", AUTHORITY_AGENT)?,
                    authority_key,
                    "1".to_owned(),
                )
            } else {
                let lookup = keyid.clone();
                self.db
                    .read(move |conn| match agent_by_keyid(conn, &lookup)? {
                        Some(found) => Ok(found),
                        None => Err(key_refusal(conn, &lookup)?),
                    })
                    .await?
            };
        let verified = envelope.verify(T::PAYLOAD_TYPE, &key)?;
        let payload_id = ArtifactId::of(verified.value());
        let value = verified.try_map(|payload| T::parse_payload(&payload))?;
        let (claimed, claimed_card) = value.value().signer_claim();
        if *claimed != signer {
            return Err(reject(
                ErrorCode::ProducerMismatch,
                format!("signed by {signer}, but the {} names {claimed}", T::NAME),
            ));
        }
        if let Some(claimed_card) = claimed_card
            && claimed_card != card_version
        {
            return Err(reject(
                ErrorCode::ProducerMismatch,
                format!("{signer}'s registered agent card version is {card_version}"),
            ));
        }
        Ok(Signed {
            signer,
            keyid,
            payload_id,
            value,
        })
    }

    /// The server's signing key as `(keyid, public key)`.
    pub(crate) fn authority_key(&self) -> (KeyId, ed25519_dalek::VerifyingKey) {
        let public = self.authority.verifying_key();
        (KeyId::of(&public), public)
    }
}
