//! The `work_questions` table: the only SQL that names it. A candidate's question on an
//! offer (CON-2) and the Coordinator's answer (CON-4); whether the offer a question was
//! asked on is still live is read here with it (a join on `offers`), since it decides the
//! question's standing.

use crate::sql::{Ahead, Connection, OptionalExtension as _, params};

use crate::error::Error;
use crate::sql::Cached as _;

/// An offer that is live at `?1`: neither withdrawn, accepted nor expired.
const LIVE_OFFER: &str = "SELECT 1 FROM offers o WHERE o.work_item_id = q.work_item_id
     AND o.offer_id = q.offer_id AND o.status = 'live' AND o.expires_at > ?1";

/// The offer question `question_id` of the WorkItem was asked on, if there is one.
pub(crate) fn offer_of(
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

/// How many of `agent_id`'s questions on the WorkItem are unanswered on an offer still live
/// at `now`, and how many it asked in all.
pub(crate) fn counts(
    conn: &Connection,
    now: &str,
    work_item_id: &str,
    agent_id: &str,
) -> Result<(u64, u64), Error> {
    Ok(conn.row(
        &format!(
            "SELECT COALESCE(SUM(CASE WHEN q.answer IS NULL AND EXISTS ({LIVE_OFFER}) THEN 1 ELSE 0 END), 0), COUNT(*)
             FROM work_questions q WHERE q.work_item_id = ?2 AND q.agent_id = ?3"
        ),
        params![now, work_item_id, agent_id],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?)
}

/// A new question, asked by the Event at `asked_sequence`.
pub(crate) struct NewQuestion<'a> {
    pub(crate) work_item_id: &'a str,
    pub(crate) question_id: &'a str,
    pub(crate) offer_id: &'a str,
    pub(crate) agent_id: &'a str,
    pub(crate) text: &'a str,
    pub(crate) asked_at: &'a str,
    pub(crate) asked_sequence: u64,
}

pub(crate) fn insert(conn: &Connection, new: &NewQuestion<'_>) -> Result<(), Error> {
    conn.run(
        "INSERT INTO work_questions (work_item_id, question_id, offer_id, agent_id, text, asked_at,
                                     asked_sequence)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![
            new.work_item_id,
            new.question_id,
            new.offer_id,
            new.agent_id,
            new.text,
            new.asked_at,
            new.asked_sequence
        ],
    )?;
    Ok(())
}

/// Who answered question `question_id`, if it is answered.
pub(crate) fn answered_by(
    conn: &Connection,
    work_item_id: &str,
    question_id: &str,
) -> Result<Option<String>, Error> {
    Ok(conn
        .row(
            "SELECT answered_by FROM work_questions
             WHERE work_item_id = ?1 AND question_id = ?2 AND answer IS NOT NULL",
            params![work_item_id, question_id],
            |r| r.get(0),
        )
        .optional()?)
}

/// The answer to a question, given by the Event at `sequence`.
pub(crate) struct NewAnswer<'a> {
    pub(crate) work_item_id: &'a str,
    pub(crate) question_id: &'a str,
    pub(crate) text: &'a str,
    /// The resolution's wire name.
    pub(crate) resolution: &'a str,
    pub(crate) answered_by: &'a str,
    pub(crate) answered_at: &'a str,
    pub(crate) sequence: u64,
}

pub(crate) fn answer(conn: &Connection, new: &NewAnswer<'_>) -> Result<(), Error> {
    conn.run(
        "UPDATE work_questions SET answer = ?3, resolution = ?4, answered_by = ?5, answered_at = ?6,
                                   answered_sequence = ?7
         WHERE work_item_id = ?1 AND question_id = ?2",
        params![
            new.work_item_id,
            new.question_id,
            new.text,
            new.resolution,
            new.answered_by,
            new.answered_at,
            new.sequence
        ],
    )?;
    Ok(())
}

/// CON-3: `agent_id` has a question on `offer_id` that is not answered yet.
pub(crate) fn unresolved(
    conn: &Connection,
    work_item_id: &str,
    agent_id: &str,
    offer_id: &str,
) -> Result<bool, Error> {
    Ok(conn
        .row(
            "SELECT 1 FROM work_questions
             WHERE work_item_id = ?1 AND agent_id = ?2 AND offer_id = ?3 AND answer IS NULL
             LIMIT 1",
            params![work_item_id, agent_id, offer_id],
            |_| Ok(()),
        )
        .optional()?
        .is_some())
}

/// A question as asked: id, offer, asker, text, when, and its Event's sequence.
pub(crate) type Asked = (String, String, String, String, String, u64);
/// An answer as given: text, resolution (wire name), by whom, when, and its Event's sequence.
pub(crate) type Answered = (
    String,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<u64>,
);

/// One question row: as asked, its answer if any, and whether its offer is live at `now`.
pub(crate) struct QuestionRow {
    pub(crate) asked: Asked,
    pub(crate) answer: Option<Answered>,
    pub(crate) offer_live: bool,
}

/// A WorkItem's newest questions, newest first, with whether their offer is live at `?1`
/// ([`newest`]): from the end of the index of its questions by sequence (V50), nothing
/// sorted. Built once: every Command's answer reads it.
pub(crate) static NEWEST: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "SELECT q.question_id, q.offer_id, q.agent_id, q.text, q.asked_at, q.asked_sequence,
                q.answer, q.resolution, q.answered_by, q.answered_at, q.answered_sequence,
                EXISTS ({LIVE_OFFER})
         FROM work_questions q WHERE q.work_item_id = ?2
         ORDER BY q.asked_sequence DESC LIMIT ?3"
    )
});

/// The newest `limit` questions of a WorkItem, newest first, with their offer's standing
/// at `now`. Sent ahead of its use
/// (`sql/ahead.rs`): read with `get`.
pub(crate) fn newest(
    conn: &Connection,
    work_item_id: &str,
    now: &str,
    limit: u64,
) -> Result<Ahead<Vec<QuestionRow>, Error>, Error> {
    let rows = conn.rows_ahead(&NEWEST, params![now, work_item_id, limit], |r| {
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
                Ok::<_, crate::sql::SqlError>((text, r.get(7)?, r.get(8)?, r.get(9)?, r.get(10)?))
            })
            .transpose()?;
        Ok(QuestionRow {
            asked,
            answer,
            offer_live: r.get(11)?,
        })
    })?;
    Ok(rows.then(Ok))
}
