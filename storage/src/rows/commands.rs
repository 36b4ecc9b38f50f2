//! The `commands` table: the only SQL that names it. What each accepted work Command's answer
//! keeps for a retry of the same bytes (`work/answer.rs`: its id, Events and aggregate), and
//! its signed envelope, under its id (DESIGN §10).

use crate::sql::{Connection, params};

use crate::error::Error;
use crate::sql::Cached as _;

/// The lookup of [`stored`]: two point reads of the key, the Agent's row (`mine` 1) and the
/// Authority's (0), both answered and chosen between by the caller. Not
/// `agent_id IN (?2, '') ORDER BY agent_id DESC LIMIT 1`: PostgreSQL (before 17) cannot keep
/// the key's order through a list on its middle column, so for that `LIMIT 1` its plan walked
/// the Group's whole range of the key backwards, checking each entry: every Command read all
/// its Group's earlier ones (stop 69, `pg_stat_statements`: 184 µs and 38 pages a Command at
/// 10,000, half of all the database's time on a `work.progress`). Nor an `ORDER BY mine` over
/// the two: on SQLite that opened a sorter for every Command (issue #44).
pub(crate) const STORED: &str = "SELECT request_hash, answer, 1 AS mine FROM commands
          WHERE group_id = ?1 AND agent_id = ?2 AND command_id = ?3
     UNION ALL
     SELECT request_hash, answer, 0 AS mine FROM commands
          WHERE group_id = ?1 AND agent_id = '' AND command_id = ?3";

/// The request hash and answer (JSON) stored for Command `command_id` of `agent_id` in
/// `group_id` (or of the Authority, agent `''`, whose rows predate per-Agent ids): the
/// Agent's own when both are stored.
pub(crate) fn stored(
    conn: &Connection,
    group_id: &str,
    agent_id: &str,
    command_id: &str,
) -> Result<Option<(Vec<u8>, String)>, Error> {
    let found = conn.rows(STORED, params![group_id, agent_id, command_id], |row| {
        Ok((row.get::<_, i64>(2)?, row.get(0)?, row.get(1)?))
    })?;
    Ok(found
        .into_iter()
        .max_by_key(|(mine, ..)| *mine)
        .map(|(_, hash, answer)| (hash, answer)))
}

/// Keeps the answer (JSON) of an accepted Command, and its signed envelope (JSON), answered
/// at `now`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn insert(
    conn: &Connection,
    command_id: &str,
    group_id: &str,
    agent_id: &str,
    request_hash: &[u8],
    answer: &str,
    envelope: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<(), Error> {
    conn.run_later(
        "INSERT INTO commands (command_id, group_id, agent_id, request_hash, answer, envelope,
                               recorded_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![
            command_id,
            group_id,
            agent_id,
            request_hash,
            answer,
            envelope,
            crate::clock::format_instant(now)
        ],
    )?;
    Ok(())
}

/// Trims the answers of Commands answered before `cutoff` (an instant as
/// `clock::format_instant` writes it), at most `limit`: the row keeps its id, request hash
/// and signed envelope, so a replay is answered `command_expired`, never executed again.
/// Answers how many were trimmed. The batch is found through the index of answers not yet
/// trimmed (V38), not by reading every row trimmed before it.
pub(crate) fn trim_before(conn: &Connection, cutoff: &str, limit: u64) -> Result<u64, Error> {
    let trimmed = conn.run(
        "UPDATE commands SET answer = ''
         WHERE (group_id, command_id, agent_id) IN (
             SELECT group_id, command_id, agent_id FROM commands
             WHERE recorded_at < ?1 AND answer <> '' LIMIT ?2)",
        params![cutoff, limit],
    )?;
    Ok(trimmed as u64)
}

/// The Agents and signed envelopes (JSON) of the Commands `command_id` in `group_id`, by Agent
/// (a Command id is its Agent's, so two Agents may have used one); at most `limit`. A Command
/// accepted before envelopes were kept has none.
pub(crate) fn envelopes(
    conn: &Connection,
    group_id: &str,
    command_id: &str,
    limit: u32,
) -> Result<Vec<(String, Option<String>)>, Error> {
    Ok(conn.rows(
        "SELECT agent_id, envelope FROM commands WHERE group_id = ?1 AND command_id = ?2
         ORDER BY agent_id LIMIT ?3",
        params![group_id, command_id, limit],
        |row| Ok((row.get(0)?, row.get(1)?)),
    )?)
}

#[cfg(test)]
mod tests {
    use crate::db::{Db, Location};
    use crate::error::Error;
    use crate::sql::{Cached as _, Connection};

    /// Pages of `commands` and its indexes this transaction has fetched so far (PostgreSQL).
    fn pages(tx: &Connection) -> Result<i64, Error> {
        crate::rows::pages_fetched(tx, "commands")
    }

    /// On PostgreSQL, in a Group of 6,000 Commands all trimmed: fetching a signed Command
    /// by its id without its Agent reads the Agents that used that id, and a trimming batch
    /// reads the rows it trims, neither the Group's nor the table's history (V38: before it,
    /// the first walked the Group's range of the key and the second scanned the table).
    #[tokio::test]
    async fn a_commands_envelopes_and_a_trim_read_what_they_find() {
        let Some(url) = weft_testkit::postgres_database_or_skip() else {
            return;
        };
        let db = Db::open(&Location::Postgres(url.clone())).expect("open");
        let then = chrono::Utc::now() - chrono::Duration::days(30);
        let now = chrono::Utc::now();
        let cutoff = crate::clock::format_instant(now - chrono::Duration::days(1));
        let first = cutoff.clone();
        let trimmed = db
            .write(move |tx| {
                for i in 0..6000 {
                    let id = format!("cmd-{i:05}");
                    super::insert(tx, &id, "g1", "agent-a", b"h", "{}", "{}", then)?;
                }
                super::insert(tx, "cmd-01234", "g1", "agent-b", b"h", "{}", "{}", then)?;
                Ok(super::trim_before(tx, &first, 5000)? + super::trim_before(tx, &first, 5000)?)
            })
            .await
            .expect("kept and trimmed");
        assert_eq!(trimmed, 6001);
        // As autovacuum does after so many changes: the trimmed rows' old versions and their
        // entries in the index of answers not yet trimmed are gone.
        tokio::task::spawn_blocking(move || {
            let mut client = postgres::Client::connect(&url, postgres::NoTls).expect("connect");
            client.batch_execute("VACUUM commands").expect("vacuumed");
        })
        .await
        .expect("vacuum");
        let (envelopes, trimmed, fetched) = db
            .write(move |tx| {
                for i in 0..5 {
                    let id = format!("new-{i}");
                    super::insert(tx, &id, "g1", "agent-a", b"h", "{}", "{}", then)?;
                }
                // A table this small is read whole by choice; a large one would not be. With
                // sequential scans priced out, what is measured is the best plan an index
                // allows.
                tx.run("SET LOCAL enable_seqscan = off", [])?;
                let before = pages(tx)?;
                let envelopes = super::envelopes(tx, "g1", "cmd-01234", 16)?;
                let trimmed = super::trim_before(tx, &cutoff, 5000)?;
                Ok((envelopes, trimmed, pages(tx)? - before))
            })
            .await
            .expect("read");
        let agents: Vec<&str> = envelopes.iter().map(|(agent, _)| agent.as_str()).collect();
        assert_eq!((agents, trimmed), (vec!["agent-a", "agent-b"], 5));
        assert!(fetched <= 80, "fetched {fetched} pages");
    }

    /// On PostgreSQL: looking for a Command reads a few pages of `commands` however many
    /// Commands its Group has kept (a new Command's lookup finds nothing, the case a plan
    /// walking the Group's range pays most for), and finds the Agent's row before the
    /// Authority's `''` row of the same id. The table is not analyzed, as between two of
    /// autovacuum's rounds: the `IN` lookup's plan then walked the range (160 pages for the
    /// ten lookups here, and more the more Commands).
    #[tokio::test]
    async fn looking_for_a_command_reads_a_few_pages_of_any_group() {
        let Some(url) = weft_testkit::postgres_database_or_skip() else {
            return;
        };
        let db = Db::open(&Location::Postgres(url)).expect("open");
        let now = chrono::Utc::now();
        db.write(move |tx| {
            for i in 0..3000 {
                let id = format!("cmd-{i:05}");
                super::insert(tx, &id, "g1", "agent-a", b"h", "{}", "{}", now)?;
            }
            super::insert(tx, "cmd-both", "g1", "", b"old", "authority", "{}", now)?;
            super::insert(tx, "cmd-both", "g1", "agent-a", b"new", "mine", "{}", now)?;
            super::insert(tx, "cmd-old", "g1", "", b"old", "authority", "{}", now)?;
            Ok(())
        })
        .await
        .expect("kept");
        let (fetched, found) = db
            .write(|tx| {
                // Past PostgreSQL's five custom plans, so the cached generic plan is measured.
                for i in 0..8 {
                    super::stored(tx, "g1", "agent-a", &format!("warm-{i}"))?;
                }
                let pages = || pages(tx);
                let before = pages()?;
                for i in 0..10 {
                    assert_eq!(
                        super::stored(tx, "g1", "agent-a", &format!("new-{i}"))?,
                        None
                    );
                }
                let fetched = pages()? - before;
                let found = [
                    super::stored(tx, "g1", "agent-a", "cmd-both")?,
                    super::stored(tx, "g1", "agent-a", "cmd-old")?,
                    super::stored(tx, "g1", "agent-a", "cmd-00042")?,
                    super::stored(tx, "g1", "agent-b", "cmd-00042")?,
                ];
                Ok((fetched, found))
            })
            .await
            .expect("looked");
        assert!(
            fetched <= 10 * 6,
            "10 lookups in a Group of 3,000 Commands fetched {fetched} pages"
        );
        let answer = |hash: &[u8], answer: &str| Some((hash.to_vec(), answer.to_owned()));
        assert_eq!(
            found,
            [
                answer(b"new", "mine"),
                answer(b"old", "authority"),
                answer(b"h", "{}"),
                None
            ]
        );
    }
}
