//! Signing in and out of the console (DESIGN §8).
//!
//! `POST /ui/login` (form fields `token`, `next`) stores a session token in an HttpOnly,
//! SameSite=Strict cookie scoped to `/ui` and goes on to `next`, a local `/ui/` path only.
//! The token is authenticated first: a token that is not a live session is refused, and so
//! is the admin token, which never leaves the operator's shell for a browser cookie (issue #10
//! finding 9b). `GET /ui/login` only shows the form; a token in a URL (logged by proxies, kept
//! in history) sets nothing. `POST /ui/logout` clears the cookie (a same-site form only).
//! The login form is same-site only too (login CSRF, issue #40), and the cookie is `Secure`
//! when `--trust-forwarded-proto` is set and the proxy says the browser spoke HTTPS.

use std::collections::HashMap;

use axum::extract::{Form, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};

use super::frame::{COOKIE, UiResult, Viewer, deny_framing, escape, form_page, same_site};
use crate::http::state::AppState;

/// Whether the TLS-terminating proxy in front says the browser spoke HTTPS to it
/// (`X-Forwarded-Proto: https`, or `proto=https` in `Forwarded`, RFC 7239). Read only with
/// `--trust-forwarded-proto`: without a proxy that sets it, a client could send either.
fn came_through_tls(headers: &HeaderMap) -> bool {
    let forwarded_proto = headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(',').next())
        .is_some_and(|proto| proto.trim().eq_ignore_ascii_case("https"));
    let forwarded = headers
        .get(header::FORWARDED)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(',').next())
        .is_some_and(|first| {
            first.split(';').any(|pair| {
                pair.trim().split_once('=').is_some_and(|(name, value)| {
                    name.trim().eq_ignore_ascii_case("proto")
                        && value.trim().trim_matches('"').eq_ignore_ascii_case("https")
                })
            })
        });
    forwarded_proto || forwarded
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
    form_page(StatusCode::OK, None, &local_next(query.get("next")))
}

/// `POST /ui/login` with form fields `token` and `next`: a live session token (never the
/// admin token) goes into the cookie, then on to `next`.
pub(crate) async fn login_form(
    State(state): State<AppState>,
    request_headers: HeaderMap,
    form: Result<Form<HashMap<String, String>>, axum::extract::rejection::FormRejection>,
) -> Response {
    // Login CSRF (issue #40): another site must not sign the browser in to its own session.
    if let Err(refused) = same_site(&request_headers) {
        return refused.into_response();
    }
    let fields = form.map(|Form(fields)| fields).unwrap_or_default();
    let next = local_next(fields.get("next"));
    let token = fields.get("token").cloned().unwrap_or_default();
    if token.is_empty()
        || token.len() > 256
        || !token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b))
        || blake3::hash(token.as_bytes()) == state.admin_token_hash
        || state.store.sessions().authenticate(&token).await.is_err()
    {
        return form_page(
            StatusCode::UNAUTHORIZED,
            Some(
                "sign in with a live session token (weft login prints one); the admin token is not accepted",
            ),
            &next,
        );
    }
    // The page goes on to `next` itself (meta refresh) rather than by a 303: a navigation
    // started by this same-site page carries the SameSite=Strict cookie even when the form
    // was posted from elsewhere (a bookmark page, a test's local file), a redirect would not.
    let next = escape(&next);
    let page = format!(
        r#"<!doctype html><html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="0; url={next}"><title>signed in</title></head><body><main><p>Signed in. <a id="next" href="{next}">Continue</a></p></main></body></html>"#
    );
    let secure = if state.trust_forwarded_proto && came_through_tls(&request_headers) {
        "; Secure"
    } else {
        ""
    };
    let cookie = format!("{COOKIE}={token}; Path=/ui; HttpOnly; SameSite=Strict{secure}");
    let mut response = Html(page).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'none'; frame-ancestors 'none'"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    deny_framing(headers);
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        headers.insert(header::SET_COOKIE, value);
    }
    response
}

/// `POST /ui/logout` (form field `form`): clears the cookie and shows the sign-in form. The
/// session itself stays live for the CLI that opened it.
pub(crate) async fn logout(
    State(state): State<AppState>,
    headers: HeaderMap,
    form: Result<Form<HashMap<String, String>>, axum::extract::rejection::FormRejection>,
) -> UiResult {
    let viewer = Viewer::of(&state, &headers).await?;
    let fields = form.map(|Form(fields)| fields).unwrap_or_default();
    viewer.check_form(&headers, fields.get("form").map(String::as_str))?;
    let mut response = form_page(StatusCode::OK, None, "/ui/");
    response.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_static("weft_session=; Path=/ui; HttpOnly; SameSite=Strict; Max-Age=0"),
    );
    Ok(response)
}
