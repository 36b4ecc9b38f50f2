//! [`Ahead`]: the answer of a read sent before it is needed (`Connection::rows_ahead`).
//!
//! A WorkItem's view, which every Command answers, reads eight small things one after
//! another; on PostgreSQL each was a round trip. Sent ahead, they travel together
//! (`pipeline.rs`) and the first [`Ahead::get`] reads every answer at once. The reads run in
//! the order they were sent among the job's statements, so each sees exactly the changes
//! sent before it, as it would have run there on SQLite, where a read sent ahead runs at once
//! and its answer waits here.

use std::sync::{Arc, Mutex, PoisonError};

use super::value::SqlError;

/// What can read the answers of everything sent ahead on it (`Connection::settle`).
pub(crate) trait Settle {
    fn settle(&self) -> Result<(), SqlError>;
}

/// Where a read sent ahead on PostgreSQL leaves its rows.
pub(super) type Slot = Arc<Mutex<Option<Vec<postgres::Row>>>>;

/// Turns a read's rows into what its caller wants.
type Finish<T, E> = Box<dyn FnOnce(Vec<postgres::Row>) -> std::result::Result<T, E>>;

/// The answer of a read sent ahead, mapped to a `T` (or the error `E` its mapping gives).
#[must_use = "a read sent ahead is read with `get`"]
pub(crate) struct Ahead<T, E = SqlError>(State<T, E>);

enum State<T, E> {
    /// Run at once (SQLite), or mapped already.
    Ready(std::result::Result<T, E>),
    /// Sent on PostgreSQL: its rows arrive in `slot` once the connection has read them.
    Sent { slot: Slot, finish: Finish<T, E> },
}

impl<T: 'static, E: From<SqlError> + 'static> Ahead<T, E> {
    pub(super) fn ready(answer: std::result::Result<T, E>) -> Self {
        Self(State::Ready(answer))
    }

    pub(super) fn sent(
        slot: Slot,
        finish: impl FnOnce(Vec<postgres::Row>) -> std::result::Result<T, E> + 'static,
    ) -> Self {
        Self(State::Sent {
            slot,
            finish: Box::new(finish),
        })
    }

    /// The answer: on PostgreSQL, the first call reads the answers of everything sent before
    /// it (one round trip), and later calls find theirs already read.
    pub(crate) fn get(self, conn: &impl Settle) -> std::result::Result<T, E> {
        match self.0 {
            State::Ready(answer) => answer,
            State::Sent { slot, finish } => {
                let take = || slot.lock().unwrap_or_else(PoisonError::into_inner).take();
                let rows = match take() {
                    Some(rows) => rows,
                    None => {
                        conn.settle()?;
                        take().ok_or(SqlError::Unanswered)?
                    }
                };
                finish(rows)
            }
        }
    }

    /// This answer passed through `then` when it is read.
    pub(crate) fn then<U: 'static, F: From<E> + From<SqlError> + 'static>(
        self,
        then: impl FnOnce(T) -> std::result::Result<U, F> + 'static,
    ) -> Ahead<U, F> {
        match self.0 {
            State::Ready(answer) => Ahead(State::Ready(answer.map_err(F::from).and_then(then))),
            State::Sent { slot, finish } => Ahead(State::Sent {
                slot,
                finish: Box::new(move |rows| then(finish(rows)?)),
            }),
        }
    }
}
