//! The artifact manifest, v1 payload (DESIGN §5, ART-3).
//!
//! Every ART-3 field is required; `content.schema` must be present but may be null. Unknown
//! fields are refused at every level, so nothing unsigned-in-spirit or free-form of unbounded
//! size can ride along. [`Manifest::parse`] is the only constructor the server uses.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, FixedOffset};
use serde::{Deserialize, Deserializer, Serialize};

use crate::digest::{ArtifactId, Sha256Digest};
use crate::dsse::MANIFEST_TYPE;
use crate::error::{ErrorCode, Rejection};
use crate::id::Id;
use crate::signed::SignedPayload;

/// Largest manifest payload accepted, in bytes.
pub const MAX_MANIFEST_BYTES: usize = 256 * 1024;
const MAX_SOURCES: usize = 1024;
const MAX_TOOLS: usize = 64;
const MAX_ANNOTATIONS: usize = 64;
const MAX_TEXT: usize = 256;
const MAX_URI: usize = 2048;
const MAX_ANNOTATION_VALUE: usize = 1024;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Manifest {
    pub content: Content,
    pub producer: Producer,
    pub mission_id: Id,
    pub group_id: Id,
    pub work_item_id: Id,
    pub execution: Execution,
    pub sources: Vec<ArtifactId>,
    pub tools: Vec<Tool>,
    pub created_at: DateTime<FixedOffset>,
    pub classification: Classification,
    pub retrieval_uri: String,
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Content {
    pub blake3: ArtifactId,
    pub sha256: Sha256Digest,
    pub size: u64,
    pub media_type: String,
    /// Present but nullable: ART-3 asks for the schema, and "none" must be said explicitly.
    #[serde(deserialize_with = "required_nullable")]
    pub schema: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Producer {
    pub agent_id: Id,
    pub agent_card_version: String,
}

/// The execution lease the artifact was produced under (LSE-4). Enforcement comes with the
/// lease workflow; here it is carried, signed and indexed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Execution {
    pub lease_id: Id,
    pub ownership_epoch: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tool {
    pub kind: ToolKind,
    pub id: String,
    pub version: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolKind {
    Tool,
    Model,
    Capability,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Classification {
    Public,
    Internal,
    Confidential,
    Restricted,
}

impl Classification {
    /// Its level, from `public` (0) to `restricted` (3): higher is more sensitive.
    pub fn rank(self) -> u8 {
        match self {
            Self::Public => 0,
            Self::Internal => 1,
            Self::Confidential => 2,
            Self::Restricted => 3,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Public => "public",
            Self::Internal => "internal",
            Self::Confidential => "confidential",
            Self::Restricted => "restricted",
        }
    }
}

fn required_nullable<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Option::<String>::deserialize(d)
}

fn invalid(message: impl Into<String>) -> Rejection {
    Rejection::new(ErrorCode::InvalidManifest, message)
}

/// Printable text without control characters, bounded.
fn check_text(field: &str, text: &str, max: usize) -> Result<(), Rejection> {
    if text.is_empty() || text.len() > max {
        return Err(invalid(format!("{field} must be 1..={max} bytes")));
    }
    if text.chars().any(|c| c.is_control()) {
        return Err(invalid(format!("{field} contains control characters")));
    }
    Ok(())
}

/// `type/subtype[+suffix]` in the RFC 6838 token alphabet, then parameters as RFC 9110
/// §5.6.6 writes them (`text/plain; =x` is refused: it would be served back as a
/// `Content-Type` no reader can parse).
fn check_media_type(text: &str) -> Result<(), Rejection> {
    let (essence, parameters) = text.split_at(text.find(';').unwrap_or(text.len()));
    let essence = essence.trim();
    let token = |part: &str| {
        !part.is_empty()
            && part.len() <= 127
            && part
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b))
    };
    let well_formed = text.len() <= MAX_TEXT
        && text.is_ascii()
        && !text.bytes().any(|b| b.is_ascii_control())
        && essence
            .split_once('/')
            .is_some_and(|(kind, subtype)| token(kind) && token(subtype))
        && parameters_well_formed(parameters);
    if well_formed {
        Ok(())
    } else {
        Err(invalid(
            "content.mediaType must be a media type such as application/json",
        ))
    }
}

/// `*( OWS ";" OWS [ token "=" ( token / quoted-string ) ] )` (RFC 9110 §5.6.6).
fn parameters_well_formed(mut rest: &str) -> bool {
    let tchar = |b: u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b);
    let skip_ows = |text: &str| text.len() - text.trim_start_matches([' ', '\t']).len();
    loop {
        rest = &rest[skip_ows(rest)..];
        if rest.is_empty() {
            return true;
        }
        let Some(after) = rest.strip_prefix(';') else {
            return false;
        };
        rest = &after[skip_ows(after)..];
        if rest.is_empty() || rest.starts_with(';') {
            continue;
        }
        let name = rest.bytes().take_while(|&b| tchar(b)).count();
        if name == 0 {
            return false;
        }
        let Some(value) = rest[name..].strip_prefix('=') else {
            return false;
        };
        if let Some(quoted) = value.strip_prefix('"') {
            let mut escaped = false;
            let mut end = None;
            for (at, byte) in quoted.bytes().enumerate() {
                match (escaped, byte) {
                    (true, _) => escaped = false,
                    (false, b'\\') => escaped = true,
                    (false, b'"') => {
                        end = Some(at);
                        break;
                    }
                    _ => {}
                }
            }
            let Some(end) = end else {
                return false;
            };
            rest = &quoted[end + 1..];
        } else {
            let length = value.bytes().take_while(|&b| tchar(b)).count();
            if length == 0 {
                return false;
            }
            rest = &value[length..];
        }
    }
}

fn check_uri(field: &str, text: &str) -> Result<(), Rejection> {
    let scheme_ok = ["https://", "http://", "urn:", "blake3:", "sha256:"]
        .iter()
        .any(|scheme| text.starts_with(scheme));
    if !scheme_ok
        || text.len() > MAX_URI
        || text.chars().any(|c| c.is_whitespace() || c.is_control())
    {
        return Err(invalid(format!(
            "{field} must be an absolute http(s), urn or digest URI of at most {MAX_URI} bytes"
        )));
    }
    Ok(())
}

/// The annotation a file's name is recorded under (`weft put` sets it).
pub const NAME_ANNOTATION: &str = "name";

impl Manifest {
    /// The file name the manifest records (its `name` annotation), reduced to the last path
    /// component: what the console shows and searches (issue #50), and what `weft get`
    /// names a download. `None` when there is none, or nothing is left of it.
    pub fn file_name(&self) -> Option<&str> {
        let name = self.annotations.get(NAME_ANNOTATION)?;
        let base = name.rsplit(['/', '\\']).next()?.trim();
        (!base.is_empty()).then_some(base)
    }

    /// Parses and validates a manifest payload: strict JSON, every field present and
    /// well-formed, every bound respected (see [`SignedPayload::parse_payload`]).
    pub fn parse(payload: &[u8]) -> Result<Self, Rejection> {
        Self::parse_payload(payload)
    }
}

impl SignedPayload for Manifest {
    const PAYLOAD_TYPE: &'static str = MANIFEST_TYPE;
    const NAME: &'static str = "manifest";
    const MAX_BYTES: usize = MAX_MANIFEST_BYTES;
    const INVALID: ErrorCode = ErrorCode::InvalidManifest;

    fn signer_claim(&self) -> (&Id, Option<&str>) {
        (
            &self.producer.agent_id,
            Some(&self.producer.agent_card_version),
        )
    }

    fn validate(&self) -> Result<(), Rejection> {
        check_media_type(&self.content.media_type)?;
        if let Some(schema) = &self.content.schema {
            check_uri("content.schema", schema)?;
        }
        check_text(
            "producer.agentCardVersion",
            &self.producer.agent_card_version,
            MAX_TEXT,
        )?;
        if self.sources.len() > MAX_SOURCES {
            return Err(invalid(format!("at most {MAX_SOURCES} sources")));
        }
        let distinct: BTreeSet<_> = self.sources.iter().collect();
        if distinct.len() != self.sources.len() {
            return Err(invalid("sources lists the same artifact twice"));
        }
        if distinct.contains(&self.content.blake3) {
            return Err(Rejection::new(
                ErrorCode::Cycle,
                "an artifact cannot be its own source",
            ));
        }
        if self.tools.len() > MAX_TOOLS {
            return Err(invalid(format!("at most {MAX_TOOLS} tools")));
        }
        for tool in &self.tools {
            check_text("tools[].id", &tool.id, MAX_TEXT)?;
            check_text("tools[].version", &tool.version, MAX_TEXT)?;
        }
        check_uri("retrievalUri", &self.retrieval_uri)?;
        if self.annotations.len() > MAX_ANNOTATIONS {
            return Err(invalid(format!("at most {MAX_ANNOTATIONS} annotations")));
        }
        for (key, value) in &self.annotations {
            check_text("annotations key", key, MAX_TEXT)?;
            if value.len() > MAX_ANNOTATION_VALUE {
                return Err(invalid(format!(
                    "annotation values are at most {MAX_ANNOTATION_VALUE} bytes"
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::digest::Hasher;

    fn sample() -> Value {
        let digests = Hasher::digest(b"hello");
        json!({
            "content": {"blake3": digests.blake3, "sha256": digests.sha256, "size": 5,
                        "mediaType": "text/plain", "schema": null},
            "producer": {"agentId": "agent-7", "agentCardVersion": "3"},
            "missionId": "m-1", "groupId": "g-1", "workItemId": "w-1",
            "execution": {"leaseId": "lease-1", "ownershipEpoch": 2},
            "sources": [],
            "tools": [{"kind": "model", "id": "gpt", "version": "5"}],
            "createdAt": "2026-11-30T12:00:00Z",
            "classification": "internal",
            "retrievalUri": "https://weft.example/v1/artifacts/x/content"
        })
    }

    fn check(mutate: impl FnOnce(&mut Value), expected: Option<ErrorCode>) {
        let mut value = sample();
        mutate(&mut value);
        let bytes = serde_json::to_vec(&value).expect("serialisable");
        let outcome = Manifest::parse(&bytes).err().map(|e| e.code);
        assert_eq!(outcome, expected, "{value}");
    }

    #[test]
    fn a_complete_manifest_parses() {
        check(|_| {}, None);
    }

    #[test]
    fn every_art3_field_is_required() {
        // ART-3: content hash, media type and schema, producer + card version, ids, sources,
        // tools, creation time, classification, size, retrieval URI.
        for field in [
            "content",
            "producer",
            "missionId",
            "groupId",
            "workItemId",
            "execution",
            "sources",
            "tools",
            "createdAt",
            "classification",
            "retrievalUri",
        ] {
            check(
                |v| {
                    v.as_object_mut().map(|o| o.remove(field));
                },
                Some(ErrorCode::InvalidManifest),
            );
        }
        for field in ["blake3", "sha256", "size", "mediaType", "schema"] {
            check(
                |v| {
                    v["content"].as_object_mut().map(|o| o.remove(field));
                },
                Some(ErrorCode::InvalidManifest),
            );
        }
    }

    #[test]
    fn malformed_fields_are_refused() {
        check(|v| v["extra"] = json!(1), Some(ErrorCode::InvalidManifest));
        check(
            |v| v["content"]["extra"] = json!(1),
            Some(ErrorCode::InvalidManifest),
        );
        check(
            |v| v["groupId"] = json!("../g"),
            Some(ErrorCode::InvalidManifest),
        );
        check(
            |v| v["classification"] = json!("secret"),
            Some(ErrorCode::InvalidManifest),
        );
        check(
            |v| v["createdAt"] = json!("yesterday"),
            Some(ErrorCode::InvalidManifest),
        );
        check(
            |v| v["content"]["mediaType"] = json!("nonsense"),
            Some(ErrorCode::InvalidManifest),
        );
        // issue #40: parameters follow RFC 9110's grammar.
        for bad in [
            "text/plain; =x",
            "text/plain; charset",
            "text/plain; charset=",
            "text/plain; charset=\"utf-8",
            "text/plain; a=b c",
            "text/plain; a b=c",
            "text/plain x",
        ] {
            check(
                |v| v["content"]["mediaType"] = json!(bad),
                Some(ErrorCode::InvalidManifest),
            );
        }
        for good in [
            "text/plain; charset=utf-8",
            "text/plain;charset=\"utf-8\"",
            "text/plain; a=\"b\\\"c\"; d=e",
            "text/plain;",
            "application/vnd.a+json ; q=1",
        ] {
            check(|v| v["content"]["mediaType"] = json!(good), None);
        }
        check(
            |v| v["content"]["size"] = json!(-1),
            Some(ErrorCode::InvalidManifest),
        );
        check(
            |v| v["tools"][0]["kind"] = json!("oracle"),
            Some(ErrorCode::InvalidManifest),
        );
        check(
            |v| v["retrievalUri"] = json!("file:///etc/passwd"),
            Some(ErrorCode::InvalidManifest),
        );
        check(
            |v| v["sources"] = json!(["blake3:00"]),
            Some(ErrorCode::InvalidManifest),
        );
        let own = v_blake3();
        check(|v| v["sources"] = json!([own]), Some(ErrorCode::Cycle));
    }

    fn v_blake3() -> String {
        Hasher::digest(b"hello").blake3.to_string()
    }
}
