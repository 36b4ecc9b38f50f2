//! The floor under the `rows/` files, the same on both index engines (no module import of
//! its own, so any module may use it without an import circle): [`Connection`] (SQLite or
//! PostgreSQL), [`Cached`] (the three calls every statement goes through), the values that
//! cross it (`value.rs`), PostgreSQL's side (`postgres.rs`, `dialect.rs`), and the meter that counts a
//! write's SQL work on SQLite (`meter.rs`).

mod ahead;
mod connection;
mod dialect;
mod lasting;
mod meter;
mod pipeline;
pub(crate) mod postgres;
mod value;

pub(crate) use ahead::{Ahead, Settle};
pub(crate) use connection::{Cached, Connection, Engine, Row};
pub use meter::Work;
#[cfg(test)]
pub(crate) use meter::metered;
pub(crate) use meter::{STATEMENT_CACHE, WriteMeter};
pub(crate) use value::{OptionalExtension, Params, Result, SqlError, ToValue, ValueRef};

/// The parameters of one statement, of mixed types: `params![a, b, c]`.
macro_rules! params {
    () => {
        &[] as &[&dyn $crate::sql::ToValue]
    };
    ($($param:expr),+ $(,)?) => {
        &[$(&$param as &dyn $crate::sql::ToValue),+] as &[&dyn $crate::sql::ToValue]
    };
}
pub(crate) use params;
