//! The inert audit records (OFL-2) a WorkItem's view shows: the newest few, oldest first,
//! and whether there are older ones, so the view (which every Command answers and stores)
//! does not grow with what fenced owners sent (issue #40). How many are kept at all is
//! capped where they are written (`artifacts/binding.rs`).

use crate::sql::{Ahead, Connection};
use weft_api::work::views::InertPublication;

use crate::error::Error;

/// Inert records a WorkItem view shows.
const SHOWN: u64 = 32;

/// The newest [`SHOWN`] inert records of `work_item_id`, oldest first, and whether older
/// ones exist.
/// Sent ahead of its use (`sql/ahead.rs`).
pub(super) fn newest(
    conn: &Connection,
    work_item_id: &str,
) -> Result<Ahead<(Vec<InertPublication>, bool), Error>, Error> {
    let rows = crate::rows::inert_publications::newest(conn, work_item_id, SHOWN + 1)?;
    Ok(rows.then(|mut shown: Vec<InertPublication>| {
        let truncated = shown.len() as u64 > SHOWN;
        shown.truncate(SHOWN as usize);
        shown.reverse();
        Ok((shown, truncated))
    }))
}
