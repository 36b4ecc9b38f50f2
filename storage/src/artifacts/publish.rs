//! Publication: a DSSE-signed manifest is verified, then checked (producer, membership, blob,
//! sources, cycles, WorkItem, and last its Execution Lease: `binding.rs`) inside the one
//! writer transaction that inserts it with its edges and its `artifact.published` Event.
//! A fenced owner's refused manifest is kept as an inert audit record afterwards (OFL-2).
//! Long (a little over 600 lines) because the checks read together what they need first
//! (`first_reads`: one round trip on PostgreSQL) and split, they would pass those reads across
//! files; the pre-check of a copy and the recording share them.

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::sql::Connection;
use weft_api::kinds;
use weft_api::session::Role;
use weft_api::views::Published;
use weft_api::{ArtifactId, Digest, Envelope, ErrorCode, EventPayload, Id, Manifest};

use super::binding::{self, Inert, Stale};
use super::blob_row;
use crate::access::{Reader, can_see_blob, may_cite};
use crate::artifacts::handle::Artifacts;
use crate::error::{Error, reject};
use crate::events::{self};
use crate::signatures::{AuthorityMay, Signed};
use crate::unit::Tx;

/// Whether `target` is reachable from `start` by following derivedFrom edges towards sources,
/// the edges Group `group`'s own manifests declared. Never another Group's: its answer (a
/// `cycle` refusal, before the WorkItem and lease checks) told a member whether bytes it
/// guessed were an ancestor in another Group's provenance, and another Group's edges refused
/// this Group's publications. Iterative breadth-first search: never recurses on the stack.
fn reaches(
    conn: &Connection,
    start: &[ArtifactId],
    target: &ArtifactId,
    group: &str,
) -> Result<bool, Error> {
    let mut seen: HashSet<ArtifactId> = start.iter().copied().collect();
    let mut queue: VecDeque<ArtifactId> = start.iter().copied().collect();
    while let Some(node) = queue.pop_front() {
        if node == *target {
            return Ok(true);
        }
        for source in crate::rows::derivations::sources_in_group(conn, &node, group)? {
            if seen.insert(source) {
                queue.push_back(source);
            }
        }
    }
    Ok(false)
}

/// What a publication's check knows of its bytes, and so whether it checks the stored blob
/// (present, visible to the producer, healthy, as the manifest names it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Bytes {
    /// Uploaded earlier, by whoever: checked.
    Stored,
    /// A file this request's bytes were just promoted to, its row written earlier in this
    /// same transaction: checked as stored bytes are (a quarantine may have come between the
    /// read before the promotion and this transaction), except that its publisher sent the
    /// bytes itself and so may see them.
    JustPromoted,
    /// Not stored yet: a publication with its bytes checked before they are staged.
    NotYet,
    /// Recorded inline earlier in this same transaction from bytes just hashed against the
    /// manifest (a quarantined copy repaired there too): nothing left to check.
    JustRecorded,
}

/// A manifest whose signature checked out and whose signer may publish through this caller:
/// what its transaction needs.
#[derive(Clone)]
pub(crate) struct Verified {
    signer: weft_api::Id,
    keyid: weft_api::KeyId,
    manifest_id: ArtifactId,
    pub(crate) manifest: Manifest,
    envelope_json: String,
    /// When the checks made before its bytes are staged judge it (`precheck_publication`);
    /// its transaction judges it, and its caller, and stamps it at the time it holds its
    /// Group's lock, read from `clock` then (a wait for the lock may be long on a shared
    /// index).
    pub(crate) now: chrono::DateTime<chrono::Utc>,
    clock: Arc<dyn crate::clock::Clock>,
    /// Who it is published as when that must be checked again in its transaction (a
    /// capability token: revoked or expired since the door, it publishes nothing), at the
    /// same instant as the rest.
    acting: Option<crate::acting::Acting>,
}

/// What a publication's transaction leaves for after its commit: a fenced owner's manifest
/// to keep as inert (OFL-2), and the lineage index's new entry.
pub(crate) struct Aftermath {
    fenced: Arc<Mutex<Option<Inert>>>,
    /// The new `manifests` row's rowid, for the lineage index's coverage
    /// (`lineage_index/restart.rs`).
    rowid: Arc<AtomicU64>,
    publication: crate::lineage_index::Publication,
}

/// The transaction's part of a publication, run inside a writer job.
pub(crate) type Recording = Box<dyn FnOnce(&Tx<'_>) -> Result<(Published, bool), Error> + Send>;

/// Whether a publication's manifest is recorded already (its sequence, and its records'
/// disposal if they went), sent ahead with [`FirstReads`].
type Already = crate::sql::Ahead<Option<crate::rows::manifests::PublishedAt>, Error>;

/// What the first reads say of a publication (`Verified::recorded`).
enum Recorded {
    /// Recorded already, at this sequence: a retry.
    Already(u64),
    /// Not recorded: checked with these reads, then recorded.
    New(Box<FirstReads>),
}

/// The first reads of a publication's checks, sent ahead together (`Verified::first_reads`).
struct FirstReads {
    signer: SignerReads,
    /// Where the manifest's WorkItem lives and who owns it.
    place: crate::sql::Ahead<Option<crate::rows::work_items::Placed>, Error>,
    /// The lease the manifest names.
    lease: crate::sql::Ahead<Option<crate::rows::leases::Lease>, Error>,
}

/// What the signer may still do, of the first reads ([`Verified::producer`]).
struct SignerReads {
    /// The Agent the signing key belongs to, if it is active.
    key: crate::sql::Ahead<Option<String>, Error>,
    /// Whether the manifest's Group exists.
    group: crate::sql::Ahead<bool, Error>,
    /// The signer's Membership there.
    membership: crate::sql::Ahead<Option<crate::rows::memberships::Current>, Error>,
}

impl Verified {
    /// Splits the publication into its transaction and what follows its commit.
    pub(crate) fn into_recording(self, bytes: Bytes) -> (Recording, Aftermath) {
        let fenced: Arc<Mutex<Option<Inert>>> = Arc::default();
        let rowid: Arc<AtomicU64> = Arc::default();
        let manifest = &self.manifest;
        let publication = crate::lineage_index::Publication {
            artifact: manifest.content.blake3,
            size: manifest.content.size,
            manifest_id: self.manifest_id,
            group: manifest.group_id.to_string(),
            mission: manifest.mission_id.to_string(),
            work_item: manifest.work_item_id.to_string(),
            producer: self.signer.to_string(),
            media_type: manifest.content.media_type.clone(),
            sequence: 0,
            sources: manifest.sources.clone(),
            rowid: 0,
        };
        let (fenced_in, rowid_in) = (Arc::clone(&fenced), Arc::clone(&rowid));
        let recording: Recording =
            Box::new(move |txn| self.record(txn, bytes, &fenced_in, &rowid_in));
        (
            recording,
            Aftermath {
                fenced,
                rowid,
                publication,
            },
        )
    }

    /// The reads a publication's checks begin with, sent together (one round trip on
    /// PostgreSQL, `sql/ahead.rs`): whether its manifest is recorded already, the signing
    /// key's Agent, its Group, the signer's Membership there, and the WorkItem and lease the
    /// manifest names (checked last, `check`, but read here: nothing the job changes comes
    /// before them, and each read alone was a round trip in the Group's lock). Read before the
    /// disposal fence, which is safe because every writer of a WorkItem or a lease holds its
    /// Group's lock, taken before these reads.
    fn first_reads(&self, conn: &Connection) -> Result<(Already, FirstReads), Error> {
        let manifest = &self.manifest;
        let group = manifest.group_id.as_str();
        let already = crate::rows::manifests::sequence_of_ahead(conn, &self.manifest_id)?;
        let signer = SignerReads {
            key: crate::rows::agents::active_id_by_keyid_ahead(conn, self.keyid.as_str())?,
            group: crate::rows::groups::exists_ahead(conn, group)?,
            membership: crate::rows::memberships::current_with_scope_ahead(
                conn,
                group,
                self.signer.as_str(),
            )?,
        };
        let reads = FirstReads {
            signer,
            place: crate::rows::work_items::place_and_ownership_ahead(
                conn,
                manifest.work_item_id.as_str(),
            )?,
            lease: crate::rows::leases::load_ahead(conn, manifest.execution.lease_id.as_str())?,
        };
        Ok((already, reads))
    }

    /// Whether the manifest is recorded already: a retry answers its sequence. One whose
    /// signed record went by policy (issue #46) is not restored (the policy would take it
    /// again): 410 naming the disposal, only to a signer who may still publish in its
    /// Mission (`producer`; anyone else is refused as a new publication would be).
    fn recorded(
        &self,
        conn: &Connection,
        already: Already,
        reads: FirstReads,
    ) -> Result<Recorded, Error> {
        match already.get(conn)? {
            None => Ok(Recorded::New(Box::new(reads))),
            Some((sequence, None)) => Ok(Recorded::Already(sequence)),
            Some((_, Some(disposed))) => {
                self.producer(conn, reads.signer)?;
                Err(Error::RecordDisposed(self.manifest_id, disposed))
            }
        }
    }

    /// The signer as the producer it would be, if it still may publish here: its key still
    /// its own, the Group there, the worker role, and CTX-5 (its Mission scope).
    fn producer(&self, conn: &Connection, reads: SignerReads) -> Result<Reader, Error> {
        let (signer, manifest) = (self.signer.clone(), &self.manifest);
        let key_of = reads
            .key
            .get(conn)?
            .map(|agent_id| Id::parse("agentId", &agent_id).map_err(Error::from))
            .transpose()?;
        match key_of {
            Some(agent_id) if agent_id == signer => {}
            _ => {
                return Err(reject(
                    ErrorCode::UnknownKey,
                    "the signing key was unregistered meanwhile",
                ));
            }
        }
        let group = manifest.group_id.as_str();
        if !reads.group.get(conn)? {
            return Err(reject(
                ErrorCode::UnknownGroup,
                format!("group {group} does not exist"),
            ));
        }
        // The Membership's roles and its Mission scope in one read.
        let missions = match reads.membership.get(conn)? {
            Some((roles, _, missions)) if roles.contains(&Role::Worker) => missions,
            Some(_) => {
                return Err(reject(
                    ErrorCode::Forbidden,
                    format!("{signer} is not a worker in {group}"),
                ));
            }
            None => {
                return Err(reject(
                    ErrorCode::NotAMember,
                    format!("{signer} is not a member of {group}"),
                ));
            }
        };
        let producer = Reader::Agent {
            agent_id: signer.clone(),
            group_id: manifest.group_id.clone(),
            scope: crate::access::scope_of(missions)?,
        };
        // CTX-5: a Mission-scoped member writes only in its Missions; another Mission
        // answers as another Group does, whether or not that Mission exists.
        if !producer.sees_mission(group, manifest.mission_id.as_str()) {
            return Err(reject(
                ErrorCode::NotAMember,
                format!(
                    "{signer} is not a member of Mission {} in {group}",
                    manifest.mission_id
                ),
            ));
        }
        Ok(producer)
    }

    /// Everything a publication is checked for besides its signature: the key still the
    /// signer's, the Group, the worker role, CTX-5, the stored bytes (when `bytes` says they
    /// must be stored already), the sources, cycles, the WorkItem and last its Execution Lease
    /// (a fenced owner's manifest is put in `fenced_in`, to be kept inert).
    fn check(
        &self,
        conn: &Connection,
        bytes: Bytes,
        fenced_in: &Mutex<Option<Inert>>,
        reads: FirstReads,
    ) -> Result<(), Error> {
        let FirstReads {
            signer: signer_reads,
            place,
            lease,
        } = reads;
        let producer = self.producer(conn, signer_reads)?;
        let Self {
            signer,
            manifest_id,
            manifest,
            envelope_json,
            now,
            ..
        } = self;
        let (signer, manifest_id) = (signer.clone(), *manifest_id);
        let now_text = crate::clock::format_instant(*now);
        let group = manifest.group_id.as_str();
        let content = &manifest.content;
        if matches!(bytes, Bytes::Stored | Bytes::JustPromoted) {
            // On a shared index, a collection batch deciding on this blob has committed, or
            // has not begun (`collection.rs`): the row read next is the one it leaves.
            crate::rows::blob_disposals::fence(conn)?;
            let blob = blob_row(conn, &Digest::Blake3(content.blake3))?;
            let visible =
                bytes == Bytes::JustPromoted || can_see_blob(conn, &producer, &content.blake3)?;
            match blob {
                Some(_) if !visible => {
                    return Err(reject(
                        ErrorCode::BlobNotFound,
                        format!("upload {} before publishing it", content.blake3),
                    ));
                }
                None => {
                    return Err(reject(
                        ErrorCode::BlobNotFound,
                        format!("upload {} before publishing it", content.blake3),
                    ));
                }
                Some((_, true)) if crate::rows::blobs::is_disposed(conn, &content.blake3)? => {
                    return Err(reject(
                        ErrorCode::Disposed,
                        format!(
                            "the bytes of {} were disposed of by a retention policy: upload them again, then publish",
                            content.blake3
                        ),
                    ));
                }
                Some((_, true)) => {
                    return Err(reject(
                        ErrorCode::IntegrityFailure,
                        format!("{} is quarantined", content.blake3),
                    ));
                }
                Some((digests, false)) => {
                    if digests.sha256 != content.sha256 || digests.size != content.size {
                        return Err(reject(
                            ErrorCode::DigestMismatch,
                            format!(
                                "stored bytes are {} and {} bytes",
                                digests.sha256, digests.size
                            ),
                        ));
                    }
                }
            }
        }
        // CTX-5/6: a source must be readable by the producer and be this Mission's own or
        // published as reusable knowledge.
        for source in &manifest.sources {
            may_cite(conn, &producer, manifest.mission_id.as_str(), source)??;
        }
        if reaches(conn, &manifest.sources, &content.blake3, group)? {
            return Err(reject(
                ErrorCode::Cycle,
                format!(
                    "{} is already an ancestor of one of its sources",
                    content.blake3
                ),
            ));
        }
        let (owner, epoch) = crate::access::work_item_placed(
            &producer,
            group,
            manifest.mission_id.as_str(),
            manifest.work_item_id.as_str(),
            place.get(conn)?,
        )?;
        // LSE-4/5, last, so every earlier refusal keeps its code.
        let ownership = (owner.as_deref(), epoch);
        let lease = lease.get(conn)?;
        match binding::check(lease, manifest, signer.as_str(), &now_text, ownership)? {
            Ok(()) => {}
            Err(Stale::Fenced(reason)) => {
                *fenced_in.lock().unwrap_or_else(|p| p.into_inner()) = Some(Inert {
                    manifest_id,
                    manifest: manifest.clone(),
                    producer: signer.to_string(),
                    envelope_json: envelope_json.clone(),
                    received_at: now_text.clone(),
                    reason: reason.clone(),
                });
                return Err(binding::refusal(Stale::Fenced(reason)));
            }
            Err(stale) => return Err(binding::refusal(stale)),
        }
        Ok(())
    }

    /// Checks everything else in the transaction that records the manifest, its edges and
    /// its `artifact.published` Event.
    fn record(
        mut self,
        txn: &Tx<'_>,
        bytes: Bytes,
        fenced_in: &Mutex<Option<Inert>>,
        rowid_in: &AtomicU64,
    ) -> Result<(Published, bool), Error> {
        // Every check below reads what the Group's last commit left, in any process, and
        // runs at the time the lock is held: a lease that expired while the publication
        // waited for it is stale (LSE-5), and its Event is not stamped before those ahead.
        crate::rows::groups::lock(txn, self.manifest.group_id.as_str())?;
        self.now = self.clock.now();
        if let Some(acting) = self.acting.take() {
            acting.check(txn, &crate::clock::format_instant(self.now))?;
        }
        let (already, reads) = self.first_reads(txn)?;
        let reads = match self.recorded(txn, already, reads)? {
            Recorded::New(reads) => reads,
            Recorded::Already(sequence) => {
                let published = Published {
                    artifact: self.manifest.content.blake3,
                    manifest_id: self.manifest_id,
                    sequence,
                };
                return Ok((published, false));
            }
        };
        // A new one with sources takes the derivation graph's lock, across Groups, for the
        // cycle check (DESIGN §6); a retry of one recorded has answered above without it. The
        // writer ends its batch after this job: no later job takes a Group's lock under it.
        if !self.manifest.sources.is_empty() {
            crate::rows::derivations::lock_graph(txn)?;
            txn.loaded().note_row_lock("derivations");
        }
        self.check(txn, bytes, fenced_in, *reads)?;
        let Self {
            signer,
            manifest_id,
            manifest,
            envelope_json,
            now,
            ..
        } = self;
        let group = manifest.group_id.as_str();
        let content = &manifest.content;
        let event = EventPayload::ArtifactPublished(kinds::ArtifactPublished {
            artifact: content.blake3,
            lease_id: manifest.execution.lease_id.clone(),
            manifest_id,
            media_type: content.media_type.clone(),
            mission_id: manifest.mission_id.clone(),
            ownership_epoch: manifest.execution.ownership_epoch,
            producer: signer.clone(),
            sha256: content.sha256,
            size: content.size,
            sources: manifest.sources.clone(),
            work_item_id: manifest.work_item_id.clone(),
        });
        // Bytes stored earlier may be new to the Group: its quota's running bound no longer
        // holds (bytes sent with this publication were held to the quota in this transaction).
        if matches!(bytes, Bytes::Stored) {
            super::quota::forget_if_new(txn, group, &content.blake3)?;
        }
        let sequence = events::append(txn, &manifest.group_id, &event, now)?;
        let rowid = crate::rows::manifests::insert(
            txn,
            &crate::rows::manifests::New {
                manifest_id: &manifest_id,
                blake3: &content.blake3,
                group_id: group,
                mission_id: manifest.mission_id.as_str(),
                work_item_id: manifest.work_item_id.as_str(),
                producer: signer.as_str(),
                media_type: &content.media_type,
                lease_id: manifest.execution.lease_id.as_str(),
                ownership_epoch: manifest.execution.ownership_epoch,
                classification: manifest.classification.as_str(),
                created_at: &manifest.created_at.to_rfc3339(),
                envelope: &envelope_json,
                sequence,
                name: manifest.file_name(),
            },
        )?;
        rowid_in.store(rowid.try_into().unwrap_or(0), Ordering::Relaxed);
        for source in &manifest.sources {
            crate::rows::derivations::insert(txn, &content.blake3, source, &manifest_id)?;
        }
        Ok((
            Published {
                artifact: content.blake3,
                manifest_id,
                sequence,
            },
            true,
        ))
    }
}

impl Artifacts<'_> {
    /// Steps 1 and 2 of a publication, before any transaction: the signature (resolve the
    /// key, verify strictly, parse the payload; the signer is the producer), and who may
    /// publish it through `caller`.
    pub(crate) async fn verify_publication(
        &self,
        envelope: &Envelope,
        caller: &Reader,
    ) -> Result<Verified, Error> {
        let signed = self
            .0
            .verify_signed::<Manifest>(envelope, AuthorityMay::NotSign)
            .await?;
        self.may_publish(signed, envelope, caller)
    }

    /// Step 2 for a manifest whose signature checked out (`signed`, of `envelope`): who may
    /// publish it through `caller`.
    pub(crate) fn may_publish(
        &self,
        signed: Signed<Manifest>,
        envelope: &Envelope,
        caller: &Reader,
    ) -> Result<Verified, Error> {
        let Signed {
            signer,
            keyid,
            payload_id: manifest_id,
            value,
        } = signed;
        let manifest = value.into_inner();
        // The caller publishes only its own work.
        if let Reader::Agent { agent_id, .. } = caller
            && *agent_id != signer
        {
            return Err(reject(
                ErrorCode::ProducerMismatch,
                "an agent publishes only manifests it signed",
            ));
        }
        // A session acts in its own Group only: elsewhere it is not a member.
        if !caller.in_group(manifest.group_id.as_str()) {
            return Err(reject(
                ErrorCode::NotAMember,
                format!("{signer} is not a member of {}", manifest.group_id),
            ));
        }
        let envelope_json = serde_json::to_string(envelope).map_err(Error::backend)?;
        Ok(Verified {
            signer,
            keyid,
            manifest_id,
            manifest,
            envelope_json,
            now: self.0.clock.now(),
            clock: Arc::clone(&self.0.clock),
            acting: None,
        })
    }

    /// Verifies and records a signed artifact manifest, appending `artifact.published`.
    pub async fn publish(
        &self,
        envelope: Envelope,
        caller: &Reader,
    ) -> Result<(Published, bool), Error> {
        let verified = self.verify_publication(&envelope, caller).await?;
        self.publish_verified(verified).await
    }

    /// Step 3 of a publication of bytes uploaded before: its transaction.
    pub(crate) async fn publish_verified(
        &self,
        verified: Verified,
    ) -> Result<(Published, bool), Error> {
        self.publish_verified_as(verified, None).await
    }

    /// [`Self::publish_verified`] by `acting` (a capability token), checked again in the
    /// publication's transaction once it holds its Group's lock, at the instant the rest is
    /// judged: a token revoked or expired after the check at the door, and before the commit,
    /// publishes nothing (`work/tokens.rs`: revocation takes effect at once). The Group's
    /// lock comes before the token's row, the order every use takes them in.
    pub(crate) async fn publish_verified_as(
        &self,
        mut verified: Verified,
        acting: Option<crate::acting::Acting>,
    ) -> Result<(Published, bool), Error> {
        let group = verified.manifest.group_id.to_string();
        verified.acting = acting;
        self.0.faults.publications().pass().await;
        let (recording, aftermath) = verified.into_recording(Bytes::Stored);
        // 3. Everything else is checked in the transaction that records it, in its Group's
        // lane (`db/writer.rs`).
        let outcome = self.0.db.write_in(&group, recording).await;
        self.conclude_publication(outcome, aftermath).await
    }

    /// The checks of a publication's transaction, on a read before its bytes are staged
    /// (`with_content.rs`): a refusal then costs the same whoever holds the bytes and leaves
    /// no promoted file to undo. The transaction checks again. A fenced owner's manifest is
    /// kept inert here as it would be there (OFL-2).
    pub(crate) async fn precheck_publication(&self, verified: &Verified) -> Result<(), Error> {
        let copy = verified.clone();
        let fenced: Arc<Mutex<Option<Inert>>> = Arc::default();
        let fenced_in = Arc::clone(&fenced);
        let outcome = self
            .0
            .db
            .read(move |conn| {
                let (already, reads) = copy.first_reads(conn)?;
                match copy.recorded(conn, already, reads)? {
                    Recorded::Already(_) => Ok(()),
                    Recorded::New(reads) => copy.check(conn, Bytes::NotYet, &fenced_in, *reads),
                }
            })
            .await;
        let inert = fenced.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let (Err(refusal), Some(inert)) = (&outcome, inert) {
            self.0
                .db
                .write(move |txn| binding::keep_inert(txn, &inert))
                .await?;
            return Err(refusal.clone());
        }
        outcome
    }

    /// After a publication's transaction: a fenced owner's refused manifest is kept as an
    /// inert audit record, and a committed one enters the lineage index.
    pub(crate) async fn conclude_publication(
        &self,
        outcome: Result<(Published, bool), Error>,
        aftermath: Aftermath,
    ) -> Result<(Published, bool), Error> {
        let Aftermath {
            fenced,
            rowid,
            publication,
        } = aftermath;
        let inert = fenced.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let (Err(refusal), Some(inert)) = (&outcome, inert) {
            // OFL-2: the refused transaction appended nothing; the audit record is a
            // transaction of its own (a fenced epoch never becomes current again, so the
            // finding still holds), and the answer stays the refusal.
            self.0
                .db
                .write(move |txn| binding::keep_inert(txn, &inert))
                .await?;
            return Err(refusal.clone());
        }
        let outcome = outcome?;
        if outcome.1 {
            // Committed: the lineage index follows the tables (edges are only ever added).
            self.0.lineage.add(&crate::lineage_index::Publication {
                sequence: outcome.0.sequence,
                rowid: rowid.load(Ordering::Relaxed),
                ..publication
            });
        }
        Ok(outcome)
    }
}
