//! The floor of typed rows under storage's features (issue #41): one file per table, and that
//! file is the only place whose SQL names its table. A feature loads, inserts and updates a
//! table's rows through its file, on whatever connection it holds (the writer's transaction
//! or a reader), and gets typed rows back: ids as `weft_api::Id`, instants as
//! `DateTime<Utc>` compared as time (never as text), closed sets of words (lease kinds, why a
//! lease ended) as enums. A rule that belongs to a row lives on it (`leases::Lease::admits`).
//!
//! A query that joins another table lives in the file of the table it is about (the lease a
//! token names, with its WorkItem's owner, is in `leases.rs`).
//!
//! This floor imports no feature module (only `sql`, `clock` and `error`), so every feature
//! may import it without an import circle; another index engine would implement this floor,
//! not the features above it.

pub(crate) mod leases;

use chrono::{DateTime, Utc};
use weft_api::Id;

use crate::error::Error;

/// An instant as the index stores it (`clock::format_instant`), as time. A text that is not
/// one is a corrupt row, not bad input: it was written by this engine.
pub(crate) fn instant(text: &str) -> Result<DateTime<Utc>, Error> {
    DateTime::parse_from_rfc3339(text)
        .map(|at| at.to_utc())
        .map_err(Error::backend)
}

/// An id as the index stores it; like [`instant`], a stored id that does not parse is a
/// corrupt row.
pub(crate) fn id(what: &str, text: &str) -> Result<Id, Error> {
    Id::parse(what, text).map_err(Error::backend)
}
