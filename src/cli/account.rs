//! The session as its holder sees it: `weft whoami` (what `session.json` says, and whether
//! the server still accepts the token) and `weft logout` (forget the session locally).
//!
//! The roles and scope come from the server (`GET /v1/session`); the server has no route that
//! revokes a single session, so `logout` says the token stays valid until it expires.

use weft_api::ErrorCode;

use super::args::ClientArgs;

/// `weft whoami --json`: the session file's fields and the server's view, as one object; the
/// exit code is non-zero when the server refuses the session, as for the text.
async fn whoami_json(
    session: &super::session::SessionFile,
    api: &weft_api::client::Client,
) -> anyhow::Result<()> {
    let mut out = serde_json::json!({
        "agentId": session.agent_id,
        "agentCardVersion": session.agent_card_version,
        "groupId": session.group_id,
        "expiresAt": session.expires_at,
        "sessionEpoch": session.session_epoch,
        "membershipEpoch": session.membership_epoch,
        "server": session.server,
    });
    match api.current_session().await {
        Ok(live) => {
            out["accepted"] = serde_json::json!(true);
            out["roles"] = serde_json::to_value(&live.roles)?;
            out["missions"] = serde_json::to_value(&live.missions)?;
            println!("{out}");
            Ok(())
        }
        Err(error) if error.code().is_some() => {
            out["accepted"] = serde_json::json!(false);
            out["refusal"] = serde_json::json!(error.to_string());
            println!("{out}");
            anyhow::bail!("the server refuses this session ({error}); run `weft login`");
        }
        Err(error) => Err(error.into()),
    }
}

/// `weft whoami`.
pub(super) async fn whoami(
    client: &ClientArgs,
    token_only: bool,
    json: bool,
) -> anyhow::Result<()> {
    let (session, api) = client.session()?;
    if token_only {
        println!("{}", session.token);
        return Ok(());
    }
    if json {
        return whoami_json(&session, &api).await;
    }
    println!(
        "agent     {} (card {})",
        session.agent_id, session.agent_card_version
    );
    println!("group     {}", session.group_id);
    let expires = chrono::DateTime::parse_from_rfc3339(&session.expires_at).ok();
    match expires {
        Some(at) => {
            let left = at.with_timezone(&chrono::Utc) - chrono::Utc::now();
            let remaining = if left.num_seconds() > 0 {
                format!("in {}", span(left.num_seconds()))
            } else {
                "already".to_owned()
            };
            println!("expires   {} ({remaining})", super::table::when(&at));
        }
        None => println!("expires   {} (unreadable)", session.expires_at),
    }
    if let (Some(session_epoch), Some(membership_epoch)) =
        (session.session_epoch, session.membership_epoch)
    {
        println!("epochs    session {session_epoch}, membership {membership_epoch}");
    }
    println!("server    {}", session.server);
    // The server's view of the token: roles, scope and whether it still accepts it.
    match api.current_session().await {
        Ok(live) => {
            let roles: Vec<String> = live
                .roles
                .iter()
                .map(|role| {
                    serde_json::to_value(role).map_or_else(
                        |_| format!("{role:?}"),
                        |v| v.as_str().unwrap_or_default().to_owned(),
                    )
                })
                .collect();
            println!("roles     {}", roles.join(", "));
            match &live.missions {
                Some(missions) => println!("scope     Missions {}", missions.join(", ")),
                None => println!("scope     the whole Group"),
            }
            println!("status    the server accepts this session");
        }
        Err(error)
            if matches!(
                error.code(),
                Some(
                    ErrorCode::StaleSession
                        | ErrorCode::StaleMembership
                        | ErrorCode::Unauthorized
                        | ErrorCode::AgentDeactivated
                )
            ) =>
        {
            println!("status    REFUSED by the server ({error}): run `weft login`");
            // Scripts read the exit code: a session the server refuses is a failure (issue #50).
            anyhow::bail!("the server refuses this session ({error}); run `weft login`");
        }
        Err(error) => return Err(error.into()),
    }
    Ok(())
}

/// `weft logout`: removes `session.json`. The token itself stays valid on the server until it
/// expires (there is no session-revoking route), which the command says.
pub(super) fn logout(client: &ClientArgs, json: bool) -> anyhow::Result<()> {
    let path = client.home()?.join("session.json");
    let session = client.session().ok().map(|(session, _)| session);
    match std::fs::remove_file(&path) {
        Ok(()) => {}
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            if json {
                println!("{}", serde_json::json!({"forgotten": false}));
            } else {
                println!("no session to forget ({} does not exist)", path.display());
            }
            return Ok(());
        }
        Err(error) => {
            return Err(anyhow::Error::new(error).context(format!("removing {}", path.display())));
        }
    }
    if json {
        let out = serde_json::json!({
            "forgotten": true,
            "agentId": session.as_ref().map(|s| s.agent_id.clone()),
            "groupId": session.as_ref().map(|s| s.group_id.clone()),
            "tokenValidUntil": session.as_ref().map(|s| s.expires_at.clone()),
        });
        println!("{out}");
        return Ok(());
    }
    match session {
        Some(session) => println!(
            "forgot the session of {} in {}; the server keeps accepting its token until {} (it has no route to revoke one session)",
            session.agent_id,
            session.group_id,
            super::table::when_text(&session.expires_at)
        ),
        None => println!("removed {}", path.display()),
    }
    Ok(())
}

/// `3h 05m`, `12m 30s`, `45s`.
fn span(seconds: i64) -> String {
    let (hours, minutes, secs) = (seconds / 3600, seconds % 3600 / 60, seconds % 60);
    match (hours, minutes) {
        (0, 0) => format!("{secs}s"),
        (0, _) => format!("{minutes}m {secs:02}s"),
        _ => format!("{hours}h {minutes:02}m"),
    }
}
