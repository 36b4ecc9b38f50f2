//! Caps on what one Group or one producer may pile up in the index (issue #40): open
//! proposals per Group. Each is checked before the Command or publication runs, on a read
//! connection, so a refusal appends nothing; two racing requests may both pass one below the
//! cap, which bounds the overshoot by the writer's concurrency, not by the flood.

use crate::sql::Cached as _;
use weft_api::{ErrorCode, Id};

use crate::engine::Engine;
use crate::error::{Error, reject};

impl Engine {
    /// Refuses `work.propose` with `quota_exceeded` (409) while `group` holds as many open
    /// (not yet authorized) proposals as the server allows.
    pub(crate) async fn admit_proposal(&self, group: &Id) -> Result<(), Error> {
        let cap = self.limits.max_open_proposals();
        if cap == 0 {
            return Ok(());
        }
        let group = group.clone();
        let open: u64 = self
            .db
            .read(move |conn| {
                conn.row(
                    "SELECT COUNT(*) FROM proposals WHERE group_id = ?1 AND authorized = 0",
                    [group.as_str()],
                    |row| row.get(0),
                )
                .map_err(Error::from)
            })
            .await?;
        if open >= cap {
            return Err(reject(
                ErrorCode::QuotaExceeded,
                format!(
                    "the Group holds {open} open proposals, at most {cap}; a coordinator \
                     authorizes or the Mission ends them first"
                ),
            ));
        }
        Ok(())
    }
}
