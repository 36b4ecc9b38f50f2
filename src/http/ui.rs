//! The auditor's web page: one artifact with its digests, size, media type, classification and
//! verification status, its manifests, and its provenance drawn as an SVG graph whose nodes
//! link to their own pages. Served by the binary; loads no external assets (no scripts at all).
//!
//! Browsers do not send bearer headers on navigation, so `POST /ui/login` (form fields `token`,
//! `next`, DESIGN §8) stores a session token in an HttpOnly, SameSite=Strict cookie scoped to
//! `/ui` and goes on to `next`, a local `/ui/` path only. The token is authenticated first:
//! a token that is not a live session is refused, and so is the admin token, which never
//! leaves the operator's shell for a browser cookie (issue #10 finding 9b). `GET /ui/login`
//! only shows the form; a token in a URL (logged by proxies, kept in history) sets nothing.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::time::Duration;

use axum::extract::{Form, Query, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{Html, IntoResponse, Response};
use weft_api::{Digest, ErrorCode};
use weft_storage::{Direction, Lineage, LineageQuery, Reader};

use super::AppState;
use super::error::{HttpError, HttpResult};
use super::params::{RawPath, path_digest};

const COOKIE: &str = "weft_session";

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

/// `next` if it is a local page under `/ui/`, else `/ui/` (no open redirect).
fn local_next(next: Option<&String>) -> String {
    next.filter(|n| {
        n.starts_with("/ui/")
            && !n.contains("//")
            && !n.contains('\\')
            && n.bytes().all(|b| b.is_ascii_graphic())
    })
    .cloned()
    .unwrap_or_else(|| "/ui/".into())
}

/// `GET /ui/login?next=/ui/…`: the sign-in form, nothing else (a `token` here is ignored).
pub(crate) async fn login(Query(query): Query<HashMap<String, String>>) -> Response {
    let next = escape(&local_next(query.get("next")));
    let page = format!(
        r#"<!doctype html><html><head><meta charset="utf-8"><title>weft sign-in</title></head><body>
<h1>weft auditor console</h1>
<form method="post" action="/ui/login">
<label>Session token <input type="password" name="token" autocomplete="off" required></label>
<input type="hidden" name="next" value="{next}">
<button type="submit">Sign in</button>
</form></body></html>"#
    );
    let mut response = Html(page).into_response();
    response.headers_mut().insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'none'; form-action 'self'"),
    );
    response
}

/// `POST /ui/login` with form fields `token` and `next`: a live session token (never the
/// admin token) goes into the cookie, then a redirect to `next`.
pub(crate) async fn login_form(
    State(state): State<AppState>,
    form: Result<Form<HashMap<String, String>>, axum::extract::rejection::FormRejection>,
) -> Response {
    let refused = || {
        HttpError::new(
            ErrorCode::Unauthorized,
            "sign in with a live session token (weft login prints one); the admin token is not accepted",
        )
        .into_response()
    };
    let Ok(Form(fields)) = form else {
        return refused();
    };
    let token = fields.get("token").cloned().unwrap_or_default();
    if token.is_empty()
        || token.len() > 256
        || !token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b))
        || blake3::hash(token.as_bytes()) == state.admin_token_hash
        || state.store.authenticate(&token).await.is_err()
    {
        return refused();
    }
    // The page goes on to `next` itself (meta refresh) rather than by a 303: a navigation
    // started by this same-site page carries the SameSite=Strict cookie even when the form
    // was posted from elsewhere (a bookmark page, a test's local file), a redirect would not.
    let next = escape(&local_next(fields.get("next")));
    let page = format!(
        r#"<!doctype html><html><head><meta charset="utf-8"><meta http-equiv="refresh" content="0; url={next}"><title>signed in</title></head><body><p>Signed in. <a id="next" href="{next}">Continue</a></p></body></html>"#
    );
    let cookie = format!("{COOKIE}={token}; Path=/ui; HttpOnly; SameSite=Strict");
    let mut response = Html(page).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'none'"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        headers.insert(header::SET_COOKIE, value);
    }
    response
}

/// The caller behind the UI cookie.
async fn reader(state: &AppState, headers: &HeaderMap) -> Result<Reader, HttpError> {
    let token = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().strip_prefix(&format!("{COOKIE}=")))
        .next()
        .ok_or_else(|| HttpError::new(ErrorCode::Unauthorized, "sign in first at /ui/login"))?;
    // Only session tokens: the admin token is refused at sign-in and here alike.
    Ok(state.store.authenticate(token).await?.reader())
}

/// Lays the lineage out in columns by depth and draws it as SVG; every artifact node links
/// to its own page.
fn svg(lineage: &Lineage, direction: &str, depth: &str) -> String {
    const W: usize = 250;
    const H: usize = 46;
    const GAP_X: usize = 60;
    const GAP_Y: usize = 18;
    let mut columns: Vec<Vec<usize>> = Vec::new();
    for (index, artifact) in lineage.artifacts.iter().enumerate() {
        let column = artifact.depth as usize;
        if columns.len() <= column {
            columns.resize(column + 1, Vec::new());
        }
        columns[column].push(index);
    }
    let mut position: HashMap<String, (usize, usize)> = HashMap::new();
    for (column, nodes) in columns.iter().enumerate() {
        for (row, &index) in nodes.iter().enumerate() {
            position.insert(
                lineage.artifacts[index].id.to_string(),
                (20 + column * (W + GAP_X), 20 + row * (H + GAP_Y)),
            );
        }
    }
    let width = 40 + columns.len().max(1) * (W + GAP_X);
    let height = 40 + columns.iter().map(Vec::len).max().unwrap_or(1) * (H + GAP_Y);
    let mut out = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" id="lineage" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="monospace" font-size="11">"#
    );
    out.push_str(r##"<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="8" markerHeight="8" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker></defs>"##);
    for edge in lineage.edges.iter().filter(|e| e.kind == "derivedFrom") {
        if let (Some(&(x1, y1)), Some(&(x2, y2))) = (
            position.get(&*edge.from.to_string()),
            position.get(&*edge.to.to_string()),
        ) {
            let (from_x, to_x) = if x1 < x2 { (x1 + W, x2) } else { (x1, x2 + W) };
            let _ = write!(
                out,
                r##"<line class="derived-from" x1="{from_x}" y1="{}" x2="{to_x}" y2="{}" stroke="#555" marker-end="url(#arrow)"/>"##,
                y1 + H / 2,
                y2 + H / 2
            );
        }
    }
    for artifact in &lineage.artifacts {
        let id = artifact.id.to_string();
        let Some(&(x, y)) = position.get(&id) else {
            continue;
        };
        let manifest = artifact.manifests.first();
        let caption = manifest
            .map(|m| format!("{} · {} · {}", m.media_type, m.work_item_id, m.producer))
            .unwrap_or_default();
        let fill = if artifact.depth == 0 {
            "#fde68a"
        } else {
            "#e0f2fe"
        };
        let _ = write!(
            out,
            r##"<a class="node" href="/ui/artifacts/{id}?direction={direction}&amp;depth={depth}" data-artifact="{id}"><rect x="{x}" y="{y}" width="{W}" height="{H}" rx="6" fill="{fill}" stroke="#333"/><text x="{}" y="{}">{}</text><text x="{}" y="{}" fill="#444">{}</text></a>"##,
            x + 8,
            y + 18,
            escape(&format!("{}…", &id[..24.min(id.len())])),
            x + 8,
            y + 35,
            escape(&caption.chars().take(40).collect::<String>()),
        );
    }
    out.push_str("</svg>");
    out
}

/// `GET /ui/artifacts/{digest}?direction=ancestors|descendants|both&depth=N`.
pub(crate) async fn artifact(
    State(state): State<AppState>,
    digest: RawPath,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> HttpResult<Response> {
    let reader = reader(&state, &headers).await?;
    let digest: Digest = path_digest(digest)?;
    let direction_text = match query.get("direction").map(String::as_str) {
        Some("descendants") => "descendants",
        Some("both") => "both",
        _ => "ancestors",
    };
    let depth: u32 = query
        .get("depth")
        .and_then(|d| d.parse().ok())
        .unwrap_or(3)
        .min(50);
    let view = state.store.artifact(digest, &reader).await?;
    let lineage_query = LineageQuery {
        direction: match direction_text {
            "descendants" => Direction::Descendants,
            "both" => Direction::Both,
            _ => Direction::Ancestors,
        },
        depth: Some(depth),
        limit: 200,
        skip: 0,
        budget: Duration::from_millis(250),
        edges: None,
        as_of: None,
    };
    let lineage = state
        .store
        .lineage(Digest::Blake3(view.digests.blake3), lineage_query, &reader)
        .await?;
    let id = view.digests.blake3.to_string();
    let newest = view.manifests.last().map(|r| &r.manifest);
    let status = if view.quarantined {
        r#"<strong class="bad">quarantined: the stored bytes failed verification</strong>"#
            .to_owned()
    } else {
        "intact so far: every read re-hashes the bytes (BLAKE3 and SHA-256)".to_owned()
    };
    let mut page = String::new();
    let _ = write!(
        page,
        r#"<!doctype html><html lang="en"><head><meta charset="utf-8"><title>weft · {short}</title>
<style>body{{font-family:system-ui,sans-serif;margin:2rem;color:#111}}code,td{{font-family:monospace;font-size:12px}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:4px 8px;text-align:left}}.bad{{color:#b91c1c}}#graph{{overflow:auto;border:1px solid #ddd;padding:8px}}</style></head><body>
<h1>Artifact <code id="artifact-id">{id}</code></h1>
<table id="facts"><tr><th>sha256</th><td>{sha}</td></tr><tr><th>size</th><td>{size} bytes</td></tr><tr><th>media type</th><td>{media}</td></tr><tr><th>classification</th><td>{class}</td></tr><tr><th>verification</th><td id="status">{status}</td></tr></table>
<h2>Manifests</h2><table id="manifests"><tr><th>manifest</th><th>producer</th><th>WorkItem</th><th>Mission</th><th>tools</th><th>created</th><th>sequence</th></tr>"#,
        short = escape(&id[..20.min(id.len())]),
        id = escape(&id),
        sha = escape(&view.digests.sha256.to_string()),
        size = view.size,
        media = escape(newest.map(|m| m.content.media_type.as_str()).unwrap_or("-")),
        class = newest.map(|m| m.classification.as_str()).unwrap_or("-"),
    );
    for record in &view.manifests {
        let m = &record.manifest;
        let tools: Vec<String> = m
            .tools
            .iter()
            .map(|t| format!("{:?} {} {}", t.kind, t.id, t.version))
            .collect();
        let _ = write!(
            page,
            "<tr><td>{}</td><td>{} (card {})</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&record.manifest_id.to_string()),
            escape(m.producer.agent_id.as_str()),
            escape(&m.producer.agent_card_version),
            escape(m.work_item_id.as_str()),
            escape(m.mission_id.as_str()),
            escape(&tools.join(", ")),
            escape(&m.created_at.to_rfc3339()),
            record.sequence
        );
    }
    let selected = |value: &str| {
        if value == direction_text {
            " selected"
        } else {
            ""
        }
    };
    let _ = write!(
        page,
        r#"</table><h2>Provenance</h2>
<form method="get"><label>direction <select name="direction"><option{a}>ancestors</option><option{d}>descendants</option><option{b}>both</option></select></label> <label>depth <input name="depth" type="number" min="0" max="50" value="{depth}"></label> <button>show</button></form>
<p id="summary">{n} artifacts{withheld}{truncated}</p><div id="graph">{svg}</div></body></html>"#,
        a = selected("ancestors"),
        d = selected("descendants"),
        b = selected("both"),
        n = lineage.artifacts.len(),
        withheld = if lineage.withheld > 0 {
            format!(", {} withheld (Groups you cannot read)", lineage.withheld)
        } else {
            String::new()
        },
        truncated = if lineage.truncated { ", truncated" } else { "" },
        svg = svg(&lineage, direction_text, &depth.to_string()),
    );
    let mut response = Html(page).into_response();
    response.headers_mut().insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; form-action 'self'",
        ),
    );
    Ok(response)
}
