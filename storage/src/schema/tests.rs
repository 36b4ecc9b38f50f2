//! The migrations' tests: each step of an old database brought to the newest schema keeps
//! its rows, and the indexes the hot reads need are the ones they use. Long (over 600 lines):
//! one test per migration that moves rows, and the plans of every hot read.

use rusqlite::Connection;

/// An SQLite database at schema version `version`, as a weft of that version left it.
pub(super) fn sqlite_at(version: usize) -> Connection {
    let conn = Connection::open_in_memory().expect("open");
    for (done, sql) in (1..).zip(&super::MIGRATIONS[..version]) {
        conn.execute_batch(&format!(
            "BEGIN; {sql} PRAGMA user_version = {done}; COMMIT;"
        ))
        .expect("an old schema");
    }
    conn
}

/// A fresh PostgreSQL database at schema version `version`; `None` where PostgreSQL is not
/// installed.
pub(super) fn postgres_at(version: i64) -> Option<crate::sql::Connection> {
    let url = weft_testkit::postgres_database_or_skip()?;
    let pg = crate::sql::postgres::Pg::connect(&url).expect("connect");
    let conn = crate::sql::Connection::Postgres(Box::new(pg));
    super::postgres::migrate(&conn, version).expect("an old schema");
    Some(conn)
}

/// Every row of `sql`'s two columns.
fn pairs<A: rusqlite::types::FromSql, B: rusqlite::types::FromSql>(
    conn: &Connection,
    sql: &str,
) -> Vec<(A, B)> {
    conn.prepare(sql)
        .expect("select")
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
        .expect("rows")
        .collect::<Result<_, _>>()
        .expect("read")
}

/// The plan SQLite picks for `sql` on the migrated schema, one line per step.
fn plan(conn: &Connection, sql: &str, params: usize) -> Vec<String> {
    let mut statement = conn
        .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
        .expect("plan");
    let values: Vec<&str> = vec!["x"; params];
    statement
        .query_map(rusqlite::params_from_iter(values), |row| row.get(3))
        .expect("rows")
        .collect::<Result<_, _>>()
        .expect("steps")
}

/// Issue #40 (V22): Commands stored before keep their answers under their Group, with no
/// Agent (`''`, which answers any Agent of the Group); the key is now (Group, Agent, id).
#[test]
fn stored_commands_move_under_their_group() {
    let conn = sqlite_at(21);
    conn.execute_batch(
        "INSERT INTO commands (command_id, group_id, request_hash, answer)
             VALUES ('cmd-1', 'g1', x'01', '{}');",
    )
    .expect("an old row");
    super::migrate_sqlite(&conn).expect("migrated");
    let row: (String, String, String) = conn
        .query_row(
            "SELECT group_id, agent_id, answer FROM commands WHERE command_id = 'cmd-1'",
            [],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
        )
        .expect("kept");
    assert_eq!(row, ("g1".into(), String::new(), "{}".into()));
    conn.execute_batch(
        "INSERT INTO commands (group_id, agent_id, command_id, request_hash, answer)
             VALUES ('g2', 'a', 'cmd-1', x'02', '{}'), ('g1', 'a', 'cmd-1', x'03', '{}');",
    )
    .expect("the same id in another Group and for an Agent");
}

/// Issue #44 (V45): `commands` becomes a rowid table with its key in a unique index; every
/// Command kept before keeps its answer and envelope, and the key still admits one row.
#[test]
fn commands_keep_their_rows_and_their_key_in_a_rowid_table() {
    let conn = sqlite_at(44);
    conn.execute_batch(
        "INSERT INTO commands (group_id, agent_id, command_id, request_hash, answer, envelope,
                               recorded_at)
             VALUES ('g1', 'a', 'cmd-1', x'01', '{\"n\":1}', '{\"e\":1}', '2026-01-01T00:00:00Z'),
                    ('g1', '', 'cmd-2', x'02', '', NULL, NULL);",
    )
    .expect("old rows");
    super::migrate_sqlite(&conn).expect("migrated");
    let kept = pairs::<String, String>(
        &conn,
        "SELECT command_id, answer || '|' || IFNULL(envelope, '-') FROM commands ORDER BY 1",
    );
    let want = [("cmd-1", "{\"n\":1}|{\"e\":1}"), ("cmd-2", "|-")];
    assert_eq!(
        kept,
        want.map(|(id, kept)| (id.to_owned(), kept.to_owned()))
    );
    let again = conn.execute(
        "INSERT INTO commands (group_id, agent_id, command_id, request_hash, answer)
             VALUES ('g1', 'a', 'cmd-1', x'03', '{}')",
        [],
    );
    assert!(again.is_err(), "the key admits one row: {again:?}");
    let (_, without_rowid) = pairs::<String, bool>(
        &conn,
        "SELECT name, wr FROM pragma_table_list WHERE name = 'commands'",
    )
    .remove(0);
    assert!(!without_rowid, "a rowid table");
}

/// Issue #50 (V28): the Events appended before are given their actor from their
/// payloads, by `EventPayload::actor`'s rule; the operator's and the Authority's none.
#[test]
fn events_appended_before_get_their_actor() {
    use weft_api::kinds::{EventPayload, SessionOpened};
    use weft_api::work::events::{Actor, WorkEvent, WorkEventKind};
    let conn = sqlite_at(27);
    let id = |s: &str| weft_api::Id::parse("id", s).expect("an id");
    let mut work: WorkEvent = serde_json::from_value(serde_json::json!({
        "detail": {}, "missionId": "m1", "revision": 1, "state": "offered",
        "workItemId": "wi-1"
    }))
    .expect("a work Event");
    work.actor = Some(Actor {
        agent_id: id("c1"),
        key_id: "k".into(),
    });
    let mut by_authority = work.clone();
    by_authority.actor = None;
    let payloads = [
        EventPayload::Work(WorkEventKind::WorkOffered, work),
        EventPayload::Work(WorkEventKind::LeaseExpired, by_authority),
        EventPayload::SessionOpened(SessionOpened {
            agent_id: id("w1"),
            membership_epoch: 1,
            session_epoch: 1,
        }),
        EventPayload::GroupPolicySet(weft_api::kinds::GroupPolicySet {
            group_id: id("g1"),
            mission_priority_ceiling: weft_api::work::contract::Level::Normal,
        }),
    ];
    conn.execute_batch("INSERT INTO groups (group_id, created_at) VALUES ('g1', 't')")
        .expect("a Group");
    for (sequence, payload) in (1..).zip(&payloads) {
        conn.execute(
            "INSERT INTO events (group_id, sequence, event_id, type, payload, appended_at,
                                 prev_hash, hash)
             VALUES ('g1', ?1, ?2, ?3, ?4, 't', x'00', x'00')",
            rusqlite::params![
                sequence,
                format!("e{sequence}"),
                payload.kind().as_str(),
                payload.to_json()
            ],
        )
        .expect("an old Event");
    }
    super::migrate_sqlite(&conn).expect("migrated");
    for (sequence, payload) in (1..).zip(&payloads) {
        let actor: Option<String> = conn
            .query_row(
                "SELECT actor FROM events WHERE group_id = 'g1' AND sequence = ?1",
                [sequence],
                |row| row.get(0),
            )
            .expect("the Event");
        assert_eq!(
            actor.as_deref(),
            payload.actor().map(weft_api::Id::as_str),
            "{payload:?}"
        );
    }
}

/// Issue #15 (V20): a database written before keeps every inline blob's bytes, now in
/// `inline_bytes` under the id its `blobs` row names; a file blob names none;
/// `inline_blobs` is gone.
#[test]
fn inline_bytes_move_into_their_blob_rows() {
    let conn = sqlite_at(19);
    conn.execute_batch(
        "INSERT INTO blobs (blake3, sha256, size, stored_at) VALUES
             (x'01', x'a1', 3, 't'), (x'02', x'a2', 9, 't');
         INSERT INTO inline_blobs (blake3, bytes) VALUES (x'01', x'616263');",
    )
    .expect("old rows");
    super::migrate_sqlite(&conn).expect("migrated");
    let rows: Vec<(Vec<u8>, Option<Vec<u8>>)> = pairs(
        &conn,
        "SELECT b.blake3, i.bytes FROM blobs b LEFT JOIN inline_bytes i ON i.id = b.inline_id
         ORDER BY b.blake3",
    );
    assert_eq!(
        rows,
        vec![(vec![1], Some(b"abc".to_vec())), (vec![2], None)]
    );
    let left: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM sqlite_schema WHERE name = 'inline_blobs'",
            [],
            |row| row.get(0),
        )
        .expect("schema");
    assert_eq!(left, 0);
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .expect("version");
    assert_eq!(version, super::LATEST);
}

/// Issue #15: the visibility look-ups of every read find one artifact's manifests in a
/// Group through the (blake3, group) index, never by walking the Group's manifests.
#[test]
fn visibility_lookups_never_walk_a_groups_manifests() {
    let conn = Connection::open_in_memory().expect("open");
    super::migrate_sqlite(&conn).expect("schema");
    for (sql, params) in [
        (
            "SELECT DISTINCT mission_id FROM manifests WHERE blake3 = ?1 AND group_id = ?2",
            2,
        ),
        (
            "SELECT 1 FROM manifests WHERE blake3 = ?1 AND group_id = ?2 AND mission_id = ?3 AND work_item_id = ?4 LIMIT 1",
            4,
        ),
        (
            "SELECT DISTINCT mission_id FROM manifests WHERE work_item_id = ?1 AND group_id = ?2
             AND (?3 IS NULL OR mission_id = ?3) LIMIT 2",
            3,
        ),
    ] {
        let steps = plan(&conn, sql, params);
        assert!(
            steps[0].starts_with("SEARCH")
                && !steps[0].contains("manifests_group ")
                && steps[0].contains("group_id=?"),
            "{sql}: {steps:?}"
        );
    }
}

/// Issue #15 (V19): with the one-column indexes gone, a look-up by digest or by WorkItem
/// alone searches the composite index by its first column, never scans.
#[test]
fn lookups_by_one_column_search_the_composite_indexes() {
    let conn = Connection::open_in_memory().expect("open");
    super::migrate_sqlite(&conn).expect("schema");
    for (sql, index) in [
        (
            "SELECT group_id FROM manifests WHERE blake3 = ?1",
            "manifests_blake3_group (blake3=?)",
        ),
        (
            "SELECT manifest_id FROM manifests WHERE work_item_id = ?1",
            "manifests_work_item_group (work_item_id=?)",
        ),
    ] {
        let steps = plan(&conn, sql, 1);
        assert!(
            steps[0].starts_with("SEARCH") && steps[0].contains(index),
            "{sql}: {steps:?}"
        );
    }
}

/// Issue #50 (V29): the manifests stored before get their file name from their signed
/// payloads (the last path component of the `name` annotation), in the migration's
/// transaction; a manifest without one keeps `''`.
#[test]
fn manifests_stored_before_get_their_file_name() {
    use base64::Engine as _;
    let conn = sqlite_at(28);
    conn.execute_batch("PRAGMA foreign_keys = OFF")
        .expect("rows without their parents");
    let manifest = |name: Option<&str>| {
        let mut value = serde_json::json!({
            "content": {"blake3": format!("blake3:{}", "1".repeat(64)),
                        "sha256": format!("sha256:{}", "2".repeat(64)), "size": 3,
                        "mediaType": "text/plain", "schema": null},
            "producer": {"agentId": "w1", "agentCardVersion": "1"},
            "missionId": "m1", "groupId": "g1", "workItemId": "wi-1",
            "execution": {"leaseId": "l1", "ownershipEpoch": 1},
            "sources": [], "tools": [], "createdAt": "2026-12-01T00:00:00Z",
            "classification": "internal",
            "retrievalUri": "https://weft.example/x", "annotations": {}
        });
        if let Some(name) = name {
            value["annotations"]["name"] = serde_json::json!(name);
        }
        let payload = value.to_string();
        weft_api::Manifest::parse(payload.as_bytes()).expect("a valid manifest");
        serde_json::json!({
            "payloadType": "application/vnd.mwp.manifest.v1+json",
            "payload": weft_api::dsse::BASE64.encode(payload.as_bytes()),
            "signatures": []
        })
        .to_string()
    };
    for (id, envelope) in [
        (1u8, manifest(Some("reports/q3.json"))),
        (2, manifest(None)),
    ] {
        conn.execute(
            "INSERT INTO manifests (manifest_id, blake3, group_id, mission_id, work_item_id,
                                    producer, media_type, lease_id, ownership_epoch,
                                    classification, created_at, envelope, sequence)
             VALUES (?1, x'01', 'g1', 'm1', 'wi-1', 'w1', 'text/plain', 'l1', 1, 'internal',
                     't', ?2, ?3)",
            rusqlite::params![vec![id], envelope, id],
        )
        .expect("an old manifest");
    }
    super::migrate_sqlite(&conn).expect("migrated");
    let names: Vec<String> = conn
        .prepare("SELECT name FROM manifests ORDER BY manifest_id")
        .expect("select")
        .query_map([], |row| row.get(0))
        .expect("rows")
        .collect::<Result<_, _>>()
        .expect("read");
    assert_eq!(names, ["q3.json", ""]);
}

/// Stop 69: looking for a Command searches the key for the Agent's row and the Authority's,
/// on SQLite as on PostgreSQL (`rows/commands.rs`), never the Group's range of it.
#[test]
fn looking_for_a_command_searches_its_whole_key() {
    let conn = Connection::open_in_memory().expect("open");
    super::migrate_sqlite(&conn).expect("schema");
    let steps = plan(&conn, crate::rows::commands::STORED, 3);
    let searches: Vec<&String> = steps
        .iter()
        .filter(|step| step.contains("commands"))
        .collect();
    assert_eq!(searches.len(), 2, "{steps:?}");
    // Both answered, the caller chooses: no sorter for every Command (issue #44).
    assert!(
        !steps.iter().any(|step| step.contains("TEMP B-TREE")),
        "{steps:?}"
    );
    for step in searches {
        assert!(
            step.starts_with("SEARCH")
                && step.contains("commands_key (group_id=? AND command_id=? AND agent_id=?)"),
            "{steps:?}"
        );
    }
}

/// Stop 69 (V38, V39): fetching a Command by its id searches the key by (Group, id), the
/// trimming batches search the answers not yet trimmed by age, a token's session is found by
/// its Agent, Group and epoch, a Group's disposition of a blob by its key, and a Group's
/// Missions by their Group: never a walk of the history or of other Groups' rows. Stop 70
/// (V40): a WorkItem's current lease by its unreleased leases, not every lease it had. V46:
/// a lease's newest renewals from the index alone. In one step: nothing sorted.
#[test]
fn by_id_and_by_age_lookups_search_their_indexes() {
    let conn = Connection::open_in_memory().expect("open");
    super::migrate_sqlite(&conn).expect("schema");
    for (sql, params, index) in [
        (
            "SELECT agent_id, envelope FROM commands WHERE group_id = ?1 AND command_id = ?2
             ORDER BY agent_id LIMIT ?3",
            3,
            "commands_key (group_id=? AND command_id=?)",
        ),
        (
            "SELECT group_id, command_id, agent_id FROM commands
             WHERE recorded_at < ?1 AND answer <> '' LIMIT ?2",
            2,
            "commands_answered (recorded_at<?)",
        ),
        (
            "SELECT scope, key FROM idempotency WHERE created_at < ?1 AND status <> 0 LIMIT ?2",
            2,
            "idempotency_answered (created_at<?)",
        ),
        (
            "SELECT token_hash FROM sessions WHERE agent_id = ?1 AND group_id = ?2 AND session_epoch = ?3",
            3,
            "sessions_by_epoch (agent_id=? AND group_id=? AND session_epoch=?)",
        ),
        (
            crate::rows::blob_dispositions::LATEST_IN_GROUP,
            2,
            "PRIMARY KEY (group_id=? AND blake3=?)",
        ),
        (
            crate::rows::missions::GROUP_NEWEST_FIRST,
            1,
            "missions_group (group_id=?)",
        ),
        (
            crate::rows::leases::READ_CURRENT,
            1,
            "leases_current (work_item_id=?)",
        ),
        (
            crate::rows::context_package_artifacts::ANY_CITES,
            1,
            "PRIMARY KEY (blake3=?)",
        ),
    ] {
        let steps = plan(&conn, sql, params);
        assert!(
            steps[0].starts_with("SEARCH") && steps[0].contains(index),
            "{sql}: {steps:?}"
        );
    }
    let renewals = plan(&conn, crate::rows::lease_renewals::NEWEST, 2);
    let index = "SEARCH lease_renewals USING COVERING INDEX lease_renewals_lease (lease_id=?)";
    assert_eq!(renewals, [index]);
    // V50: a WorkItem's newest inert records and questions, read with every Command's answer.
    let inert = plan(&conn, crate::rows::inert_publications::NEWEST, 2);
    let index =
        "SEARCH inert_publications USING INDEX inert_publications_work_item (work_item_id=?)";
    assert_eq!(inert, [index]);
    let questions = plan(&conn, &crate::rows::work_questions::NEWEST, 3);
    assert!(
        questions[0] == "SEARCH q USING INDEX work_questions_by_sequence (work_item_id=?)"
            && !questions.iter().any(|step| step.contains("TEMP B-TREE")),
        "{questions:?}"
    );
}

/// Stop 70 (V40): a WorkItem's history written before is given each Event's type, read from
/// the Event; a row whose Event was compacted away keeps `''` (no type: it was found by no
/// look-up of a type before either).
#[test]
fn history_written_before_gets_its_event_types() {
    let conn = sqlite_at(39);
    // The Mission the WorkItem names is beside the point.
    conn.execute_batch(
        "PRAGMA foreign_keys = OFF;
         INSERT INTO groups (group_id, created_at) VALUES ('g1', 't'), ('g2', 't');
         INSERT INTO work_items (work_item_id, group_id, mission_id, state, revision,
                                 contract_revision, contract, ownership_epoch,
                                 approval_granted, attempts)
             VALUES ('wi-1', 'g1', 'm1', 'offered', 1, 1, '{}', 0, 0, 0);
         INSERT INTO events (group_id, sequence, event_id, type, payload, appended_at,
                             prev_hash, hash)
             VALUES ('g1', 2, 'e2', 'work.started', '{}', 't', x'00', x'00'),
                    ('g1', 3, 'e3', 'work.failed', '{}', 't', x'00', x'00'),
                    ('g2', 4, 'e4', 'work.submitted', '{}', 't', x'00', x'00');
         INSERT INTO work_history (work_item_id, sequence) VALUES ('wi-1', 1), ('wi-1', 2),
                                                                  ('wi-1', 3), ('wi-1', 4);",
    )
    .expect("old rows");
    super::migrate_sqlite(&conn).expect("migrated");
    let types: Vec<(i64, String)> = pairs(
        &conn,
        "SELECT sequence, type FROM work_history ORDER BY sequence",
    );
    // 1: compacted away; 4: an Event of another Group at that sequence, not this WorkItem's.
    assert_eq!(
        types,
        [
            (1, String::new()),
            (2, "work.started".into()),
            (3, "work.failed".into()),
            (4, String::new()),
        ]
    );
}

/// V40 on PostgreSQL, as on SQLite: history written before gets each Event's type; and once
/// filled the column has no default, so a server of an earlier version still writing history
/// rows without a type is refused rather than writing rows the look-ups by type never find.
#[test]
fn history_written_before_gets_its_event_types_on_postgres() {
    let Some(conn) = postgres_at(39) else {
        return;
    };
    // The Mission the WorkItem names is beside the point (the cluster's user is its
    // superuser).
    conn.execute_batch(
        "SET session_replication_role = replica;
         INSERT INTO groups (group_id, created_at) VALUES ('g1', 't'), ('g2', 't');
         INSERT INTO work_items (work_item_id, group_id, mission_id, state, revision,
                                 contract_revision, contract, ownership_epoch,
                                 approval_granted, attempts)
             VALUES ('wi-1', 'g1', 'm1', 'offered', 1, 1, '{}', 0, 0, 0);
         INSERT INTO events (group_id, sequence, event_id, type, payload, appended_at,
                             prev_hash, hash)
             VALUES ('g1', 2, 'e2', 'work.started', '{}', 't', '\\x00', '\\x00'),
                    ('g1', 3, 'e3', 'work.failed', '{}', 't', '\\x00', '\\x00'),
                    ('g2', 4, 'e4', 'work.submitted', '{}', 't', '\\x00', '\\x00');
         INSERT INTO work_history (work_item_id, sequence) VALUES ('wi-1', 1), ('wi-1', 2),
                                                                  ('wi-1', 3), ('wi-1', 4);",
    )
    .expect("old rows");
    super::postgres::migrate(&conn, super::LATEST).expect("migrated");
    use crate::sql::Cached as _;
    let types: Vec<(i64, String)> = conn
        .rows(
            "SELECT sequence, type FROM work_history ORDER BY sequence",
            [],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .expect("types");
    assert_eq!(
        types,
        [
            (1, String::new()),
            (2, "work.started".into()),
            (3, "work.failed".into()),
            (4, String::new()),
        ]
    );
    assert!(
        conn.execute_batch("INSERT INTO work_history (work_item_id, sequence) VALUES ('wi-1', 5)")
            .is_err(),
        "a row without a type"
    );
}

/// Stop 70 (V41): whether the store cites a blob (collection asks it of each candidate, the
/// sweep of each uncited upload) searches the schemas' and snapshots' blob indexes, never
/// scans either table.
#[test]
fn the_stores_citations_of_a_blob_are_searched() {
    let conn = Connection::open_in_memory().expect("open");
    super::migrate_sqlite(&conn).expect("schema");
    let steps = plan(&conn, &crate::rows::blobs::cited_by_the_store_sql(), 1);
    let tables: Vec<&String> = steps
        .iter()
        .filter(|step| step.contains("schemas") || step.contains("snapshots"))
        .collect();
    assert!(tables.len() >= 3, "{steps:?}");
    for step in tables {
        assert!(
            step.starts_with("SEARCH") && step.contains("USING"),
            "{steps:?}"
        );
    }
}

/// The Context Package rows of the V41 backfill tests: version `cp-1` cites two artifacts
/// (one twice), `cp-2` none.
const PACKAGES: &str = "
    INSERT INTO context_packages (context_id, group_id, package_id, version, mission_id,
                                  events_from, events_to, artifacts, generator, envelope,
                                  sequence)
    VALUES (x'01', 'g1', 'p', 1, 'm1', 1, 1,
            '[\"blake3:0202020202020202020202020202020202020202020202020202020202020202\",
              \"blake3:0303030303030303030303030303030303030303030303030303030303030303\",
              \"blake3:0202020202020202020202020202020202020202020202020202020202020202\"]',
            'a', '{}', 1),
           (x'04', 'g1', 'p', 2, 'm1', 1, 1, '[]', 'a', '{}', 2);";

/// Stop 70 (V41): the artifacts each Context Package version stored before cites get their
/// rows, so collection still keeps them.
#[test]
fn context_packages_stored_before_get_their_citations() {
    let conn = sqlite_at(40);
    conn.execute_batch(&format!("PRAGMA foreign_keys = OFF; {PACKAGES}"))
        .expect("old rows");
    super::migrate_sqlite(&conn).expect("migrated");
    let cited: Vec<(String, String)> = pairs(
        &conn,
        "SELECT hex(blake3), hex(context_id) FROM context_package_artifacts ORDER BY 1",
    );
    assert_eq!(
        cited,
        [
            ("02".repeat(32), "01".into()),
            ("03".repeat(32), "01".into())
        ]
    );
}

/// V41 on PostgreSQL, as on SQLite.
#[test]
fn context_packages_stored_before_get_their_citations_on_postgres() {
    let Some(conn) = postgres_at(40) else {
        return;
    };
    let rows = PACKAGES
        .replace("x'01'", "'\\x01'")
        .replace("x'04'", "'\\x04'");
    conn.execute_batch(&format!("SET session_replication_role = replica; {rows}"))
        .expect("old rows");
    super::postgres::migrate(&conn, super::LATEST).expect("migrated");
    use crate::sql::Cached as _;
    let cited: Vec<(String, String)> = conn
        .rows(
            "SELECT upper(encode(blake3, 'hex')), upper(encode(context_id, 'hex'))
             FROM context_package_artifacts ORDER BY 1",
            [],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .expect("cited");
    assert_eq!(
        cited,
        [
            ("02".repeat(32), "01".into()),
            ("03".repeat(32), "01".into())
        ]
    );
    // A version indexed as before V41, without its citations, is refused (for `cited`, not
    // for its key: another package).
    let before = PACKAGES
        .replace("x'01'", "'\\x05'")
        .replace("x'04'", "'\\x06'")
        .replace("'p'", "'q'");
    let refused = conn
        .execute_batch(&before)
        .expect_err("a version not cited");
    assert!(format!("{refused:?}").contains("cited"), "{refused:?}");
}
