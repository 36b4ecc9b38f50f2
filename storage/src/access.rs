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
    /// An Agent with a session: sees what its Groups published.
    Agent(Id),
}

/// Groups `agent_id` is a member of.
pub(crate) fn member_groups(conn: &Connection, agent_id: &str) -> Result<Vec<String>, Error> {
    let mut statement =
        conn.prepare_cached("SELECT group_id FROM memberships WHERE agent_id = ?1")?;
    let groups = statement
        .query_map([agent_id], |row| row.get::<_, String>(0))?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(groups)
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
        Reader::Agent(agent_id) => conn
            .query_row(
                "SELECT 1 FROM manifests m JOIN memberships s ON s.group_id = m.group_id
                 WHERE m.blake3 = ?1 AND s.agent_id = ?2 LIMIT 1",
                params![&blake3.0[..], agent_id.as_str()],
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
        Reader::Agent(agent_id) => Ok(conn
            .query_row(
                "SELECT 1 FROM blob_uploaders WHERE blake3 = ?1 AND agent_id = ?2",
                params![&blake3.0[..], agent_id.as_str()],
                |_| Ok(()),
            )
            .optional()?
            .is_some()),
    }
}

/// The Agent a key belongs to, with its key and card version.
pub(crate) fn agent_by_keyid(
    conn: &Connection,
    keyid: &KeyId,
) -> Result<Option<(Id, VerifyingKey, String)>, Error> {
    let row = conn
        .query_row(
            "SELECT agent_id, public_key, agent_card_version FROM agents WHERE keyid = ?1",
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

/// Roles and epoch of a Membership.
pub(crate) fn membership(
    conn: &Connection,
    group_id: &str,
    agent_id: &str,
) -> Result<Option<(Vec<Role>, u64)>, Error> {
    let row = conn
        .query_row(
            "SELECT roles, epoch FROM memberships WHERE group_id = ?1 AND agent_id = ?2",
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
    /// The reader's Groups from the in-memory projection (`None`: the admin sees all).
    pub(crate) fn reader_groups(&self, reader: &Reader) -> Option<Vec<String>> {
        match reader {
            Reader::Admin => None,
            Reader::Agent(agent) => Some(
                self.member_groups
                    .read()
                    .unwrap_or_else(|p| p.into_inner())
                    .get(agent.as_str())
                    .map(|groups| groups.iter().cloned().collect())
                    .unwrap_or_default(),
            ),
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
                    .read(move |conn| agent_by_keyid(conn, &lookup))
                    .await?
                    .ok_or_else(|| {
                        reject(
                            ErrorCode::UnknownKey,
                            format!("no agent is registered with key {keyid}"),
                        )
                    })?
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
