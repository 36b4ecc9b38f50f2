//! The only place that knows status codes: every failure becomes RFC 9457 problem+json with a
//! stable `code` from `weft_api::ErrorCode`.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use weft_api::{ErrorBody, ErrorCode, Rejection};

/// A failed request, ready to be rendered.
#[derive(Debug)]
pub struct HttpError {
    code: ErrorCode,
    detail: String,
    source: Option<weft_storage::Error>,
    snapshot: Option<Box<weft_api::views::SignedSnapshot>>,
    /// With `disposed`: the disposition Event's sequence.
    sequence: Option<std::num::NonZeroU64>,
    /// The request carried no credentials at all: its 401 challenge names no error
    /// (RFC 6750 §3.1).
    no_credentials: bool,
}

impl HttpError {
    pub fn new(code: ErrorCode, detail: impl Into<String>) -> Self {
        Self {
            code,
            detail: detail.into(),
            source: None,
            snapshot: None,
            sequence: None,
            no_credentials: false,
        }
    }

    /// A 401 for a request that sent no credentials at all.
    pub fn without_credentials(mut self) -> Self {
        self.no_credentials = true;
        self
    }

    pub fn code(&self) -> ErrorCode {
        self.code
    }

    /// The safe message a client sees.
    pub fn detail(&self) -> &str {
        &self.detail
    }

    /// Logs the failure as every answer does: server errors with their source chain; a full
    /// disk once per [`DISK_FULL_LOG_INTERVAL`] with the count of those not logged.
    pub fn log(&self) {
        if self.code == ErrorCode::InsufficientStorage {
            if let Some(suppressed) = DISK_FULL_LOG.admit(std::time::Instant::now()) {
                tracing::error!(code = %self.code, error = ?self.source, suppressed, "request failed: the disk is full (the same failure is logged at most once a minute; `suppressed` counts those since the last line)");
            }
        } else if status_of(self.code).is_server_error() {
            tracing::error!(code = %self.code, error = ?self.source, "request failed");
        } else {
            tracing::debug!(code = %self.code, detail = %self.detail, "request refused");
        }
    }

    /// The problem+json body this error renders as (for answers that carry one inside).
    pub fn body(&self) -> ErrorBody {
        ErrorBody::new(
            status_of(self.code).as_u16(),
            self.code,
            self.detail.clone(),
        )
    }
}

/// How often a full disk is logged: each 507 would otherwise write an ERROR line, and a full
/// disk fails every write until an operator frees space (issue #40).
pub const DISK_FULL_LOG_INTERVAL: std::time::Duration = std::time::Duration::from_secs(60);

static DISK_FULL_LOG: LogThrottle = LogThrottle::new(DISK_FULL_LOG_INTERVAL);

/// One log line per interval for a repeated failure, with the count of those left out.
#[derive(Debug)]
pub struct LogThrottle {
    interval: std::time::Duration,
    // A std Mutex: the critical section is two assignments, no `.await`.
    state: std::sync::Mutex<(Option<std::time::Instant>, u64)>,
}

impl LogThrottle {
    pub const fn new(interval: std::time::Duration) -> Self {
        Self {
            interval,
            state: std::sync::Mutex::new((None, 0)),
        }
    }

    /// At `now` (injected, for tests): `Some(n)` to log, `n` occurrences having been left out
    /// since the last line; `None` to leave this one out.
    pub fn admit(&self, now: std::time::Instant) -> Option<u64> {
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (last, suppressed) = &mut *state;
        match last {
            Some(at) if now.saturating_duration_since(*at) < self.interval => {
                *suppressed += 1;
                None
            }
            _ => {
                *last = Some(now);
                Some(std::mem::take(suppressed))
            }
        }
    }
}

/// The status each code is answered with.
pub fn status_of(code: ErrorCode) -> StatusCode {
    use ErrorCode as C;
    match code {
        C::BadRequest
        | C::InvalidDigest
        | C::InvalidId
        | C::InvalidJson
        | C::InvalidManifest
        | C::InvalidEvidence
        | C::InvalidContext
        | C::DigestMismatch
        | C::IncompleteBody
        | C::WrongPayloadType
        | C::BadSignature
        | C::UnknownKey
        | C::ClockSkew
        | C::InvalidCommand
        | C::GroupMismatch
        | C::UnknownExtension => StatusCode::BAD_REQUEST,
        C::Unauthorized | C::StaleSession | C::StaleMembership => StatusCode::UNAUTHORIZED,
        C::Forbidden
        | C::NotAMember
        | C::ProducerMismatch
        | C::AgentDeactivated
        | C::KeyRetired => StatusCode::FORBIDDEN,
        C::NotFound | C::UnknownAgent | C::UnknownGroup | C::UnknownWorkItem | C::NoPath => {
            StatusCode::NOT_FOUND
        }
        C::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
        C::PreconditionFailed => StatusCode::PRECONDITION_FAILED,
        C::Timeout => StatusCode::REQUEST_TIMEOUT,
        C::Conflict
        | C::NonceReused
        | C::Cycle
        | C::SupersedesMismatch
        | C::MissionMismatch
        | C::CursorAhead
        | C::IllegalTransition
        | C::StaleRevision
        | C::StaleLease
        | C::OfferExpired
        | C::OfferWithdrawn
        | C::NotEligible
        | C::ApprovalRequired
        | C::BudgetExceeded
        | C::OfflineBindingMismatch
        | C::OfflineOutsideGrace
        | C::OfflineLeaseClosed
        | C::OfflineOwnerChanged
        | C::OfflineWrongWorkItem
        | C::NotReusable
        | C::ContextPreviousMismatch
        | C::ContextVersionSkipped
        | C::ContextOtherPackage
        | C::ContextOtherMission
        | C::ClassificationForbids
        | C::Held
        | C::CommandExpired => StatusCode::CONFLICT,
        C::IdempotencyKeyReused | C::EvidenceMissing | C::EventsOutOfRange => {
            StatusCode::UNPROCESSABLE_ENTITY
        }
        C::CursorTooOld | C::Disposed => StatusCode::GONE,
        C::BodyTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        C::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
        C::InvalidRange | C::UploadOffsetMismatch => StatusCode::RANGE_NOT_SATISFIABLE,
        C::UnknownSource | C::UnknownArtifact | C::UnknownEvidence | C::BlobNotFound => {
            StatusCode::UNPROCESSABLE_ENTITY
        }
        C::IntegrityFailure | C::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        C::TooManyUploads
        | C::TooManyDownloads
        | C::TooManyStreams
        | C::UploadQuotaExceeded
        | C::RateLimited => StatusCode::TOO_MANY_REQUESTS,
        C::ShuttingDown | C::Overloaded | C::StorageUnavailable | C::BlobStoreUnavailable => {
            StatusCode::SERVICE_UNAVAILABLE
        }
        // A quota is full (a Group's bytes or artifacts, its open proposals): nothing more is
        // stored until some is freed, as with a full disk (issue #46).
        C::InsufficientStorage | C::QuotaExceeded => StatusCode::INSUFFICIENT_STORAGE,
    }
}

/// Seconds a client should wait before retrying, for the codes that mean "not now".
/// Uploads in flight end quickly and a login token refills every 6 s (10 per minute); room
/// under the unpublished-bytes cap comes back only when the Agent publishes or the sweep runs.
pub fn retry_after(code: ErrorCode) -> Option<u32> {
    use ErrorCode as C;
    match code {
        C::TooManyUploads
        | C::TooManyDownloads
        | C::TooManyStreams
        | C::Overloaded
        | C::ShuttingDown => Some(1),
        // A disk that failed may be back soon (a remount, a replaced volume); not at once.
        C::StorageUnavailable => Some(5),
        // A blob store that is down or restarting (a node replaced, a network cut).
        C::BlobStoreUnavailable => Some(5),
        C::RateLimited => Some(6),
        C::UploadQuotaExceeded => Some(60),
        // A full disk needs an operator (or the sweep) to free space.
        C::InsufficientStorage => Some(60),
        _ => None,
    }
}

impl From<Rejection> for HttpError {
    fn from(rejection: Rejection) -> Self {
        Self::new(rejection.code, rejection.message)
    }
}

impl From<weft_storage::Error> for HttpError {
    fn from(error: weft_storage::Error) -> Self {
        use weft_storage::Error as E;
        let snapshot = match &error {
            weft_storage::Error::CursorTooOld(snapshot) => Some(snapshot.clone()),
            _ => None,
        };
        let detail = match &error {
            E::Rejected(rejection) => rejection.message.clone(),
            E::CursorTooOld(snapshot) => format!(
                "Events up to {} were compacted; restore from the signed snapshot and resume after it",
                snapshot.reference.sequence
            ),
            E::Corrupt(id) => {
                // "Unless …": a read that began before a repair fails, but does not quarantine
                // the repaired bytes (`engine/repairs.rs`).
                format!(
                    "the stored bytes of {id} failed verification and were not served; it is \
                     quarantined until they are uploaded again, unless an upload has just \
                     repaired it"
                )
            }
            E::Disposed(id, sequence) => format!(
                "the bytes of {id} were disposed of by a retention policy; its manifests stay, \
                 and the artifact.disposed Event at sequence {sequence} says why"
            ),
            E::RecordDisposed(id, sequence) => format!(
                "the signed record {id} was disposed of by a retention policy; its tombstone \
                 stays, and the records.disposed Event at sequence {sequence} says why"
            ),
            E::Body(_) => "the request body ended before it was complete".to_owned(),
            E::ShuttingDown => "the server is shutting down".to_owned(),
            // Operators see the source chain in the log; clients see a safe message, which
            // names a full or failing disk (never a path).
            E::Backend(_) => match error.code() {
                ErrorCode::InsufficientStorage => {
                    "the server's storage is full; nothing was kept".to_owned()
                }
                ErrorCode::StorageUnavailable => {
                    "the server's storage failed to write; nothing was kept, retry later".to_owned()
                }
                _ => "internal storage error".to_owned(),
            },
            E::BlobStore(_) => {
                "the blob store did not answer; nothing was kept, retry later".to_owned()
            }
            E::Config(_) | E::InOrder => "internal storage error".to_owned(),
        };
        let sequence = match &error {
            E::Disposed(_, sequence) | E::RecordDisposed(_, sequence) => {
                std::num::NonZeroU64::new(*sequence)
            }
            _ => None,
        };
        Self {
            code: error.code(),
            detail,
            source: Some(error),
            snapshot,
            sequence,
            no_credentials: false,
        }
    }
}

impl IntoResponse for HttpError {
    fn into_response(self) -> Response {
        let status = status_of(self.code);
        self.log();
        let mut body = ErrorBody::new(status.as_u16(), self.code, self.detail);
        body.snapshot = self.snapshot;
        body.sequence = self.sequence;
        let json = serde_json::to_vec(&body).unwrap_or_default();
        let mut response = (status, json).into_response();
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        if status == StatusCode::UNAUTHORIZED {
            // RFC 9110 §11.6.1: a 401 names the scheme it wants (RFC 6750 for bearer tokens);
            // a request that sent no credentials gets no error code (RFC 6750 §3.1).
            let challenge = if self.no_credentials {
                "Bearer realm=\"weft\"".to_owned()
            } else {
                format!(
                    "Bearer realm=\"weft\", error=\"invalid_token\", error_description=\"{}\"",
                    self.code.as_str()
                )
            };
            if let Ok(value) = HeaderValue::from_str(&challenge) {
                response
                    .headers_mut()
                    .insert(header::WWW_AUTHENTICATE, value);
            }
        }
        if let Some(seconds) = retry_after(self.code) {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

pub type HttpResult<T> = Result<T, HttpError>;

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::LogThrottle;

    /// issue #40: a full disk is logged once per interval, the next line counting the ones
    /// left out (an injected clock: `admit` takes the instant).
    #[test]
    fn a_repeated_failure_is_logged_once_per_interval_with_a_count() {
        let throttle = LogThrottle::new(Duration::from_secs(60));
        let start = Instant::now();
        assert_eq!(throttle.admit(start), Some(0));
        for second in 1..=5 {
            assert_eq!(throttle.admit(start + Duration::from_secs(second)), None);
        }
        assert_eq!(throttle.admit(start + Duration::from_secs(60)), Some(5));
        assert_eq!(throttle.admit(start + Duration::from_secs(61)), None);
        assert_eq!(throttle.admit(start + Duration::from_secs(200)), Some(1));
    }
}
