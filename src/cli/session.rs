//! The agent's session: `weft login` (a signed challenge), `weft renew` (the same session, a
//! new lifetime) and `session.json`, which every
//! client command reads to find its token, agent and Group, and the epochs a signed Command
//! quotes (`weft mission`, `weft work`).

use anyhow::Context as _;
use serde::{Deserialize, Serialize};
use weft_api::Id;
use weft_api::client::Client;

use super::args::ClientArgs;
use super::keys::write_private;

/// `session.json`, written by `weft login`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct SessionFile {
    pub(super) server: String,
    pub(super) token: String,
    pub(super) agent_id: String,
    pub(super) group_id: String,
    pub(super) agent_card_version: String,
    pub(super) expires_at: String,
    /// The epochs the session was granted with; a Command quotes both (DESIGN §10). Absent
    /// from files written before Commands existed, hence optional: such a session signs no
    /// Command until `weft login` runs again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) session_epoch: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) membership_epoch: Option<u64>,
}

impl ClientArgs {
    /// The session `weft login` left in the weft home, and a client that carries its token.
    pub(super) fn session(&self) -> anyhow::Result<(SessionFile, Client)> {
        let path = self.home()?.join("session.json");
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {} (run `weft login`)", path.display()))?;
        let session: SessionFile =
            serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        let client = Client::new(self.server.clone(), Some(session.token.clone()));
        Ok((session, client))
    }
}

/// `weft login`: proves the agent holds its key and writes the granted session to the home.
pub(super) async fn login(
    client: &ClientArgs,
    agent_id: &str,
    group: &str,
    card_version: String,
    json: bool,
) -> anyhow::Result<()> {
    let key = client.key()?;
    let api = Client::new(client.server.clone(), None);
    let grant = api
        .open_session(
            &key,
            &Id::parse("agent-id", agent_id)?,
            &Id::parse("group", group)?,
        )
        .await?;
    let session = SessionFile {
        server: client.server.clone(),
        token: grant.token,
        agent_id: agent_id.to_owned(),
        group_id: group.to_owned(),
        agent_card_version: card_version,
        expires_at: grant.expires_at.to_rfc3339(),
        session_epoch: Some(grant.session_epoch),
        membership_epoch: Some(grant.membership_epoch),
    };
    write_private(
        &client.home()?.join("session.json"),
        &serde_json::to_vec_pretty(&session)?,
    )?;
    if json {
        // The token stays in session.json (mode 0600), never in a script's output.
        let out = serde_json::json!({
            "agentId": agent_id,
            "groupId": group,
            "sessionEpoch": grant.session_epoch,
            "membershipEpoch": grant.membership_epoch,
            "expiresAt": grant.expires_at.to_rfc3339(),
        });
        println!("{out}");
        return Ok(());
    }
    println!(
        "session open for {agent_id} in {group} (session epoch {}, expires {})",
        grant.session_epoch,
        super::table::when(&grant.expires_at)
    );
    Ok(())
}

/// `weft renew`: renews the stored session on the server and writes its new expiry.
pub(super) async fn renew(client: &ClientArgs, json: bool) -> anyhow::Result<()> {
    let (mut session, api) = client.session()?;
    let key = client.key()?;
    let view = api
        .renew_session(
            &key,
            &Id::parse("agentId", &session.agent_id)?,
            &Id::parse("groupId", &session.group_id)?,
        )
        .await?;
    session.expires_at = view.expires_at.clone();
    write_private(
        &client.home()?.join("session.json"),
        &serde_json::to_vec_pretty(&session)?,
    )?;
    if json {
        let out = serde_json::json!({
            "agentId": view.agent_id,
            "groupId": view.group_id,
            "sessionEpoch": view.session_epoch,
            "membershipEpoch": view.membership_epoch,
            "expiresAt": view.expires_at,
        });
        println!("{out}");
        return Ok(());
    }
    println!(
        "session renewed for {} in {} (session epoch {}, expires {})",
        view.agent_id, view.group_id, view.session_epoch, view.expires_at
    );
    Ok(())
}
