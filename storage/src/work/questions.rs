//! The WorkItem conversation before acceptance (CON-2, CON-3, CON-4): `work.ask` and
//! `work.answer`'s rows in `work_questions`, the CON-3 fact `work.accept_offer` reads, and the
//! questions of the WorkItem view. The table already decided (`weft_api::work::machine`) that
//! the Command may run in this state for this caller; what is left here is the question's own
//! standing (taken ids, a second answer) and the bounds of `weft_api::work::conversation`.
//!
//! A question is `open` while unanswered and its offer live; once its offer is no longer live
//! (replaced by a new `work.offer` or by `work.revise_contract`, accepted by another
//! candidate, or expired) an unanswered question is `superseded`: the new offer is its answer
//! (CON-4), so it neither blocks an acceptance nor counts against its asker's bound.

use crate::sql::{Ahead, Connection};
use weft_api::ErrorCode;
use weft_api::work::conversation::{
    AnswerView, MAX_OPEN_PER_AGENT, MAX_QUESTIONS_PER_AGENT, QUESTIONS_SHOWN, QuestionView,
    Resolution,
};
use weft_api::work::conversation::{WorkAnswer, WorkAsk};
use weft_api::work::events::WorkEventKind;
use weft_api::work::machine::OfferStanding;

use super::WorkRow;
use super::ctx::Ctx;
use super::{name, parse_name};
use crate::error::{Error, reject};
use crate::rows::work_questions;

/// `work.ask` (CON-2): records the question with its `work.question_asked` Event. The table
/// checked that the caller is a candidate of the live offer it names.
pub(super) fn ask(
    ctx: &mut Ctx<'_, '_>,
    row: &mut WorkRow,
    kind: WorkEventKind,
    payload: serde_json::Value,
    p: &WorkAsk,
) -> Result<(), Error> {
    let asker = ctx.command.agent_id.as_str();
    if work_questions::offer_of(ctx.tx, &row.work_item_id, p.question_id.as_str())?.is_some() {
        return Err(reject(
            ErrorCode::Conflict,
            format!(
                "question id {} is taken on {}",
                p.question_id, row.work_item_id
            ),
        ));
    }
    let (n_open, n_asked) =
        work_questions::counts(ctx.tx, &ctx.now_text, &row.work_item_id, asker)?;
    if n_open >= MAX_OPEN_PER_AGENT || n_asked >= MAX_QUESTIONS_PER_AGENT {
        return Err(reject(
            ErrorCode::Conflict,
            format!(
                "{asker} has {n_open} unanswered and {n_asked} questions on {}: at most \
                 {MAX_OPEN_PER_AGENT} unanswered and {MAX_QUESTIONS_PER_AGENT} in all (CON-2)",
                row.work_item_id
            ),
        ));
    }
    ctx.record(row, kind, payload)?;
    let sequence = ctx.appended.last().map_or(0, |e| e.sequence);
    work_questions::insert(
        ctx.tx,
        &work_questions::NewQuestion {
            work_item_id: &row.work_item_id,
            question_id: p.question_id.as_str(),
            offer_id: p.offer_id.as_str(),
            agent_id: asker,
            text: &p.text,
            asked_at: &ctx.now_text,
            asked_sequence: sequence,
        },
    )?;
    Ok(())
}

/// `work.answer` (CON-2, CON-4): the Coordinator's answer, once, with its
/// `work.question_answered` Event. The table checked that the question's offer is live.
pub(super) fn answer(
    ctx: &mut Ctx<'_, '_>,
    row: &mut WorkRow,
    kind: WorkEventKind,
    payload: serde_json::Value,
    p: &WorkAnswer,
) -> Result<(), Error> {
    let answered = work_questions::answered_by(ctx.tx, &row.work_item_id, p.question_id.as_str())?;
    if let Some(by) = answered {
        return Err(reject(
            ErrorCode::Conflict,
            format!("question {} was answered already by {by}", p.question_id),
        ));
    }
    ctx.record(row, kind, payload)?;
    let sequence = ctx.appended.last().map_or(0, |e| e.sequence);
    work_questions::answer(
        ctx.tx,
        &work_questions::NewAnswer {
            work_item_id: &row.work_item_id,
            question_id: p.question_id.as_str(),
            text: &p.text,
            resolution: &name(&p.resolution.unwrap_or_default())?,
            answered_by: ctx.command.agent_id.as_str(),
            answered_at: &ctx.now_text,
            sequence,
        },
    )?;
    Ok(())
}

/// The standing of the offer question `question_id` was asked on, for `work.answer`'s table
/// row; an unknown question is an unknown offer (`not_found`).
pub(super) fn standing(
    ctx: &Ctx<'_, '_>,
    row: &WorkRow,
    question_id: &str,
) -> Result<OfferStanding, Error> {
    match work_questions::offer_of(ctx.tx, &row.work_item_id, question_id)? {
        Some(offer_id) => super::checks::offer_standing(ctx, row, &offer_id),
        None => Ok(OfferStanding::Unknown),
    }
}

/// CON-3: the caller has a question on `offer_id` that is not answered yet.
pub(super) fn unresolved(ctx: &Ctx<'_, '_>, row: &WorkRow, offer_id: &str) -> Result<bool, Error> {
    work_questions::unresolved(
        ctx.tx,
        &row.work_item_id,
        ctx.command.agent_id.as_str(),
        offer_id,
    )
}

/// The newest questions of a WorkItem (at most `QUESTIONS_SHOWN`), oldest first, with their
/// answers and their standing at `now`, sent ahead of its use (`sql/ahead.rs`).
pub(super) fn view(
    conn: &Connection,
    work_item_id: &str,
    now: &str,
) -> Result<Ahead<Vec<QuestionView>, Error>, Error> {
    let rows = work_questions::newest(conn, work_item_id, now, QUESTIONS_SHOWN)?;
    Ok(rows.then(shown))
}

/// The questions a view shows, from their rows, newest first.
fn shown(rows: Vec<work_questions::QuestionRow>) -> Result<Vec<QuestionView>, Error> {
    let mut questions = rows
        .into_iter()
        .map(
            |work_questions::QuestionRow {
                 asked: (question_id, offer_id, agent_id, text, asked_at, sequence),
                 answer,
                 offer_live: live,
             }| {
                let answer = answer
                    .map(|(text, resolution, answered_by, answered_at, sequence)| {
                        Ok::<_, Error>(AnswerView {
                            text,
                            resolution: match resolution {
                                Some(resolution) => parse_name(&resolution)?,
                                None => Resolution::default(),
                            },
                            answered_by: answered_by.unwrap_or_default(),
                            answered_at: answered_at.unwrap_or_default(),
                            sequence: sequence.unwrap_or_default(),
                        })
                    })
                    .transpose()?;
                let status = match (&answer, live) {
                    (Some(_), _) => "answered",
                    (None, true) => "open",
                    (None, false) => "superseded",
                };
                Ok(QuestionView {
                    question_id,
                    offer_id,
                    agent_id,
                    text,
                    asked_at,
                    sequence,
                    status: status.to_owned(),
                    answer,
                })
            },
        )
        .collect::<Result<Vec<_>, Error>>()?;
    questions.reverse();
    Ok(questions)
}
