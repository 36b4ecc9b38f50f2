//! Who is calling: the admin token, an Agent's session token, or a capability token.
//!
//! A capability token (LSE-6) is accepted only where a handler asks for a [`Bearer`] (blob
//! uploads, `POST /v1/artifacts`, `POST /v1/evidence`), which then checks the scope it needs.
//! Every other route takes a [`Caller`], which refuses a capability token unread: a new route
//! takes tokens only by opting in.

use axum::extract::{FromRef, FromRequestParts};
use axum::http::header;
use axum::http::request::Parts;
use weft_api::ErrorCode;
use weft_storage::{Grant, Reader, Session};

use super::access::note_caller;
use super::error::HttpError;
use super::state::AppState;

/// An authenticated caller.
#[derive(Clone, Debug)]
pub enum Caller {
    Admin,
    Agent(Session),
}

impl Caller {
    /// What this caller may read.
    pub fn reader(&self) -> Reader {
        match self {
            Self::Admin => Reader::Admin,
            Self::Agent(session) => session.reader(),
        }
    }

    pub fn require_admin(&self) -> Result<(), HttpError> {
        match self {
            Self::Admin => Ok(()),
            Self::Agent(_) => Err(HttpError::new(
                ErrorCode::Forbidden,
                "this call needs the admin token",
            )),
        }
    }
}

/// The bearer token of the request (`unauthorized` without a well-formed one).
fn bearer_token(parts: &Parts) -> Result<&str, HttpError> {
    let unauthorized = |why: &str| HttpError::new(ErrorCode::Unauthorized, why.to_owned());
    let header = parts
        .headers
        .get(header::AUTHORIZATION)
        .ok_or_else(|| unauthorized("send Authorization: Bearer <token>").without_credentials())?;
    header
        .to_str()
        .ok()
        .and_then(|value| value.strip_prefix("Bearer "))
        .filter(|token| !token.is_empty() && token.len() <= 256)
        .ok_or_else(|| unauthorized("the Authorization header is not a bearer token"))
}

impl<S> FromRequestParts<S> for Caller
where
    AppState: FromRef<S>,
    S: Send + Sync,
{
    type Rejection = HttpError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let state = AppState::from_ref(state);
        let token = bearer_token(parts)?;
        // blake3::Hash compares in constant time.
        if blake3::hash(token.as_bytes()) == state.admin_token_hash {
            note_caller(parts, || "admin".to_owned());
            return Ok(Self::Admin);
        }
        if Grant::looks_like(token) {
            return Err(HttpError::new(
                ErrorCode::Forbidden,
                "a capability token is accepted only for blob uploads, POST /v1/artifacts and POST /v1/evidence",
            ));
        }
        let session = state.store.sessions().authenticate(token).await?;
        note_caller(parts, || format!("agent:{}", session.agent_id));
        Ok(Self::Agent(session))
    }
}

/// The caller of a route that also takes capability tokens: a session or the admin, or a
/// live capability token, resolved with its lease now.
#[derive(Clone, Debug)]
pub(crate) enum Bearer {
    Caller(Caller),
    Token(Grant),
}

impl<S> FromRequestParts<S> for Bearer
where
    AppState: FromRef<S>,
    S: Send + Sync,
{
    type Rejection = HttpError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let app = AppState::from_ref(state);
        let token = bearer_token(parts)?;
        if Grant::looks_like(token) {
            let grant = app.store.work().authorize_token(token).await?;
            note_caller(parts, || {
                format!(
                    "agent:{} (token {})",
                    grant.session().agent_id,
                    grant.token_id
                )
            });
            return Ok(Self::Token(grant));
        }
        Ok(Self::Caller(
            Caller::from_request_parts(parts, state).await?,
        ))
    }
}
