//! A typed HTTP client for weft (cargo feature `client`), used by the CLI and the tests. Long
//! because each route the CLI calls has its method here; families with helpers of their own
//! (uploads, ranges, accounts, context) are in `client/`.
//!
//! It speaks the shapes of this crate, turns problem+json back into [`ErrorBody`], and
//! verifies downloaded bytes itself (ART-5 on the client side too): a download whose bytes do
//! not hash to the requested digest is an [`Error::Integrity`], never a success.

mod account;
mod agents;
pub use agents::card_key;
mod context;
mod lifecycle;
mod ranges;
mod uploads;
mod with_content;

use std::path::Path;

use ed25519_dalek::SigningKey;
use futures::{StreamExt as _, TryStreamExt as _};
use reqwest::{Method, StatusCode};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::io::AsyncWriteExt as _;

use crate::digest::{Digest, Digests, Hasher};
use crate::dsse::{BASE64, Envelope, MANIFEST_TYPE, SESSION_TYPE};
use crate::evidence::{EVIDENCE_TYPE, Evidence};
use crate::problem::ErrorBody;
use crate::session::{Membership, Role, SessionGrant};
use crate::views::{
    ArtifactPage, ArtifactView, CriteriaView, EvidencePage, EvidenceRecorded, Published,
    UploadReceipt,
};
use crate::work::views::{
    CommandAccepted, MissionView, TokenIssued, TokenRequest, WorkGraph, WorkItemView,
};
use crate::work::{COMMAND_TYPE, Command, CommandType};
use crate::{Id, Manifest};
use base64::Engine as _;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The server refused, with a problem+json body.
    #[error("{status}: {} ({})", body.detail, body.code)]
    Api { status: u16, body: ErrorBody },
    #[error("HTTP transport failed: {0}")]
    Http(#[from] reqwest::Error),
    #[error("I/O failed: {0}")]
    Io(#[from] std::io::Error),
    /// Downloaded bytes do not match the digest they were requested by.
    #[error("integrity failure: expected {expected}, received bytes hash to {actual}")]
    Integrity { expected: String, actual: String },
    #[error("unexpected answer: {0}")]
    Protocol(String),
}

impl Error {
    /// The problem code, when the server sent one.
    pub fn code(&self) -> Option<crate::ErrorCode> {
        match self {
            Self::Api { body, .. } => Some(body.code),
            _ => None,
        }
    }
}

/// Who signs a Command and the session it is quoted against (DESIGN §10): the Agent's key,
/// and the Group and epochs its session was granted with (`SessionGrant`).
#[derive(Debug)]
pub struct CommandSigner<'a> {
    pub key: &'a SigningKey,
    pub agent_id: &'a Id,
    pub group_id: &'a Id,
    pub session_epoch: u64,
    pub membership_epoch: u64,
}

/// A connection to one weft server with one bearer token (admin or session).
#[derive(Clone)]
pub struct Client {
    base: String,
    http: reqwest::Client,
    token: Option<String>,
}

/// Never the token: a `{:?}` of a client (or of anything holding one) must not put a bearer
/// secret in a log.
impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("base", &self.base)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .finish_non_exhaustive()
    }
}

async fn decode<T: DeserializeOwned>(
    response: reqwest::Response,
) -> Result<(StatusCode, T), Error> {
    let status = response.status();
    let bytes = response.bytes().await?;
    if !status.is_success() {
        return Err(match serde_json::from_slice::<ErrorBody>(&bytes) {
            Ok(body) => Error::Api {
                status: status.as_u16(),
                body,
            },
            Err(_) => Error::Protocol(format!("{status}: {}", String::from_utf8_lossy(&bytes))),
        });
    }
    let value =
        serde_json::from_slice(&bytes).map_err(|e| Error::Protocol(format!("{status}: {e}")))?;
    Ok((status, value))
}

/// A session request (DESIGN §8.1) signed with `key`: now, with a fresh nonce.
fn session_request(key: &SigningKey, agent_id: &Id, group_id: &Id) -> Result<Envelope, Error> {
    let nonce = hex::encode(rand::random::<[u8; 16]>());
    let payload = serde_json::json!({
        "agentId": agent_id,
        "groupId": group_id,
        "issuedAt": chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        "nonce": nonce,
    });
    let payload = serde_json::to_vec(&payload).map_err(|e| Error::Protocol(e.to_string()))?;
    Ok(Envelope::sign(key, SESSION_TYPE, &payload))
}

impl Client {
    pub fn new(base: impl Into<String>, token: Option<String>) -> Self {
        Self {
            base: base.into().trim_end_matches('/').to_owned(),
            http: reqwest::Client::new(),
            token,
        }
    }

    pub fn with_token(&self, token: impl Into<String>) -> Self {
        Self {
            token: Some(token.into()),
            ..self.clone()
        }
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    fn request(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        let builder = self.http.request(method, format!("{}{}", self.base, path));
        match &self.token {
            Some(token) => builder.bearer_auth(token),
            None => builder,
        }
    }

    async fn send_json<B: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&B>,
    ) -> Result<(StatusCode, T), Error> {
        let mut request = self.request(method, path);
        if let Some(body) = body {
            request = request.json(body);
        }
        decode(request.send().await?).await
    }

    pub async fn create_group(&self, group_id: &Id) -> Result<bool, Error> {
        let (status, _): (_, serde_json::Value) = self
            .send_json::<(), _>(Method::PUT, &format!("/v1/admin/groups/{group_id}"), None)
            .await?;
        Ok(status == StatusCode::CREATED)
    }

    /// Registers an agent; returns its keyid.
    pub async fn register_agent(
        &self,
        agent_id: &Id,
        key: &ed25519_dalek::VerifyingKey,
        card_version: &str,
    ) -> Result<String, Error> {
        let body = serde_json::json!({
            "agentId": agent_id,
            "publicKey": BASE64.encode(key.as_bytes()),
            "agentCardVersion": card_version,
        });
        let (_, answer): (_, serde_json::Value) = self
            .send_json(Method::POST, "/v1/admin/agents", Some(&body))
            .await?;
        answer["keyid"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| Error::Protocol("no keyid".into()))
    }

    pub async fn set_membership(
        &self,
        group_id: &Id,
        agent_id: &Id,
        roles: &[Role],
    ) -> Result<Membership, Error> {
        self.set_scoped_membership(group_id, agent_id, roles, None)
            .await
    }

    /// Sets a Membership covering only `missions` of the Group (CTX-5; `None`: all of it).
    pub async fn set_scoped_membership(
        &self,
        group_id: &Id,
        agent_id: &Id,
        roles: &[Role],
        missions: Option<&[Id]>,
    ) -> Result<Membership, Error> {
        let mut body = serde_json::json!({ "roles": roles });
        if let Some(missions) = missions {
            body["missions"] = serde_json::json!(missions);
        }
        let path = format!("/v1/admin/groups/{group_id}/members/{agent_id}");
        Ok(self.send_json(Method::PUT, &path, Some(&body)).await?.1)
    }

    /// Ends a Membership; answers its new epoch.
    pub async fn remove_membership(&self, group_id: &Id, agent_id: &Id) -> Result<u64, Error> {
        let path = format!("/v1/admin/groups/{group_id}/members/{agent_id}");
        let answer: serde_json::Value = self
            .send_json::<(), _>(Method::DELETE, &path, None)
            .await?
            .1;
        answer["epoch"]
            .as_u64()
            .ok_or_else(|| Error::Protocol("no epoch".into()))
    }

    /// Every live Membership of a Group (admin token).
    pub async fn members(&self, group_id: &Id) -> Result<crate::session::MemberList, Error> {
        let path = format!("/v1/admin/groups/{group_id}/members");
        Ok(self.send_json::<(), _>(Method::GET, &path, None).await?.1)
    }

    /// An Agent with its key history and Memberships (admin token).
    pub async fn agent_record(&self, agent_id: &Id) -> Result<crate::session::AgentRecord, Error> {
        let path = format!("/v1/admin/agents/{agent_id}");
        Ok(self.send_json::<(), _>(Method::GET, &path, None).await?.1)
    }

    /// Deactivates an Agent; answers the Groups that were told.
    pub async fn deactivate_agent(&self, agent_id: &Id) -> Result<Vec<Id>, Error> {
        #[derive(serde::Deserialize)]
        struct Answer {
            groups: Vec<Id>,
        }
        let path = format!("/v1/admin/agents/{agent_id}/deactivate");
        let answer: Answer = self.send_json::<(), _>(Method::POST, &path, None).await?.1;
        Ok(answer.groups)
    }

    /// Rotates an Agent's key to `key`; answers the new keyid.
    pub async fn rotate_key(
        &self,
        agent_id: &Id,
        key: &ed25519_dalek::VerifyingKey,
    ) -> Result<String, Error> {
        let body = serde_json::json!({ "publicKey": BASE64.encode(key.as_bytes()) });
        let path = format!("/v1/admin/agents/{agent_id}/keys");
        let answer: serde_json::Value = self.send_json(Method::POST, &path, Some(&body)).await?.1;
        answer["keyid"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| Error::Protocol("no keyid".into()))
    }

    /// Signs a session request with `key` and opens a session (DESIGN §8.1).
    pub async fn open_session(
        &self,
        key: &SigningKey,
        agent_id: &Id,
        group_id: &Id,
    ) -> Result<SessionGrant, Error> {
        let envelope = session_request(key, agent_id, group_id)?;
        Ok(self
            .send_json(Method::POST, "/v1/sessions", Some(&envelope))
            .await?
            .1)
    }

    /// Streams a file to `POST /v1/blobs`; `progress` hears the bytes sent so far.
    pub async fn upload_file(
        &self,
        path: &Path,
        mut progress: impl FnMut(u64) + Send + 'static,
    ) -> Result<UploadReceipt, Error> {
        let file = tokio::fs::File::open(path).await?;
        let length = file.metadata().await?.len();
        let mut sent = 0u64;
        let stream = tokio_util::io::ReaderStream::with_capacity(file, 256 * 1024).inspect_ok(
            move |chunk| {
                sent += chunk.len() as u64;
                progress(sent);
            },
        );
        let response = self
            .request(Method::POST, "/v1/blobs")
            .header(reqwest::header::CONTENT_TYPE, "application/octet-stream")
            .header(reqwest::header::CONTENT_LENGTH, length)
            .body(reqwest::Body::wrap_stream(stream))
            .send()
            .await?;
        Ok(decode(response).await?.1)
    }

    /// Signs `manifest` with `key` and publishes it.
    pub async fn publish(&self, key: &SigningKey, manifest: &Manifest) -> Result<Published, Error> {
        let payload = serde_json::to_vec(manifest).map_err(|e| Error::Protocol(e.to_string()))?;
        let envelope = Envelope::sign(key, MANIFEST_TYPE, &payload);
        self.publish_envelope(&envelope).await
    }

    pub async fn publish_envelope(&self, envelope: &Envelope) -> Result<Published, Error> {
        Ok(self
            .send_json(Method::POST, "/v1/artifacts", Some(envelope))
            .await?
            .1)
    }

    pub async fn artifact(&self, digest: &Digest) -> Result<ArtifactView, Error> {
        Ok(self
            .send_json::<(), _>(Method::GET, &format!("/v1/artifacts/{digest}"), None)
            .await?
            .1)
    }

    /// `GET /v1/artifacts` with the given filters (`missionId`, `workItemId`, …).
    pub async fn list(&self, filters: &[(&str, String)]) -> Result<ArtifactPage, Error> {
        let response = self
            .request(Method::GET, "/v1/artifacts")
            .query(filters)
            .send()
            .await?;
        Ok(decode(response).await?.1)
    }

    /// Signs `evidence` with `key` and records it.
    pub async fn record_evidence(
        &self,
        key: &SigningKey,
        evidence: &Evidence,
    ) -> Result<EvidenceRecorded, Error> {
        let payload = serde_json::to_vec(evidence).map_err(|e| Error::Protocol(e.to_string()))?;
        let envelope = Envelope::sign(key, EVIDENCE_TYPE, &payload);
        Ok(self
            .send_json(Method::POST, "/v1/evidence", Some(&envelope))
            .await?
            .1)
    }

    /// `GET /v1/evidence` with the given filters, newest first.
    pub async fn list_evidence(&self, filters: &[(&str, String)]) -> Result<EvidencePage, Error> {
        let response = self
            .request(Method::GET, "/v1/evidence")
            .query(filters)
            .send()
            .await?;
        Ok(decode(response).await?.1)
    }

    /// The latest verdict per criterion of a WorkItem.
    pub async fn criteria(&self, work_item_id: &Id) -> Result<CriteriaView, Error> {
        let path = format!("/v1/workitems/{work_item_id}/criteria");
        Ok(self.send_json::<(), _>(Method::GET, &path, None).await?.1)
    }

    /// Opens the SSE stream of a Group after `after`; the caller reads its frames.
    pub async fn event_stream(
        &self,
        group_id: &Id,
        after: u64,
    ) -> Result<reqwest::Response, Error> {
        let response = self
            .request(Method::GET, &format!("/v1/groups/{group_id}/events/stream"))
            .query(&[("after", after.to_string())])
            .send()
            .await?;
        if response.status().is_success() {
            Ok(response)
        } else {
            Err(decode::<serde_json::Value>(response)
                .await
                .err()
                .unwrap_or_else(|| Error::Protocol("unexpected success".into())))
        }
    }

    /// Replays up to `limit` Events after `after`.
    pub async fn events(
        &self,
        group_id: &Id,
        after: u64,
        limit: u32,
    ) -> Result<Vec<crate::event::Delivered>, Error> {
        let response = self
            .request(Method::GET, &format!("/v1/groups/{group_id}/events"))
            .query(&[("after", after.to_string()), ("limit", limit.to_string())])
            .send()
            .await?;
        let page: crate::views::EventPage = decode(response).await?.1;
        Ok(page.events)
    }

    /// What `agent_id` did in a Group (issue #50), newest first, before `before`: one page.
    pub async fn actor_events(
        &self,
        group_id: &Id,
        agent_id: &Id,
        before: Option<u64>,
        limit: u32,
    ) -> Result<crate::views::ActorEvents, Error> {
        let mut query = vec![("limit", limit.to_string())];
        query.extend(before.map(|before| ("before", before.to_string())));
        let response = self
            .request(
                Method::GET,
                &format!("/v1/groups/{group_id}/agents/{agent_id}/events"),
            )
            .query(&query)
            .send()
            .await?;
        Ok(decode(response).await?.1)
    }

    /// ACKs `sequence` for a Group (DLV-6).
    pub async fn ack(&self, group_id: &Id, sequence: u64) -> Result<crate::views::Cursor, Error> {
        let body = serde_json::json!({"cursors": [{"groupId": group_id, "sequence": sequence}]});
        let (_, cursors): (_, crate::views::Cursors) = self
            .send_json(
                Method::POST,
                &format!("/v1/groups/{group_id}/cursors"),
                Some(&body),
            )
            .await?;
        cursors
            .cursors
            .into_iter()
            .next()
            .ok_or_else(|| Error::Protocol("empty ACK answer".into()))
    }

    /// The Group's signed checkpoint.
    pub async fn checkpoint(&self, group_id: &Id) -> Result<crate::views::SignedCheckpoint, Error> {
        Ok(self
            .send_json::<(), _>(
                Method::GET,
                &format!("/v1/groups/{group_id}/checkpoint"),
                None,
            )
            .await?
            .1)
    }

    /// The Group's signed snapshot references, oldest first.
    pub async fn snapshots(&self, group_id: &Id) -> Result<crate::views::Snapshots, Error> {
        Ok(self
            .send_json::<(), _>(
                Method::GET,
                &format!("/v1/groups/{group_id}/snapshots"),
                None,
            )
            .await?
            .1)
    }

    /// GETs a route and returns its body as text (for DOT, Mermaid or raw JSON answers).
    pub async fn get_text(&self, path: &str, query: &[(&str, String)]) -> Result<String, Error> {
        let response = self.request(Method::GET, path).query(query).send().await?;
        if !response.status().is_success() {
            return Err(decode::<serde_json::Value>(response)
                .await
                .err()
                .unwrap_or_else(|| Error::Protocol("unexpected success".into())));
        }
        Ok(response.text().await?)
    }

    /// The server's public keys.
    pub async fn authority_keys(&self) -> Result<crate::views::AuthorityKeys, Error> {
        Ok(self
            .send_json::<(), _>(Method::GET, "/v1/authority/keys", None)
            .await?
            .1)
    }

    /// Downloads any byte route into `out`, hashing as it goes (the caller checks the digest).
    pub async fn download_path(&self, path: &str, out: &mut Vec<u8>) -> Result<Digests, Error> {
        let response = self.request(Method::GET, path).send().await?;
        if !response.status().is_success() {
            return Err(decode::<serde_json::Value>(response)
                .await
                .err()
                .unwrap_or_else(|| Error::Protocol("unexpected success".into())));
        }
        let mut hasher = Hasher::default();
        let mut body = response.bytes_stream();
        while let Some(chunk) = body.next().await {
            let chunk = chunk?;
            hasher.update(&chunk);
            out.extend_from_slice(&chunk);
        }
        Ok(hasher.finish())
    }

    /// Downloads an artifact into `out`, hashing every byte; fails with
    /// [`Error::Integrity`] if the bytes are not the ones named by `digest`.
    pub async fn download(
        &self,
        digest: &Digest,
        out: &mut (impl tokio::io::AsyncWrite + Unpin),
        mut progress: impl FnMut(u64, Option<u64>),
    ) -> Result<Digests, Error> {
        let response = self
            .request(Method::GET, &format!("/v1/artifacts/{digest}/content"))
            .send()
            .await?;
        if !response.status().is_success() {
            return Err(decode::<serde_json::Value>(response)
                .await
                .err()
                .unwrap_or_else(|| Error::Protocol("unexpected success".into())));
        }
        let total = response.content_length();
        let mut hasher = Hasher::default();
        let mut received = 0u64;
        let mut body = response.bytes_stream();
        while let Some(chunk) = body.next().await {
            let chunk = chunk?;
            hasher.update(&chunk);
            out.write_all(&chunk).await?;
            received += chunk.len() as u64;
            progress(received, total);
        }
        out.flush().await?;
        let digests = hasher.finish();
        let (expected, actual) = match digest {
            Digest::Blake3(id) => (id.to_string(), digests.blake3.to_string()),
            Digest::Sha256(sha) => (sha.to_string(), digests.sha256.to_string()),
        };
        if expected != actual {
            return Err(Error::Integrity { expected, actual });
        }
        Ok(digests)
    }

    /// Signs a Command of type `kind` with `payload` and sends it to its Group's Command
    /// route (DESIGN §10). A fresh `commandId` is generated here, so a retry of the same call
    /// is a new Command; resend [`Client::command_envelope`] to replay one.
    pub async fn command(
        &self,
        signer: &CommandSigner<'_>,
        kind: CommandType,
        payload: serde_json::Value,
        lease_id: Option<&Id>,
        expected_revision: Option<u64>,
    ) -> Result<CommandAccepted, Error> {
        let command_id = Id::parse(
            "commandId",
            &format!("cmd-{}", hex::encode(rand::random::<[u8; 16]>())),
        )
        .map_err(|e| Error::Protocol(e.to_string()))?;
        let command = Command {
            command_id,
            kind,
            group_id: signer.group_id.clone(),
            agent_id: signer.agent_id.clone(),
            issued_at: chrono::Utc::now().fixed_offset(),
            session_epoch: signer.session_epoch,
            membership_epoch: signer.membership_epoch,
            lease_id: lease_id.cloned(),
            expected_revision,
            extensions: Vec::new(),
            payload,
        };
        let bytes = serde_json::to_vec(&command).map_err(|e| Error::Protocol(e.to_string()))?;
        let envelope = Envelope::sign(signer.key, COMMAND_TYPE, &bytes);
        self.command_envelope(signer.group_id, &envelope).await
    }

    /// Sends an already signed Command envelope (the same bytes replay the same answer).
    pub async fn command_envelope(
        &self,
        group_id: &Id,
        envelope: &Envelope,
    ) -> Result<CommandAccepted, Error> {
        let path = format!("/v1/groups/{group_id}/commands");
        Ok(self.send_json(Method::POST, &path, Some(envelope)).await?.1)
    }

    /// `POST /v1/groups/{g}/commands/batch`: signed Commands applied in order, stopping at
    /// the first refusal (answered inside the 200).
    pub async fn command_batch(
        &self,
        group_id: &Id,
        envelopes: Vec<Envelope>,
    ) -> Result<crate::work::views::BatchAccepted, Error> {
        let path = format!("/v1/groups/{group_id}/commands/batch");
        let batch = crate::work::views::CommandBatch {
            commands: envelopes,
        };
        Ok(self.send_json(Method::POST, &path, Some(&batch)).await?.1)
    }

    /// `GET /v1/workitems/{id}`.
    pub async fn work_item(&self, work_item_id: &Id) -> Result<WorkItemView, Error> {
        let path = format!("/v1/workitems/{work_item_id}");
        Ok(self.send_json::<(), _>(Method::GET, &path, None).await?.1)
    }

    /// `GET /v1/missions/{id}`.
    /// `GET /v1/workitems/{id}/scheduling`: what a Worker's Scheduler may see (CTX-8).
    pub async fn scheduling(
        &self,
        work_item_id: &Id,
    ) -> Result<crate::work::views::SchedulingView, Error> {
        let path = format!("/v1/workitems/{work_item_id}/scheduling");
        Ok(self.send_json::<(), _>(Method::GET, &path, None).await?.1)
    }

    pub async fn mission(&self, mission_id: &Id) -> Result<MissionView, Error> {
        let path = format!("/v1/missions/{mission_id}");
        Ok(self.send_json::<(), _>(Method::GET, &path, None).await?.1)
    }

    /// `GET /v1/missions/{id}/workitems`: the Mission's WorkItem graph.
    pub async fn mission_graph(&self, mission_id: &Id) -> Result<WorkGraph, Error> {
        let path = format!("/v1/missions/{mission_id}/workitems");
        Ok(self.send_json::<(), _>(Method::GET, &path, None).await?.1)
    }

    /// `POST /v1/leases/{id}/tokens`: a capability token bound to the lease (LSE-6/7), shown
    /// once; `request.replaces` rotates out a previous token of the same lease.
    pub async fn issue_token(
        &self,
        lease_id: &Id,
        request: &TokenRequest,
    ) -> Result<TokenIssued, Error> {
        let path = format!("/v1/leases/{lease_id}/tokens");
        Ok(self.send_json(Method::POST, &path, Some(request)).await?.1)
    }
}
