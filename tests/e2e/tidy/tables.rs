//! One owner per table (issue #41): no SQL outside `storage/src/rows/<table>.rs` (or the
//! singular, `rows/lease.rs` for `leases`) names `<table>`, in `storage/src` and `src`. The tables are those `storage/src/schema.rs`
//! creates; `schema.rs` (the migrations), its backfills and its tests may name them all. A string literal is SQL when it
//! holds an SQL keyword in capitals (`SELECT`, `FROM`, `INTO`, …); in a file that builds SQL
//! with a `{…}` placeholder, a literal that is just a table's name counts too (it is spliced
//! in). Test code counts like any other: tests seed rows through the `rows/` functions and
//! tamper with them behind the server's back through `bench_support::tamper`.
//!
//! What `KNOWN_TABLE_USERS` still lists are joins made inside `rows/` files (a row file's
//! query that reads another table); a ratchet: a file or table not listed fails, and so does
//! a listed one that no longer names it.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

use super::source::{self, Token};

/// The files whose SQL names tables they do not own, and those tables, as issue #41 began.
/// This list may only shrink: remove an entry when its SQL moves into `storage/src/rows/`.
const KNOWN_TABLE_USERS: &[(&str, &[&str])] = &[
    ("storage/src/rows/agent_keys.rs", &["agents"]),
    ("storage/src/rows/blobs.rs", &["inline_bytes"]),
    ("storage/src/rows/derivations.rs", &["manifests"]),
    ("storage/src/rows/inline_bytes.rs", &["blobs"]),
    ("storage/src/rows/leases.rs", &["work_items"]),
    (
        "storage/src/rows/manifests.rs",
        &["blobs", "forwarded_artifacts", "reusable_artifacts"],
    ),
    ("storage/src/rows/memberships.rs", &["missions"]),
    ("storage/src/rows/offers.rs", &["work_items"]),
    ("storage/src/rows/proposals.rs", &["missions"]),
    ("storage/src/rows/sessions.rs", &["agents"]),
    (
        "storage/src/rows/work_history.rs",
        &["events", "work_items"],
    ),
    ("storage/src/rows/work_items.rs", &["work_deps"]),
    ("storage/src/rows/work_progress.rs", &["work_items"]),
    ("storage/src/rows/work_questions.rs", &["offers"]),
];

const SQL_KEYWORDS: &[&str] = &[
    "SELECT", "INSERT", "UPDATE", "DELETE", "FROM", "JOIN", "INTO", "CREATE", "ALTER", "DROP",
    "REPLACE", "WHERE", "SET", "VALUES", "TABLE", "INDEX",
];

fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|word| !word.is_empty())
}

/// The tables `schema.rs`'s migrations create.
fn tables(schema: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for token in source::lex(schema) {
        let Token::Str(sql) = token else { continue };
        let sql_words: Vec<&str> = words(&sql).collect();
        for (at, pair) in sql_words.windows(2).enumerate() {
            if pair == ["CREATE", "TABLE"] {
                let mut name_at = at + 2;
                if sql_words.get(name_at..name_at + 3) == Some(&["IF", "NOT", "EXISTS"]) {
                    name_at += 3;
                }
                found.extend(sql_words.get(name_at).map(|name| name.to_string()));
            }
        }
    }
    found
}

/// Whether a literal is SQL: it holds an SQL keyword in capitals.
fn is_sql(text: &str) -> bool {
    words(text).any(|word| SQL_KEYWORDS.contains(&word))
}

/// The tables the SQL of `tokens` names. Where SQL is built with a `{…}` placeholder, a
/// literal that is just a table's name counts too: it is spliced into that SQL.
fn named_tables(tokens: &[Token], tables: &BTreeSet<String>) -> BTreeSet<String> {
    let literals: Vec<&str> = tokens
        .iter()
        .filter_map(|token| match token {
            Token::Str(text) => Some(text.as_str()),
            _ => None,
        })
        .collect();
    let splices = literals
        .iter()
        .any(|text| is_sql(text) && text.contains('{'));
    let mut named = BTreeSet::new();
    for text in literals {
        if splices && tables.contains(text) {
            named.insert(text.to_owned());
        } else if is_sql(text) {
            named.extend(
                words(text)
                    .filter(|word| tables.contains(*word))
                    .map(str::to_owned),
            );
        }
    }
    named
}

/// Each file (from the workspace root) whose SQL names a table it does not own, with those tables.
fn table_users(root: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let schema = std::fs::read_to_string(root.join("storage/src/schema.rs")).unwrap_or_default();
    let tables = tables(&schema);
    assert!(tables.len() > 20, "the tables of schema.rs: {tables:?}");
    let mut users = BTreeMap::new();
    for crate_src in ["storage/src", "src"] {
        // Every file, test code and test-only files included: a test seeds or tampers with
        // rows through their `rows/` file too (`bench_support::tamper`).
        for (file, text) in source::load(&root.join(crate_src)) {
            let shown = format!("{crate_src}/{}", file.display());
            // The migrations, their backfills, and their tests, which build old databases row
            // by row.
            if shown == "storage/src/schema.rs"
                || shown == "storage/src/schema/backfill.rs"
                || shown == "storage/src/schema/tests.rs"
                || shown == "storage/src/schema/tests_secrets.rs"
            {
                continue;
            }
            let mut named = named_tables(&source::lex(&text), &tables);
            // `rows/leases.rs` (or `rows/lease.rs`) owns `leases`.
            if let Some(owner) = shown.strip_prefix("storage/src/rows/") {
                let stem = owner.trim_end_matches(".rs");
                named.retain(|table| table != stem && *table != format!("{stem}s"));
            }
            if !named.is_empty() {
                users.insert(shown, named);
            }
        }
    }
    users
}

#[test]
fn no_sql_names_a_table_outside_its_rows_file() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let found = table_users(root);
    let known: BTreeMap<String, BTreeSet<String>> = KNOWN_TABLE_USERS
        .iter()
        .map(|(file, tables)| {
            (
                file.to_string(),
                tables.iter().map(|t| t.to_string()).collect(),
            )
        })
        .collect();
    let n_tables: usize = found.values().map(BTreeSet::len).sum();
    println!(
        "{} files name {n_tables} (file, table) pairs outside storage/src/rows/",
        found.len()
    );
    if found == known {
        return;
    }
    let mut message =
        String::from("the SQL naming tables outside storage/src/rows/ is not KNOWN_TABLE_USERS'\n");
    for (file, tables) in &found {
        let new: Vec<&String> = tables
            .iter()
            .filter(|table| !known.get(file).is_some_and(|known| known.contains(*table)))
            .collect();
        if !new.is_empty() {
            let _ = writeln!(message, "new: {file} names {new:?}");
        }
    }
    for (file, tables) in &known {
        let gone: Vec<&String> = tables
            .iter()
            .filter(|table| !found.get(file).is_some_and(|found| found.contains(*table)))
            .collect();
        if !gone.is_empty() {
            let _ = writeln!(message, "gone: {file} no longer names {gone:?}");
        }
    }
    let _ = writeln!(
        message,
        "\nSQL may name a table only in its rows file; when SQL moves there, KNOWN_TABLE_USERS becomes:"
    );
    for (file, tables) in &found {
        let tables: Vec<String> = tables.iter().map(|t| format!("{t:?}")).collect();
        let _ = writeln!(message, "    ({file:?}, &[{}]),", tables.join(", "));
    }
    panic!("{message}");
}

#[test]
fn the_table_check_sees_sql() {
    let tables: BTreeSet<String> = tables(
        r#"const V1: &str = "CREATE TABLE leases (id); CREATE TABLE IF NOT EXISTS offers (x)";"#,
    );
    assert_eq!(tables, ["leases", "offers"].map(String::from).into());
    let code = source::read(
        r#"let a = "SELECT lease_id FROM leases"; let b = "no offers here"; let c = "offers";
        let e = "DELETE FROM {table}";
        let d = format!("SELECT 1 FROM {table}"); #[cfg(test)] fn t() { "DELETE FROM offers"; }"#,
    );
    let named = named_tables(&code.tokens, &tables);
    assert_eq!(named, ["leases", "offers"].map(String::from).into());
}
