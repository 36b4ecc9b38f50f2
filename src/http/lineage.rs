//! Provenance for auditors: bounded lineage queries, shortest derivation paths and impact,
//! as JSON, Graphviz DOT or Mermaid (DESIGN §6, ART-4, CTX-5).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::time::Duration;

use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use weft_api::{Digest, ErrorCode};
use weft_storage::{Direction, Lineage, LineageQuery};

use super::answer::json;
use super::auth::Caller;
use super::error::{HttpError, HttpResult};
use super::params::{
    RawPath, RawQuery, known_params, path_digest, path_id, query_limit, query_u64,
};
use super::state::AppState;

/// Time a single lineage query may take before it answers `truncated`.
const BUDGET: Duration = Duration::from_millis(250);
const MAX_LIMIT: u64 = 10_000;

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Format {
    Json,
    Dot,
    Mermaid,
    ProvJson,
    InToto,
}

pub(super) fn format_of(query: &HashMap<String, String>) -> Result<Format, HttpError> {
    match query.get("format").map(String::as_str) {
        None | Some("json") => Ok(Format::Json),
        Some("dot") => Ok(Format::Dot),
        Some("mermaid") => Ok(Format::Mermaid),
        Some("prov-json") => Ok(Format::ProvJson),
        Some("intoto") => Ok(Format::InToto),
        Some(other) => Err(HttpError::new(
            ErrorCode::BadRequest,
            format!("format {other:?} is not json, dot, mermaid, prov-json or intoto"),
        )),
    }
}

fn short(id: &str) -> String {
    match id.split_once(':') {
        Some((kind, rest)) if rest.len() > 12 => format!("{kind}:{}…", &rest[..12]),
        _ => id.to_owned(),
    }
}

/// `text` as a DOT quoted string: `\` and `"` escaped, line breaks as DOT's `\n`, other
/// control characters dropped. Without this a media type ending in `\` escapes the closing
/// quote and `dot` refuses the whole graph.
pub(crate) fn dot_quoted(text: &str) -> String {
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('"');
    for character in text.chars() {
        match character {
            '\\' => quoted.push_str("\\\\"),
            '"' => quoted.push_str("\\\""),
            '\n' => quoted.push_str("\\n"),
            control if control.is_control() => {}
            other => quoted.push(other),
        }
    }
    quoted.push('"');
    quoted
}

/// Graphviz DOT of a lineage answer (every id and label a quoted, escaped string; labels
/// shortened).
pub(crate) fn to_dot(lineage: &Lineage) -> String {
    let mut out = String::from(
        "digraph lineage {\n  rankdir=BT;\n  node [shape=box, fontname=\"monospace\"];\n",
    );
    for artifact in &lineage.artifacts {
        let media = artifact
            .manifests
            .first()
            .map_or("", |m| m.media_type.as_str());
        let id = artifact.id.to_string();
        let _ = writeln!(
            out,
            "  {} [label={}];",
            dot_quoted(&id),
            dot_quoted(&format!("{}\n{media}", short(&id)))
        );
    }
    for edge in &lineage.edges {
        let shape = |node: &str| {
            if node.starts_with("workItem:") || node.starts_with("mission:") {
                "ellipse"
            } else if node.starts_with("agent:") {
                "house"
            } else {
                "box"
            }
        };
        let (from, to) = (edge.from.to_string(), edge.to.to_string());
        for node in [&from, &to] {
            if !node.starts_with("blake3:") {
                let _ = writeln!(out, "  {} [shape={}];", dot_quoted(node), shape(node));
            }
        }
        let _ = writeln!(
            out,
            "  {} -> {} [label={}];",
            dot_quoted(&from),
            dot_quoted(&to),
            dot_quoted(edge.kind)
        );
    }
    out.push_str("}\n");
    out
}

/// Mermaid flowchart of a lineage answer (node ids are generated; labels carry the names).
pub(crate) fn to_mermaid(lineage: &Lineage) -> String {
    let mut ids: HashMap<String, String> = HashMap::new();
    let mut out = String::from("graph BT\n");
    let mut id_of = |name: &str, out: &mut String| -> String {
        if let Some(id) = ids.get(name) {
            return id.clone();
        }
        let id = format!("n{}", ids.len());
        let label = short(name).replace('"', "'");
        let _ = if name.starts_with("blake3:") {
            writeln!(out, "  {id}[\"{label}\"]")
        } else {
            writeln!(out, "  {id}([\"{label}\"])")
        };
        ids.insert(name.to_owned(), id.clone());
        id
    };
    for artifact in &lineage.artifacts {
        id_of(&artifact.id.to_string(), &mut out);
    }
    for edge in &lineage.edges {
        let from = id_of(&edge.from.to_string(), &mut out);
        let to = id_of(&edge.to.to_string(), &mut out);
        let _ = writeln!(out, "  {from} -->|{}| {to}", edge.kind);
    }
    out
}

pub(super) fn render(lineage: &Lineage, format: Format) -> Response {
    match format {
        Format::Json => json(StatusCode::OK, lineage),
        Format::Dot => (
            [(header::CONTENT_TYPE, "text/vnd.graphviz; charset=utf-8")],
            to_dot(lineage),
        )
            .into_response(),
        Format::Mermaid => (
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            to_mermaid(lineage),
        )
            .into_response(),
        Format::ProvJson => json(StatusCode::OK, &super::exports::prov_json(lineage)),
        Format::InToto => HttpError::new(
            ErrorCode::BadRequest,
            "format=intoto describes one artifact: use /v1/artifacts/{digest}/provenance",
        )
        .into_response(),
    }
}

/// The query parameters `provenance` accepts (the OpenAPI check compares them with the document).
pub(super) const PROVENANCE_QUERY: &[&str] = &[
    "direction",
    "depth",
    "limit",
    "cursor",
    "format",
    "edges",
    "asOf",
    "group",
    "missionId",
];

/// Ancestors and/or descendants of an artifact: nodes (artifacts with their manifests' key
/// fields, WorkItems, Missions, Agents), typed edges, the depth each artifact was reached at,
/// `withheld` (nodes of Groups you cannot read, counted, never named) and `truncated` with a
/// `cursor` when the limit or the time budget cut the answer.
#[utoipa::path(get, operation_id = "artifact_provenance", path = "/v1/artifacts/{digest}/provenance", params(("digest" = String, Path), ("direction" = Option<String>, Query, description = "ancestors (default), descendants or both"),
    ("depth" = Option<u32>, Query, description = "unbounded by default"), ("limit" = Option<u32>, Query), ("cursor" = Option<u64>, Query), ("format" = Option<String>, Query, description = "json, dot, mermaid, prov-json or intoto (a signed in-toto statement)"),
    ("edges" = Option<String>, Query, description = "comma-separated: derivedFrom, generatedBy, partOf, attributedTo"), ("asOf" = Option<u64>, Query), ("group" = Option<String>, Query, description = "the Group whose log asOf counts (needed with the admin token)"),
    ("missionId" = Option<String>, Query, description = "follow this Mission's manifests; needed for ancestors of bytes published in several Missions")),
    responses((status = 200, description = "{root, artifacts, workItems, missions, agents, edges, withheld, truncated, cursor}"), (status = 400, description = "bad_request: the bytes are published in several Missions and none is named"), (status = 404, description = "not_found")))]
pub(crate) async fn provenance(
    State(state): State<AppState>,
    caller: Caller,
    digest: RawPath,
    query: RawQuery,
) -> HttpResult<Response> {
    let digest = path_digest(digest)?;
    let query = known_params(query, PROVENANCE_QUERY)?;
    let lineage_query = lineage_query(&query, direction_of(&query)?, &caller)?;
    let format = format_of(&query)?;
    if format == Format::InToto {
        let statement = super::exports::intoto_for(&state.store, digest, &caller.reader()).await?;
        let payload = serde_json::to_vec(&statement)
            .map_err(|e| HttpError::new(ErrorCode::Internal, e.to_string()))?;
        let envelope = state
            .store
            .sign_as_authority(super::exports::INTOTO_PAYLOAD_TYPE, &payload);
        return Ok(json(StatusCode::OK, &envelope));
    }
    let lineage = state
        .store
        .lineage()
        .lineage(digest, lineage_query, &caller.reader())
        .await?;
    Ok(render(&lineage, format))
}

/// `direction=ancestors` (the default), `descendants` or `both`.
pub(super) fn direction_of(query: &HashMap<String, String>) -> Result<Direction, HttpError> {
    match query.get("direction").map(String::as_str) {
        None | Some("ancestors") => Ok(Direction::Ancestors),
        Some("descendants") => Ok(Direction::Descendants),
        Some("both") => Ok(Direction::Both),
        Some(other) => Err(HttpError::new(
            ErrorCode::BadRequest,
            format!("direction {other:?} is not ancestors, descendants or both"),
        )),
    }
}

/// The bounds and filters shared by the lineage routes.
pub(super) fn lineage_query(
    query: &HashMap<String, String>,
    direction: Direction,
    caller: &Caller,
) -> Result<LineageQuery, HttpError> {
    Ok(LineageQuery {
        direction,
        depth: query_u64(query, "depth")?.map(|d| d.min(u64::from(u32::MAX)) as u32),
        limit: u64::from(query_limit(query)?.unwrap_or(1000)).clamp(1, MAX_LIMIT) as usize,
        skip: query_u64(query, "cursor")?.unwrap_or(0) as usize,
        budget: BUDGET,
        edges: edges_of(query)?,
        as_of: as_of_of(query, caller)?,
        mission: query
            .get("missionId")
            .map(|mission| weft_api::Id::parse("missionId", mission).map(|id| id.to_string()))
            .transpose()?,
    })
}

/// `asOf=SEQ[&group=G]`: the graph as Group G's log stood after sequence SEQ. G defaults to
/// the caller's session Group; the admin names it.
fn as_of_of(
    query: &HashMap<String, String>,
    caller: &Caller,
) -> Result<Option<(String, u64)>, HttpError> {
    let Some(sequence) = query_u64(query, "asOf")? else {
        return Ok(None);
    };
    let group = match (query.get("group"), caller) {
        (Some(group), _) => weft_api::Id::parse("group", group)?.to_string(),
        (None, Caller::Agent(session)) => session.group_id.to_string(),
        (None, Caller::Admin) => {
            return Err(HttpError::new(
                ErrorCode::BadRequest,
                "asOf needs group=<groupId> with the admin token",
            ));
        }
    };
    Ok(Some((group, sequence)))
}

/// `edges=derivedFrom,generatedBy,…`: the edge types to include.
fn edges_of(query: &HashMap<String, String>) -> Result<Option<Vec<String>>, HttpError> {
    let Some(list) = query.get("edges") else {
        return Ok(None);
    };
    let kinds: Vec<String> = list.split(',').map(str::to_owned).collect();
    if let Some(unknown) = kinds
        .iter()
        .find(|k| !["derivedFrom", "generatedBy", "partOf", "attributedTo"].contains(&k.as_str()))
    {
        return Err(HttpError::new(
            ErrorCode::BadRequest,
            format!("unknown edge type {unknown:?}"),
        ));
    }
    Ok(Some(kinds))
}

/// The query parameters `scoped` accepts (the OpenAPI check compares them with the document).
pub(super) const SCOPED_QUERY: &[&str] = &[
    "depth", "limit", "cursor", "format", "edges", "asOf", "group",
];

/// Everything produced inside a WorkItem or Mission and what it was derived from.
async fn scoped(
    state: AppState,
    caller: Caller,
    scope: weft_storage::Scope,
    name: RawPath,
    query: RawQuery,
) -> HttpResult<Response> {
    let name = path_id("id", name)?;
    let query = known_params(query, SCOPED_QUERY)?;
    let lineage_query = lineage_query(&query, Direction::Ancestors, &caller)?;
    let format = format_of(&query)?;
    let lineage = state
        .store
        .lineage()
        .lineage_scope(scope, name, lineage_query, &caller.reader())
        .await?;
    Ok(render(&lineage, format))
}

/// The subgraph of everything a WorkItem produced and what it was derived from.
#[utoipa::path(get, operation_id = "work_item_provenance", path = "/v1/workitems/{work_item_id}/provenance", params(("work_item_id" = String, Path), ("depth" = Option<u32>, Query), ("limit" = Option<u32>, Query),
    ("cursor" = Option<u64>, Query), ("edges" = Option<String>, Query), ("format" = Option<String>, Query, description = "json, dot, mermaid or prov-json"),
    ("asOf" = Option<u64>, Query), ("group" = Option<String>, Query)),
    responses((status = 200, description = "lineage of the WorkItem's artifacts"), (status = 404, description = "not_found")))]
pub(crate) async fn work_item(
    State(state): State<AppState>,
    caller: Caller,
    id: RawPath,
    query: RawQuery,
) -> HttpResult<Response> {
    scoped(state, caller, weft_storage::Scope::WorkItem, id, query).await
}

/// The subgraph of everything a Mission produced and what it was derived from.
#[utoipa::path(get, operation_id = "mission_provenance", path = "/v1/missions/{mission_id}/provenance", params(("mission_id" = String, Path), ("depth" = Option<u32>, Query), ("limit" = Option<u32>, Query),
    ("cursor" = Option<u64>, Query), ("edges" = Option<String>, Query), ("format" = Option<String>, Query, description = "json, dot, mermaid or prov-json"),
    ("asOf" = Option<u64>, Query), ("group" = Option<String>, Query)),
    responses((status = 200, description = "lineage of the Mission's artifacts"), (status = 404, description = "not_found")))]
pub(crate) async fn mission(
    State(state): State<AppState>,
    caller: Caller,
    id: RawPath,
    query: RawQuery,
) -> HttpResult<Response> {
    scoped(state, caller, weft_storage::Scope::Mission, id, query).await
}

fn query_digest(query: &HashMap<String, String>, name: &str) -> Result<Digest, HttpError> {
    let text = query
        .get(name)
        .ok_or_else(|| HttpError::new(ErrorCode::BadRequest, format!("{name} is required")))?;
    Ok(Digest::parse(text)?)
}

/// The query parameters `path` accepts (the OpenAPI check compares them with the document).
pub(super) const PATH_QUERY: &[&str] = &["from", "to", "maxDepth"];

/// One shortest derivation path between two artifacts (either direction), or `404 no_path`.
#[utoipa::path(get, path = "/v1/provenance/path", params(("from" = String, Query), ("to" = String, Query), ("maxDepth" = Option<u32>, Query)),
    responses((status = 200, description = "{path: [blake3:…]}"), (status = 404, description = "no_path")))]
pub(crate) async fn path(
    State(state): State<AppState>,
    caller: Caller,
    query: RawQuery,
) -> HttpResult<Response> {
    let query = known_params(query, PATH_QUERY)?;
    let from = query_digest(&query, "from")?;
    let to = query_digest(&query, "to")?;
    let max_depth = query_u64(&query, "maxDepth")?.unwrap_or(64).min(10_000) as u32;
    let path = state
        .store
        .lineage()
        .lineage_path(from, to, max_depth, &caller.reader())
        .await?;
    Ok(json(
        StatusCode::OK,
        &serde_json::json!({ "path": path, "length": path.len().saturating_sub(1) }),
    ))
}

/// The query parameters `impact` accepts (the OpenAPI check compares them with the document).
pub(super) const IMPACT_QUERY: &[&str] = &["artifact", "format", "cursor"];

/// Every descendant of an artifact with the WorkItems and Missions that produced them: what
/// must be re-checked if this input was bad.
#[utoipa::path(get, path = "/v1/provenance/impact", params(("artifact" = String, Query), ("format" = Option<String>, Query), ("cursor" = Option<u64>, Query)),
    responses((status = 200, description = "the descendants' lineage: artifacts, workItems, missions, edges, withheld, truncated")))]
pub(crate) async fn impact(
    State(state): State<AppState>,
    caller: Caller,
    query: RawQuery,
) -> HttpResult<Response> {
    let query = known_params(query, IMPACT_QUERY)?;
    let artifact = query_digest(&query, "artifact")?;
    let lineage_query = LineageQuery {
        direction: Direction::Descendants,
        depth: None,
        limit: MAX_LIMIT as usize,
        skip: query_u64(&query, "cursor")?.unwrap_or(0) as usize,
        budget: BUDGET,
        edges: None,
        as_of: None,
        // Impact spans every Mission that made something from these bytes.
        mission: None,
    };
    let format = format_of(&query)?;
    let lineage = state
        .store
        .lineage()
        .lineage(artifact, lineage_query, &caller.reader())
        .await?;
    Ok(render(&lineage, format))
}
