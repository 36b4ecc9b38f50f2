//! The `lease_renewals` table: the only SQL that names it. Each renewal of a lease is kept,
//! with the deadline it set (LSE-3), until no view can read it (an ended lease's, or an open
//! one's past its newest [`SHOWN`] + 1): the log's `lease.renewed` Events keep them all.

use crate::sql::{Ahead, Connection, params};
use chrono::{DateTime, Utc};

use crate::clock::format_instant;
use crate::error::Error;
use crate::sql::Cached as _;

/// How many of a lease's newest renewals its view lists (`renewalsTruncated` says whether
/// there are older ones). Every Command answers the view, so what it lists is paid on every
/// renewal: 64 renewals and 256 history sequences cost a renewal 14 % more server CPU than
/// 16 and 64 (issue #44, `bench/write_cost.rs`); the log holds all of them. An open lease's
/// rows past the newest `SHOWN + 1` are never read, and are forgotten (`lifespan/spent.rs`).
pub(crate) const SHOWN: u64 = 16;

/// Lease `lease_id` was renewed at `renewed_at`, to `expires_at`.
pub(crate) fn insert(
    conn: &Connection,
    lease_id: &str,
    renewed_at: DateTime<Utc>,
    expires_at: DateTime<Utc>,
) -> Result<(), Error> {
    conn.run_later(
        "INSERT INTO lease_renewals (lease_id, renewed_at, expires_at) VALUES (?1, ?2, ?3)",
        params![
            lease_id,
            format_instant(renewed_at),
            format_instant(expires_at)
        ],
    )?;
    Ok(())
}

/// A lease's newest renewals, newest first ([`newest`]).
pub(crate) const NEWEST: &str = "SELECT renewed_at FROM lease_renewals WHERE lease_id = ?1
     ORDER BY renewed_at DESC, rowid DESC LIMIT ?2";

/// The newest `n` renewal instants of a lease as stored, oldest first (LSE-3): read backwards
/// along the `(lease_id, renewed_at)` index alone (V46), so the cost is `n`'s, never the lease's
/// age. Newest by instant, then by insertion for renewals stored at one instant: a renewal is
/// stamped with its writer's clock as it commits, so the two orders differ only where two
/// servers' clocks do. Sent ahead of its use (`sql/ahead.rs`): read with `get`.
pub(crate) fn newest(
    conn: &Connection,
    lease_id: &str,
    n: u64,
) -> Result<Ahead<Vec<String>, Error>, Error> {
    let renewals = conn.rows_ahead(NEWEST, params![lease_id, n], |r| r.get::<_, String>(0))?;
    Ok(renewals.then(|mut renewals: Vec<String>| {
        renewals.reverse();
        Ok(renewals)
    }))
}

/// Up to `n` leases that have renewal rows, by lease id after `after` (a walk in id order,
/// so the sweep of `lifespan/spent.rs` reads each once).
pub(crate) fn leases_after(conn: &Connection, after: &str, n: u64) -> Result<Vec<String>, Error> {
    Ok(conn.rows(
        "SELECT DISTINCT lease_id FROM lease_renewals WHERE lease_id > ?1 ORDER BY lease_id LIMIT ?2",
        params![after, n],
        |r| r.get::<_, String>(0),
    )?)
}

/// Forgets lease `lease_id`'s renewal rows but its newest `keep` (all of them when `keep` is
/// 0); answers how many went.
pub(crate) fn forget_all_but_newest(
    conn: &Connection,
    lease_id: &str,
    keep: u64,
) -> Result<u64, Error> {
    let forgotten = if keep == 0 {
        conn.run(
            "DELETE FROM lease_renewals WHERE lease_id = ?1",
            params![lease_id],
        )?
    } else {
        // The `keep`-th newest row (in `newest`'s order) bounds what goes; fewer rows than
        // `keep` make the bound NULL, and nothing goes.
        conn.run(
            "DELETE FROM lease_renewals WHERE lease_id = ?1 AND (renewed_at, rowid) < (
                 SELECT renewed_at, rowid FROM lease_renewals WHERE lease_id = ?1
                 ORDER BY renewed_at DESC, rowid DESC LIMIT 1 OFFSET ?2)",
            params![lease_id, keep - 1],
        )?
    };
    Ok(forgotten as u64)
}

#[cfg(test)]
mod tests {
    use crate::db::{Db, Location};
    use crate::sql::Cached as _;

    /// On PostgreSQL: a lease's newest renewals are read backwards along the lease's rows,
    /// a few pages whatever its age and whatever other leases renewed in between (V39:
    /// before it, the plan sorted all of the lease's rows).
    #[tokio::test]
    async fn a_leases_newest_renewals_read_a_few_pages() {
        let Some(url) = weft_testkit::postgres_database_or_skip() else {
            return;
        };
        let db = Db::open(&Location::Postgres(url)).expect("open");
        let start = chrono::Utc::now();
        let (newest, fetched) = db
            .write(move |tx| {
                // No foreign-key checks (the cluster's user is its superuser): the leases
                // these rows name are beside the point.
                tx.run("SET LOCAL session_replication_role = replica", [])?;
                for i in 0..3000 {
                    let at = start + chrono::Duration::milliseconds(i);
                    for lease in ["l-0", "l-1", "l-2"] {
                        super::insert(tx, lease, at, at + chrono::Duration::seconds(30))?;
                    }
                }
                // A table this small is read whole by choice; a large one would not be.
                tx.run("SET LOCAL enable_seqscan = off", [])?;
                let before = crate::rows::pages_fetched(tx, "lease_renewals")?;
                let newest = super::newest(tx, "l-1", super::SHOWN)?.get(tx)?;
                let fetched = crate::rows::pages_fetched(tx, "lease_renewals")? - before;
                Ok((newest, fetched))
            })
            .await
            .expect("renewed");
        let last = start + chrono::Duration::milliseconds(2999);
        assert_eq!(newest.len(), super::SHOWN as usize);
        assert_eq!(newest.last(), Some(&crate::clock::format_instant(last)));
        assert!(fetched <= 10, "fetched {fetched} pages");
    }
}
