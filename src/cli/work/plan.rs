//! `weft mission run --plan plan.toml` (issue #47's quick start): a Coordinator that takes a
//! Mission from a plan to `verified` with signed Commands, nothing it could not do by hand.
//!
//! The plan names the Mission and its WorkItems, each with the capability it needs, what it
//! depends on and its objective; every other contract field comes from the contract template
//! (`weft work contract-template`), with the deadline a day ahead. Then, until every WorkItem
//! is verified (or one fails, or `--timeout-secs` passes):
//! - `mission.create` and `work.authorize` for whatever does not exist yet (the Mission's
//!   budget is the sum of its WorkItems', so their spend always fits);
//! - every `open` WorkItem, and every `offered` one without a live offer, is offered to the
//!   Group's members whose Agent Card (read through Presence, SCH-11) has its capability,
//!   with a structured selection basis (OFR-10);
//! - a `failed` WorkItem is offered again while its retry policy allows another attempt
//!   (SM-5, PRG-8), and fails the plan when it does not;
//! - every `submitted` WorkItem whose criteria all have a passing verdict is accepted
//!   (`work.accept_result`), and one with a failing verdict is failed `review_failed`;
//! - at the end, `mission.approve`.
//!
//! It is a Coordinator's convenience: the Authority still checks every Command, and the
//! Workers' admission control still decides what they take.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use chrono::Utc;
use serde::Deserialize;
use serde_json::json;
use weft_api::Id;
use weft_api::evidence::Outcome;
use weft_api::work::contract::{Budgets, Capability};
use weft_api::work::{CommandType, WorkContract, WorkState};

use super::signer::Signer;

/// The plan file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Plan {
    mission: String,
    title: String,
    #[serde(default = "normal")]
    priority: String,
    #[serde(rename = "work")]
    work: Vec<PlannedWork>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PlannedWork {
    id: String,
    /// `id:version`
    capability: String,
    objective: String,
    #[serde(default)]
    depends_on: Vec<String>,
    #[serde(default)]
    urgency: Option<String>,
    /// Contract overrides: the Execution Lease, the wall-clock budget, the retry policy.
    #[serde(default)]
    execution_seconds: Option<u64>,
    #[serde(default)]
    wall_clock_seconds: Option<u64>,
    #[serde(default)]
    max_attempts: Option<u32>,
    #[serde(default)]
    backoff_seconds: Option<u64>,
}

fn normal() -> String {
    "normal".into()
}

/// The contract of one planned WorkItem: the template with the plan's fields.
fn contract(work: &PlannedWork) -> anyhow::Result<WorkContract> {
    let template: toml::Value = toml::from_str(include_str!("contract_template.toml"))?;
    let mut value = serde_json::to_value(template)?;
    let (id, version) = work
        .capability
        .split_once(':')
        .context("capability is id:version")?;
    value["objective"] = json!(work.objective);
    value["requiredCapabilities"] = json!([{"id": id, "version": version}]);
    value["dependsOn"] = json!(work.depends_on);
    value["deadline"] = json!((Utc::now() + chrono::Duration::days(1)).to_rfc3339());
    value["permissions"] = json!({"tools": [], "data": [], "operations": []});
    value["acceptanceCriteria"] = json!([{"id": "ac-1", "description": "the executor ran to completion",
        "requiredEvidence": ["automated_test"]}]);
    if let Some(urgency) = &work.urgency {
        value["urgency"] = json!(urgency);
    }
    if let Some(seconds) = work.execution_seconds {
        value["leases"]["executionSeconds"] = json!(seconds);
    }
    if let Some(seconds) = work.wall_clock_seconds {
        value["budgets"]["wallClockSeconds"] = json!(seconds);
    }
    if let Some(attempts) = work.max_attempts {
        value["retryPolicy"]["maxAttempts"] = json!(attempts);
    }
    if let Some(seconds) = work.backoff_seconds {
        value["retryPolicy"]["backoffSeconds"] = json!(seconds);
    }
    if let Some(object) = value.as_object_mut() {
        object.remove("notes");
    }
    let contract: WorkContract = serde_json::from_value(value)?;
    contract.validate()?;
    Ok(contract)
}

fn sum(total: &mut Budgets, add: &Budgets) {
    total.financial += add.financial;
    total.tokens += add.tokens;
    total.tool_calls += add.tool_calls;
    total.compute_seconds += add.compute_seconds;
    total.wall_clock_seconds += add.wall_clock_seconds;
    total.side_effects += add.side_effects;
}

/// Runs the plan to its end; prints one line per step.
pub(super) async fn run(
    signer: &Signer,
    plan_path: &Path,
    timeout: Duration,
) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(plan_path)
        .with_context(|| format!("reading {}", plan_path.display()))?;
    let plan: Plan =
        toml::from_str(&text).with_context(|| format!("parsing {}", plan_path.display()))?;
    let mission = Id::parse("mission", &plan.mission)?;
    let contracts: BTreeMap<String, WorkContract> = plan
        .work
        .iter()
        .map(|w| Ok((w.id.clone(), contract(w)?)))
        .collect::<anyhow::Result<_>>()?;
    let api = &signer.api;
    let send = |kind: CommandType, payload: serde_json::Value| async move {
        let key = &signer.key;
        let command = weft_api::client::CommandSigner {
            key,
            agent_id: &signer.agent_id,
            group_id: &signer.group_id,
            session_epoch: signer.session_epoch,
            membership_epoch: signer.membership_epoch,
        };
        api.command(&command, kind, payload, None, None).await
    };
    if api.mission(&mission).await.is_err() {
        let mut budget = Budgets::default();
        for c in contracts.values() {
            sum(&mut budget, &c.budgets);
        }
        send(
            CommandType::MissionCreate,
            json!({"missionId": mission, "title": plan.title, "priorityClass": plan.priority, "budget": budget}),
        )
        .await
        .context("mission.create")?;
        println!("mission {mission} created");
    }
    for work in &plan.work {
        let id = Id::parse("workItem", &work.id)?;
        if api.work_item(&id).await.is_ok() {
            continue;
        }
        send(
            CommandType::WorkAuthorize,
            json!({"workItemId": id, "missionId": mission, "contract": contracts[&work.id]}),
        )
        .await
        .with_context(|| format!("work.authorize {id}"))?;
        println!("{id} authorized");
    }
    let began = Instant::now();
    loop {
        if began.elapsed() > timeout {
            bail!(
                "not every WorkItem was verified within {} s",
                timeout.as_secs()
            );
        }
        let view = api.mission(&mission).await?;
        if view
            .work_items
            .iter()
            .all(|w| w.state == WorkState::Verified)
        {
            send(CommandType::MissionApprove, json!({"missionId": mission}))
                .await
                .context("mission.approve")?;
            println!(
                "mission {mission} approved: {} WorkItems verified",
                view.work_items.len()
            );
            return Ok(());
        }
        if let Some(cancelled) = view
            .work_items
            .iter()
            .find(|w| w.state == WorkState::Cancelled)
        {
            bail!("{} is cancelled", cancelled.work_item_id);
        }
        let presence = api
            .presence(&signer.group_id)
            .await
            .unwrap_or(weft_api::worker::card::Presence { agents: Vec::new() });
        for node in &view.work_items {
            let id = Id::parse("workItem", &node.work_item_id)?;
            match node.state {
                WorkState::Open | WorkState::Offered | WorkState::Failed => {
                    let item = api.work_item(&id).await?;
                    if item.offers.iter().any(|o| o.status == "live") {
                        continue;
                    }
                    // SM-5, PRG-8: a failed WorkItem is offered again while its retry policy
                    // allows another attempt; the Authority enforces the bound and backoff.
                    if node.state == WorkState::Failed
                        && item.attempts >= item.contract.retry_policy.max_attempts.max(1)
                    {
                        bail!("{id} failed after {} attempts", item.attempts);
                    }
                    let wanted: &[Capability] = &item.contract.required_capabilities;
                    let candidates: Vec<&str> = presence
                        .agents
                        .iter()
                        .filter(|a| {
                            a.card.as_ref().is_some_and(|card| {
                                wanted.iter().all(|w| card.capabilities.contains(w))
                            })
                        })
                        .map(|a| a.agent_id.as_str())
                        .collect();
                    if candidates.is_empty() {
                        continue;
                    }
                    let expires = Utc::now()
                        + chrono::Duration::seconds(
                            i64::try_from(item.contract.leases.offer_seconds).unwrap_or(600),
                        );
                    let offer = format!("offer-{}-{}", node.work_item_id, item.revision);
                    let answer = send(
                        CommandType::WorkOffer,
                        json!({"workItemId": id, "offerId": offer, "candidates": candidates,
                            "expiresAt": expires.to_rfc3339(),
                            "selectionBasis": {"capabilityMatches": wanted, "authorizationEligible": true,
                                "availabilityEstimate": Utc::now().to_rfc3339(), "expectedCost": 0.0,
                                "reliabilityEvidence": [], "policyRules": ["agent-card-capability"]}}),
                    )
                    .await;
                    match answer {
                        Ok(_) => println!("{id} offered to {}", candidates.join(", ")),
                        Err(error) => eprintln!("{id}: work.offer: {error}"),
                    }
                }
                WorkState::Submitted => {
                    let criteria = api.criteria(&id).await?;
                    let item = api.work_item(&id).await?;
                    let verdict = |c: &str| {
                        criteria
                            .criteria
                            .iter()
                            .find(|s| s.criterion == c)
                            .map(|s| s.latest.outcome)
                    };
                    let outcomes: Vec<Option<Outcome>> = item
                        .contract
                        .acceptance_criteria
                        .iter()
                        .map(|c| verdict(c.id.as_str()))
                        .collect();
                    if outcomes.contains(&Some(Outcome::Fail)) {
                        send(
                            CommandType::WorkFail,
                            json!({"workItemId": id, "evidence": [], "reason": "review_failed"}),
                        )
                        .await?;
                        bail!("{id}: a criterion failed its review");
                    }
                    if outcomes.iter().all(|o| *o == Some(Outcome::Pass)) {
                        match send(CommandType::WorkAcceptResult, json!({"workItemId": id})).await {
                            Ok(_) => println!("{id} verified"),
                            Err(error) => eprintln!("{id}: work.accept_result: {error}"),
                        }
                    }
                }
                _ => {}
            }
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}
