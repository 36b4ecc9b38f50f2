//! Context Packages, v1 payload (DESIGN §11, CTX-1…4): a signed, versioned, scoped summary
//! that cites the Events and Artifacts it summarises and never stands in for the log.
//!
//! Every CTX-2 item is a required field (the signature is the DSSE envelope's; the generator
//! must be its signer); unknown fields are refused and free text is bounded. The version chain
//! rule ([`check_chain`]) is pure: storage looks up the rows and this decides, against the
//! table in `fixtures/context_chain.json`.

use std::collections::BTreeSet;

use chrono::{DateTime, FixedOffset};
use serde::{Deserialize, Serialize};

use crate::digest::ArtifactId;
use crate::error::{ErrorCode, Rejection};
use crate::id::Id;
use crate::manifest::Producer;
use crate::signed::SignedPayload;

pub const CONTEXT_TYPE: &str = "application/vnd.mwp.context-package.v1+json";
/// Largest Context Package payload, in bytes.
pub const MAX_CONTEXT_BYTES: usize = 128 * 1024;
/// Most entries of `decisions`, `constraints`, `openQuestions` each, and most cited Artifacts.
const MAX_ITEMS: usize = 256;
/// Longest entry of `decisions`, `constraints` or `openQuestions`, in bytes.
pub const MAX_ITEM_TEXT: usize = 2048;
const MAX_NAME: usize = 256;

/// A Context Package payload (DESIGN §11). Field order is the wire order of the example.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ContextPackage {
    pub package_id: Id,
    pub version: u64,
    /// The previous version's id (`blake3:` of its payload); null exactly for version 1.
    #[serde(deserialize_with = "required_nullable")]
    pub previous: Option<ArtifactId>,
    pub group_id: Id,
    pub mission_id: Id,
    #[serde(deserialize_with = "required_nullable")]
    pub work_item_id: Option<Id>,
    pub source_events: EventRange,
    pub artifacts: Vec<ArtifactId>,
    pub decisions: Vec<String>,
    pub constraints: Vec<String>,
    pub open_questions: Vec<String>,
    pub generator: Producer,
    pub created_at: DateTime<FixedOffset>,
}

/// An inclusive range of a Group's log sequences.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventRange {
    pub from: u64,
    pub to: u64,
}

/// A required field that may be `null` (absent is refused, unlike `Option`'s default).
fn required_nullable<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d)
}

fn invalid(message: impl Into<String>) -> Rejection {
    Rejection::new(ErrorCode::InvalidContext, message)
}

fn check_texts(field: &str, texts: &[String]) -> Result<(), Rejection> {
    if texts.len() > MAX_ITEMS {
        return Err(invalid(format!("at most {MAX_ITEMS} {field}")));
    }
    for text in texts {
        if text.is_empty()
            || text.len() > MAX_ITEM_TEXT
            || text.chars().any(|c| c.is_control() && c != '\n')
        {
            return Err(invalid(format!(
                "each of {field} must be 1..={MAX_ITEM_TEXT} bytes of printable text"
            )));
        }
    }
    Ok(())
}

impl ContextPackage {
    /// Parses and validates a payload (see [`SignedPayload::parse_payload`]).
    pub fn parse(payload: &[u8]) -> Result<Self, Rejection> {
        Self::parse_payload(payload)
    }

    /// This version as a link of its chain, given its id.
    pub fn link(&self, id: ArtifactId) -> Link {
        Link {
            id,
            package_id: self.package_id.clone(),
            version: self.version,
            mission_id: self.mission_id.clone(),
        }
    }
}

impl SignedPayload for ContextPackage {
    const PAYLOAD_TYPE: &'static str = CONTEXT_TYPE;
    const NAME: &'static str = "context package";
    const MAX_BYTES: usize = MAX_CONTEXT_BYTES;
    const INVALID: ErrorCode = ErrorCode::InvalidContext;

    fn signer_claim(&self) -> (&Id, Option<&str>) {
        (
            &self.generator.agent_id,
            Some(&self.generator.agent_card_version),
        )
    }

    fn validate(&self) -> Result<(), Rejection> {
        if self.version == 0 {
            return Err(invalid("version starts at 1"));
        }
        match (self.version, &self.previous) {
            (1, Some(_)) => return Err(invalid("version 1 has previous null")),
            (2.., None) => {
                return Err(invalid(
                    "a version after 1 names the previous version's id in previous",
                ));
            }
            _ => {}
        }
        let range = self.source_events;
        if range.from == 0 || range.from > range.to {
            return Err(invalid(
                "sourceEvents is from ≥ 1 to ≥ from, sequences of the Group's log",
            ));
        }
        if self.artifacts.len() > MAX_ITEMS {
            return Err(invalid(format!("at most {MAX_ITEMS} artifacts")));
        }
        let distinct: BTreeSet<_> = self.artifacts.iter().collect();
        if distinct.len() != self.artifacts.len() {
            return Err(invalid("artifacts lists the same artifact twice"));
        }
        check_texts("decisions", &self.decisions)?;
        check_texts("constraints", &self.constraints)?;
        check_texts("openQuestions", &self.open_questions)?;
        let card = &self.generator.agent_card_version;
        if card.is_empty() || card.len() > MAX_NAME || card.chars().any(char::is_control) {
            return Err(invalid(format!(
                "generator.agentCardVersion must be 1..={MAX_NAME} bytes of printable text"
            )));
        }
        Ok(())
    }
}

/// One published version as the chain rule sees it.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Link {
    pub id: ArtifactId,
    pub package_id: Id,
    pub version: u64,
    pub mission_id: Id,
}

/// CTX-4, the version chain: may `new` (whose payload names `previous`) be published, given
/// the version its `previous` names (`named`: `None` when `previous` is null or names no
/// version in this Group) and the package's latest version in this Group (`latest`)?
///
/// Version 1 starts a package that has none; version n+1 names the latest version n of the
/// same package and Mission. Each way to get it wrong has its own code.
pub fn check_chain(
    new: &Link,
    previous: Option<&ArtifactId>,
    named: Option<&Link>,
    latest: Option<&Link>,
) -> Result<(), Rejection> {
    let mismatch = |message: String| Rejection::new(ErrorCode::ContextPreviousMismatch, message);
    let Some(previous) = previous else {
        return match latest {
            None => Ok(()),
            Some(latest) => Err(mismatch(format!(
                "package {} already has version {}: name it in previous",
                new.package_id, latest.version
            ))),
        };
    };
    let Some(named) = named else {
        return Err(mismatch(format!(
            "previous names {previous}, which is no published version in this Group"
        )));
    };
    if named.package_id != new.package_id {
        return Err(Rejection::new(
            ErrorCode::ContextOtherPackage,
            format!(
                "previous is a version of package {}, not {}",
                named.package_id, new.package_id
            ),
        ));
    }
    if named.mission_id != new.mission_id {
        return Err(Rejection::new(
            ErrorCode::ContextOtherMission,
            format!(
                "previous is scoped to Mission {}, not {}",
                named.mission_id, new.mission_id
            ),
        ));
    }
    if new.version > named.version + 1 {
        return Err(Rejection::new(
            ErrorCode::ContextVersionSkipped,
            format!(
                "version {} follows version {}: it must be {}",
                new.version,
                named.version,
                named.version + 1
            ),
        ));
    }
    if new.version != named.version + 1 {
        return Err(mismatch(format!(
            "version {} cannot follow version {}",
            new.version, named.version
        )));
    }
    match latest {
        Some(latest) if latest.id == named.id => Ok(()),
        Some(latest) => Err(mismatch(format!(
            "previous names version {}, but the latest is version {}",
            named.version, latest.version
        ))),
        // `named` is published, so the package has a latest version; defensive only.
        None => Err(mismatch("the package has no published version".to_owned())),
    }
}

/// `201` of `POST /v1/groups/{groupId}/context`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextPublishedAnswer {
    pub context_id: ArtifactId,
    pub package_id: Id,
    pub version: u64,
    /// Of its `context.published` Event.
    pub sequence: u64,
}

/// One version as the server indexed it in a Group.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextRecord {
    pub context_id: ArtifactId,
    /// The Group it is indexed in: its own, or the one it was forwarded to.
    pub group_id: Id,
    /// Of its `context.published` (or, for a forwarded copy, `context.forwarded`) Event.
    pub sequence: u64,
    /// The Group it was forwarded from, for a forwarded copy (CTX-7).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forwarded_from: Option<Id>,
    pub envelope: crate::dsse::Envelope,
    pub package: ContextPackage,
}

/// `GET /v1/context/{packageId}/versions`: oldest first.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextVersions {
    pub package_id: Id,
    pub versions: Vec<ContextRecord>,
}

/// `GET /v1/context/{packageId}/events`: the Events a version cites (CTX-3).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextEvents {
    pub context_id: ArtifactId,
    pub group_id: Id,
    pub source_events: EventRange,
    pub events: Vec<crate::event::Delivered>,
}

/// `POST /v1/context/{packageId}/forward` body (CTX-7).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ForwardRequest {
    pub to_group_id: Id,
    /// The version to forward; the latest when absent.
    #[serde(default)]
    pub version: Option<u64>,
}

/// The answer of a forward: the `context.forwarded` Event in each Group.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextForwardedAnswer {
    pub context_id: ArtifactId,
    pub from_group_id: Id,
    pub from_sequence: u64,
    pub to_group_id: Id,
    pub to_sequence: u64,
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn sample() -> Value {
        json!({
            "packageId": "pkg-1", "version": 1, "previous": null,
            "groupId": "g-1", "missionId": "m-1", "workItemId": null,
            "sourceEvents": {"from": 1, "to": 40},
            "artifacts": ["blake3:0000000000000000000000000000000000000000000000000000000000000000"],
            "decisions": ["use the v2 schema"], "constraints": ["no network"],
            "openQuestions": ["who reviews?"],
            "generator": {"agentId": "agent-7", "agentCardVersion": "3"},
            "createdAt": "2026-11-30T12:00:00Z"
        })
    }

    fn check(mutate: impl FnOnce(&mut Value), expected: Option<ErrorCode>) {
        let mut value = sample();
        mutate(&mut value);
        let outcome = ContextPackage::parse(value.to_string().as_bytes())
            .err()
            .map(|e| e.code);
        assert_eq!(outcome, expected, "{value}");
    }

    #[test]
    fn the_design_example_parses() {
        check(|_| {}, None);
    }

    /// CTX-2: Mission and WorkItem scope, source Event range, Artifact hashes, decisions,
    /// constraints, unresolved questions, generator, time (the signature is the envelope's).
    #[test]
    fn every_ctx2_item_is_required() {
        for field in [
            "packageId",
            "version",
            "previous",
            "groupId",
            "missionId",
            "workItemId",
            "sourceEvents",
            "artifacts",
            "decisions",
            "constraints",
            "openQuestions",
            "generator",
            "createdAt",
        ] {
            check(
                |v| {
                    v.as_object_mut().map(|o| o.remove(field));
                },
                Some(ErrorCode::InvalidContext),
            );
        }
    }

    #[test]
    fn bad_ranges_versions_and_unknown_fields_are_refused() {
        let refused = Some(ErrorCode::InvalidContext);
        check(|v| v["sourceEvents"] = json!({"from": 0, "to": 3}), refused);
        check(|v| v["sourceEvents"] = json!({"from": 5, "to": 3}), refused);
        check(|v| v["version"] = json!(0), refused);
        check(|v| v["version"] = json!(2), refused);
        check(
            |v| v["previous"] = v["artifacts"][0].clone(),
            Some(ErrorCode::InvalidContext),
        );
        check(|v| v["reasoning"] = json!("first I thought…"), refused);
        check(|v| v["decisions"] = json!([""]), refused);
        check(
            |v| v["decisions"] = json!(["x".repeat(MAX_ITEM_TEXT + 1)]),
            refused,
        );
        check(
            |v| v["artifacts"] = json!([v["artifacts"][0], v["artifacts"][0]]),
            refused,
        );
        check(|v| v["workItemId"] = json!("w-1"), None);
    }
}
