//! The inert audit records (OFL-2) a WorkItem's view shows: the newest few, oldest first,
//! and whether there are older ones, so the view (which every Command answers and stores)
//! does not grow with what fenced owners sent (issue #40). How many are kept at all is
//! capped where they are written (`artifacts/binding.rs`).

use rusqlite::{Connection, params};
use weft_api::work::views::InertPublication;

use crate::error::Error;

/// Inert records a WorkItem view shows.
const SHOWN: u64 = 32;

/// The newest [`SHOWN`] inert records of `work_item_id`, oldest first, and whether older
/// ones exist.
pub(super) fn newest(
    conn: &Connection,
    work_item_id: &str,
) -> Result<(Vec<InertPublication>, bool), Error> {
    let mut statement = conn.prepare_cached(
        "SELECT manifest_id, producer, lease_id, ownership_epoch, received_at
         FROM inert_publications WHERE work_item_id = ?1
         ORDER BY received_at DESC, manifest_id DESC LIMIT ?2",
    )?;
    let rows = statement
        .query_map(params![work_item_id, SHOWN + 1], |r| {
            Ok((
                r.get::<_, Vec<u8>>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, u64>(3)?,
                r.get::<_, String>(4)?,
            ))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    let truncated = rows.len() as u64 > SHOWN;
    let mut shown = rows
        .into_iter()
        .take(SHOWN as usize)
        .map(
            |(manifest_id, producer, lease_id, ownership_epoch, received_at)| {
                Ok(InertPublication {
                    manifest_id: weft_api::ArtifactId(crate::events::to32(manifest_id)?),
                    producer,
                    lease_id,
                    ownership_epoch,
                    received_at,
                })
            },
        )
        .collect::<Result<Vec<_>, Error>>()?;
    shown.reverse();
    Ok((shown, truncated))
}
