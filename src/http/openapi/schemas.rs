//! Hand-written schemas for what `weft-api` types put on the wire (the API crate carries no
//! utoipa), and the tables that give each parameter, request body and success answer its
//! schema and media type.
//!
//! Every pattern and bound here mirrors a parser: `Id::parse` (1 to 128 of `A-Z a-z 0-9 . _
//! : -`, not dots only), `Digest::parse` (`blake3:` or `sha256:` and 64 lowercase hex digits),
//! `params::query_u64` (decimal digits up to `i64::MAX`). A schema stricter than its parser
//! would make valid requests look invalid, a laxer one invalid requests look valid; the
//! Schemathesis run (`tests/python/schemathesis_run.sh`) catches either.

use serde_json::{Map, Value, json};

/// `Id::parse`: 1..=128 characters of `A-Za-z0-9._:-`, at least one of them not a dot.
pub(super) const ID_PATTERN: &str = "^[A-Za-z0-9._:-]*[A-Za-z0-9_:-][A-Za-z0-9._:-]*$";
/// `Digest::parse`.
pub(super) const DIGEST_PATTERN: &str = "^(blake3|sha256):[0-9a-f]{64}$";
/// `ArtifactId::parse`: a digest that is blake3.
pub(super) const BLAKE3_PATTERN: &str = "^blake3:[0-9a-f]{64}$";
const EDGE: &str = "(derivedFrom|generatedBy|partOf|attributedTo)";

fn id() -> Value {
    json!({"type": "string", "minLength": 1, "maxLength": 128, "pattern": ID_PATTERN})
}

fn digest() -> Value {
    json!({"type": "string", "pattern": DIGEST_PATTERN})
}

fn blake3() -> Value {
    json!({"type": "string", "pattern": BLAKE3_PATTERN})
}

/// What `query_u64` accepts: a sequence, cursor or count, at most `i64::MAX`.
fn counter(description: &str) -> Value {
    json!({"type": "integer", "format": "int64", "minimum": 0, "maximum": i64::MAX,
        "description": description})
}

fn string_enum(values: &[&str]) -> Value {
    json!({"type": "string", "enum": values})
}

/// A sequence, epoch or size in an answer: a non-negative integer.
fn non_negative() -> Value {
    json!({"type": "integer", "minimum": 0})
}

fn schema_ref(name: &str) -> Value {
    json!({"$ref": format!("#/components/schemas/{name}")})
}

/// Components every operation refers to.
pub(super) fn components() -> Map<String, Value> {
    let mut schemas = Map::new();
    schemas.insert(
        "Problem".into(),
        json!({
            "type": "object",
            "description": "RFC 9457 problem details; `code` is the stable weft error code",
            "required": ["type", "title", "status", "detail", "code"],
            "properties": {
                "type": {"type": "string"},
                "title": {"type": "string"},
                "status": {"type": "integer", "minimum": 400, "maximum": 599},
                "detail": {"type": "string"},
                "code": {"type": "string", "pattern": "^[a-z_]+$"},
                "requestId": {"type": "string"},
                "snapshot": {"type": "object", "description": "with cursor_too_old: the signed snapshot to restore from"}
            }
        }),
    );
    schemas.insert("Envelope".into(), envelope(true));
    schemas.insert("EnvelopeShape".into(), envelope(false));
    schemas.insert("Id".into(), id());
    schemas.insert("Digest".into(), digest());
    schemas
}

/// A DSSE v1 envelope. `checked`: as a route refuses it before anything else (one signature,
/// an `ed25519:` keyid); otherwise only its shape, as a batch parses it before checking each
/// Command on its own and reporting the first refusal inside a `200`.
fn envelope(checked: bool) -> Value {
    let keyid = if checked {
        json!({"type": "string", "pattern": "^ed25519:[0-9a-f]{64}$"})
    } else {
        json!({"type": "string"})
    };
    let mut signatures = json!({
        "type": "array",
        "items": {
            "type": "object",
            "required": ["keyid", "sig"],
            "properties": {"keyid": keyid, "sig": {"type": "string", "contentEncoding": "base64"}}
        }
    });
    if checked {
        signatures["minItems"] = json!(1);
        signatures["maxItems"] = json!(1);
    }
    json!({
        "type": "object",
        "description": "A DSSE v1 envelope: a base64 payload and its Ed25519 signature; other fields are ignored, as DSSE readers do",
        "required": ["payloadType", "payload", "signatures"],
        "properties": {
            "payloadType": {"type": "string"},
            "payload": {"type": "string", "contentEncoding": "base64"},
            "signatures": signatures
        }
    })
}

/// Gives a parameter the schema its parser accepts, by name (the names are shared across
/// routes and mean the same everywhere).
pub(super) fn refine_parameter(path: &str, parameter: &mut Value) {
    let name = parameter["name"].as_str().unwrap_or_default().to_owned();
    let schema = match name.as_str() {
        "group_id" | "agent_id" | "work_item_id" | "mission_id" | "package_id" | "lease_id"
        | "token_id" | "upload_id" | "missionId" | "workItemId" | "producer" | "criterion"
        | "group" | "command_id" | "agentId" | "hold_id" => id(),
        "digest" if path.contains("/snapshots/blobs/") => blake3(),
        // The transparency log's tree sizes and leaves (issue #45).
        "from" | "to" | "size" if path.contains("/tlog/") => counter("a tree size (leaves)"),
        "sequence" if path.contains("/tlog/") => {
            counter("the Event's sequence (its leaf is sequence − 1)")
        }
        "path" if path.contains("/tlog/tile/") => json!({"type": "string",
            "pattern": r"^(entries|[0-9]{1,2})/(x[0-9]{3}/)*[0-9]{3}(\.p/[0-9]{1,3})?$",
            "description": "the rest of the C2SP tile path: `0/x001/234`, `entries/000.p/7`"}),
        "digest" | "artifact" | "from" | "to" => digest(),
        "evidence_id" => blake3(),
        "keyid" => json!({"type": "string", "pattern": "^ed25519:[0-9a-f]{64}$"}),
        "version" => {
            json!({"type": "integer", "format": "int64", "minimum": 0, "maximum": i64::MAX})
        }
        // Holds are paged by their id (issue #46).
        "after" if path.ends_with("/holds") => id(),
        "after" | "Last-Event-ID" => counter("the sequence (or cursor) to continue after"),
        "cursor" => counter("`cursor` of the previous, truncated answer"),
        "asOf" => counter(
            "the graph as the Group's log stood after this sequence (the admin names `group`)",
        ),
        "limit" => json!({"type": "integer", "format": "int64", "minimum": 0, "maximum": u32::MAX,
            "description": "at most this many items (a u32; above the route's page size is clamped to it)"}),
        "depth" | "maxDepth" => counter("hops to follow (clamped)"),
        "direction" => string_enum(&["ancestors", "descendants", "both"]),
        // The one proof format of a verified range (README, "Verified ranges").
        "proof" => string_enum(&["bao"]),
        // A signed in-toto statement describes one subject: an artifact or a Context Package.
        "format" if path.starts_with("/v1/artifacts/") || path.starts_with("/v1/context/") => {
            string_enum(&["json", "dot", "mermaid", "prov-json", "intoto"])
        }
        "format" => string_enum(&["json", "dot", "mermaid", "prov-json"]),
        "edges" => json!({"type": "string", "pattern": format!("^{EDGE}(,{EDGE})*$"),
            "description": "comma-separated edge types"}),
        "outcome" | "result" => string_enum(&["pass", "fail", "inconclusive"]),
        "method" => string_enum(&[
            "integrity_check",
            "schema_validation",
            "automated_test",
            "business_rule",
            "reviewer_agent",
            "human",
        ]),
        "all" => json!({"type": "boolean"}),
        "Content-Range" => json!({"type": "string",
            "pattern": "^(bytes )?[0-9]{1,20}-[0-9]{1,20}(/([0-9]{1,20}|\\*))?$"}),
        "mediaType" => json!({"type": "string"}),
        _ => return,
    };
    parameter["schema"] = schema;
}

fn json_body(schema: Value) -> Value {
    json!({"required": true, "content": {"application/json": {"schema": schema}}})
}

/// A JSON object body: the handlers refuse unknown fields.
fn object(required: &[&str], properties: Value) -> Value {
    json!({"type": "object", "required": required, "properties": properties,
        "additionalProperties": false})
}

/// Base64 of a 32-byte Ed25519 public key (whether it is a curve point, no schema can say).
fn public_key() -> Value {
    json!({"type": "string", "pattern": "^[A-Za-z0-9+/]{43}=$"})
}

/// The request body of `(method, path)`, when it has one.
pub(super) fn request_body(method: &str, path: &str) -> Option<Value> {
    let roles = string_enum(&["worker", "coordinator", "reviewer", "auditor", "approver"]);
    let schema = match (method, path) {
        // No body is the empty blob, which is a blob like any other.
        ("put", "/v1/blobs/{digest}")
        | ("post", "/v1/blobs")
        | ("patch", "/v1/uploads/{upload_id}")
        | ("put", "/v1/uploads/{upload_id}") => {
            return Some(
                json!({"required": false, "content": {"application/octet-stream":
                {"schema": {"type": "string", "format": "binary"}}}}),
            );
        }
        // A publication with its bytes: the manifest part first, the content part second.
        ("put", "/v1/artifacts/{digest}") => {
            return Some(
                json!({"required": true, "content": {"multipart/form-data": {
                "schema": {"type": "object", "required": ["manifest", "content"],
                    "properties": {"manifest": {"$ref": "#/components/schemas/Envelope"},
                        "content": {"type": "string", "format": "binary"}},
                    "additionalProperties": false},
                "encoding": {"manifest": {"contentType": "application/json"},
                    "content": {"contentType": "application/octet-stream"}}}}}),
            );
        }
        ("post", "/v1/sessions")
        | ("post", "/v1/session/renew")
        | ("post", "/v1/artifacts")
        | ("post", "/v1/evidence")
        | ("post", "/v1/groups/{group_id}/commands")
        | ("post", "/v1/groups/{group_id}/context")
        | ("put", "/v1/agents/{agent_id}/card") => schema_ref("Envelope"),
        // Issue #47, SCH-11: a member's non-authoritative capacity hint.
        // DIS-1: each schedule names a WorkItem of this Group the caller owns (DIS-2).
        ("put", "/v1/groups/{group_id}/presence") => {
            let instant = json!({"type": "string", "format": "date-time"});
            let schedule = object(
                &[
                    "workItemId",
                    "startFrom",
                    "startTo",
                    "completionAt",
                    "confidence",
                    "computeSeconds",
                ],
                json!({"workItemId": id(), "startFrom": instant, "startTo": instant,
                    "completionAt": instant, "confidence": {"type": "number", "minimum": 0, "maximum": 1},
                    "computeSeconds": {"type": "integer", "minimum": 0}}),
            );
            object(
                &["freeSlots", "capacityState"],
                json!({"freeSlots": {"type": "integer", "minimum": 0, "maximum": 256},
                    "capacityState": string_enum(&["available", "busy", "saturated", "offline"]),
                    "schedules": {"type": "array", "maxItems": 256, "items": schedule}}),
            )
        }
        ("post", "/v1/admin/agents") => object(
            &["agentId", "publicKey"],
            json!({"agentId": id(), "publicKey": public_key(),
                "agentCardVersion": {"type": "string"}}),
        ),
        ("put", "/v1/admin/groups/{group_id}/members/{agent_id}") => {
            let mut membership = object(
                &["roles"],
                json!({"roles": {"type": "array", "minItems": 1, "items": roles},
                    "missions": {"type": "array", "minItems": 1, "items": id()}}),
            );
            // CTX-5: coordinators and auditors cover the whole Group, never named Missions.
            membership["anyOf"] = json!([
                {"not": {"required": ["missions"]}},
                {"properties": {"roles": {"items": string_enum(&["worker", "reviewer", "approver"])}}}
            ]);
            membership
        }
        // SCH-6, SCH-7: the Group's priority ceiling.
        ("put", "/v1/admin/groups/{group_id}/policy") => object(
            &["missionPriorityCeiling"],
            json!({"missionPriorityCeiling": string_enum(&["low", "normal", "high", "critical"])}),
        ),
        // Issue #46: durations as `weft_api::lifecycle::parse_duration` reads them.
        ("put", "/v1/admin/groups/{group_id}/retention") => {
            let duration = json!({"type": "string", "pattern": "^[0-9]{1,9}[smhd]$"});
            let mut policy = object(
                &[],
                json!({"missionId": id(), "keepBytes": duration, "keepRecords": duration,
                    "classification": string_enum(&["public", "internal", "confidential", "restricted"])}),
            );
            policy["anyOf"] = json!([{"required": ["keepBytes"]}, {"required": ["keepRecords"]}]);
            policy["not"] = json!({"required": ["missionId", "classification"]});
            policy
        }
        ("post", "/v1/admin/holds") | ("post", "/v1/groups/{group_id}/holds") => {
            let mut hold = object(
                &["reason"],
                json!({"artifact": blake3(), "workItemId": id(), "missionId": id(),
                    "reason": {"type": "string", "minLength": 1, "maxLength": 1024,
                        "pattern": "^[^\\u0000-\\u001f\\u007f-\\u009f]*[^\\s\\u0000-\\u001f\\u007f-\\u009f][^\\u0000-\\u001f\\u007f-\\u009f]*$"}}),
            );
            hold["oneOf"] = json!([{"required": ["artifact"]}, {"required": ["workItemId"]},
                {"required": ["missionId"]}]);
            hold
        }
        ("put", "/v1/admin/groups/{group_id}/quota") => {
            let limit = json!({"type": "integer", "minimum": 0, "maximum": i64::MAX});
            object(&[], json!({"bytes": limit, "artifacts": limit}))
        }
        ("post", "/v1/admin/agents/{agent_id}/keys") => {
            object(&["publicKey"], json!({"publicKey": public_key()}))
        }
        ("post", "/v1/admin/schemas") => object(
            &["uri", "artifact"],
            json!({"uri": {"type": "string", "maxLength": 2048, "pattern": "^(https?://|urn:)"}, "artifact": blake3()}),
        ),
        ("post", "/v1/artifacts/{digest}/reuse") => object(
            &["classification", "approval"],
            json!({"classification": string_enum(&["public", "internal", "confidential", "restricted"]),
                "approval": blake3()}),
        ),
        ("post", "/v1/groups/{group_id}/cursors") => object(
            &["cursors"],
            json!({"cursors": {"type": "array", "minItems": 1, "maxItems": 64, "items": object(&["groupId", "sequence"],
                json!({"groupId": id(), "sequence": counter("the last Event handled")}))}}),
        ),
        ("post", "/v1/workitems/{work_item_id}/review") => object(
            &["criterion", "artifacts", "checks"],
            json!({"criterion": id(), "artifacts": {"type": "array", "minItems": 1, "maxItems": 256, "items": blake3()},
                "checks": {"type": "array", "minItems": 1, "items": string_enum(&["integrity", "schema"])},
                "missionId": id()}),
        ),
        ("post", "/v1/groups/{group_id}/commands/batch") => object(
            &["commands"],
            json!({"commands": {"type": "array", "minItems": 1, "maxItems": 256, "items": schema_ref("EnvelopeShape")}}),
        ),
        ("post", "/v1/context/{package_id}/forward") => object(
            &["toGroupId"],
            json!({"toGroupId": id(), "version": counter("the version to forward (default: the latest)")}),
        ),
        ("post", "/v1/leases/{lease_id}/tokens") => object(
            &["scope", "ttlSeconds"],
            json!({"scope": {"type": "array", "minItems": 1,
                    "items": string_enum(&["blob:write", "artifact:publish", "evidence:record"])},
                "ttlSeconds": {"type": "integer", "minimum": 1, "maximum": u64::MAX},
                "replaces": id()}),
        ),
        _ => return None,
    };
    Some(json_body(schema))
}

/// The content of a success answer (`None`: no body).
pub(super) fn success_content(method: &str, path: &str, status: u16) -> Option<Value> {
    if method == "head" || matches!(status, 204 | 304) {
        return None;
    }
    let text = |media: &str| json!({media: {"schema": {"type": "string"}}});
    let object = json!({"application/json": {"schema": answer(method, path)}});
    Some(match path {
        "/healthz" => text("text/plain"),
        // A C2SP signed note (issue #45).
        "/v1/groups/{group_id}/tlog/checkpoint" => text("text/plain"),
        "/v1/groups/{group_id}/tlog/tile/{path}" => {
            json!({"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}})
        }
        "/metrics" => text("text/plain"),
        // OpenAPI 3.1 has a `text/event-stream` schema describe each event, not the stream
        // (issue #40: `{"type": "string"}` described neither).
        "/v1/groups/{group_id}/events/stream" => {
            json!({"text/event-stream": {"schema": sse_frame()}})
        }
        // The bytes, under the media type their manifests declare, or a range's proof. They
        // are whatever was published: a JSON artifact's body is a JSON value of any type
        // (issue #40: a `string` schema contradicted every JSON artifact).
        "/v1/artifacts/{digest}/content" => json!({
            "*/*": {"schema": {"description": "the artifact's bytes, served as published under the media type its manifest declares"}},
            "application/vnd.weft.bao": {"schema": {"type": "string", "format": "binary",
                "description": "bao-tree 0.17 range encoding (encode_ranges_validated), chunk groups of 16 KiB (chunk log 4), of the 1 KiB chunks covering the range; verify with decode_ranges against the digest and the size in Content-Range"}}
        }),
        path if path.ends_with("/provenance") || path == "/v1/provenance/impact" => json!({
            "application/json": {"schema": {"type": "object"}},
            "text/vnd.graphviz": {"schema": {"type": "string"}},
            "text/plain": {"schema": {"type": "string"}}
        }),
        _ => object,
    })
}

/// One frame of a Group's event stream, as an SSE parser reads it: `id` is the Event's
/// sequence, `event` its type (`withheld` for a placeholder, CTX-5), `data` the Event as one
/// line of JSON; a stream that ends because its session did sends `event: error` with the
/// error code as `data`.
fn sse_frame() -> Value {
    json!({
        "type": "object",
        "required": ["event", "data"],
        "properties": {
            "id": {"type": "string", "pattern": "^[0-9]+$"},
            "event": {"type": "string", "minLength": 1},
            "data": {"type": "string", "contentMediaType": "application/json"},
            "retry": non_negative()
        }
    })
}

/// The JSON answer of `(method, path)`: the fields it always carries, where they were checked
/// against the server; otherwise any object.
fn answer(method: &str, path: &str) -> Value {
    let list = |field: &str| json!({"type": "object", "required": [field], "properties": {field: {"type": "array"}}});
    match (method, path) {
        ("get", "/v1/session") | ("post", "/v1/session/renew") => json!({
            "type": "object",
            "required": ["agentId", "groupId", "roles", "sessionEpoch", "membershipEpoch", "expiresAt"],
            "properties": {
                "agentId": id(), "groupId": id(), "roles": {"type": "array", "items": {"type": "string"}},
                "missions": {"type": "array", "items": id()},
                "sessionEpoch": {"type": "integer", "minimum": 0},
                "membershipEpoch": {"type": "integer", "minimum": 0},
                "expiresAt": {"type": "string"}
            }
        }),
        ("post", "/v1/blobs") | ("put", "/v1/blobs/{digest}") => json!({
            "type": "object",
            "required": ["blake3", "sha256", "size"],
            "properties": {
                "blake3": blake3(),
                "sha256": {"type": "string", "pattern": "^sha256:[0-9a-f]{64}$"},
                "size": {"type": "integer", "minimum": 0}
            }
        }),
        (
            "get",
            "/v1/groups/{group_id}/tlog/proof/inclusion"
            | "/v1/groups/{group_id}/tlog/proof/consistency",
        ) => json!({
            "type": "object",
            "required": ["treeSize", "hashes"],
            "properties": {
                "treeSize": {"type": "integer", "minimum": 0},
                "leafIndex": {"type": "integer", "minimum": 0},
                "hashes": {"type": "array", "items": {"type": "string", "contentEncoding": "base64"}}
            }
        }),
        ("get", "/v1/authority/keys") => json!({
            "type": "object",
            "required": ["keys"],
            "properties": {"keys": {"type": "array", "items": {
                "type": "object",
                "required": ["keyid", "publicKey"],
                "properties": {"keyid": {"type": "string"}, "publicKey": {"type": "string"}}
            }}}
        }),
        ("get", "/v1/artifacts")
        | ("get", "/v1/evidence")
        | ("get", "/v1/artifacts/{digest}/evidence") => list("items"),
        ("get", "/v1/groups/{group_id}/events") => list("events"),
        ("get", "/v1/groups/{group_id}/cursors") | ("post", "/v1/groups/{group_id}/cursors") => {
            list("cursors")
        }
        ("get", "/v1/groups/{group_id}/snapshots") => list("snapshots"),
        ("get", "/v1/groups/{group_id}/checkpoint") => json!({
            "type": "object",
            "required": ["envelope", "checkpoint"],
            "properties": {"envelope": schema_ref("EnvelopeShape"), "checkpoint": {
                "type": "object",
                "required": ["groupId", "sequence", "hash", "createdAt"],
                "properties": {"groupId": id(), "sequence": non_negative(), "hash": {"type": "string"}, "createdAt": {"type": "string"}}
            }}
        }),
        // issue #40: the main success bodies, no longer any object (`weft_api::views`,
        // `weft_api::session`); `tests/standards.rs` checks them against the server.
        ("post", "/v1/sessions") => json!({
            "type": "object",
            "required": ["token", "sessionEpoch", "membershipEpoch", "expiresAt"],
            "properties": {"token": {"type": "string"}, "sessionEpoch": non_negative(),
                "membershipEpoch": non_negative(), "expiresAt": {"type": "string"}}
        }),
        ("post", "/v1/artifacts") | ("put", "/v1/artifacts/{digest}") => json!({
            "type": "object",
            "required": ["artifact", "manifestId", "sequence"],
            "properties": {"artifact": blake3(), "manifestId": blake3(), "sequence": non_negative()}
        }),
        ("get", "/v1/artifacts/{digest}") => json!({
            "type": "object",
            "required": ["digests", "size", "quarantined", "manifests"],
            "properties": {
                "digests": {"type": "object", "required": ["blake3", "sha256"],
                    "properties": {"blake3": blake3(), "sha256": {"type": "string", "pattern": "^sha256:[0-9a-f]{64}$"}}},
                "size": non_negative(), "quarantined": {"type": "boolean"},
                "manifests": {"type": "array", "items": {"type": "object"}},
                "reuse": {"type": "object"}
            }
        }),
        ("get", "/v1/evidence/{evidence_id}") => json!({
            "type": "object",
            "required": ["evidenceId", "groupId", "sequence", "envelope", "evidence"],
            "properties": {"evidenceId": blake3(), "groupId": id(), "sequence": non_negative(),
                "envelope": schema_ref("EnvelopeShape"), "evidence": {"type": "object"}}
        }),
        _ => json!({"type": "object"}),
    }
}
