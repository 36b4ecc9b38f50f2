//! Who is calling: the admin token, or an Agent's session token.

use axum::extract::{FromRef, FromRequestParts};
use axum::http::header;
use axum::http::request::Parts;
use weft_api::ErrorCode;
use weft_storage::{Reader, Session};

use super::AppState;
use super::error::HttpError;

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

impl<S> FromRequestParts<S> for Caller
where
    AppState: FromRef<S>,
    S: Send + Sync,
{
    type Rejection = HttpError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let state = AppState::from_ref(state);
        let unauthorized = |why: &str| HttpError::new(ErrorCode::Unauthorized, why.to_owned());
        let header = parts
            .headers
            .get(header::AUTHORIZATION)
            .ok_or_else(|| unauthorized("send Authorization: Bearer <token>"))?;
        let token = header
            .to_str()
            .ok()
            .and_then(|value| value.strip_prefix("Bearer "))
            .filter(|token| !token.is_empty() && token.len() <= 256)
            .ok_or_else(|| unauthorized("the Authorization header is not a bearer token"))?;
        // blake3::Hash compares in constant time.
        if blake3::hash(token.as_bytes()) == state.admin_token_hash {
            return Ok(Self::Admin);
        }
        let session = state.store.authenticate(token).await?;
        Ok(Self::Agent(session))
    }
}
