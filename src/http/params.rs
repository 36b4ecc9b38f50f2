//! Request parameters: raw path and query extractors (so a malformed one becomes our
//! problem+json, not axum's plain-text rejection) and the strict parsers every route shares:
//! ids and digests in the path, integers, ids and known names in the query.

use std::collections::HashMap;

use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query};
use weft_api::{Digest, ErrorCode, Id};

use super::error::HttpError;

/// A single path segment, not yet validated.
pub(crate) type RawPath = Result<Path<String>, PathRejection>;
/// Two path segments, not yet validated.
pub(crate) type RawPath2 = Result<Path<(String, String)>, PathRejection>;
/// The query string, not yet validated: every pair, in order (a name given twice is refused
/// by [`known_params`], never silently one of its values).
pub(crate) type RawQuery = Result<Query<Vec<(String, String)>>, QueryRejection>;

/// Parses a path segment as an id; axum has already percent-decoded it, so `%2e%2e` arrives
/// as `..` and is refused here.
pub(crate) fn path_id(what: &str, raw: RawPath) -> Result<Id, HttpError> {
    let Path(text) = raw
        .map_err(|_| HttpError::new(ErrorCode::InvalidId, format!("{what} is not valid UTF-8")))?;
    Ok(Id::parse(what, &text)?)
}

/// Parses two path segments as ids, named `what`.
pub(crate) fn path_ids(what: (&str, &str), raw: RawPath2) -> Result<(Id, Id), HttpError> {
    let Path((first, second)) =
        raw.map_err(|_| HttpError::new(ErrorCode::InvalidId, "ids must be valid UTF-8"))?;
    Ok((Id::parse(what.0, &first)?, Id::parse(what.1, &second)?))
}

/// Parses a `{digest}` path segment (`blake3:<hex>` or `sha256:<hex>`).
pub(crate) fn path_digest(raw: RawPath) -> Result<Digest, HttpError> {
    let Path(text) =
        raw.map_err(|_| HttpError::new(ErrorCode::InvalidDigest, "the digest is not valid UTF-8"))?;
    Ok(Digest::parse(&text)?)
}

/// The query parameters, refusing any the route does not know and any given twice.
pub(crate) fn known_params(
    raw: RawQuery,
    known: &[&str],
) -> Result<HashMap<String, String>, HttpError> {
    let Query(pairs) = raw.map_err(|e| HttpError::new(ErrorCode::BadRequest, e.body_text()))?;
    let mut query = HashMap::with_capacity(pairs.len());
    for (name, value) in pairs {
        if !known.contains(&name.as_str()) {
            return Err(HttpError::new(
                ErrorCode::BadRequest,
                format!("unknown query parameter {name:?}"),
            ));
        }
        if query.insert(name.clone(), value).is_some() {
            return Err(HttpError::new(
                ErrorCode::BadRequest,
                format!("query parameter {name:?} given twice"),
            ));
        }
    }
    Ok(query)
}

/// Parses an unsigned query parameter strictly (no sign, no spaces).
pub(crate) fn query_u64(
    query: &HashMap<String, String>,
    name: &str,
) -> Result<Option<u64>, HttpError> {
    query
        .get(name)
        .map(|text| parse_u64(name, text))
        .transpose()
}

/// Parses `limit`: a u32 (the document says so), clamped by each route to its page size.
pub(crate) fn query_limit(query: &HashMap<String, String>) -> Result<Option<u32>, HttpError> {
    query_u64(query, "limit")?
        .map(|limit| {
            u32::try_from(limit).map_err(|_| {
                HttpError::new(
                    ErrorCode::BadRequest,
                    format!("limit is out of range (at most {})", u32::MAX),
                )
            })
        })
        .transpose()
}

/// Parses an unsigned integer strictly: decimal digits only, at most `i64::MAX`, because
/// sequences, versions and cursors are SQLite integers and nothing stored is above it.
pub(crate) fn parse_u64(name: &str, text: &str) -> Result<u64, HttpError> {
    if text.is_empty() || text.len() > 20 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(HttpError::new(
            ErrorCode::BadRequest,
            format!("{name} must be a non-negative integer"),
        ));
    }
    text.parse::<u64>()
        .ok()
        .filter(|n| i64::try_from(*n).is_ok())
        .ok_or_else(|| {
            HttpError::new(
                ErrorCode::BadRequest,
                format!("{name} is out of range (at most {})", i64::MAX),
            )
        })
}

/// Parses an optional id query parameter (`invalid_id` when malformed).
pub(crate) fn query_id(
    query: &HashMap<String, String>,
    name: &str,
) -> Result<Option<Id>, HttpError> {
    query
        .get(name)
        .map(|text| Id::parse(name, text).map_err(HttpError::from))
        .transpose()
}
