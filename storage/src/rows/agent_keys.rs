//! The `agent_keys` table: the only SQL that names it. Every key an Agent ever had, current
//! or retired (with when), so what a retired key signed still verifies.

use crate::sql::{Connection, OptionalExtension as _, params};

use crate::error::Error;
use crate::sql::Cached as _;

/// The Agent that has or had key `keyid`.
pub(crate) fn agent_of(conn: &Connection, keyid: &str) -> Result<Option<String>, Error> {
    Ok(conn
        .row(
            "SELECT agent_id FROM agent_keys WHERE keyid = ?1",
            [keyid],
            |row| row.get(0),
        )
        .optional()?)
}

/// Key `keyid` (bytes `public_key`) is Agent `agent_id`'s from `added_at`.
pub(crate) fn insert(
    conn: &Connection,
    keyid: &str,
    agent_id: &str,
    public_key: &[u8],
    added_at: &str,
) -> Result<(), Error> {
    conn.run(
        "INSERT INTO agent_keys (keyid, agent_id, public_key, added_at) VALUES (?1, ?2, ?3, ?4)",
        params![keyid, agent_id, public_key, added_at],
    )?;
    Ok(())
}

/// The Agent's current key is retired at `at`.
pub(crate) fn retire_current(conn: &Connection, agent_id: &str, at: &str) -> Result<(), Error> {
    conn.run(
        "UPDATE agent_keys SET retired_at = ?2 WHERE agent_id = ?1 AND retired_at IS NULL",
        params![agent_id, at],
    )?;
    Ok(())
}

/// Key `keyid`, current or retired, with its Agent: (agent id, key bytes).
pub(crate) fn recorded(conn: &Connection, keyid: &str) -> Result<Option<(String, Vec<u8>)>, Error> {
    Ok(conn
        .row(
            "SELECT agent_id, public_key FROM agent_keys WHERE keyid = ?1",
            [keyid],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .optional()?)
}

/// When a key was retired and when its Agent was deactivated (either may be `None`).
pub(crate) type Retirement = (Option<String>, Option<String>);

/// [`Retirement`] of key `keyid` (a join on `agents`), if the key is known.
pub(crate) fn retirement(conn: &Connection, keyid: &str) -> Result<Option<Retirement>, Error> {
    Ok(conn
        .row(
            "SELECT k.retired_at, a.deactivated_at FROM agent_keys k
             JOIN agents a ON a.agent_id = k.agent_id WHERE k.keyid = ?1",
            [keyid],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .optional()?)
}

/// One key of an Agent: keyid, bytes, added, retired.
pub(crate) type KeyRow = (String, Vec<u8>, String, Option<String>);

/// An Agent's keys, current first, then by retirement, newest first.
pub(crate) fn of_agent(conn: &Connection, agent_id: &str) -> Result<Vec<KeyRow>, Error> {
    let keys = conn.rows(
        "SELECT keyid, public_key, added_at, retired_at FROM agent_keys WHERE agent_id = ?1
         ORDER BY retired_at IS NOT NULL, retired_at DESC, added_at DESC",
        [agent_id],
        |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?)),
    )?;
    Ok(keys)
}
