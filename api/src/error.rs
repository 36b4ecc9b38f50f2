//! Stable error codes, and `Rejection`: a protocol rule said no.
//!
//! A code is part of the wire contract: clients branch on it, tests assert it. Add codes;
//! never rename one. The problem+json body that carries a code is in `problem`; this module
//! imports nothing of the crate, so every module may use it.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Every `code` the server can put in a problem+json body.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    BadRequest,
    InvalidDigest,
    InvalidId,
    InvalidJson,
    InvalidManifest,
    InvalidEvidence,
    InvalidRange,
    DigestMismatch,
    BodyTooLarge,
    IncompleteBody,
    Timeout,
    Unauthorized,
    Forbidden,
    StaleSession,
    StaleMembership,
    AgentDeactivated,
    KeyRetired,
    NotFound,
    BlobNotFound,
    MethodNotAllowed,
    UnsupportedMediaType,
    UnknownAgent,
    UnknownKey,
    UnknownGroup,
    NotAMember,
    BadSignature,
    WrongPayloadType,
    ProducerMismatch,
    UnknownSource,
    UnknownArtifact,
    UnknownEvidence,
    UnknownWorkItem,
    SupersedesMismatch,
    /// Evidence cites an artifact not published for its Mission and WorkItem.
    MissionMismatch,
    CursorAhead,
    CursorTooOld,
    NoPath,
    IdempotencyKeyReused,
    Cycle,
    Conflict,
    ClockSkew,
    NonceReused,
    IntegrityFailure,
    ShuttingDown,
    TooManyUploads,
    /// One Agent has as many downloads of stored files running as it may (429).
    TooManyDownloads,
    /// An `If-Match` precondition did not hold (412).
    PreconditionFailed,
    /// One session or Agent has as many event streams open as it may (429).
    TooManyStreams,
    UploadQuotaExceeded,
    RateLimited,
    /// A per-Group or per-producer cap on stored records is reached (409): open proposals,
    /// refused publications kept as inert records.
    QuotaExceeded,
    Overloaded,
    /// The server's disk is full (ENOSPC): the write was not kept. Answered 507.
    InsufficientStorage,
    /// The server's disk failed (EIO): the write was not kept; retry later. Answered 503.
    StorageUnavailable,
    /// The blob store (S3) did not answer after bounded retries: nothing was kept; retry
    /// later. Answered 503.
    BlobStoreUnavailable,
    InvalidCommand,
    GroupMismatch,
    UnknownExtension,
    IllegalTransition,
    StaleRevision,
    StaleLease,
    OfferExpired,
    OfferWithdrawn,
    NotEligible,
    ApprovalRequired,
    EvidenceMissing,
    BudgetExceeded,
    /// OFL-6/7: the bounded-offline-execution binding disagrees with the lease record.
    OfflineBindingMismatch,
    /// OFL-9: buffered outside the historical lease plus grace window.
    OfflineOutsideGrace,
    /// OFL-9: buffered after the lease was closed (released, cancelled, failed).
    OfflineLeaseClosed,
    /// OFL-9: the WorkItem's owner changed since the lease.
    OfflineOwnerChanged,
    /// OFL-9: outside the bound WorkItem.
    OfflineWrongWorkItem,
    /// A citation of another Mission's Artifact that was not published as reusable (CTX-6).
    NotReusable,
    /// A Context Package payload is malformed or misses a CTX-2 item.
    InvalidContext,
    /// `previous` names no published version of the package, or not its latest (CTX-4).
    ContextPreviousMismatch,
    /// `version` skips past the one after `previous` (CTX-4).
    ContextVersionSkipped,
    /// `previous` names a version of another package (CTX-4).
    ContextOtherPackage,
    /// `previous` names a version scoped to another Mission (CTX-4).
    ContextOtherMission,
    /// `sourceEvents` reaches past the Group's head (CTX-1).
    EventsOutOfRange,
    /// A cited Artifact's classification forbids forwarding to another Group (CTX-7).
    ClassificationForbids,
    /// The artifact's bytes were disposed of by a retention policy (410); the answer names
    /// the `artifact.disposed` Event's sequence.
    Disposed,
    /// A legal hold keeps what the request would let go (409); the answer lists the holds.
    Held,
    /// A stored Command or idempotent answer is older than the server keeps answers: the
    /// request is not executed again (409).
    CommandExpired,
    /// A resumable upload's chunk does not start at the durable offset (answered with it).
    UploadOffsetMismatch,
    Internal,
}

impl ErrorCode {
    /// The wire string, e.g. `digest_mismatch`.
    pub fn as_str(self) -> &'static str {
        // serde_json of a unit variant is its quoted name; computed once per call, never fails
        // for this enum because every variant is a unit variant.
        match self {
            Self::BadRequest => "bad_request",
            Self::InvalidDigest => "invalid_digest",
            Self::InvalidId => "invalid_id",
            Self::InvalidJson => "invalid_json",
            Self::InvalidManifest => "invalid_manifest",
            Self::InvalidEvidence => "invalid_evidence",
            Self::InvalidRange => "invalid_range",
            Self::DigestMismatch => "digest_mismatch",
            Self::BodyTooLarge => "body_too_large",
            Self::IncompleteBody => "incomplete_body",
            Self::Timeout => "timeout",
            Self::Unauthorized => "unauthorized",
            Self::Forbidden => "forbidden",
            Self::StaleSession => "stale_session",
            Self::StaleMembership => "stale_membership",
            Self::AgentDeactivated => "agent_deactivated",
            Self::KeyRetired => "key_retired",
            Self::NotFound => "not_found",
            Self::BlobNotFound => "blob_not_found",
            Self::MethodNotAllowed => "method_not_allowed",
            Self::UnsupportedMediaType => "unsupported_media_type",
            Self::UnknownAgent => "unknown_agent",
            Self::UnknownKey => "unknown_key",
            Self::UnknownGroup => "unknown_group",
            Self::NotAMember => "not_a_member",
            Self::BadSignature => "bad_signature",
            Self::WrongPayloadType => "wrong_payload_type",
            Self::ProducerMismatch => "producer_mismatch",
            Self::UnknownSource => "unknown_source",
            Self::UnknownArtifact => "unknown_artifact",
            Self::UnknownEvidence => "unknown_evidence",
            Self::UnknownWorkItem => "unknown_work_item",
            Self::SupersedesMismatch => "supersedes_mismatch",
            Self::MissionMismatch => "mission_mismatch",
            Self::CursorAhead => "cursor_ahead",
            Self::CursorTooOld => "cursor_too_old",
            Self::NoPath => "no_path",
            Self::IdempotencyKeyReused => "idempotency_key_reused",
            Self::Cycle => "cycle",
            Self::Conflict => "conflict",
            Self::ClockSkew => "clock_skew",
            Self::NonceReused => "nonce_reused",
            Self::IntegrityFailure => "integrity_failure",
            Self::ShuttingDown => "shutting_down",
            Self::TooManyUploads => "too_many_uploads",
            Self::TooManyDownloads => "too_many_downloads",
            Self::TooManyStreams => "too_many_streams",
            Self::PreconditionFailed => "precondition_failed",
            Self::UploadQuotaExceeded => "upload_quota_exceeded",
            Self::RateLimited => "rate_limited",
            Self::QuotaExceeded => "quota_exceeded",
            Self::Overloaded => "overloaded",
            Self::InsufficientStorage => "insufficient_storage",
            Self::StorageUnavailable => "storage_unavailable",
            Self::BlobStoreUnavailable => "blob_store_unavailable",
            Self::InvalidCommand => "invalid_command",
            Self::GroupMismatch => "group_mismatch",
            Self::UnknownExtension => "unknown_extension",
            Self::IllegalTransition => "illegal_transition",
            Self::StaleRevision => "stale_revision",
            Self::StaleLease => "stale_lease",
            Self::OfferExpired => "offer_expired",
            Self::OfferWithdrawn => "offer_withdrawn",
            Self::NotEligible => "not_eligible",
            Self::ApprovalRequired => "approval_required",
            Self::EvidenceMissing => "evidence_missing",
            Self::BudgetExceeded => "budget_exceeded",
            Self::OfflineBindingMismatch => "offline_binding_mismatch",
            Self::OfflineOutsideGrace => "offline_outside_grace",
            Self::OfflineLeaseClosed => "offline_lease_closed",
            Self::OfflineOwnerChanged => "offline_owner_changed",
            Self::OfflineWrongWorkItem => "offline_wrong_work_item",
            Self::NotReusable => "not_reusable",
            Self::InvalidContext => "invalid_context",
            Self::ContextPreviousMismatch => "context_previous_mismatch",
            Self::ContextVersionSkipped => "context_version_skipped",
            Self::ContextOtherPackage => "context_other_package",
            Self::ContextOtherMission => "context_other_mission",
            Self::EventsOutOfRange => "events_out_of_range",
            Self::ClassificationForbids => "classification_forbids",
            Self::UploadOffsetMismatch => "upload_offset_mismatch",
            Self::Disposed => "disposed",
            Self::Held => "held",
            Self::CommandExpired => "command_expired",
            Self::Internal => "internal",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A protocol rule said no. Carries the code and a message that is safe to show anyone.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct Rejection {
    pub code: ErrorCode,
    pub message: String,
}

impl Rejection {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn as_str_agrees_with_serde() {
        for code in [
            ErrorCode::DigestMismatch,
            ErrorCode::InvalidId,
            ErrorCode::MethodNotAllowed,
            ErrorCode::IntegrityFailure,
            ErrorCode::ShuttingDown,
            ErrorCode::InvalidEvidence,
            ErrorCode::UnknownArtifact,
            ErrorCode::UnknownEvidence,
            ErrorCode::UnknownWorkItem,
            ErrorCode::SupersedesMismatch,
            ErrorCode::MissionMismatch,
            ErrorCode::CursorAhead,
            ErrorCode::CursorTooOld,
            ErrorCode::NoPath,
            ErrorCode::IdempotencyKeyReused,
            ErrorCode::TooManyUploads,
            ErrorCode::TooManyDownloads,
            ErrorCode::TooManyStreams,
            ErrorCode::PreconditionFailed,
            ErrorCode::UploadQuotaExceeded,
            ErrorCode::RateLimited,
            ErrorCode::QuotaExceeded,
            ErrorCode::Overloaded,
            ErrorCode::InsufficientStorage,
            ErrorCode::StorageUnavailable,
            ErrorCode::BlobStoreUnavailable,
            ErrorCode::OfflineBindingMismatch,
            ErrorCode::OfflineOutsideGrace,
            ErrorCode::OfflineLeaseClosed,
            ErrorCode::OfflineOwnerChanged,
            ErrorCode::OfflineWrongWorkItem,
            ErrorCode::NotReusable,
            ErrorCode::InvalidContext,
            ErrorCode::ContextPreviousMismatch,
            ErrorCode::ContextVersionSkipped,
            ErrorCode::ContextOtherPackage,
            ErrorCode::ContextOtherMission,
            ErrorCode::EventsOutOfRange,
            ErrorCode::ClassificationForbids,
            ErrorCode::UploadOffsetMismatch,
            ErrorCode::Disposed,
            ErrorCode::Held,
            ErrorCode::CommandExpired,
        ] {
            let json = serde_json::to_string(&code).expect("unit variant");
            assert_eq!(json, format!("\"{}\"", code.as_str()));
        }
    }
}
