//! Following what other servers commit to a shared index (PostgreSQL, issue #43). The
//! writer's transaction ends with a `NOTIFY` on [`CHANNEL`] naming, per Group, the range of
//! sequences it appended and the process it came from; PostgreSQL delivers it only if the
//! transaction commits, and in commit order. One thread per process listens on its own
//! connection, reads the other processes' Events from the log, and publishes them to the
//! same live stream the writer publishes its own to (`Db::subscribe`), and to
//! `Db::subscribe_foreign`, which the engine follows to keep what it caches current.
//!
//! A live subscriber may see a later Event of this process before an earlier one of another
//! (the two reach it by different paths); delivery fills such a gap from the log, so a
//! stream stays gap-free and in order. A notification lost while the connection was down is
//! not replayed: subscribers catch up from the log at the next gap, and the engine hears
//! [`Foreign::Resync`] at every (re)connection, which it treats as "anything may have changed".
//! A quiet connection asks for a sign of life every [`HEARTBEAT`] ([`Heard`]): one the
//! server lost fails then (its connection gives up on unacknowledged data, `sql/pipeline.rs`)
//! and is replaced, and while none answers the engine takes nothing it caches as current.

use std::sync::Weak;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::sync::broadcast::Sender;
use weft_api::Event;

use crate::sql::Connection;
use crate::sql::postgres::Pg;

/// The channel commits are announced on.
pub(super) const CHANNEL: &str = "weft_commits";

/// Largest payload sent in one notification (PostgreSQL's limit is 8000 bytes).
const MAX_PAYLOAD: usize = 7000;

/// How long the follower waits for a notification before it looks whether the store is gone.
const POLL: Duration = Duration::from_millis(250);

/// How long the follower's connection may stay silent before it asks the server for a sign
/// of life (`SELECT 1`): LISTEN alone sends nothing, so a connection the server lost would
/// wait for notifications for ever, and the engine would trust what it caches meanwhile.
const HEARTBEAT: Duration = Duration::from_secs(1);

/// When the follower's connection last proved it works (a notification read, or a heartbeat
/// answered): the engine trusts what it caches from the index only while that is recent
/// (`engine/contact.rs`).
#[derive(Debug)]
pub(crate) struct Heard {
    started: Instant,
    /// Milliseconds after `started`; 0 until the first connection.
    last: AtomicU64,
}

impl Heard {
    pub(super) fn new() -> Self {
        Self {
            started: Instant::now(),
            last: AtomicU64::new(0),
        }
    }

    fn note(&self) {
        let elapsed = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last.fetch_max(elapsed, Ordering::Relaxed);
    }

    /// How long since the follower's connection last proved it works.
    pub(crate) fn silent_for(&self) -> Duration {
        let last = Duration::from_millis(self.last.load(Ordering::Relaxed));
        self.started.elapsed().saturating_sub(last)
    }
}

/// One notification: the process that committed, and per Group the sequences appended.
#[derive(Debug, Serialize, Deserialize)]
struct Commit {
    origin: String,
    groups: Vec<(String, u64, u64)>,
}

/// The payloads announcing `appended` (one per up to [`MAX_PAYLOAD`] bytes).
pub(super) fn payloads(origin: &str, appended: &[Event]) -> Vec<String> {
    let mut ranges: Vec<(String, u64, u64)> = Vec::new();
    for event in appended {
        match ranges
            .iter_mut()
            .find(|(group, _, _)| *group == event.group_id)
        {
            Some((_, first, last)) => {
                *first = (*first).min(event.sequence);
                *last = (*last).max(event.sequence);
            }
            None => ranges.push((event.group_id.clone(), event.sequence, event.sequence)),
        }
    }
    let mut out = Vec::new();
    let mut commit = Commit {
        origin: origin.to_owned(),
        groups: Vec::new(),
    };
    for range in ranges {
        commit.groups.push(range);
        let length = serde_json::to_string(&commit).map_or(0, |text| text.len());
        if length > MAX_PAYLOAD && commit.groups.len() > 1 {
            let last = commit.groups.pop();
            out.extend(serde_json::to_string(&commit).ok());
            commit.groups = last.into_iter().collect();
        }
    }
    if !commit.groups.is_empty() {
        out.extend(serde_json::to_string(&commit).ok());
    }
    out
}

/// What the follower tells the engine.
#[derive(Clone, Debug)]
pub(crate) enum Foreign {
    /// An Event another process committed.
    Event(Box<Event>),
    /// The follower (re)connected or could not read what was announced: Events may have
    /// been missed, so anything cached from the index may be stale.
    Resync,
}

/// Says that Events may have been missed: the follower (re)connected or could not read an
/// announcement, or a commit of this process failed with its outcome unknown (PostgreSQL
/// may have applied it, and no one here published its Events). The engine's caches
/// (`Foreign::Resync`) and every open stream (`delivery.rs`, which otherwise waited for the
/// Group's next Event to notice a gap) read from the index again.
#[derive(Clone, Debug)]
pub(crate) struct Resyncs {
    foreign: Sender<Foreign>,
    streams: std::sync::Arc<tokio::sync::watch::Sender<u64>>,
}

impl Resyncs {
    pub(crate) fn new(foreign: Sender<Foreign>) -> Self {
        Self {
            foreign,
            streams: std::sync::Arc::new(tokio::sync::watch::channel(0).0),
        }
    }

    pub(crate) fn send(&self) {
        // A send fails only with no subscriber.
        let _ = self.foreign.send(Foreign::Resync);
        self.streams.send_modify(|n| *n += 1);
    }

    /// Changes at every resync from now on.
    pub(crate) fn subscribe(&self) -> tokio::sync::watch::Receiver<u64> {
        self.streams.subscribe()
    }
}

/// Where the follower publishes what it reads.
pub(super) struct Outlets {
    pub(super) committed: Sender<Event>,
    pub(super) foreign: Sender<Foreign>,
    pub(super) resyncs: Resyncs,
    pub(super) heard: std::sync::Arc<Heard>,
}

/// Starts the follower of `url` for the process `origin`; it ends once `alive` is gone.
pub(super) fn start(
    url: String,
    origin: std::sync::Arc<str>,
    outlets: Outlets,
    alive: Weak<()>,
) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("weft-pg-follower".into())
        .spawn(move || run(&url, &origin, &outlets, &alive))
        .map(drop)
}

fn run(url: &str, origin: &str, outlets: &Outlets, alive: &Weak<()>) {
    while alive.strong_count() > 0 {
        let Ok(pg) = Pg::connect(url) else {
            std::thread::sleep(POLL);
            continue;
        };
        let conn = Connection::Postgres(Box::new(pg));
        if conn.execute_batch(&format!("LISTEN {CHANNEL}")).is_err() {
            std::thread::sleep(POLL);
            continue;
        }
        // What was announced while no connection listened is not replayed.
        outlets.resyncs.send();
        outlets.heard.note();
        while alive.strong_count() > 0 {
            let Connection::Postgres(pg) = &conn else {
                return;
            };
            let Ok(payloads) = pg.notifications(POLL) else {
                break; // connect again
            };
            if !payloads.is_empty() {
                // They came through: the connection works, whatever reading them brings.
                outlets.heard.note();
            } else if outlets.heard.silent_for() >= HEARTBEAT {
                if conn.execute_batch("SELECT 1").is_err() {
                    break; // connect again
                }
                outlets.heard.note();
            }
            for payload in payloads {
                if publish(&conn, origin, &payload, outlets).is_err() {
                    tracing::warn!(
                        "could not read another server's Events; subscribers catch up from the log"
                    );
                    outlets.resyncs.send();
                } else {
                    // Each one read: a long burst to catch up with is not silence.
                    outlets.heard.note();
                }
            }
        }
    }
}

/// Reads and publishes the Events one notification of another process announces.
fn publish(
    conn: &Connection,
    origin: &str,
    payload: &str,
    outlets: &Outlets,
) -> Result<(), crate::error::Error> {
    let commit: Commit = serde_json::from_str(payload).map_err(crate::error::Error::backend)?;
    if commit.origin == origin {
        return Ok(());
    }
    for (group, first, last) in commit.groups {
        let limit = u32::try_from(last.saturating_sub(first) + 1).unwrap_or(u32::MAX);
        for row in crate::rows::events::after(conn, &group, first.saturating_sub(1), limit)? {
            let event = row.into_event()?;
            // A send fails only with no subscriber.
            let _ = outlets.committed.send(event.clone());
            let _ = outlets.foreign.send(Foreign::Event(Box::new(event)));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use weft_api::{Event, EventPayload, Id, kinds};

    use crate::db::{Db, Location};

    async fn create_group(db: &Db, name: String) {
        let id = Id::parse("group", &name).expect("id");
        db.write(move |tx| {
            let now = chrono::Utc::now();
            crate::rows::groups::insert(tx, id.as_str(), now)?;
            crate::events::append(
                tx,
                &id,
                &EventPayload::GroupCreated(kinds::GroupCreated {
                    group_id: id.clone(),
                }),
                now,
            )
        })
        .await
        .expect("group created");
    }

    async fn next<T: Clone>(
        receiver: &mut tokio::sync::broadcast::Receiver<T>,
        wait: Duration,
    ) -> Option<T> {
        tokio::time::timeout(wait, receiver.recv())
            .await
            .ok()
            .map(|event| event.expect("an Event"))
    }

    /// The next foreign Event (a resync is skipped).
    async fn next_foreign(
        receiver: &mut tokio::sync::broadcast::Receiver<super::Foreign>,
        wait: Duration,
    ) -> Option<Event> {
        loop {
            match next(receiver, wait).await? {
                super::Foreign::Event(event) => return Some(*event),
                super::Foreign::Resync => {}
            }
        }
    }

    /// Two processes' writers over one database (two `Db`s here): what one commits reaches
    /// the other's live stream, in commit order, and never its own foreign stream.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_commit_of_one_writer_reaches_the_live_stream_of_another() {
        let Some(url) = weft_testkit::postgres_database_or_skip() else {
            return;
        };
        let a = Db::open(&Location::Postgres(url.clone())).expect("a opens");
        let b = Db::open(&Location::Postgres(url)).expect("b opens");
        let mut live = b.subscribe();
        let mut foreign = b.subscribe_foreign();
        let mut own = a.subscribe_foreign();
        // B's follower listens once it has connected: announce until it hears one.
        let mut heard = false;
        for attempt in 0..40 {
            create_group(&a, format!("warm-{attempt}")).await;
            if next_foreign(&mut foreign, Duration::from_millis(250))
                .await
                .is_some()
            {
                heard = true;
                break;
            }
        }
        assert!(heard, "b's follower never heard a's commits");
        while next(&mut live, Duration::from_millis(10)).await.is_some() {}
        while next_foreign(&mut foreign, Duration::from_millis(10))
            .await
            .is_some()
        {}
        for n in 0..5 {
            create_group(&a, format!("g{n}")).await;
        }
        for n in 0..5 {
            let event = next(&mut live, Duration::from_secs(5)).await.expect("live");
            assert_eq!(event.group_id, format!("g{n}"));
            assert_eq!(event.kind, "group.created");
            let event = next_foreign(&mut foreign, Duration::from_secs(5))
                .await
                .expect("foreign");
            assert_eq!(event.group_id, format!("g{n}"));
        }
        assert!(
            next_foreign(&mut own, Duration::from_millis(300))
                .await
                .is_none(),
            "a's own commits are not foreign to it"
        );
    }

    /// With nothing committed anywhere, the follower still proves its connection works about
    /// every [`super::HEARTBEAT`] (LISTEN alone sends nothing, so a connection the server
    /// lost would never fail): what it last heard stays recent, and the engine trusts its
    /// caches only while it does.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_quiet_follower_still_hears_from_the_index() {
        let Some(url) = weft_testkit::postgres_database_or_skip() else {
            return;
        };
        let db = Db::open(&Location::Postgres(url)).expect("opens");
        let quiet = super::HEARTBEAT * 4;
        tokio::time::sleep(quiet).await;
        let silent = db.follower_silent_for().expect("a follower");
        // Without the heartbeat it would be silent for all of `quiet`; the bound leaves room
        // for a busy machine's late polls.
        assert!(
            silent < super::HEARTBEAT * 5 / 2,
            "silent for {silent:?} after {quiet:?} of quiet"
        );
    }
}
