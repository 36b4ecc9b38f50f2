//! The statement cache every storage module queries through (no module import of its own,
//! so any module may use it without an import circle), and the meter that counts the work a
//! read or a write does in SQL.
//!
//! The meter is for tests that compare work rather than wall time (issue #40: an absent
//! artifact and another Group's must cost the same lookup): [`metered`] runs a closure on
//! the calling thread and returns the statements it ran through [`Cached`], the rows they
//! returned, and SQLite's own count of virtual-machine steps
//! (`SQLITE_STMTSTATUS_VM_STEP`). Off, it costs one thread-local read per statement.

use std::cell::Cell;

use rusqlite::{Connection, Statement, StatementStatus};

/// Prepared statements kept per connection (rusqlite's default is 16; a Command alone runs
/// more distinct statements than that, and parsing SQL was a fifth of the writer's time).
pub(crate) const STATEMENT_CACHE: usize = 256;

/// The SQL work counted by [`metered`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Work {
    /// Statements run.
    pub statements: u64,
    /// Rows they returned.
    pub rows: u64,
    /// SQLite virtual-machine steps they took (index seeks, row visits, comparisons).
    pub vm_steps: u64,
}

thread_local! {
    static METER: Cell<Option<Work>> = const { Cell::new(None) };
}

/// Runs `f` and returns the work the statements it ran on this thread through [`Cached`]
/// did. Meters do not nest: an inner one takes over and the outer sees nothing of it.
#[cfg(test)]
pub(crate) fn metered<R>(f: impl FnOnce() -> R) -> (R, Work) {
    let outer = METER.replace(Some(Work::default()));
    let result = f();
    let work = METER.replace(outer).unwrap_or_default();
    (result, work)
}

/// Counts one run of `statement` that returned `rows` rows and had taken `before` steps
/// before it ran (`None`: no meter).
fn count(statement: &Statement<'_>, before: Option<i32>, rows: u64) {
    let Some(before) = before else { return };
    let steps = statement.get_status(StatementStatus::VmStep) - before;
    METER.with(|meter| {
        if let Some(mut work) = meter.get() {
            work.statements += 1;
            work.rows += rows;
            work.vm_steps += u64::try_from(steps).unwrap_or(0);
            meter.set(Some(work));
        }
    });
}

/// The statement's step count so far, when a meter runs on this thread.
fn steps_before(statement: &Statement<'_>) -> Option<i32> {
    METER
        .with(|meter| meter.get().is_some())
        .then(|| statement.get_status(StatementStatus::VmStep))
}

/// `query_row`, `execute` and collected `query_map` through the connection's statement
/// cache: the same SQL text is parsed once per connection, not once per call. Storage
/// modules use these, not `Connection::query_row`/`execute`, on the writer and the readers
/// alike.
pub(crate) trait Cached {
    fn row<T, P, F>(&self, sql: &str, params: P, f: F) -> rusqlite::Result<T>
    where
        P: rusqlite::Params,
        F: FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>;
    fn run<P: rusqlite::Params>(&self, sql: &str, params: P) -> rusqlite::Result<usize>;
    /// Every row the statement returns, mapped by `f`.
    fn rows<T, P, F>(&self, sql: &str, params: P, f: F) -> rusqlite::Result<Vec<T>>
    where
        P: rusqlite::Params,
        F: FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>;
}

impl Cached for Connection {
    fn row<T, P, F>(&self, sql: &str, params: P, f: F) -> rusqlite::Result<T>
    where
        P: rusqlite::Params,
        F: FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    {
        let mut statement = self.prepare_cached(sql)?;
        let before = steps_before(&statement);
        let row = statement.query_row(params, f);
        count(&statement, before, u64::from(row.is_ok()));
        row
    }

    fn run<P: rusqlite::Params>(&self, sql: &str, params: P) -> rusqlite::Result<usize> {
        let mut statement = self.prepare_cached(sql)?;
        let before = steps_before(&statement);
        let changed = statement.execute(params);
        count(&statement, before, 0);
        changed
    }

    fn rows<T, P, F>(&self, sql: &str, params: P, f: F) -> rusqlite::Result<Vec<T>>
    where
        P: rusqlite::Params,
        F: FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    {
        let mut statement = self.prepare_cached(sql)?;
        let before = steps_before(&statement);
        let rows = statement
            .query_map(params, f)?
            .collect::<rusqlite::Result<Vec<T>>>();
        let returned = rows.as_ref().map_or(0, |rows| rows.len() as u64);
        count(&statement, before, returned);
        rows
    }
}
