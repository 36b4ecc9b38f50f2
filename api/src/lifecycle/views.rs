//! The wire shapes of the lifecycle's operator surface (DESIGN §16, `/v1/admin/…`): what
//! `weft admin retention|hold|gc|usage|quota` send and print.

use serde::{Deserialize, Serialize};

use super::HoldTarget;
use crate::digest::ArtifactId;
use crate::error::{ErrorCode, Rejection};
use crate::id::Id;

/// `PUT /v1/admin/groups/{g}/retention`: durations as the operator writes them (`30d`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RetentionRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mission_id: Option<Id>,
    /// A policy for the Group's artifacts of one classification (not with `missionId`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub classification: Option<crate::manifest::Classification>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_bytes: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_records: Option<String>,
}

impl RetentionRequest {
    /// The policy it asks for, its durations parsed and checked.
    pub fn retention(&self) -> Result<super::Retention, Rejection> {
        if self.mission_id.is_some() && self.classification.is_some() {
            return Err(Rejection::new(
                ErrorCode::BadRequest,
                "a policy is for the Group, one Mission or one classification: not both missionId and classification",
            ));
        }
        let retention = super::Retention {
            keep_bytes_seconds: self
                .keep_bytes
                .as_deref()
                .map(super::parse_duration)
                .transpose()?,
            keep_records_seconds: self
                .keep_records
                .as_deref()
                .map(super::parse_duration)
                .transpose()?,
        };
        retention.check()?;
        Ok(retention)
    }
}

/// One policy as shown: the Group's (no `missionId`) or a Mission's.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyView {
    pub group_id: Id,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mission_id: Option<Id>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub classification: Option<crate::manifest::Classification>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_bytes: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_records: Option<String>,
    /// Its `retention.set` Event.
    pub sequence: u64,
}

/// `GET /v1/admin/groups/{g}/retention`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Policies {
    pub group_id: Id,
    pub policies: Vec<PolicyView>,
}

/// `POST /v1/admin/holds`: exactly one of `artifact`, `workItemId`, `missionId`, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct HoldRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact: Option<ArtifactId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work_item_id: Option<Id>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mission_id: Option<Id>,
    pub reason: String,
}

/// The longest reason a hold keeps, in characters (it is appended to logs).
pub const MAX_REASON_CHARS: usize = 1024;

impl HoldRequest {
    /// What it holds and why, checked: one target, a reason of 1…1024 characters, not all
    /// white space, without control characters.
    pub fn target(&self) -> Result<(HoldTarget, String), Rejection> {
        let target = match (&self.artifact, &self.work_item_id, &self.mission_id) {
            (Some(artifact), None, None) => HoldTarget::Artifact(*artifact),
            (None, Some(work_item), None) => HoldTarget::WorkItemId(work_item.clone()),
            (None, None, Some(mission)) => HoldTarget::MissionId(mission.clone()),
            _ => {
                return Err(Rejection::new(
                    ErrorCode::BadRequest,
                    "a hold names exactly one of artifact, workItemId, missionId",
                ));
            }
        };
        let reason = &self.reason;
        if reason.trim().is_empty()
            || reason.chars().count() > MAX_REASON_CHARS
            || reason.chars().any(char::is_control)
        {
            return Err(Rejection::new(
                ErrorCode::BadRequest,
                "a hold's reason is 1 to 1024 characters of text, not all white space, without control characters",
            ));
        }
        Ok((target, reason.clone()))
    }
}

/// One hold as shown.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HoldView {
    pub hold_id: Id,
    pub target: HoldTarget,
    pub reason: String,
    pub placed_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifted_at: Option<String>,
    /// The Groups whose logs carry its Events.
    pub groups: Vec<Id>,
    /// The Group's approver who placed it (the hold is then that Group's only); absent when
    /// the operator did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placed_by: Option<Id>,
}

/// `GET /v1/admin/holds`, `GET /v1/groups/{g}/holds`: a page of holds by id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Holds {
    pub holds: Vec<HoldView>,
    /// The `after` of the next page; absent on the last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<Id>,
}

/// One blob collection disposed of (or, in a dry run, would).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DisposalView {
    pub artifact: ArtifactId,
    pub size: u64,
    pub groups: Vec<Id>,
    pub policy: String,
    pub reason: String,
}

/// `POST /v1/admin/gc[?dryRun=true]`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CollectionReport {
    pub dry_run: bool,
    pub disposed: Vec<DisposalView>,
    /// Blobs past their policy that something still needs (a hold, a live citation, a
    /// recent upload), counted.
    pub kept: u64,
    pub blobs: u64,
    pub bytes: u64,
    /// Command and idempotent answers older than the answer horizon, trimmed in this run.
    #[serde(default)]
    pub answers_trimmed: u64,
    /// Rows nothing reads any more (old lease renewals, long-expired capability tokens),
    /// forgotten in this run.
    #[serde(default)]
    pub rows_forgotten: u64,
    /// Records (manifests' and Evidence's signed envelopes) disposed of past `keepRecords`,
    /// one entry per Mission and batch (or, in a dry run, that would be).
    #[serde(default)]
    pub records: Vec<RecordsDisposalView>,
    /// Records past their policy that a hold or reusable knowledge still needs, counted.
    #[serde(default)]
    pub records_kept: u64,
}

/// One Mission's records disposed of in one batch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecordsDisposalView {
    pub group_id: Id,
    pub mission_id: Id,
    pub manifests: u64,
    pub evidence: u64,
    pub policy: String,
    pub reason: String,
    /// The `records.disposed` Event's sequence (absent in a dry run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequence: Option<u64>,
}

/// A Group's quota: `None` (left out) for no limit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Quota {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifacts: Option<u64>,
}

impl Quota {
    /// Whether it limits anything.
    pub fn limits(&self) -> bool {
        self.bytes.is_some() || self.artifacts.is_some()
    }

    /// Whether one more artifact of `size` bytes fits a Group that holds `artifacts` of
    /// `bytes`: `quota_exceeded` (507) naming the quota when not.
    pub fn admits(
        &self,
        group: &str,
        artifacts: u64,
        bytes: u64,
        size: u64,
    ) -> Result<(), Rejection> {
        let over_bytes = self
            .bytes
            .is_some_and(|limit| bytes.saturating_add(size) > limit);
        let over_count = self
            .artifacts
            .is_some_and(|limit| artifacts.saturating_add(1) > limit);
        if !(over_bytes || over_count) {
            return Ok(());
        }
        let limit = |n: Option<u64>| n.map_or("unlimited".to_owned(), |n| n.to_string());
        // Not the usage: the server may refuse by a usage it counted earlier (at least what it
        // counted then), and numbers that differ with how it decided would tell a member when
        // the store last shrank anywhere (`storage/src/artifacts/quota.rs`). `weft admin
        // usage` shows it.
        Err(Rejection::new(
            ErrorCode::QuotaExceeded,
            format!(
                "group {group} is at its quota of {} bytes and {} artifacts: {size} more bytes do not fit",
                limit(self.bytes),
                limit(self.artifacts)
            ),
        ))
    }
}

/// `GET /v1/admin/groups/{g}/usage`: the distinct blobs the Group's manifests cite or its
/// members uploaded, disposed ones left out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    pub bytes: u64,
    pub artifacts: u64,
    pub quota: Quota,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quota_admits_up_to_its_limits_exactly() {
        let quota = Quota {
            bytes: Some(100),
            artifacts: Some(3),
        };
        assert!(quota.admits("g", 2, 60, 40).is_ok());
        assert_eq!(
            quota.admits("g", 2, 61, 40).map_err(|r| r.code),
            Err(ErrorCode::QuotaExceeded)
        );
        assert_eq!(
            quota.admits("g", 3, 0, 1).map_err(|r| r.code),
            Err(ErrorCode::QuotaExceeded)
        );
        assert!(Quota::default().admits("g", u64::MAX, u64::MAX, 1).is_ok());
        assert!(!Quota::default().limits());
    }

    /// The refusal names the quota, never the usage it was judged by: the server may judge by
    /// a usage it counted earlier in the epoch, and a message that differed with it would tell
    /// a member when the store last shrank anywhere (`storage/src/artifacts/quota.rs`).
    #[test]
    fn a_refusal_says_the_same_whatever_usage_it_was_judged_by() {
        let quota = Quota {
            bytes: Some(100),
            artifacts: None,
        };
        let message = |artifacts, bytes| {
            quota
                .admits("g", artifacts, bytes, 50)
                .expect_err("over")
                .message
        };
        assert_eq!(message(7, 60), message(9, 90));
        assert!(message(7, 60).contains("100 bytes"), "{}", message(7, 60));
    }
}
