//! The meter that counts the work a read or a write does in SQL (SQLite only).
//!
//! The meter is for tests that compare work rather than wall time: an absent artifact and
//! another Group's must cost the same lookup (issue #40), a Command should load each row
//! once (issue #41). [`metered`] runs a closure on the calling thread and returns what the
//! statements it ran on a connection with [`trace`] on did: statements started (trigger
//! programs not counted apart), rows they returned, and SQLite's own count of
//! virtual-machine steps (`SQLITE_STMTSTATUS_VM_STEP`, taken between a statement's start
//! and its end). SQLite reports these through its trace hook (rusqlite's `trace` feature),
//! which is installed only while a test meters; the writer installs it for
//! `Db::start_metering` and removes it after.

use std::cell::RefCell;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use rusqlite::StatementStatus;
use rusqlite::trace::{TraceEvent, TraceEventCodes};

/// Prepared statements kept per connection (rusqlite's default is 16; a Command alone runs
/// more distinct statements than that, and parsing SQL was a fifth of the writer's time).
pub(crate) const STATEMENT_CACHE: usize = 256;

/// The SQL work counted by [`metered`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Work {
    /// Statements run (each `SAVEPOINT`, query and change counts one).
    pub statements: u64,
    /// Round trips to the server they took (PostgreSQL only: changes sent ahead travel with
    /// the next request, `pipeline.rs`; SQLite has none).
    pub round_trips: u64,
    /// Rows they returned.
    pub rows: u64,
    /// SQLite virtual-machine steps they took (seeks, row visits, comparisons).
    pub vm_steps: u64,
    /// Queries run a second time in one metered job (one write job is one transaction) with
    /// the same SQL and the same parameters, as SQLite expands them: a row loaded twice.
    pub repeated_loads: Vec<String>,
}

thread_local! {
    static METER: RefCell<Option<Work>> = const { RefCell::new(None) };
    /// The queries (expanded with their parameters) the running meter has seen.
    static LOADED: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
    /// Statements started and not yet finished, with their step counts at the start.
    static RUNNING: RefCell<Vec<(String, i32)>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` and returns the work the statements it ran on this thread did, on connections
/// with [`trace`] on. Meters do not nest: an inner one takes over and the outer sees
/// nothing of it.
pub(crate) fn metered<R>(f: impl FnOnce() -> R) -> (R, Work) {
    let outer = METER.replace(Some(Work::default()));
    let outer_loaded = LOADED.take();
    let result = f();
    let work = METER.replace(outer).unwrap_or_default();
    LOADED.set(outer_loaded);
    RUNNING.with(|running| running.borrow_mut().clear());
    (result, work)
}

/// The SQL work of every write job run while armed (`metered` around each job on the writer
/// thread, SQLite's trace hook on): what tests count to show how many statements a Command
/// or a publication runs (issue #41). Disarmed it costs the writer one relaxed load per job
/// and one per batch.
#[derive(Debug, Default)]
pub(crate) struct WriteMeter {
    armed: AtomicBool,
    work: Mutex<Work>,
}

impl WriteMeter {
    pub(crate) fn armed(&self) -> bool {
        self.armed.load(Ordering::Relaxed)
    }

    /// Starts counting from zero.
    pub(crate) fn start(&self) {
        *self.work.lock().unwrap_or_else(|p| p.into_inner()) = Work::default();
        self.armed.store(true, Ordering::Relaxed);
    }

    /// Stops counting; the work counted since [`WriteMeter::start`].
    pub(crate) fn stop(&self) -> Work {
        self.armed.store(false, Ordering::Relaxed);
        self.work.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Runs one write job, counted when armed.
    pub(crate) fn run<R>(&self, job: impl FnOnce() -> R) -> R {
        if !self.armed() {
            return job();
        }
        let (ran, work) = metered(job);
        let mut total = self.work.lock().unwrap_or_else(|p| p.into_inner());
        total.statements += work.statements;
        total.round_trips += work.round_trips;
        total.rows += work.rows;
        total.vm_steps += work.vm_steps;
        total.repeated_loads.extend(work.repeated_loads);
        ran
    }
}

/// Turns SQLite's reports of `conn`'s statements to [`metered`] on or off.
pub(crate) fn trace(conn: &rusqlite::Connection, on: bool) {
    let events = TraceEventCodes::SQLITE_TRACE_STMT
        | TraceEventCodes::SQLITE_TRACE_PROFILE
        | TraceEventCodes::SQLITE_TRACE_ROW;
    conn.trace_v2(events, on.then_some(count as fn(TraceEvent<'_>)));
}

/// Adds one of SQLite's reports to the running meter, if any.
fn count(event: TraceEvent<'_>) {
    let Some(mut work) = METER.take() else { return };
    match event {
        // A trigger's program reports itself as `-- TRIGGER …`: part of its statement.
        TraceEvent::Stmt(statement, sql) if !sql.starts_with("--") => {
            work.statements += 1;
            let steps = statement.get_status(StatementStatus::VmStep);
            if is_load(sql) {
                let expanded = statement.expanded_sql().unwrap_or_else(|| sql.to_owned());
                LOADED.with(|loaded| {
                    let mut loaded = loaded.borrow_mut();
                    if loaded.contains(&expanded) {
                        work.repeated_loads.push(expanded);
                    } else {
                        loaded.push(expanded);
                    }
                });
            }
            RUNNING.with(|running| running.borrow_mut().push((sql.to_owned(), steps)));
        }
        TraceEvent::Row(_) => work.rows += 1,
        TraceEvent::Profile(statement, _) => {
            let sql = statement.sql();
            let started = RUNNING.with(|running| {
                let mut running = running.borrow_mut();
                let at = running.iter().rposition(|(text, _)| *text == sql)?;
                Some(running.remove(at).1)
            });
            if let Some(started) = started {
                let steps = statement.get_status(StatementStatus::VmStep) - started;
                work.vm_steps += u64::try_from(steps).unwrap_or(0);
            }
        }
        _ => {}
    }
    METER.set(Some(work));
}

/// Counts one statement run on PostgreSQL (which has no trace hook) to the running meter, if
/// any: the statement, the rows it returned, and a load run twice with the same parameters.
/// Virtual-machine steps are SQLite's own and stay uncounted.
pub(crate) fn count_postgres(sql: &str, bound: &[super::ValueRef<'_>], rows: usize) {
    let Some(mut work) = METER.take() else { return };
    work.statements += 1;
    work.rows += rows as u64;
    if is_load(sql) {
        let expanded = format!("{sql} {bound:?}");
        LOADED.with(|loaded| {
            let mut loaded = loaded.borrow_mut();
            if loaded.contains(&expanded) {
                work.repeated_loads.push(expanded);
            } else {
                loaded.push(expanded);
            }
        });
    }
    METER.set(Some(work));
}

/// Counts the rows a read sent ahead returned, when its answer is read (`pipeline.rs`: on
/// the thread that sent it).
pub(crate) fn count_rows(rows: usize) {
    let Some(mut work) = METER.take() else { return };
    work.rows += rows as u64;
    METER.set(Some(work));
}

/// Counts one round trip to PostgreSQL to the running meter, if any.
pub(crate) fn count_round_trip() {
    let Some(mut work) = METER.take() else { return };
    work.round_trips += 1;
    METER.set(Some(work));
}

/// Whether `sql` only reads (a query, not a change or a savepoint).
fn is_load(sql: &str) -> bool {
    let head = sql.trim_start();
    head.get(..6)
        .is_some_and(|word| word.eq_ignore_ascii_case("SELECT"))
        || head
            .get(..4)
            .is_some_and(|word| word.eq_ignore_ascii_case("WITH"))
}
