//! Appending to and reading a Group's hash-chained log (DESIGN §7).
//!
//! Appends happen only inside the writer's transaction, together with the projection rows
//! they describe; the single writer makes "read the head, insert head + 1" race-free.
//! Nothing here updates or deletes an Event (DLV-7). An append whose kind a reaction follows
//! also writes the reaction's row (`reactions.rs`), in the same transaction. What is no
//! longer online (compacted into signed snapshots, `compaction.rs`) is read here too, so a
//! reader of the log (delivery, fsck) needs no feature to know where the online log begins.

use crate::sql::Connection;
use base64::Engine as _;
use serde_json::value::RawValue;
use weft_api::dsse::BASE64;
use weft_api::event::{EventHash, Unhashed};
use weft_api::views::{SignedSnapshot, SnapshotReference};
use weft_api::{ArtifactId, Envelope, Event, EventPayload, Id};

use crate::clock::format_instant;
use crate::error::Error;
use crate::unit::Tx;

/// Appends one Event to `group_id`'s log and returns its sequence.
pub(crate) fn append(
    tx: &Tx<'_>,
    group_id: &Id,
    payload: &EventPayload,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<u64, Error> {
    append_with(
        tx,
        group_id,
        payload.kind().as_str(),
        payload.to_json(),
        (None, payload.actor().map(Id::as_str)),
        now,
    )
}

/// Appends one Event caused by the Command `command_id` (its `causationCommandId`).
pub(crate) fn append_caused(
    tx: &Tx<'_>,
    group_id: &Id,
    payload: &EventPayload,
    command_id: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<u64, Error> {
    append_with(
        tx,
        group_id,
        payload.kind().as_str(),
        payload.to_json(),
        (Some(command_id), payload.actor().map(Id::as_str)),
        now,
    )
}

/// Appends an Event of any type with an untyped payload: only the benchmarks' filler.
#[cfg(any(test, feature = "bench-support"))]
pub(crate) fn append_raw(
    tx: &Tx<'_>,
    group_id: &Id,
    kind: &str,
    payload_json: String,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<u64, Error> {
    append_with(tx, group_id, kind, payload_json, (None, None), now)
}

fn append_with(
    tx: &Tx<'_>,
    group_id: &Id,
    kind: &str,
    payload_json: String,
    (causation, actor): (Option<&str>, Option<&str>),
    now: chrono::DateTime<chrono::Utc>,
) -> Result<u64, Error> {
    crate::rows::groups::lock(tx, group_id.as_str())?;
    let (prev_sequence, prev_hash, prev_at) = head_at(tx, group_id.as_str())?;
    let sequence = prev_sequence + 1;
    let event_id = uuid::Uuid::now_v7().to_string();
    let appended_at = stamp(now, prev_at);
    let canonical = Unhashed {
        event_id: &event_id,
        group_id: group_id.as_str(),
        sequence,
        kind,
        causation_command_id: causation,
        payload_json: &payload_json,
        appended_at: &appended_at,
        prev_hash: &prev_hash,
    }
    .canonical_bytes();
    let hash = weft_api::event::chain_hash(&prev_hash, &canonical);
    // The Merkle tree over the log (issue #45) grows with it, in this transaction: the writer
    // adds the batch's leaves before the commit (`tlog::grow`).
    let leaf = weft_api::tlog::leaf_hash(&canonical);
    crate::rows::events::insert(
        tx,
        &crate::rows::events::New {
            event_id: &event_id,
            group_id: group_id.as_str(),
            sequence,
            kind,
            causation_command_id: causation,
            actor,
            payload: &payload_json,
            appended_at: &appended_at,
            prev_hash: &prev_hash.0,
            hash: &hash.0,
        },
    )?;
    // An Event some reaction follows owes it, durably, in this same transaction.
    crate::reactions::owe(tx, group_id, sequence, kind, &payload_json)?;
    let event = Event {
        event_id,
        group_id: group_id.to_string(),
        sequence,
        kind: kind.to_owned(),
        causation_command_id: causation.map(str::to_owned),
        payload: RawValue::from_string(payload_json).map_err(Error::backend)?,
        appended_at,
        prev_hash,
        hash,
    };
    tx.appended(event, leaf);
    Ok(sequence)
}

/// An Event's `appendedAt`: `now`, or its predecessor's if that is later. Along a Group's
/// chain `appendedAt` does not go back when servers whose clocks disagree append to one Group
/// in turn (each reads its time under the Group's lock, which orders the appends but not the
/// clocks), nor when a clock is stepped back: an auditor may take the order of the instants
/// as the order of the chain, and compaction's bisection (`rows/events.rs`) relies on it.
/// Within [`MAX_CLAMP`] only: a predecessor stamped further ahead came from a clock that is
/// wrong, and carrying its time on would pin every later Event to it (and what is reckoned
/// from them, a retry's backoff, compaction's cutoff) until real time caught up; that Event
/// keeps its own time, and the step back is logged. Instants compare as text: they are all
/// written in one format ([`format_instant`]).
fn stamp(now: chrono::DateTime<chrono::Utc>, prev_at: Option<String>) -> String {
    let at = format_instant(now);
    match prev_at {
        Some(prev) if prev > at => {
            if prev <= format_instant(now + MAX_CLAMP) {
                return prev;
            }
            tracing::warn!(
                previous = prev,
                now = at,
                "an Event's predecessor is stamped more than 5 minutes ahead of this server's clock"
            );
            at
        }
        _ => at,
    }
}

/// How far ahead of this server's clock a predecessor's `appendedAt` may be and still be
/// carried on ([`stamp`]): the clock margin collection allows (`CLOCK_MARGIN_SECONDS`).
const MAX_CLAMP: chrono::Duration =
    chrono::Duration::seconds(weft_api::lifecycle::CLOCK_MARGIN_SECONDS);

/// `(sequence, hash)` of the newest Event of a Group, online or compacted into a snapshot
/// (`(0, GENESIS)` for an empty log).
pub(crate) fn head(
    c: &(impl crate::unit::Conn + ?Sized),
    group_id: &str,
) -> Result<(u64, EventHash), Error> {
    let (sequence, hash, _) = head_at(c, group_id)?;
    Ok((sequence, hash))
}

/// [`head`] and the newest online Event's `appendedAt`.
fn head_at(
    c: &(impl crate::unit::Conn + ?Sized),
    group_id: &str,
) -> Result<(u64, EventHash, Option<String>), Error> {
    let online = crate::rows::events::newest(c, group_id)?;
    if let Some((sequence, hash, appended_at)) = online {
        return Ok((sequence, EventHash(to32(hash)?), Some(appended_at)));
    }
    match compacted(c.conn(), group_id)? {
        Some((sequence, hash)) => Ok((sequence, hash, None)),
        None => Ok((0, EventHash::GENESIS, None)),
    }
}

/// The sequence and chain hash up to which the log was compacted, if it was.
pub(crate) fn compacted(
    conn: &Connection,
    group_id: &str,
) -> Result<Option<(u64, EventHash)>, Error> {
    crate::rows::snapshots::newest(conn, group_id)?
        .map(|(sequence, hash, _)| Ok((sequence, EventHash(to32(hash)?))))
        .transpose()
}

/// Events of `group_id` after `after`, at most `limit`, in order.
pub(crate) fn read(
    conn: &Connection,
    group_id: &str,
    after: u64,
    limit: u32,
) -> Result<Vec<Event>, Error> {
    crate::rows::events::after(conn, group_id, after, limit)?
        .into_iter()
        .map(to_event)
        .collect()
}

/// Events of `group_id` whose actor is `agent_id`, before `before`, newest first, at most
/// `limit`; with `missions`, only those a reader scoped to them sees (`rows/events.rs`).
pub(crate) fn read_by_actor(
    conn: &Connection,
    group_id: &str,
    agent_id: &str,
    before: Option<u64>,
    limit: u32,
    missions: Option<&str>,
) -> Result<Vec<Event>, Error> {
    crate::rows::events::by_actor(conn, group_id, agent_id, before, limit, missions)?
        .into_iter()
        .map(to_event)
        .collect()
}

/// The online Events of `group_id` at `sequences`, in order (a compacted one is absent).
pub(crate) fn read_at(
    conn: &Connection,
    group_id: &str,
    sequences: &[u64],
) -> Result<Vec<Event>, Error> {
    let sequences = serde_json::to_string(sequences).map_err(Error::backend)?;
    crate::rows::events::at(conn, group_id, &sequences)?
        .into_iter()
        .map(to_event)
        .collect()
}

fn to_event(row: crate::rows::events::Row) -> Result<Event, Error> {
    row.into_event()
}

/// A 32-byte column value.
pub(crate) fn to32(bytes: Vec<u8>) -> Result<[u8; 32], Error> {
    bytes.try_into().map_err(|bytes: Vec<u8>| {
        Error::backend(std::io::Error::other(format!(
            "expected a 32-byte value in the index, found {} bytes",
            bytes.len()
        )))
    })
}

/// Reads the signed snapshots of a Group, oldest first (what compaction took off the online
/// log, `compaction.rs`).
pub(crate) fn snapshots(conn: &Connection, group_id: &str) -> Result<Vec<SignedSnapshot>, Error> {
    let rows = crate::rows::snapshots::all(conn, group_id)?;
    rows.into_iter()
        .map(|(envelope, archive, from_sequence)| {
            let envelope: Envelope = serde_json::from_str(&envelope).map_err(Error::backend)?;
            let payload = BASE64.decode(&envelope.payload).map_err(Error::backend)?;
            let reference: SnapshotReference =
                serde_json::from_slice(&payload).map_err(Error::backend)?;
            Ok(SignedSnapshot {
                envelope,
                reference,
                archive: ArtifactId(to32(archive)?),
                from_sequence,
            })
        })
        .collect()
}

/// `Err(CursorTooOld)` when Events after `after` are no longer all online.
pub(crate) fn check_online(conn: &Connection, group_id: &str, after: u64) -> Result<(), Error> {
    match compacted(conn, group_id)? {
        Some((compacted_through, _)) if after < compacted_through => {
            let latest = snapshots(conn, group_id)?
                .pop()
                .ok_or_else(|| Error::backend(std::io::Error::other("snapshot row vanished")))?;
            Err(Error::CursorTooOld(Box::new(latest)))
        }
        _ => Ok(()),
    }
}
