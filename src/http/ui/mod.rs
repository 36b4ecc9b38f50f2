//! The auditor console under `/ui`. This file names the pages `http` routes to, and serves
//! the stylesheet and the 404 page; `frame.rs` holds what every page shares (the sign-in
//! cookie, the shared layout, escaping, and the HTML rendering of every failure). One file
//! per page kind sits beside them; `graph.rs` lays provenance out. Served by the binary;
//! loads nothing from elsewhere and runs no script: every page answers with a CSP that allows
//! only this server's stylesheet and forms.
//!
//! Browsers do not send bearer headers on navigation, so `POST /ui/login` stores a session
//! token in an HttpOnly, SameSite=Strict cookie scoped to `/ui` (see `login.rs`). Every page
//! reads through the same `Reader` the API would give that session, so the console shows
//! exactly what the API shows, and "not visible" looks the same as "does not exist".
//!
//! A page never answers JSON: a refusal becomes an HTML page with the same status (401 is the
//! sign-in form with a message). Forms that change something (verify now, sign out) carry a
//! token derived from the session token and are refused when `Origin` names another site.

mod artifact;
mod chain;
mod content;
mod events;
mod evidence;
mod frame;
mod graph;
mod home;
mod login;
mod story;
mod work;

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use weft_api::ErrorCode;

use super::error::HttpError;
use frame::UiError;

pub(crate) use artifact::{artifact, verify_now};
pub(crate) use content::content as artifact_content;
pub(crate) use events::events;
pub(crate) use evidence::evidence;
pub(crate) use home::{home, search};
pub(crate) use login::{login, login_form, logout};
pub(crate) use work::{mission, work_item};

/// The console's stylesheet. Colours are chosen for WCAG AA (contrast ≥ 4.5 on their
/// backgrounds; the browser test recomputes it) and every focusable element gets a visible
/// outline.
pub(crate) const STYLE: &str = include_str!("style.css");

/// `GET /ui/style.css`.
pub(crate) async fn style() -> Response {
    let mut response = ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], STYLE).into_response();
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// `GET /ui/{anything else}`: an HTML 404, not the API's JSON one.
pub(crate) async fn not_found() -> Response {
    UiError(HttpError::new(
        ErrorCode::NotFound,
        "no console page has this address",
    ))
    .into_response()
}
