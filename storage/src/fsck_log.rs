//! fsck's cross-check of every row that names an Event by its sequence against the Group's
//! log (issue #40): a log whose newest Events were deleted still chains from genesis, so the
//! chain check alone passes it, but the manifests, Evidence, WorkItem history and the rest
//! that were written with those Events still name them. Each such row must find its Event in
//! the online log (or below the Group's compacted head, where the archive holds it) and, where
//! the row says which kind of Event made it, an Event of that type. (Missions are checked by
//! the fold of the log, `work::check_projection`: their `created_sequence` is not a sequence.)

use crate::sql::Connection;

use crate::error::Error;

/// One kind of row that names an Event: `rows` selects columns `group_id` and `sequence`, and `types`
/// lists the Event types that write it (empty: any). A row that records its Event's type
/// (`said`) selects it too, as column `said`: the look-ups by type trust it (V40).
struct Named {
    what: &'static str,
    rows: &'static str,
    types: &'static [&'static str],
    said: bool,
}

const NAMED: &[Named] = &[
    Named {
        what: "manifest",
        rows: crate::rows::manifests::PUBLISHED_EVENTS,
        types: &["artifact.published"],
        said: false,
    },
    Named {
        what: "Evidence",
        rows: crate::rows::evidence::RECORDED_EVENTS,
        types: &["evidence.recorded"],
        said: false,
    },
    Named {
        what: "disposed manifest",
        rows: crate::rows::manifests::DISPOSED_EVENTS,
        types: &["records.disposed"],
        said: false,
    },
    Named {
        what: "disposed Evidence",
        rows: crate::rows::evidence::DISPOSED_EVENTS,
        types: &["records.disposed"],
        said: false,
    },
    Named {
        what: "proposal",
        rows: crate::rows::proposals::PROPOSED_EVENTS,
        types: &["work.proposed"],
        said: false,
    },
    Named {
        what: "reuse record",
        rows: crate::rows::reusable_artifacts::PUBLISHED_EVENTS,
        types: &["artifact.reuse_published"],
        said: false,
    },
    Named {
        what: "Context Package",
        rows: crate::rows::context_packages::PUBLISHED_EVENTS,
        types: &["context.published", "context.forwarded"],
        said: false,
    },
    Named {
        what: "offer",
        rows: crate::rows::offers::OFFERED_EVENTS,
        types: &["work.offered"],
        said: false,
    },
    Named {
        what: "WorkItem history",
        rows: crate::rows::work_history::HISTORY_EVENTS,
        types: &[],
        said: true,
    },
    Named {
        what: "progress report",
        rows: crate::rows::work_progress::PROGRESS_EVENTS,
        types: &[],
        said: false,
    },
    Named {
        what: "lease",
        rows: crate::rows::leases::STARTED_EVENTS,
        types: &[],
        said: false,
    },
];

/// A `PROBLEM` line for every row that names an Event the log does not hold, or one of
/// another type than the row's kind is written with.
pub(crate) fn check_named_events(conn: &Connection) -> Result<Vec<String>, Error> {
    let mut problems = Vec::new();
    let compacted = crate::rows::snapshots::newest_sequences(conn)?;
    for named in NAMED {
        // Below the newest snapshot the online log no longer holds Events: the archive
        // does, and its chain is checked against the signed snapshot.
        let rows = crate::rows::events::named_by(conn, named.rows, named.said)?
            .into_iter()
            .filter(|(group, sequence, ..)| *sequence > compacted.get(group).copied().unwrap_or(0));
        for (group, sequence, kind, said) in rows {
            if let (Some(kind), Some(said)) = (&kind, &said)
                && kind != said
            {
                let said = if said.is_empty() { "nothing" } else { said };
                problems.push(format!(
                    "group {group}: a {} says Event {sequence} is a {said}, but it is a {kind}",
                    named.what
                ));
            }
            match kind {
                None => problems.push(format!(
                    "group {group}: a {} names Event {sequence}, which the log does not hold \
                     (its tail was cut?)",
                    named.what
                )),
                Some(kind) if !named.types.is_empty() && !named.types.contains(&kind.as_str()) => {
                    problems.push(format!(
                        "group {group}: a {} names Event {sequence}, a {kind}, not {}",
                        named.what,
                        named.types.join(" or ")
                    ))
                }
                Some(_) => {}
            }
        }
    }
    Ok(problems)
}
