//! The `agents` table: the only SQL that names it. An Agent's current key (bytes and keyid),
//! card version, registration and deactivation. Its instants and key bytes are handed back
//! as stored: `access` and `agents` decode them where they already did (the key's curve point
//! only when a signature is checked).

use crate::sql::{Ahead, Connection, Engine, OptionalExtension as _, params};

use crate::error::Error;
use crate::sql::Cached as _;
use crate::unit::Conn;

/// Holds Agent `agent_id`'s row until the transaction ends (`FOR NO KEY UPDATE`, as a Group's
/// lock: a foreign key check naming the Agent still passes). Two servers changing one Agent's
/// key or state take turns here, and each reads the Agent's key and state after it, so a
/// rotation never retires a key another rotation has since replaced. Taken after the Agent's
/// Groups' locks (the README's lock order); the writer ends its batch after the job
/// (`Memo::note_row_lock`), so no later job takes a Group's lock under it. On SQLite the one
/// writer already serialises them.
pub(crate) fn lock(c: &impl Conn, agent_id: &str) -> Result<(), Error> {
    hold_row(
        c,
        agent_id,
        "SELECT 1 FROM agents WHERE agent_id = ?1 FOR NO KEY UPDATE",
    )
}

/// Holds Agent `agent_id`'s row against [`lock`] until the transaction ends (`FOR SHARE`):
/// a Membership set reads the Agent's state under it, so a deactivation through another
/// server has finished first (and the set refuses) or waits for the set (and then sees the
/// new Membership). Taken after the Group's lock, as [`lock`] is. Nothing on SQLite.
pub(crate) fn share(c: &impl Conn, agent_id: &str) -> Result<(), Error> {
    hold_row(
        c,
        agent_id,
        "SELECT 1 FROM agents WHERE agent_id = ?1 FOR SHARE",
    )
}

/// [`lock`] and [`share`]: `sql` run on PostgreSQL only, the row noted for the writer.
fn hold_row(c: &impl Conn, agent_id: &str, sql: &str) -> Result<(), Error> {
    let conn = c.conn();
    if conn.engine() == Engine::Postgres {
        if let Some(memo) = c.memo() {
            memo.note_row_lock(&format!("agent:{agent_id}"));
        }
        conn.rows(sql, [agent_id], |row| row.get::<_, i64>(0))?;
    }
    Ok(())
}

/// The current key bytes of Agent `agent_id`, if it is registered.
pub(crate) fn public_key(conn: &Connection, agent_id: &str) -> Result<Option<Vec<u8>>, Error> {
    Ok(conn
        .row(
            "SELECT public_key FROM agents WHERE agent_id = ?1",
            [agent_id],
            |row| row.get(0),
        )
        .optional()?)
}

/// A new Agent with its first key.
pub(crate) fn insert(
    conn: &Connection,
    agent_id: &str,
    public_key: &[u8],
    keyid: &str,
    card_version: &str,
    registered_at: &str,
) -> Result<(), Error> {
    conn.run(
        "INSERT INTO agents (agent_id, public_key, keyid, agent_card_version, registered_at)
         VALUES (?1, ?2, ?3, ?4, ?5)",
        params![agent_id, public_key, keyid, card_version, registered_at],
    )?;
    Ok(())
}

pub(crate) fn set_card_version(
    conn: &Connection,
    agent_id: &str,
    card_version: &str,
) -> Result<(), Error> {
    conn.run(
        "UPDATE agents SET agent_card_version = ?2 WHERE agent_id = ?1",
        params![agent_id, card_version],
    )?;
    Ok(())
}

/// `None`: no such Agent; `Some(None)`: active; `Some(Some(at))`: deactivated at `at`.
pub(crate) fn deactivated_at(
    conn: &Connection,
    agent_id: &str,
) -> Result<Option<Option<String>>, Error> {
    Ok(conn
        .row(
            "SELECT deactivated_at FROM agents WHERE agent_id = ?1",
            [agent_id],
            |row| row.get(0),
        )
        .optional()?)
}

pub(crate) fn deactivate(conn: &Connection, agent_id: &str, at: &str) -> Result<(), Error> {
    conn.run(
        "UPDATE agents SET deactivated_at = ?2 WHERE agent_id = ?1",
        params![agent_id, at],
    )?;
    Ok(())
}

/// The current keyid of a registered Agent.
pub(crate) fn keyid(conn: &Connection, agent_id: &str) -> Result<String, Error> {
    Ok(conn.row(
        "SELECT keyid FROM agents WHERE agent_id = ?1",
        [agent_id],
        |row| row.get(0),
    )?)
}

/// The Agent's current key becomes `public_key` (`keyid`).
pub(crate) fn set_key(
    conn: &Connection,
    agent_id: &str,
    public_key: &[u8],
    keyid: &str,
) -> Result<(), Error> {
    conn.run(
        "UPDATE agents SET public_key = ?2, keyid = ?3 WHERE agent_id = ?1",
        params![agent_id, public_key, keyid],
    )?;
    Ok(())
}

/// The active Agent whose current key is `keyid`: its id, key bytes and card version.
pub(crate) fn active_by_keyid(
    conn: &Connection,
    keyid: &str,
) -> Result<Option<(String, Vec<u8>, String)>, Error> {
    Ok(conn
        .row(
            "SELECT agent_id, public_key, agent_card_version FROM agents
             WHERE keyid = ?1 AND deactivated_at IS NULL",
            [keyid],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
        )
        .optional()?)
}

/// The id of the active Agent whose current key is `keyid` (a transaction re-checking a key
/// verified before it: no curve point decompressed), sent ahead (`sql/ahead.rs`).
pub(crate) fn active_id_by_keyid_ahead(
    conn: &Connection,
    keyid: &str,
) -> Result<Ahead<Option<String>, Error>, Error> {
    let rows = conn.rows_ahead(
        "SELECT agent_id FROM agents WHERE keyid = ?1 AND deactivated_at IS NULL",
        [keyid],
        |row| row.get::<_, String>(0),
    )?;
    Ok(rows.then(|rows: Vec<String>| Ok::<_, Error>(rows.into_iter().next())))
}

/// An Agent's card version, registration and deactivation instants, if it is registered.
pub(crate) fn record(
    conn: &Connection,
    agent_id: &str,
) -> Result<Option<(String, String, Option<String>)>, Error> {
    Ok(conn
        .row(
            "SELECT agent_card_version, registered_at, deactivated_at FROM agents
             WHERE agent_id = ?1",
            [agent_id],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
        )
        .optional()?)
}

/// How many Agents are registered.
pub(crate) fn count(conn: &Connection) -> Result<u64, Error> {
    Ok(conn.row("SELECT COUNT(*) FROM agents", [], |row| row.get(0))?)
}

/// An Agent's signed card (its envelope as JSON), when it was issued (Unix milliseconds) and
/// registered, if it has one.
pub(crate) fn card(
    conn: &Connection,
    agent_id: &str,
) -> Result<Option<(String, i64, String)>, Error> {
    Ok(conn
        .row(
            "SELECT card, card_issued_ms, card_registered_at FROM agents
             WHERE agent_id = ?1 AND card IS NOT NULL",
            [agent_id],
            |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)),
        )
        .optional()?)
}

/// Sets an Agent's card, its version (the one signed payloads must claim from now on) and
/// the concurrency it declares.
pub(crate) fn set_card(
    conn: &Connection,
    agent_id: &str,
    card: &str,
    issued_ms: i64,
    registered_at: &str,
    version: &str,
    max_concurrency: u32,
) -> Result<(), Error> {
    conn.run(
        "UPDATE agents SET card = ?2, card_issued_ms = ?3, card_registered_at = ?4,
                agent_card_version = ?5, max_concurrency = ?6
         WHERE agent_id = ?1",
        params![
            agent_id,
            card,
            issued_ms,
            registered_at,
            version,
            max_concurrency
        ],
    )?;
    Ok(())
}

/// The concurrency an Agent's card declares, if it has a card.
pub(crate) fn max_concurrency(conn: &Connection, agent_id: &str) -> Result<Option<u32>, Error> {
    Ok(conn
        .row(
            "SELECT max_concurrency FROM agents WHERE agent_id = ?1",
            [agent_id],
            |row| row.get::<_, Option<u32>>(0),
        )
        .optional()?
        .flatten())
}

/// Forgets an Agent's card (its key was rotated or it was deactivated: the card names a key
/// that no longer speaks for it). The card version signed payloads claim stays.
pub(crate) fn forget_card(conn: &Connection, agent_id: &str) -> Result<(), Error> {
    conn.run(
        "UPDATE agents SET card = NULL, card_issued_ms = NULL, card_registered_at = NULL
         WHERE agent_id = ?1",
        [agent_id],
    )?;
    Ok(())
}
