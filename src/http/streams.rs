//! How many event streams a session and an Agent may hold open at once (issue #40).
//!
//! A stream holds a subscription to the Group's broadcast, a task's state and a connection
//! for as long as its client keeps it, so one session opening thousands pinned memory and
//! threads. Each stream takes a [`Slot`] before it opens; more answer `429 too_many_streams`
//! with `Retry-After`. The slot is in the stream's body and is given back when the body is
//! dropped (the client left, the session ended, the server shut down); a count that reaches
//! zero removes its entry, so the table holds only holders of open streams.
//!
//! The operator's streams are not counted: the admin token is one caller, the operator.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use weft_api::{ErrorCode, Id};

use super::error::HttpError;

/// Who holds a stream: the session (its Agent, Group and epoch) and its Agent.
type SessionKey = (Id, Id, u64);

/// The open streams, by session and by Agent.
#[derive(Debug)]
pub(crate) struct Streams {
    per_session: usize,
    per_agent: usize,
    // A std Mutex: each critical section is a map update, with no `.await` inside.
    open: Mutex<Open>,
}

#[derive(Debug, Default)]
struct Open {
    sessions: HashMap<SessionKey, usize>,
    agents: HashMap<Id, usize>,
}

/// One open stream's place under both caps; given back on drop.
#[derive(Debug)]
pub(crate) struct Slot {
    streams: Arc<Streams>,
    session: SessionKey,
}

impl Streams {
    pub(crate) fn new(per_session: usize, per_agent: usize) -> Self {
        Self {
            per_session: per_session.max(1),
            per_agent: per_agent.max(1),
            open: Mutex::default(),
        }
    }

    /// A slot for one more stream of `session`, or `too_many_streams`.
    pub(crate) fn open(
        self: &Arc<Self>,
        session: &weft_storage::Session,
    ) -> Result<Slot, HttpError> {
        let key = (
            session.agent_id.clone(),
            session.group_id.clone(),
            session.session_epoch,
        );
        let mut open = self.lock();
        let of_session = open.sessions.get(&key).copied().unwrap_or(0);
        let of_agent = open.agents.get(&session.agent_id).copied().unwrap_or(0);
        if of_session >= self.per_session {
            return Err(HttpError::new(
                ErrorCode::TooManyStreams,
                format!(
                    "this session has {of_session} event streams open, the most it may; close one first"
                ),
            ));
        }
        if of_agent >= self.per_agent {
            return Err(HttpError::new(
                ErrorCode::TooManyStreams,
                format!(
                    "this Agent has {of_agent} event streams open, the most it may; close one first"
                ),
            ));
        }
        *open.sessions.entry(key.clone()).or_default() += 1;
        *open.agents.entry(session.agent_id.clone()).or_default() += 1;
        Ok(Slot {
            streams: self.clone(),
            session: key,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Open> {
        // A panic while holding the lock leaves plain counts behind, still consistent.
        self.open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.streams.lock();
        release(&mut open.sessions, &self.session);
        release(&mut open.agents, &self.session.0);
        // Give back what a burst of streams grew the tables to.
        for capacity in [open.sessions.capacity(), open.agents.capacity()] {
            if capacity > 64 && capacity > 4 * open.sessions.len().max(open.agents.len()) {
                open.sessions.shrink_to_fit();
                open.agents.shrink_to_fit();
                break;
            }
        }
    }
}

fn release<K: std::hash::Hash + Eq>(counts: &mut HashMap<K, usize>, key: &K) {
    if let Some(count) = counts.get_mut(key) {
        *count = count.saturating_sub(1);
        if *count == 0 {
            counts.remove(key);
        }
    }
}
