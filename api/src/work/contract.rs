//! The work contract (v1, DESIGN §10, CON-1…CON-6) and the structured selection basis of an
//! offer (OFR-10/11). Every CON-1 item is a required field; unknown fields are refused (so a
//! `reasoning` field in a selection basis is refused, OFR-11); prose lives only in `notes`
//! (CON-6).

use chrono::{DateTime, FixedOffset};
use serde::{Deserialize, Serialize};

use crate::digest::ArtifactId;
use crate::error::{ErrorCode, Rejection};
use crate::id::Id;

/// The six budget dimensions (CON-1.7).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Budgets {
    pub financial: f64,
    pub tokens: u64,
    pub tool_calls: u64,
    pub compute_seconds: u64,
    pub wall_clock_seconds: u64,
    pub side_effects: u64,
}

impl Budgets {
    /// A budget or usage delta is finite and non-negative in every dimension (the whole-unit
    /// ones are unsigned by type); `what` names it in the message.
    pub fn validate_usage(&self, what: &str) -> Result<(), Rejection> {
        if !self.financial.is_finite() || self.financial < 0.0 {
            return Err(invalid(format!(
                "{what}.financial must be a finite, non-negative number"
            )));
        }
        Ok(())
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Deliverable {
    pub name: String,
    pub media_type: String,
    pub schema: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct AcceptanceCriterion {
    pub id: Id,
    pub description: String,
    pub required_evidence: Vec<crate::evidence::MethodKind>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Permissions {
    pub tools: Vec<String>,
    pub data: Vec<String>,
    pub operations: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Capability {
    pub id: String,
    pub version: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RetryPolicy {
    pub max_attempts: u32,
    pub backoff_seconds: u64,
    pub deadline: Option<DateTime<FixedOffset>>,
    pub max_cost: f64,
}

/// Lease and offer durations in seconds (GAP-4: carried in the contract; no minimum).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct LeaseDurations {
    pub offer_seconds: u64,
    pub ownership_seconds: u64,
    pub execution_seconds: u64,
    pub blocked_seconds: u64,
    pub grace_seconds: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    Low,
    Normal,
    High,
    Critical,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Impact {
    Low,
    Medium,
    High,
    Critical,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Risk {
    Low,
    Medium,
    High,
    Critical,
}

/// When a WorkItem's dependencies let it start (DEP-3; default `all_verified`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DependencyPolicy {
    #[default]
    AllVerified,
    /// Every dependency is terminal (verified, failed or cancelled).
    AllTerminal,
}

/// What a failed child Mission does to its parent WorkItem (T17).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChildFailurePolicy {
    Block,
    Fail,
}

/// The work contract, v1 (CON-1.1…CON-1.9 each a field).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WorkContract {
    /// CON-1.1
    pub objective: String,
    pub deliverables: Vec<Deliverable>,
    /// CON-1.2
    pub acceptance_criteria: Vec<AcceptanceCriterion>,
    /// CON-1.3
    pub inputs: Vec<ArtifactId>,
    pub depends_on: Vec<Id>,
    #[serde(default)]
    pub dependency_policy: DependencyPolicy,
    /// CON-1.4
    pub permissions: Permissions,
    /// CON-1.5
    pub required_capabilities: Vec<Capability>,
    /// CON-1.6
    pub deadline: DateTime<FixedOffset>,
    pub urgency: Level,
    pub business_impact: Impact,
    /// CON-1.7
    pub budgets: Budgets,
    /// CON-1.8
    pub retry_policy: RetryPolicy,
    /// CON-1.9
    pub risk: Risk,
    pub approval_required: bool,
    pub leases: LeaseDurations,
    pub child_failure_policy: ChildFailurePolicy,
    /// CON-6: prose supplements the fields, never replaces them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notes: Option<String>,
}

/// Largest `notes`, objective or description accepted, in bytes.
const MAX_TEXT: usize = 16 * 1024;

impl WorkContract {
    /// Bounds and consistency the types cannot say (CON-1, CON-6): every problem at once, in
    /// one refusal (issue #50: a contract's errors came back one per try).
    pub fn validate(&self) -> Result<(), Rejection> {
        let problems = self.problems();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(invalid(problems.join("; ")))
        }
    }

    /// What is wrong with the contract beyond its types, each problem once, in field order.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        let mut problem = |wrong: bool, message: &str| {
            if wrong {
                problems.push(message.to_owned());
            }
        };
        problem(
            self.objective.trim().is_empty() || self.objective.len() > MAX_TEXT,
            "objective must be 1..=16 KiB of text",
        );
        problem(
            self.deliverables.is_empty(),
            "deliverables must name at least one deliverable",
        );
        problem(
            self.acceptance_criteria.is_empty(),
            "acceptanceCriteria must name at least one criterion",
        );
        let mut ids: Vec<&str> = self
            .acceptance_criteria
            .iter()
            .map(|c| c.id.as_str())
            .collect();
        ids.sort_unstable();
        problem(
            ids.windows(2).any(|w| w[0] == w[1]),
            "acceptance criterion ids must be distinct",
        );
        problem(
            self.acceptance_criteria
                .iter()
                .any(|c| c.required_evidence.is_empty() || c.description.len() > MAX_TEXT),
            "every acceptance criterion names its required Evidence",
        );
        problem(
            self.depends_on.len() > 1024 || self.inputs.len() > 4096,
            "at most 1024 dependencies and 4096 inputs",
        );
        if let Err(rejection) = self.budgets.validate_usage("budgets") {
            problems.push(rejection.message);
        }
        let mut problem = |wrong: bool, message: &str| {
            if wrong {
                problems.push(message.to_owned());
            }
        };
        problem(
            !self.retry_policy.max_cost.is_finite() || self.retry_policy.max_cost < 0.0,
            "retryPolicy.maxCost must be non-negative",
        );
        problem(
            self.notes.as_ref().is_some_and(|n| n.len() > MAX_TEXT),
            "notes are at most 16 KiB",
        );
        problems
    }

    /// Whether execution needs an approval first (T6): asked for, or implied by a `high` or
    /// `critical` risk (CON-1.9).
    pub fn needs_approval(&self) -> bool {
        self.approval_required || matches!(self.risk, Risk::High | Risk::Critical)
    }
}

/// Why a candidate is offered the WorkItem (OFR-10): structured fields only, never prose or
/// reasoning (OFR-11, unknown fields refused).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct SelectionBasis {
    pub capability_matches: Vec<Capability>,
    pub authorization_eligible: bool,
    pub availability_estimate: DateTime<FixedOffset>,
    pub expected_cost: f64,
    pub reliability_evidence: Vec<ArtifactId>,
    pub policy_rules: Vec<String>,
}

impl SelectionBasis {
    pub fn validate(&self) -> Result<(), Rejection> {
        if !self.expected_cost.is_finite() || self.expected_cost < 0.0 {
            return Err(invalid("selectionBasis.expectedCost must be non-negative"));
        }
        if self.policy_rules.iter().any(|r| r.len() > 256) || self.policy_rules.len() > 64 {
            return Err(invalid(
                "selectionBasis.policyRules are at most 64 rule names of 256 bytes",
            ));
        }
        Ok(())
    }
}

fn invalid(message: impl Into<String>) -> Rejection {
    Rejection::new(ErrorCode::InvalidCommand, message)
}
