//! The `offers` table: the only SQL that names it, and its row [`OfferRow`]. An offer's
//! status is a closed set ([`OfferStatus`]); its deadline is an instant compared as time
//! (an offer is `expired` in views once its deadline has passed while it was still live).
//! Ids stay text, as the work Commands hold them.

use crate::sql::{Ahead, Connection, OptionalExtension as _, params};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use weft_api::work::contract::SelectionBasis;

use super::{from_json, instant, parse_name, to_json};
use crate::clock::format_instant;
use crate::error::Error;
use crate::sql::Cached as _;

/// What became of an offer, as its row stores it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum OfferStatus {
    /// Open to its candidates until its deadline.
    Live,
    /// A candidate accepted it (T4).
    Accepted,
    /// Replaced by a newer offer, or another candidate accepted (T3).
    Withdrawn,
}

/// How many of a WorkItem's newest offers its view lists (`offersTruncated` says whether
/// there are older ones): every Command on it answers the view, so a Coordinator offering it
/// again and again made each Command cost every offer so far. The log has them all;
/// a verified or cancelled WorkItem's older ones are forgotten (`lifespan/spent.rs`).
pub(crate) const SHOWN: u64 = 16;

/// Candidate → its structured decline reason (OFR-9), as `offers.declined` holds it.
pub(crate) type DeclineMap = serde_json::Map<String, serde_json::Value>;

/// An `offers` row.
#[derive(Clone, Debug)]
pub(crate) struct OfferRow {
    pub(crate) offer_id: String,
    pub(crate) candidates: Vec<String>,
    pub(crate) expires_at: DateTime<Utc>,
    pub(crate) status: OfferStatus,
    pub(crate) contract_revision: u64,
    pub(crate) selection_basis: SelectionBasis,
    /// Candidate → its structured decline reason (OFR-9).
    pub(crate) declined: DeclineMap,
}

impl OfferRow {
    /// The offer's deadline has passed at `now`.
    pub(crate) fn expired(&self, now: DateTime<Utc>) -> bool {
        self.expires_at <= now
    }

    /// The status a view shows at `now`: `live`, `expired`, `accepted` or `withdrawn`.
    pub(crate) fn shown_status(&self, now: DateTime<Utc>) -> &'static str {
        match self.status {
            OfferStatus::Live if self.expired(now) => "expired",
            OfferStatus::Live => "live",
            OfferStatus::Accepted => "accepted",
            OfferStatus::Withdrawn => "withdrawn",
        }
    }

    /// The deadline as views show it.
    pub(crate) fn expires_at_text(&self) -> String {
        format_instant(self.expires_at)
    }
}

type Raw = (String, String, String, String, u64, String, String);

fn raw(row: &crate::sql::Row<'_>) -> crate::sql::Result<Raw> {
    Ok((
        row.get(0)?,
        row.get(1)?,
        row.get(2)?,
        row.get(3)?,
        row.get(4)?,
        row.get(5)?,
        row.get(6)?,
    ))
}

fn typed(
    (offer_id, candidates, expires_at, status, contract_revision, basis, declined): Raw,
) -> Result<OfferRow, Error> {
    Ok(OfferRow {
        offer_id,
        candidates: from_json(&candidates)?,
        expires_at: instant(&expires_at)?,
        status: parse_name(&status)?,
        contract_revision,
        selection_basis: from_json(&basis)?,
        declined: from_json(&declined)?,
    })
}

/// Offer `offer_id` of WorkItem `work_item_id`, if there is one.
pub(crate) fn load(
    conn: &Connection,
    work_item_id: &str,
    offer_id: &str,
) -> Result<Option<OfferRow>, Error> {
    conn.row(
        "SELECT offer_id, candidates, expires_at, status, contract_revision, selection_basis, declined
         FROM offers WHERE work_item_id = ?1 AND offer_id = ?2",
        params![work_item_id, offer_id],
        raw,
    )
    .optional()?
    .map(typed)
    .transpose()
}

/// The newest `n` offers of WorkItem `work_item_id`, oldest first: read backwards along
/// `offers_work_item_sequence`, so the cost is `n`'s, never the WorkItem's offer count. Sent ahead of its use
/// (`sql/ahead.rs`): read with `get`.
pub(crate) fn newest(
    conn: &Connection,
    work_item_id: &str,
    n: u64,
) -> Result<Ahead<Vec<OfferRow>, Error>, Error> {
    let rows = conn.rows_ahead(
        "SELECT offer_id, candidates, expires_at, status, contract_revision, selection_basis, declined
         FROM offers WHERE work_item_id = ?1 ORDER BY sequence DESC LIMIT ?2",
        params![work_item_id, n],
        raw,
    )?;
    Ok(rows.then(|rows: Vec<Raw>| rows.into_iter().rev().map(typed).collect()))
}

/// Whether WorkItem `work_item_id` has an offer `offer_id`.
pub(crate) fn exists(conn: &Connection, work_item_id: &str, offer_id: &str) -> Result<bool, Error> {
    Ok(conn
        .row(
            "SELECT 1 FROM offers WHERE work_item_id = ?1 AND offer_id = ?2",
            params![work_item_id, offer_id],
            |_| Ok(()),
        )
        .optional()?
        .is_some())
}

/// The newest accepted offer of WorkItem `work_item_id` and the contract revision accepted.
pub(crate) fn newest_accepted(
    conn: &Connection,
    work_item_id: &str,
) -> Result<Option<(String, u64)>, Error> {
    Ok(conn
        .row(
            "SELECT offer_id, contract_revision FROM offers WHERE work_item_id = ?1 AND status = 'accepted'
             ORDER BY sequence DESC LIMIT 1",
            [work_item_id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?)
}

/// The ids of WorkItem `work_item_id`'s live offers (deadline passed or not), oldest first.
pub(crate) fn live_ids(conn: &Connection, work_item_id: &str) -> Result<Vec<String>, Error> {
    let live = conn.rows(
        "SELECT offer_id FROM offers WHERE work_item_id = ?1 AND status = 'live' ORDER BY sequence",
        [work_item_id],
        |r| r.get::<_, String>(0),
    )?;
    Ok(live)
}

/// A new live offer, nobody declined yet; its `work.offered` sequence is set after the Event
/// is appended ([`set_sequence`]).
pub(crate) struct NewOffer<'a> {
    pub(crate) work_item_id: &'a str,
    pub(crate) offer_id: &'a str,
    pub(crate) candidates: &'a [weft_api::Id],
    pub(crate) expires_at: DateTime<Utc>,
    pub(crate) selection_basis: &'a SelectionBasis,
    pub(crate) contract_revision: u64,
}

pub(crate) fn insert(conn: &Connection, new: &NewOffer<'_>) -> Result<(), Error> {
    let sequence_placeholder = 0;
    conn.run(
        "INSERT INTO offers (work_item_id, offer_id, candidates, expires_at, selection_basis, contract_revision,
                             status, declined, sequence)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'live', '{}', ?7)",
        params![
            new.work_item_id,
            new.offer_id,
            to_json(&new.candidates)?,
            format_instant(new.expires_at),
            to_json(new.selection_basis)?,
            new.contract_revision,
            sequence_placeholder
        ],
    )?;
    Ok(())
}

/// The sequence of the offer's `work.offered`.
pub(crate) fn set_sequence(
    conn: &Connection,
    work_item_id: &str,
    offer_id: &str,
    sequence: u64,
) -> Result<(), Error> {
    conn.run(
        "UPDATE offers SET sequence = ?3 WHERE work_item_id = ?1 AND offer_id = ?2",
        params![work_item_id, offer_id, sequence],
    )?;
    Ok(())
}

/// The declines of an offer that exists.
pub(crate) fn declined(
    conn: &Connection,
    work_item_id: &str,
    offer_id: &str,
) -> Result<DeclineMap, Error> {
    let declined: String = conn.row(
        "SELECT declined FROM offers WHERE work_item_id = ?1 AND offer_id = ?2",
        params![work_item_id, offer_id],
        |r| r.get(0),
    )?;
    from_json(&declined)
}

pub(crate) fn set_declined(
    conn: &Connection,
    work_item_id: &str,
    offer_id: &str,
    declined: &DeclineMap,
) -> Result<(), Error> {
    conn.run(
        "UPDATE offers SET declined = ?3 WHERE work_item_id = ?1 AND offer_id = ?2",
        params![work_item_id, offer_id, to_json(declined)?],
    )?;
    Ok(())
}

/// T4: the offer is accepted, of contract revision `contract_revision` (CON-5).
pub(crate) fn accept(
    conn: &Connection,
    work_item_id: &str,
    offer_id: &str,
    contract_revision: u64,
) -> Result<(), Error> {
    conn.run(
        "UPDATE offers SET status = 'accepted', contract_revision = ?3 WHERE work_item_id = ?1 AND offer_id = ?2",
        params![work_item_id, offer_id, contract_revision],
    )?;
    Ok(())
}

/// T3: the offer is withdrawn.
pub(crate) fn withdraw(conn: &Connection, work_item_id: &str, offer_id: &str) -> Result<(), Error> {
    conn.run(
        "UPDATE offers SET status = 'withdrawn' WHERE work_item_id = ?1 AND offer_id = ?2",
        params![work_item_id, offer_id],
    )?;
    Ok(())
}

/// Up to `n` WorkItems with more than `shown` offers, by id after `after` (a walk in id
/// order, so the sweep of `lifespan/spent.rs` reads each once).
pub(crate) fn crowded_after(
    conn: &Connection,
    after: &str,
    shown: u64,
    n: u64,
) -> Result<Vec<String>, Error> {
    Ok(conn.rows(
        "SELECT work_item_id FROM offers WHERE work_item_id > ?1 GROUP BY work_item_id
         HAVING count(*) > ?2 ORDER BY work_item_id LIMIT ?3",
        params![after, shown, n],
        |r| r.get::<_, String>(0),
    )?)
}

/// Forgets WorkItem `work_item_id`'s offers older than its newest `keep` (`keep` ≥ 1), except
/// one still live at `now` and its newest accepted one; answers how many went. Only for a
/// WorkItem no Command offers again (a forgotten id could otherwise be offered twice).
pub(crate) fn forget_all_but_newest(
    conn: &Connection,
    work_item_id: &str,
    keep: u64,
    now: DateTime<Utc>,
) -> Result<u64, Error> {
    // The `keep`-th newest offer's sequence bounds what goes; fewer offers than `keep` make
    // the bound NULL, and nothing goes.
    let forgotten = conn.run(
        "DELETE FROM offers WHERE work_item_id = ?1
         AND sequence < (SELECT sequence FROM offers WHERE work_item_id = ?1
                         ORDER BY sequence DESC LIMIT 1 OFFSET ?2)
         AND NOT (status = 'live' AND expires_at > ?3)
         AND offer_id NOT IN (SELECT offer_id FROM offers WHERE work_item_id = ?1
                              AND status = 'accepted' ORDER BY sequence DESC LIMIT 1)",
        params![work_item_id, keep.saturating_sub(1), format_instant(now)],
    )?;
    Ok(forgotten as u64)
}

/// fsck's rows naming an Event through a WorkItem's Group (as `group_id`, `sequence`): each
/// offer's `work.offered`.
pub(crate) const OFFERED_EVENTS: &str =
    "SELECT w.group_id AS group_id, o.sequence AS sequence FROM offers o
     JOIN work_items w ON w.work_item_id = o.work_item_id";
