//! The weft server and CLI as a library: HTTP routes, authentication, configuration, the
//! accept loop with its timeouts, the command-line client, and telemetry.
//!
//! This is the only crate that knows HTTP. It turns requests into calls on
//! `weft_storage::Store` and `storage::Error`s into problem+json (in `http::error`, the only
//! place that picks status codes).

pub mod cli;
pub mod config;
pub mod connections;
pub mod http;
mod keyfile;
pub mod serve;
pub mod telemetry;
pub mod witnesses;
pub mod worker;

pub use http::{AppState, app};
pub use serve::serve;
