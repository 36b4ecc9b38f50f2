//! An artifact's bytes in the console (issue #50): its name, a download, and a preview, each
//! from bytes verified against the artifact's address as they are read, as every read is.
//!
//! Bytes a Worker uploaded must never run as this origin's page: `GET
//! /ui/artifacts/{d}/content` answers them as an attachment of type
//! `application/octet-stream` (an image shown in the page, `?inline=1`, only as PNG, JPEG,
//! GIF or WebP), with `nosniff` and a sandboxing CSP, so HTML or SVG in an artifact is never
//! rendered with the console's cookie. A text or JSON preview is at most [`PREVIEW_BYTES`]
//! read into the page and escaped; a larger artifact offers the download only, so memory per
//! page stays bounded.

use std::collections::HashMap;

use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::IntoResponse;
use futures::TryStreamExt as _;
use weft_api::Digest;
use weft_api::views::ArtifactView;

use super::frame::{UiResult, Viewer, escape};
use crate::http::params::{RawPath, path_digest};
use crate::http::state::AppState;

/// The most bytes a text or JSON preview reads into a page.
pub(super) const PREVIEW_BYTES: u64 = 64 * 1024;

/// The most bytes an image preview shows inline (a larger one is a download).
const IMAGE_PREVIEW_BYTES: u64 = 8 * 1024 * 1024;

/// The media types a browser may show inline from this origin: raster images only.
const INLINE_IMAGES: &[&str] = &["image/png", "image/jpeg", "image/gif", "image/webp"];

/// The artifact's file name: the `name` annotation of its newest manifest (what `weft put`
/// records), reduced to its last path component.
pub(super) fn name_of(view: &ArtifactView) -> Option<String> {
    view.manifests
        .last()?
        .manifest
        .file_name()
        .map(str::to_owned)
}

/// The media type without parameters, lower-case.
fn essence(media_type: &str) -> String {
    media_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

fn is_json(essence: &str) -> bool {
    essence == "application/json" || essence.ends_with("+json")
}

fn is_text(essence: &str) -> bool {
    essence.starts_with("text/") || is_json(essence)
}

/// `GET /ui/artifacts/{digest}/content[?inline=1]`: the verified bytes, as a download (or a
/// raster image shown in the page). Visibility is decided first, as for the page; a failure
/// part-way cuts the connection, as a GET of the API does.
pub(crate) async fn content(
    State(state): State<AppState>,
    digest: RawPath,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> UiResult {
    let viewer = Viewer::of(&state, &headers).await?;
    let digest = path_digest(digest)?;
    let view = state
        .store
        .artifacts()
        .artifact(digest, &viewer.reader)
        .await?;
    let content = state
        .store
        .artifacts()
        .open_content(Digest::Blake3(view.digests.blake3), &viewer.reader)
        .await?;
    let essence = essence(&content.media_type);
    let inline =
        query.get("inline").is_some_and(|v| v == "1") && INLINE_IMAGES.contains(&essence.as_str());
    let mut answer = HeaderMap::new();
    answer.insert(
        header::CONTENT_TYPE,
        if inline {
            HeaderValue::from_str(&essence)
                .unwrap_or(HeaderValue::from_static("application/octet-stream"))
        } else {
            HeaderValue::from_static("application/octet-stream")
        },
    );
    let file = name_of(&view).unwrap_or_else(|| view.digests.blake3.to_string().replace(':', "-"));
    // Only what a quoted filename may hold, so a name cannot break the header.
    let file: String = file
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._- ".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    let disposition = if inline { "inline" } else { "attachment" };
    answer.insert(
        header::CONTENT_DISPOSITION,
        HeaderValue::from_str(&format!(r#"{disposition}; filename="{file}""#))
            .unwrap_or(HeaderValue::from_static("attachment")),
    );
    answer.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    answer.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("sandbox; default-src 'none'"),
    );
    // Never kept by the browser: access can end (sign-out, a Membership removed).
    answer.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    answer.insert(header::CONTENT_LENGTH, HeaderValue::from(view.size));
    if let Some(verified) = content.verified_in_memory(None) {
        let bytes = verified
            .await
            .map_err(crate::http::error::HttpError::from)?;
        return Ok((StatusCode::OK, answer, bytes).into_response());
    }
    let content = content
        .admitted(&viewer.reader)
        .map_err(crate::http::error::HttpError::from)?;
    let body = crate::http::artifacts::served(content.into_body(None));
    Ok((StatusCode::OK, answer, body).into_response())
}

/// The page's name, download and preview section for `view`.
pub(super) async fn section(state: &AppState, viewer: &Viewer, view: &ArtifactView) -> String {
    let id = view.digests.blake3.to_string();
    let media_type = view
        .manifests
        .last()
        .map(|record| record.manifest.content.media_type.clone())
        .unwrap_or_default();
    let essence = essence(&media_type);
    let mut out = String::from(r#"<h2>Content</h2><p id="content">"#);
    if let Some(name) = name_of(view) {
        out.push_str(&format!(
            r#"<span id="file-name">{}</span> · "#,
            escape(&name)
        ));
    }
    out.push_str(&format!(
        r#"<a id="download" href="/ui/artifacts/{id}/content">Download</a> <span class="muted">({} bytes, verified against the address as they are sent)</span></p>"#,
        view.size
    ));
    if view.quarantined {
        return out;
    }
    if INLINE_IMAGES.contains(&essence.as_str()) && view.size <= IMAGE_PREVIEW_BYTES {
        out.push_str(&format!(
            r#"<p><img id="preview" src="/ui/artifacts/{id}/content?inline=1" alt="the artifact's image"></p>"#
        ));
        return out;
    }
    if !is_text(&essence) || view.size > PREVIEW_BYTES {
        out.push_str(r#"<p class="muted" id="preview">No preview: shown here are text and JSON up to 64 KiB and raster images.</p>"#);
        return out;
    }
    match preview_text(state, viewer, view).await {
        Some(text) => {
            // Pretty JSON, unless indenting would blow it up (deep nesting grows it without
            // bound): then the text as stored.
            let text = if is_json(&essence) {
                serde_json::from_str::<serde_json::Value>(&text)
                    .ok()
                    .and_then(|value| serde_json::to_string_pretty(&value).ok())
                    .filter(|pretty| pretty.len() as u64 <= 4 * PREVIEW_BYTES)
                    .unwrap_or(text)
            } else {
                text
            };
            out.push_str(&format!(r#"<pre id="preview">{}</pre>"#, escape(&text)));
        }
        None => out.push_str(r#"<p class="bad" id="preview">No preview: the bytes could not be read and verified now.</p>"#),
    }
    out
}

/// The whole artifact (at most [`PREVIEW_BYTES`]) as text, read through the verified stream:
/// `None` when it does not verify, cannot be read, or is not UTF-8.
async fn preview_text(state: &AppState, viewer: &Viewer, view: &ArtifactView) -> Option<String> {
    let content = state
        .store
        .artifacts()
        .open_content(Digest::Blake3(view.digests.blake3), &viewer.reader)
        .await
        .ok()?;
    let bytes = match content.verified_in_memory(None) {
        Some(verified) => verified.await.ok()?.to_vec(),
        None => {
            // A stored file: read under the viewer's download slot, as any download is.
            let mut body = content.admitted(&viewer.reader).ok()?.into_body(None);
            let mut bytes = Vec::with_capacity(view.size.min(PREVIEW_BYTES) as usize);
            while let Some(chunk) = body.try_next().await.ok()? {
                if bytes.len() as u64 + chunk.len() as u64 > PREVIEW_BYTES {
                    return None;
                }
                bytes.extend_from_slice(&chunk);
            }
            bytes
        }
    };
    String::from_utf8(bytes).ok()
}
