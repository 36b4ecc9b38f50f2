//! The effect of each WorkItem Command, one file per Command type or small family (as
//! mini-redis keeps one file per command): what it does to the rows and which Events it
//! appends, once the table (`weft_api::work::machine::decide`) and the rule-specific checks
//! accepted it. `apply.rs` delegates to them through an exhaustive `match` on the Command type,
//! so a new `CommandType` does not compile until it has its effect. The owner's Commands while
//! it executes (`lease.renew`, `work.progress`, `preemption.request`) are the family in
//! `owner.rs`, the conversation (`work.ask`, `work.answer`) the one in `questions.rs`; Mission
//! Commands, proposals and `work.authorize` are in `missions.rs`.

pub(super) mod accept_offer;
pub(super) mod accept_result;
pub(super) mod block;
pub(super) mod checkpoint;
pub(super) mod create_child;
pub(super) mod decline_offer;
pub(super) mod end;
pub(super) mod grant_execution;
pub(super) mod offer;
pub(super) mod revise_contract;
pub(super) mod start;
pub(super) mod submit;
pub(super) mod unblock;

use weft_api::work::events::WorkEventKind;
use weft_api::work::machine::WorkState;

use super::WorkRow;

/// An accepted WorkItem Command about to take effect: the row as the checks left it (its
/// usage already charged), the state the table moves it to, the Event that says so and that
/// Event's `detail` (the Command's payload). Each effect answers the row after it.
pub(super) struct Step {
    pub(super) row: WorkRow,
    pub(super) next: WorkState,
    pub(super) kind: WorkEventKind,
    pub(super) payload: serde_json::Value,
}
