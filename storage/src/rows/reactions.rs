//! The `reactions` table: the only SQL that names it. One row per reaction owed after the
//! commit of the Event it follows (Group, sequence, kind, subject), deleted in the
//! transaction of the reaction's own work (`reactions.rs` has the rules).

use crate::sql::{Connection, params};

use crate::error::Error;
use crate::sql::Cached as _;

/// One owed reaction, as its row says.
#[derive(Debug)]
pub(crate) struct Owed {
    pub(crate) group_id: String,
    /// The sequence of the Event reacted to.
    pub(crate) sequence: u64,
    pub(crate) kind: String,
    /// What the reaction is about (the WorkItem of a `work.submitted`).
    pub(crate) subject: String,
}

/// An owed row as read: `group_id, sequence, kind, subject`.
fn owed(row: &crate::sql::Row<'_>) -> crate::sql::Result<Owed> {
    Ok(Owed {
        group_id: row.get(0)?,
        sequence: row.get(1)?,
        kind: row.get(2)?,
        subject: row.get(3)?,
    })
}

/// Notes a reaction owed to the Event at `sequence` of `group_id`.
pub(crate) fn insert(
    conn: &Connection,
    group_id: &str,
    sequence: u64,
    kind: &str,
    subject: &str,
) -> Result<(), Error> {
    conn.run(
        "INSERT INTO reactions (group_id, sequence, kind, subject) VALUES (?1, ?2, ?3, ?4)",
        params![group_id, sequence, kind, subject],
    )?;
    Ok(())
}

/// The owed rows after `after` (Group, sequence), in that order, at most `limit`.
pub(crate) fn after(
    conn: &Connection,
    after: Option<(&str, u64)>,
    limit: u32,
) -> Result<Vec<Owed>, Error> {
    let (group, sequence) = after.unwrap_or(("", 0));
    Ok(conn.rows(
        "SELECT group_id, sequence, kind, subject FROM reactions
         WHERE group_id > ?1 OR (group_id = ?1 AND sequence > ?2)
         ORDER BY group_id, sequence LIMIT ?3",
        params![group, sequence, limit],
        owed,
    )?)
}

/// On an index several servers share: claims for `claimant` until `until` the owed rows after
/// `after` (Group, sequence) that no other server's live claim holds (at `now`), at most
/// `limit`, in order, and answers them. Rows another server's transaction is claiming are
/// skipped, not waited for (`SKIP LOCKED`). A claim only saves work: a reaction's effect is
/// once however many servers run it (its transaction deletes its row, [`delete`]).
pub(crate) fn claim(
    conn: &Connection,
    after: Option<(&str, u64)>,
    limit: u32,
    claimant: &str,
    now: &str,
    until: &str,
) -> Result<Vec<Owed>, Error> {
    let (group, sequence) = after.unwrap_or(("", 0));
    let mut claimed = conn.rows(
        "UPDATE reactions SET claimed_by = ?3, claimed_until = ?5
         WHERE (group_id, sequence) IN (
             SELECT group_id, sequence FROM reactions
             WHERE (group_id > ?1 OR (group_id = ?1 AND sequence > ?2))
               AND (claimed_until IS NULL OR claimed_until <= ?4 OR claimed_by = ?3)
             ORDER BY group_id, sequence LIMIT ?6 FOR UPDATE SKIP LOCKED)
         RETURNING group_id, sequence, kind, subject",
        params![group, sequence, claimant, now, until, limit],
        owed,
    )?;
    claimed.sort_by(|a, b| (&a.group_id, a.sequence).cmp(&(&b.group_id, b.sequence)));
    Ok(claimed)
}

/// Deletes the reaction owed to the Event at `sequence` of `group_id`: whether it was there.
pub(crate) fn delete(conn: &Connection, group_id: &str, sequence: u64) -> Result<bool, Error> {
    let deleted = conn.run(
        "DELETE FROM reactions WHERE group_id = ?1 AND sequence = ?2",
        params![group_id, sequence],
    )?;
    Ok(deleted == 1)
}

#[cfg(test)]
mod tests {
    use crate::db::{Db, Location};

    /// On PostgreSQL: a claim keeps other claimants off an owed row until it ends, never its
    /// own claimant (a reaction that met a backend error is tried again by the same server),
    /// and a row is claimed once per claim whatever order the claimants come in.
    #[tokio::test]
    async fn a_claim_holds_others_off_until_it_ends() {
        let Some(url) = weft_testkit::postgres_database_or_skip() else {
            return;
        };
        let db = Db::open(&Location::Postgres(url)).expect("open");
        let claims = db
            .write(|tx| {
                for sequence in [3, 1, 2] {
                    super::insert(tx, "g1", sequence, "work.submitted", "wi")?;
                }
                let claim = |who: &str, now: &str| {
                    super::claim(tx, None, 10, who, now, "2026-01-01T00:05:00Z")
                        .map(|rows| rows.iter().map(|o| o.sequence).collect::<Vec<_>>())
                };
                Ok([
                    claim("a", "2026-01-01T00:00:00Z")?,
                    claim("b", "2026-01-01T00:01:00Z")?,
                    claim("a", "2026-01-01T00:02:00Z")?,
                    claim("b", "2026-01-01T00:05:00Z")?,
                ])
            })
            .await
            .expect("claims");
        assert_eq!(
            claims,
            [vec![1, 2, 3], vec![], vec![1, 2, 3], vec![1, 2, 3]],
            "a's, none for b, a's again, b's once a's ended"
        );
    }
}
