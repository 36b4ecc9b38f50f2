//! Missions and WorkItems (DESIGN §10, REQUIREMENTS §10): the work contract, the Command
//! envelope and its typed payloads, the state machine as pure functions, and the Events that
//! carry each change with the state it leads to (so the projection is a fold of the log).

pub mod budget;
pub mod command;
pub mod contract;
pub mod conversation;
mod event_kind;
pub mod events;
pub mod machine;
pub mod offline;
pub mod views;

pub use command::{COMMAND_TYPE, Command, CommandBody, CommandType};
pub use contract::{SelectionBasis, WorkContract};
#[cfg(test)]
mod wire_names_tests;

pub use machine::{Facts, MissionState, OfferStanding, Transition, WorkState};

/// A contract's duration in seconds (lease, grace, backoff) as a `chrono::Duration`, capped at
/// 100 years so that adding it to an instant never overflows.
pub fn capped_seconds(seconds: u64) -> chrono::Duration {
    const CAP: i64 = 100 * 365 * 86_400;
    chrono::Duration::seconds(i64::try_from(seconds).unwrap_or(CAP).min(CAP))
}
