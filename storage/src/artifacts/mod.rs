//! Artifacts: upload (streamed, dual-hashed, promoted only when verified, within quotas),
//! publication of signed manifests, reads (verified by `content/`), and the sweep of uploads
//! nothing cites. This file holds the blob row helper
//! the three share (the `blobs` table's, in `rows/blobs.rs`); each step has its own file.

pub(crate) mod binding;
mod collection;
mod disposal;
pub(crate) mod handle;
mod keeping;
mod publish;
mod quota;
mod reads;
mod records;
mod repair;
mod resumable;
mod reuse;
mod strays;
pub(crate) use reuse::reuse_record;
mod sweep;
mod upload;
mod verification;
mod with_content;
mod with_token;

pub(crate) use crate::rows::blobs::inline_bytes;
pub use reads::ListFilter;
pub(crate) use resumable::remove_orphan_uploads;
pub(crate) use strays::STRAY_AGE;
pub(crate) use sweep::SWEEP_WINDOW;
pub use sweep::SweepReport;
pub use upload::{UploadOutcome, Uploader};
pub use verification::Verification;

pub(crate) use crate::rows::blobs::row as blob_row;
