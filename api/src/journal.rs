//! The Worker's offline journal (issue #13, OFL-3…OFL-8, DESIGN §12; cargo feature `client`).
//!
//! While the Authority is unreachable a Worker keeps working for a bounded grace period and
//! buffers what it would have sent: `work.progress` and `work.checkpoint` Commands, each signed
//! with the critical bounded-offline-execution binding ([`Binding`]) that ties it to the
//! historical Execution Lease and carries its usage delta. The journal is that buffer, on
//! disk: one JSON line per record, appended and `fsync`ed before [`Journal::buffer`] returns,
//! so a buffered Command survives a crash of the Worker (a torn last line, the only damage a
//! crash mid-append can do, is cut off when the journal is opened).
//!
//! On reconnect [`Journal::reconcile`] sends every pending Command in buffering order, before
//! anything else (OFL-5), up to 128 per request (`POST /v1/groups/{g}/commands/batch`, applied
//! in order in one transaction on the Authority): each is rebased onto the new session (`issuedAt`, `sessionEpoch`,
//! `membershipEpoch`; the binding and the `commandId` unchanged, OFL-8), re-signed and sent; it
//! stops at the first refusal, which it records with the server's code. The outcome of a sent
//! Command is appended without waiting for the disk: if it is lost in a crash, the Command is
//! sent again and the Authority replays its answer (the `commandId` is the same and the
//! rebase fields are not part of a buffered Command's identity), so it is charged once.
//!
//! The rules of buffering are the Authority's too (it judges every binding, OFL-9); the
//! journal refuses what it already knows the Authority would: a Command type that cannot be
//! buffered, a buffering time outside `[disconnectedAt, leaseExpiresAt + graceSeconds]`, and
//! anything after the lease's own checkpoint, which ends the lease.

use std::fs::{File, OpenOptions};
use std::io::{BufRead as _, BufReader, Seek as _, SeekFrom, Write as _};
use std::path::{Path, PathBuf};

use chrono::{DateTime, FixedOffset};
use ed25519_dalek::SigningKey;
use serde::{Deserialize, Serialize};

use crate::client::{Client, Error as ClientError};
use crate::dsse::Envelope;
use crate::id::Id;
use crate::work::command::Extension;
use crate::work::contract::Budgets;
use crate::work::offline::Binding;
use crate::work::views::CommandAccepted;
use crate::work::{COMMAND_TYPE, Command, CommandType};

/// Why the journal refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("journal {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("journal {path}, line {line}: {detail}")]
    Corrupt {
        path: PathBuf,
        line: usize,
        detail: String,
    },
    /// The Command cannot be buffered (the Authority would refuse it too).
    #[error("{0}")]
    Refused(String),
    /// Sending failed before the Authority answered, or it answered "not now" (a session to
    /// renew, busy, failing); the Command stays pending.
    #[error("the Authority did not take the journal now: {0}")]
    Unreachable(Box<ClientError>),
}

/// The historical Execution Lease a buffered Command is bound to, as the Worker knew it when
/// it lost the Authority.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OfflineLease {
    pub agent_id: Id,
    pub group_id: Id,
    pub work_item_id: Id,
    pub lease_id: Id,
    /// The session the lease was granted under (and the Commands were first signed for).
    pub session_epoch: u64,
    pub membership_epoch: u64,
    pub ownership_epoch: u64,
    pub lease_expires_at: DateTime<FixedOffset>,
    /// The contract's `leases.graceSeconds`.
    pub grace_seconds: u64,
}

/// Where a buffered Command stands.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "camelCase")]
pub enum Status {
    /// Buffered, not yet accepted.
    Pending,
    /// Accepted; the Events it appended.
    Accepted { events: Vec<u64> },
    /// Refused with the server's code; reconciliation stopped here.
    Refused { code: String, detail: String },
}

/// One buffered Command and where it stands.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    /// As first signed, under the historical session (reconciliation rebases a copy).
    pub command: Command,
    pub status: Status,
}

impl Entry {
    /// The binding it carries (every journal entry has one).
    pub fn binding(&self) -> Option<Binding> {
        self.command.offline_binding().ok().flatten()
    }
}

/// Whether an answer with `status` says "not now" rather than "never": the session must be
/// renewed (401), the Authority is busy (408, 429) or failing (5xx). The Command stays
/// pending; only a refusal of the Command itself stops the journal.
fn transient(status: u16) -> bool {
    matches!(status, 401 | 408 | 429) || status >= 500
}

/// Buffered Commands sent per request on reconcile (at most the route's 256).
const BATCH: usize = 128;

/// One line of the journal file.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "record", rename_all = "camelCase")]
enum Record {
    Buffered { command: Box<Command> },
    Outcome { command_id: Id, outcome: Status },
}

/// What one [`Journal::reconcile`] did.
#[derive(Debug, Default)]
pub struct Reconciled {
    /// Accepted in this run, in order.
    pub accepted: Vec<CommandAccepted>,
    /// The refusal that stopped it, if any: (commandId, code, detail).
    pub refused: Option<(Id, String, String)>,
}

/// The session a reconciliation rebases onto.
#[derive(Clone, Copy, Debug)]
pub struct Rebase<'a> {
    pub key: &'a SigningKey,
    pub session_epoch: u64,
    pub membership_epoch: u64,
    /// The rebased Commands' `issuedAt` (the Worker's clock at reconnect).
    pub issued_at: DateTime<FixedOffset>,
}

/// The journal file and what it says.
#[derive(Debug)]
pub struct Journal {
    path: PathBuf,
    file: File,
    entries: Vec<Entry>,
    /// Outcomes appended since the last `fsync` (see the module header for why they wait).
    unsynced: usize,
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> JournalError + '_ {
    move |source| JournalError::Io {
        path: path.to_owned(),
        source,
    }
}

impl Journal {
    /// Opens (or creates) the journal at `path`, cutting off a torn last line.
    pub fn open(path: &Path) -> Result<Self, JournalError> {
        let created = !path.exists();
        let mut options = OpenOptions::new();
        options.read(true).append(true).create(true);
        // Owner-only, like the rest of the weft home: the buffered payloads are the Worker's.
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let mut file = options.open(path).map_err(io(path))?;
        if created {
            // The new file's directory entry must survive a crash too.
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                File::open(dir)
                    .and_then(|d| d.sync_all())
                    .map_err(io(path))?;
            }
        }
        let mut entries: Vec<Entry> = Vec::new();
        let mut good = 0u64;
        let mut reader = BufReader::new(&file);
        let mut line = String::new();
        let mut number = 0usize;
        loop {
            line.clear();
            let read = reader.read_line(&mut line).map_err(io(path))?;
            if read == 0 {
                break;
            }
            number += 1;
            if !line.ends_with('\n') {
                // A torn append: the record was never acknowledged.
                break;
            }
            let record: Record =
                serde_json::from_str(&line).map_err(|e| JournalError::Corrupt {
                    path: path.to_owned(),
                    line: number,
                    detail: e.to_string(),
                })?;
            match record {
                Record::Buffered { command } => entries.push(Entry {
                    command: *command,
                    status: Status::Pending,
                }),
                Record::Outcome {
                    command_id,
                    outcome,
                } => {
                    let entry = entries
                        .iter_mut()
                        .find(|e| e.command.command_id == command_id)
                        .ok_or_else(|| JournalError::Corrupt {
                            path: path.to_owned(),
                            line: number,
                            detail: format!("an outcome for unknown command {command_id}"),
                        })?;
                    entry.status = outcome;
                }
            }
            good += read as u64;
        }
        drop(reader);
        if file.metadata().map_err(io(path))?.len() != good {
            file.set_len(good).map_err(io(path))?;
            file.sync_all().map_err(io(path))?;
        }
        file.seek(SeekFrom::End(0)).map_err(io(path))?;
        Ok(Self {
            path: path.to_owned(),
            file,
            entries,
            unsynced: 0,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every buffered Command, in buffering order, with where it stands.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The Commands still to send.
    pub fn pending(&self) -> impl Iterator<Item = &Entry> {
        self.entries.iter().filter(|e| e.status == Status::Pending)
    }

    /// Whether reconciliation stopped at a refusal that is still the journal's last word:
    /// nothing after it is sent until the entries are dealt with ([`Journal::discard`]).
    pub fn stopped(&self) -> Option<&Entry> {
        self.entries
            .iter()
            .rev()
            .find(|e| !matches!(e.status, Status::Pending))
            .filter(|e| matches!(e.status, Status::Refused { .. }))
    }

    fn append(&mut self, record: &Record, sync: bool) -> Result<(), JournalError> {
        let mut line = serde_json::to_vec(record).map_err(|e| JournalError::Corrupt {
            path: self.path.clone(),
            line: self.entries.len(),
            detail: e.to_string(),
        })?;
        line.push(b'\n');
        self.file.write_all(&line).map_err(io(&self.path))?;
        if sync {
            self.file.sync_data().map_err(io(&self.path))?;
            self.unsynced = 0;
        } else {
            self.unsynced += 1;
        }
        Ok(())
    }

    /// Makes every appended outcome durable.
    pub fn sync(&mut self) -> Result<(), JournalError> {
        if self.unsynced > 0 {
            self.file.sync_data().map_err(io(&self.path))?;
            self.unsynced = 0;
        }
        Ok(())
    }

    /// Buffers a `work.progress` or `work.checkpoint` with `payload` (which names the
    /// lease's WorkItem) and its usage delta, bound to `lease`, at `now`; durable when this
    /// returns. `disconnected_at` is when the Worker lost the Authority (the same for every
    /// Command of one outage).
    pub fn buffer(
        &mut self,
        lease: &OfflineLease,
        disconnected_at: DateTime<FixedOffset>,
        kind: CommandType,
        mut payload: serde_json::Value,
        usage: Budgets,
        now: DateTime<FixedOffset>,
    ) -> Result<&Entry, JournalError> {
        if !matches!(
            kind,
            CommandType::WorkProgress | CommandType::WorkCheckpoint
        ) {
            return Err(JournalError::Refused(format!(
                "{} cannot be buffered offline: only work.progress and work.checkpoint (OFL-3, OFL-5)",
                kind.as_str()
            )));
        }
        let grace = crate::work::capped_seconds(lease.grace_seconds);
        if now > lease.lease_expires_at + grace {
            return Err(JournalError::Refused(format!(
                "the grace period of lease {} ended at {} (OFL-9): stop and reconnect",
                lease.lease_id,
                lease.lease_expires_at + grace
            )));
        }
        if now < disconnected_at {
            return Err(JournalError::Refused(
                "buffered before the disconnection it names".into(),
            ));
        }
        // Every entry quotes its binding's lease as `leaseId` (see below): no binding to parse.
        let checkpointed = self.entries.iter().any(|e| {
            e.command.kind == CommandType::WorkCheckpoint
                && e.command.lease_id.as_ref() == Some(&lease.lease_id)
        });
        if checkpointed {
            return Err(JournalError::Refused(format!(
                "lease {} ended with its buffered checkpoint; nothing more can be buffered under it",
                lease.lease_id
            )));
        }
        if payload["workItemId"] != lease.work_item_id.as_str() {
            return Err(JournalError::Refused(format!(
                "the payload is not for {}, the lease's WorkItem",
                lease.work_item_id
            )));
        }
        // The payload may only repeat the binding's usage (OFL-7): it says it once.
        if let Some(object) = payload.as_object_mut() {
            object.remove("usage");
        }
        let binding = Binding {
            agent_id: lease.agent_id.clone(),
            group_id: lease.group_id.clone(),
            work_item_id: lease.work_item_id.clone(),
            session_epoch: lease.session_epoch,
            ownership_epoch: lease.ownership_epoch,
            lease_id: lease.lease_id.clone(),
            disconnected_at,
            buffered_at: now,
            grace_seconds: lease.grace_seconds,
            lease_expires_at: lease.lease_expires_at,
            usage,
        };
        let command_id = Id::parse(
            "commandId",
            &format!("off-{}", hex::encode(rand::random::<[u8; 16]>())),
        )
        .map_err(|e| JournalError::Refused(e.to_string()))?;
        let command = Command {
            command_id,
            kind,
            group_id: lease.group_id.clone(),
            agent_id: lease.agent_id.clone(),
            issued_at: now,
            session_epoch: lease.session_epoch,
            membership_epoch: lease.membership_epoch,
            lease_id: Some(lease.lease_id.clone()),
            expected_revision: None,
            extensions: vec![Extension::offline(&binding)],
            payload,
        };
        // What the Authority parses first must parse here (shape, binding, usage).
        use crate::signed::SignedPayload as _;
        command
            .validate()
            .map_err(|r| JournalError::Refused(r.message))?;
        self.append(
            &Record::Buffered {
                command: Box::new(command.clone()),
            },
            true,
        )?;
        self.entries.push(Entry {
            command,
            status: Status::Pending,
        });
        Ok(self.entries.last().expect("just pushed"))
    }

    /// The envelope of `command` rebased onto `session` (OFL-8): `issuedAt` now, the
    /// session's epochs, everything else (the binding, the `commandId`) unchanged; re-signed.
    pub fn rebased(command: &Command, session: Rebase<'_>) -> Result<Envelope, JournalError> {
        let mut command = command.clone();
        command.issued_at = session.issued_at;
        command.session_epoch = session.session_epoch;
        command.membership_epoch = session.membership_epoch;
        let bytes =
            serde_json::to_vec(&command).map_err(|e| JournalError::Refused(e.to_string()))?;
        Ok(Envelope::sign(session.key, COMMAND_TYPE, &bytes))
    }

    /// Sends every pending Command in order, rebased onto `session` (OFL-5, OFL-8); stops at
    /// the first refusal (recorded) or when the Authority does not answer (the Command stays
    /// pending). A journal stopped at a refusal sends nothing until it is discarded.
    pub async fn reconcile(
        &mut self,
        client: &Client,
        session: Rebase<'_>,
    ) -> Result<Reconciled, JournalError> {
        let mut done = Reconciled::default();
        if let Some(entry) = self.stopped() {
            let Status::Refused { code, detail } = &entry.status else {
                unreachable!("stopped() answers a refused entry")
            };
            done.refused = Some((
                entry.command.command_id.clone(),
                code.clone(),
                detail.clone(),
            ));
            return Ok(done);
        }
        let pending: Vec<usize> = (0..self.entries.len())
            .filter(|&i| self.entries[i].status == Status::Pending)
            .collect();
        let mut outcome = Ok(());
        // In order, many per request (one transaction and one fsync on the Authority for a
        // whole batch), stopping at the first refusal.
        'batches: for chunk in pending.chunks(BATCH) {
            let group_id = self.entries[chunk[0]].command.group_id.clone();
            let envelopes = chunk
                .iter()
                .map(|&index| Self::rebased(&self.entries[index].command, session))
                .collect::<Result<Vec<_>, _>>()?;
            match client.command_batch(&group_id, envelopes).await {
                Ok(batch) => {
                    for (&index, accepted) in chunk.iter().zip(batch.accepted) {
                        let status = Status::Accepted {
                            events: accepted.events.iter().map(|e| e.sequence).collect(),
                        };
                        self.record(index, status, false)?;
                        done.accepted.push(accepted);
                    }
                    if let Some(refusal) = batch.refused {
                        if transient(refusal.problem.status) {
                            outcome = Err(JournalError::Unreachable(Box::new(ClientError::Api {
                                status: refusal.problem.status,
                                body: refusal.problem,
                            })));
                            break 'batches;
                        }
                        let index = chunk.get(refusal.index).copied().unwrap_or(chunk[0]);
                        self.refuse(index, refusal.problem, &mut done)?;
                        break 'batches;
                    }
                }
                Err(ClientError::Api { status, body }) if transient(status) => {
                    outcome = Err(JournalError::Unreachable(Box::new(ClientError::Api {
                        status,
                        body,
                    })));
                    break;
                }
                Err(ClientError::Api { body, .. }) => {
                    self.refuse(chunk[0], body, &mut done)?;
                    break;
                }
                Err(other) => {
                    outcome = Err(JournalError::Unreachable(Box::new(other)));
                    break;
                }
            }
        }
        self.sync()?;
        outcome.map(|()| done)
    }

    /// Records the refusal of entry `index` (durably: it stops the journal).
    fn refuse(
        &mut self,
        index: usize,
        problem: crate::problem::ErrorBody,
        done: &mut Reconciled,
    ) -> Result<(), JournalError> {
        let id = self.entries[index].command.command_id.clone();
        let code = problem.code.as_str().to_owned();
        let status = Status::Refused {
            code: code.clone(),
            detail: problem.detail.clone(),
        };
        self.record(index, status, true)?;
        done.refused = Some((id, code, problem.detail));
        Ok(())
    }

    fn record(&mut self, index: usize, status: Status, sync: bool) -> Result<(), JournalError> {
        let command_id = self.entries[index].command.command_id.clone();
        self.append(
            &Record::Outcome {
                command_id,
                outcome: status.clone(),
            },
            sync,
        )?;
        self.entries[index].status = status;
        Ok(())
    }

    /// Drops every entry that is no longer pending and every pending entry after a refusal
    /// (they were bound to the same outage and would be judged against a history that did
    /// not happen), by rewriting the file atomically. Answers how many were dropped.
    pub fn discard(&mut self) -> Result<usize, JournalError> {
        let stop = self
            .entries
            .iter()
            .rposition(|e| matches!(e.status, Status::Refused { .. }));
        let before = self.entries.len();
        let kept: Vec<Entry> = match stop {
            Some(_) => Vec::new(),
            None => self
                .entries
                .iter()
                .filter(|e| e.status == Status::Pending)
                .cloned()
                .collect(),
        };
        let temp = self.path.with_extension("jsonl.tmp");
        {
            let mut options = OpenOptions::new();
            options.write(true).create(true).truncate(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            let mut file = options.open(&temp).map_err(io(&temp))?;
            for entry in &kept {
                let mut line = serde_json::to_vec(&Record::Buffered {
                    command: Box::new(entry.command.clone()),
                })
                .map_err(|e| JournalError::Refused(e.to_string()))?;
                line.push(b'\n');
                file.write_all(&line).map_err(io(&temp))?;
            }
            file.sync_all().map_err(io(&temp))?;
        }
        std::fs::rename(&temp, &self.path).map_err(io(&self.path))?;
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(io(&self.path))?;
        }
        *self = Self::open(&self.path.clone())?;
        Ok(before - kept.len())
    }
}
