//! Each Group's usage (the distinct blobs its manifests cite or its members uploaded, disposed
//! ones left out) and its quota, which uploads are held to (`artifacts/upload.rs`, 507
//! `quota_exceeded`).

use weft_api::lifecycle::views::{Quota, Usage};
use weft_api::{ErrorCode, Id};

use super::handle::Lifespan;
use crate::error::{Error, reject};

impl Lifespan<'_> {
    /// Group `group_id`'s usage and quota.
    pub async fn usage(&self, group_id: Id) -> Result<Usage, Error> {
        self.0
            .db
            .read(move |conn| {
                let Some(quota) = crate::rows::groups::quota(conn, group_id.as_str())? else {
                    return Err(reject(
                        ErrorCode::UnknownGroup,
                        format!("group {group_id} does not exist"),
                    ));
                };
                let (artifacts, bytes) = crate::rows::groups::usage(conn, group_id.as_str())?;
                Ok(Usage {
                    bytes,
                    artifacts,
                    quota,
                })
            })
            .await
    }

    /// Sets Group `group_id`'s quota (`None` parts: no limit). Usage above a new quota stays;
    /// only uploads are refused until it is below.
    pub async fn set_quota(&self, group_id: Id, quota: Quota) -> Result<Usage, Error> {
        self.0
            .db
            .write(move |txn| {
                // Its Group's lock through `groups::lock`, not only by the update below, so
                // the writer knows it holds it (a batch takes Groups' locks in order).
                crate::rows::groups::lock(txn, group_id.as_str())?;
                // A bound kept while the Group had no quota was never raised: count anew.
                crate::rows::groups::set_usage_bound(txn, group_id.as_str(), None)?;
                if !crate::rows::groups::set_quota(txn, group_id.as_str(), &quota)? {
                    return Err(reject(
                        ErrorCode::UnknownGroup,
                        format!("group {group_id} does not exist"),
                    ));
                }
                let (artifacts, bytes) = crate::rows::groups::usage(txn, group_id.as_str())?;
                Ok(Usage {
                    bytes,
                    artifacts,
                    quota,
                })
            })
            .await
    }
}
