//! The agent as a Command signer (`Signer`: its key, its session's client, Group and epochs)
//! and how a signed Command leaves: what the offline journal (`journal.jsonl`) holds goes
//! first (OFL-5, `reconcile_first`, which every other command that writes also takes first),
//! then the Command; `work.json` follows the answer, which is printed. Buffering a Command
//! when the Authority does not answer is `offline`'s; this module only drains the journal.

use std::path::{Path, PathBuf};

use anyhow::bail;
use chrono::Utc;
use ed25519_dalek::SigningKey;
use serde::Serialize;
use serde_json::json;
use weft_api::Id;
use weft_api::client::{Client, CommandSigner};
use weft_api::journal::{Journal, JournalError, Rebase};
use weft_api::work::CommandType;
use weft_api::work::views::CommandAccepted;

use super::lease::remember;
use crate::cli::args::ClientArgs;
use crate::cli::work_args::CommandArgs;

/// The agent as a Command signer: its key, its session's client, Group and epochs.
pub(super) struct Signer {
    pub(super) api: Client,
    /// The weft home, whose `work.json` every answer refreshes.
    pub(super) home: PathBuf,
    pub(super) key: SigningKey,
    pub(super) agent_id: Id,
    pub(super) group_id: Id,
    pub(super) session_epoch: u64,
    pub(super) membership_epoch: u64,
}

impl Signer {
    pub(super) fn open(client: &ClientArgs) -> anyhow::Result<Self> {
        let (session, api) = client.session()?;
        let (Some(session_epoch), Some(membership_epoch)) =
            (session.session_epoch, session.membership_epoch)
        else {
            bail!("session.json predates signed Commands: run `weft login` again");
        };
        Ok(Self {
            api,
            home: client.home()?,
            key: client.key()?,
            agent_id: Id::parse("agentId", &session.agent_id)?,
            group_id: Id::parse("groupId", &session.group_id)?,
            session_epoch,
            membership_epoch,
        })
    }

    /// Signs and sends `kind` with `payload`, then prints the answer.
    pub(super) async fn send(
        &self,
        kind: CommandType,
        payload: &impl Serialize,
        args: &CommandArgs,
        lease: Option<Id>,
    ) -> anyhow::Result<()> {
        reconcile_first(self).await?;
        let signer = CommandSigner {
            key: &self.key,
            agent_id: &self.agent_id,
            group_id: &self.group_id,
            session_epoch: self.session_epoch,
            membership_epoch: self.membership_epoch,
        };
        let payload = serde_json::to_value(payload)?;
        let work_item = payload["workItemId"].as_str().map(str::to_owned);
        let sent = self
            .api
            .command(
                &signer,
                kind,
                payload,
                lease.as_ref(),
                args.expected_revision,
            )
            .await;
        if let (Err(error), Some(work_item)) = (&sent, &work_item)
            && error.code() == Some(weft_api::ErrorCode::StaleLease)
        {
            // The lease `work.json` remembered is over: the next Command quotes the
            // WorkItem's current one (`lease_for`) instead of failing the same way for ever.
            super::lease::forget(&self.home, work_item);
        }
        let accepted = sent?;
        remember(&self.home, self.agent_id.as_str(), &accepted.state);
        print_accepted(&accepted, args.json)
    }

    /// `--lease`, else the Execution Lease `work.json` remembers for the WorkItem (the one
    /// this home's last answer showed it holding), else the WorkItem's current lease when
    /// this agent owns it (LSE-4). The remembered one first: quoting whatever lease is
    /// current would carry a late Command of an attempt whose lease was revoked past the
    /// fence (LSE-5) under its successor's.
    pub(super) async fn lease_for(
        &self,
        work_item: &Id,
        args: &CommandArgs,
    ) -> anyhow::Result<Option<Id>> {
        if let Some(lease) = &args.lease {
            return Ok(Some(Id::parse("lease", lease)?));
        }
        let remembered = super::lease::LocalState::load(&self.home)?
            .work_items
            .remove(work_item.as_str());
        if let Some(lease) = remembered {
            return Ok(Some(Id::parse("lease", &lease.lease_id)?));
        }
        let view = self.api.work_item(work_item).await?;
        let mine = view
            .owner
            .as_ref()
            .is_some_and(|owner| owner.agent_id == self.agent_id.as_str());
        match view.lease {
            Some(lease) if mine => Ok(Some(Id::parse("lease", &lease.lease_id)?)),
            _ => Ok(None),
        }
    }

    /// `--offer`, else the newest live offer of the WorkItem that names this agent.
    pub(super) async fn offer_for(
        &self,
        work_item: &Id,
        offer: Option<String>,
    ) -> anyhow::Result<Id> {
        if let Some(offer) = offer {
            return Ok(Id::parse("offer", &offer)?);
        }
        let view = self.api.work_item(work_item).await?;
        let live = view.offers.iter().rev().find(|offer| {
            offer.status == "live" && offer.candidates.iter().any(|c| c == self.agent_id.as_str())
        });
        match live {
            Some(offer) => Ok(Id::parse("offer", &offer.offer_id)?),
            None => bail!(
                "no live offer of {work_item} names {}; pass --offer",
                self.agent_id
            ),
        }
    }
}

const FILE: &str = "journal.jsonl";

/// The offline journal of the weft home `home`.
pub(super) fn journal_path(home: &Path) -> PathBuf {
    home.join(FILE)
}

fn rebase(signer: &Signer) -> Rebase<'_> {
    Rebase {
        key: &signer.key,
        session_epoch: signer.session_epoch,
        membership_epoch: signer.membership_epoch,
        issued_at: Utc::now().fixed_offset(),
    }
}

impl ClientArgs {
    /// OFL-5, the step every command that writes takes before anything else: `weft put`,
    /// `weft evidence add`, `weft context publish` and `forward`, `weft review`, and every
    /// signed Command (`Signer::send`) and token request of `weft mission` and `weft work`.
    /// A Worker reconciles before it causes any further side effect, so what the journal
    /// holds is sent first, and a refusal stops the command with the journal's message.
    pub(in crate::cli) async fn reconcile_first(&self) -> anyhow::Result<()> {
        // Nothing to send: no session is needed (an operator's or a reader's home has none).
        if open_unfinished(&self.home()?)?.is_none() {
            return Ok(());
        }
        reconcile_first(&Signer::open(self)?).await
    }
}

/// The journal of `home` when it holds something pending or a refusal, else `None`.
fn open_unfinished(home: &Path) -> anyhow::Result<Option<Journal>> {
    let path = journal_path(home);
    if !path.exists() {
        return Ok(None);
    }
    let journal = Journal::open(&path)?;
    if journal.pending().next().is_none() && journal.stopped().is_none() {
        return Ok(None);
    }
    Ok(Some(journal))
}

/// OFL-5: what the journal holds goes before anything else. Nothing pending, everything
/// accepted, or the Authority still away (the caller's own send finds that out): `Ok`. A
/// refusal stops the journal and this Command.
pub(super) async fn reconcile_first(signer: &Signer) -> anyhow::Result<()> {
    let Some(mut journal) = open_unfinished(&signer.home)? else {
        return Ok(());
    };
    match journal.reconcile(&signer.api, rebase(signer)).await {
        Ok(done) => {
            for accepted in &done.accepted {
                remember(&signer.home, signer.agent_id.as_str(), &accepted.state);
            }
            if !done.accepted.is_empty() {
                eprintln!(
                    "offline journal: {} buffered Command(s) reconciled",
                    done.accepted.len()
                );
            }
            if let Some((id, code, detail)) = done.refused {
                bail!(
                    "the offline journal stopped at {id}: {detail} ({code}); nothing more is sent \
                     until `weft work journal --discard`"
                );
            }
            Ok(())
        }
        Err(JournalError::Unreachable(_)) => Ok(()),
        Err(other) => Err(other.into()),
    }
}

/// The answer of a Command: its Events, then the aggregate it left behind.
fn print_accepted(accepted: &CommandAccepted, as_json: bool) -> anyhow::Result<()> {
    if as_json {
        println!("{}", serde_json::to_string_pretty(accepted)?);
        return Ok(());
    }
    println!("accepted {}", accepted.command_id);
    for event in &accepted.events {
        println!("  #{} {}", event.sequence, event.kind);
    }
    let state = &accepted.state;
    let name = state["workItemId"]
        .as_str()
        .map(|id| format!("work item {id}"))
        .or_else(|| {
            state["missionId"]
                .as_str()
                .map(|id| format!("mission {id}"))
        })
        .or_else(|| {
            state["proposalId"]
                .as_str()
                .map(|id| format!("proposal {id}"))
        });
    match name {
        Some(name) => {
            println!(
                "{name}: {} (revision {})",
                state["state"].as_str().unwrap_or("?"),
                state["revision"]
            );
            if let Some(lease) = state["lease"]["leaseId"].as_str() {
                println!(
                    "lease {lease} until {}",
                    state["lease"]["expiresAt"].as_str().unwrap_or("?")
                );
            }
        }
        None => println!("{}", json!(state)),
    }
    Ok(())
}
