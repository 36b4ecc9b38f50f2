//! What a run produced, as the Authority receives it: its outputs published as Artifacts
//! bound to its lease, its Evidence (the executor's lines, or the Worker's own `exit-status`),
//! and `work.submit`; or, for a failure, the Evidence `work.fail` needs (T13).

use anyhow::Context as _;
use chrono::Utc;
use serde_json::json;
use weft_api::client::Error as ClientError;
use weft_api::evidence::{
    Evidence, EvidenceResult, Method, MethodKind, Outcome as Verdict, Subject, SubjectKind,
};
use weft_api::manifest::{Classification, Content, Execution, Producer, Tool, ToolKind};
use weft_api::work::CommandType;
use weft_api::work::contract::Budgets;
use weft_api::work::views::WorkItemView;
use weft_api::{ArtifactId, Id, Manifest};

use super::config::ExecutorConfig;
use super::executor::{EvidenceLine, RunDir};
use super::link::Link;

/// One run, as its results need it.
pub(super) struct Run<'a> {
    pub(super) link: &'a Link,
    pub(super) work_item: &'a Id,
    pub(super) card_version: &'a str,
    pub(super) executor: &'a ExecutorConfig,
    pub(super) lease: &'a Id,
    pub(super) epoch: u64,
    pub(super) view: &'a WorkItemView,
}

/// Uploads `path` with the session and publishes its manifest bound to the lease.
pub(super) async fn publish(
    run: &Run<'_>,
    path: &std::path::Path,
    name: &str,
) -> anyhow::Result<ArtifactId> {
    let receipt = run.link.api.upload_file(path, |_| {}).await?;
    let mut annotations = std::collections::BTreeMap::new();
    annotations.insert("name".to_owned(), name.to_owned());
    let manifest = Manifest {
        content: Content {
            blake3: receipt.blake3,
            sha256: receipt.sha256,
            size: receipt.size,
            media_type: "application/octet-stream".into(),
            schema: None,
        },
        producer: Producer {
            agent_id: run.link.agent.clone(),
            agent_card_version: run.card_version.to_owned(),
        },
        mission_id: Id::parse("missionId", &run.view.mission_id)?,
        group_id: run.link.group.clone(),
        work_item_id: run.work_item.clone(),
        execution: Execution {
            lease_id: run.lease.clone(),
            ownership_epoch: run.epoch,
        },
        sources: run.view.contract.inputs.clone(),
        tools: vec![Tool {
            kind: ToolKind::Capability,
            id: run.executor.capability.clone(),
            version: run.executor.version.clone(),
        }],
        created_at: Utc::now().fixed_offset(),
        classification: Classification::Internal,
        retrieval_uri: format!(
            "{}/v1/artifacts/{}/content",
            run.link.api.base(),
            receipt.blake3
        ),
        annotations,
    };
    Ok(run
        .link
        .api
        .publish(&run.link.key, &manifest)
        .await?
        .artifact)
}

/// A signed-to-be Evidence record of this run on `criterion`.
fn evidence_of(
    run: &Run<'_>,
    criterion: &str,
    method: Method,
    result: EvidenceResult,
    artifacts: &[ArtifactId],
) -> anyhow::Result<Evidence> {
    Ok(Evidence {
        subject: Subject {
            kind: SubjectKind::WorkItem,
            id: run.work_item.to_string(),
        },
        mission_id: Id::parse("missionId", &run.view.mission_id)?,
        group_id: run.link.group.clone(),
        work_item_id: run.work_item.clone(),
        criterion: criterion.to_owned(),
        method,
        result,
        producer: Producer {
            agent_id: run.link.agent.clone(),
            agent_card_version: run.card_version.to_owned(),
        },
        timestamp: Utc::now().fixed_offset(),
        artifacts: artifacts.to_vec(),
        supersedes: None,
        execution: Some(Execution {
            lease_id: run.lease.clone(),
            ownership_epoch: run.epoch,
        }),
    })
}

/// T13: a failure carries Evidence; the run's own, on the first criterion, saying why.
pub(super) async fn failure_evidence(run: &Run<'_>, why: &str) -> anyhow::Result<ArtifactId> {
    let criterion = run
        .view
        .contract
        .acceptance_criteria
        .first()
        .map(|c| c.id.to_string())
        .context("the contract names no criterion")?;
    let summary: String = why.chars().take(1000).collect();
    let record = evidence_of(
        run,
        &criterion,
        Method {
            kind: MethodKind::AutomatedTest,
            name: "exit-status".into(),
            version: "1".into(),
        },
        EvidenceResult {
            outcome: Verdict::Fail,
            summary,
            metrics: Default::default(),
        },
        &[],
    )?;
    Ok(run
        .link
        .api
        .record_evidence(&run.link.key, &record)
        .await?
        .evidence_id)
}

/// How a submission ended.
pub(super) enum Submitted {
    Done,
    /// The WorkItem was failed instead (no Evidence for a criterion, or the submission
    /// refused).
    Failed(String),
    /// The server failed (5xx): the submission may or may not have landed; the log says.
    Unknown(String),
}

/// Publishes the outputs, records Evidence for every criterion, submits.
pub(super) async fn submit(
    run: &Run<'_>,
    dir: &RunDir,
    lines: Vec<EvidenceLine>,
    usage: Budgets,
) -> anyhow::Result<Submitted> {
    let outputs = super::executor::regular_files(&dir.outputs())?;
    let mut artifacts = Vec::new();
    for path in &outputs {
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("output");
        artifacts.push(publish(run, path, name).await?);
    }
    if artifacts.is_empty() {
        // work.submit names at least one Artifact: the run's own report stands in.
        // Written beside the run directory, in the Worker's own: the run's directory is the
        // executor's, which could have left a symlink at any name in it.
        let report = dir.root.with_file_name("run-report.json");
        let names: Vec<String> = lines.iter().map(|l| l.criterion.clone()).collect();
        std::fs::write(
            &report,
            serde_json::to_vec(&json!({"workItemId": run.work_item, "exitStatus": 0,
                "computeSeconds": usage.compute_seconds, "evidenceFor": names}))?,
        )?;
        artifacts.push(publish(run, &report, "run-report.json").await?);
    }
    let contract = &run.view.contract;
    let mut evidence = Vec::new();
    for criterion in &contract.acceptance_criteria {
        let line = lines.iter().find(|l| l.criterion == criterion.id.as_str());
        let (method, name, version, outcome, summary, metrics) = match line {
            Some(l) => (
                l.method,
                l.name.clone(),
                l.version.clone(),
                l.outcome,
                l.summary.clone(),
                l.metrics.clone(),
            ),
            // The Worker's own Evidence: the executor ran to exit status 0.
            None if criterion
                .required_evidence
                .contains(&MethodKind::AutomatedTest) =>
            {
                (
                    MethodKind::AutomatedTest,
                    "exit-status".to_owned(),
                    "1".to_owned(),
                    Verdict::Pass,
                    format!(
                        "{} {} exited 0",
                        run.executor.capability, run.executor.version
                    ),
                    Default::default(),
                )
            }
            None => {
                let detail = format!(
                    "the executor gave no Evidence for criterion {}",
                    criterion.id
                );
                let evidence = failure_evidence(run, &detail).await?;
                run.link
                    .send(
                        CommandType::WorkFail,
                        json!({"workItemId": run.work_item, "evidence": [evidence],
                            "reason": "worker_error", "detail": detail}),
                        Some(run.lease),
                    )
                    .await?;
                return Ok(Submitted::Failed(format!(
                    "no Evidence for {}",
                    criterion.id
                )));
            }
        };
        let record = Evidence {
            subject: Subject {
                kind: SubjectKind::WorkItem,
                id: run.work_item.to_string(),
            },
            mission_id: Id::parse("missionId", &run.view.mission_id)?,
            group_id: run.link.group.clone(),
            work_item_id: run.work_item.clone(),
            criterion: criterion.id.to_string(),
            method: Method {
                kind: method,
                name,
                version,
            },
            result: EvidenceResult {
                outcome,
                summary,
                metrics,
            },
            producer: Producer {
                agent_id: run.link.agent.clone(),
                agent_card_version: run.card_version.to_owned(),
            },
            timestamp: Utc::now().fixed_offset(),
            artifacts: artifacts.clone(),
            supersedes: None,
            execution: Some(Execution {
                lease_id: run.lease.clone(),
                ownership_epoch: run.epoch,
            }),
        };
        evidence.push(
            run.link
                .api
                .record_evidence(&run.link.key, &record)
                .await?
                .evidence_id,
        );
    }
    let answer = run
        .link
        .send(
            CommandType::WorkSubmit,
            json!({"workItemId": run.work_item, "artifacts": artifacts, "evidence": evidence, "usage": usage}),
            Some(run.lease),
        )
        .await;
    match answer {
        Ok(_) => Ok(Submitted::Done),
        // Refused: a 4xx. A server that failed (5xx), timed out (408) or was busy (429) said
        // nothing of the work, which may even have been submitted: the run ends without
        // failing complete work, and the log decides what the WorkItem is.
        Err(ClientError::Api { status, body })
            if status < 500 && status != 408 && status != 429 =>
        {
            let detail = format!("work.submit refused: {} ({})", body.detail, body.code);
            run.link
                .send(
                    CommandType::WorkFail,
                    json!({"workItemId": run.work_item, "evidence": evidence, "reason": "worker_error", "detail": detail}),
                    Some(run.lease),
                )
                .await?;
            Ok(Submitted::Failed(detail))
        }
        Err(error @ ClientError::Api { .. }) => Ok(Submitted::Unknown(format!(
            "work.submit: the server failed: {error}"
        ))),
        Err(error) => Err(error.into()),
    }
}
