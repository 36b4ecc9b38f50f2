//! The client side of Agent Cards and Presence (issue #47, SCH-11).

use ed25519_dalek::SigningKey;
use reqwest::Method;

use super::{Client, Error};
use crate::dsse::{BASE64, Envelope};
use crate::worker::card::{AGENT_CARD_TYPE, AgentCard, CardView, Presence, PresenceReport};
use crate::{ErrorBody, Id};
use base64::Engine as _;

impl Client {
    /// Signs `card` with `key` and registers it (`PUT /v1/agents/{id}/card`): the card as
    /// stored, and whether it changed anything.
    pub async fn put_card(
        &self,
        key: &SigningKey,
        card: &AgentCard,
    ) -> Result<(CardView, bool), Error> {
        let payload = serde_json::to_vec(card).map_err(|e| Error::Protocol(e.to_string()))?;
        let envelope = Envelope::sign(key, AGENT_CARD_TYPE, &payload);
        let path = format!("/v1/agents/{}/card", card.agent_id);
        let (status, view) = self.send_json(Method::PUT, &path, Some(&envelope)).await?;
        Ok((view, status == reqwest::StatusCode::CREATED))
    }

    /// `GET /v1/agents/{id}/card`.
    pub async fn card(&self, agent_id: &Id) -> Result<CardView, Error> {
        let path = format!("/v1/agents/{agent_id}/card");
        Ok(self.send_json::<(), _>(Method::GET, &path, None).await?.1)
    }

    /// `PUT /v1/groups/{g}/presence` (204; `rate_limited` when sooner than 2 s after the last).
    pub async fn report_presence(
        &self,
        group_id: &Id,
        report: &PresenceReport,
    ) -> Result<(), Error> {
        let path = format!("/v1/groups/{group_id}/presence");
        let response = self.request(Method::PUT, &path).json(report).send().await?;
        let status = response.status();
        if status.is_success() {
            return Ok(());
        }
        let bytes = response.bytes().await?;
        Err(match serde_json::from_slice::<ErrorBody>(&bytes) {
            Ok(body) => Error::Api {
                status: status.as_u16(),
                body,
            },
            Err(_) => Error::Protocol(format!("{status}: {}", String::from_utf8_lossy(&bytes))),
        })
    }

    /// `GET /v1/groups/{g}/presence` (coordinators).
    pub async fn presence(&self, group_id: &Id) -> Result<Presence, Error> {
        let path = format!("/v1/groups/{group_id}/presence");
        Ok(self.send_json::<(), _>(Method::GET, &path, None).await?.1)
    }
}

/// The public key as a card names it.
pub fn card_key(key: &SigningKey) -> String {
    BASE64.encode(key.verifying_key().as_bytes())
}
