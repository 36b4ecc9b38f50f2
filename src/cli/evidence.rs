//! Evidence: `weft evidence add` (signed with the agent key), `weft evidence ls`, and
//! `weft criteria`, the latest verdict per acceptance criterion of a WorkItem.

use anyhow::Context as _;
use weft_api::manifest::Producer;
use weft_api::{ArtifactId, Id};

use super::args::{ClientArgs, EvidenceAction};
use super::pages::{each_page, given};

/// A protocol word (an outcome, a method kind) by its wire name.
fn parse_word<T: serde::de::DeserializeOwned>(what: &str, text: &str) -> anyhow::Result<T> {
    super::errors::wire_word(what, text)
}

/// `weft evidence add` and `weft evidence ls`.
pub(super) async fn run(client: &ClientArgs, action: EvidenceAction) -> anyhow::Result<()> {
    use weft_api::evidence::{Evidence, EvidenceResult, Method, Metric, Subject, SubjectKind};
    let (session, api) = client.session()?;
    match action {
        EvidenceAction::Add {
            mission,
            work_item,
            criterion,
            outcome,
            method,
            method_name,
            method_version,
            artifacts,
            summary,
            metrics,
            supersedes,
            json,
        } => {
            let key = client.key()?;
            let work_item_id = Id::parse("work item", &work_item)?;
            let metrics = metrics
                .iter()
                .map(|pair| {
                    let (name, value) =
                        pair.split_once('=').context("--metric wants name=value")?;
                    let value = value
                        .parse::<f64>()
                        .map(Metric::Number)
                        .unwrap_or_else(|_| Metric::Text(value.to_owned()));
                    Ok((name.to_owned(), value))
                })
                .collect::<anyhow::Result<_>>()?;
            // OFL-5: the journal goes first; it may also move the lease found below.
            client.reconcile_first().await?;
            let execution = super::work::lease::current(
                &client.home()?,
                &api,
                &session.agent_id,
                &work_item_id,
            )
            .await?;
            let evidence = Evidence {
                subject: Subject {
                    kind: SubjectKind::WorkItem,
                    id: work_item_id.to_string(),
                },
                mission_id: Id::parse("mission", &mission)?,
                group_id: Id::parse("group", &session.group_id)?,
                work_item_id,
                criterion,
                method: Method {
                    kind: parse_word("method", &method)?,
                    name: method_name,
                    version: method_version,
                },
                result: EvidenceResult {
                    outcome: parse_word("outcome", &outcome)?,
                    summary,
                    metrics,
                },
                producer: Producer {
                    agent_id: Id::parse("agentId", &session.agent_id)?,
                    agent_card_version: session.agent_card_version.clone(),
                },
                timestamp: chrono::Utc::now().fixed_offset(),
                artifacts: artifacts
                    .iter()
                    .map(|a| ArtifactId::parse(a))
                    .collect::<Result<_, _>>()?,
                supersedes: supersedes.as_deref().map(ArtifactId::parse).transpose()?,
                // The owner's Evidence names its current Execution Lease (DESIGN §5.1,
                // LSE-4): the one `weft work start` remembered, else the WorkItem's current
                // one when this agent holds it; nobody else's Evidence names one.
                execution: execution
                    .map(|lease| -> anyhow::Result<weft_api::manifest::Execution> {
                        Ok(weft_api::manifest::Execution {
                            lease_id: Id::parse("lease", &lease.lease_id)?,
                            ownership_epoch: lease.ownership_epoch,
                        })
                    })
                    .transpose()?,
            };
            let recorded = api.record_evidence(&key, &evidence).await?;
            if json {
                println!("{}", serde_json::to_string(&recorded)?);
                return Ok(());
            }
            eprintln!("recorded at sequence {}", recorded.sequence);
            println!("{}", recorded.evidence_id);
        }
        EvidenceAction::Ls {
            work_item,
            criterion,
            outcome,
            method,
            producer,
            json,
        } => {
            let filters = given([
                ("workItemId", work_item),
                ("criterion", criterion),
                ("outcome", outcome),
                ("method", method),
                ("producer", producer),
            ]);
            let api = &api;
            if !json {
                // Fixed widths, so rows print as pages arrive.
                println!(
                    "{:<80}  {:<10} {:<12} {:<18} {:<12} PRODUCER",
                    "EVIDENCE", "WORK ITEM", "CRITERION", "METHOD", "OUTCOME"
                );
            }
            each_page(
                &filters,
                |page_filters| async move {
                    let page = api.list_evidence(&page_filters).await?;
                    Ok((page.items, page.next))
                },
                |record| {
                    if json {
                        println!("{}", serde_json::to_string(record)?);
                    } else {
                        let evidence = &record.evidence;
                        // "evidence blake3:…": an Evidence id is not mistaken for an
                        // artifact digest.
                        // A correction says which record it supersedes (issue #50).
                        let supersedes = evidence
                            .supersedes
                            .map(|earlier| format!("  supersedes {earlier}"))
                            .unwrap_or_default();
                        println!(
                            "{:<80}  {:<10} {:<12} {:<18} {:<12} {}{supersedes}",
                            format!("evidence {}", record.evidence_id),
                            evidence.work_item_id,
                            evidence.criterion,
                            evidence.method.kind.as_str(),
                            evidence.result.outcome.as_str(),
                            evidence.producer.agent_id
                        );
                    }
                    Ok(())
                },
            )
            .await?;
        }
    }
    Ok(())
}

/// `weft criteria`: one row per acceptance criterion, or the whole view as JSON.
pub(super) async fn criteria(
    client: &ClientArgs,
    work_item: &str,
    json: bool,
) -> anyhow::Result<()> {
    let (_, api) = client.session()?;
    let view = api.criteria(&Id::parse("work item", work_item)?).await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&view)?);
        return Ok(());
    }
    if view.criteria.is_empty() {
        println!("no Evidence recorded for {work_item} yet: no criterion has a verdict");
        return Ok(());
    }
    println!(
        "{:<24} {:<13} {:>4} {:>4} {:>4}  {:<9} PRODUCERS",
        "CRITERION", "LATEST", "PASS", "FAIL", "INC", "CONTESTED"
    );
    for row in &view.criteria {
        println!(
            "{:<24} {:<13} {:>4} {:>4} {:>4}  {:<9} {}",
            row.criterion,
            format!("{} ({})", row.latest.outcome.as_str(), row.latest.producer),
            row.counts.pass,
            row.counts.fail,
            row.counts.inconclusive,
            if row.contested { "yes" } else { "no" },
            row.producers.join(",")
        );
    }
    Ok(())
}
