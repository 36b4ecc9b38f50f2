//! The statement cache every storage module queries through (no module import of its own,
//! so any module may use it without an import circle).

use rusqlite::Connection;

/// Prepared statements kept per connection (rusqlite's default is 16; a Command alone runs
/// more distinct statements than that, and parsing SQL was a fifth of the writer's time).
pub(crate) const STATEMENT_CACHE: usize = 256;

/// `query_row` and `execute` through the connection's statement cache: the same SQL text is
/// parsed once per connection, not once per call. Every storage module uses these two, never
/// `Connection::query_row`/`execute`, on the writer and the readers alike.
pub(crate) trait Cached {
    fn row<T, P, F>(&self, sql: &str, params: P, f: F) -> rusqlite::Result<T>
    where
        P: rusqlite::Params,
        F: FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>;
    fn run<P: rusqlite::Params>(&self, sql: &str, params: P) -> rusqlite::Result<usize>;
}

impl Cached for Connection {
    fn row<T, P, F>(&self, sql: &str, params: P, f: F) -> rusqlite::Result<T>
    where
        P: rusqlite::Params,
        F: FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
    {
        self.prepare_cached(sql)?.query_row(params, f)
    }

    fn run<P: rusqlite::Params>(&self, sql: &str, params: P) -> rusqlite::Result<usize> {
        self.prepare_cached(sql)?.execute(params)
    }
}
