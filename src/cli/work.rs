//! Missions and WorkItems from the command line (issue #11): `weft mission …` and
//! `weft work …` sign a Command with the agent key of the weft home and send it to the
//! session's Group (DESIGN §10); `show` and `ls` print the reads.
//!
//! This module builds payloads and prints answers; the rules (who may do what, which
//! transition is legal, which lease is current) are the server's, so a refusal is printed
//! with the server's code rather than guessed here. Two conveniences look at the WorkItem's
//! current view first: an owner Command quotes the current Execution Lease when the caller
//! owns the WorkItem (LSE-4), and `accept`/`decline` pick the live offer naming the caller.
//! Contracts and selection bases are read from JSON or TOML files and parsed into the typed
//! `api` shapes, so both spellings send the same bytes and `WorkContract` validation applies
//! before anything is signed.
//!
//! It is long because every Command of DESIGN §10's table the CLI offers is spelled out here,
//! each with its own payload; the tests live in `work/tests.rs`. This file only uses its
//! children, which never import it: `signer` (the agent as a Command signer, and how a signed
//! Command leaves, the offline journal first), `lease` (the weft home's `work.json`, the
//! leases this agent holds, refreshed from every answer), `offline` (buffering when the
//! Authority does not answer, `weft work journal`), `owner` (`progress`, `token`) and
//! `conversation` (`ask`, `answer`).

mod conversation;
pub(super) mod lease;
mod offline;
mod owner;
mod plan;
mod signer;

use std::path::Path;

use anyhow::Context as _;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use weft_api::work::command::{
    Checkpoint, DeclineReason, FailReason, MissionClose as MissionClosePayload, MissionCreate,
    OfferRef, WorkAuthorize, WorkBlock, WorkCancel, WorkCheckpoint, WorkDecline, WorkFail,
    WorkOffer, WorkRef, WorkSubmit,
};
use weft_api::work::contract::{Budgets, Capability};
use weft_api::work::views::WorkItemView;
use weft_api::work::{CommandType, SelectionBasis, WorkContract};
use weft_api::{ArtifactId, Id};

use super::args::ClientArgs;
use super::errors::wire_word;
use super::work_args::{
    CommandArgs, MissionAction, MissionClose, OfferArgs, WorkAction, artifact_ids,
};
use signer::Signer;

/// `weft mission …`.
pub(super) async fn mission(client: &ClientArgs, action: MissionAction) -> anyhow::Result<()> {
    let (kind, close) = match action {
        MissionAction::Create {
            mission,
            title,
            priority,
            financial,
            tokens,
            tool_calls,
            compute_seconds,
            wall_clock_seconds,
            side_effects,
            command,
        } => {
            let payload = MissionCreate {
                mission_id: Id::parse("mission", &mission)?,
                title,
                priority_class: wire_word("priority", &priority)?,
                budget: Budgets {
                    financial,
                    tokens,
                    tool_calls,
                    compute_seconds,
                    wall_clock_seconds,
                    side_effects,
                },
                parent_work_item_id: None,
            };
            let signer = Signer::open(client)?;
            return signer
                .send(CommandType::MissionCreate, &payload, &command, None)
                .await;
        }
        MissionAction::Show { mission, json } => {
            let (_, api) = client.session()?;
            let view = api.mission(&Id::parse("mission", &mission)?).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&view)?);
                return Ok(());
            }
            println!("mission     {}", view.mission_id);
            println!("title       {}", view.title);
            println!("state       {}", text(&view.state));
            println!("revision    {}", view.revision);
            println!("priority    {}", text(&view.priority_class));
            println!("budget      {}", serde_json::to_string(&view.budget.limit)?);
            println!("spent       {}", serde_json::to_string(&view.budget.spent)?);
            if let Some(parent) = &view.parent_work_item_id {
                println!("parent      {parent}");
            }
            for node in &view.work_items {
                println!(
                    "work item   {} {}{}",
                    node.work_item_id,
                    node.state.as_str(),
                    if node.eligible { " (eligible)" } else { "" }
                );
            }
            return Ok(());
        }
        MissionAction::Run { plan, timeout_secs } => {
            let signer = Signer::open(client)?;
            return plan::run(&signer, &plan, std::time::Duration::from_secs(timeout_secs)).await;
        }
        MissionAction::Approve { close, force } => {
            end_live_work_items(client, &close, force).await?;
            (CommandType::MissionApprove, close)
        }
        MissionAction::Fail(close) => (CommandType::MissionFail, close),
        MissionAction::Cancel(close) => (CommandType::MissionCancel, close),
    };
    let MissionClose {
        mission,
        evidence,
        command,
    } = close;
    let payload = MissionClosePayload {
        mission_id: Id::parse("mission", &mission)?,
        evidence: if evidence.is_empty() {
            None
        } else {
            Some(artifact_ids(&evidence)?)
        },
    };
    Signer::open(client)?
        .send(kind, &payload, &command, None)
        .await
}

/// Before `mission approve`: the Mission's WorkItems that are still live. The server refuses
/// the approval while any is (T18 ends WorkItems only when a Mission fails or is cancelled,
/// SM-12), so without `force` they are named and nothing is sent; with it each is cancelled
/// by its own signed `work.cancel`, printed as it goes, before the approval.
async fn end_live_work_items(
    client: &ClientArgs,
    close: &MissionClose,
    force: bool,
) -> anyhow::Result<()> {
    let (_, api) = client.session()?;
    let mission = Id::parse("mission", &close.mission)?;
    let view = api.mission(&mission).await?;
    let live: Vec<_> = view
        .work_items
        .iter()
        .filter(|node| node.state.is_live())
        .collect();
    if live.is_empty() {
        return Ok(());
    }
    let named: Vec<String> = live
        .iter()
        .map(|node| format!("{} ({})", node.work_item_id, node.state.as_str()))
        .collect();
    if !force {
        anyhow::bail!(
            "Mission {mission} still has live WorkItems: {}. Approving needs each accepted, failed or cancelled first; `weft mission approve {mission} --force` cancels them (one signed work.cancel each) and then approves",
            named.join(", ")
        );
    }
    let signer = Signer::open(client)?;
    let quiet = CommandArgs {
        lease: None,
        expected_revision: None,
        json: close.command.json,
    };
    for node in live {
        eprintln!("cancelling {} ({})", node.work_item_id, node.state.as_str());
        let payload = WorkCancel {
            work_item_id: Id::parse("work item", &node.work_item_id)?,
            reason: format!(
                "cancelled to approve Mission {mission} (weft mission approve --force)"
            ),
        };
        signer
            .send(CommandType::WorkCancel, &payload, &quiet, None)
            .await?;
    }
    Ok(())
}

/// `weft work …`.
pub(super) async fn work(client: &ClientArgs, action: WorkAction) -> anyhow::Result<()> {
    match action {
        WorkAction::Show { work_item, json } => {
            let (session, api) = client.session()?;
            let view = api.work_item(&Id::parse("work item", &work_item)?).await?;
            lease::remember(
                &client.home()?,
                &session.agent_id,
                &serde_json::to_value(&view)?,
            );
            if json {
                println!("{}", serde_json::to_string_pretty(&view)?);
            } else {
                print_work_item(&view);
                print_story(&api, &view).await?;
            }
            Ok(())
        }
        WorkAction::Ls { mission, json } => {
            let (_, api) = client.session()?;
            let graph = api.mission_graph(&Id::parse("mission", &mission)?).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&graph)?);
                return Ok(());
            }
            let mut table =
                super::table::Table::new(&["WORK ITEM", "STATE", "ELIGIBLE", "DEPENDS ON"]);
            for node in &graph.nodes {
                let depends: Vec<&str> = graph
                    .edges
                    .iter()
                    .filter(|edge| edge.from == node.work_item_id)
                    .map(|edge| edge.to.as_str())
                    .collect();
                table.row(vec![
                    node.work_item_id.to_string(),
                    node.state.as_str().to_owned(),
                    if node.eligible { "yes" } else { "no" }.to_owned(),
                    if depends.is_empty() {
                        "-".to_owned()
                    } else {
                        depends.join(",")
                    },
                ]);
            }
            print!("{}", table.render());
            Ok(())
        }
        WorkAction::ContractTemplate => {
            print!("{CONTRACT_TEMPLATE}");
            Ok(())
        }
        action => command(client, action).await,
    }
}

/// `weft work contract-template`: a contract that `read_contract` accepts, every field with a
/// comment (a test parses and validates it).
const CONTRACT_TEMPLATE: &str = include_str!("work/contract_template.toml");

/// The `weft work` actions that sign a Command.
async fn command(client: &ClientArgs, action: WorkAction) -> anyhow::Result<()> {
    let signer = Signer::open(client)?;
    let work_item_id = |text: &str| Id::parse("work item", text);
    match action {
        WorkAction::Authorize {
            work_item,
            mission,
            contract,
            proposal,
            command,
        } => {
            let payload = WorkAuthorize {
                work_item_id: work_item_id(&work_item)?,
                mission_id: Id::parse("mission", &mission)?,
                contract: read_contract(&contract)?,
                proposal_id: proposal.map(|p| Id::parse("proposal", &p)).transpose()?,
            };
            signer
                .send(CommandType::WorkAuthorize, &payload, &command, None)
                .await
        }
        WorkAction::Offer(args) => offer(&signer, args).await,
        WorkAction::Accept {
            work_item,
            offer,
            command,
        } => {
            let work_item_id = work_item_id(&work_item)?;
            let offer_id = signer.offer_for(&work_item_id, offer).await?;
            let payload = OfferRef {
                work_item_id,
                offer_id,
            };
            signer
                .send(CommandType::WorkAcceptOffer, &payload, &command, None)
                .await
        }
        WorkAction::Decline {
            work_item,
            offer,
            reason,
            detail,
            command,
        } => {
            let work_item_id = work_item_id(&work_item)?;
            let offer_id = signer.offer_for(&work_item_id, offer).await?;
            let payload = WorkDecline {
                work_item_id,
                offer_id,
                reason: wire_word::<DeclineReason>("reason", &reason)?,
                detail,
            };
            signer
                .send(CommandType::WorkDeclineOffer, &payload, &command, None)
                .await
        }
        WorkAction::Ask(args) => conversation::ask(&signer, args).await,
        WorkAction::Answer(args) => conversation::answer(&signer, args).await,
        WorkAction::Start(args) => owner_ref(&signer, CommandType::WorkStart, args).await,
        // `lease.renew` quoting the current lease: the shape of every owner `WorkRef`.
        WorkAction::Renew(args) => owner_ref(&signer, CommandType::LeaseRenew, args).await,
        WorkAction::Progress(args) => owner::progress(&signer, args).await,
        WorkAction::Token(args) => owner::token(&signer, args).await,
        WorkAction::Unblock(args) => owner_ref(&signer, CommandType::WorkUnblock, args).await,
        WorkAction::Preempt(args) => {
            let payload = WorkRef {
                work_item_id: work_item_id(&args.work_item)?,
            };
            signer
                .send(
                    CommandType::PreemptionRequest,
                    &payload,
                    &args.command,
                    None,
                )
                .await
        }
        WorkAction::AcceptResult(args) => {
            let payload = WorkRef {
                work_item_id: work_item_id(&args.work_item)?,
            };
            signer
                .send(CommandType::WorkAcceptResult, &payload, &args.command, None)
                .await
        }
        WorkAction::Journal {
            sync,
            discard,
            json,
        } => offline::journal(&signer, sync, discard, json).await,
        WorkAction::Checkpoint {
            work_item,
            artifact,
            note,
            usage,
            command,
        } => {
            let work_item_id = work_item_id(&work_item)?;
            let payload = WorkCheckpoint {
                work_item_id: work_item_id.clone(),
                checkpoint: Checkpoint {
                    artifact: artifact.map(|a| ArtifactId::parse(&a)).transpose()?,
                    note,
                },
                usage: offline::usage(&usage)?,
            };
            // When the Authority does not answer, the checkpoint is buffered (OFL-3).
            offline::send_or_buffer(
                &signer,
                CommandType::WorkCheckpoint,
                &work_item_id,
                &payload,
                payload.usage.as_ref(),
                &command,
            )
            .await
        }
        WorkAction::Block {
            work_item,
            needs,
            artifact,
            note,
            command,
        } => {
            let work_item_id = work_item_id(&work_item)?;
            let lease = signer.lease_for(&work_item_id, &command).await?;
            let payload = WorkBlock {
                work_item_id,
                needs,
                checkpoint: Checkpoint {
                    artifact: artifact.map(|a| ArtifactId::parse(&a)).transpose()?,
                    note,
                },
            };
            signer
                .send(CommandType::WorkBlock, &payload, &command, lease)
                .await
        }
        WorkAction::Submit {
            work_item,
            artifacts,
            evidence,
            command,
        } => {
            let work_item_id = work_item_id(&work_item)?;
            let lease = signer.lease_for(&work_item_id, &command).await?;
            let payload = WorkSubmit {
                work_item_id,
                artifacts: artifact_ids(&artifacts)?,
                evidence: artifact_ids(&evidence)?,
                usage: None,
            };
            signer
                .send(CommandType::WorkSubmit, &payload, &command, lease)
                .await
        }
        WorkAction::Fail {
            work_item,
            reason,
            detail,
            evidence,
            command,
        } => {
            let work_item_id = work_item_id(&work_item)?;
            let lease = signer.lease_for(&work_item_id, &command).await?;
            let payload = WorkFail {
                work_item_id,
                evidence: artifact_ids(&evidence)?,
                reason: wire_word::<FailReason>("reason", &reason)?,
                detail,
            };
            signer
                .send(CommandType::WorkFail, &payload, &command, lease)
                .await
        }
        WorkAction::Cancel {
            work_item,
            reason,
            command,
        } => {
            let payload = WorkCancel {
                work_item_id: work_item_id(&work_item)?,
                reason,
            };
            signer
                .send(CommandType::WorkCancel, &payload, &command, None)
                .await
        }
        WorkAction::Show { .. } | WorkAction::Ls { .. } | WorkAction::ContractTemplate => {
            unreachable!("reads and the template are answered by `work` before signing anything")
        }
    }
}

/// An owner Command naming only its WorkItem (`start`, `unblock`), quoting the current lease.
async fn owner_ref(
    signer: &Signer,
    kind: CommandType,
    args: super::work_args::WorkRefArgs,
) -> anyhow::Result<()> {
    let work_item_id = Id::parse("work item", &args.work_item)?;
    let lease = signer.lease_for(&work_item_id, &args.command).await?;
    let payload = WorkRef { work_item_id };
    signer.send(kind, &payload, &args.command, lease).await
}

/// `weft work offer`: the selection basis from `--basis FILE` or from the flags.
async fn offer(signer: &Signer, args: OfferArgs) -> anyhow::Result<()> {
    let now = chrono::Utc::now().fixed_offset();
    let selection_basis = match &args.basis {
        Some(path) => read_typed::<SelectionBasis>(path, "selection basis")?,
        None => SelectionBasis {
            capability_matches: args
                .capabilities
                .iter()
                .map(|text| {
                    let (id, version) = text
                        .rsplit_once(':')
                        .context("--capability wants id:version")?;
                    Ok(Capability {
                        id: id.to_owned(),
                        version: version.to_owned(),
                    })
                })
                .collect::<anyhow::Result<_>>()?,
            authorization_eligible: !args.not_authorization_eligible,
            availability_estimate: match &args.available_at {
                Some(text) => chrono::DateTime::parse_from_rfc3339(text)
                    .context("--available-at wants an RFC 3339 instant")?,
                None => now,
            },
            expected_cost: args.expected_cost,
            reliability_evidence: artifact_ids(&args.reliability_evidence)?,
            policy_rules: args.policy_rules.clone(),
        },
    };
    selection_basis.validate()?;
    let seconds = i64::try_from(args.expires_in).context("--expires-in is too large")?;
    let expires_at = now
        .checked_add_signed(chrono::Duration::seconds(seconds))
        .context("--expires-in is too large")?;
    let offer_id = match &args.offer {
        Some(offer) => Id::parse("offer", offer)?,
        None => Id::parse("offer", &format!("offer-{}", uuid::Uuid::now_v7()))?,
    };
    let payload = WorkOffer {
        work_item_id: Id::parse("work item", &args.work_item)?,
        offer_id,
        candidates: args
            .candidates
            .iter()
            .map(|c| Id::parse("candidate", c))
            .collect::<Result<_, _>>()?,
        expires_at,
        selection_basis,
    };
    signer
        .send(CommandType::WorkOffer, &payload, &args.command, None)
        .await
}

/// A work contract from a JSON or TOML file, validated (CON-1) before it is signed.
fn read_contract(path: &Path) -> anyhow::Result<WorkContract> {
    let contract: WorkContract = read_typed(path, "contract")?;
    contract
        .validate()
        .with_context(|| format!("{}: invalid contract", path.display()))?;
    Ok(contract)
}

/// Parses a JSON or TOML file (`.toml` by extension) into `T` through the same JSON value,
/// so both spellings of a document give the same `T` (TOML datetimes become RFC 3339 text).
fn read_typed<T: DeserializeOwned>(path: &Path, what: &str) -> anyhow::Result<T> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let is_toml = path
        .extension()
        .is_some_and(|ext| ext.eq_ignore_ascii_case("toml"));
    let value = if is_toml {
        let table: toml::Table = text
            .parse()
            .with_context(|| format!("parsing {} as TOML", path.display()))?;
        toml_to_json(toml::Value::Table(table))
            .with_context(|| format!("converting {}", path.display()))?
    } else {
        serde_json::from_str(&text)
            .with_context(|| format!("parsing {} as JSON", path.display()))?
    };
    serde_json::from_value(value).with_context(|| format!("{}: not a valid {what}", path.display()))
}

/// TOML has no null (an absent optional field is simply left out) and a datetime type of its
/// own; everything else maps one to one.
fn toml_to_json(value: toml::Value) -> anyhow::Result<Value> {
    Ok(match value {
        toml::Value::String(text) => Value::String(text),
        toml::Value::Integer(number) => Value::from(number),
        toml::Value::Float(number) => serde_json::Number::from_f64(number)
            .map(Value::Number)
            .context("a float is not finite")?,
        toml::Value::Boolean(flag) => Value::Bool(flag),
        toml::Value::Datetime(instant) => Value::String(instant.to_string()),
        toml::Value::Array(items) => Value::Array(
            items
                .into_iter()
                .map(toml_to_json)
                .collect::<anyhow::Result<_>>()?,
        ),
        toml::Value::Table(table) => Value::Object(
            table
                .into_iter()
                .map(|(key, value)| Ok((key, toml_to_json(value)?)))
                .collect::<anyhow::Result<_>>()?,
        ),
    })
}

/// The wire name of a protocol word, for printing.
fn text(value: &impl Serialize) -> String {
    match serde_json::to_value(value) {
        Ok(Value::String(text)) => text,
        Ok(other) => other.to_string(),
        Err(_) => "?".to_owned(),
    }
}

fn print_work_item(view: &WorkItemView) {
    println!("work item   {}", view.work_item_id);
    println!("mission     {}", view.mission_id);
    println!("state       {}", view.state.as_str());
    println!(
        "revision    {} (contract {})",
        view.revision, view.contract_revision
    );
    println!("objective   {}", view.contract.objective);
    println!("eligible    {}", view.eligible);
    if let Some(owner) = &view.owner {
        println!(
            "owner       {} (ownership epoch {})",
            owner.agent_id, owner.ownership_epoch
        );
    }
    if let Some(lease) = &view.lease {
        println!(
            "lease       {} {} until {}",
            lease.lease_id,
            lease.kind,
            super::table::when_text(&lease.expires_at)
        );
    }
    for offer in &view.offers {
        println!(
            "offer       {} {} to {} until {}",
            offer.offer_id,
            offer.status,
            offer.candidates.join(","),
            super::table::when_text(&offer.expires_at)
        );
    }
    if !view.depends_on.is_empty() {
        println!("depends on  {}", view.depends_on.join(","));
    }
    if let Some(child) = &view.child_mission_id {
        println!("child       {child}");
    }
    println!("attempts    {}", view.attempts);
    println!(
        "history     {}",
        view.history
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(",")
    );
}

/// The WorkItem's story, one line per history Event (issue #50): when, what, who acted (the
/// Command's signer, or the Authority), and the state, owner, lease and reason it left. One
/// read per Event (at most the 256 the view lists).
async fn print_story(api: &weft_api::client::Client, view: &WorkItemView) -> anyhow::Result<()> {
    let group = Id::parse("group", &view.group_id)?;
    println!("story");
    for sequence in &view.history {
        let page = api.events(&group, sequence.saturating_sub(1), 1).await?;
        let Some(weft_api::event::Delivered::Event(event)) = page.first() else {
            println!("  #{sequence} withheld");
            continue;
        };
        let payload: Value = serde_json::from_str(event.payload.get()).unwrap_or_default();
        let mut line = format!("  #{sequence} {} {}", event.appended_at, event.kind);
        match payload["actor"]["agentId"].as_str() {
            Some(agent) => line.push_str(&format!(" by {agent}")),
            None => line.push_str(" by the Authority"),
        }
        if let Some(state) = payload["state"].as_str() {
            line.push_str(&format!(" · {state}"));
        }
        if let Some(owner) = payload["owner"].as_str() {
            let epoch = payload["ownershipEpoch"].as_u64().unwrap_or_default();
            line.push_str(&format!(" · owner {owner} (epoch {epoch})"));
        }
        for field in ["leaseId", "offerId", "reason", "failure"] {
            if let Some(value) = payload["detail"][field].as_str() {
                line.push_str(&format!(" · {field} {value}"));
            }
        }
        println!("{line}");
    }
    Ok(())
}

#[cfg(test)]
mod tests;
