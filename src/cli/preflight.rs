//! `weft put`'s checks before a byte is sent: the manifest as the server would parse it, the
//! session (live, in the named Group, with a producing role, its Mission scope), and the
//! WorkItem (visible, and of the named Mission). Each failure names the next step, so a typo
//! costs a second instead of a long upload.
//!
//! The server checks all of this again at publication; these checks only fail early.

use anyhow::{Context as _, bail};
use weft_api::session::Role;
use weft_api::{ErrorCode, Manifest};

use super::session::SessionFile;

/// Parses `manifest` exactly as the server's publication does (strict, every bound), with
/// placeholder content digests.
pub(super) fn check_manifest(manifest: &Manifest) -> anyhow::Result<()> {
    let payload = serde_json::to_vec(manifest).context("encoding the manifest")?;
    if let Err(rejection) = Manifest::parse(&payload) {
        bail!(
            "the manifest would be refused ({}): {}; nothing was uploaded",
            rejection.code,
            rejection.message
        );
    }
    Ok(())
}

/// Asks the server about the session (`GET /v1/session`) and the WorkItem, and refuses what
/// publication would refuse.
pub(super) async fn check_session(
    api: &weft_api::client::Client,
    session: &SessionFile,
    manifest: &Manifest,
) -> anyhow::Result<()> {
    let view = match api.current_session().await {
        Ok(view) => view,
        Err(error)
            if matches!(
                error.code(),
                Some(
                    ErrorCode::StaleSession | ErrorCode::Unauthorized | ErrorCode::StaleMembership
                )
            ) =>
        {
            bail!(
                "the server no longer accepts this session of {} ({error}): run `weft login`",
                session.agent_id
            )
        }
        Err(error) => return Err(error).context("checking the session (GET /v1/session)"),
    };
    let group = manifest.group_id.as_str();
    if view.group_id != group {
        bail!(
            "this session acts in Group {}, not --group {group}: run `weft login --group {group}`",
            view.group_id
        );
    }
    let producing = [Role::Worker, Role::Coordinator, Role::Reviewer];
    if !view.roles.iter().any(|role| producing.contains(role)) {
        bail!(
            "agent {} may not upload in Group {group} (roles: {}); uploading needs worker, coordinator or reviewer",
            view.agent_id,
            serde_json::to_string(&view.roles).unwrap_or_default()
        );
    }
    let mission = manifest.mission_id.as_str();
    if let Some(missions) = &view.missions
        && !missions.iter().any(|m| m == mission)
    {
        bail!(
            "the Membership in {group} covers Missions {}, not --mission {mission}",
            missions.join(", ")
        );
    }
    let work_item = &manifest.work_item_id;
    let item = match api.work_item(work_item).await {
        Ok(item) => item,
        Err(error)
            if matches!(
                error.code(),
                Some(ErrorCode::NotFound | ErrorCode::UnknownWorkItem)
            ) =>
        {
            bail!("no WorkItem {work_item} is visible in Group {group}: check --work-item")
        }
        Err(error) => return Err(error).with_context(|| format!("reading WorkItem {work_item}")),
    };
    if item.mission_id != mission {
        bail!(
            "--mission {mission} does not match: WorkItem {work_item} belongs to Mission {}",
            item.mission_id
        );
    }
    Ok(())
}
