//! The refinements of the OpenAPI document `GET /v1/openapi.json` serves: `meta` builds
//! utoipa's paths (`meta::ApiDoc`) and hands them to [`refined`], so that tools which trust
//! the document (Schemathesis, generated clients) are told the truth about every operation.
//!
//! The refinements apply rules that hold for whole classes of routes, one place each:
//! security (bearer on every route but the public ones), the error statuses every route of a
//! stack can answer (all as `application/problem+json` with the `Problem` schema), success
//! media types, parameter schemas by name (ids, digests, integers and enums as the parsers in
//! `params.rs` accept them), request bodies (`schemas.rs`), and the links from an answer that
//! carries an id to the operations that take it (`links.rs`). utoipa's per-handler
//! annotations keep what is particular to one route: its path, parameters, and the statuses
//! and descriptions only it answers.
//!
//! This module owns no behavior and names no handler: it describes what the handlers do, and
//! `openapi_check` (tests) holds the two together.

mod links;
mod schemas;

use serde_json::{Map, Value, json};

/// Operations anyone may call: liveness, this description, the authority's public keys, and
/// opening a session (its body is signed by the Agent's key, which is the credential).
pub(crate) const PUBLIC: [(&str, &str); 4] = [
    ("get", "/healthz"),
    ("get", "/v1/openapi.json"),
    ("get", "/v1/authority/keys"),
    ("post", "/v1/sessions"),
];

/// Routes whose bodies stream and carry no request timeout (`blob_routes` in `mod.rs`).
const STREAMING: [&str; 8] = [
    "/v1/artifacts/{digest}",
    "/v1/blobs",
    "/v1/blobs/{digest}",
    "/v1/uploads",
    "/v1/uploads/{upload_id}",
    "/v1/artifacts/{digest}/content",
    "/v1/groups/{group_id}/events/stream",
    "/v1/groups/{group_id}/snapshots/blobs/{digest}",
];

/// `document` (utoipa's, as JSON) with every refinement below applied.
pub(crate) fn refined(mut document: Value) -> Value {
    document["openapi"] = json!("3.1.0");
    let components = document
        .as_object_mut()
        .map(|root| root.entry("components").or_insert_with(|| json!({})));
    if let Some(Value::Object(components)) = components {
        let schemas = components.entry("schemas").or_insert_with(|| json!({}));
        if let Value::Object(schemas) = schemas {
            schemas.extend(schemas::components());
        }
    }
    if let Some(Value::Object(paths)) = document.get_mut("paths") {
        for (path, item) in paths.iter_mut() {
            let Value::Object(item) = item else { continue };
            for (method, operation) in item.iter_mut() {
                if let Value::Object(operation) = operation {
                    refine(method, path, operation);
                }
            }
        }
    }
    document
}

/// Whether `(method, path)` is callable without a token.
pub(crate) fn is_public(method: &str, path: &str) -> bool {
    PUBLIC.contains(&(method, path))
}

fn refine(method: &str, path: &str, operation: &mut Map<String, Value>) {
    let public = is_public(method, path);
    if !public {
        operation.insert("security".into(), json!([{"bearer": []}]));
    }
    if let Some(Value::Array(parameters)) = operation.get_mut("parameters") {
        for parameter in parameters.iter_mut() {
            schemas::refine_parameter(path, parameter);
        }
    }
    if let Some(body) = schemas::request_body(method, path) {
        operation.insert("requestBody".into(), body);
    }
    let has_input = operation.contains_key("parameters") || operation.contains_key("requestBody");
    let has_body = operation.contains_key("requestBody");
    let responses = operation.entry("responses").or_insert_with(|| json!({}));
    let Value::Object(responses) = responses else {
        return;
    };
    let mut errors: Vec<(u16, &str)> = vec![(500, "internal, integrity_failure")];
    if !public || path == "/v1/sessions" {
        errors.push((
            503,
            "shutting_down, overloaded, storage_unavailable: a disk error, nothing kept (Retry-After), blob_store_unavailable: the S3 blob store did not answer, nothing kept (Retry-After)",
        ));
    }
    if !public && method != "get" && method != "head" {
        errors.push((507, "insufficient_storage: the disk is full, nothing kept"));
    }
    if has_input || !public {
        errors.push((
            400,
            "bad_request, invalid_id, invalid_digest: a malformed parameter",
        ));
    }
    if !public {
        errors.push((
            401,
            "unauthorized, stale_session, stale_membership (WWW-Authenticate)",
        ));
        errors.push((403, "forbidden: the token may not make this call"));
    }
    if has_input {
        errors.push((404, "not_found: nothing of that name you may read"));
    }
    if has_body && !STREAMING.contains(&path) {
        errors.push((408, "timeout: the request did not complete in time"));
        errors.push((413, "body_too_large"));
        errors.push((415, "unsupported_media_type: send application/json"));
        errors.push((422, "idempotency_key_reused"));
    }
    for (status, description) in errors {
        responses
            .entry(status.to_string())
            .or_insert_with(|| json!({"description": description}));
    }
    for (status, response) in responses.iter_mut() {
        let Value::Object(response) = response else {
            continue;
        };
        let headers = response_headers(method, path, status);
        if !headers.is_empty() {
            response.insert("headers".into(), Value::Object(headers));
        }
        let links = links::links(method, path);
        if status.starts_with('2') && !links.is_empty() {
            response.insert("links".into(), Value::Object(links));
        }
        let content = match status.parse::<u16>() {
            Ok(400..) => Some(json!({
                "application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}
            })),
            Ok(code) => schemas::success_content(method, path, code),
            Err(_) => None,
        };
        match content {
            Some(content) => {
                response.insert("content".into(), content);
            }
            None => {
                response.remove("content");
            }
        }
    }
}

/// The response headers an answer of `(method, path)` with `status` carries (issue #40: they
/// were not declared), each with its schema.
fn response_headers(method: &str, path: &str, status: &str) -> Map<String, Value> {
    let string =
        |description: &str| json!({"description": description, "schema": {"type": "string"}});
    let integer = |description: &str| json!({"description": description, "schema": {"type": "integer", "minimum": 0}});
    let mut headers = Map::new();
    let mut add = |name: &str, header: Value| {
        headers.insert(name.to_owned(), header);
    };
    if matches!(status, "429" | "503" | "507") {
        add("Retry-After", integer("seconds to wait before retrying"));
    }
    if status == "401" {
        add("WWW-Authenticate", string("Bearer (RFC 6750)"));
    }
    let etag = || string("the representation's strong entity tag");
    match (method, path, status) {
        ("get", "/v1/artifacts/{digest}/content", "200" | "206" | "304") => {
            add("ETag", etag());
            if status != "304" {
                add(
                    "Repr-Digest",
                    string("sha-256 of the whole artifact (RFC 9530); not on a proof"),
                );
                add(
                    "Weft-Proof-Range",
                    string("bytes a-b/SIZE: the content range a proof covers (proofs only)"),
                );
            }
            if status == "206" {
                add("Content-Range", string("bytes a-b/SIZE"));
            }
        }
        ("get", "/v1/artifacts/{digest}/content", "416") => {
            add("Content-Range", string("bytes */SIZE"));
        }
        ("head", "/v1/blobs/{digest}", "200")
        | ("get" | "head", "/v1/groups/{group_id}/snapshots/blobs/{digest}", "200") => {
            add("ETag", etag())
        }
        ("post", "/v1/blobs", "200" | "201") | ("put", "/v1/blobs/{digest}", "200" | "201") => {
            add("Location", string("/v1/blobs/{digest}"));
        }
        ("post", "/v1/uploads", "202") => {
            add("Location", string("/v1/uploads/{upload_id}"));
            add("Upload-Offset", integer("the durable offset"));
        }
        ("patch", "/v1/uploads/{upload_id}", "202" | "416")
        | ("head", "/v1/uploads/{upload_id}", "204") => {
            add("Upload-Offset", integer("the durable offset"));
        }
        _ => {}
    }
    headers
}
