//! `weft admin retention|hold|gc|usage|quota` (issue #46, DESIGN §16): the lifecycle's
//! operator surface over `/v1/admin/…`, with the admin token.

use clap::Subcommand;
use weft_api::Id;
use weft_api::client::Client;
use weft_api::lifecycle::views::{HoldRequest, Quota, RetentionRequest};

/// The lifecycle's actions under `weft admin`.
#[derive(Debug, Subcommand)]
pub(super) enum LifecycleAction {
    /// Retention policies: how long after a Mission ends its bytes (and records) are kept.
    Retention {
        #[command(subcommand)]
        action: RetentionAction,
    },
    /// Legal holds: what they hold, and everything its lineage needs, is never collected.
    Hold {
        #[command(subcommand)]
        action: HoldAction,
    },
    /// Disposes of the bytes every policy lets go and nothing holds; one line per blob, then
    /// a summary.
    Gc {
        /// List what would go; change nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// A Group's usage and quota, as JSON `{bytes, artifacts, quota}`.
    Usage {
        #[arg(long)]
        group: String,
    },
    /// A Group's quota: uploads of new bytes past it answer 507 quota_exceeded.
    Quota {
        #[command(subcommand)]
        action: QuotaAction,
    },
}

#[derive(Debug, Subcommand)]
pub(super) enum RetentionAction {
    /// Sets the Group's policy, or one Mission's (durations like 30d, 12h, 1s).
    Set {
        #[arg(long)]
        group: String,
        #[arg(long, conflicts_with = "classification")]
        mission: Option<String>,
        /// A policy for the Group's artifacts of one classification (public, internal,
        /// confidential, restricted).
        #[arg(long)]
        classification: Option<String>,
        /// How long after the Mission ends its bytes are kept.
        #[arg(long)]
        keep_bytes: Option<String>,
        /// How long Evidence and manifests (and what a verified WorkItem's Evidence cites) are
        /// kept; never shorter than --keep-bytes.
        #[arg(long)]
        keep_records: Option<String>,
    },
    /// Shows the Group's policies.
    Show {
        #[arg(long)]
        group: String,
    },
}

/// What a hold holds (exactly one of an artifact, a WorkItem, a Mission) and why: the flags
/// of `weft admin hold add` and `weft hold add`.
#[derive(Debug, clap::Args)]
pub(super) struct HoldArgs {
    #[arg(long, conflicts_with_all = ["work_item", "mission"], required_unless_present_any = ["work_item", "mission"])]
    artifact: Option<String>,
    #[arg(long, conflicts_with = "mission")]
    work_item: Option<String>,
    #[arg(long)]
    mission: Option<String>,
    #[arg(long)]
    reason: String,
}

#[derive(Debug, Subcommand)]
pub(super) enum HoldAction {
    /// Places a hold; prints its id.
    Add(HoldArgs),
    /// Lifts a hold.
    Rm { hold_id: String },
    /// Lists holds, in force and lifted.
    Ls {
        #[arg(long)]
        group: Option<String>,
    },
}

#[derive(Debug, Subcommand)]
pub(super) enum QuotaAction {
    /// Sets (or, without a flag, clears) the Group's quota.
    Set {
        #[arg(long)]
        group: String,
        /// Bytes the Group may hold.
        #[arg(long)]
        bytes: Option<u64>,
        /// Artifacts the Group may hold.
        #[arg(long)]
        artifacts: Option<u64>,
    },
}

/// A hold's request from its flags (exactly one target: clap and [`HoldRequest::target`]).
pub(super) fn hold_request(args: HoldArgs) -> anyhow::Result<HoldRequest> {
    let HoldArgs {
        artifact,
        work_item,
        mission,
        reason,
    } = args;
    let request = HoldRequest {
        artifact: artifact
            .as_deref()
            .map(weft_api::ArtifactId::parse)
            .transpose()?,
        work_item_id: work_item
            .as_deref()
            .map(|w| Id::parse("work-item", w))
            .transpose()?,
        mission_id: mission
            .as_deref()
            .map(|m| Id::parse("mission", m))
            .transpose()?,
        reason,
    };
    request.target()?;
    Ok(request)
}

/// Runs one lifecycle action; `said` prints a confirmation (its sentence, or with `--json`
/// its object).
pub(super) async fn run(
    api: &Client,
    action: LifecycleAction,
    said: &dyn Fn(String, serde_json::Value),
) -> anyhow::Result<()> {
    match action {
        LifecycleAction::Retention {
            action:
                RetentionAction::Set {
                    group,
                    mission,
                    classification,
                    keep_bytes,
                    keep_records,
                },
        } => {
            let classification = classification
                .as_deref()
                .map(|c| {
                    serde_json::from_value(serde_json::Value::String(c.to_owned())).map_err(|_| {
                        anyhow::anyhow!(
                            "--classification is public, internal, confidential or restricted, not {c:?}"
                        )
                    })
                })
                .transpose()?;
            let request = RetentionRequest {
                mission_id: mission
                    .as_deref()
                    .map(|m| Id::parse("mission", m))
                    .transpose()?,
                classification,
                keep_bytes,
                keep_records,
            };
            request.retention()?;
            let set = api
                .set_retention(&Id::parse("group", &group)?, &request)
                .await?;
            let scope = match (&set.mission_id, &set.classification) {
                (Some(mission), _) => format!("mission {mission} of {group}"),
                (None, Some(class)) => format!("{} artifacts of {group}", class.as_str()),
                (None, None) => format!("group {group}"),
            };
            said(
                format!(
                    "{scope}: keep bytes {}, records {} (retention.set at sequence {})",
                    set.keep_bytes.as_deref().unwrap_or("forever"),
                    set.keep_records.as_deref().unwrap_or("forever"),
                    set.sequence
                ),
                serde_json::to_value(&set)?,
            );
        }
        LifecycleAction::Retention {
            action: RetentionAction::Show { group },
        } => {
            let policies = api.retention(&Id::parse("group", &group)?).await?;
            println!("{}", serde_json::to_string_pretty(&policies)?);
        }
        LifecycleAction::Hold {
            action: HoldAction::Add(args),
        } => {
            let request = hold_request(args)?;
            let hold = api.place_hold(&request).await?;
            // The id alone on stdout, for scripts (`hold rm $(weft admin hold add …)`).
            said(hold.hold_id.to_string(), serde_json::to_value(&hold)?);
        }
        LifecycleAction::Hold {
            action: HoldAction::Rm { hold_id },
        } => {
            let hold = api.lift_hold(&Id::parse("hold", &hold_id)?).await?;
            said(
                format!(
                    "hold {hold_id} lifted at {}",
                    hold.lifted_at.as_deref().unwrap_or("?")
                ),
                serde_json::to_value(&hold)?,
            );
        }
        LifecycleAction::Hold {
            action: HoldAction::Ls { group },
        } => {
            let group = group
                .as_deref()
                .map(|g| Id::parse("group", g))
                .transpose()?;
            let holds = api.holds(group.as_ref()).await?;
            println!("{}", serde_json::to_string_pretty(&holds)?);
        }
        LifecycleAction::Gc { dry_run } => {
            let (mut blobs, mut bytes, mut manifests, mut evidence) = (0u64, 0u64, 0u64, 0u64);
            let (mut kept, mut records_kept): (u64, u64);
            let verb = if dry_run {
                "would dispose of"
            } else {
                "disposed of"
            };
            loop {
                // One call disposes of at most LIMIT blobs, in half the server's request
                // time; a dry run lists one page (what would go does not change between calls).
                let report = api.collect(dry_run, LIMIT).await?;
                for disposal in &report.disposed {
                    println!(
                        "{verb} {} ({} bytes) under {}: {}",
                        disposal.artifact, disposal.size, disposal.policy, disposal.reason
                    );
                }
                // Records past `keepRecords`: one line per Mission and batch.
                for records in &report.records {
                    println!(
                        "{verb} the records of Mission {} in Group {} ({} manifests, {} Evidence) under {}: {}",
                        records.mission_id,
                        records.group_id,
                        records.manifests,
                        records.evidence,
                        records.policy,
                        records.reason
                    );
                    manifests += records.manifests;
                    evidence += records.evidence;
                }
                blobs += report.blobs;
                bytes += report.bytes;
                // Each call decides again what earlier calls kept: the last call's count
                // (the one that disposed of nothing more) is the total, not their sum.
                kept = report.kept;
                records_kept = report.records_kept;
                if dry_run || (report.blobs == 0 && report.records.is_empty()) {
                    break;
                }
            }
            println!(
                "{verb} {blobs} blobs, {bytes} bytes; {kept} past their policy kept (held, cited, or uploaded again); \
                 records: {manifests} manifests, {evidence} Evidence ({records_kept} past their policy kept)"
            );
        }
        LifecycleAction::Usage { group } => {
            let usage = api.usage(&Id::parse("group", &group)?).await?;
            println!("{}", serde_json::to_string(&usage)?);
        }
        LifecycleAction::Quota {
            action:
                QuotaAction::Set {
                    group,
                    bytes,
                    artifacts,
                },
        } => {
            let usage = api
                .set_quota(&Id::parse("group", &group)?, &Quota { bytes, artifacts })
                .await?;
            said(
                format!(
                    "group {group}: quota {} bytes, {} artifacts; using {} bytes in {} artifacts",
                    bytes.map_or("unlimited".to_owned(), |n| n.to_string()),
                    artifacts.map_or("unlimited".to_owned(), |n| n.to_string()),
                    usage.bytes,
                    usage.artifacts
                ),
                serde_json::to_value(usage)?,
            );
        }
    }
    Ok(())
}

/// Blobs per collection call (the server's most).
const LIMIT: usize = 10_000;
