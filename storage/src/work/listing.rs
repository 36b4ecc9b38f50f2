//! The Missions a reader may see, newest first: the console's landing page lists them. Each
//! is read through the same visibility check as `GET /v1/missions/{id}` (CTX-5), so a
//! Mission-scoped member lists only its own Missions.

use weft_api::work::views::MissionView;

use super::{mission_view, visible_mission};
use crate::access::Reader;
use crate::error::Error;
use crate::work::handle::Work;

impl Work<'_> {
    /// The Missions `reader` may see, newest first (at most `limit`).
    pub async fn missions(&self, reader: &Reader, limit: u32) -> Result<Vec<MissionView>, Error> {
        let reader = reader.clone();
        let group = match &reader {
            Reader::Admin => None,
            Reader::Agent { group_id, .. } => Some(group_id.to_string()),
        };
        self.0
            .db
            .read(move |conn| {
                let ids = crate::rows::missions::ids_newest_first(conn, group.as_deref())?;
                let mut missions = Vec::new();
                for id in ids {
                    if missions.len() as u32 >= limit {
                        break;
                    }
                    // Not visible (another Mission of a scoped member): skipped, not named.
                    match visible_mission(conn, &reader, &id) {
                        Ok(row) => missions.push(mission_view(conn, &row)?),
                        Err(error) if error.code() == weft_api::ErrorCode::NotFound => {}
                        Err(error) => return Err(error),
                    }
                }
                Ok(missions)
            })
            .await
    }
}
