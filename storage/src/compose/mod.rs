//! What spans features, composed from their handles (see `context.rs`): features never
//! import each other, so an answer that needs two of them is put together here, as
//! `lifecycle.rs` and `fsck.rs` put the engine together and check it whole.

mod context;
