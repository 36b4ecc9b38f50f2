//! The lifecycle of what is stored, as the operator sets it (issue #46, DESIGN §16):
//! retention policies (`policies.rs`), legal holds (`holds.rs`), each Group's usage and quota
//! (`usage.rs`), the trimming of old Command and idempotent answers (`answers.rs`), and of rows
//! nothing reads any more (`spent.rs`). Each
//! change and its Event commit in one transaction. Collection itself, which
//! deletes bytes, is the artifacts room's (`artifacts/collection.rs`): it reads the policies
//! and holds through their rows, and the rule through `weft_api::lifecycle`.
//!
//! A policy or a hold change on a shared index takes the disposal fence
//! (`rows::blob_disposals::fence`), so a collection batch deciding in another server's
//! transaction either saw it or had committed before it.

mod answers;
pub(crate) mod handle;
mod holds;
#[cfg(feature = "bench-support")]
pub(crate) use answers::ANSWER_BATCH;
pub use holds::{APPROVER_HOLDS, GROUP_HOLDS, HoldBy};
mod policies;
mod spent;
mod usage;
