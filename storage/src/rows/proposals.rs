//! The `proposals` table: the only SQL that names it. A proposal (T1) is kept until a
//! coordinator authorizes it into a WorkItem (T2); its ids stay text, as the work Commands
//! hold them.

use crate::sql::{Connection, OptionalExtension as _, params};
use weft_api::work::contract::WorkContract;

use super::to_json;
use crate::error::Error;
use crate::sql::Cached as _;

/// fsck's rows naming an Event (as `group_id`, `sequence`): each proposal's `work.proposed`.
pub(crate) const PROPOSED_EVENTS: &str = "SELECT group_id, sequence FROM proposals";

/// A new, unauthorized proposal, recorded by the `work.proposed` at `sequence`.
pub(crate) struct NewProposal<'a> {
    pub(crate) proposal_id: &'a str,
    pub(crate) group_id: &'a str,
    pub(crate) mission_id: &'a str,
    pub(crate) proposer: &'a str,
    pub(crate) contract: &'a WorkContract,
    pub(crate) sequence: u64,
}

pub(crate) fn insert(conn: &Connection, new: &NewProposal<'_>) -> Result<(), Error> {
    conn.run(
        "INSERT INTO proposals (proposal_id, group_id, mission_id, proposer, contract, sequence, authorized)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, 0)",
        params![
            new.proposal_id,
            new.group_id,
            new.mission_id,
            new.proposer,
            to_json(new.contract)?,
            new.sequence
        ],
    )?;
    Ok(())
}

/// Whether a proposal `id` exists (ids are unique in the whole store, DESIGN §10).
pub(crate) fn exists(conn: &Connection, id: &str) -> Result<bool, Error> {
    Ok(conn
        .row(
            "SELECT 1 FROM proposals WHERE proposal_id = ?1",
            [id],
            |_| Ok(()),
        )
        .optional()?
        .is_some())
}

/// The Group and Mission of proposal `id`, and whether it was authorized, if it exists.
pub(crate) fn place(conn: &Connection, id: &str) -> Result<Option<(String, String, bool)>, Error> {
    Ok(conn
        .row(
            "SELECT group_id, mission_id, authorized FROM proposals WHERE proposal_id = ?1",
            [id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .optional()?)
}

/// Marks proposal `id` authorized (T2).
pub(crate) fn authorize(conn: &Connection, id: &str) -> Result<(), Error> {
    conn.run(
        "UPDATE proposals SET authorized = 1 WHERE proposal_id = ?1",
        [id],
    )?;
    Ok(())
}

/// The open proposals of Group `group` (unauthorized, of a Mission still `active`), and how
/// many of them `proposer` made.
pub(crate) fn open_in_group(
    conn: &Connection,
    group: &str,
    proposer: &str,
) -> Result<(u64, u64), Error> {
    Ok(conn.row(
        "SELECT COUNT(*), COALESCE(SUM(CASE WHEN p.proposer = ?2 THEN 1 ELSE 0 END), 0) FROM proposals p
         JOIN missions m ON m.mission_id = p.mission_id
         WHERE p.group_id = ?1 AND p.authorized = 0 AND m.state = 'active'",
        params![group, proposer],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )?)
}
