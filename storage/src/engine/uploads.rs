//! What the engine keeps in memory about uploads: counters of the path each took (tests
//! compare them, `artifacts/upload.rs`) and the resumable upload sessions a request is working
//! on right now (`artifacts/resumable.rs`).

use std::collections::HashSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use weft_api::ErrorCode;

use crate::error::{Error, reject};

/// How uploads went through the engine since it opened: which path they took and how many
/// bytes they wrote to staging. Tests compare them to show that bytes held by another Group
/// take exactly the path new bytes take (no timing oracle).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UploadCounters {
    /// Uploads streamed into staging (and fsynced there on the local backend).
    pub staged_uploads: u64,
    /// Bytes those uploads wrote to staging.
    pub staged_bytes: u64,
    /// Uploads of bytes the uploader could already see, hashed without being written.
    pub hashed_only_uploads: u64,
}

/// The engine's live counters behind [`UploadCounters`].
#[derive(Debug, Default)]
pub(crate) struct Counters {
    staged_uploads: AtomicU64,
    staged_bytes: AtomicU64,
    hashed_only_uploads: AtomicU64,
}

impl Counters {
    /// One more upload staged, of `size` bytes.
    pub(crate) fn staged(&self, size: u64) {
        self.staged_uploads.fetch_add(1, Ordering::Relaxed);
        self.staged_bytes.fetch_add(size, Ordering::Relaxed);
    }

    /// One more upload of bytes the uploader could already see, hashed without being written.
    pub(crate) fn hashed_only(&self) {
        self.hashed_only_uploads.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> UploadCounters {
        UploadCounters {
            staged_uploads: self.staged_uploads.load(Ordering::Relaxed),
            staged_bytes: self.staged_bytes.load(Ordering::Relaxed),
            hashed_only_uploads: self.hashed_only_uploads.load(Ordering::Relaxed),
        }
    }
}

/// Upload sessions a request is working on right now. A std Mutex: each critical section is
/// one set operation, with no `.await` inside.
#[derive(Debug, Default)]
pub(crate) struct Claims(Mutex<HashSet<String>>);

/// One claimed session; dropping it releases the claim.
pub(crate) struct Claim<'a> {
    claims: &'a Claims,
    upload_id: String,
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        self.claims
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.upload_id);
    }
}

impl Claims {
    pub(crate) fn try_claim(&self, upload_id: &str) -> Option<Claim<'_>> {
        let mut held = self.0.lock().unwrap_or_else(|p| p.into_inner());
        held.insert(upload_id.to_owned()).then(|| Claim {
            claims: self,
            upload_id: upload_id.to_owned(),
        })
    }

    pub(crate) fn claim(&self, upload_id: &str) -> Result<Claim<'_>, Error> {
        self.try_claim(upload_id).ok_or_else(|| {
            reject(
                ErrorCode::Conflict,
                "another request is working on this upload; retry once it has ended",
            )
        })
    }
}
