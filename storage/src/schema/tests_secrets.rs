//! V47: no bearer secret stays at rest in a stored answer (PD-20). Answers stored in the
//! clear before answers were sealed (`src/http/sealed.rs`) are trimmed; sealed answers,
//! answers without a token and refusals stay as they were.

use rusqlite::Connection;

use super::tests::{postgres_at, sqlite_at};

/// (key, status, body) of the rows the tests store at V46.
const ROWS: [(&str, i64, &str); 4] = [
    // A capability token's answer, in the clear: trimmed.
    (
        "issued",
        201,
        r#"{"tokenId":"tok-1","token":"wcap_secret","scope":[]}"#,
    ),
    // A sealed answer (a NUL byte first): kept.
    ("sealed", 201, "\0\"token\":\"ciphertext"),
    // An answer without a secret: kept.
    ("roles", 200, r#"{"epoch":2}"#),
    // A refusal that quotes the word: kept.
    ("refused", 403, r#"{"detail":"\"token\":\"is not one"}"#),
];

/// The rows after the migration: (key, status, body).
fn expected() -> Vec<(String, i64, Vec<u8>)> {
    ROWS.iter()
        .map(|(key, status, body)| match *key {
            "issued" => ((*key).to_owned(), 0, Vec::new()),
            _ => ((*key).to_owned(), *status, body.as_bytes().to_vec()),
        })
        .collect()
}

#[test]
fn answers_stored_with_a_secret_in_the_clear_are_trimmed() {
    let conn: Connection = sqlite_at(46);
    for (key, status, body) in ROWS {
        conn.execute(
            "INSERT INTO idempotency (scope, key, request_hash, status, body, created_at)
             VALUES ('agent:w1', ?1, zeroblob(32), ?2, ?3, '2026-12-01T00:00:00.000000000Z')",
            rusqlite::params![key, status, body.as_bytes()],
        )
        .expect("an old answer");
    }
    super::migrate_sqlite(&conn).expect("migrated");
    let mut statement = conn
        .prepare("SELECT key, status, body FROM idempotency ORDER BY rowid")
        .expect("prepare");
    let rows: Vec<(String, i64, Vec<u8>)> = statement
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("rows");
    assert_eq!(rows, expected());
}

#[test]
fn answers_stored_with_a_secret_in_the_clear_are_trimmed_on_postgres() {
    let Some(conn) = postgres_at(46) else {
        return;
    };
    use crate::sql::Cached as _;
    for (key, status, body) in ROWS {
        conn.run(
            "INSERT INTO idempotency (scope, key, request_hash, status, body, created_at)
             VALUES ('agent:w1', ?1, ?2, ?3, ?4, '2026-12-01T00:00:00.000000000Z')",
            crate::sql::params![key, vec![0u8; 32], status, body.as_bytes().to_vec()],
        )
        .expect("an old answer");
    }
    super::postgres::migrate(&conn, super::LATEST).expect("migrated");
    let rows: Vec<(String, i64, Vec<u8>)> = conn
        .rows(
            "SELECT key, status, body FROM idempotency ORDER BY rowid",
            [],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
        )
        .expect("rows");
    assert_eq!(rows, expected());
}
