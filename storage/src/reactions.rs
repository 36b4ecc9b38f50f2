//! Reactions after commit (issue #41): work that follows an Event of a given kind but must not
//! hold up the request that appended it. Today one: after `work.submitted`, the built-in
//! reviewer's checks (EVD-3), recorded as the Authority's Evidence.
//!
//! **The queue.** `events::append` calls [`owe`] for every Event; for a kind a reaction
//! follows it inserts a row into `reactions` (Group, sequence, kind, subject) in the same
//! transaction as the Event, so the reaction is owed exactly when the Event is committed. The
//! request answers after that commit, not after the reaction.
//!
//! **When it runs.** One task per open `Store` (spawned by [`start`]) runs owed
//! reactions one at a time, in (Group, sequence) order: once at start-up, which runs every
//! reaction a stopped or killed process still owed, and again after every commit that owed
//! one (the writer notifies `Db::reactions_owed` once the batch is answered). A reaction
//! does its slow part (re-hashing GiBs, validating schemas) outside the writer, through the
//! read pool and the blocking pool like any read, and holds no connection across an `.await`.
//!
//! **One server runs it.** On an index several servers share, a pass claims the rows it will
//! run (`rows/reactions.rs::claim`: this process's name and an end, [`CLAIM`] from now, in one
//! writer transaction with `SKIP LOCKED`), and skips rows another server's live claim holds: a
//! review re-hashing GiBs runs on one server, not on each. A claim only saves work; a killed
//! server's claims end and another server runs what it owed: on a shared index each server
//! also looks for owed reactions every [`LOOK_AGAIN`], not only after its own commits.
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
//! `Store::reactions_settled`.
//!
//! This file owns the queue and the task; what a reaction does is its feature's (the review
//! is `evidence/reviewer.rs`), reached through [`Reactor`], which the Engine implements
//! (`lifecycle.rs`), so the queue imports no feature and not the Engine.
//!
//! Not here: the lease revocation after a replacing session (LSE-9) stays in the transaction
//! that opens the session (`sessions.rs`), because LSE-9 requires the leases to end before the
//! new session can start the WorkItems again; a reaction after the answer could not promise it.
//! `sessions.rs` reaches it through `Engine::on_session_replaced`, set in `lifecycle.rs`, so
//! sessions do not import work.

use std::sync::Arc;

use crate::sql::Connection;
use futures::future::BoxFuture;
use weft_api::Id;
use weft_api::work::events::WorkEventKind;

use crate::clock::format_instant;
use crate::db::Db;
use crate::error::Error;
use crate::faults::Faults;
use crate::unit::Tx;

/// Most owed rows one pass reads at a time.
const PASS: u32 = 256;

/// Most owed rows a server claims at a time on a shared index: few enough that it runs them
/// well within [`CLAIM`], so no other server repeats them.
const CLAIMED: u32 = 16;

/// How often a server on a shared index looks for owed reactions when none of its own commits
/// woke it: another server's, or its own former process's, claims end and are taken here.
const LOOK_AGAIN: std::time::Duration = std::time::Duration::from_secs(60);

/// Notes the reaction `kind` owes, if any, in the transaction appending that Event at
/// `sequence` of `group_id` (only `events::append` calls this).
pub(crate) fn owe(
    tx: &Tx<'_>,
    group_id: &Id,
    sequence: u64,
    kind: &str,
    payload_json: &str,
) -> Result<(), Error> {
    if Reaction::following(kind).is_none() {
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
    crate::rows::reactions::insert(tx, group_id.as_str(), sequence, kind, &work_item_id)?;
    tx.owes_reaction();
    Ok(())
}

pub(crate) use crate::rows::reactions::Owed;

/// The kinds of reaction, by the kind of Event they follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reaction {
    /// EVD-3: the built-in reviewer's checks after `work.submitted`.
    Review,
}

impl Reaction {
    /// The reaction that follows an Event of `kind`, if one does: the one table of them.
    fn following(kind: &str) -> Option<Self> {
        (kind == WorkEventKind::WorkSubmitted.as_str()).then_some(Self::Review)
    }
}

impl Owed {
    /// Which reaction this row owes (`None`: a kind no reaction follows).
    pub(crate) fn reaction(&self) -> Option<Reaction> {
        Reaction::following(&self.kind)
    }
}

/// What runs the reactions: the Engine (`lifecycle.rs`), seen through what the queue needs.
pub(crate) trait Reactor: Send + Sync + 'static {
    fn db(&self) -> &Db;
    fn faults(&self) -> &Faults;
    fn reactions(&self) -> &Reactions;
    /// The Engine's clock (claims on reactions are timed by it).
    fn now(&self) -> chrono::DateTime<chrono::Utc>;
    /// Runs the reaction `owed` owes, recording what it found in one transaction that
    /// deletes its row with [`done`] (and records nothing when `done` says it is gone).
    fn react<'a>(self: &'a Arc<Self>, owed: &'a Owed) -> BoxFuture<'a, Result<(), Error>>;
}

/// The reactions' shared state on the Engine: passes started and finished (for [`settled`]),
/// the signal that ends the task when the Engine goes, this process's name in its claims and
/// how many reactions it ran.
#[derive(Debug, Default)]
pub(crate) struct Reactions {
    /// `(passes started, passes finished)` over owed rows.
    passes: tokio::sync::watch::Sender<(u64, u64)>,
    /// Notified when the Engine is dropped: the task ends.
    stop: Arc<tokio::sync::Notify>,
    claimant: Claimant,
    /// Reactions this process began to run.
    ran: std::sync::atomic::AtomicU64,
}

impl Reactions {
    /// How many reactions this process began to run.
    pub(crate) fn ran(&self) -> u64 {
        self.ran.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// This process's name in its claims on owed reactions: random, so a restarted server waits
/// out its former claims like any other server's.
#[derive(Debug)]
struct Claimant(String);

impl Default for Claimant {
    fn default() -> Self {
        Self(uuid::Uuid::new_v4().to_string())
    }
}

/// How long a claim keeps other servers off a reaction: longer than a review takes; a server
/// killed while running one leaves it to the others after this.
const CLAIM: chrono::Duration = chrono::Duration::minutes(5);

impl Drop for Reactions {
    fn drop(&mut self) {
        self.stop.notify_one();
    }
}

/// Starts `reactor`'s reactions task: it runs every owed reaction now, then again after each
/// commit that owes one, until the reactor is dropped. It keeps only a weak reference between
/// passes, so it never keeps a closed Store open.
pub(crate) fn start<R: Reactor>(reactor: &Arc<R>) {
    let weak = Arc::downgrade(reactor);
    let wake = reactor.db().reactions_owed();
    let stop = Arc::clone(&reactor.reactions().stop);
    let faults = reactor.faults().clone();
    let shared = reactor.db().is_shared();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                () = faults.reactions_released() => {}
                () = stop.notified() => return,
            }
            let Some(reactor) = weak.upgrade() else {
                return;
            };
            if let Err(Error::ShuttingDown) = run_owed(&reactor).await {
                return;
            }
            drop(reactor);
            tokio::select! {
                () = wake.notified() => {}
                () = tokio::time::sleep(LOOK_AGAIN), if shared => {}
                () = stop.notified() => return,
            }
        }
    });
}

/// The owed rows after `after` (in (Group, sequence) order), at most [`PASS`].
fn owed(conn: &Connection, after: Option<&(String, u64)>) -> Result<Vec<Owed>, Error> {
    let after = after.map(|(group, sequence)| (group.as_str(), *sequence));
    crate::rows::reactions::after(conn, after, PASS)
}

/// Deletes the row of the reaction to `group_id`'s Event at `sequence`: whether it was still
/// there (so the calling transaction's reaction is the one that counts).
pub(crate) fn done(tx: &Tx<'_>, group_id: &str, sequence: u64) -> Result<bool, Error> {
    crate::rows::reactions::delete(tx, group_id, sequence)
}

/// One pass: runs every reaction owed when it began, in order (unless a test holds them).
/// Fails only when the engine is shutting down.
async fn run_owed<R: Reactor>(reactor: &Arc<R>) -> Result<(), Error> {
    let passes = &reactor.reactions().passes;
    passes.send_modify(|(started, _)| *started += 1);
    let outcome = run_pass(reactor).await;
    passes.send_modify(|(_, finished)| *finished += 1);
    outcome
}

async fn run_pass<R: Reactor>(reactor: &Arc<R>) -> Result<(), Error> {
    let mut after: Option<(String, u64)> = None;
    loop {
        let cursor = after.clone();
        let read = match reactor.db().is_shared() {
            // Several servers: each takes what no other is running (a claim, written).
            true => {
                let claimant = reactor.reactions().claimant.0.clone();
                let now = reactor.now();
                let (at, until) = (format_instant(now), format_instant(now + CLAIM));
                reactor
                    .db()
                    .write(move |tx| {
                        let after = cursor.as_ref().map(|(g, s)| (g.as_str(), *s));
                        crate::rows::reactions::claim(tx, after, CLAIMED, &claimant, &at, &until)
                    })
                    .await
            }
            false => {
                reactor
                    .db()
                    .read(move |conn| owed(conn, cursor.as_ref()))
                    .await
            }
        };
        let batch = match read {
            Ok(batch) => batch,
            Err(Error::ShuttingDown) => return Err(Error::ShuttingDown),
            Err(error) => {
                tracing::warn!(%error, "cannot read the owed reactions; tried at the next wake");
                return Ok(());
            }
        };
        let limit = if reactor.db().is_shared() {
            CLAIMED
        } else {
            PASS
        };
        let full = batch.len() == limit as usize;
        for owed in batch {
            if reactor.faults().reactions_held() {
                return Ok(());
            }
            after = Some((owed.group_id.clone(), owed.sequence));
            react(reactor, owed).await?;
        }
        if !full {
            return Ok(());
        }
    }
}

/// Runs one owed reaction. A refusal drops it (logged); a backend error leaves it owed.
/// Fails only when the engine is shutting down.
async fn react<R: Reactor>(reactor: &Arc<R>, owed: Owed) -> Result<(), Error> {
    reactor
        .reactions()
        .ran
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let outcome = match owed.reaction() {
        Some(_) => reactor.react(&owed).await,
        // No weft writes another kind (a newer schema is refused at open).
        None => Err(Error::reject(
            weft_api::ErrorCode::BadRequest,
            format!("no reaction follows {}", owed.kind),
        )),
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
            match reactor
                .db()
                .write(move |tx| done(tx, &group_id, sequence))
                .await
            {
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

/// Returns once every reaction owed by a commit answered before the call has been run
/// (recorded, dropped as refused, or left owed by a backend error): a pass that began after
/// the call has finished. At once while a test holds the reactions.
pub(crate) async fn settled(db: &Db, faults: &Faults, reactions: &Reactions) {
    if faults.reactions_held() {
        return;
    }
    let mut passes = reactions.passes.subscribe();
    let (started, _) = *passes.borrow_and_update();
    db.reactions_owed().notify_one();
    // `wait_for` fails only when the sender is gone, and `reactions` holds it.
    let _ = passes.wait_for(|(_, finished)| *finished > started).await;
}

#[cfg(test)]
mod tests {
    use crate::db::{Db, Location};

    /// The transaction appending a `work.submitted` owes its review (`events::append` calls
    /// `owe` for every Event), and only that kind; a reaction's row is deleted once, so a
    /// second run of the same reaction (after a crash that cut nothing short, or alongside
    /// another) records nothing.
    #[tokio::test]
    async fn a_submission_owes_one_reaction_and_it_is_done_once() {
        let db = Db::open(&Location::Memory).expect("open");
        let owed = db
            .write(|tx| {
                let group = weft_api::Id::parse("groupId", "g1")?;
                let payload = r#"{"detail":{},"workItemId":"wi-1"}"#;
                super::owe(tx, &group, 1, "work.started", payload)?;
                super::owe(tx, &group, 2, "work.submitted", payload)?;
                super::owed(tx, None)
            })
            .await
            .expect("owe");
        assert_eq!(owed.len(), 1, "{owed:?}");
        assert_eq!(
            (
                owed[0].sequence,
                owed[0].kind.as_str(),
                owed[0].subject.as_str()
            ),
            (2, "work.submitted", "wi-1")
        );
        assert_eq!(owed[0].reaction(), Some(super::Reaction::Review));
        let runs = db
            .write(|tx| {
                let first = super::done(tx, "g1", 2)?;
                let second = super::done(tx, "g1", 2)?;
                Ok((first, second, super::owed(tx, None)?.len()))
            })
            .await
            .expect("done");
        assert_eq!(runs, (true, false, 0), "done once, then nothing is owed");
    }
}
