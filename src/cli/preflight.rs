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

#[cfg(test)]
mod tests {
    use weft_api::manifest::{Classification, Content, Execution, Producer};
    use weft_api::{ArtifactId, Id, Sha256Digest};

    use super::*;

    fn placeholder(media_type: &str, schema: Option<&str>) -> Manifest {
        let id = |text: &str| Id::parse("id", text).expect("id");
        Manifest {
            content: Content {
                blake3: ArtifactId([0; 32]),
                sha256: Sha256Digest([0; 32]),
                size: 0,
                media_type: media_type.into(),
                schema: schema.map(str::to_owned),
            },
            producer: Producer {
                agent_id: id("agent-1"),
                agent_card_version: "1".into(),
            },
            mission_id: id("m1"),
            group_id: id("g1"),
            work_item_id: id("w1"),
            execution: Execution {
                lease_id: id("w1"),
                ownership_epoch: 1,
            },
            sources: vec![],
            tools: vec![],
            created_at: chrono::Utc::now().fixed_offset(),
            classification: Classification::Internal,
            retrieval_uri: "http://127.0.0.1:7070/v1/artifacts/x/content".into(),
            annotations: Default::default(),
        }
    }

    /// The placeholder manifest passes the server's own parser, so only a real defect in a
    /// flag stops `weft put`; a malformed media type or schema URI is caught before upload.
    #[test]
    fn only_defective_fields_fail_the_manifest_check() {
        check_manifest(&placeholder("application/octet-stream", None)).expect("well-formed");
        for (media_type, schema) in [("octet-stream", None), ("text/plain", Some("my schema"))] {
            let error = check_manifest(&placeholder(media_type, schema)).expect_err("refused");
            assert!(
                error.to_string().contains("nothing was uploaded"),
                "{error}"
            );
        }
    }
}
