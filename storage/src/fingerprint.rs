//! A fingerprint of everything the index holds: every table's row count and a BLAKE3 digest of
//! all its rows, plus the object counts under `blobs/` and `staging/`.
//!
//! It exists for tests that assert a refused request changed nothing. Row counts alone miss an
//! `UPDATE` (a bumped epoch, a moved cursor, a quarantine flag); hashing every column of every
//! row does not, and tables are discovered from the engine's catalogue, so a table added later is
//! covered without anyone remembering to list it here.
//!
//! This module only reads. It knows nothing about what the tables mean.

use crate::sql::Cached as _;
use std::collections::BTreeMap;

use crate::sql::{Connection, Engine, SqlError, ValueRef};

use crate::error::Error;

/// Every table's `(rows, hex BLAKE3 of all rows)`, by table name, and the backend's object
/// counts. Two fingerprints are equal exactly when no row and no object count changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fingerprint {
    pub tables: BTreeMap<String, (u64, String)>,
    /// Objects under `blobs/` in the backend.
    pub blob_objects: u64,
    /// Objects under `staging/` in the backend.
    pub staging_objects: u64,
    /// Hex BLAKE3 of every blob object's and upload session object's path and size, in path order: a blob replaced,
    /// removed or added under another name changes it even when the count does not.
    pub blob_listing: String,
}

impl Fingerprint {
    /// This fingerprint without the tables named in `tables`.
    pub fn without(&self, tables: &[&str]) -> Fingerprint {
        let mut kept = self.clone();
        kept.tables
            .retain(|name, _| !tables.contains(&name.as_str()));
        kept
    }
}

/// Hashes every row of every table (`sqlite_%` internals excluded). The object counts are
/// left at zero: they come from the blob backend, which the caller asks separately.
pub(crate) fn of_tables(conn: &Connection) -> Result<Fingerprint, Error> {
    let list = match conn.engine() {
        Engine::Sqlite => {
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' \
             ORDER BY name"
        }
        Engine::Postgres => {
            "SELECT table_name FROM information_schema.tables \
             WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY 1"
        }
    };
    let names = conn.rows(list, [], |row| row.get::<_, String>(0))?;
    let mut tables = BTreeMap::new();
    for name in names {
        tables.insert(name.clone(), of_table(conn, &name)?);
    }
    Ok(Fingerprint {
        tables,
        blob_objects: 0,
        staging_objects: 0,
        blob_listing: String::new(),
    })
}

/// `(rows, hex digest)` of one table, rows in a stable order: by rowid on SQLite, or by
/// every column for a WITHOUT ROWID table (which has no rowid to order by) and on
/// PostgreSQL (where a rowid table's first column is its `rowid`).
fn of_table(conn: &Connection, name: &str) -> Result<(u64, String), Error> {
    let quoted = format!("\"{}\"", name.replace('"', "\"\""));
    let (columns, by_rowid) = match conn.engine() {
        Engine::Sqlite => (
            "SELECT COUNT(*) FROM pragma_table_info(?1)",
            !conn.row(
                "SELECT wr FROM pragma_table_list WHERE schema = 'main' AND name = ?1",
                [name],
                |row| row.get::<_, bool>(0),
            )?,
        ),
        Engine::Postgres => (
            "SELECT COUNT(*) FROM information_schema.columns \
             WHERE table_schema = current_schema() AND table_name = ?1",
            false,
        ),
    };
    let n_columns: usize = conn.row(columns, [name], |row| row.get(0))?;
    let order = if by_rowid {
        "rowid".to_owned()
    } else {
        (1..=n_columns)
            .map(|column| column.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut hasher = blake3::Hasher::new();
    let mut n_rows = 0u64;
    conn.each(
        &format!("SELECT * FROM {quoted} ORDER BY {order}"),
        [],
        |row| -> Result<(), SqlError> {
            n_rows += 1;
            for column in 0..n_columns {
                hash_value(&mut hasher, row.value(column)?);
            }
            Ok(())
        },
    )?;
    Ok((n_rows, hasher.finalize().to_hex().to_string()))
}

/// Feeds one value with its type tag and, for variable-length values, its length, so that no
/// two different rows can feed the hasher the same bytes.
fn hash_value(hasher: &mut blake3::Hasher, value: ValueRef<'_>) {
    match value {
        ValueRef::Null => {
            hasher.update(&[0]);
        }
        ValueRef::Integer(integer) => {
            hasher.update(&[1]);
            hasher.update(&integer.to_le_bytes());
        }
        ValueRef::Real(real) => {
            hasher.update(&[2]);
            hasher.update(&real.to_bits().to_le_bytes());
        }
        ValueRef::Text(text) => hash_bytes(hasher, 3, text.as_bytes()),
        ValueRef::Blob(bytes) => hash_bytes(hasher, 4, bytes),
    }
}

fn hash_bytes(hasher: &mut blake3::Hasher, tag: u8, bytes: &[u8]) {
    hasher.update(&[tag]);
    hasher.update(&(bytes.len() as u64).to_le_bytes());
    hasher.update(bytes);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn database() -> Connection {
        let conn = Connection::open_in_memory().expect("in-memory database");
        conn.execute_batch(
            "CREATE TABLE plain (id INTEGER PRIMARY KEY, name TEXT, data BLOB);
             CREATE TABLE keyed (a TEXT, b INTEGER, PRIMARY KEY (a, b)) WITHOUT ROWID;
             INSERT INTO plain (name, data) VALUES ('one', x'01'), ('two', NULL);
             INSERT INTO keyed VALUES ('x', 2), ('x', 1);",
        )
        .expect("schema");
        conn
    }

    #[test]
    fn fingerprint_counts_every_table_and_is_stable() {
        let conn = database();
        let first = of_tables(&conn).expect("fingerprint");
        assert_eq!(
            first.tables.keys().collect::<Vec<_>>(),
            ["keyed", "plain"],
            "sqlite_% tables are left out"
        );
        assert_eq!(first.tables["plain"].0, 2);
        assert_eq!(first.tables["keyed"].0, 2);
        assert_eq!(of_tables(&conn).expect("fingerprint"), first);
    }

    #[test]
    fn fingerprint_sees_updates_inserts_and_deletes() {
        let conn = database();
        let before = of_tables(&conn).expect("fingerprint");
        for change in [
            "UPDATE plain SET name = 'uno' WHERE id = 1",
            "UPDATE plain SET data = x'' WHERE id = 2", // NULL and empty differ
            "INSERT INTO keyed VALUES ('y', 0)",
            "DELETE FROM keyed WHERE b = 1",
        ] {
            let conn = database();
            conn.execute_batch(change).expect("change");
            let after = of_tables(&conn).expect("fingerprint");
            let changed: Vec<&String> = after
                .tables
                .iter()
                .filter(|(name, rows)| before.tables.get(*name) != Some(*rows))
                .map(|(name, _)| name)
                .collect();
            assert_eq!(changed.len(), 1, "{change}");
        }
        let conn = database();
        conn.execute_batch("CREATE TABLE added (x)").expect("table");
        let after = of_tables(&conn).expect("fingerprint");
        assert_eq!(after.tables.len(), 3);
        assert_eq!(after.tables["added"].0, 0);
        assert_eq!(after.tables["plain"], before.tables["plain"]);
    }
}
