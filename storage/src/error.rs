//! What can go wrong in the engine, phrased for its callers.

use std::sync::Arc;

use weft_api::{ArtifactId, ErrorCode, Rejection};

/// An opaque backend failure (SQLite, object_store, the filesystem). Cloneable so one failed
/// commit can be reported to every caller in its batch; the source chain is kept for logs.
pub type BackendError = Arc<dyn std::error::Error + Send + Sync + 'static>;

#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// A protocol rule or an input check said no; nothing was changed.
    #[error(transparent)]
    Rejected(#[from] Rejection),
    /// Stored bytes no longer match their address; the blob is quarantined.
    #[error("stored bytes of {0} do not match their address")]
    Corrupt(ArtifactId),
    /// The request body failed or stopped before its end; nothing was kept.
    #[error("request body failed: {0}")]
    Body(String),
    /// The requested position was compacted away (DLV-9); restore from this snapshot.
    #[error("the log before sequence {} was compacted into a snapshot", .0.reference.sequence)]
    CursorTooOld(Box<weft_api::views::SignedSnapshot>),
    /// The artifact's bytes were disposed of by policy: its `artifact.disposed` Event is this
    /// sequence of the reader's Group (issue #46).
    #[error("the bytes of {0} were disposed of by policy (artifact.disposed at sequence {1})")]
    Disposed(ArtifactId, u64),
    /// A manifest's or Evidence record's signed envelope was disposed of by policy: its
    /// `records.disposed` Event is this sequence of its Group (issue #46).
    #[error("the record {0} was disposed of by policy (records.disposed at sequence {1})")]
    RecordDisposed(ArtifactId, u64),
    /// The engine is stopping and takes no more work.
    #[error("storage is shutting down")]
    ShuttingDown,
    #[error("storage backend failed")]
    Backend(#[source] BackendError),
    /// The remote blob store (S3) did not answer, or answered with an error, after its
    /// bounded retries: nothing was kept; retry later.
    #[error("the blob store is unavailable")]
    BlobStore(#[source] BackendError),
    /// The store cannot be opened as configured (a bad location, missing credentials, a blob
    /// store that does not answer at start).
    #[error("{0}")]
    Config(String),
    /// A job found, under its Group's lock, that it must lock other Groups too: rolled back
    /// (nothing of it kept), it runs again with every lock taken in Group order
    /// ([`crate::db::Db`]'s `write_in_or_in_order`). Never leaves the engine.
    #[error("the job must run again with its Groups' locks in order")]
    InOrder,
}

impl Error {
    pub(crate) fn reject(code: ErrorCode, message: impl Into<String>) -> Self {
        Self::Rejected(Rejection::new(code, message))
    }

    pub(crate) fn backend(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::Backend(Arc::new(error))
    }

    /// The stable code this error is reported under.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::Rejected(rejection) => rejection.code,
            Self::Corrupt(_) => ErrorCode::IntegrityFailure,
            Self::Body(_) => ErrorCode::IncompleteBody,
            Self::CursorTooOld(_) => ErrorCode::CursorTooOld,
            Self::Disposed(..) | Self::RecordDisposed(..) => ErrorCode::Disposed,
            Self::ShuttingDown => ErrorCode::ShuttingDown,
            Self::BlobStore(_) => ErrorCode::BlobStoreUnavailable,
            Self::Config(_) | Self::InOrder => ErrorCode::Internal,
            Self::Backend(error) => match disk_failure(error.as_ref()) {
                Some(DiskFailure::Full) => ErrorCode::InsufficientStorage,
                Some(DiskFailure::Io) => ErrorCode::StorageUnavailable,
                None => ErrorCode::Internal,
            },
        }
    }
}

impl Error {
    /// Whether this is PostgreSQL's answer to a job that lost a race of locks with another
    /// server's transaction (a deadlock, 40P01; a serialisation failure, 40001): its savepoint
    /// was rolled back and nothing of it kept, so running it again is safe.
    pub(crate) fn lost_a_race(&self) -> bool {
        let Self::Backend(error) = self else {
            return false;
        };
        let mut current: Option<&(dyn std::error::Error + 'static)> = Some(error.as_ref());
        while let Some(error) = current {
            let postgres = match error.downcast_ref::<crate::sql::SqlError>() {
                Some(crate::sql::SqlError::Postgres(postgres)) => Some(postgres),
                _ => error.downcast_ref::<postgres::Error>(),
            };
            if let Some(code) = postgres.and_then(postgres::Error::code) {
                return matches!(code.code(), "40P01" | "40001");
            }
            current = error.source();
        }
        false
    }
}

/// What a failed write says about the disk, found anywhere in an error's source chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DiskFailure {
    /// `ENOSPC` (`io::ErrorKind::StorageFull`), SQLite's `SQLITE_FULL`.
    Full,
    /// `EIO`, SQLite's `SQLITE_IOERR`; an index server that cannot be reached.
    Io,
}

fn disk_failure(error: &(dyn std::error::Error + 'static)) -> Option<DiskFailure> {
    const ENOSPC: i32 = 28;
    const EIO: i32 = 5;
    let mut current = Some(error);
    while let Some(error) = current {
        if let Some(io) = error.downcast_ref::<std::io::Error>() {
            if io.raw_os_error() == Some(ENOSPC) || io.kind() == std::io::ErrorKind::StorageFull {
                return Some(DiskFailure::Full);
            }
            // EIO; or the index's server cannot be reached (PostgreSQL restarting, a lost
            // connection): nothing was kept, retry later.
            if io.raw_os_error() == Some(EIO)
                || matches!(
                    io.kind(),
                    std::io::ErrorKind::ConnectionRefused
                        | std::io::ErrorKind::ConnectionReset
                        | std::io::ErrorKind::ConnectionAborted
                        | std::io::ErrorKind::NotConnected
                        | std::io::ErrorKind::BrokenPipe
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::UnexpectedEof
                )
            {
                return Some(DiskFailure::Io);
            }
        }
        if let Some(postgres) = error.downcast_ref::<postgres::Error>()
            && let Some(failure) = postgres_failure(postgres)
        {
            return Some(failure);
        }
        let sqlite = match error.downcast_ref::<crate::sql::SqlError>() {
            Some(crate::sql::SqlError::Sqlite(sqlite)) => Some(sqlite),
            Some(crate::sql::SqlError::Postgres(postgres)) => {
                if let Some(failure) = postgres_failure(postgres) {
                    return Some(failure);
                }
                None
            }
            _ => error.downcast_ref::<rusqlite::Error>(),
        };
        if let Some(sqlite) = sqlite {
            match sqlite.sqlite_error_code() {
                Some(rusqlite::ErrorCode::DiskFull) => return Some(DiskFailure::Full),
                Some(rusqlite::ErrorCode::SystemIoFailure) => return Some(DiskFailure::Io),
                _ => {}
            }
        }
        current = error.source();
    }
    None
}

impl From<crate::sql::SqlError> for Error {
    fn from(error: crate::sql::SqlError) -> Self {
        Self::backend(error)
    }
}

impl From<rusqlite::Error> for Error {
    fn from(error: rusqlite::Error) -> Self {
        Self::backend(error)
    }
}

impl From<object_store::Error> for Error {
    fn from(error: object_store::Error) -> Self {
        if out_of_descriptors(&error) {
            // Not a fault of the store: the process is at its descriptor limit. The client is
            // told to retry (503 with Retry-After) instead of seeing a 500.
            tracing::warn!(%error, "out of file descriptors");
            return Self::reject(
                ErrorCode::Overloaded,
                "the server is out of file descriptors; retry later",
            );
        }
        if let object_store::Error::Generic { store: "S3", .. } = &error {
            // Logged here, once, with its cause; the client sees only the code.
            tracing::warn!(%error, "the S3 blob store failed");
            return Self::BlobStore(Arc::new(error));
        }
        Self::backend(error)
    }
}

/// Whether an error's source chain holds `EMFILE` or `ENFILE`.
fn out_of_descriptors(error: &(dyn std::error::Error + 'static)) -> bool {
    const EMFILE: i32 = 24;
    const ENFILE: i32 = 23;
    let mut current = Some(error);
    while let Some(error) = current {
        if let Some(io) = error.downcast_ref::<std::io::Error>()
            && matches!(io.raw_os_error(), Some(EMFILE | ENFILE))
        {
            return true;
        }
        current = error.source();
    }
    false
}

/// A protocol refusal with its stable code (shorthand for [`Error::reject`]).
pub(crate) fn reject(code: ErrorCode, message: impl Into<String>) -> Error {
    Error::reject(code, message)
}

/// What an error of the index's server (PostgreSQL) says: see [`postgres_code_failure`].
fn postgres_failure(error: &postgres::Error) -> Option<DiskFailure> {
    postgres_code_failure(
        error.code().map(postgres::error::SqlState::code),
        error.is_closed(),
    )
}

/// What a PostgreSQL SQLSTATE says: `disk_full` (53100); `io_error` (58030), a deadlock, a
/// serialisation failure, a lock or statement timeout (40P01, 40001, 55P03, 57014), the server
/// shutting down, restarting or starting (57P01…57P03), too many connections (53300), a lost
/// connection (08…, or closed): nothing was kept, retry later. So is a foreign-key or unique
/// violation (23503, 23505): every check ran in the transaction, so only another server's
/// concurrent commit gets there (a citation racing the sweep that removed its blob), and the
/// retry gets the answer that commit makes true.
fn postgres_code_failure(code: Option<&str>, closed: bool) -> Option<DiskFailure> {
    match code {
        Some("53100") => Some(DiskFailure::Full),
        Some("58030" | "40P01" | "40001" | "55P03" | "57014" | "53300" | "23503" | "23505") => {
            Some(DiskFailure::Io)
        }
        Some(code) if code.starts_with("08") || code.starts_with("57P") => Some(DiskFailure::Io),
        None if closed => Some(DiskFailure::Io),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rusqlite::ffi;
    use std::io;

    /// A PostgreSQL failure that left nothing kept is "retry later", including a constraint
    /// that only another server's concurrent commit can break (#43: a citation racing the
    /// sweep answered 500); a syntax error is still internal.
    #[test]
    fn postgres_codes_that_mean_retry_later() {
        for code in [
            "40P01", "40001", "23503", "23505", "08006", "57P01", "53300",
        ] {
            assert_eq!(
                postgres_code_failure(Some(code), false),
                Some(DiskFailure::Io),
                "{code}"
            );
        }
        assert_eq!(
            postgres_code_failure(Some("53100"), false),
            Some(DiskFailure::Full)
        );
        assert_eq!(postgres_code_failure(Some("42601"), false), None);
        assert_eq!(postgres_code_failure(None, true), Some(DiskFailure::Io));
        assert_eq!(postgres_code_failure(None, false), None);
    }

    /// ENOSPC and EIO are found wherever they sit in the source chain: an `io::Error` of ours,
    /// one inside an object_store error, SQLite's own codes. Anything else stays `internal`.
    #[test]
    fn a_full_or_failing_disk_has_its_own_code() {
        let in_store = |raw| {
            Error::from(object_store::Error::Generic {
                store: "test",
                source: Box::new(io::Error::from_raw_os_error(raw)),
            })
        };
        let sqlite =
            |code| Error::from(rusqlite::Error::SqliteFailure(ffi::Error::new(code), None));
        let cases = [
            (
                Error::backend(io::Error::from_raw_os_error(28)),
                ErrorCode::InsufficientStorage,
            ),
            (
                Error::backend(io::Error::from(io::ErrorKind::StorageFull)),
                ErrorCode::InsufficientStorage,
            ),
            (in_store(28), ErrorCode::InsufficientStorage),
            (sqlite(ffi::SQLITE_FULL), ErrorCode::InsufficientStorage),
            (
                Error::backend(io::Error::from_raw_os_error(5)),
                ErrorCode::StorageUnavailable,
            ),
            (in_store(5), ErrorCode::StorageUnavailable),
            (
                sqlite(ffi::SQLITE_IOERR_WRITE),
                ErrorCode::StorageUnavailable,
            ),
            (
                Error::backend(io::Error::other("something else")),
                ErrorCode::Internal,
            ),
            (sqlite(ffi::SQLITE_CORRUPT), ErrorCode::Internal),
        ];
        for (error, code) in cases {
            assert_eq!(error.code(), code, "{error:?}");
        }
    }
}
