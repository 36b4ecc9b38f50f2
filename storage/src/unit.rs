//! The unit of work (issue #41): [`Tx`], the writer's transaction as one job sees it, and its
//! memory of the rows the job has loaded, so that every check of a Command or a publication
//! is handed the same row instead of reading it again. The writer (`db.rs`) makes one `Tx`
//! per job and publishes its Events after the commit.
//!
//! A writer job's [`Tx`] carries a [`Memo`]; a reader's plain connection has none
//! (a read is one statement's snapshot anyway). Only a table's `rows/` file reads or writes
//! its entries: it loads through [`Memo::load`], and every change it makes to the table
//! updates or forgets what is remembered, in the same function as the SQL. A nested savepoint
//! that rolls back forgets everything (`Tx::nested`). Functions that may run on either take
//! `&impl Conn`.
//!
//! The write meter (`sql.rs`) reports a query run twice with the same parameters in one job
//! as a repeated load; `src/http/tests/statements.rs` holds a Command and a publication to
//! none.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use crate::sql::Connection;

use crate::error::Error;

/// What is remembered: by table (or query) and key, a value of the type its `rows/` file
/// loads.
type Remembered = HashMap<(&'static str, String), Box<dyn Any>>;

/// Rows loaded in one job, by table (or query) and key.
#[derive(Default)]
pub(crate) struct Memo {
    rows: RefCell<Remembered>,
    /// The Groups whose locks the job took and holds (`rows::groups::lock`; a rolled-back
    /// nested savepoint let its own go, `Tx::nested`): the writer cuts its batch after a job
    /// that locked a Group it did not name, and its later jobs do not take them again
    /// (`db/writer.rs`).
    locked: RefCell<Vec<String>>,
}

impl Memo {
    /// The remembered value of `(what, key)`, or `load`'s, remembered.
    pub(crate) fn load<T: Clone + 'static>(
        &self,
        what: &'static str,
        key: &str,
        load: impl FnOnce() -> Result<T, Error>,
    ) -> Result<T, Error> {
        let known = self
            .rows
            .borrow()
            .get(&(what, key.to_owned()))
            .and_then(|value| value.downcast_ref::<T>())
            .cloned();
        if let Some(value) = known {
            return Ok(value);
        }
        // Not borrowed while loading: a load may itself go through the memo.
        let value = load()?;
        self.remember(what, key, value.clone());
        Ok(value)
    }

    /// `(what, key)` is now `value` (a change the caller just made).
    pub(crate) fn remember<T: 'static>(&self, what: &'static str, key: &str, value: T) {
        self.rows
            .borrow_mut()
            .insert((what, key.to_owned()), Box::new(value));
    }

    /// Applies `change` to every remembered value of `what`.
    pub(crate) fn update<T: 'static>(&self, what: &'static str, mut change: impl FnMut(&mut T)) {
        for ((table, _), value) in self.rows.borrow_mut().iter_mut() {
            if *table == what
                && let Some(value) = value.downcast_mut::<T>()
            {
                change(value);
            }
        }
    }

    /// Every remembered value of `what`, by key.
    pub(crate) fn all<T: Clone + 'static>(&self, what: &'static str) -> Vec<(String, T)> {
        self.rows
            .borrow()
            .iter()
            .filter(|((table, _), _)| *table == what)
            .filter_map(|((_, key), value)| Some((key.clone(), value.downcast_ref::<T>()?.clone())))
            .collect()
    }

    /// Forgets what is remembered of `(what, key)`.
    pub(crate) fn forget(&self, what: &'static str, key: &str) {
        self.rows.borrow_mut().remove(&(what, key.to_owned()));
    }

    /// Forgets everything (a rolled-back savepoint).
    pub(crate) fn forget_all(&self) {
        self.rows.borrow_mut().clear();
    }

    /// The job took Group `group`'s lock.
    pub(crate) fn note_lock(&self, group: &str) {
        self.locked.borrow_mut().push(group.to_owned());
    }

    /// The job took a lock other jobs take after Group locks (an Agent's row, a capability
    /// token's, the exclusive disposal lock), `what` naming it: the writer ends the batch after this job, as
    /// after a job that took a Group's lock it did not name (`db/writer.rs`), so no later job
    /// of the batch takes a Group's lock while the transaction holds this row. The name is no
    /// Group's id (it starts with a NUL), so no job is told it holds a Group's lock by it.
    pub(crate) fn note_row_lock(&self, what: &str) {
        self.note_lock(&format!("\0{what}"));
    }

    /// The Groups whose locks the job took.
    pub(crate) fn locked(&self) -> Vec<String> {
        self.locked.borrow().clone()
    }

    /// How many locks the job took so far, for [`Memo::let_go_after`].
    fn locks_taken(&self) -> usize {
        self.locked.borrow().len()
    }

    /// The locks taken after the `mark`th were let go (a rolled-back savepoint).
    fn let_go_after(&self, mark: usize) {
        self.locked.borrow_mut().truncate(mark);
    }

    /// The transaction already holds Group `group`'s lock (an earlier job of the batch took
    /// it, and its savepoint was released): this job's `rows::groups::lock` skips it.
    pub(crate) fn lock_held(&self, group: &str) {
        self.remember("groups.lock", group, ());
    }

    /// Whether this job holds Group `group`'s lock (taken by it, or handed over by the writer).
    pub(crate) fn holds_lock(&self, group: &str) -> bool {
        self.rows
            .borrow()
            .contains_key(&("groups.lock", group.to_owned()))
    }

    /// Whether the job took the lock of a Group other than `named` (any Group, for none).
    pub(crate) fn locked_other_than(&self, named: Option<&str>) -> bool {
        self.locked
            .borrow()
            .iter()
            .any(|group| Some(group.as_str()) != named)
    }
}

/// A connection a storage function may run on: a writer job's transaction, which remembers
/// the rows it loaded, or a plain connection, which does not.
pub(crate) trait Conn {
    fn conn(&self) -> &Connection;
    fn memo(&self) -> Option<&Memo>;
}

impl Conn for Connection {
    fn conn(&self) -> &Connection {
        self
    }
    fn memo(&self) -> Option<&Memo> {
        None
    }
}

/// The writer's transaction as one job sees it: the connection (through `Deref`, so every
/// `&Connection` helper takes it) and the Events this job appended. The writer publishes a
/// job's Events to live subscribers after the commit, and drops them if the job's savepoint
/// is rolled back; a Command that appends several Events collects them all here.
pub(crate) struct Tx<'a> {
    conn: &'a Connection,
    appended: RefCell<Vec<weft_api::Event>>,
    /// Each appended Event's transparency-log leaf hash, beside it (the writer grows each
    /// Group's Merkle tree with them before the commit, `tlog::grow`).
    leaves: RefCell<Vec<[u8; 32]>>,
    /// Whether this job owes a reaction (`reactions.rs`): the writer wakes the reactions'
    /// task after the commit. Left set by a rolled-back nested savepoint: a wake finds nothing.
    owes_reaction: Cell<bool>,
    /// The rows this job loaded (the unit of work, `unit.rs`).
    memo: Memo,
}

impl<'a> Tx<'a> {
    /// The writer's view of one job (`db.rs` makes one per job).
    pub(crate) fn new(conn: &'a Connection) -> Self {
        Self {
            conn,
            appended: RefCell::new(Vec::new()),
            leaves: RefCell::new(Vec::new()),
            owes_reaction: Cell::new(false),
            memo: Memo::default(),
        }
    }

    /// A job's view of `conn` outside the writer (unit tests of `rows/` files).
    #[cfg(test)]
    pub(crate) fn over(conn: &'a Connection) -> Self {
        Self::new(conn)
    }

    /// The rows this job loaded (only `rows/` files use it; see `unit.rs`).
    pub(crate) fn loaded(&self) -> &Memo {
        &self.memo
    }

    /// Notes that this job wrote a reaction's row (only `reactions::owe` calls this).
    pub(crate) fn owes_reaction(&self) {
        self.owes_reaction.set(true);
    }

    /// Notes an Event appended in this transaction and its leaf hash (only `events::append`
    /// calls this).
    pub(crate) fn appended(&self, event: weft_api::Event, leaf: [u8; 32]) {
        self.appended.borrow_mut().push(event);
        self.leaves.borrow_mut().push(leaf);
    }

    /// The outcome of work that ran `body` and then read the answers of what it sent ahead
    /// (`settled`, `sql/pipeline.rs`): a change that failed comes first in program order, so
    /// its error is the outcome, unless it only failed because the body's own failure had
    /// aborted the transaction.
    pub(crate) fn outcome<T>(
        body: Result<T, Error>,
        settled: crate::sql::Result<()>,
    ) -> Result<T, Error> {
        match (body, settled) {
            (Ok(value), Ok(())) => Ok(value),
            (Err(error), Ok(())) => Err(error),
            (Err(error), Err(sent)) if sent.is_after_abort() => Err(error),
            (_, Err(sent)) => Err(sent.into()),
        }
    }

    /// Runs `f` in a savepoint nested in this job's: an error rolls back its rows and forgets
    /// the Events it appended (they must never reach a subscriber), and leaves the rest of the
    /// job standing. The batch Command route runs each Command this way.
    pub(crate) fn nested<T>(&self, f: impl FnOnce(&Self) -> Result<T, Error>) -> Result<T, Error> {
        let mark = self.appended.borrow().len();
        let locks = self.memo.locks_taken();
        // The job's own changes sent ahead are answered before the nested part begins, so
        // none of their errors is taken for its.
        self.conn.settle()?;
        self.conn.control("SAVEPOINT nested")?;
        // The changes `f` sent ahead are answered inside its savepoint: a failed one is `f`'s.
        let body = f(self);
        match Self::outcome(body, self.conn.settle()) {
            Ok(value) => {
                self.conn.control("RELEASE nested")?;
                Ok(value)
            }
            Err(error) => {
                self.conn
                    .execute_batch("ROLLBACK TO nested; RELEASE nested")?;
                self.appended.borrow_mut().truncate(mark);
                self.leaves.borrow_mut().truncate(mark);
                self.memo.forget_all();
                // PostgreSQL let go of the row locks taken since the savepoint.
                self.memo.let_go_after(locks);
                Err(error)
            }
        }
    }

    /// What the job appended, their leaf hashes, and whether it owes a reaction (`db.rs`,
    /// after the job).
    pub(crate) fn into_appended(self) -> (Vec<weft_api::Event>, Vec<[u8; 32]>, bool) {
        (
            self.appended.into_inner(),
            self.leaves.into_inner(),
            self.owes_reaction.get(),
        )
    }
}

impl Conn for Tx<'_> {
    fn conn(&self) -> &Connection {
        self.conn
    }
    fn memo(&self) -> Option<&Memo> {
        Some(&self.memo)
    }
}

impl crate::sql::Settle for Tx<'_> {
    fn settle(&self) -> crate::sql::Result<()> {
        self.conn.settle()
    }
}

impl std::ops::Deref for Tx<'_> {
    type Target = Connection;
    fn deref(&self) -> &Connection {
        self.conn
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_remembered_row_is_loaded_once_and_changes_are_seen() {
        let memo = Memo::default();
        let mut loads = 0;
        for _ in 0..3 {
            let value = memo
                .load("leases.current", "wi-1", || {
                    loads += 1;
                    Ok(Some(7u64))
                })
                .expect("load");
            assert_eq!(value, Some(7));
        }
        assert_eq!(loads, 1);
        memo.update::<Option<u64>>("leases.current", |value| *value = value.map(|v| v + 1));
        let changed = memo.load("leases.current", "wi-1", || Ok(None::<u64>));
        assert_eq!(changed.expect("load"), Some(8));
        memo.forget_all();
        let reloaded = memo.load("leases.current", "wi-1", || Ok(None::<u64>));
        assert_eq!(reloaded.expect("load"), None);
    }
}
