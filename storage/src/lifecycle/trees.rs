//! Catching each Group's Merkle tree up with its log when the store opens (issue #45): a log
//! written before schema version 31 has no tree, and the tree is built here from its Events,
//! the online ones read from the index and the compacted ones from their signed snapshot's
//! archive (each Event's chain hash recomputed before its leaf is added). Each batch goes in
//! one writer transaction that takes the Group's lock and starts from the tree's size as it
//! finds it, so several servers opening at once over PostgreSQL build it once. After this,
//! every append grows the tree in its own transaction (`tlog.rs`).

use std::sync::Arc;

use weft_api::{Event, EventHash};

use crate::engine::Engine;
use crate::error::Error;

/// Events per transaction.
const BATCH: u32 = 2_000;

/// Brings every Group's tree up to its log's head. A Group whose tree cannot be built (a
/// broken chain, an archive that cannot be read) is logged and left as it is: the server
/// still starts, `weft fsck` names the damage, and an append to that Group is refused
/// (`tlog::grow`) rather than built over a gap.
pub(crate) async fn catch_up(engine: &Arc<Engine>) {
    let groups: Vec<String> = match engine.db.read(crate::rows::groups::ids).await {
        Ok(groups) => groups,
        Err(error) => {
            tracing::error!(%error, "the Groups could not be listed: their Merkle trees are not built now");
            return;
        }
    };
    for group in groups {
        if let Err(error) = catch_up_group(engine, group.clone()).await {
            tracing::error!(group, %error, "the Group's Merkle tree could not be built over its log; run `weft fsck`");
        }
    }
}

async fn catch_up_group(engine: &Arc<Engine>, group: String) -> Result<(), Error> {
    let g = group.clone();
    let (head, size, online_from) = engine
        .db
        .read(move |conn| {
            let (head, _) = crate::events::head(conn, &g)?;
            let size = crate::tlog::size(conn, &g)?;
            let compacted = crate::events::compacted(conn, &g)?.map_or(0, |(through, _)| through);
            Ok((head, size, compacted + 1))
        })
        .await?;
    if size >= head {
        return Ok(());
    }
    tracing::info!(
        group,
        size,
        head,
        "building the group's Merkle tree over its log"
    );
    // What compaction archived first, then the online log; each Event linked to the last.
    let mut prev = None;
    if size + 1 < online_from {
        let g = group.clone();
        let snapshots = engine
            .db
            .read(move |conn| crate::events::snapshots(conn, &g))
            .await?;
        for snapshot in snapshots {
            if snapshot.reference.sequence <= size {
                // Its chain hash, signed, links the next archive's first Event.
                prev = Some((
                    snapshot.reference.sequence,
                    snapshot.reference.event_chain_hash,
                ));
                continue;
            }
            let events = crate::compaction::handle::Compaction(engine)
                .archived_events(snapshot.archive)
                .await?;
            for chunk in events.chunks(BATCH as usize) {
                prev = add(engine, &group, chunk.to_vec(), prev).await?;
            }
        }
    }
    loop {
        let g = group.clone();
        let events = engine
            .db
            .read(move |conn| {
                let size = crate::tlog::size(conn, &g)?;
                crate::rows::events::after(conn, &g, size, BATCH)?
                    .into_iter()
                    .map(crate::rows::events::Row::into_event)
                    .collect::<Result<Vec<Event>, Error>>()
            })
            .await?;
        if events.is_empty() {
            return Ok(());
        }
        prev = add(engine, &group, events, prev).await?;
    }
}

/// Adds `events`' leaves to the tree, those it does not hold yet, in one transaction. Each
/// must be whole (its hash recomputed) and linked to the one before: `prev`, the sequence and
/// hash of the last Event the caller read, when the tree ends there; else the Event the tree
/// ends at as the index holds it (another server may have grown the tree meanwhile). Answers
/// the last Event's sequence and hash, for the next call.
async fn add(
    engine: &Arc<Engine>,
    group: &str,
    events: Vec<Event>,
    prev: Option<(u64, EventHash)>,
) -> Result<Option<(u64, EventHash)>, Error> {
    let group = group.to_owned();
    engine
        .db
        .write(move |tx| {
            crate::rows::groups::lock(tx, &group)?;
            let conn: &crate::sql::Connection = tx;
            let mut size = crate::tlog::size(conn, &group)?;
            let mut prev = prev;
            for event in &events {
                if event.sequence <= size {
                    prev = Some((event.sequence, event.hash));
                    continue;
                }
                let expected = match prev {
                    Some((sequence, hash)) if sequence == size => hash,
                    _ => crate::tlog::hash_of_event(conn, &group, size)?,
                };
                if event.sequence != size + 1
                    || event.computed_hash() != event.hash
                    || expected != event.prev_hash
                {
                    return Err(Error::backend(std::io::Error::other(format!(
                        "group {group}: Event {} does not extend the tree of {size} leaves (a gap, or a broken chain: run `weft fsck`)",
                        event.sequence
                    ))));
                }
                if !crate::tlog::extend(conn, &group, size, &event.canonical_bytes())? {
                    return Err(Error::backend(std::io::Error::other(format!(
                        "group {group}: the Merkle tree has a gap below leaf {size}"
                    ))));
                }
                size += 1;
                prev = Some((event.sequence, event.hash));
            }
            Ok(prev)
        })
        .await
}
