//! The lifecycle of what is stored (issue #46, DESIGN §16): retention policies, legal holds and
//! the disposition of bytes, as pure rules and the payloads of their Events.
//!
//! - A retention policy belongs to a Group, to one Mission of it, or to one classification of
//!   its artifacts (the Mission's wins, then the classification's, then the Group's). It
//!   says how long after a Mission *ends* its bytes are kept (`keepBytes`) and how long the
//!   bytes a verified WorkItem's Evidence cites are kept (`keepRecords`, never shorter than
//!   `keepBytes`). No policy: everything is kept.
//! - [`bytes_due`] is the one rule that says when one citation stops needing a blob; the store
//!   disposes of a blob only when every citation is past due and nothing holds it.
//! - Collection never runs early: a due instant is pushed later by [`CLOCK_MARGIN_SECONDS`],
//!   so servers whose clocks disagree by less than that never dispose before the policy says.

pub mod views;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::digest::{ArtifactId, Sha256Digest};
use crate::error::{ErrorCode, Rejection};
use crate::id::Id;

/// How much later than its policy says a blob is disposed of: clocks of servers (and of the
/// one that ended the Mission) may disagree by this much without anything going early.
pub const CLOCK_MARGIN_SECONDS: i64 = 5 * 60;

/// The most digits a duration has (999,999,999 days is far past any policy, and its seconds
/// still fit every clock computation; a due instant past the calendar is "never").
pub const MAX_DIGITS: usize = 9;

/// Parses a duration as the operator writes it: digits and one unit, `s`, `m`, `h` or `d`
/// (`30d`, `12h`, `1s`). Zero is allowed (dispose at the end, after the clock margin).
pub fn parse_duration(text: &str) -> Result<u64, Rejection> {
    let bad = || {
        Rejection::new(
            ErrorCode::BadRequest,
            format!("duration {text:?}: digits and one unit of s, m, h or d, e.g. 30d, 12h, 1s"),
        )
    };
    let unit = text.chars().last().ok_or_else(bad)?;
    let digits = &text[..text.len() - unit.len_utf8()];
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) || digits.len() > MAX_DIGITS
    {
        return Err(bad());
    }
    let count: u64 = digits.parse().map_err(|_| bad())?;
    let scale = match unit {
        's' => 1,
        'm' => 60,
        'h' => 3_600,
        'd' => 86_400,
        _ => return Err(bad()),
    };
    count.checked_mul(scale).ok_or_else(bad)
}

/// A duration in the largest unit that divides it exactly (`86400` → `1d`).
pub fn format_duration(seconds: u64) -> String {
    for (unit, scale) in [('d', 86_400), ('h', 3_600), ('m', 60)] {
        if seconds > 0 && seconds.is_multiple_of(scale) {
            return format!("{}{unit}", seconds / scale);
        }
    }
    format!("{seconds}s")
}

/// A retention policy as set: each part `None` when the policy leaves it unset (kept forever).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Retention {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_bytes_seconds: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_records_seconds: Option<u64>,
}

impl Retention {
    /// Refuses a policy that says nothing (`bad_request`), or whose records would go before its
    /// bytes (`conflict`).
    pub fn check(&self) -> Result<(), Rejection> {
        if self.keep_bytes_seconds.is_none() && self.keep_records_seconds.is_none() {
            return Err(Rejection::new(
                ErrorCode::BadRequest,
                "a retention policy names keepBytes, keepRecords or both",
            ));
        }
        if let (Some(bytes), Some(records)) = (self.keep_bytes_seconds, self.keep_records_seconds)
            && records < bytes
        {
            // Each value is well formed; together they conflict (409).
            return Err(Rejection::new(
                ErrorCode::Conflict,
                format!(
                    "keepRecords ({}) is shorter than keepBytes ({}): Evidence and manifests outlive the bytes they cite",
                    format_duration(records),
                    format_duration(bytes)
                ),
            ));
        }
        Ok(())
    }

    /// How long a citation keeps its blob: `keepRecords` for what a verified WorkItem's
    /// Evidence cites (records unset: forever), `keepBytes` otherwise. `None`: forever.
    pub fn keeps(&self, verified_citation: bool) -> Option<u64> {
        if verified_citation {
            match (self.keep_records_seconds, self.keep_bytes_seconds) {
                (Some(records), _) => Some(records),
                // Records kept forever: so is what they cite.
                (None, _) => None,
            }
        } else {
            self.keep_bytes_seconds
        }
    }
}

/// When one citation of a blob stops needing it: the Mission's end plus what its policy keeps,
/// plus [`CLOCK_MARGIN_SECONDS`]. `None` while the Mission is live, when no policy applies, or
/// when the policy keeps that kind of citation forever.
pub fn bytes_due(
    mission_ended: Option<DateTime<Utc>>,
    policy: Option<&Retention>,
    verified_citation: bool,
) -> Option<DateTime<Utc>> {
    let ended = mission_ended?;
    let keep = policy?.keeps(verified_citation)?;
    let keep = i64::try_from(keep).ok()?;
    ended.checked_add_signed(chrono::Duration::seconds(
        keep.checked_add(CLOCK_MARGIN_SECONDS)?,
    ))
}

/// When a Mission's records (its manifests and Evidence, the signed envelopes) stop being
/// kept: its end plus the policy's `keepRecords`, plus [`CLOCK_MARGIN_SECONDS`]. `None` while
/// the Mission is live, when no policy applies, or when the policy keeps records forever
/// (`keepRecords` unset). Never before [`bytes_due`] for the same policy (`keepRecords` is
/// never shorter than `keepBytes`).
pub fn records_due(
    mission_ended: Option<DateTime<Utc>>,
    policy: Option<&Retention>,
) -> Option<DateTime<Utc>> {
    let ended = mission_ended?;
    let keep = i64::try_from(policy?.keep_records_seconds?).ok()?;
    ended.checked_add_signed(chrono::Duration::seconds(
        keep.checked_add(CLOCK_MARGIN_SECONDS)?,
    ))
}

/// What a legal hold holds: an artifact (and its lineage), a WorkItem or a Mission (and
/// everything they cite, with its lineage).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum HoldTarget {
    Artifact(ArtifactId),
    WorkItemId(Id),
    MissionId(Id),
}

impl HoldTarget {
    /// The kind's stored name and the target's text.
    pub fn parts(&self) -> (&'static str, String) {
        match self {
            HoldTarget::Artifact(id) => ("artifact", id.to_string()),
            HoldTarget::WorkItemId(id) => ("workItem", id.to_string()),
            HoldTarget::MissionId(id) => ("mission", id.to_string()),
        }
    }

    /// The target from its stored parts.
    pub fn from_parts(kind: &str, target: &str) -> Result<Self, Rejection> {
        Ok(match kind {
            "artifact" => HoldTarget::Artifact(target.parse().map_err(|_| {
                Rejection::new(ErrorCode::BadRequest, format!("artifact {target:?}"))
            })?),
            "workItem" => HoldTarget::WorkItemId(Id::parse("workItemId", target)?),
            "mission" => HoldTarget::MissionId(Id::parse("missionId", target)?),
            other => {
                return Err(Rejection::new(
                    ErrorCode::BadRequest,
                    format!("hold kind {other:?}"),
                ));
            }
        })
    }
}

/// `retention.set`: the operator set a Group's retention policy, or one Mission's, or one
/// classification's of the Group's artifacts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RetentionSet {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub classification: Option<crate::manifest::Classification>,
    pub group_id: Id,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_bytes_seconds: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_records_seconds: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mission_id: Option<Id>,
}

/// `hold.placed`: a legal hold; what it holds is never collected until it is lifted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HoldPlaced {
    pub hold_id: Id,
    pub reason: String,
    pub target: HoldTarget,
    /// The Group's approver who placed it; absent when the operator did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placed_by: Option<Id>,
}

/// `hold.lifted`
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HoldLifted {
    pub hold_id: Id,
    /// The Group's approver who lifted it; absent when the operator did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifted_by: Option<Id>,
}

/// `artifact.disposed`: blobs' bytes were deleted by policy, one collection batch's worth
/// in one Group (and one set of its Missions). Their manifests stay (tombstones): lineage
/// still shows the nodes, and a content read answers 410 `disposed` naming this Event.
/// Appended to every Group that published them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactDisposed {
    pub artifacts: Vec<DisposedArtifact>,
    pub disposed_at: String,
    /// The Missions of this Group whose manifests cited them.
    pub missions: Vec<Id>,
}

/// One blob of an `artifact.disposed` Event: what went, under which policy, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DisposedArtifact {
    pub artifact: ArtifactId,
    /// The policy that let it go: `group G` or `mission M`, with its durations.
    pub policy: String,
    /// Why, in words: which Missions ended when, and when their policies let the bytes go.
    pub reason: String,
    pub sha256: Sha256Digest,
    pub size: u64,
}

/// `records.disposed`: a Mission's records were disposed of by policy, one collection batch's
/// worth: the signed envelopes of these manifests and Evidence are deleted. Each keeps a
/// tombstone row (ids, digests, its Event's sequence), so lineage still shows the node and the
/// log still verifies; a read of one answers 410 `disposed` naming this Event. Appended to the
/// Mission's Group; delivered and exported with the Mission's Events.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RecordsDisposed {
    pub mission_id: Id,
    pub manifests: Vec<DisposedManifest>,
    pub evidence: Vec<DisposedEvidence>,
    /// The policy that let them go: `group G` or `mission M`, with its durations.
    pub policy: String,
    /// Why, in words: when the Mission ended and when its policy let the records go.
    pub reason: String,
    pub disposed_at: String,
}

/// One Evidence record of a `records.disposed` Event, and the artifacts it cited (an
/// artifact's audit bundle holds the Event that says why its Evidence is not there).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DisposedEvidence {
    pub evidence_id: ArtifactId,
    pub artifacts: Vec<ArtifactId>,
}

/// One manifest of a `records.disposed` Event, and the artifact it described.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DisposedManifest {
    pub manifest_id: ArtifactId,
    pub artifact: ArtifactId,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_and_print() {
        assert_eq!(parse_duration("30d"), Ok(30 * 86_400));
        assert_eq!(parse_duration("12h"), Ok(12 * 3_600));
        assert_eq!(parse_duration("1s"), Ok(1));
        assert_eq!(parse_duration("0s"), Ok(0));
        for bad in [
            "",
            "d",
            "30",
            "30w",
            "-1d",
            "1.5h",
            "1 d",
            "99999999999999d",
            "ü",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
        assert_eq!(format_duration(86_400 * 30), "30d");
        assert_eq!(format_duration(90), "90s");
        assert_eq!(format_duration(120), "2m");
    }

    #[test]
    fn records_never_go_before_bytes() {
        let policy = Retention {
            keep_bytes_seconds: Some(10),
            keep_records_seconds: Some(5),
        };
        assert!(policy.check().is_err());
        assert!(Retention::default().check().is_err());
    }

    /// The table of `fixtures/records_retention.json` (issue #46): when a Mission's records go.
    #[test]
    fn records_due_follows_the_fixture_table() {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Case {
            name: String,
            ended: Option<DateTime<Utc>>,
            policy: Option<Retention>,
            due: Option<DateTime<Utc>>,
        }
        let text = include_str!("../../fixtures/records_retention.json");
        let cases: Vec<Case> = serde_json::from_str(text).expect("fixture");
        assert!(cases.len() >= 6);
        for case in cases {
            assert_eq!(
                records_due(case.ended, case.policy.as_ref()),
                case.due,
                "{}",
                case.name
            );
            // Never before the bytes of the same policy (`Retention::check`'s rule).
            if let (Some(due), Some(policy)) = (case.due, case.policy.as_ref())
                && let Some(bytes) = bytes_due(case.ended, Some(policy), false)
            {
                assert!(bytes <= due, "{}", case.name);
            }
        }
    }

    /// The table of `fixtures/retention.json`: each case's due instant, or none.
    #[test]
    fn bytes_due_follows_the_fixture_table() {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Case {
            name: String,
            ended: Option<DateTime<Utc>>,
            policy: Option<Retention>,
            verified: bool,
            due: Option<DateTime<Utc>>,
        }
        let text = include_str!("../../fixtures/retention.json");
        let cases: Vec<Case> = serde_json::from_str(text).expect("fixture");
        assert!(cases.len() >= 6);
        for case in cases {
            assert_eq!(
                bytes_due(case.ended, case.policy.as_ref(), case.verified),
                case.due,
                "{}",
                case.name
            );
        }
    }

    #[test]
    fn hold_targets_round_trip() {
        for target in [
            HoldTarget::Artifact(ArtifactId([7; 32])),
            HoldTarget::WorkItemId(Id::parse("workItemId", "w1").expect("id")),
            HoldTarget::MissionId(Id::parse("missionId", "m1").expect("id")),
        ] {
            let (kind, text) = target.parts();
            assert_eq!(HoldTarget::from_parts(kind, &text), Ok(target));
        }
    }
}
