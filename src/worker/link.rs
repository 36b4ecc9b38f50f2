//! The Worker's link to one Group: its session (opened at start, renewed before it expires),
//! its Command signer, and how a Command leaves. A Command is signed once and the same
//! envelope is resent after a transport failure, so a retry replays the first answer instead
//! of acting twice (DESIGN §10: the same `commandId` and bytes replay).

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use ed25519_dalek::SigningKey;
use weft_api::client::{Client, Error};
use weft_api::work::views::CommandAccepted;
use weft_api::work::{COMMAND_TYPE, Command, CommandType};
use weft_api::{Envelope, Id};

/// How often a Command is resent after a transport failure before the Authority counts as
/// unreachable.
const TRIES: u32 = 4;
/// How often a rate-limited Command is resent, a second apart.
const RATE_LIMITED_TRIES: u32 = 120;

#[derive(Clone)]
pub(super) struct Link {
    pub(super) group: Id,
    pub(super) agent: Id,
    pub(super) key: Arc<SigningKey>,
    pub(super) api: Client,
    pub(super) session_epoch: u64,
    pub(super) membership_epoch: u64,
    pub(super) expires_at: DateTime<Utc>,
}

impl Link {
    /// Opens a session in `group` (a new session replaces the Agent's old one there, whose
    /// leases the Authority revokes: LSE-9).
    pub(super) async fn open(
        authority: &str,
        key: Arc<SigningKey>,
        agent: Id,
        group: Id,
    ) -> Result<Self, Error> {
        let anonymous = Client::new(authority, None);
        let grant = anonymous.open_session(&key, &agent, &group).await?;
        Ok(Self {
            api: anonymous.with_token(grant.token),
            group,
            agent,
            key,
            session_epoch: grant.session_epoch,
            membership_epoch: grant.membership_epoch,
            expires_at: grant.expires_at,
        })
    }

    /// Renews the session when less than a third of its life is left.
    pub(super) async fn renew_if_due(&mut self, now: DateTime<Utc>) -> Result<(), Error> {
        if self.expires_at - now > chrono::Duration::minutes(5) {
            return Ok(());
        }
        let view = self
            .api
            .renew_session(&self.key, &self.agent, &self.group)
            .await?;
        if let Ok(at) = DateTime::parse_from_rfc3339(&view.expires_at) {
            self.expires_at = at.to_utc();
        }
        Ok(())
    }

    /// Signs a Command (a fresh `commandId`).
    pub(super) fn sign(
        &self,
        kind: CommandType,
        payload: serde_json::Value,
        lease: Option<&Id>,
        extensions: Vec<weft_api::work::command::Extension>,
    ) -> anyhow::Result<Envelope> {
        let command_id = Id::parse(
            "commandId",
            &format!("wk-{}", hex::encode(rand::random::<[u8; 16]>())),
        )?;
        let command = Command {
            command_id,
            kind,
            group_id: self.group.clone(),
            agent_id: self.agent.clone(),
            issued_at: Utc::now().fixed_offset(),
            session_epoch: self.session_epoch,
            membership_epoch: self.membership_epoch,
            lease_id: lease.cloned(),
            expected_revision: None,
            extensions,
            payload,
        };
        let bytes = serde_json::to_vec(&command)?;
        Ok(Envelope::sign(&self.key, COMMAND_TYPE, &bytes))
    }

    /// Sends a signed Command, resending the same envelope after transport failures.
    pub(super) async fn send_envelope(
        &self,
        envelope: &Envelope,
    ) -> Result<CommandAccepted, Error> {
        let mut wait = Duration::from_millis(100);
        let mut tries = 0;
        let mut limited = 0;
        loop {
            match self.api.command_envelope(&self.group, envelope).await {
                Err(Error::Http(error)) if tries + 1 < TRIES => {
                    tracing::debug!("resending a Command after {error}");
                    tries += 1;
                    tokio::time::sleep(wait).await;
                    wait *= 2;
                }
                // The Authority's per-Agent Command rate, or it sheds load: waiting is the answer.
                Err(Error::Api {
                    status: 429 | 503, ..
                }) if limited < RATE_LIMITED_TRIES => {
                    limited += 1;
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                answer => return answer,
            }
        }
    }

    /// Signs and sends.
    pub(super) async fn send(
        &self,
        kind: CommandType,
        payload: serde_json::Value,
        lease: Option<&Id>,
    ) -> Result<CommandAccepted, Error> {
        let envelope = self
            .sign(kind, payload, lease, Vec::new())
            .map_err(|e| Error::Protocol(e.to_string()))?;
        self.send_envelope(&envelope).await
    }
}

/// Whether an error means the Authority did not answer (as opposed to a refusal).
pub(super) fn unreachable(error: &Error) -> bool {
    matches!(error, Error::Http(_)) || matches!(error, Error::Api { status, .. } if *status >= 500)
}
