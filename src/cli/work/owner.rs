//! The owner's Commands of a held lease that are more than a WorkItem reference (issue
//! #12): `weft work progress`, a structured `work.progress` (PRG-1) buffered offline when the
//! Authority does not answer, and `weft work token`, a capability token bound to the lease
//! `work.json` remembers (LSE-6/7).

use anyhow::Context as _;
use weft_api::Id;
use weft_api::work::CommandType;
use weft_api::work::command::{Estimate, WorkProgress};
use weft_api::work::views::{TokenRequest, TokenScope};

use super::lease::current;
use super::offline::{send_or_buffer, usage};
use super::signer::{Signer, reconcile_first};
use crate::cli::errors::wire_word;
use crate::cli::work_args::{ProgressArgs, TokenArgs, artifact_ids};

/// `weft work progress`: a structured `work.progress` (PRG-1).
/// When the Authority does not answer, the report is buffered in the offline journal.
pub(super) async fn progress(signer: &Signer, args: ProgressArgs) -> anyhow::Result<()> {
    let payload = progress_payload(&args)?;
    send_or_buffer(
        signer,
        CommandType::WorkProgress,
        &payload.work_item_id,
        &payload,
        payload.usage.as_ref(),
        &args.command,
    )
    .await
}

/// The `work.progress` payload the flags spell.
pub(super) fn progress_payload(args: &ProgressArgs) -> anyhow::Result<WorkProgress> {
    let completion_at = args
        .completion_at
        .as_deref()
        .map(chrono::DateTime::parse_from_rfc3339)
        .transpose()
        .context("--completion-at wants an RFC 3339 instant")?;
    Ok(WorkProgress {
        work_item_id: Id::parse("work item", &args.work_item)?,
        phase: args.phase.clone(),
        milestones_done: args.milestones.clone(),
        next_checkpoint: args.next_checkpoint.clone(),
        blockers: args.blockers.clone(),
        estimate: Estimate {
            completion_at,
            confidence: args.confidence,
        },
        evidence: artifact_ids(&args.evidence)?,
        usage: usage(&args.usage)?,
        percent: args.percent,
    })
}

/// `weft work token`: a capability token bound to the current lease (LSE-6/7). The token is
/// printed once on stdout (the server keeps only its hash); its id and expiry go to stderr.
pub(super) async fn token(signer: &Signer, args: TokenArgs) -> anyhow::Result<()> {
    let work_item = Id::parse("work item", &args.work_item)?;
    // OFL-5: the journal goes first; it may also move the lease found below.
    reconcile_first(signer).await?;
    let lease_id = match &args.lease {
        Some(lease) => Id::parse("lease", lease)?,
        None => {
            let found = current(
                &signer.home,
                &signer.api,
                signer.agent_id.as_str(),
                &work_item,
            )
            .await?
            .with_context(|| {
                format!("this agent holds no Execution Lease of {work_item}; pass --lease")
            })?;
            Id::parse("lease", &found.lease_id)?
        }
    };
    let request = TokenRequest {
        scope: args
            .scopes
            .iter()
            .map(|scope| wire_word::<TokenScope>("scope", scope))
            .collect::<anyhow::Result<_>>()?,
        ttl_seconds: args.ttl,
        replaces: args.replaces.clone(),
    };
    let issued = signer.api.issue_token(&lease_id, &request).await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&issued)?);
        return Ok(());
    }
    let scope: Vec<&str> = issued.scope.iter().map(|s| s.as_str()).collect();
    eprintln!(
        "token {} of lease {lease_id} ({}) until {}",
        issued.token_id,
        scope.join(" "),
        crate::cli::table::when_text(&issued.expires_at)
    );
    println!("{}", issued.token);
    Ok(())
}
