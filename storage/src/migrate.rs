//! `weft migrate` (issue #43): a single-node store (its SQLite index and its blob store) copied
//! into the scale-out engines (an empty PostgreSQL index and another blob store), checked on
//! the way and after. The source is only read.
//!
//! 1. Blobs: every blob stored as a file is streamed from the source into the destination's
//!    staging, which hashes it (BLAKE3 and SHA-256); only bytes whose digests are the row's
//!    are promoted, so a damaged source blob stops the migration and is named. Inline blobs
//!    travel with their rows.
//! 2. Rows: every table, in the order its foreign keys need (read from SQLite's catalogue),
//!    every column as stored: Event hashes, signatures, sequences and ids unchanged. SQLite's
//!    rowid goes into the PostgreSQL table's `rowid` column, and every identity column's
//!    sequence is moved past the rows copied. Each table's row count is compared.
//! 3. The destination's fsck: every blob re-hashed, every row, signature and Group chain
//!    re-checked. Any problem fails the migration.
//!
//! A destination that already holds a Group, an Agent, a blob or an Event is refused.

use std::collections::{BTreeMap, BTreeSet};

use futures::TryStreamExt as _;
use weft_api::{ArtifactId, Digest};

use crate::error::Error;
use crate::fsck::FsckReport;
use crate::sql::{Cached as _, Connection, SqlError, ToValue, ValueRef};
use crate::{Store, rows};

/// Rows copied per transaction.
const BATCH: usize = 500;

/// What a migration copied and what the destination's fsck found.
#[derive(Debug)]
pub struct MigrationReport {
    /// Rows per table, as copied (equal on both sides).
    pub tables: BTreeMap<String, u64>,
    /// Blobs copied as files, and their bytes.
    pub blob_files: u64,
    pub blob_bytes: u64,
    /// The destination's fsck after the copy (no problems, or the migration failed).
    pub fsck: FsckReport,
}

/// One stored value, owned, to cross from the source's reader to the destination's writer.
#[derive(Clone, Debug)]
enum Value {
    Null,
    Integer(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

impl From<ValueRef<'_>> for Value {
    fn from(value: ValueRef<'_>) -> Self {
        match value {
            ValueRef::Null => Self::Null,
            ValueRef::Integer(integer) => Self::Integer(integer),
            ValueRef::Real(real) => Self::Real(real),
            ValueRef::Text(text) => Self::Text(text.to_owned()),
            ValueRef::Blob(bytes) => Self::Blob(bytes.to_vec()),
        }
    }
}

impl ToValue for Value {
    fn to_value(&self) -> crate::sql::Result<ValueRef<'_>> {
        Ok(match self {
            Self::Null => ValueRef::Null,
            Self::Integer(integer) => ValueRef::Integer(*integer),
            Self::Real(real) => ValueRef::Real(*real),
            Self::Text(text) => ValueRef::Text(text),
            Self::Blob(bytes) => ValueRef::Blob(bytes),
        })
    }
}

fn refuse(why: impl Into<String>) -> Error {
    Error::Config(why.into())
}

fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// The source's tables, each after every table its foreign keys name.
fn tables_in_order(conn: &Connection) -> Result<Vec<String>, Error> {
    let names = conn.rows(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' \
         ORDER BY rowid",
        [],
        |row| row.get::<_, String>(0),
    )?;
    let mut needs: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for name in &names {
        let referenced = conn.rows(
            "SELECT DISTINCT \"table\" FROM pragma_foreign_key_list(?1)",
            [name.as_str()],
            |row| row.get::<_, String>(0),
        )?;
        needs.insert(
            name.clone(),
            referenced
                .into_iter()
                .filter(|other| other != name)
                .collect(),
        );
    }
    let mut ordered: Vec<String> = Vec::with_capacity(names.len());
    while ordered.len() < names.len() {
        let ready = names.iter().find(|name| {
            !ordered.contains(name)
                && needs[*name]
                    .iter()
                    .all(|needed| ordered.contains(needed) || !needs.contains_key(needed))
        });
        match ready {
            Some(name) => ordered.push(name.clone()),
            None => return Err(refuse("the source's foreign keys form a cycle")),
        }
    }
    Ok(ordered)
}

/// The destination table's columns, in order, and which are identity columns.
fn columns(conn: &Connection, table: &str) -> Result<Vec<(String, bool)>, Error> {
    Ok(conn.rows(
        "SELECT column_name, is_identity FROM information_schema.columns \
         WHERE table_schema = current_schema() AND table_name = ?1 ORDER BY ordinal_position",
        [table],
        |row| Ok((row.get::<_, String>(0)?, row.get::<_, String>(1)? == "YES")),
    )?)
}

impl Store {
    /// Copies this single-node store into `destination` (an empty store on PostgreSQL), checks
    /// every digest on the way, every table's row count, and then runs the destination's fsck.
    pub async fn migrate_into(&self, destination: &Store) -> Result<MigrationReport, Error> {
        let (source, target) = (&self.inner, &destination.inner);
        if source.db.is_shared() || !target.db.is_shared() {
            return Err(refuse(
                "weft migrate copies a SQLite store into a PostgreSQL one",
            ));
        }
        let empty = target
            .db
            .read(|conn| {
                Ok(rows::groups::count(conn)? == 0
                    && rows::agents::count(conn)? == 0
                    && rows::blobs::count(conn)? == 0
                    && rows::events::count(conn)? == 0)
            })
            .await?;
        if !empty {
            return Err(refuse("the destination index is not empty"));
        }
        // 1. Blob files, verified by the destination's hashing before they are placed.
        let (all, inline) = source
            .db
            .read(|conn| Ok((rows::blobs::all(conn)?, rows::blobs::all_inline(conn)?)))
            .await?;
        let inline: BTreeSet<ArtifactId> = inline.into_iter().collect();
        let (mut blob_files, mut blob_bytes) = (0, 0);
        for id in all.into_iter().filter(|id| !inline.contains(id)) {
            let Some((expected, _)) = source
                .db
                .read(move |conn| rows::blobs::row(conn, &Digest::Blake3(id)))
                .await?
            else {
                continue; // swept meanwhile (the source is offline: not expected)
            };
            let body = source
                .blobs
                .read(&id)
                .await?
                .map_err(|error| std::io::Error::other(error.to_string()));
            let staged = target.blobs.stage(body, u64::MAX, 0).await?;
            if staged.digests != expected {
                return Err(refuse(format!(
                    "blob {id}: the source's bytes hash to {} / {}, not their address; run weft fsck on the source",
                    staged.digests.blake3, staged.digests.sha256
                )));
            }
            target.blobs.promote(staged, false).await?;
            blob_files += 1;
            blob_bytes += expected.size;
        }
        // 2. Rows, table by table.
        let tables = source.db.read(tables_in_order).await?;
        let mut copied = BTreeMap::new();
        for table in tables {
            let name = table.clone();
            let columns = target.db.read(move |conn| columns(conn, &name)).await?;
            if columns.is_empty() {
                return Err(refuse(format!("the destination has no table {table}")));
            }
            let list = columns
                .iter()
                .map(|(column, _)| quoted(column))
                .collect::<Vec<_>>()
                .join(", ");
            let by_rowid = columns.iter().any(|(column, _)| column == "rowid");
            let order = if by_rowid {
                "rowid".to_owned()
            } else {
                (1..=columns.len())
                    .map(|n| n.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let select = format!(
                "SELECT {list} FROM {} ORDER BY {order} LIMIT {BATCH} OFFSET ?1",
                quoted(&table)
            );
            let placeholders = (1..=columns.len())
                .map(|n| format!("?{n}"))
                .collect::<Vec<_>>()
                .join(", ");
            let insert = format!(
                "INSERT INTO {} ({list}) VALUES ({placeholders})",
                quoted(&table)
            );
            let mut offset = 0u64;
            loop {
                let select = select.clone();
                let width = columns.len();
                let batch: Vec<Vec<Value>> = source
                    .db
                    .read(move |conn| {
                        Ok(conn.rows(&select, [offset], |row| {
                            (0..width)
                                .map(|column| row.value(column).map(Value::from))
                                .collect::<Result<Vec<_>, SqlError>>()
                        })?)
                    })
                    .await?;
                let n = batch.len() as u64;
                if n > 0 {
                    let insert = insert.clone();
                    target
                        .db
                        .write(move |txn| {
                            for row in &batch {
                                let bound: Vec<&dyn ToValue> =
                                    row.iter().map(|value| value as &dyn ToValue).collect();
                                txn.run(&insert, &bound[..])?;
                            }
                            Ok(())
                        })
                        .await?;
                }
                offset += n;
                if n < BATCH as u64 {
                    break;
                }
            }
            let identities: Vec<String> = columns
                .iter()
                .filter(|(_, identity)| *identity)
                .map(|(column, _)| column.clone())
                .collect();
            let (name, counted) = (table.clone(), quoted(&table));
            let on_target = target
                .db
                .write(move |txn| {
                    for column in &identities {
                        txn.value::<i64, _>(
                            &format!(
                                "SELECT setval(pg_get_serial_sequence(?1, ?2), \
                                 GREATEST((SELECT MAX({}) FROM {counted}), 1))",
                                quoted(column)
                            ),
                            [name.as_str(), column.as_str()],
                        )?;
                    }
                    Ok(txn
                        .value::<i64, _>(&format!("SELECT COUNT(*) FROM {counted}"), [])?
                        .unwrap_or(0))
                })
                .await?;
            if u64::try_from(on_target).unwrap_or(0) != offset {
                return Err(refuse(format!(
                    "{table}: {offset} rows read, {on_target} in the destination"
                )));
            }
            copied.insert(table, offset);
        }
        // 3. The destination, checked as fsck checks a store.
        let fsck = destination.fsck().await?;
        if !fsck.problems.is_empty() {
            return Err(refuse(format!(
                "the copy fails fsck:\n{}",
                fsck.problems.join("\n")
            )));
        }
        Ok(MigrationReport {
            tables: copied,
            blob_files,
            blob_bytes,
            fsck,
        })
    }
}
