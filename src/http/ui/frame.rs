//! What every console page shares: the sign-in cookie and the `Viewer` behind it, the
//! same-site check of forms, escaping, the layout (with its CSP) and the HTML rendering of
//! every failure (a 401 is the sign-in form). A leaf of `ui`: the pages import it, and it
//! imports none of them.

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use weft_api::ErrorCode;
use weft_storage::{Reader, Session};

use crate::http::error::{HttpError, status_of};
use crate::http::state::AppState;

pub(super) const COOKIE: &str = "weft_session";

/// Every page's policy: no scripts, no frames, nothing from elsewhere; styles from this
/// server's one stylesheet; forms post only here.
const CSP: &str = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

pub(super) fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

/// Percent-encodes a path segment or query value (ids and digests are plain, but a query
/// text typed by a person is not).
pub(super) fn url_encode(text: &str) -> String {
    let mut out = String::new();
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-_.~:".contains(&byte) {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// The signed-in caller: the session behind the cookie, and its token's form key.
pub(super) struct Viewer {
    pub(super) session: Session,
    pub(super) reader: Reader,
    /// Put in every state-changing form; [`Viewer::check_form`] compares it.
    pub(super) form_token: String,
}

/// The cookie's token, if any.
fn cookie_token(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().strip_prefix(COOKIE)?.strip_prefix('='))
        .next()
}

/// The form token of a session token: only someone who holds the cookie's value can compute
/// it, and a cross-site page cannot read the cookie.
fn form_token_of(token: &str) -> String {
    blake3::derive_key("weft ui form token v1", token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl Viewer {
    /// The caller behind the UI cookie (only session tokens: the admin token is refused at
    /// sign-in and would not resolve here either).
    pub(super) async fn of(state: &AppState, headers: &HeaderMap) -> Result<Self, UiError> {
        let token = cookie_token(headers).ok_or_else(|| {
            UiError(HttpError::new(
                ErrorCode::Unauthorized,
                "sign in to continue",
            ))
        })?;
        let session = state
            .store
            .sessions()
            .authenticate(token)
            .await
            .map_err(|error| {
                let mut error = HttpError::from(error);
                if error.code() == ErrorCode::Unauthorized {
                    error = HttpError::new(
                        ErrorCode::Unauthorized,
                        "your session has ended; sign in again",
                    );
                }
                UiError(error)
            })?;
        crate::http::access::note_caller_here(|| format!("agent:{} (console)", session.agent_id));
        Ok(Self {
            reader: session.reader(),
            form_token: form_token_of(token),
            session,
        })
    }

    /// A state-changing form: same-site (no foreign `Origin`, no cross-site fetch metadata)
    /// and carrying this session's form token. Refused `forbidden` otherwise.
    pub(super) fn check_form(
        &self,
        headers: &HeaderMap,
        token: Option<&str>,
    ) -> Result<(), UiError> {
        let forbidden = |why: &str| UiError(HttpError::new(ErrorCode::Forbidden, why));
        same_site(headers)?;
        if token != Some(self.form_token.as_str()) {
            return Err(forbidden(
                "the form is stale or was not made by this console; reload the page",
            ));
        }
        Ok(())
    }
}

/// A form post from this site only: no cross-site fetch metadata and no foreign `Origin`
/// (`forbidden` otherwise). A browser sends at least one of them with every cross-site post.
///
/// `Origin: null` is what Chromium sends for a same-origin form post from a page whose
/// `Referrer-Policy` is `no-referrer` (issue #50: "Verify now" and "Sign out" were refused in
/// a real browser); it stands only beside `Sec-Fetch-Site: same-origin`, which a page cannot
/// set. Without that metadata a `null` origin (a sandboxed frame, a redirect from elsewhere)
/// is refused.
pub(super) fn same_site(headers: &HeaderMap) -> Result<(), UiError> {
    let forbidden = || {
        UiError(HttpError::new(
            ErrorCode::Forbidden,
            "a form posted from another site is refused",
        ))
    };
    let site = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok());
    if let Some(site) = site
        && !matches!(site, "same-origin" | "none")
    {
        return Err(forbidden());
    }
    let origin = headers.get(header::ORIGIN);
    if site == Some("same-origin") && origin.is_some_and(|origin| origin == "null") {
        return Ok(());
    }
    if let Some(origin) = origin {
        let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
        let origin = origin.to_str().unwrap_or_default();
        let same = host.is_some_and(|host| {
            origin == format!("http://{host}") || origin == format!("https://{host}")
        });
        if !same {
            return Err(forbidden());
        }
    }
    Ok(())
}

/// Headers every console answer carries: no framing (clickjacking), beside the CSP's
/// `frame-ancestors 'none'` for browsers that read only the older header.
pub(super) fn deny_framing(headers: &mut HeaderMap) {
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
}

/// A refusal on a console page, rendered as HTML with its status.
#[derive(Debug)]
pub(crate) struct UiError(pub(super) HttpError);

impl From<HttpError> for UiError {
    fn from(error: HttpError) -> Self {
        Self(error)
    }
}

impl From<weft_api::Rejection> for UiError {
    fn from(rejection: weft_api::Rejection) -> Self {
        Self(HttpError::from(rejection))
    }
}

impl From<weft_storage::Error> for UiError {
    fn from(error: weft_storage::Error) -> Self {
        Self(HttpError::from(error))
    }
}

impl IntoResponse for UiError {
    fn into_response(self) -> Response {
        let error = self.0;
        let code = error.code();
        let status = status_of(code);
        error.log();
        if status == StatusCode::UNAUTHORIZED {
            return form_page(status, Some(error.detail()), "/ui/");
        }
        let (title, hint) = match status.as_u16() {
            404 => (
                "Not found",
                "Nothing visible to you has this name. It may not exist, or belong to a Group or Mission you cannot read.",
            ),
            400 => (
                "Bad request",
                "The address or form is not one this console understands.",
            ),
            403 => ("Forbidden", "This action was refused; nothing changed."),
            500..=599 => (
                "Server error",
                "The server could not answer. The operator's log has the details.",
            ),
            _ => ("Refused", "The request was refused; nothing changed."),
        };
        let body = format!(
            r#"<h1>{title}</h1><p class="error" id="error-code">{code}</p><p>{detail}</p><p>{hint}</p><p><a href="/ui/">Back to the console</a></p>"#,
            code = escape(code.as_str()),
            detail = escape(error.detail()),
        );
        layout(status, title, None, &body)
    }
}

pub(super) type UiResult<T = Response> = Result<T, UiError>;

/// The shared frame of every page: head, stylesheet, navigation (signed in only), `body`.
pub(super) fn layout(
    status: StatusCode,
    title: &str,
    viewer: Option<&Viewer>,
    body: &str,
) -> Response {
    let nav = match viewer {
        Some(viewer) => format!(
            r#"<nav aria-label="console"><a href="/ui/">Home</a> <a href="/ui/search">Search</a> <a href="/ui/groups/{group}/events">Event log</a> <span class="who">{agent} in {group_text}</span> <form class="inline" method="post" action="/ui/logout"><input type="hidden" name="form" value="{form}"><button type="submit">Sign out</button></form></nav>"#,
            group = url_encode(viewer.session.group_id.as_str()),
            group_text = escape(viewer.session.group_id.as_str()),
            agent = escape(viewer.session.agent_id.as_str()),
            form = viewer.form_token,
        ),
        // An error page does not know who asked: links that work either way.
        None => r#"<nav aria-label="console"><a href="/ui/">Home</a> <a href="/ui/search">Search</a> <a href="/ui/login">Sign in</a></nav>"#.to_owned(),
    };
    let page = format!(
        r#"<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width"><title>{title} · weft</title><link rel="stylesheet" href="/ui/style.css"></head><body><header><span class="brand">weft auditor console</span> {nav}</header><main>{body}</main></body></html>"#,
        title = escape(title),
    );
    let mut response = (status, Html(page)).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    headers.insert("referrer-policy", HeaderValue::from_static("same-origin"));
    deny_framing(headers);
    response
}

/// A 200 page for a signed-in viewer.
pub(super) fn page(viewer: &Viewer, title: &str, body: &str) -> Response {
    layout(StatusCode::OK, title, Some(viewer), body)
}

/// The sign-in form, with `message` above it when a page sent the browser here.
pub(super) fn form_page(status: StatusCode, message: Option<&str>, next: &str) -> Response {
    let message = message
        .map(|m| {
            format!(
                r#"<p class="error" id="error-code" role="alert">unauthorized: {}</p>"#,
                escape(m)
            )
        })
        .unwrap_or_default();
    let body = format!(
        r#"<h1>Sign in</h1>{message}
<form method="post" action="/ui/login" class="stack">
<label for="token">Session token (<code>weft login</code> prints one)</label>
<input id="token" type="password" name="token" autocomplete="off" required>
<input type="hidden" name="next" value="{next}">
<button type="submit">Sign in</button>
</form>"#,
        next = escape(next),
    );
    layout(status, "Sign in", None, &body)
}

/// A short form of a long id for a label: the first `keep` characters and an ellipsis.
pub(super) fn short(text: &str, keep: usize) -> String {
    if text.chars().count() <= keep {
        text.to_owned()
    } else {
        format!("{}…", text.chars().take(keep).collect::<String>())
    }
}
