//! The RFC 9457 `application/problem+json` body shared by the server and the client.
//!
//! It lives apart from `error` because it carries a signed snapshot (`views`), and `views`
//! depends on modules that themselves use `error`'s codes: keeping the body here keeps the
//! module graph free of circles.

use serde::{Deserialize, Serialize};

use crate::error::ErrorCode;
use crate::views::SignedSnapshot;

/// RFC 9457 `application/problem+json` body with weft's stable `code`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorBody {
    #[serde(rename = "type")]
    pub type_uri: String,
    pub title: String,
    pub status: u16,
    pub detail: String,
    pub code: ErrorCode,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// With `cursor_too_old` (DLV-9): the latest signed snapshot reference to restore from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<Box<SignedSnapshot>>,
    /// With `disposed` (issue #46): the sequence of the `artifact.disposed` Event, in the
    /// reader's Group, that records why the bytes went.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequence: Option<std::num::NonZeroU64>,
}

impl ErrorBody {
    pub fn new(status: u16, code: ErrorCode, detail: impl Into<String>) -> Self {
        Self {
            type_uri: format!("https://weft.dev/problems/{}", code.as_str()),
            title: code.as_str().replace('_', " "),
            status,
            detail: detail.into(),
            code,
            request_id: None,
            snapshot: None,
            sequence: None,
        }
    }
}
