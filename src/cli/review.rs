//! `weft review`: asks the server's built-in deterministic reviewer to check a WorkItem's
//! artifacts (`POST /v1/workitems/{id}/review`) and prints the server-signed Evidence it
//! recorded, one record per check.

use std::collections::BTreeMap;

use weft_api::views::{Check, ReviewRequest};
use weft_api::{ArtifactId, Id};

use super::args::ReviewArgs;
use super::errors::wire_word;
use super::table::Table;

/// `weft review`.
pub(super) async fn run(args: ReviewArgs) -> anyhow::Result<()> {
    let ReviewArgs {
        client,
        work_item,
        criterion,
        artifacts,
        checks,
        mission,
        json,
    } = args;
    let (_, api) = client.session()?;
    let mut kinds = Vec::new();
    let mut criteria = BTreeMap::new();
    for check in &checks {
        let (kind, criterion) = match check.split_once('=') {
            Some((kind, criterion)) => (kind, Some(criterion)),
            None => (check.as_str(), None),
        };
        let kind: Check = wire_word("--check", kind)?;
        kinds.push(kind);
        if let Some(criterion) = criterion {
            criteria.insert(kind, criterion.to_owned());
        }
    }
    if kinds.is_empty() {
        kinds.push(Check::Integrity);
    }
    let request = ReviewRequest {
        criterion: criterion.unwrap_or_default(),
        criteria,
        artifacts: artifacts
            .iter()
            .map(|artifact| ArtifactId::parse(artifact))
            .collect::<Result<_, _>>()?,
        checks: kinds,
        mission_id: mission.map(|m| Id::parse("mission", &m)).transpose()?,
    };
    client.reconcile_first().await?;
    let outcome = api
        .review(&Id::parse("work-item", &work_item)?, &request)
        .await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&outcome)?);
        return Ok(());
    }
    let mut table = Table::new(&["EVIDENCE", "CRITERION", "OUTCOME", "METHOD", "SUMMARY"]);
    for record in &outcome.evidence {
        let evidence = &record.evidence;
        table.row(vec![
            format!("evidence {}", record.evidence_id),
            evidence.criterion.clone(),
            word(&evidence.result.outcome),
            evidence.method.name.clone(),
            evidence.result.summary.clone(),
        ]);
    }
    print!("{}", table.render());
    Ok(())
}

/// The wire name of a protocol word.
fn word(value: &impl serde::Serialize) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(text)) => text,
        Ok(other) => other.to_string(),
        Err(_) => "?".to_owned(),
    }
}
