//! The client side of Context Packages (DESIGN §11): publish a signed version, read versions
//! and the Events a version cites, forward a version to another Group.

use ed25519_dalek::SigningKey;
use reqwest::Method;

use super::{Client, Error};
use crate::Id;
use crate::context::{
    CONTEXT_TYPE, ContextEvents, ContextForwardedAnswer, ContextPackage, ContextPublishedAnswer,
    ContextRecord, ContextVersions, ForwardRequest,
};
use crate::dsse::Envelope;

impl Client {
    /// Signs `package` with `key` and publishes it in its Group.
    pub async fn publish_context(
        &self,
        key: &SigningKey,
        package: &ContextPackage,
    ) -> Result<ContextPublishedAnswer, Error> {
        let payload = serde_json::to_vec(package).map_err(|e| Error::Protocol(e.to_string()))?;
        let envelope = Envelope::sign(key, CONTEXT_TYPE, &payload);
        let path = format!("/v1/groups/{}/context", package.group_id);
        Ok(self
            .send_json(Method::POST, &path, Some(&envelope))
            .await?
            .1)
    }

    /// Version `version` of a package, the latest when `None`.
    pub async fn context(
        &self,
        package_id: &Id,
        version: Option<u64>,
    ) -> Result<ContextRecord, Error> {
        let path = match version {
            Some(version) => format!("/v1/context/{package_id}/versions/{version}"),
            None => format!("/v1/context/{package_id}"),
        };
        Ok(self.send_json::<(), _>(Method::GET, &path, None).await?.1)
    }

    /// Every version of a package, oldest first.
    pub async fn context_versions(&self, package_id: &Id) -> Result<ContextVersions, Error> {
        let path = format!("/v1/context/{package_id}/versions");
        Ok(self.send_json::<(), _>(Method::GET, &path, None).await?.1)
    }

    /// The Events a version cites (CTX-3).
    pub async fn context_events(
        &self,
        package_id: &Id,
        version: Option<u64>,
    ) -> Result<ContextEvents, Error> {
        let mut path = format!("/v1/context/{package_id}/events");
        if let Some(version) = version {
            path.push_str(&format!("?version={version}"));
        }
        Ok(self.send_json::<(), _>(Method::GET, &path, None).await?.1)
    }

    /// Forwards a version to another Group (CTX-7).
    pub async fn forward_context(
        &self,
        package_id: &Id,
        request: &ForwardRequest,
    ) -> Result<ContextForwardedAnswer, Error> {
        let path = format!("/v1/context/{package_id}/forward");
        Ok(self.send_json(Method::POST, &path, Some(request)).await?.1)
    }
}
