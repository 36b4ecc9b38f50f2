//! [`Connection`]: one connection to the index, on SQLite or on PostgreSQL, and [`Cached`],
//! the three calls every `rows/` file queries through (one row, a change, every row), each
//! through the connection's statement cache: the same SQL text is parsed (and on PostgreSQL
//! translated and prepared) once per connection, not once per call.
//!
//! Statements are written once, in the SQL both engines take, with SQLite's `?N`
//! placeholders; `postgres.rs` translates the few spellings PostgreSQL does not share.

use super::ahead::{Ahead, Settle};
use super::lasting::Lasting;
use super::postgres::{Column, Pg};
use super::value::{FromValue, Params, Result, SqlError, ValueRef};

/// Which engine a connection runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Engine {
    Sqlite,
    Postgres,
}

/// One connection to the index. A SQLite connection carries what it learnt beside it
/// (`lasting.rs`); a PostgreSQL one inside its [`Pg`].
pub(crate) enum Connection {
    Sqlite(rusqlite::Connection, Lasting),
    Postgres(Box<Pg>),
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Connection({:?})", self.engine())
    }
}

impl Connection {
    pub(crate) fn engine(&self) -> Engine {
        match self {
            Self::Sqlite(..) => Engine::Sqlite,
            Self::Postgres(_) => Engine::Postgres,
        }
    }

    /// The SQLite connection, for what only SQLite has (a query plan, in tests).
    #[cfg(test)]
    pub(crate) fn sqlite(&self) -> Option<&rusqlite::Connection> {
        match self {
            Self::Sqlite(conn, _) => Some(conn),
            Self::Postgres(_) => None,
        }
    }

    /// Turns SQLite's reports of this connection's statements to the meter on or off
    /// (`meter.rs`; PostgreSQL's statements are counted as they run).
    pub(crate) fn trace(&self, on: bool) {
        if let Self::Sqlite(conn, _) = self {
            super::meter::trace(conn, on);
        }
    }

    /// Runs statements without parameters (transaction control, savepoints), as written.
    pub(crate) fn execute_batch(&self, sql: &str) -> Result<()> {
        match self {
            Self::Sqlite(conn, _) => Ok(conn.execute_batch(sql)?),
            Self::Postgres(pg) => pg.batch(sql),
        }
    }

    /// One transaction-control statement (`SAVEPOINT job`, `RELEASE job`, `COMMIT`…): on
    /// SQLite through the statement cache, so the writer does not parse it again for every
    /// job (`execute_batch` does: 8 % of the writer thread in a renewal profile, issue #44).
    pub(crate) fn control(&self, sql: &str) -> Result<()> {
        match self {
            Self::Sqlite(conn, _) => {
                conn.prepare_cached(sql)?.execute([])?;
                Ok(())
            }
            Self::Postgres(pg) => pg.batch(sql),
        }
    }

    /// A change whose count nobody reads. On PostgreSQL it is sent now and its answer read
    /// with the next statement's (`pipeline.rs`): a job's changes cost no round trip of their
    /// own, and a failed one fails the next statement, or the job when the writer settles it
    /// ([`Connection::settle`]). Only for changes whose error is simply the job's: one a
    /// caller catches to do something else must run with `run`. On SQLite it runs here.
    pub(crate) fn run_later<P: Params>(&self, sql: &str, params: P) -> Result<()> {
        match self {
            Self::Sqlite(..) => self.run(sql, params).map(|_| ()),
            Self::Postgres(pg) => pg.execute_later(sql, &params.bind()?),
        }
    }

    /// Every row a read returns, mapped by `f`, sent ahead of its use (`ahead.rs`): on
    /// PostgreSQL its answer is read with the next request's, so reads sent together cost
    /// one round trip; on SQLite it runs here.
    pub(crate) fn rows_ahead<T, P, F>(
        &self,
        sql: &str,
        params: P,
        mut f: F,
    ) -> Result<Ahead<Vec<T>>>
    where
        T: 'static,
        P: Params,
        F: FnMut(&Row<'_>) -> Result<T> + 'static,
    {
        match self {
            Self::Sqlite(..) => Ok(Ahead::ready(self.rows(sql, params, f))),
            Self::Postgres(pg) => {
                let slot = pg.query_ahead(sql, &params.bind()?)?;
                Ok(Ahead::sent(slot, move |rows| {
                    rows.iter().map(|row| f(&Row::Postgres(row))).collect()
                }))
            }
        }
    }

    /// A SQLite connection, with nothing learnt yet.
    pub(crate) fn from_sqlite(conn: rusqlite::Connection) -> Self {
        Self::Sqlite(conn, Lasting::default())
    }

    /// A fact this connection learnt from what it read that stays true once learnt
    /// (`lasting.rs`): [`Connection::learn`].
    pub(crate) fn known(&self, what: &'static str, key: &str) -> Option<String> {
        self.lasting().known(what, key)
    }

    /// Remembers that `(what, key)` is `value`, for this connection's life: only for a fact
    /// that stays true once true. A reader of a fact that may not hold in another database (a
    /// WorkItem's Mission) still checks it against the row it names (several stores may share
    /// a process, and a database may be replaced under a connection).
    pub(crate) fn learn(&self, what: &'static str, key: &str, value: &str) {
        self.lasting().learn(what, key, value);
    }

    /// Forgets every fact learnt (the writer, after a transaction that did not commit: what
    /// it read may never have been).
    pub(crate) fn forget_lasting(&self) {
        self.lasting().forget_all();
    }

    fn lasting(&self) -> &Lasting {
        match self {
            Self::Sqlite(_, lasting) => lasting,
            Self::Postgres(pg) => &pg.lasting,
        }
    }

    /// A transaction-control statement whose answer is read later, like [`Connection::run_later`]
    /// (the writer's `SAVEPOINT job` and `RELEASE job`).
    pub(crate) fn control_later(&self, sql: &str) -> Result<()> {
        match self {
            Self::Sqlite(..) => self.control(sql),
            Self::Postgres(pg) => pg.batch_later(sql),
        }
    }

    /// Whether a control statement sent ahead ([`Connection::control_later`]) failed since the
    /// last call (its error may have been read by a later statement). Never on SQLite.
    pub(crate) fn take_control_failure(&self) -> bool {
        match self {
            Self::Sqlite(..) => false,
            Self::Postgres(pg) => pg.take_control_failure(),
        }
    }

    /// Reads the answers of every change sent ahead: the first failed one's error. Nothing
    /// on SQLite, or when nothing was sent.
    pub(crate) fn settle(&self) -> Result<()> {
        match self {
            Self::Sqlite(..) => Ok(()),
            Self::Postgres(pg) => pg.settle(),
        }
    }

    /// Begins the writer's transaction: on SQLite `IMMEDIATE` (the write lock now, not at the
    /// first change); on PostgreSQL a plain one, whose per-Group serialisation is the row lock
    /// `rows::events` takes on the Group's head.
    pub(crate) fn begin(&self) -> Result<()> {
        match self {
            Self::Sqlite(..) => self.control("BEGIN IMMEDIATE"),
            Self::Postgres(pg) => pg.batch("BEGIN"),
        }
    }

    /// A private in-memory SQLite database (unit tests of the floor).
    #[cfg(test)]
    pub(crate) fn open_in_memory() -> Result<Self> {
        Ok(Self::from_sqlite(rusqlite::Connection::open_in_memory()?))
    }

    /// Whether no transaction is open (after a failed commit, to know whether to roll back).
    pub(crate) fn is_autocommit(&self) -> bool {
        match self {
            Self::Sqlite(conn, _) => conn.is_autocommit(),
            Self::Postgres(pg) => !pg.in_transaction(),
        }
    }
}

impl Settle for Connection {
    fn settle(&self) -> Result<()> {
        Connection::settle(self)
    }
}

/// A SQLite value as the floor sees it.
pub(crate) fn from_sqlite(value: rusqlite::types::ValueRef<'_>) -> ValueRef<'_> {
    use rusqlite::types::ValueRef as V;
    match value {
        V::Null => ValueRef::Null,
        V::Integer(n) => ValueRef::Integer(n),
        V::Real(x) => ValueRef::Real(x),
        V::Text(bytes) => std::str::from_utf8(bytes).map_or(ValueRef::Blob(bytes), ValueRef::Text),
        V::Blob(bytes) => ValueRef::Blob(bytes),
    }
}

/// The floor's value as SQLite binds it.
fn to_sqlite(value: ValueRef<'_>) -> rusqlite::types::ToSqlOutput<'_> {
    use rusqlite::types::{ToSqlOutput, ValueRef as V};
    ToSqlOutput::Borrowed(match value {
        ValueRef::Null => V::Null,
        ValueRef::Integer(n) => V::Integer(n),
        ValueRef::Real(x) => V::Real(x),
        ValueRef::Text(text) => V::Text(text.as_bytes()),
        ValueRef::Blob(bytes) => V::Blob(bytes),
    })
}

/// `bound` as SQLite's parameters.
fn sqlite_params<'a>(
    bound: &'a [ValueRef<'a>],
) -> rusqlite::ParamsFromIter<impl Iterator<Item = rusqlite::types::ToSqlOutput<'a>>> {
    rusqlite::params_from_iter(bound.iter().map(|value| to_sqlite(*value)))
}

/// `query_row`, `execute` and collected `query_map`, on either engine, through the
/// connection's statement cache. Storage modules use these and nothing else.
pub(crate) trait Cached {
    /// The first row, mapped by `f`; [`SqlError::NoRows`] when there is none.
    fn row<T, P, F>(&self, sql: &str, params: P, f: F) -> Result<T>
    where
        P: Params,
        F: FnOnce(&Row<'_>) -> Result<T>;
    /// Runs a change; how many rows it changed.
    fn run<P: Params>(&self, sql: &str, params: P) -> Result<usize>;
    /// Every row the statement returns, mapped by `f`.
    fn rows<T, P, F>(&self, sql: &str, params: P, f: F) -> Result<Vec<T>>
    where
        P: Params,
        F: FnMut(&Row<'_>) -> Result<T>;
    /// Runs `f` on each row as it comes (SQLite streams them; PostgreSQL's answer is read
    /// whole first), stopping at `f`'s first error.
    fn each<P, E, F>(&self, sql: &str, params: P, f: F) -> std::result::Result<(), E>
    where
        P: Params,
        E: From<SqlError>,
        F: FnMut(&Row<'_>) -> std::result::Result<(), E>;
    /// The first column of the first row as a `T`, or `None` without a row.
    fn value<T: FromValue, P: Params>(&self, sql: &str, params: P) -> Result<Option<T>> {
        use super::value::OptionalExtension as _;
        self.row(sql, params, |row| row.get(0)).optional()
    }
}

impl Cached for Connection {
    fn row<T, P, F>(&self, sql: &str, params: P, f: F) -> Result<T>
    where
        P: Params,
        F: FnOnce(&Row<'_>) -> Result<T>,
    {
        let bound = params.bind()?;
        match self {
            Self::Sqlite(conn, _) => {
                let mut statement = conn.prepare_cached(sql)?;
                let mut rows = statement.query(sqlite_params(&bound))?;
                match rows.next()? {
                    Some(row) => f(&Row::Sqlite(row)),
                    None => Err(SqlError::NoRows),
                }
            }
            Self::Postgres(pg) => {
                let rows = pg.query(sql, &bound)?;
                match rows.first() {
                    Some(row) => f(&Row::Postgres(row)),
                    None => Err(SqlError::NoRows),
                }
            }
        }
    }

    fn run<P: Params>(&self, sql: &str, params: P) -> Result<usize> {
        let bound = params.bind()?;
        match self {
            Self::Sqlite(conn, _) => {
                Ok(conn.prepare_cached(sql)?.execute(sqlite_params(&bound))?)
            }
            Self::Postgres(pg) => {
                Ok(usize::try_from(pg.execute(sql, &bound)?).unwrap_or(usize::MAX))
            }
        }
    }

    fn rows<T, P, F>(&self, sql: &str, params: P, mut f: F) -> Result<Vec<T>>
    where
        P: Params,
        F: FnMut(&Row<'_>) -> Result<T>,
    {
        let mut out = Vec::new();
        self.each(sql, params, |row| -> Result<()> {
            out.push(f(row)?);
            Ok(())
        })?;
        Ok(out)
    }

    fn each<P, E, F>(&self, sql: &str, params: P, mut f: F) -> std::result::Result<(), E>
    where
        P: Params,
        E: From<SqlError>,
        F: FnMut(&Row<'_>) -> std::result::Result<(), E>,
    {
        let bound = params.bind()?;
        match self {
            Self::Sqlite(conn, _) => {
                let mut statement = conn.prepare_cached(sql).map_err(SqlError::from)?;
                let mut rows = statement
                    .query(sqlite_params(&bound))
                    .map_err(SqlError::from)?;
                while let Some(row) = rows.next().map_err(SqlError::from)? {
                    f(&Row::Sqlite(row))?;
                }
                Ok(())
            }
            Self::Postgres(pg) => {
                for row in &pg.query(sql, &bound)? {
                    f(&Row::Postgres(row))?;
                }
                Ok(())
            }
        }
    }
}

/// A column of a [`Row`]: its position (from 0) or its name.
pub(crate) trait ColumnIndex: Copy {
    fn position(self, row: &Row<'_>) -> Option<usize>;
}

impl ColumnIndex for usize {
    fn position(self, _: &Row<'_>) -> Option<usize> {
        Some(self)
    }
}

impl ColumnIndex for &str {
    fn position(self, row: &Row<'_>) -> Option<usize> {
        match row {
            Row::Sqlite(row) => row.as_ref().column_index(self).ok(),
            Row::Postgres(row) => row
                .columns()
                .iter()
                .position(|column| column.name().eq_ignore_ascii_case(self)),
        }
    }
}

/// One row of an answer, on either engine.
pub(crate) enum Row<'a> {
    Sqlite(&'a rusqlite::Row<'a>),
    Postgres(&'a postgres::Row),
}

impl std::fmt::Debug for Row<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Row")
    }
}

impl<'a> Row<'a> {
    /// Column `index` as it is stored, whatever its kind.
    pub(crate) fn value(&self, index: usize) -> Result<ValueRef<'_>> {
        Ok(match self {
            Self::Sqlite(row) => from_sqlite(row.get_ref(index)?),
            Self::Postgres(row) => row.try_get::<_, Column<'_>>(index)?.0,
        })
    }

    /// Column `index` as borrowed text (`None` for NULL), without a copy.
    pub(crate) fn text(&self, index: usize) -> Result<Option<&str>> {
        match self.value(index)? {
            ValueRef::Null => Ok(None),
            ValueRef::Text(text) => Ok(Some(text)),
            other => Err(SqlError::Conversion {
                column: index,
                why: format!("expected text, found {}", super::value::kind(other)),
            }),
        }
    }

    /// Column `index` as a `T`. The first type parameter is the index's (as rusqlite's
    /// `get::<_, T>`), so callers name only `T`.
    pub(crate) fn get<I: ColumnIndex, T: FromValue>(&self, index: I) -> Result<T> {
        let column = index.position(self).ok_or_else(|| SqlError::Conversion {
            column: usize::MAX,
            why: "no such column".into(),
        })?;
        let converted = match self {
            Self::Sqlite(row) => {
                let value = row.get_ref(column)?;
                T::from_value(from_sqlite(value))
            }
            Self::Postgres(row) => {
                let value: Column<'_> = row.try_get(column)?;
                T::from_value(value.0)
            }
        };
        converted.map_err(|why| SqlError::Conversion { column, why })
    }
}
