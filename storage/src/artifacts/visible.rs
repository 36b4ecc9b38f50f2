//! The first lookup of every artifact read: the blob and the manifests of it that a reader
//! may see, decided in one SQL statement (issue #40's read-timing finding).
//!
//! A read used to find the blob's row first and ask about visibility after, so a digest held
//! only by another Group (or another Mission, for a scoped member) ran more queries than an
//! absent one and a client could tell the two apart by timing. Here every index seek is keyed
//! by the reader's own Group (and, for a scoped member, its Missions) before any row of the
//! blob or of another Group's manifest is visited: absent and invisible take the same path
//! (the same statement, the same seeks, no row), and only a visible manifest reaches the
//! `blobs` row. The test below pins it by counting SQLite's virtual-machine steps.
//!
//! The rules are those of `access.rs` (CTX-5, CTX-6, CTX-7): a manifest of the reader's Group
//! for a Mission its Membership covers; every manifest of its Group when the artifact was
//! published there as reusable knowledge; for a Group-wide reader, the source Group's
//! manifests of an artifact forwarded with a Context Package. The operator sees every one.

use crate::sql::Cached as _;

use rusqlite::{Connection, params};
use weft_api::{Digest, Digests};

use super::digests_of;
use crate::access::Reader;
use crate::error::Error;

/// One manifest the reader may see, with its blob.
pub(crate) struct Visible {
    pub digests: Digests,
    pub quarantined: bool,
    pub manifest_id: Vec<u8>,
    pub media_type: String,
    pub sequence: u64,
    /// The DSSE envelope as accepted, when asked for.
    pub envelope: Option<String>,
}

/// The manifests `reader` may see of the artifact `digest` names, newest first, with the
/// envelopes when `envelopes` (an empty list: absent, or not visible, which answer alike).
pub(crate) fn visible_manifests(
    conn: &Connection,
    reader: &Reader,
    digest: &Digest,
    envelopes: bool,
) -> Result<Vec<Visible>, Error> {
    let key: Vec<u8> = match digest {
        Digest::Blake3(id) => id.0.to_vec(),
        Digest::Sha256(sha) => conn.row(BY_SHA256, [&sha.0[..]], |row| row.get(0))?,
    };
    let columns = |row: &rusqlite::Row<'_>| {
        Ok((
            (
                row.get::<_, Vec<u8>>(0)?,
                row.get::<_, Vec<u8>>(1)?,
                row.get::<_, u64>(2)?,
                row.get::<_, Option<String>>(3)?,
            ),
            (
                row.get::<_, Vec<u8>>(4)?,
                row.get::<_, String>(5)?,
                row.get::<_, u64>(6)?,
                row.get::<_, Option<String>>(7)?,
            ),
        ))
    };
    let rows = match reader {
        Reader::Admin => conn.rows(ADMIN, params![key, envelopes], columns)?,
        Reader::Agent {
            group_id, scope, ..
        } => {
            let missions = match scope {
                crate::access::MissionScope::Group => None,
                crate::access::MissionScope::Missions(missions) => Some(
                    serde_json::Value::from(missions.iter().cloned().collect::<Vec<_>>())
                        .to_string(),
                ),
            };
            conn.rows(
                AGENT,
                params![key, group_id.as_str(), missions, envelopes],
                columns,
            )?
        }
    };
    rows.into_iter()
        .map(
            |(
                (blake3, sha256, size, quarantined),
                (manifest_id, media_type, sequence, envelope),
            )| {
                Ok(Visible {
                    digests: digests_of(blake3, sha256, size)?,
                    quarantined: quarantined.is_some(),
                    manifest_id,
                    media_type,
                    sequence,
                    envelope,
                })
            },
        )
        .collect()
}

/// The key every seek below starts from: the digest itself, or the BLAKE3 digest of the blob
/// whose SHA-256 it is (a digest no blob has becomes 32 zero bytes, so the seeks that follow
/// run as they would for a blob another Group holds).
/// An Agent's read: `?1` the BLAKE3 key, `?2` its Group, `?3` its Missions as a JSON array
/// (`NULL`: the whole Group), `?4` whether to return envelopes. Each branch seeks by (digest,
/// the reader's Group) first, on index `manifests_blake3_group`; the scoped branch adds each
/// of its Missions to the seek, so another Mission's manifest is never visited. `INDEXED BY`
/// and `CROSS JOIN` (SQLite keeps the left table outer) fix the plan: without them the
/// planner may walk the whole Group's manifests (index `manifests_group`), which costs more
/// the more the Group holds and differs between hidden and absent.
const AGENT: &str = "WITH seen(id) AS (
        SELECT m.rowid FROM manifests m INDEXED BY manifests_blake3_group WHERE ?3 IS NULL AND m.blake3 = ?1 AND m.group_id = ?2
        UNION
        SELECT m.rowid FROM json_each(?3) j CROSS JOIN manifests m INDEXED BY manifests_blake3_group
         WHERE m.blake3 = ?1 AND m.group_id = ?2 AND m.mission_id = j.value
        UNION
        SELECT m.rowid FROM reusable_artifacts r CROSS JOIN manifests m INDEXED BY manifests_blake3_group
         WHERE r.group_id = ?2 AND r.blake3 = ?1 AND m.blake3 = ?1 AND m.group_id = ?2
        UNION
        SELECT m.rowid FROM forwarded_artifacts f CROSS JOIN manifests m INDEXED BY manifests_blake3_group
         WHERE ?3 IS NULL AND f.group_id = ?2 AND f.blake3 = ?1
           AND m.blake3 = ?1 AND m.group_id = f.from_group_id)
    SELECT b.blake3, b.sha256, b.size, b.quarantined_at,
           m.manifest_id, m.media_type, m.sequence, CASE WHEN ?4 THEN m.envelope END
    FROM seen CROSS JOIN manifests m CROSS JOIN blobs b
    WHERE m.rowid = seen.id AND b.blake3 = m.blake3
    ORDER BY m.rowid DESC";

/// The operator's read: every manifest of the blob (`?1` the BLAKE3 key, `?2` envelopes).
const ADMIN: &str = "SELECT b.blake3, b.sha256, b.size, b.quarantined_at,
           m.manifest_id, m.media_type, m.sequence, CASE WHEN ?2 THEN m.envelope END
    FROM manifests m CROSS JOIN blobs b WHERE m.blake3 = ?1 AND b.blake3 = m.blake3
    ORDER BY m.rowid DESC";

/// The BLAKE3 key of the blob whose SHA-256 digest is `?1`, or 32 zero bytes when no blob
/// has it: one row either way, so the seeks that follow run as they would for a blob another
/// Group holds.
const BY_SHA256: &str =
    "SELECT coalesce((SELECT blake3 FROM blobs WHERE sha256 = ?1), zeroblob(32))";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::access::MissionScope;
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
        crate::sql::trace(&conn, true);
        for (n, group, mission) in [
            (1u8, "ga", "m1"),
            (2, "ga", "m2"),
            (3, "gb", "m9"),
            (9, "gb", "m9"),
        ] {
            conn.run(
                "INSERT INTO blobs (blake3, sha256, size, stored_at) VALUES (?1, ?2, 5, 'now')",
                params![&[n; 32][..], &[n + 100; 32][..]],
            )
            .expect("blob");
            conn.run(
                "INSERT INTO manifests (manifest_id, blake3, group_id, mission_id, work_item_id,
                     producer, media_type, lease_id, ownership_epoch, classification, created_at,
                     envelope, sequence)
                 VALUES (?1, ?2, ?3, ?4, 'w', 'p', 'text/plain', 'l', 1, 'internal', 'now', '{}', ?5)",
                params![&[n + 50; 32][..], &[n; 32][..], group, mission, u64::from(n)],
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
        let (found, work) = metered(|| visible_manifests(conn, reader, &digest, true));
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
}
