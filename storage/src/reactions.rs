//! Reactions after commit (issue #41): work that follows an Event of a given kind but must not
//! hold up the request that appended it. Today one: after `work.submitted`, the built-in
//! reviewer's checks (EVD-3), recorded as the Authority's Evidence.
//!
//! **The queue.** `events::append` calls [`owe`] for every Event; for a kind a reaction
//! follows it inserts a row into `reactions` (Group, sequence, kind, subject) in the same
//! transaction as the Event, so the reaction is owed exactly when the Event is committed. The
//! request answers after that commit, not after the reaction.
//!
//! **When it runs.** One task per open [`crate::Store`] (spawned by [`start`]) runs owed
//! reactions one at a time, in (Group, sequence) order: once at start-up, which runs every
//! reaction a stopped or killed process still owed, and again after every commit that owed
//! one (the writer notifies `Db::reactions_owed` once the batch is answered). A reaction
//! does its slow part (re-hashing GiBs, validating schemas) outside the writer, through the
//! read pool and the blocking pool like any read, and holds no connection across an `.await`.
//!
//! **Exactly once in effect.** A reaction records what it found in one transaction that also
//! deletes its row, and records nothing if the row is already gone: a reaction cut short by a
//! crash left its row and recorded nothing, so it runs again after the restart; one that
//! committed is never run again. A reaction that is refused (a rule said no) is logged and
//! dropped, as the review in the request handler was (a reviewer can run the checks by hand);
//! one that meets a backend error stays owed and is tried at the next wake or start.
//!
//! Tests hold the reactions with `Faults::hold_reactions` (a process killed while they are
//! held dies between a commit and its reaction), and wait for them with
//! [`crate::Store::reactions_settled`].
//!
//! Not here: the lease revocation after a replacing session (LSE-9) stays in the transaction
//! that opens the session (`sessions.rs`), because LSE-9 requires the leases to end before the
//! new session can start the WorkItems again; a reaction after the answer could not promise it.

use std::sync::Arc;

use rusqlite::{Connection, params};
use weft_api::Id;
use weft_api::work::events::WorkEventKind;

use crate::db::Tx;
use crate::engine::Engine;
use crate::error::Error;
use crate::sql::Cached as _;

/// Most owed rows one pass reads at a time.
const PASS: u32 = 256;

/// Notes the reaction `kind` owes, if any, in the transaction appending that Event at
/// `sequence` of `group_id` (only `events::append` calls this).
pub(crate) fn owe(
    tx: &Tx<'_>,
    group_id: &Id,
    sequence: u64,
    kind: &str,
    payload_json: &str,
) -> Result<(), Error> {
    if kind != WorkEventKind::WorkSubmitted.as_str() {
        return Ok(());
    }
    /// The one field a submission's reaction needs from its payload.
    #[derive(serde::Deserialize)]
    struct Subject {
        #[serde(rename = "workItemId")]
        work_item_id: Option<String>,
    }
    let subject: Subject = serde_json::from_str(payload_json).map_err(Error::backend)?;
    let Some(work_item_id) = subject.work_item_id else {
        return Ok(());
    };
    tx.run(
        "INSERT INTO reactions (group_id, sequence, kind, subject) VALUES (?1, ?2, ?3, ?4)",
        params![group_id.as_str(), sequence, kind, work_item_id],
    )?;
    tx.owes_reaction();
    Ok(())
}

/// One owed reaction, as its row says.
#[derive(Debug)]
struct Owed {
    group_id: String,
    sequence: u64,
    kind: String,
    subject: String,
}

/// The reactions' shared state on the Engine: passes started and finished (for
/// [`Engine::reactions_settled`]) and the signal that ends the task when the Engine goes.
#[derive(Debug, Default)]
pub(crate) struct Reactions {
    /// `(passes started, passes finished)` over owed rows.
    passes: tokio::sync::watch::Sender<(u64, u64)>,
    /// Notified when the Engine is dropped: the task ends.
    stop: Arc<tokio::sync::Notify>,
}

impl Drop for Reactions {
    fn drop(&mut self) {
        self.stop.notify_one();
    }
}

/// Starts `engine`'s reactions task: it runs every owed reaction now, then again after each
/// commit that owes one, until the Engine is dropped. It keeps only a weak reference between
/// passes, so it never keeps a closed Store open.
pub(crate) fn start(engine: &Arc<Engine>) {
    let weak = Arc::downgrade(engine);
    let wake = engine.db.reactions_owed();
    let stop = Arc::clone(&engine.reactions.stop);
    let faults = engine.faults.clone();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                () = faults.reactions_released() => {}
                () = stop.notified() => return,
            }
            let Some(engine) = weak.upgrade() else {
                return;
            };
            if let Err(Error::ShuttingDown) = engine.run_owed().await {
                return;
            }
            drop(engine);
            tokio::select! {
                () = wake.notified() => {}
                () = stop.notified() => return,
            }
        }
    });
}

/// The owed rows after `after` (in (Group, sequence) order), at most [`PASS`].
fn owed(conn: &Connection, after: Option<&(String, u64)>) -> Result<Vec<Owed>, Error> {
    let (group, sequence) = after.map_or(("", 0), |(group, sequence)| (group.as_str(), *sequence));
    let mut statement = conn.prepare_cached(
        "SELECT group_id, sequence, kind, subject FROM reactions
         WHERE group_id > ?1 OR (group_id = ?1 AND sequence > ?2)
         ORDER BY group_id, sequence LIMIT ?3",
    )?;
    let rows = statement
        .query_map(params![group, sequence, PASS], |row| {
            Ok(Owed {
                group_id: row.get(0)?,
                sequence: row.get(1)?,
                kind: row.get(2)?,
                subject: row.get(3)?,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

/// Deletes the row of the reaction to `group_id`'s Event at `sequence`: whether it was still
/// there (so this transaction's reaction is the one that counts).
fn done(tx: &Tx<'_>, group_id: &str, sequence: u64) -> Result<bool, Error> {
    let deleted = tx.run(
        "DELETE FROM reactions WHERE group_id = ?1 AND sequence = ?2",
        params![group_id, sequence],
    )?;
    Ok(deleted == 1)
}

impl Engine {
    /// One pass: runs every reaction owed when it began, in order (unless a test holds them).
    /// Fails only when the engine is shutting down.
    async fn run_owed(self: &Arc<Self>) -> Result<(), Error> {
        self.reactions
            .passes
            .send_modify(|(started, _)| *started += 1);
        let outcome = self.run_pass().await;
        self.reactions
            .passes
            .send_modify(|(_, finished)| *finished += 1);
        outcome
    }

    async fn run_pass(self: &Arc<Self>) -> Result<(), Error> {
        let mut after: Option<(String, u64)> = None;
        loop {
            let cursor = after.clone();
            let batch = match self.db.read(move |conn| owed(conn, cursor.as_ref())).await {
                Ok(batch) => batch,
                Err(Error::ShuttingDown) => return Err(Error::ShuttingDown),
                Err(error) => {
                    tracing::warn!(%error, "cannot read the owed reactions; tried at the next wake");
                    return Ok(());
                }
            };
            let full = batch.len() == PASS as usize;
            for owed in batch {
                if self.faults.reactions_held() {
                    return Ok(());
                }
                after = Some((owed.group_id.clone(), owed.sequence));
                self.react(owed).await?;
            }
            if !full {
                return Ok(());
            }
        }
    }

    /// Runs one owed reaction and records its outcome with its row's deletion. Fails only when
    /// the engine is shutting down.
    async fn react(self: &Arc<Self>, owed: Owed) -> Result<(), Error> {
        let outcome = if owed.kind == WorkEventKind::WorkSubmitted.as_str() {
            self.review_after_submission(&owed).await
        } else {
            // No weft writes another kind here (a newer schema is refused at open).
            Err(Error::reject(
                weft_api::ErrorCode::BadRequest,
                format!("no reaction follows {}", owed.kind),
            ))
        };
        match outcome {
            Ok(()) => Ok(()),
            Err(Error::ShuttingDown) => Err(Error::ShuttingDown),
            Err(error @ Error::Backend(_)) => {
                tracing::warn!(%error, group = owed.group_id, sequence = owed.sequence,
                    kind = owed.kind, "a reaction failed; it stays owed and is tried again");
                Ok(())
            }
            Err(error) => {
                // The submission stands; a reviewer can run the checks again by hand.
                tracing::warn!(%error, group = owed.group_id, sequence = owed.sequence,
                    kind = owed.kind, "a reaction was refused; dropped");
                let Owed {
                    group_id, sequence, ..
                } = owed;
                match self.db.write(move |tx| done(tx, &group_id, sequence)).await {
                    Ok(_) => Ok(()),
                    Err(Error::ShuttingDown) => Err(Error::ShuttingDown),
                    Err(error) => {
                        tracing::warn!(%error, "cannot drop a refused reaction; tried again");
                        Ok(())
                    }
                }
            }
        }
    }

    /// EVD-3: the built-in reviewer's checks of the submission at `owed.sequence`, recorded
    /// with the reaction's deletion in one transaction (nothing if another run recorded them).
    async fn review_after_submission(self: &Arc<Self>, owed: &Owed) -> Result<(), Error> {
        let work_item_id = Id::parse("workItemId", &owed.subject)?;
        let prepared = self.review_submission(work_item_id, owed.sequence).await?;
        let (group_id, sequence) = (owed.group_id.clone(), owed.sequence);
        let n_recorded = self
            .db
            .write(move |tx| {
                if !done(tx, &group_id, sequence)? {
                    return Ok(0);
                }
                let mut n_recorded = 0;
                for evidence in prepared {
                    let (_, new) = evidence.record(tx)?;
                    n_recorded += usize::from(new);
                }
                Ok(n_recorded)
            })
            .await?;
        tracing::debug!(n_recorded, "reviewed a submission");
        Ok(())
    }

    /// Returns once every reaction owed by a commit answered before the call has been run
    /// (recorded, dropped as refused, or left owed by a backend error): a pass that began
    /// after the call has finished. At once while a test holds the reactions.
    pub(crate) async fn reactions_settled(&self) {
        if self.faults.reactions_held() {
            return;
        }
        let mut passes = self.reactions.passes.subscribe();
        let (started, _) = *passes.borrow_and_update();
        self.db.reactions_owed().notify_one();
        // `wait_for` fails only when the sender is gone, and `self` holds it.
        let _ = passes.wait_for(|(_, finished)| *finished > started).await;
    }
}
