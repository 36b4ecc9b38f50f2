//! The client side of the lifecycle's operator surface (`/v1/admin/…`, issue #46): retention,
//! holds, collection, usage and quotas. Admin token only.

use reqwest::Method;

use super::{Client, Error};
use crate::Id;
use crate::lifecycle::views::{
    CollectionReport, HoldRequest, HoldView, Holds, Policies, PolicyView, Quota, RetentionRequest,
    Usage,
};

impl Client {
    /// `PUT /v1/admin/groups/{g}/retention`.
    pub async fn set_retention(
        &self,
        group_id: &Id,
        request: &RetentionRequest,
    ) -> Result<PolicyView, Error> {
        let path = format!("/v1/admin/groups/{group_id}/retention");
        Ok(self.send_json(Method::PUT, &path, Some(request)).await?.1)
    }

    /// `GET /v1/admin/groups/{g}/retention`.
    pub async fn retention(&self, group_id: &Id) -> Result<Policies, Error> {
        let path = format!("/v1/admin/groups/{group_id}/retention");
        Ok(self.send_json::<(), _>(Method::GET, &path, None).await?.1)
    }

    /// `POST /v1/admin/holds`.
    pub async fn place_hold(&self, request: &HoldRequest) -> Result<HoldView, Error> {
        Ok(self
            .send_json(Method::POST, "/v1/admin/holds", Some(request))
            .await?
            .1)
    }

    /// `DELETE /v1/admin/holds/{id}`.
    pub async fn lift_hold(&self, hold_id: &Id) -> Result<HoldView, Error> {
        let path = format!("/v1/admin/holds/{hold_id}");
        Ok(self
            .send_json::<(), _>(Method::DELETE, &path, None)
            .await?
            .1)
    }

    /// `GET /v1/admin/holds[?group=G]`, every page.
    pub async fn holds(&self, group_id: Option<&Id>) -> Result<Holds, Error> {
        let path = match group_id {
            Some(group) => format!("/v1/admin/holds?group={group}&limit=1000"),
            None => "/v1/admin/holds?limit=1000".to_owned(),
        };
        self.every_hold(&path).await
    }

    /// Every page of a holds listing at `path` (which has a query already).
    async fn every_hold(&self, path: &str) -> Result<Holds, Error> {
        let mut all = Holds {
            holds: Vec::new(),
            next: None,
        };
        let mut after: Option<Id> = None;
        loop {
            let page_path = match &after {
                Some(after) => format!("{path}&after={after}"),
                None => path.to_owned(),
            };
            let page: Holds = self
                .send_json::<(), _>(Method::GET, &page_path, None)
                .await?
                .1;
            all.holds.extend(page.holds);
            match page.next {
                Some(next) => after = Some(next),
                None => return Ok(all),
            }
        }
    }

    /// `POST /v1/groups/{g}/holds`: a hold placed by the session's Agent as the Group's
    /// approver.
    pub async fn place_group_hold(
        &self,
        group_id: &Id,
        request: &HoldRequest,
    ) -> Result<HoldView, Error> {
        let path = format!("/v1/groups/{group_id}/holds");
        Ok(self.send_json(Method::POST, &path, Some(request)).await?.1)
    }

    /// `DELETE /v1/groups/{g}/holds/{id}`: lifts one of the Group's approvers' holds.
    pub async fn lift_group_hold(&self, group_id: &Id, hold_id: &Id) -> Result<HoldView, Error> {
        let path = format!("/v1/groups/{group_id}/holds/{hold_id}");
        Ok(self
            .send_json::<(), _>(Method::DELETE, &path, None)
            .await?
            .1)
    }

    /// `GET /v1/groups/{g}/holds`: the Group's holds the session sees, every page.
    pub async fn group_holds(&self, group_id: &Id) -> Result<Holds, Error> {
        self.every_hold(&format!("/v1/groups/{group_id}/holds?limit=1000"))
            .await
    }

    /// `POST /v1/admin/gc?dryRun=…&limit=…`: one call disposes of at most `limit` blobs.
    pub async fn collect(&self, dry_run: bool, limit: usize) -> Result<CollectionReport, Error> {
        let path = format!("/v1/admin/gc?dryRun={dry_run}&limit={limit}");
        Ok(self.send_json::<(), _>(Method::POST, &path, None).await?.1)
    }

    /// `GET /v1/admin/groups/{g}/usage`.
    pub async fn usage(&self, group_id: &Id) -> Result<Usage, Error> {
        let path = format!("/v1/admin/groups/{group_id}/usage");
        Ok(self.send_json::<(), _>(Method::GET, &path, None).await?.1)
    }

    /// `PUT /v1/admin/groups/{g}/quota`.
    pub async fn set_quota(&self, group_id: &Id, quota: &Quota) -> Result<Usage, Error> {
        let path = format!("/v1/admin/groups/{group_id}/quota");
        Ok(self.send_json(Method::PUT, &path, Some(quota)).await?.1)
    }
}
