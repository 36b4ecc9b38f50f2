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

use crate::sql::Cached as _;
use rusqlite::{Connection, OptionalExtension as _, params};
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

/// An offer that is live at `now`: neither withdrawn, accepted nor expired.
const LIVE_OFFER: &str = "SELECT 1 FROM offers o WHERE o.work_item_id = q.work_item_id
     AND o.offer_id = q.offer_id AND o.status = 'live' AND o.expires_at > ?1";

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
    if question(ctx.tx, &row.work_item_id, p.question_id.as_str())?.is_some() {
        return Err(reject(
            ErrorCode::Conflict,
            format!(
                "question id {} is taken on {}",
                p.question_id, row.work_item_id
            ),
        ));
    }
    let (n_open, n_asked): (u64, u64) = ctx.tx.row(
        &format!(
            "SELECT COALESCE(SUM(q.answer IS NULL AND EXISTS ({LIVE_OFFER})), 0), COUNT(*)
             FROM work_questions q WHERE q.work_item_id = ?2 AND q.agent_id = ?3"
        ),
        params![ctx.now_text, row.work_item_id, asker],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
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
    ctx.tx.run(
        "INSERT INTO work_questions (work_item_id, question_id, offer_id, agent_id, text, asked_at,
                                     asked_sequence)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![
            row.work_item_id,
            p.question_id.as_str(),
            p.offer_id.as_str(),
            asker,
            p.text,
            ctx.now_text,
            sequence
        ],
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
    let answered: Option<String> = ctx
        .tx
        .row(
            "SELECT answered_by FROM work_questions
             WHERE work_item_id = ?1 AND question_id = ?2 AND answer IS NOT NULL",
            params![row.work_item_id, p.question_id.as_str()],
            |r| r.get(0),
        )
        .optional()?;
    if let Some(by) = answered {
        return Err(reject(
            ErrorCode::Conflict,
            format!("question {} was answered already by {by}", p.question_id),
        ));
    }
    ctx.record(row, kind, payload)?;
    let sequence = ctx.appended.last().map_or(0, |e| e.sequence);
    ctx.tx.run(
        "UPDATE work_questions SET answer = ?3, resolution = ?4, answered_by = ?5, answered_at = ?6,
                                   answered_sequence = ?7
         WHERE work_item_id = ?1 AND question_id = ?2",
        params![
            row.work_item_id,
            p.question_id.as_str(),
            p.text,
            name(&p.resolution.unwrap_or_default())?,
            ctx.command.agent_id.as_str(),
            ctx.now_text,
            sequence
        ],
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
    match question(ctx.tx, &row.work_item_id, question_id)? {
        Some(offer_id) => super::checks::offer_standing(ctx, row, &offer_id),
        None => Ok(OfferStanding::Unknown),
    }
}

/// CON-3: the caller has a question on `offer_id` that is not answered yet.
pub(super) fn unresolved(ctx: &Ctx<'_, '_>, row: &WorkRow, offer_id: &str) -> Result<bool, Error> {
    Ok(ctx
        .tx
        .row(
            "SELECT 1 FROM work_questions
             WHERE work_item_id = ?1 AND agent_id = ?2 AND offer_id = ?3 AND answer IS NULL
             LIMIT 1",
            params![row.work_item_id, ctx.command.agent_id.as_str(), offer_id],
            |_| Ok(()),
        )
        .optional()?
        .is_some())
}

/// The offer a question of the WorkItem was asked on, if there is such a question.
fn question(
    conn: &Connection,
    work_item_id: &str,
    question_id: &str,
) -> Result<Option<String>, Error> {
    Ok(conn
        .row(
            "SELECT offer_id FROM work_questions WHERE work_item_id = ?1 AND question_id = ?2",
            params![work_item_id, question_id],
            |r| r.get(0),
        )
        .optional()?)
}

/// The newest questions of a WorkItem (at most `QUESTIONS_SHOWN`), oldest first, with their
/// answers and their standing at `now`.
pub(super) fn view(
    conn: &Connection,
    work_item_id: &str,
    now: &str,
) -> Result<Vec<QuestionView>, Error> {
    let mut statement = conn.prepare_cached(&format!(
        "SELECT q.question_id, q.offer_id, q.agent_id, q.text, q.asked_at, q.asked_sequence,
                q.answer, q.resolution, q.answered_by, q.answered_at, q.answered_sequence,
                EXISTS ({LIVE_OFFER})
         FROM work_questions q WHERE q.work_item_id = ?2
         ORDER BY q.asked_sequence DESC LIMIT ?3"
    ))?;
    type Raw = (
        (String, String, String, String, String, u64),
        Option<(
            String,
            Option<String>,
            Option<String>,
            Option<String>,
            Option<u64>,
        )>,
        bool,
    );
    let rows = statement
        .query_map(params![now, work_item_id, QUESTIONS_SHOWN], |r| {
            let asked = (
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
            );
            let answer = r
                .get::<_, Option<String>>(6)?
                .map(|text| {
                    Ok::<_, rusqlite::Error>((text, r.get(7)?, r.get(8)?, r.get(9)?, r.get(10)?))
                })
                .transpose()?;
            Ok::<Raw, rusqlite::Error>((asked, answer, r.get(11)?))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    let mut questions = rows
        .into_iter()
        .map(
            |((question_id, offer_id, agent_id, text, asked_at, sequence), answer, live)| {
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
