//! Evidence, v1 payload (DESIGN §5.1, EVD-4, EVD-5).
//!
//! Every EVD-4 field is required; unknown fields are refused at every level and every
//! free-form field is bounded, so a reasoning transcript cannot ride along (EVD-5). Evidence is
//! immutable: a correction is new Evidence naming the record it `supersedes`.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, FixedOffset};
use serde::{Deserialize, Serialize};

use crate::digest::ArtifactId;
use crate::error::{ErrorCode, Rejection};
use crate::id::Id;
use crate::manifest::Producer;
use crate::signed::SignedPayload;

/// The criterion of an approver's Evidence approving an Artifact as reusable knowledge (CTX-6).
pub const REUSE_CRITERION: &str = "reuse";

impl Evidence {
    /// Whether this is an approval of reusable knowledge (CTX-6): criterion
    /// [`REUSE_CRITERION`] about an Artifact. Only an approver records it, and it is the only
    /// Evidence an approver records.
    pub fn is_reuse_approval(&self) -> bool {
        self.criterion == REUSE_CRITERION && self.subject.kind == SubjectKind::Artifact
    }
}

pub const EVIDENCE_TYPE: &str = "application/vnd.mwp.evidence.v1+json";
/// Largest Evidence payload, in bytes.
pub const MAX_EVIDENCE_BYTES: usize = 64 * 1024;
/// Longest `result.summary`, in bytes.
pub const MAX_SUMMARY: usize = 4096;
const MAX_METRICS: usize = 64;
const MAX_METRIC_TEXT: usize = 256;
const MAX_ARTIFACTS: usize = 1024;
const MAX_NAME: usize = 256;

/// The agent id under which the server's own reviewer signs Evidence. No Agent may register it.
pub const AUTHORITY_AGENT: &str = "weft-authority";

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Evidence {
    pub subject: Subject,
    pub mission_id: Id,
    pub group_id: Id,
    pub work_item_id: Id,
    pub criterion: String,
    pub method: Method,
    pub result: EvidenceResult,
    pub producer: Producer,
    pub timestamp: DateTime<FixedOffset>,
    pub artifacts: Vec<ArtifactId>,
    /// The Evidence this record corrects (its evidence id), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supersedes: Option<ArtifactId>,
    /// The Execution Lease it was produced under (DESIGN §5.1): required when the producer is
    /// the WorkItem's owner, and checked like a manifest's (LSE-4/5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution: Option<crate::manifest::Execution>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Subject {
    pub kind: SubjectKind,
    pub id: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum SubjectKind {
    WorkItem,
    Artifact,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Method {
    pub kind: MethodKind,
    pub name: String,
    pub version: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MethodKind {
    IntegrityCheck,
    SchemaValidation,
    AutomatedTest,
    BusinessRule,
    ReviewerAgent,
    Human,
}

impl MethodKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::IntegrityCheck => "integrity_check",
            Self::SchemaValidation => "schema_validation",
            Self::AutomatedTest => "automated_test",
            Self::BusinessRule => "business_rule",
            Self::ReviewerAgent => "reviewer_agent",
            Self::Human => "human",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Pass,
    Fail,
    Inconclusive,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pass => "pass",
            Self::Fail => "fail",
            Self::Inconclusive => "inconclusive",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvidenceResult {
    pub outcome: Outcome,
    pub summary: String,
    #[serde(default)]
    pub metrics: BTreeMap<String, Metric>,
}

/// A metric is a number or a short string; nothing else (EVD-5).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Metric {
    Number(f64),
    Text(String),
}

fn invalid(message: impl Into<String>) -> Rejection {
    Rejection::new(ErrorCode::InvalidEvidence, message)
}

fn check_text(field: &str, text: &str, max: usize) -> Result<(), Rejection> {
    if text.is_empty() || text.len() > max || text.chars().any(char::is_control) {
        return Err(invalid(format!(
            "{field} must be 1..={max} bytes of printable text"
        )));
    }
    Ok(())
}

impl Evidence {
    /// Parses and validates an Evidence payload; errors name the field (see
    /// [`SignedPayload::parse_payload`]).
    pub fn parse(payload: &[u8]) -> Result<Self, Rejection> {
        Self::parse_payload(payload)
    }
}

impl SignedPayload for Evidence {
    const PAYLOAD_TYPE: &'static str = EVIDENCE_TYPE;
    const NAME: &'static str = "evidence";
    const MAX_BYTES: usize = MAX_EVIDENCE_BYTES;
    const INVALID: ErrorCode = ErrorCode::InvalidEvidence;

    fn signer_claim(&self) -> (&Id, Option<&str>) {
        (
            &self.producer.agent_id,
            Some(&self.producer.agent_card_version),
        )
    }

    fn validate(&self) -> Result<(), Rejection> {
        Id::parse("criterion", &self.criterion).map_err(|e| invalid(e.message))?;
        match self.subject.kind {
            SubjectKind::WorkItem => {
                if self.subject.id != self.work_item_id.as_str() {
                    return Err(invalid(
                        "subject.id of a workItem subject must be workItemId",
                    ));
                }
            }
            SubjectKind::Artifact => {
                let id = ArtifactId::parse(&self.subject.id).map_err(|_| {
                    invalid("subject.id of an artifact subject must be a blake3 digest")
                })?;
                if !self.artifacts.contains(&id) {
                    return Err(invalid(
                        "an artifact subject must also be listed in artifacts",
                    ));
                }
            }
        }
        check_text("method.name", &self.method.name, MAX_NAME)?;
        check_text("method.version", &self.method.version, MAX_NAME)?;
        check_text(
            "producer.agentCardVersion",
            &self.producer.agent_card_version,
            MAX_NAME,
        )?;
        if self.result.summary.len() > MAX_SUMMARY {
            return Err(invalid(format!(
                "result.summary is limited to {MAX_SUMMARY} bytes"
            )));
        }
        if self
            .result
            .summary
            .chars()
            .any(|c| c.is_control() && c != '\n')
        {
            return Err(invalid("result.summary contains control characters"));
        }
        if self.result.metrics.len() > MAX_METRICS {
            return Err(invalid(format!("at most {MAX_METRICS} result.metrics")));
        }
        for (name, value) in &self.result.metrics {
            check_text("result.metrics key", name, MAX_NAME)?;
            match value {
                Metric::Number(number) if !number.is_finite() => {
                    return Err(invalid(format!("result.metrics.{name} must be finite")));
                }
                Metric::Text(text) if text.len() > MAX_METRIC_TEXT => {
                    return Err(invalid(format!(
                        "result.metrics.{name} is limited to {MAX_METRIC_TEXT} bytes"
                    )));
                }
                _ => {}
            }
        }
        if self.artifacts.len() > MAX_ARTIFACTS {
            return Err(invalid(format!("at most {MAX_ARTIFACTS} artifacts")));
        }
        let distinct: BTreeSet<_> = self.artifacts.iter().collect();
        if distinct.len() != self.artifacts.len() {
            return Err(invalid("artifacts lists the same artifact twice"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn sample() -> Value {
        json!({
            "subject": {"kind": "workItem", "id": "w-1"},
            "missionId": "m-1", "groupId": "g-1", "workItemId": "w-1",
            "criterion": "ac-2",
            "method": {"kind": "automated_test", "name": "pytest suite", "version": "1.4"},
            "result": {"outcome": "pass", "summary": "412 passed", "metrics": {"passed": 412, "suite": "unit"}},
            "producer": {"agentId": "reviewer-1", "agentCardVersion": "1"},
            "timestamp": "2026-11-30T12:05:00Z",
            "artifacts": []
        })
    }

    fn check(mutate: impl FnOnce(&mut Value), expected: Option<ErrorCode>) {
        let mut value = sample();
        mutate(&mut value);
        let outcome = Evidence::parse(value.to_string().as_bytes())
            .err()
            .map(|e| e.code);
        assert_eq!(outcome, expected, "{value}");
    }

    #[test]
    fn the_design_example_parses() {
        check(|_| {}, None);
    }

    /// EVD-4: subject, criterion, method, result, producer, timestamp, referenced artifacts.
    #[test]
    fn every_evd4_field_is_required() {
        for field in [
            "subject",
            "criterion",
            "method",
            "result",
            "producer",
            "timestamp",
            "artifacts",
            "missionId",
            "groupId",
            "workItemId",
        ] {
            check(
                |v| {
                    v.as_object_mut().map(|o| o.remove(field));
                },
                Some(ErrorCode::InvalidEvidence),
            );
        }
        check(
            |v| {
                v["result"].as_object_mut().map(|o| o.remove("outcome"));
            },
            Some(ErrorCode::InvalidEvidence),
        );
    }

    /// EVD-5: no unknown fields, nothing free-form of unbounded size.
    #[test]
    fn nothing_unbounded_or_unknown_is_accepted() {
        check(
            |v| v["reasoning"] = json!("step 1: …"),
            Some(ErrorCode::InvalidEvidence),
        );
        check(
            |v| v["result"]["chainOfThought"] = json!("…"),
            Some(ErrorCode::InvalidEvidence),
        );
        check(
            |v| v["result"]["summary"] = json!("x".repeat(MAX_SUMMARY + 1)),
            Some(ErrorCode::InvalidEvidence),
        );
        check(
            |v| v["result"]["metrics"]["nested"] = json!({"a": 1}),
            Some(ErrorCode::InvalidEvidence),
        );
        check(
            |v| v["result"]["metrics"]["flag"] = json!(true),
            Some(ErrorCode::InvalidEvidence),
        );
        check(
            |v| v["result"]["metrics"]["long"] = json!("x".repeat(300)),
            Some(ErrorCode::InvalidEvidence),
        );
        check(
            |v| v["criterion"] = json!("ac 2"),
            Some(ErrorCode::InvalidEvidence),
        );
        check(
            |v| v["criterion"] = json!("ac/../2"),
            Some(ErrorCode::InvalidEvidence),
        );
        check(
            |v| v["criterion"] = json!("ac\u{200b}2"),
            Some(ErrorCode::InvalidEvidence),
        );
        check(
            |v| v["method"]["kind"] = json!("vibes"),
            Some(ErrorCode::InvalidEvidence),
        );
        check(
            |v| v["result"]["outcome"] = json!("maybe"),
            Some(ErrorCode::InvalidEvidence),
        );
        check(
            |v| v["subject"]["id"] = json!("w-2"),
            Some(ErrorCode::InvalidEvidence),
        );
    }
}
