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

/// The newest `n` renewal instants of a lease as stored, oldest first (LSE-3): read backwards
/// along the `lease_id` index, so the cost is `n`'s, never the lease's age. Sent ahead of its use
/// (`sql/ahead.rs`): read with `get`.
pub(crate) fn newest(
    conn: &Connection,
    lease_id: &str,
    n: u64,
) -> Result<Ahead<Vec<String>, Error>, Error> {
    let renewals = conn.rows_ahead(
        "SELECT renewed_at FROM lease_renewals WHERE lease_id = ?1 ORDER BY rowid DESC LIMIT ?2",
        params![lease_id, n],
        |r| r.get::<_, String>(0),
    )?;
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
        // The `keep`-th newest row's rowid bounds what goes; fewer rows than `keep` make
        // the bound NULL, and nothing goes.
        conn.run(
            "DELETE FROM lease_renewals WHERE lease_id = ?1 AND rowid < (
                 SELECT rowid FROM lease_renewals WHERE lease_id = ?1
                 ORDER BY rowid DESC LIMIT 1 OFFSET ?2)",
            params![lease_id, keep - 1],
        )?
    };
    Ok(forgotten as u64)
}
