//! The answer every JSON route gives on success: the value as `application/json` with its
//! status (an answer that cannot be encoded becomes a 500 problem). A leaf of `http`.

use axum::http::StatusCode;
use axum::response::IntoResponse;
use weft_api::ErrorCode;

use super::error::HttpError;

/// A 2xx JSON answer.
pub(crate) fn json<T: serde::Serialize>(status: StatusCode, value: &T) -> axum::response::Response {
    match serde_json::to_vec(value) {
        Ok(bytes) => (
            status,
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            bytes,
        )
            .into_response(),
        Err(error) => HttpError::new(
            ErrorCode::Internal,
            format!("could not encode the answer: {error}"),
        )
        .into_response(),
    }
}
