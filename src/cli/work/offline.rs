//! The offline journal from the command line (issue #13, OFL-3…OFL-8): when the Authority
//! does not answer, `weft work progress` and `weft work checkpoint` buffer their Command in the
//! weft home's `journal.jsonl` (`weft_api::journal`), bound to the lease `work.json`
//! remembers; every later command that writes first sends what is pending (OFL-5, rebased
//! onto the current session: `signer::reconcile_first`); `weft work journal` shows it,
//! `--sync` sends it now, `--discard` drops what was sent or refused.

use anyhow::bail;
use chrono::{DateTime, Utc};
use weft_api::Id;
use weft_api::client::Error as ClientError;
use weft_api::journal::{Journal, OfflineLease, Status};
use weft_api::work::CommandType;
use weft_api::work::contract::Budgets;

use super::lease::LocalState;
use super::signer::{Signer, journal_path, reconcile_first};
use crate::cli::work_args::CommandArgs;

/// Whether `error` means the Authority did not answer (nothing was refused).
fn unreachable(error: &anyhow::Error) -> bool {
    error
        .chain()
        .filter_map(|cause| cause.downcast_ref::<ClientError>())
        .any(crate::cli::errors::unanswered)
}

/// Sends owner Command `kind` (`work.progress` or `work.checkpoint`) quoting the current
/// lease; when the Authority does not answer, buffers it instead (OFL-3).
pub(super) async fn send_or_buffer(
    signer: &Signer,
    kind: CommandType,
    work_item: &Id,
    payload: &impl serde::Serialize,
    usage: Option<&Budgets>,
    command: &CommandArgs,
) -> anyhow::Result<()> {
    let online = async {
        let lease = signer.lease_for(work_item, command).await?;
        signer.send(kind, payload, command, lease).await
    };
    match online.await {
        Err(error) if unreachable(&error) => buffer(
            signer,
            work_item,
            kind,
            serde_json::to_value(payload)?,
            usage.cloned().unwrap_or_default(),
        ),
        other => other,
    }
}

/// Buffers `kind` with `payload` for `work_item` under the lease `work.json` remembers.
fn buffer(
    signer: &Signer,
    work_item: &Id,
    kind: CommandType,
    payload: serde_json::Value,
    usage: Budgets,
) -> anyhow::Result<()> {
    let local = LocalState::load(&signer.home)?;
    let Some(lease) = local.work_items.get(work_item.as_str()) else {
        bail!(
            "the Authority does not answer and work.json remembers no Execution Lease of \
             {work_item} to buffer under; retry when it answers"
        );
    };
    let offline = OfflineLease {
        agent_id: signer.agent_id.clone(),
        group_id: signer.group_id.clone(),
        work_item_id: work_item.clone(),
        lease_id: Id::parse("lease", &lease.lease_id)?,
        session_epoch: signer.session_epoch,
        membership_epoch: signer.membership_epoch,
        ownership_epoch: lease.ownership_epoch,
        lease_expires_at: DateTime::parse_from_rfc3339(&lease.expires_at)?,
        grace_seconds: lease.grace_seconds,
    };
    let mut journal = Journal::open(&journal_path(&signer.home))?;
    let now = Utc::now().fixed_offset();
    // One outage, one disconnection instant.
    let disconnected_at = journal
        .pending()
        .filter_map(|entry| entry.binding())
        .find(|binding| binding.lease_id == offline.lease_id)
        .map_or(now, |binding| binding.disconnected_at);
    let id = journal
        .buffer(&offline, disconnected_at, kind, payload, usage, now)?
        .command
        .command_id
        .clone();
    eprintln!(
        "the Authority does not answer: {} buffered as {id} in {} (sent first when it answers)",
        kind.as_str(),
        journal.path().display()
    );
    Ok(())
}

/// `weft work journal`.
pub(super) async fn journal(
    signer: &Signer,
    sync: bool,
    discard: bool,
    json: bool,
) -> anyhow::Result<()> {
    let mut journal = Journal::open(&journal_path(&signer.home))?;
    if sync {
        reconcile_first(signer).await?;
        journal = Journal::open(&journal_path(&signer.home))?;
    }
    if discard {
        let dropped = journal.discard()?;
        eprintln!("offline journal: {dropped} entr(y/ies) dropped");
    }
    if json {
        let entries: Vec<_> = journal
            .entries()
            .iter()
            .map(|entry| serde_json::json!({"command": entry.command, "status": entry.status}))
            .collect();
        println!("{}", serde_json::to_string_pretty(&entries)?);
        return Ok(());
    }
    if journal.entries().is_empty() {
        println!("the offline journal is empty");
        return Ok(());
    }
    println!(
        "{:<40} {:<16} {:<12} {:<26} STATUS",
        "COMMAND", "TYPE", "WORK ITEM", "BUFFERED AT"
    );
    for entry in journal.entries() {
        let buffered = entry
            .binding()
            .map(|b| {
                b.buffered_at
                    .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            })
            .unwrap_or_default();
        let work_item = entry
            .binding()
            .map(|b| b.work_item_id.to_string())
            .unwrap_or_default();
        let status = match &entry.status {
            Status::Pending => "pending".to_owned(),
            Status::Accepted { events } => format!("accepted (events {events:?})"),
            Status::Refused { code, .. } => format!("refused: {code}"),
        };
        println!(
            "{:<40} {:<16} {:<12} {:<26} {status}",
            entry.command.command_id,
            entry.command.kind.as_str(),
            work_item,
            buffered
        );
    }
    Ok(())
}

/// `--usage dimension=amount`, repeated: the six CON-1.7 dimensions, zero unless given.
pub(in crate::cli) fn usage(flags: &[String]) -> anyhow::Result<Option<Budgets>> {
    if flags.is_empty() {
        return Ok(None);
    }
    let mut usage = Budgets::default();
    for flag in flags {
        let Some((name, amount)) = flag.split_once('=') else {
            bail!("--usage wants dimension=amount, got {flag:?}");
        };
        let whole = || -> anyhow::Result<u64> {
            amount
                .parse()
                .map_err(|_| anyhow::anyhow!("--usage {name} wants a whole number, got {amount:?}"))
        };
        match name {
            "financial" => usage.financial = amount.parse()?,
            "tokens" => usage.tokens = whole()?,
            "toolCalls" => usage.tool_calls = whole()?,
            "computeSeconds" => usage.compute_seconds = whole()?,
            "wallClockSeconds" => usage.wall_clock_seconds = whole()?,
            "sideEffects" => usage.side_effects = whole()?,
            other => bail!(
                "--usage: unknown dimension {other:?}; one of financial, tokens, toolCalls, \
                 computeSeconds, wallClockSeconds, sideEffects"
            ),
        }
    }
    Ok(Some(usage))
}
