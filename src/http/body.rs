//! Reading request bodies: bounded JSON bodies, and upload streams with an idle timeout.

use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, header};
use bytes::Bytes;
use futures::{Stream, StreamExt as _};
use weft_api::ErrorCode;

use super::error::HttpError;

/// Largest JSON request body.
pub(crate) const MAX_JSON_BYTES: usize = 1024 * 1024;

/// Reads a JSON body of at most [`MAX_JSON_BYTES`], refusing other content types.
pub(crate) async fn read_json(headers: &HeaderMap, body: Body) -> Result<Bytes, HttpError> {
    if let Some(content_type) = headers.get(header::CONTENT_TYPE) {
        let essence = content_type
            .to_str()
            .unwrap_or_default()
            .split(';')
            .next()
            .unwrap_or_default()
            .trim()
            .to_ascii_lowercase();
        if essence != "application/json" && !essence.ends_with("+json") {
            return Err(HttpError::new(
                ErrorCode::UnsupportedMediaType,
                "send the body as application/json",
            ));
        }
    }
    check_declared_length(headers, MAX_JSON_BYTES as u64)?;
    let mut stream = body.into_data_stream();
    let mut collected = bytes::BytesMut::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|_| {
            HttpError::new(
                ErrorCode::IncompleteBody,
                "the request body ended before it was complete",
            )
        })?;
        if collected.len() + chunk.len() > MAX_JSON_BYTES {
            return Err(HttpError::new(
                ErrorCode::BodyTooLarge,
                format!("JSON bodies are limited to {MAX_JSON_BYTES} bytes"),
            ));
        }
        collected.extend_from_slice(&chunk);
    }
    Ok(collected.freeze())
}

/// Parses a JSON request body read by [`read_json`]. A syntax defect or a repeated key is
/// `invalid_json` on every route, so clients branch on one code; a well-formed body of the
/// wrong shape answers `shape`, the route's own code.
pub(crate) fn parse_body<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
    shape: ErrorCode,
) -> Result<T, HttpError> {
    weft_api::json::parse_strict::<serde::de::IgnoredAny>(bytes, ErrorCode::InvalidJson)?;
    match weft_api::json::parse_strict(bytes, shape) {
        Ok(parsed) => Ok(parsed),
        Err(rejection) => {
            // JSON has one number type: `3.0` is the integer 3 to JSON Schema and to encoders
            // that write every number as a float, but serde's u64 refuses it. Retry with whole
            // floats as integers; when that does not help, the first error stands.
            let mut value: serde_json::Value =
                serde_json::from_slice(bytes).map_err(|_| HttpError::from(rejection.clone()))?;
            if whole_floats_as_integers(&mut value)
                && let Ok(parsed) = serde_json::from_value(value)
            {
                return Ok(parsed);
            }
            Err(rejection.into())
        }
    }
}

/// Rewrites every float with no fractional part (and exactly representable, at most 2^53)
/// as an integer; answers whether anything changed.
fn whole_floats_as_integers(value: &mut serde_json::Value) -> bool {
    use serde_json::Value;
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    match value {
        Value::Number(number) if number.is_f64() => {
            let float = number.as_f64().unwrap_or(f64::NAN);
            if float.fract() != 0.0 || float.abs() > EXACT {
                return false;
            }
            // Within ±2^53 the cast is exact.
            *value = Value::from(float as i64);
            true
        }
        Value::Array(items) => items.iter_mut().fold(false, |changed, item| {
            whole_floats_as_integers(item) | changed
        }),
        Value::Object(fields) => fields.values_mut().fold(false, |changed, field| {
            whole_floats_as_integers(field) | changed
        }),
        _ => false,
    }
}

/// Refuses a body whose declared `Content-Length` is already over `limit`, before reading it.
pub(crate) fn check_declared_length(headers: &HeaderMap, limit: u64) -> Result<(), HttpError> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<u64>().ok());
    match declared {
        Some(length) if length > limit => Err(HttpError::new(
            ErrorCode::BodyTooLarge,
            format!("bodies on this route are limited to {limit} bytes"),
        )),
        _ => Ok(()),
    }
}

/// The body as a byte stream that fails with `TimedOut` if no chunk arrives for `idle`.
pub(crate) fn upload_stream(
    body: Body,
    idle: Duration,
) -> impl Stream<Item = Result<Bytes, std::io::Error>> + Send {
    let stream = body.into_data_stream();
    futures::stream::unfold(Some(stream), move |state| async move {
        let mut stream = state?;
        match tokio::time::timeout(idle, stream.next()).await {
            Err(_) => Some((
                Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "upload stalled",
                )),
                None,
            )),
            Ok(None) => None,
            Ok(Some(Ok(chunk))) => Some((Ok(chunk), Some(stream))),
            Ok(Some(Err(error))) => Some((Err(std::io::Error::other(error)), None)),
        }
    })
}

/// Reads a DSSE envelope body (bounded, strict JSON: `invalid_json` on any defect).
pub(crate) async fn read_envelope(
    headers: &HeaderMap,
    body: Body,
) -> Result<weft_api::Envelope, HttpError> {
    let bytes = read_json(headers, body).await?;
    Ok(weft_api::json::parse_strict(
        &bytes,
        ErrorCode::InvalidJson,
    )?)
}

/// 201 for something new, 200 for an idempotent repeat.
pub(crate) fn created_or_ok(created: bool) -> axum::http::StatusCode {
    if created {
        axum::http::StatusCode::CREATED
    } else {
        axum::http::StatusCode::OK
    }
}
