//! The schema on PostgreSQL: the tables SQLite has at the same version, created in one
//! transaction from `postgres.sql` (types translated: `BYTEA` for blobs, `BIGINT` for
//! integers, `TEXT COLLATE "C"` so text compares bytewise as on SQLite, and a `rowid`
//! identity column on every table SQLite gives an implicit one). The version is the row of
//! `weft_schema`; each later migration has its PostgreSQL spelling in [`MIGRATIONS`], run in
//! order in the same transaction.
//!
//! Several servers may start at once over one database: the migration holds a transaction
//! advisory lock, so one creates the schema and the others find it done.

use crate::error::Error;
use crate::sql::{Cached as _, Connection};

/// The schema at version 29, the version PostgreSQL support starts from.
const V29: &str = include_str!("postgres.sql");

/// The version `postgres.sql` creates.
const BASE: i64 = 29;

/// The migrations after [`BASE`], in PostgreSQL's spelling: (version it brings, DDL).
const MIGRATIONS: [(i64, &str); 22] = [
    (30, include_str!("postgres_v30.sql")),
    (31, include_str!("postgres_v31.sql")),
    (32, include_str!("postgres_v32.sql")),
    (33, include_str!("postgres_v33.sql")),
    (34, include_str!("postgres_v34.sql")),
    (35, include_str!("postgres_v35.sql")),
    (36, include_str!("postgres_v36.sql")),
    (37, include_str!("postgres_v37.sql")),
    (38, include_str!("postgres_v38.sql")),
    (39, include_str!("postgres_v39.sql")),
    (40, include_str!("postgres_v40.sql")),
    (41, include_str!("postgres_v41.sql")),
    (42, include_str!("postgres_v42.sql")),
    (43, include_str!("postgres_v43.sql")),
    (44, include_str!("postgres_v44.sql")),
    (45, include_str!("postgres_v45.sql")),
    (46, include_str!("postgres_v46.sql")),
    (47, include_str!("postgres_v47.sql")),
    (48, include_str!("postgres_v48.sql")),
    (49, include_str!("postgres_v49.sql")),
    (50, include_str!("postgres_v50.sql")),
    (51, include_str!("postgres_v51.sql")),
];

/// An arbitrary, fixed key for `pg_advisory_xact_lock` (the bytes of "weftschm").
const LOCK: i64 = 0x7765_6674_7363_686d;

pub(super) fn migrate(conn: &Connection, latest: i64) -> Result<(), Error> {
    conn.begin()?;
    let outcome = (|| -> Result<(), Error> {
        conn.row(
            "SELECT 1 FROM pg_advisory_xact_lock(?1)",
            [LOCK],
            |_| Ok(()),
        )?;
        let exists: bool = conn.row(
            "SELECT EXISTS (SELECT 1 FROM information_schema.tables
                            WHERE table_schema = current_schema() AND table_name = 'weft_schema')",
            [],
            |row| row.get(0),
        )?;
        let version: i64 = if exists {
            conn.row("SELECT version FROM weft_schema", [], |row| row.get(0))?
        } else {
            0
        };
        if version > latest {
            return Err(Error::backend(std::io::Error::other(format!(
                "database schema version {version} is newer than this weft understands ({latest})"
            ))));
        }
        if version != 0 && version < BASE {
            return Err(Error::backend(std::io::Error::other(format!(
                "database schema version {version} has no PostgreSQL migration to {latest}"
            ))));
        }
        let mut version = version;
        if version == 0 {
            conn.execute_batch(V29)?;
            conn.execute_batch("CREATE TABLE weft_schema (version BIGINT NOT NULL)")?;
            conn.run("INSERT INTO weft_schema (version) VALUES (?1)", [BASE])?;
            version = BASE;
        }
        while version < latest {
            let next = version + 1;
            let Some((_, ddl)) = MIGRATIONS.iter().find(|(to, _)| *to == next) else {
                return Err(Error::backend(std::io::Error::other(format!(
                    "database schema version {version} has no PostgreSQL migration to {next}"
                ))));
            };
            conn.execute_batch(ddl)?;
            conn.run("UPDATE weft_schema SET version = ?1", [next])?;
            version = next;
        }
        Ok(())
    })();
    match outcome {
        Ok(()) => Ok(conn.execute_batch("COMMIT")?),
        Err(error) => {
            let _ = conn.execute_batch("ROLLBACK");
            Err(error)
        }
    }
}
