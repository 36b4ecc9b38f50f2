//! The tests of the visibility lookup (`manifests::visible_manifests`, issue #40): an
//! absent artifact and one the reader may not see cost the same SQL work.

use crate::sql::Connection;
use weft_api::Digest;

use super::manifests::visible_manifests;
use crate::access::MissionScope;
use crate::access::Reader;
use crate::sql::metered;
use weft_api::{ArtifactId, Id, Sha256Digest};

fn id(text: &str) -> Id {
    Id::parse("id", text).expect("id")
}

/// A schema with two Groups: `ga` holds artifact 1 in Mission `m1` and artifact 2 in
/// Mission `m2`; `gb` holds artifacts 3 and 9. Rows are written directly (foreign keys
/// off): only the lookup is under test. The absent digest the tests use (7) lies between
/// held ones, as nearly every digest does: a seek past the last entry of an index takes
/// one step fewer than one that lands on a next entry, whoever holds what.
fn database() -> Connection {
    let conn = Connection::open_in_memory().expect("open");
    crate::schema::migrate(&conn).expect("migrate");
    conn.execute_batch("PRAGMA foreign_keys = OFF")
        .expect("pragma");
    conn.trace(true);
    for (n, group, mission) in [
        (1u8, "ga", "m1"),
        (2, "ga", "m2"),
        (3, "gb", "m9"),
        (9, "gb", "m9"),
    ] {
        let digests = weft_api::Digests {
            blake3: ArtifactId([n; 32]),
            sha256: Sha256Digest([n + 100; 32]),
            size: 5,
        };
        super::blobs::insert(&conn, &digests, chrono::Utc::now(), None).expect("blob");
        super::manifests::insert(
            &conn,
            &super::manifests::New {
                manifest_id: &ArtifactId([n + 50; 32]),
                blake3: &digests.blake3,
                group_id: group,
                mission_id: mission,
                work_item_id: "w",
                producer: "p",
                media_type: "text/plain",
                lease_id: "l",
                ownership_epoch: 1,
                classification: "internal",
                created_at: "now",
                envelope: "{}",
                sequence: u64::from(n),
                name: None,
            },
        )
        .expect("manifest");
    }
    conn
}

fn reader(scope: MissionScope) -> Reader {
    Reader::Agent {
        agent_id: id("reader"),
        group_id: id("ga"),
        scope,
    }
}

/// The rows seen and the work done looking `digest` up as `reader`.
fn look(conn: &Connection, reader: &Reader, digest: Digest) -> (usize, crate::sql::Work) {
    let (found, work) = metered(|| visible_manifests(conn, reader.seer(), &digest, true));
    (found.expect("lookup").len(), work)
}

/// The same statements and rows, and virtual-machine steps within 2 of each other: a
/// `coalesce` that takes its second argument (no blob has the SHA-256 digest) and a seek
/// that ends past an index's last entry each take a step more or less, whoever holds
/// what. Before this lookup, another Group's artifact ran 4 statements more than an
/// absent one (visibility, reuse, forwarding and the manifests, after the blob's row).
fn same_work(hidden: crate::sql::Work, absent: crate::sql::Work, what: &str) {
    assert!(absent.statements > 0, "{what}: the meter counts");
    assert_eq!(
        (hidden.statements, hidden.rows),
        (absent.statements, absent.rows),
        "{what}"
    );
    assert!(
        hidden.vm_steps.abs_diff(absent.vm_steps) <= 2,
        "{what}: {hidden:?} against {absent:?}"
    );
}

/// Issue #40 (CTX-5 side channel): looking up a digest another Group holds costs what an
/// absent one costs: one statement, no row, the same virtual-machine steps; by BLAKE3 and
/// by SHA-256 alike. A visible one is found (the test would pass vacuously otherwise).
#[test]
fn ctx_5_another_groups_artifact_costs_what_an_absent_one_costs() {
    let conn = database();
    let group_wide = reader(MissionScope::Group);
    let blake3 = |n: u8| Digest::Blake3(ArtifactId([n; 32]));
    let sha256 = |n: u8| Digest::Sha256(Sha256Digest([n + 100; 32]));
    assert_eq!(
        look(&conn, &group_wide, blake3(1)).0,
        1,
        "its own Group's artifact"
    );
    assert_eq!(look(&conn, &group_wide, sha256(1)).0, 1, "by SHA-256");
    for digest in [blake3, sha256] {
        let (held, held_work) = look(&conn, &group_wide, digest(3));
        let (absent, absent_work) = look(&conn, &group_wide, digest(7));
        assert_eq!((held, absent), (0, 0));
        same_work(
            held_work,
            absent_work,
            "another Group's artifact against an absent one",
        );
    }
}

/// The same for a member scoped to Mission `m1`: an artifact of Mission `m2` of its own
/// Group costs what an absent one costs.
#[test]
fn ctx_5_another_missions_artifact_costs_what_an_absent_one_costs() {
    let conn = database();
    let scoped = reader(MissionScope::Missions(["m1".to_owned()].into()));
    let blake3 = |n: u8| Digest::Blake3(ArtifactId([n; 32]));
    assert_eq!(
        look(&conn, &scoped, blake3(1)).0,
        1,
        "its own Mission's artifact"
    );
    let (other, other_work) = look(&conn, &scoped, blake3(2));
    let (absent, absent_work) = look(&conn, &scoped, blake3(7));
    assert_eq!((other, absent), (0, 0));
    same_work(
        other_work,
        absent_work,
        "another Mission's artifact against an absent one",
    );
}
