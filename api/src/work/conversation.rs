//! The WorkItem conversation before acceptance (CON-2, CON-3, CON-4): a candidate of a live
//! offer asks (`work.ask`), the Coordinator answers (`work.answer`). Both are signed Commands,
//! so the questions and answers are Events in the Group's log (`work.question_asked`,
//! `work.question_answered`), and neither moves the WorkItem: the table
//! ([`super::machine::decide`]) allows them in `offered` and keeps the state, as it does for a
//! decline.
//!
//! A question belongs to the offer it was asked on. While one of a candidate's questions on
//! an offer is unanswered, that candidate may not accept that offer (CON-3). A new
//! `work.offer` (or `work.revise_contract`) withdraws the old offer, and with it the old
//! offer's unanswered questions stop counting: they are `superseded`, answered by the new
//! offer itself (CON-4: a corrected contract, or a replacement WorkItem authorized and offered
//! instead); a candidate who still finds the new offer ambiguous asks again on it. They stay
//! in the log and the view as they were asked.
//!
//! Bounds, so a candidate cannot flood the log: [`MAX_TEXT_BYTES`] per text,
//! [`MAX_OPEN_PER_AGENT`] unanswered questions per WorkItem and Agent, and
//! [`MAX_QUESTIONS_PER_AGENT`] questions in all per WorkItem and Agent.

use serde::{Deserialize, Serialize};

use crate::error::{ErrorCode, Rejection};
use crate::id::Id;

/// The longest question or answer text.
pub const MAX_TEXT_BYTES: usize = 2048;
/// Unanswered questions of one Agent on one WorkItem's live offers.
pub const MAX_OPEN_PER_AGENT: u64 = 4;
/// Questions of one Agent on one WorkItem, answered or not.
pub const MAX_QUESTIONS_PER_AGENT: u64 = 32;
/// Questions a WorkItem's view lists (the newest; the log has them all).
pub const QUESTIONS_SHOWN: u64 = 64;

/// `work.ask` (CON-2): a candidate of the live offer `offerId` raises an ambiguity.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WorkAsk {
    pub work_item_id: Id,
    pub offer_id: Id,
    /// Unique within the WorkItem; chosen by the asker.
    pub question_id: Id,
    pub text: String,
}

impl WorkAsk {
    /// The checks beyond the shape: the text's bounds.
    pub fn check(&self) -> Result<(), Rejection> {
        text(&self.text)
    }
}

/// How the Coordinator resolves the ambiguity (CON-4).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Resolution {
    /// The answer's text settles it; the contract stands and the offer may be accepted.
    #[default]
    Clarified,
    /// A new `work.offer` carrying the corrected contract follows.
    NewOffer,
    /// A replacement WorkItem is authorized instead of this one.
    ReplacementWorkItem,
}

/// `work.answer` (CON-2, CON-4): the Coordinator answers a question.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WorkAnswer {
    pub work_item_id: Id,
    pub question_id: Id,
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolution: Option<Resolution>,
}

impl WorkAnswer {
    /// The checks beyond the shape: the text's bounds.
    pub fn check(&self) -> Result<(), Rejection> {
        text(&self.text)
    }
}

/// A question and its answer, in `GET /v1/workitems/{id}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QuestionView {
    pub question_id: String,
    pub offer_id: String,
    pub agent_id: String,
    pub text: String,
    pub asked_at: String,
    /// The `work.question_asked` Event.
    pub sequence: u64,
    /// `open` (unanswered, its offer live: blocks its asker's acceptance, CON-3), `answered`,
    /// or `superseded` (unanswered, its offer no longer live: replaced, accepted by another
    /// candidate, or expired; CON-4).
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<AnswerView>,
}

/// The Coordinator's answer to a question.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AnswerView {
    pub text: String,
    pub resolution: Resolution,
    pub answered_by: String,
    pub answered_at: String,
    /// The `work.question_answered` Event.
    pub sequence: u64,
}

fn text(text: &str) -> Result<(), Rejection> {
    if text.trim().is_empty() || text.len() > MAX_TEXT_BYTES {
        return Err(Rejection::new(
            ErrorCode::InvalidCommand,
            format!("text must be 1..={MAX_TEXT_BYTES} bytes (CON-2)"),
        ));
    }
    Ok(())
}
