//! The `work_deps` table: the only SQL that names it but the WorkItem queries that join it
//! (`work_items.rs`: a dependency's state, a Mission's edges and nodes). Each row is one
//! `dependsOn` edge of a Mission's DAG (DEP-1); the DAG rules are `work::deps`'.

use crate::sql::{Connection, params};

use crate::error::Error;
use crate::sql::Cached as _;

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
    for dependency in depends_on {
        conn.run(
            "INSERT OR IGNORE INTO work_deps (work_item_id, depends_on) VALUES (?1, ?2)",
            params![work_item_id, dependency.as_str()],
        )?;
    }
    Ok(())
}
