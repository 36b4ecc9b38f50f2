//! The `work_deps` table: the only SQL that names it but the WorkItem queries that join it
//! (`work_items.rs`: a dependency's state, a Mission's edges and nodes). Each row is one
//! `dependsOn` edge of a Mission's DAG (DEP-1); the DAG rules are `work::deps`'.

use rusqlite::{Connection, params};

use crate::error::Error;
use crate::sql::Cached as _;

/// The WorkItems `work_item_id` depends on, by id.
pub(crate) fn dependencies(conn: &Connection, work_item_id: &str) -> Result<Vec<String>, Error> {
    let mut statement = conn.prepare_cached(
        "SELECT depends_on FROM work_deps WHERE work_item_id = ?1 ORDER BY depends_on",
    )?;
    let ids = statement
        .query_map([work_item_id], |r| r.get::<_, String>(0))?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ids)
}

/// Replaces `work_item_id`'s dependency edges.
pub(crate) fn set(
    tx: &crate::unit::Tx<'_>,
    work_item_id: &str,
    depends_on: &[weft_api::Id],
) -> Result<(), Error> {
    super::work_items::forget_dependencies(tx, work_item_id);
    let conn: &Connection = tx;
    conn.run(
        "DELETE FROM work_deps WHERE work_item_id = ?1",
        [work_item_id],
    )?;
    let mut insert = conn.prepare_cached(
        "INSERT OR IGNORE INTO work_deps (work_item_id, depends_on) VALUES (?1, ?2)",
    )?;
    for dependency in depends_on {
        insert.execute(params![work_item_id, dependency.as_str()])?;
    }
    Ok(())
}
