//! The operations behind [`crate::Store`]: each one checks its input, then commits its rows and
//! its Event in one writer transaction, re-checking there whatever could have changed since.

use std::collections::{HashSet, VecDeque};
use std::ops::Range;
use std::sync::Arc;

use base64::Engine as _;
use bytes::Bytes;
use ed25519_dalek::VerifyingKey;
use futures::{Stream, StreamExt as _, TryStreamExt as _};
use rusqlite::{Connection, OptionalExtension as _, params};
use serde_json::json;
use weft_api::dsse::{MANIFEST_TYPE, SESSION_TYPE};
use weft_api::session::{Membership, Role, SessionGrant};
use weft_api::views::{
    ArtifactPage, ArtifactView, DigestPair, ListedArtifact, ManifestRecord, Published,
};
use weft_api::{
    ArtifactId, Digest, Digests, Envelope, ErrorCode, Event, Id, KeyId, Manifest, SessionRequest,
    Sha256Digest,
};

use crate::blobs::{Blobs, Staged};
use crate::clock::{Clock, format_instant};
use crate::db::Db;
use crate::error::Error;
use crate::events::{self, to32};
use crate::hashing::DualHasher;
use crate::{Content, Options};

/// Who is asking.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reader {
    /// The operator, with the admin token: sees everything.
    Admin,
    /// An Agent with a session: sees what its Groups published.
    Agent(Id),
}

/// A live session, resolved from its bearer token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Session {
    pub agent_id: Id,
    pub group_id: Id,
    pub session_epoch: u64,
    pub membership_epoch: u64,
}

/// What an upload did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UploadOutcome {
    pub digests: Digests,
    /// `true` when the uploader could already see these bytes before this upload. Only then
    /// does the server say "already present": anything else would tell one Group what
    /// another holds.
    pub already_visible: bool,
}

/// Filters of `GET /v1/artifacts`.
#[derive(Clone, Debug, Default)]
pub struct ListFilter {
    pub mission_id: Option<Id>,
    pub work_item_id: Option<Id>,
    pub producer: Option<Id>,
    pub media_type: Option<String>,
    pub after: Option<u64>,
    pub limit: u32,
}

/// Counts of everything the store holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub groups: u64,
    pub agents: u64,
    pub memberships: u64,
    pub sessions: u64,
    pub blobs: u64,
    pub blob_uploaders: u64,
    pub manifests: u64,
    pub derivations: u64,
    pub events: u64,
    pub evidence: u64,
    pub quarantined: u64,
    /// Objects under `blobs/` in the backend.
    pub blob_objects: u64,
    /// Objects under `staging/` in the backend (uploads in flight or leftovers).
    pub staging_objects: u64,
}

/// What fsck found.
#[derive(Clone, Debug, Default)]
pub struct FsckReport {
    pub n_blobs: u64,
    pub n_bytes: u64,
    pub n_manifests: u64,
    pub n_events: u64,
    pub problems: Vec<String>,
}

pub(crate) struct Inner {
    pub(crate) db: Db,
    pub(crate) blobs: Blobs,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) authority: Arc<ed25519_dalek::SigningKey>,
    /// The provenance graph in memory, in step with the `manifests`/`derivations` tables.
    pub(crate) lineage: crate::lineage::Index,
    /// Agent → the Groups it is a member of, in step with `memberships` (for lineage reads,
    /// which then need no database round trip).
    pub(crate) member_groups:
        std::sync::RwLock<std::collections::HashMap<String, std::collections::BTreeSet<String>>>,
    max_upload_bytes: u64,
    session_ttl: chrono::Duration,
    pub(crate) lineage_inline_budget: Option<std::time::Duration>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inner")
            .field("db", &self.db)
            .field("blobs", &self.blobs)
            .finish()
    }
}

pub(crate) fn reject(code: ErrorCode, message: impl Into<String>) -> Error {
    Error::reject(code, message)
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
fn can_see_blob(conn: &Connection, reader: &Reader, blake3: &ArtifactId) -> Result<bool, Error> {
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

/// A blob row: digests and whether it is quarantined.
pub(crate) fn blob_row(
    conn: &Connection,
    digest: &Digest,
) -> Result<Option<(Digests, bool)>, Error> {
    let (sql, key) = match digest {
        Digest::Blake3(id) => (
            "SELECT blake3, sha256, size, quarantined_at FROM blobs WHERE blake3 = ?1",
            id.0,
        ),
        Digest::Sha256(sha) => (
            "SELECT blake3, sha256, size, quarantined_at FROM blobs WHERE sha256 = ?1",
            sha.0,
        ),
    };
    let row = conn
        .query_row(sql, [&key[..]], |row| {
            Ok((
                row.get::<_, Vec<u8>>(0)?,
                row.get::<_, Vec<u8>>(1)?,
                row.get::<_, u64>(2)?,
                row.get::<_, Option<String>>(3)?,
            ))
        })
        .optional()?;
    row.map(|(blake3, sha256, size, quarantined)| {
        Ok((
            Digests {
                blake3: ArtifactId(to32(blake3)?),
                sha256: Sha256Digest(to32(sha256)?),
                size,
            },
            quarantined.is_some(),
        ))
    })
    .transpose()
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

/// Whether `target` is reachable from `start` by following derivedFrom edges towards sources.
/// Iterative breadth-first search: never recurses on the call stack.
fn reaches(conn: &Connection, start: &[ArtifactId], target: &ArtifactId) -> Result<bool, Error> {
    let mut statement =
        conn.prepare_cached("SELECT DISTINCT source FROM derivations WHERE artifact = ?1")?;
    let mut seen: HashSet<ArtifactId> = start.iter().copied().collect();
    let mut queue: VecDeque<ArtifactId> = start.iter().copied().collect();
    while let Some(node) = queue.pop_front() {
        if node == *target {
            return Ok(true);
        }
        let sources = statement
            .query_map([&node.0[..]], |row| row.get::<_, Vec<u8>>(0))?
            .collect::<Result<Vec<_>, _>>()?;
        for source in sources {
            let source = ArtifactId(to32(source)?);
            if seen.insert(source) {
                queue.push_back(source);
            }
        }
    }
    Ok(false)
}

/// Every publication in the index tables, for rebuilding the lineage index at start.
pub(crate) fn load_publications(
    conn: &Connection,
) -> Result<Vec<crate::lineage::Publication>, Error> {
    let mut sources: std::collections::HashMap<Vec<u8>, Vec<ArtifactId>> =
        std::collections::HashMap::new();
    let mut statement = conn.prepare("SELECT manifest_id, source FROM derivations")?;
    for row in statement.query_map([], |row| {
        Ok((row.get::<_, Vec<u8>>(0)?, row.get::<_, Vec<u8>>(1)?))
    })? {
        let (manifest_id, source) = row?;
        sources
            .entry(manifest_id)
            .or_default()
            .push(ArtifactId(to32(source)?));
    }
    let mut statement = conn.prepare(
        "SELECT m.blake3, b.size, m.manifest_id, m.group_id, m.mission_id, m.work_item_id, m.producer, m.media_type, m.sequence
         FROM manifests m JOIN blobs b ON b.blake3 = m.blake3 ORDER BY m.rowid",
    )?;
    let rows = statement
        .query_map([], |row| {
            Ok((
                row.get::<_, Vec<u8>>(0)?,
                row.get::<_, u64>(1)?,
                row.get::<_, Vec<u8>>(2)?,
                row.get::<_, String>(3)?,
                row.get::<_, String>(4)?,
                row.get::<_, String>(5)?,
                row.get::<_, String>(6)?,
                row.get::<_, String>(7)?,
                row.get::<_, u64>(8)?,
            ))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    rows.into_iter()
        .map(
            |(
                artifact,
                size,
                manifest_id,
                group,
                mission,
                work_item,
                producer,
                media_type,
                sequence,
            )| {
                Ok(crate::lineage::Publication {
                    artifact: ArtifactId(to32(artifact)?),
                    size,
                    sources: sources.remove(&manifest_id).unwrap_or_default(),
                    manifest_id: ArtifactId(to32(manifest_id)?),
                    group,
                    mission,
                    work_item,
                    producer,
                    media_type,
                    sequence,
                })
            },
        )
        .collect()
}

fn parse_envelope(bytes: &Envelope) -> Result<KeyId, Error> {
    Ok(bytes.signer_keyid()?)
}

impl Inner {
    pub(crate) async fn open(options: Options) -> Result<Self, Error> {
        if let crate::db::Location::File(path) = &options.index
            && let Some(parent) = path.parent()
        {
            std::fs::create_dir_all(parent).map_err(Error::backend)?;
        }
        let db = Db::open(&options.index)?;
        let blobs = Blobs::open(&options.blobs)?;
        let n_swept = if options.sweep_staging {
            blobs.sweep_staging()?
        } else {
            0
        };
        if n_swept > 0 {
            tracing::info!(n_swept, "removed stale staging files");
        }
        let lineage = crate::lineage::Index::default();
        lineage.add_all(&db.read(load_publications).await?);
        let member_groups = db
            .read(|conn| {
                let mut map: std::collections::HashMap<String, std::collections::BTreeSet<String>> =
                    std::collections::HashMap::new();
                let mut statement = conn.prepare("SELECT agent_id, group_id FROM memberships")?;
                for row in statement.query_map([], |row| {
                    Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)?))
                })? {
                    let (agent, group) = row?;
                    map.entry(agent).or_default().insert(group);
                }
                Ok(map)
            })
            .await?;
        Ok(Self {
            db,
            blobs,
            lineage,
            member_groups: std::sync::RwLock::new(member_groups),
            clock: options.clock,
            authority: options.authority,
            max_upload_bytes: options.max_upload_bytes,
            session_ttl: options.session_ttl,
            lineage_inline_budget: options.lineage_inline_budget,
        })
    }

    pub(crate) async fn create_group(&self, group_id: Id) -> Result<bool, Error> {
        let now = self.clock.now();
        self.db
            .write(move |txn| {
                if group_exists(txn, group_id.as_str())? {
                    return Ok(false);
                }
                txn.execute(
                    "INSERT INTO groups (group_id, created_at) VALUES (?1, ?2)",
                    params![group_id.as_str(), format_instant(now)],
                )?;
                events::append(
                    txn,
                    &group_id,
                    "group.created",
                    &json!({"groupId": group_id}),
                    now,
                )?;
                Ok(true)
            })
            .await
    }

    pub(crate) async fn register_agent(
        &self,
        agent_id: Id,
        key: VerifyingKey,
        card_version: String,
    ) -> Result<(KeyId, bool), Error> {
        if card_version.is_empty()
            || card_version.len() > 256
            || card_version.chars().any(char::is_control)
        {
            return Err(reject(
                ErrorCode::BadRequest,
                "agentCardVersion must be 1..=256 printable bytes",
            ));
        }
        if agent_id.as_str() == weft_api::evidence::AUTHORITY_AGENT {
            return Err(reject(
                ErrorCode::Conflict,
                "this agent id is reserved for the server",
            ));
        }
        if key == self.authority.verifying_key() {
            return Err(reject(ErrorCode::Conflict, "this key is the server's own"));
        }
        let keyid = KeyId::of(&key);
        let now = self.clock.now();
        self.db
            .write(move |txn| {
                let existing: Option<Vec<u8>> = txn
                    .query_row("SELECT public_key FROM agents WHERE agent_id = ?1", [agent_id.as_str()], |row| row.get(0))
                    .optional()?;
                match existing {
                    Some(stored) if stored == key.as_bytes() => {
                        txn.execute(
                            "UPDATE agents SET agent_card_version = ?2 WHERE agent_id = ?1",
                            params![agent_id.as_str(), card_version],
                        )?;
                        Ok((keyid, false))
                    }
                    Some(_) => Err(reject(ErrorCode::Conflict, format!("agent {agent_id} is registered with another key"))),
                    None => {
                        let taken = txn
                            .query_row("SELECT 1 FROM agents WHERE keyid = ?1", [keyid.as_str()], |_| Ok(()))
                            .optional()?
                            .is_some();
                        if taken {
                            return Err(reject(ErrorCode::Conflict, "this key is registered to another agent"));
                        }
                        txn.execute(
                            "INSERT INTO agents (agent_id, public_key, keyid, agent_card_version, registered_at)
                             VALUES (?1, ?2, ?3, ?4, ?5)",
                            params![agent_id.as_str(), &key.as_bytes()[..], keyid.as_str(), card_version, format_instant(now)],
                        )?;
                        Ok((keyid, true))
                    }
                }
            })
            .await
    }

    pub(crate) async fn set_membership(
        &self,
        group_id: Id,
        agent_id: Id,
        roles: Vec<Role>,
    ) -> Result<Membership, Error> {
        let membership = self.write_membership(group_id, agent_id, roles).await?;
        // Committed: the in-memory membership projection follows (memberships are only added
        // or changed, never removed).
        self.member_groups
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .entry(membership.agent_id.to_string())
            .or_default()
            .insert(membership.group_id.to_string());
        Ok(membership)
    }

    async fn write_membership(
        &self,
        group_id: Id,
        agent_id: Id,
        mut roles: Vec<Role>,
    ) -> Result<Membership, Error> {
        roles.sort();
        roles.dedup();
        if roles.is_empty() {
            return Err(reject(
                ErrorCode::BadRequest,
                "roles must name at least one role",
            ));
        }
        let now = self.clock.now();
        self.db
            .write(move |txn| {
                if !group_exists(txn, group_id.as_str())? {
                    return Err(reject(ErrorCode::UnknownGroup, format!("group {group_id} does not exist")));
                }
                let agent_known = txn
                    .query_row("SELECT 1 FROM agents WHERE agent_id = ?1", [agent_id.as_str()], |_| Ok(()))
                    .optional()?
                    .is_some();
                if !agent_known {
                    return Err(reject(ErrorCode::UnknownAgent, format!("agent {agent_id} is not registered")));
                }
                let epoch = membership(txn, group_id.as_str(), agent_id.as_str())?.map_or(0, |(_, epoch)| epoch) + 1;
                let roles_json = serde_json::to_string(&roles).map_err(Error::backend)?;
                txn.execute(
                    "INSERT INTO memberships (group_id, agent_id, roles, epoch) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT (group_id, agent_id) DO UPDATE SET roles = excluded.roles, epoch = excluded.epoch",
                    params![group_id.as_str(), agent_id.as_str(), roles_json, epoch],
                )?;
                events::append(
                    txn,
                    &group_id,
                    "membership.set",
                    &json!({"agentId": agent_id, "roles": roles, "membershipEpoch": epoch}),
                    now,
                )?;
                Ok(Membership { group_id, agent_id, roles, epoch })
            })
            .await
    }

    pub(crate) async fn open_session(&self, envelope: Envelope) -> Result<SessionGrant, Error> {
        let keyid = parse_envelope(&envelope)?;
        let lookup = keyid.clone();
        let agent = self
            .db
            .read(move |conn| agent_by_keyid(conn, &lookup))
            .await?;
        let Some((agent_id, key, _)) = agent else {
            return Err(reject(
                ErrorCode::UnknownKey,
                format!("no agent is registered with key {keyid}"),
            ));
        };
        let payload = envelope.verify(SESSION_TYPE, &key)?;
        let request = SessionRequest::parse(payload.value())?;
        if request.agent_id != agent_id {
            return Err(reject(
                ErrorCode::ProducerMismatch,
                "the session request is signed by another agent's key",
            ));
        }
        let now = self.clock.now();
        let skew = (now - request.issued_at.to_utc()).num_seconds().abs();
        if skew > weft_api::session::MAX_CLOCK_SKEW_SECONDS {
            return Err(reject(
                ErrorCode::ClockSkew,
                "issuedAt is more than 5 minutes from the server clock",
            ));
        }
        let token_bytes: [u8; 32] = rand::random();
        let token = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(token_bytes);
        let token_hash = *blake3::hash(token.as_bytes()).as_bytes();
        let expires_at = now + self.session_ttl;
        self.db
            .write(move |txn| {
                if !group_exists(txn, request.group_id.as_str())? {
                    return Err(reject(ErrorCode::UnknownGroup, format!("group {} does not exist", request.group_id)));
                }
                let Some((_, membership_epoch)) = membership(txn, request.group_id.as_str(), agent_id.as_str())? else {
                    return Err(reject(ErrorCode::NotAMember, format!("{agent_id} is not a member of {}", request.group_id)));
                };
                let fresh = txn.execute(
                    "INSERT OR IGNORE INTO session_nonces (agent_id, nonce, seen_at) VALUES (?1, ?2, ?3)",
                    params![agent_id.as_str(), request.nonce, format_instant(now)],
                )?;
                if fresh == 0 {
                    return Err(reject(ErrorCode::NonceReused, "this session request was already used"));
                }
                let session_epoch: u64 = txn
                    .query_row(
                        "INSERT INTO session_epochs (agent_id, group_id, epoch) VALUES (?1, ?2, 1)
                         ON CONFLICT (agent_id, group_id) DO UPDATE SET epoch = epoch + 1
                         RETURNING epoch",
                        params![agent_id.as_str(), request.group_id.as_str()],
                        |row| row.get(0),
                    )?;
                txn.execute(
                    "INSERT INTO sessions (token_hash, agent_id, group_id, session_epoch, membership_epoch, expires_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                    params![&token_hash[..], agent_id.as_str(), request.group_id.as_str(), session_epoch, membership_epoch, format_instant(expires_at)],
                )?;
                events::append(
                    txn,
                    &request.group_id,
                    "session.opened",
                    &json!({"agentId": agent_id, "sessionEpoch": session_epoch, "membershipEpoch": membership_epoch}),
                    now,
                )?;
                Ok(SessionGrant { token, session_epoch, membership_epoch, expires_at })
            })
            .await
    }

    pub(crate) async fn authenticate(&self, token: &str) -> Result<crate::Session, Error> {
        let token_hash = *blake3::hash(token.as_bytes()).as_bytes();
        let now = self.clock.now();
        self.db
            .read(move |conn| {
                let row = conn
                    .query_row(
                        "SELECT agent_id, group_id, session_epoch, membership_epoch, expires_at
                         FROM sessions WHERE token_hash = ?1",
                        [&token_hash[..]],
                        |row| {
                            Ok((
                                row.get::<_, String>(0)?,
                                row.get::<_, String>(1)?,
                                row.get::<_, u64>(2)?,
                                row.get::<_, u64>(3)?,
                                row.get::<_, String>(4)?,
                            ))
                        },
                    )
                    .optional()?;
                let Some((agent_id, group_id, session_epoch, membership_epoch, expires_at)) = row
                else {
                    return Err(reject(ErrorCode::Unauthorized, "unknown or revoked token"));
                };
                if expires_at <= format_instant(now) {
                    return Err(reject(ErrorCode::Unauthorized, "the session has expired"));
                }
                match membership(conn, &group_id, &agent_id)? {
                    Some((_, epoch)) if epoch == membership_epoch => {}
                    _ => {
                        return Err(reject(
                            ErrorCode::StaleSession,
                            "the membership changed since this session was opened",
                        ));
                    }
                }
                let current_epoch: u64 = conn.query_row(
                    "SELECT epoch FROM session_epochs WHERE agent_id = ?1 AND group_id = ?2",
                    params![agent_id, group_id],
                    |row| row.get(0),
                )?;
                if current_epoch != session_epoch {
                    return Err(reject(
                        ErrorCode::StaleSession,
                        "a newer session replaced this one",
                    ));
                }
                Ok(crate::Session {
                    agent_id: Id::parse("agentId", &agent_id)?,
                    group_id: Id::parse("groupId", &group_id)?,
                    session_epoch,
                    membership_epoch,
                })
            })
            .await
    }

    pub(crate) async fn upload<S>(
        &self,
        body: S,
        expected: Option<Digest>,
        uploader: &Reader,
    ) -> Result<crate::UploadOutcome, Error>
    where
        S: Stream<Item = Result<Bytes, std::io::Error>> + Send,
    {
        // When the claimed bytes are already stored (and healthy), hash without writing.
        let known = match expected {
            Some(digest) => self.db.read(move |conn| blob_row(conn, &digest)).await?,
            None => None,
        };
        let (digests, staged) = match known {
            Some((_, false)) => (
                self.blobs.hash_only(body, self.max_upload_bytes).await?,
                None,
            ),
            _ => {
                let staged = self.blobs.stage(body, self.max_upload_bytes).await?;
                (staged.digests, Some(staged))
            }
        };
        if let Some(expected) = expected {
            let matches = match expected {
                Digest::Blake3(id) => id == digests.blake3,
                Digest::Sha256(sha) => sha == digests.sha256,
            };
            if !matches {
                // `staged` is dropped here, which deletes the staged bytes.
                return Err(reject(
                    ErrorCode::DigestMismatch,
                    format!(
                        "the body hashes to {} / {}, not {expected}",
                        digests.blake3, digests.sha256
                    ),
                ));
            }
        }
        self.record_blob(digests, staged, uploader).await
    }

    async fn record_blob(
        &self,
        digests: Digests,
        staged: Option<Staged>,
        uploader: &Reader,
    ) -> Result<crate::UploadOutcome, Error> {
        let reader = uploader.clone();
        let before = self
            .db
            .read(move |conn| {
                let row = blob_row(conn, &Digest::Blake3(digests.blake3))?;
                let visible = can_see_blob(conn, &reader, &digests.blake3)?;
                Ok((row, visible))
            })
            .await?;
        let (row, already_visible) = before;
        let quarantined = matches!(row, Some((_, true)));
        if let Some(staged) = staged {
            // Blob first, index second. A quarantined blob is replaced by the good bytes.
            self.blobs.promote(staged, quarantined).await?;
        }
        let now = self.clock.now();
        let uploader = uploader.clone();
        self.db
            .write(move |txn| {
                txn.execute(
                    "INSERT INTO blobs (blake3, sha256, size, stored_at) VALUES (?1, ?2, ?3, ?4)
                     ON CONFLICT (blake3) DO NOTHING",
                    params![
                        &digests.blake3.0[..],
                        &digests.sha256.0[..],
                        digests.size,
                        format_instant(now)
                    ],
                )?;
                if quarantined {
                    txn.execute(
                        "UPDATE blobs SET quarantined_at = NULL WHERE blake3 = ?1",
                        [&digests.blake3.0[..]],
                    )?;
                }
                if let Reader::Agent(agent_id) = &uploader {
                    txn.execute(
                        "INSERT OR IGNORE INTO blob_uploaders (blake3, agent_id) VALUES (?1, ?2)",
                        params![&digests.blake3.0[..], agent_id.as_str()],
                    )?;
                }
                Ok(())
            })
            .await?;
        Ok(crate::UploadOutcome {
            digests,
            already_visible,
        })
    }

    pub(crate) async fn visible_blob(
        &self,
        digest: Digest,
        reader: &Reader,
    ) -> Result<Option<Digests>, Error> {
        let reader = reader.clone();
        self.db
            .read(move |conn| {
                let Some((digests, _)) = blob_row(conn, &digest)? else {
                    return Ok(None);
                };
                Ok(can_see_blob(conn, &reader, &digests.blake3)?.then_some(digests))
            })
            .await
    }

    pub(crate) async fn publish(
        &self,
        envelope: Envelope,
        caller: &Reader,
    ) -> Result<(Published, bool), Error> {
        // 1. Signature: resolve the key, verify strictly, parse the payload.
        let keyid = parse_envelope(&envelope)?;
        let lookup = keyid.clone();
        let agent = self
            .db
            .read(move |conn| agent_by_keyid(conn, &lookup))
            .await?;
        let Some((signer, key, card_version)) = agent else {
            return Err(reject(
                ErrorCode::UnknownKey,
                format!("no agent is registered with key {keyid}"),
            ));
        };
        let verified = envelope.verify(MANIFEST_TYPE, &key)?;
        let manifest_id = ArtifactId::of(verified.value());
        let manifest = verified.try_map(|payload| Manifest::parse(&payload))?;
        let manifest = manifest.into_inner();
        // 2. Who: the signer is the producer, and the caller publishes only its own work.
        if manifest.producer.agent_id != signer {
            return Err(reject(
                ErrorCode::ProducerMismatch,
                format!(
                    "signed by {signer}, but the producer is {}",
                    manifest.producer.agent_id
                ),
            ));
        }
        if manifest.producer.agent_card_version != card_version {
            return Err(reject(
                ErrorCode::ProducerMismatch,
                format!("{signer}'s registered agent card version is {card_version}"),
            ));
        }
        if let Reader::Agent(caller) = caller
            && *caller != signer
        {
            return Err(reject(
                ErrorCode::ProducerMismatch,
                "an agent publishes only manifests it signed",
            ));
        }
        let envelope_json = serde_json::to_string(&envelope).map_err(Error::backend)?;
        let now = self.clock.now();
        let publication = crate::lineage::Publication {
            artifact: manifest.content.blake3,
            size: manifest.content.size,
            manifest_id,
            group: manifest.group_id.to_string(),
            mission: manifest.mission_id.to_string(),
            work_item: manifest.work_item_id.to_string(),
            producer: signer.to_string(),
            media_type: manifest.content.media_type.clone(),
            sequence: 0,
            sources: manifest.sources.clone(),
        };
        // 3. Everything else is checked in the transaction that records it.
        let outcome = self.db
            .write(move |txn| {
                let existing: Option<(String, u64)> = txn
                    .query_row("SELECT blake3, sequence FROM manifests WHERE manifest_id = ?1", [&manifest_id.0[..]], |row| {
                        Ok((String::new(), row.get(1)?))
                    })
                    .optional()?;
                if let Some((_, sequence)) = existing {
                    return Ok((Published { artifact: manifest.content.blake3, manifest_id, sequence }, false));
                }
                match agent_by_keyid(txn, &keyid)? {
                    Some((agent_id, _, _)) if agent_id == signer => {}
                    _ => return Err(reject(ErrorCode::UnknownKey, "the signing key was unregistered meanwhile")),
                }
                let group = manifest.group_id.as_str();
                if !group_exists(txn, group)? {
                    return Err(reject(ErrorCode::UnknownGroup, format!("group {group} does not exist")));
                }
                match membership(txn, group, signer.as_str())? {
                    Some((roles, _)) if roles.contains(&Role::Worker) => {}
                    Some(_) => return Err(reject(ErrorCode::Forbidden, format!("{signer} is not a worker in {group}"))),
                    None => return Err(reject(ErrorCode::NotAMember, format!("{signer} is not a member of {group}"))),
                }
                let producer = Reader::Agent(signer.clone());
                let content = &manifest.content;
                let blob = blob_row(txn, &Digest::Blake3(content.blake3))?;
                let visible = can_see_blob(txn, &producer, &content.blake3)?;
                match blob {
                    Some(_) if !visible => {
                        return Err(reject(ErrorCode::BlobNotFound, format!("upload {} before publishing it", content.blake3)));
                    }
                    None => {
                        return Err(reject(ErrorCode::BlobNotFound, format!("upload {} before publishing it", content.blake3)));
                    }
                    Some((_, true)) => {
                        return Err(reject(ErrorCode::IntegrityFailure, format!("{} is quarantined", content.blake3)));
                    }
                    Some((digests, false)) => {
                        if digests.sha256 != content.sha256 || digests.size != content.size {
                            return Err(reject(
                                ErrorCode::DigestMismatch,
                                format!("stored bytes are {} and {} bytes", digests.sha256, digests.size),
                            ));
                        }
                    }
                }
                for source in &manifest.sources {
                    if !can_read_artifact(txn, &producer, source)? {
                        return Err(reject(ErrorCode::UnknownSource, format!("source {source} is not published in a group {signer} can read")));
                    }
                }
                if reaches(txn, &manifest.sources, &content.blake3)? {
                    return Err(reject(ErrorCode::Cycle, format!("{} is already an ancestor of one of its sources", content.blake3)));
                }
                let event = json!({
                    "artifact": content.blake3,
                    "sha256": content.sha256,
                    "size": content.size,
                    "mediaType": content.media_type,
                    "manifestId": manifest_id,
                    "missionId": manifest.mission_id,
                    "workItemId": manifest.work_item_id,
                    "producer": signer,
                    "leaseId": manifest.execution.lease_id,
                    "ownershipEpoch": manifest.execution.ownership_epoch,
                    "sources": manifest.sources,
                });
                let sequence = events::append(txn, &manifest.group_id, "artifact.published", &event, now)?;
                txn.execute(
                    "INSERT INTO manifests (manifest_id, blake3, group_id, mission_id, work_item_id, producer, media_type,
                                            lease_id, ownership_epoch, classification, created_at, envelope, sequence)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
                    params![
                        &manifest_id.0[..], &content.blake3.0[..], group, manifest.mission_id.as_str(),
                        manifest.work_item_id.as_str(), signer.as_str(), content.media_type,
                        manifest.execution.lease_id.as_str(), manifest.execution.ownership_epoch,
                        manifest.classification.as_str(), manifest.created_at.to_rfc3339(), envelope_json, sequence
                    ],
                )?;
                for source in &manifest.sources {
                    txn.execute(
                        "INSERT INTO derivations (artifact, source, manifest_id) VALUES (?1, ?2, ?3)",
                        params![&content.blake3.0[..], &source.0[..], &manifest_id.0[..]],
                    )?;
                }
                Ok((Published { artifact: content.blake3, manifest_id, sequence }, true))
            })
            .await?;
        if outcome.1 {
            // Committed: the lineage index follows the tables (edges are only ever added).
            self.lineage.add(&crate::lineage::Publication {
                sequence: outcome.0.sequence,
                ..publication
            });
        }
        Ok(outcome)
    }

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

    /// The blake3 id named by `digest` and the reader's Groups (`None`: all), for lineage.
    /// Whether the reader may see the artifact is the lineage index's answer (it holds every
    /// published artifact's Groups), so a `blake3:` name costs no database read; a `sha256:`
    /// alias is looked up.
    pub(crate) async fn resolve_for_lineage(
        &self,
        digest: Digest,
        reader: &Reader,
    ) -> Result<(ArtifactId, Option<Vec<String>>), Error> {
        let id = match digest {
            Digest::Blake3(id) => id,
            Digest::Sha256(_) => self
                .db
                .read(move |conn| Ok(blob_row(conn, &digest)?.map(|(digests, _)| digests.blake3)))
                .await?
                .ok_or_else(|| {
                    reject(
                        ErrorCode::NotFound,
                        format!("no artifact {digest} is visible to you"),
                    )
                })?,
        };
        Ok((id, self.reader_groups(reader)))
    }

    pub(crate) async fn artifact(
        &self,
        digest: Digest,
        reader: &Reader,
    ) -> Result<ArtifactView, Error> {
        let reader = reader.clone();
        self.db
            .read(move |conn| {
                let not_found = || reject(ErrorCode::NotFound, format!("no artifact {digest} is visible to you"));
                let Some((digests, quarantined)) = blob_row(conn, &digest)? else {
                    return Err(not_found());
                };
                let groups: Option<Vec<String>> = match &reader {
                    Reader::Admin => None,
                    Reader::Agent(agent_id) => Some(member_groups(conn, agent_id.as_str())?),
                };
                let mut statement = conn.prepare_cached(
                    "SELECT manifest_id, envelope, sequence, group_id FROM manifests WHERE blake3 = ?1 ORDER BY rowid",
                )?;
                let rows = statement
                    .query_map([&digests.blake3.0[..]], |row| {
                        Ok((row.get::<_, Vec<u8>>(0)?, row.get::<_, String>(1)?, row.get::<_, u64>(2)?, row.get::<_, String>(3)?))
                    })?
                    .collect::<Result<Vec<_>, _>>()?;
                let mut manifests = Vec::new();
                for (manifest_id, envelope, sequence, group_id) in rows {
                    if groups.as_ref().is_some_and(|groups| !groups.contains(&group_id)) {
                        continue;
                    }
                    let envelope: Envelope = serde_json::from_str(&envelope).map_err(Error::backend)?;
                    let payload = weft_api::dsse::BASE64.decode(&envelope.payload).map_err(Error::backend)?;
                    let manifest = Manifest::parse(&payload)?;
                    manifests.push(ManifestRecord { manifest_id: ArtifactId(to32(manifest_id)?), envelope, manifest, sequence });
                }
                if manifests.is_empty() {
                    return Err(not_found());
                }
                Ok(ArtifactView {
                    digests: DigestPair { blake3: digests.blake3, sha256: digests.sha256 },
                    size: digests.size,
                    quarantined,
                    manifests,
                })
            })
            .await
    }

    pub(crate) async fn list_artifacts(
        &self,
        filter: crate::ListFilter,
        reader: &Reader,
    ) -> Result<ArtifactPage, Error> {
        let reader = reader.clone();
        let limit = filter.limit.clamp(1, 1000);
        self.db
            .read(move |conn| {
                let mut sql = String::from(
                    "SELECT m.rowid, m.blake3, m.manifest_id, b.size, m.media_type, m.group_id, m.mission_id,
                            m.work_item_id, m.producer, m.created_at, m.sequence
                     FROM manifests m JOIN blobs b ON b.blake3 = m.blake3 WHERE m.rowid > ?1",
                );
                let mut args: Vec<Box<dyn rusqlite::ToSql>> = vec![Box::new(filter.after.unwrap_or(0))];
                let mut add = |clause: &str, value: String| {
                    args.push(Box::new(value));
                    sql.push_str(&format!(" AND {clause} = ?{}", args.len()));
                };
                if let Some(mission) = &filter.mission_id { add("m.mission_id", mission.to_string()); }
                if let Some(work_item) = &filter.work_item_id { add("m.work_item_id", work_item.to_string()); }
                if let Some(producer) = &filter.producer { add("m.producer", producer.to_string()); }
                if let Some(media_type) = &filter.media_type { add("m.media_type", media_type.clone()); }
                if let Reader::Agent(agent_id) = &reader {
                    args.push(Box::new(agent_id.to_string()));
                    sql.push_str(&format!(
                        " AND m.group_id IN (SELECT group_id FROM memberships WHERE agent_id = ?{})",
                        args.len()
                    ));
                }
                args.push(Box::new(limit + 1));
                sql.push_str(&format!(" ORDER BY m.rowid LIMIT ?{}", args.len()));
                let mut statement = conn.prepare(&sql)?;
                let params: Vec<&dyn rusqlite::ToSql> = args.iter().map(|arg| arg.as_ref()).collect();
                let rows = statement
                    .query_map(params.as_slice(), |row| {
                        Ok((
                            row.get::<_, u64>(0)?, row.get::<_, Vec<u8>>(1)?, row.get::<_, Vec<u8>>(2)?, row.get::<_, u64>(3)?,
                            row.get::<_, String>(4)?, row.get::<_, String>(5)?, row.get::<_, String>(6)?, row.get::<_, String>(7)?,
                            row.get::<_, String>(8)?, row.get::<_, String>(9)?, row.get::<_, u64>(10)?,
                        ))
                    })?
                    .collect::<Result<Vec<_>, _>>()?;
                let mut items = Vec::new();
                let mut next = None;
                for (index, row) in rows.into_iter().enumerate() {
                    if index as u32 == limit {
                        next = items.last().map(|(rowid, _): &(u64, ListedArtifact)| *rowid);
                        break;
                    }
                    let (rowid, blake3, manifest_id, size, media_type, group_id, mission_id, work_item_id, producer, created_at, sequence) = row;
                    items.push((rowid, ListedArtifact {
                        artifact: ArtifactId(to32(blake3)?),
                        manifest_id: ArtifactId(to32(manifest_id)?),
                        size, media_type, group_id, mission_id, work_item_id, producer, created_at, sequence,
                    }));
                }
                Ok(ArtifactPage { items: items.into_iter().map(|(_, item)| item).collect(), next })
            })
            .await
    }

    pub(crate) async fn open_content(
        this: &Arc<Self>,
        digest: Digest,
        reader: &Reader,
    ) -> Result<Content, Error> {
        let reader = reader.clone();
        let (digests, quarantined, media_type) = this
            .db
            .read(move |conn| {
                let not_found = || reject(ErrorCode::NotFound, format!("no artifact {digest} is visible to you"));
                let Some((digests, quarantined)) = blob_row(conn, &digest)? else {
                    return Err(not_found());
                };
                if !can_read_artifact(conn, &reader, &digests.blake3)? {
                    return Err(not_found());
                }
                let media_type: String = conn.query_row(
                    "SELECT media_type FROM manifests WHERE blake3 = ?1 ORDER BY rowid DESC LIMIT 1",
                    [&digests.blake3.0[..]],
                    |row| row.get(0),
                )?;
                Ok((digests, quarantined, media_type))
            })
            .await?;
        if quarantined {
            return Err(Error::Corrupt(digests.blake3));
        }
        // A blob whose size is wrong is corrupt before a single byte is sent.
        match this.blobs.stored_size(&digests.blake3).await? {
            Some(size) if size == digests.size => {}
            _ => {
                this.quarantine(digests.blake3, "stored size does not match the index")
                    .await?;
                return Err(Error::Corrupt(digests.blake3));
            }
        }
        let raw = this.blobs.read(&digests.blake3).await?;
        Ok(Content {
            digests,
            media_type,
            raw,
            inner: Arc::clone(this),
        })
    }

    /// Marks a blob corrupt: later reads fail at once, and every Group that published it gets
    /// an `artifact.integrity_failure` Event.
    pub(crate) async fn quarantine(&self, blake3: ArtifactId, reason: &str) -> Result<(), Error> {
        let now = self.clock.now();
        let reason = reason.to_owned();
        tracing::error!(artifact = %blake3, %reason, "integrity failure: blob quarantined");
        metrics::counter!("weft_integrity_failures_total").increment(1);
        self.db
            .write(move |txn| {
                let changed = txn.execute(
                    "UPDATE blobs SET quarantined_at = ?2 WHERE blake3 = ?1 AND quarantined_at IS NULL",
                    params![&blake3.0[..], format_instant(now)],
                )?;
                if changed == 0 {
                    return Ok(());
                }
                let mut statement = txn.prepare("SELECT DISTINCT group_id FROM manifests WHERE blake3 = ?1")?;
                let groups = statement
                    .query_map([&blake3.0[..]], |row| row.get::<_, String>(0))?
                    .collect::<Result<Vec<_>, _>>()?;
                for group in groups {
                    let group = Id::parse("groupId", &group)?;
                    events::append(txn, &group, "artifact.integrity_failure", &json!({"artifact": blake3, "reason": reason}), now)?;
                }
                Ok(())
            })
            .await
    }

    pub(crate) async fn events(
        &self,
        group_id: Id,
        after: u64,
        limit: u32,
        reader: &Reader,
    ) -> Result<Vec<Event>, Error> {
        let reader = reader.clone();
        let limit = limit.clamp(1, 10_000);
        self.db
            .read(move |conn| {
                let allowed = match &reader {
                    Reader::Admin => group_exists(conn, group_id.as_str())?,
                    Reader::Agent(agent_id) => {
                        membership(conn, group_id.as_str(), agent_id.as_str())?.is_some()
                    }
                };
                if !allowed {
                    return Err(reject(
                        ErrorCode::NotFound,
                        format!("no group {group_id} is visible to you"),
                    ));
                }
                crate::compaction::check_online(conn, group_id.as_str(), after)?;
                events::read(conn, group_id.as_str(), after, limit)
            })
            .await
    }

    pub(crate) async fn stats(&self) -> Result<crate::Stats, Error> {
        let mut stats = self
            .db
            .read(|conn| {
                let count = |table: &str| -> Result<u64, Error> {
                    Ok(
                        conn.query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |row| {
                            row.get(0)
                        })?,
                    )
                };
                Ok(crate::Stats {
                    groups: count("groups")?,
                    agents: count("agents")?,
                    memberships: count("memberships")?,
                    sessions: count("sessions")?,
                    blobs: count("blobs")?,
                    blob_uploaders: count("blob_uploaders")?,
                    manifests: count("manifests")?,
                    derivations: count("derivations")?,
                    events: count("events")?,
                    evidence: count("evidence")?,
                    quarantined: count("blobs WHERE quarantined_at IS NOT NULL")?,
                    blob_objects: 0,
                    staging_objects: 0,
                })
            })
            .await?;
        let (blob_objects, staging_objects) = self.blobs.count_objects().await?;
        stats.blob_objects = blob_objects;
        stats.staging_objects = staging_objects;
        Ok(stats)
    }

    pub(crate) async fn fsck(self: &Arc<Self>) -> Result<crate::FsckReport, Error> {
        let mut report = crate::FsckReport::default();
        // 1. Every blob object: hash it, compare with its name and its row.
        let mut objects = self.blobs.list();
        let mut on_disk = HashSet::new();
        while let Some(object) = objects.try_next().await? {
            let (path, _) = object;
            let name = path.filename().unwrap_or_default().to_owned();
            let Ok(id) = ArtifactId::parse(&format!("blake3:{name}")) else {
                report.problems.push(format!("{path}: not a blob name"));
                continue;
            };
            if crate::blobs::blob_path(&id) != path {
                report
                    .problems
                    .push(format!("{path}: stored under the wrong directory"));
            }
            on_disk.insert(id);
            report.n_blobs += 1;
            let mut hasher = DualHasher::default();
            let mut stream = self.blobs.read(&id).await?;
            while let Some(chunk) = stream.try_next().await? {
                hasher.update(&chunk).await?;
            }
            let (digests, _) = hasher.finish().await?;
            report.n_bytes += digests.size;
            if digests.blake3 != id {
                report
                    .problems
                    .push(format!("{path}: content hashes to {}", digests.blake3));
            }
            let row = self
                .db
                .read(move |conn| blob_row(conn, &Digest::Blake3(id)))
                .await?;
            match row {
                None => report.problems.push(format!(
                    "{id}: blob has no index row (orphan; harmless, can be swept)"
                )),
                Some((indexed, quarantined)) => {
                    if digests.blake3 == id
                        && (indexed.sha256 != digests.sha256 || indexed.size != digests.size)
                    {
                        report.problems.push(format!(
                            "{id}: index says {} / {} bytes",
                            indexed.sha256, indexed.size
                        ));
                    }
                    if quarantined {
                        report.problems.push(format!("{id}: quarantined"));
                    }
                }
            }
        }
        // 2. Rows, signatures and chains, on one read connection.
        let (n_manifests, n_events, problems) = self
            .db
            .read(move |conn| {
                let mut problems = Vec::new();
                let mut statement = conn.prepare("SELECT blake3 FROM blobs")?;
                for blake3 in statement.query_map([], |row| row.get::<_, Vec<u8>>(0))? {
                    let id = ArtifactId(to32(blake3?)?);
                    if !on_disk.contains(&id) {
                        problems.push(format!("{id}: index row without a blob"));
                    }
                }
                let mut n_manifests = 0u64;
                let mut statement =
                    conn.prepare("SELECT manifest_id, blake3, envelope, producer FROM manifests")?;
                let rows = statement
                    .query_map([], |row| {
                        Ok((
                            row.get::<_, Vec<u8>>(0)?,
                            row.get::<_, Vec<u8>>(1)?,
                            row.get::<_, String>(2)?,
                            row.get::<_, String>(3)?,
                        ))
                    })?
                    .collect::<Result<Vec<_>, _>>()?;
                for (manifest_id, blake3, envelope, producer) in rows {
                    n_manifests += 1;
                    let manifest_id = ArtifactId(to32(manifest_id)?);
                    if let Err(problem) =
                        check_manifest(conn, &manifest_id, &blake3, &envelope, &producer)
                    {
                        problems.push(format!("manifest {manifest_id}: {problem}"));
                    }
                }
                let mut n_events = 0u64;
                let groups: Vec<String> = conn
                    .prepare("SELECT group_id FROM groups ORDER BY group_id")?
                    .query_map([], |row| row.get(0))?
                    .collect::<Result<_, _>>()?;
                for group in groups {
                    let mut head = (0u64, weft_api::EventHash::GENESIS);
                    // Compacted history: each snapshot's signature, and its archive is checked
                    // below (async); here the online chain continues from the last snapshot.
                    if let Some((sequence, hash)) = events::compacted(conn, &group)? {
                        head = (sequence, hash);
                    }
                    loop {
                        let batch = events::read(conn, &group, head.0, 10_000)?;
                        if batch.is_empty() {
                            break;
                        }
                        n_events += batch.len() as u64;
                        match weft_api::event::verify_chain(head.0, head.1, &batch) {
                            Ok(next) => head = next,
                            Err(problem) => {
                                problems.push(format!("group {group}: {problem}"));
                                break;
                            }
                        }
                    }
                }
                Ok((n_manifests, n_events, problems))
            })
            .await?;
        report.n_manifests = n_manifests;
        report.n_events = n_events;
        report.problems.extend(problems);
        // 3. Compacted history: every snapshot signed by the authority, every archive a chain
        //    that continues the previous one and ends at the signed chain hash.
        let groups: Vec<String> = self
            .db
            .read(|conn| {
                Ok(conn
                    .prepare("SELECT DISTINCT group_id FROM snapshots ORDER BY group_id")?
                    .query_map([], |row| row.get(0))?
                    .collect::<Result<_, _>>()?)
            })
            .await?;
        for group in groups {
            let snapshots = self
                .db
                .read({
                    let group = group.clone();
                    move |conn| crate::compaction::snapshots(conn, &group)
                })
                .await?;
            let mut head = (0u64, weft_api::EventHash::GENESIS);
            for snapshot in snapshots {
                let (_, authority) = self.authority_key();
                if snapshot
                    .envelope
                    .verify(weft_api::dsse::SNAPSHOT_TYPE, &authority)
                    .is_err()
                {
                    report.problems.push(format!(
                        "group {group}: snapshot {} is not signed by the authority key",
                        snapshot.reference.sequence
                    ));
                }
                let content = self.open_group_blob(snapshot.archive).await;
                let bytes = match content {
                    Ok(content) => {
                        content
                            .into_body(None)
                            .try_fold(Vec::new(), |mut all, chunk| async move {
                                all.extend_from_slice(&chunk);
                                Ok(all)
                            })
                            .await
                    }
                    Err(error) => Err(error),
                };
                let Ok(bytes) = bytes else {
                    report.problems.push(format!(
                        "group {group}: archive {} unreadable or corrupt",
                        snapshot.archive
                    ));
                    continue;
                };
                let archived: Result<Vec<Event>, _> = bytes
                    .split(|b| *b == b'\n')
                    .filter(|line| !line.is_empty())
                    .map(serde_json::from_slice)
                    .collect();
                match archived.map_err(|e| e.to_string()).and_then(|events| weft_api::event::verify_chain(head.0, head.1, &events)) {
                    Ok(next) if next == (snapshot.reference.sequence, snapshot.reference.event_chain_hash) => head = next,
                    Ok(_) => report.problems.push(format!("group {group}: archive of snapshot {} does not end at its signed chain hash", snapshot.reference.sequence)),
                    Err(problem) => report.problems.push(format!("group {group}: archive of snapshot {}: {problem}", snapshot.reference.sequence)),
                }
                report.n_events += snapshot.reference.sequence - snapshot.from_sequence + 1;
            }
        }
        Ok(report)
    }
}

/// Re-checks one stored manifest: its id, its signature by the registered producer key, and
/// that it describes the blob it is filed under.
fn check_manifest(
    conn: &Connection,
    manifest_id: &ArtifactId,
    blake3: &[u8],
    envelope: &str,
    producer: &str,
) -> Result<(), String> {
    let envelope: Envelope =
        serde_json::from_str(envelope).map_err(|e| format!("envelope unreadable: {e}"))?;
    let keyid = envelope.signer_keyid().map_err(|e| e.to_string())?;
    let (agent_id, key, _) = agent_by_keyid(conn, &keyid)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("signing key {keyid} is not registered"))?;
    if agent_id.as_str() != producer {
        return Err(format!("signed by {agent_id}, filed under {producer}"));
    }
    let payload = envelope
        .verify(MANIFEST_TYPE, &key)
        .map_err(|e| e.to_string())?;
    if ArtifactId::of(payload.value()) != *manifest_id {
        return Err("payload does not hash to the manifest id".into());
    }
    let manifest = Manifest::parse(payload.value()).map_err(|e| e.to_string())?;
    if manifest.content.blake3.0[..] != *blake3 {
        return Err("manifest describes other bytes than its row".into());
    }
    Ok(())
}

/// Wraps the raw blob stream: hashes every stored byte, yields only those in `range`, and at
/// the end compares with the recorded digests.
///
/// The last slice is held back until the whole blob has been verified. Otherwise a client
/// could receive every byte it asked for (and HTTP would see a complete body) before the
/// mismatch is known. On mismatch the blob is quarantined and the stream ends with an error
/// instead of its last slice, so the HTTP layer aborts the response.
pub(crate) fn verified_stream(
    store: Arc<Inner>,
    raw: futures::stream::BoxStream<'static, Result<Bytes, Error>>,
    expected: Digests,
    range: Range<u64>,
) -> futures::stream::BoxStream<'static, Result<Bytes, Error>> {
    struct State {
        raw: futures::stream::BoxStream<'static, Result<Bytes, Error>>,
        hasher: Option<DualHasher>,
        held: Option<Bytes>,
        offset: u64,
        store: Arc<Inner>,
    }
    let state = State {
        raw,
        hasher: Some(DualHasher::default()),
        held: None,
        offset: 0,
        store,
    };
    futures::stream::unfold(state, move |mut state| {
        let range = range.clone();
        async move {
            loop {
                let Some(hasher) = state.hasher.as_mut() else {
                    // Verified: release the held slice, then end.
                    return state.held.take().map(|slice| (Ok(slice), state));
                };
                match state.raw.next().await {
                    Some(Ok(chunk)) => {
                        if let Err(error) = hasher.update(&chunk).await {
                            state.hasher = None;
                            state.held = None;
                            return Some((Err(error), state));
                        }
                        let start = state.offset;
                        let end = start + chunk.len() as u64;
                        state.offset = end;
                        let from = range.start.max(start);
                        let to = range.end.min(end);
                        if from < to {
                            let slice = chunk.slice((from - start) as usize..(to - start) as usize);
                            if let Some(previous) = state.held.replace(slice) {
                                return Some((Ok(previous), state));
                            }
                        }
                    }
                    Some(Err(error)) => {
                        state.hasher = None;
                        state.held = None;
                        return Some((Err(error), state));
                    }
                    None => {
                        let hasher = state.hasher.take()?;
                        let outcome = hasher.finish().await;
                        let intact = matches!(&outcome, Ok((digests, _)) if *digests == expected);
                        if intact {
                            continue;
                        }
                        state.held = None;
                        if let Err(error) = state
                            .store
                            .quarantine(
                                expected.blake3,
                                "stored bytes do not hash to their address",
                            )
                            .await
                        {
                            tracing::error!(%error, "could not record quarantine");
                        }
                        return Some((Err(Error::Corrupt(expected.blake3)), state));
                    }
                }
            }
        }
    })
    .boxed()
}
