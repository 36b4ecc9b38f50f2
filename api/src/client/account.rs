//! The client side of a session's own view (`GET /v1/session`) and its renewal
//! (`POST /v1/session/renew`), the built-in reviewer
//! (`POST /v1/workitems/{id}/review`) and schema registration (`POST /v1/admin/schemas`).

use reqwest::Method;

use super::{Client, Error, decode};
use crate::session::SessionView;
use crate::views::{ReviewOutcome, ReviewRequest};
use crate::{ArtifactId, Id};

impl Client {
    /// `GET /v1/session`: this token's session as the server resolves it now.
    pub async fn current_session(&self) -> Result<SessionView, Error> {
        Ok(self
            .send_json::<(), _>(Method::GET, "/v1/session", None)
            .await?
            .1)
    }

    /// `POST /v1/session/renew`: a fresh session request signed with `key` moves this token's
    /// session to a full lifetime from now, keeping the token and its epochs (so its leases).
    pub async fn renew_session(
        &self,
        key: &ed25519_dalek::SigningKey,
        agent_id: &Id,
        group_id: &Id,
    ) -> Result<SessionView, Error> {
        let envelope = super::session_request(key, agent_id, group_id)?;
        Ok(self
            .send_json(Method::POST, "/v1/session/renew", Some(&envelope))
            .await?
            .1)
    }

    /// Runs the built-in reviewer on a WorkItem (`POST /v1/workitems/{id}/review`): one
    /// server-signed Evidence record per check.
    pub async fn review(
        &self,
        work_item_id: &Id,
        request: &ReviewRequest,
    ) -> Result<ReviewOutcome, Error> {
        let path = format!("/v1/workitems/{work_item_id}/review");
        Ok(self.send_json(Method::POST, &path, Some(request)).await?.1)
    }

    /// Registers a schema URI as naming a published schema artifact (admin; answers 204).
    pub async fn register_schema(&self, uri: &str, artifact: &ArtifactId) -> Result<(), Error> {
        let body = serde_json::json!({ "uri": uri, "artifact": artifact });
        let response = self
            .request(Method::POST, "/v1/admin/schemas")
            .json(&body)
            .send()
            .await?;
        if response.status().is_success() {
            return Ok(());
        }
        Err(decode::<serde_json::Value>(response)
            .await
            .err()
            .unwrap_or_else(|| Error::Protocol("unexpected success".into())))
    }
}
