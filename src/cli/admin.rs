//! Operator calls made with the admin token: creating Groups, registering, deactivating and
//! re-keying agents, setting and removing memberships, registering schemas (`weft admin …`).

use std::path::Path;

use anyhow::Context as _;
use weft_api::Id;
use weft_api::client::Client;
use weft_api::session::Role;

use super::args::{AdminAction, AgentAction, ClientArgs, GroupAction, MemberAction};
use super::table::{Table, when_text};

/// `weft admin`: finds the admin token (the flag, else the token file) and runs the action.
pub(super) async fn run(
    client: &ClientArgs,
    admin_token: Option<String>,
    admin_token_file: &Path,
    action: AdminAction,
    json: bool,
) -> anyhow::Result<()> {
    let token = match admin_token {
        Some(token) => token,
        None => std::fs::read_to_string(admin_token_file)
            .with_context(|| {
                format!(
                    "reading {} (or pass --admin-token)",
                    admin_token_file.display()
                )
            })?
            .trim()
            .to_owned(),
    };
    admin(
        client,
        Client::new(client.server.clone(), Some(token)),
        action,
        json,
    )
    .await
    .context(super::errors::AdminCall)
}

async fn admin(
    client_args: &ClientArgs,
    api: Client,
    action: AdminAction,
    as_json: bool,
) -> anyhow::Result<()> {
    // `--json`: each confirmation as one object on stdout instead of its sentence.
    let said = |text: String, value: serde_json::Value| {
        if as_json {
            println!("{value}");
        } else {
            println!("{text}");
        }
    };
    match action {
        AdminAction::Lifecycle(action) => super::lifecycle::run(&api, action, &said).await?,
        AdminAction::Schema { uri, artifact } => {
            let artifact = weft_api::ArtifactId::parse(&artifact)?;
            api.register_schema(&uri, &artifact).await?;
            said(
                format!("schema {uri} names {artifact}"),
                serde_json::json!({"uri": uri, "artifact": artifact.to_string()}),
            );
        }
        AdminAction::Group {
            action: GroupAction::Create { group },
        } => {
            let created = api.create_group(&Id::parse("group", &group)?).await?;
            said(
                format!(
                    "group {group} {}",
                    if created { "created" } else { "already exists" }
                ),
                serde_json::json!({"groupId": group, "created": created}),
            );
        }
        AdminAction::Agent {
            action:
                AgentAction::Register {
                    agent_id,
                    public_key,
                    card_version,
                },
        } => {
            let key = match public_key {
                Some(text) => weft_api::dsse::parse_public_key(&text)?,
                None => client_args.key()?.verifying_key(),
            };
            let keyid = api
                .register_agent(&Id::parse("agent-id", &agent_id)?, &key, &card_version)
                .await?;
            said(
                format!("agent {agent_id} registered with {keyid}"),
                serde_json::json!({"agentId": agent_id, "keyid": keyid.to_string()}),
            );
        }
        AdminAction::Agent {
            action: AgentAction::Deactivate { agent_id },
        } => {
            let groups = api
                .deactivate_agent(&Id::parse("agent-id", &agent_id)?)
                .await?;
            let groups: Vec<&str> = groups.iter().map(Id::as_str).collect();
            let text = if groups.is_empty() {
                format!("agent {agent_id} is deactivated (no Group told now)")
            } else {
                format!("agent {agent_id} deactivated; told {}", groups.join(", "))
            };
            said(
                text,
                serde_json::json!({"agentId": agent_id, "deactivated": true, "groupsTold": groups}),
            );
        }
        AdminAction::Agent {
            action:
                AgentAction::RotateKey {
                    agent_id,
                    public_key,
                },
        } => {
            let key = weft_api::dsse::parse_public_key(&public_key)?;
            let keyid = api
                .rotate_key(&Id::parse("agent-id", &agent_id)?, &key)
                .await?;
            said(
                format!("agent {agent_id} now signs with {keyid}; its sessions ended"),
                serde_json::json!({"agentId": agent_id, "keyid": keyid.to_string()}),
            );
        }
        AdminAction::Member {
            action: MemberAction::Ls { group, json },
        } => {
            let json = json || as_json;
            let list = api.members(&Id::parse("group", &group)?).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&list)?);
            } else if list.members.is_empty() {
                println!(
                    "no members in {group}; add one with `weft admin member set {group} AGENT --role worker`"
                );
            } else {
                let mut table = Table::new(&["AGENT", "ROLES", "SCOPE", "EPOCH"]);
                for member in &list.members {
                    table.row(vec![
                        member.agent_id.to_string(),
                        role_words(&member.roles),
                        scope_words(member.missions.as_deref()),
                        member.epoch.to_string(),
                    ]);
                }
                print!("{}", table.render());
            }
        }
        AdminAction::Agent {
            action: AgentAction::Show { agent_id, json },
        } => {
            let json = json || as_json;
            let record = api.agent_record(&Id::parse("agent-id", &agent_id)?).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&record)?);
                return Ok(());
            }
            println!("agent        {}", record.agent_id);
            println!("card         {}", record.agent_card_version);
            println!("registered   {}", when_text(&record.registered_at));
            match &record.deactivated_at {
                Some(at) => println!("deactivated  {}", when_text(at)),
                None => println!("deactivated  no"),
            }
            let mut keys = Table::new(&["KEYID", "ADDED", "RETIRED"]);
            for key in &record.keys {
                keys.row(vec![
                    key.keyid.to_string(),
                    when_text(&key.added_at),
                    key.retired_at
                        .as_deref()
                        .map_or_else(|| "current".to_owned(), when_text),
                ]);
            }
            print!("\n{}", keys.render());
            if record.memberships.is_empty() {
                println!("\nno Memberships");
            } else {
                let mut groups = Table::new(&["GROUP", "ROLES", "SCOPE", "EPOCH"]);
                for member in &record.memberships {
                    groups.row(vec![
                        member.group_id.to_string(),
                        role_words(&member.roles),
                        scope_words(member.missions.as_deref()),
                        member.epoch.to_string(),
                    ]);
                }
                print!("\n{}", groups.render());
            }
        }
        AdminAction::Member {
            action: MemberAction::Remove { group, agent_id },
        } => {
            let epoch = api
                .remove_membership(
                    &Id::parse("group", &group)?,
                    &Id::parse("agent-id", &agent_id)?,
                )
                .await?;
            said(
                format!("{agent_id} removed from {group} (membership epoch {epoch})"),
                serde_json::json!({"groupId": group, "agentId": agent_id, "removed": true, "membershipEpoch": epoch}),
            );
        }
        AdminAction::Member {
            action:
                MemberAction::Set {
                    group,
                    agent_id,
                    roles,
                    missions,
                },
        } => {
            let missions = missions
                .iter()
                .map(|m| Id::parse("mission", m))
                .collect::<Result<Vec<_>, _>>()?;
            let roles = roles
                .iter()
                .map(|r| parse_role(r))
                .collect::<Result<Vec<_>, _>>()?;
            let membership = api
                .set_scoped_membership(
                    &Id::parse("group", &group)?,
                    &Id::parse("agent-id", &agent_id)?,
                    &roles,
                    (!missions.is_empty()).then_some(&missions[..]),
                )
                .await?;
            said(
                format!(
                    "{agent_id} in {group}: {} (membership epoch {}), {}",
                    role_words(&membership.roles),
                    membership.epoch,
                    scope_words(membership.missions.as_deref())
                ),
                serde_json::to_value(&membership)?,
            );
        }
    }
    Ok(())
}

/// Roles as typed (`worker, reviewer`), not as Rust debug output.
fn role_words(roles: &[Role]) -> String {
    roles
        .iter()
        .map(|role| {
            serde_json::to_value(role)
                .ok()
                .and_then(|value| value.as_str().map(str::to_owned))
                .unwrap_or_default()
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A Membership's scope: the whole Group, or its Missions.
fn scope_words(missions: Option<&[Id]>) -> String {
    missions.map_or_else(
        || "the whole Group".to_owned(),
        |missions| {
            let missions: Vec<&str> = missions.iter().map(Id::as_str).collect();
            format!("Missions {}", missions.join(", "))
        },
    )
}

/// A role by its wire name, with an error that lists the allowed ones.
fn parse_role(text: &str) -> anyhow::Result<Role> {
    super::errors::wire_word("role", text)
}
