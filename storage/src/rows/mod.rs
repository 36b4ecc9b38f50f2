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

pub(crate) mod agent_keys;
pub(crate) mod agent_upload_totals;
pub(crate) mod agents;
pub(crate) mod blob_disposals;
pub(crate) mod blob_dispositions;
pub(crate) mod blob_uploaders;
pub(crate) mod blob_verifications;
pub(crate) mod blobs;
pub(crate) mod capability_tokens;
pub(crate) mod commands;
pub(crate) mod context_package_artifacts;
pub(crate) mod context_packages;
pub(crate) mod cursors;
pub(crate) mod derivations;
pub(crate) mod events;
pub(crate) mod evidence;
pub(crate) mod evidence_artifacts;
pub(crate) mod forwarded_artifacts;
pub(crate) mod groups;
pub(crate) mod hold_groups;
pub(crate) mod holds;
pub(crate) mod idempotency;
pub(crate) mod inert_publications;
pub(crate) mod inline_bytes;
pub(crate) mod lease_renewals;
pub(crate) mod leases;
pub(crate) mod manifests;
pub(crate) mod memberships;
pub(crate) mod missions;
pub(crate) mod offers;
pub(crate) mod presence;
pub(crate) mod proposals;
pub(crate) mod reactions;
pub(crate) mod retention_policies;
pub(crate) mod reusable_artifacts;
pub(crate) mod schemas;
pub(crate) mod session_epochs;
pub(crate) mod session_nonces;
pub(crate) mod sessions;
pub(crate) mod snapshots;
pub(crate) mod tlog_cosignatures;
pub(crate) mod tlog_hashes;
pub(crate) mod tlog_served;
pub(crate) mod upload_sessions;
pub(crate) mod usage_epoch;
pub(crate) mod work_contract;
pub(crate) mod work_deps;
pub(crate) mod work_history;
pub(crate) mod work_items;
pub(crate) mod work_progress;
pub(crate) mod work_questions;

#[cfg(test)]
mod leases_tests;
#[cfg(test)]
mod visible_tests;

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde::de::DeserializeOwned;
use weft_api::{ArtifactId, Id};

use crate::error::Error;

/// Who reads (`access::Reader::seer`), as the visibility conditions of rows take it: the
/// operator, who sees every row, or an Agent of Group `group_id`, scoped to the Missions of `missions_json` (a JSON array)
/// when it is `Some` (CTX-5).
pub(crate) enum Seer<'a> {
    Operator,
    Agent {
        group_id: &'a str,
        missions_json: Option<String>,
    },
}

impl Seer<'_> {
    /// The reader's Group and Missions as the lookups by id bind them (`NULL`: the operator,
    /// or the whole Group).
    pub(crate) fn filter(&self) -> (Option<&str>, Option<&str>) {
        match self {
            Self::Operator => (None, None),
            Self::Agent {
                group_id,
                missions_json,
            } => (Some(group_id), missions_json.as_deref()),
        }
    }
}

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

/// A 32-byte digest as the index stores it; like [`instant`], any other length is a corrupt
/// row.
pub(crate) fn bytes32(bytes: Vec<u8>) -> Result<[u8; 32], Error> {
    bytes.try_into().map_err(|bytes: Vec<u8>| {
        Error::backend(std::io::Error::other(format!(
            "expected a 32-byte value in the index, found {} bytes",
            bytes.len()
        )))
    })
}

/// An artifact id (a BLAKE3 digest) as the index stores it.
pub(crate) fn artifact_id(bytes: Vec<u8>) -> Result<ArtifactId, Error> {
    bytes32(bytes).map(ArtifactId)
}

/// An enum's wire name (its serde string), as a row stores it.
pub(crate) fn name<T: Serialize>(value: &T) -> Result<String, Error> {
    match serde_json::to_value(value).map_err(Error::backend)? {
        serde_json::Value::String(text) => Ok(text),
        other => Err(Error::backend(std::io::Error::other(format!(
            "not a unit enum: {other}"
        )))),
    }
}

/// An enum from its wire name.
pub(crate) fn parse_name<T: DeserializeOwned>(text: &str) -> Result<T, Error> {
    serde_json::from_value(serde_json::Value::String(text.to_owned())).map_err(Error::backend)
}

/// A JSON column's text.
pub(crate) fn to_json<T: Serialize>(value: &T) -> Result<String, Error> {
    serde_json::to_string(value).map_err(Error::backend)
}

/// A JSON column's value.
pub(crate) fn from_json<T: DeserializeOwned>(text: &str) -> Result<T, Error> {
    serde_json::from_str(text).map_err(Error::backend)
}

/// Pages of `table` and of its indexes this transaction has fetched so far (PostgreSQL): what
/// a test compares to show that a lookup costs what it finds, not the table's history.
#[cfg(test)]
pub(crate) fn pages_fetched(
    tx: &crate::sql::Connection,
    table: &str,
) -> Result<i64, crate::error::Error> {
    use crate::sql::Cached as _;
    Ok(tx
        .value(
            "SELECT sum(pg_stat_get_xact_blocks_fetched(oid))::BIGINT FROM pg_class
             WHERE oid = ?1::text::regclass OR oid IN
                 (SELECT indexrelid FROM pg_index WHERE indrelid = ?1::text::regclass)",
            [table],
        )?
        .unwrap_or(0))
}
