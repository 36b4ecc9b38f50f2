//! The `lease_renewals` table: the only SQL that names it. Each renewal of a lease is kept,
//! with the deadline it set (LSE-3).

use crate::sql::{Connection, params};
use chrono::{DateTime, Utc};

use crate::clock::format_instant;
use crate::error::Error;
use crate::sql::Cached as _;

/// Lease `lease_id` was renewed at `renewed_at`, to `expires_at`.
pub(crate) fn insert(
    conn: &Connection,
    lease_id: &str,
    renewed_at: DateTime<Utc>,
    expires_at: DateTime<Utc>,
) -> Result<(), Error> {
    conn.run(
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
/// along the `lease_id` index, so the cost is `n`'s, never the lease's age.
pub(crate) fn newest(conn: &Connection, lease_id: &str, n: u64) -> Result<Vec<String>, Error> {
    let mut renewals = conn.rows(
        "SELECT renewed_at FROM lease_renewals WHERE lease_id = ?1 ORDER BY rowid DESC LIMIT ?2",
        params![lease_id, n],
        |r| r.get::<_, String>(0),
    )?;
    renewals.reverse();
    Ok(renewals)
}
