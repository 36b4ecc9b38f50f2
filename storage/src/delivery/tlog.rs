//! A Group's log as a C2SP transparency log, for its readers (DESIGN §15, issue #45): the
//! signed checkpoint, hash tiles, entry bundles, and inclusion and consistency proofs. The
//! tree is kept with the log (`tlog.rs`); this file decides who reads what.
//!
//! - Every member of the Group (and the operator) reads the checkpoint, the hash tiles and
//!   the proofs: they carry hashes only, and a Mission-scoped member's log already shows every
//!   sequence (as `withheld` placeholders, CTX-5), so the leaf hashes of other Missions' Events
//!   tell it nothing their placeholders do not. A leaf hash commits to an Event whose
//!   `eventId` is a fresh UUIDv7, so it cannot be confirmed by guessing the Event.
//! - An entry bundle holds Events whole, so it is served only to a reader who may read every
//!   Event in it (`deliver` gives each whole); a Mission-scoped member asking for one that
//!   holds another Mission's Event gets `forbidden` and reads the hash tiles instead. Entries
//!   compacted off the online log are not served (their snapshot's archive holds them).
//! - A tile or proof beyond the tree as it is now is `not_found`, as C2SP asks of a tile that
//!   does not exist yet. Full tiles never change; a partial tile `.p/W` never changes either.

use weft_api::tlog::witness::WitnessKey;
use weft_api::tlog::{self, Proof, TILE_WIDTH, TreeHead};
use weft_api::{ErrorCode, Id};

use super::{deliver, group_access, not_visible};
use crate::access::Reader;
use crate::delivery::handle::Delivery;
use crate::error::{Error, reject};

/// A checkpoint as served: the signed note and the tree it commits to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlogCheckpoint {
    pub note: String,
    pub head: TreeHead,
}

/// A tile's bytes, and whether it is full (cacheable forever under its path).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlogTile {
    pub bytes: Vec<u8>,
    pub full: bool,
}

/// Group `group`'s kept cosignatures from the `witnesses` configured: (witness, size, line).
fn cosigned_by(
    conn: &crate::sql::Connection,
    group: &str,
    witnesses: &[String],
) -> Result<Vec<(String, u64, String)>, Error> {
    Ok(crate::rows::tlog_cosignatures::of_group(conn, group)?
        .into_iter()
        .filter(|(witness, _, _)| witnesses.contains(witness))
        .collect())
}

fn beyond(what: &str) -> Error {
    reject(
        ErrorCode::NotFound,
        format!("{what} is beyond the tree as it is now"),
    )
}

impl Delivery<'_> {
    /// The C2SP origin of Group `group_id`'s log.
    pub fn tlog_origin(&self, group_id: &Id) -> String {
        tlog::origin(&self.0.authority.verifying_key(), group_id.as_str())
    }

    /// The checkpoint of Group `group_id`'s tree, signed by the Authority key: with
    /// `witnesses` (the names of the witnesses the server pushes to), the size served since
    /// they cosigned it (`rows/tlog_served.rs`: it only grows), with the cosignatures of it
    /// appended (the tree as it is now until one has cosigned); without, the tree as it is
    /// now.
    pub async fn tlog_checkpoint(
        &self,
        group_id: Id,
        reader: &Reader,
        witnesses: &[String],
    ) -> Result<TlogCheckpoint, Error> {
        let reader = reader.clone();
        let group = group_id.clone();
        let witnesses = witnesses.to_vec();
        let (head, lines) = self
            .0
            .db
            .read(move |conn| {
                if group_access(conn, group.as_str(), &reader)?.is_none() {
                    return Err(not_visible(&group));
                }
                let served = if witnesses.is_empty() {
                    None
                } else {
                    crate::rows::tlog_served::size(conn, group.as_str())?
                };
                // Until a witness cosigned one, the tree as it is now (an empty tree would
                // look like a cut tail to a client that saw the tree before witnesses were
                // configured, and would check nothing while no witness answers).
                let (size, cosigned) = match served {
                    Some(size) => (size, cosigned_by(conn, group.as_str(), &witnesses)?),
                    None => (crate::tlog::size(conn, group.as_str())?, Vec::new()),
                };
                let lines: Vec<String> = cosigned
                    .into_iter()
                    .filter(|(_, at, _)| *at == size)
                    .map(|(_, _, line)| line)
                    .collect();
                let root = crate::tlog::root(conn, group.as_str(), size)?;
                Ok((TreeHead { size, root }, lines))
            })
            .await?;
        let note = tlog::sign_checkpoint(&self.0.authority, &self.tlog_origin(&group_id), head)
            .map_err(Error::Rejected)?;
        Ok(TlogCheckpoint {
            note: tlog::witness::with_cosignatures(&note, &lines),
            head,
        })
    }

    /// Keeps witness `witness`'s cosignature `line` of Group `group_id`'s checkpoint at
    /// `size`, after checking it verifies over exactly that checkpoint (operator only: the
    /// server's witness pusher), and moves the size served on by the rule of
    /// `weft_api::tlog::witness::served`, among the `witnesses` configured (their names).
    pub async fn tlog_record_cosignature(
        &self,
        group_id: Id,
        witness: &WitnessKey,
        (size, line): (u64, String),
        witnesses: &[String],
    ) -> Result<(), Error> {
        let checkpoint = self.tlog_checkpoint_at(group_id.clone(), size).await?;
        let origin = self.tlog_origin(&group_id);
        let whole = tlog::witness::with_cosignatures(&checkpoint.note, std::slice::from_ref(&line));
        tlog::witness::open_witnessed(
            whole.as_bytes(),
            &self.0.authority.verifying_key(),
            &origin,
            std::slice::from_ref(witness),
            1,
        )
        .map_err(Error::Rejected)?;
        let name = witness.name.clone();
        let witnesses = witnesses.to_vec();
        self.0
            .db
            .write(move |tx| {
                let group = group_id.as_str();
                crate::rows::tlog_cosignatures::record(tx, group, &name, size, &line)?;
                let cosigned: Vec<(String, u64)> = cosigned_by(tx, group, &witnesses)?
                    .into_iter()
                    .map(|(witness, size, _)| (witness, size))
                    .collect();
                if let Some(served) = tlog::witness::served::served_size(&cosigned, witnesses.len())
                {
                    crate::rows::tlog_served::advance(tx, group, served)?;
                }
                Ok(())
            })
            .await
    }

    /// The cosignatures of Group `group_id`'s tree kept from the `witnesses` configured:
    /// (witness, size), for the witness pusher (operator only).
    pub async fn tlog_cosigned(
        &self,
        group_id: Id,
        witnesses: &[String],
    ) -> Result<Vec<(String, u64)>, Error> {
        let witnesses = witnesses.to_vec();
        self.0
            .db
            .read(move |conn| {
                Ok(cosigned_by(conn, group_id.as_str(), &witnesses)?
                    .into_iter()
                    .map(|(witness, size, _)| (witness, size))
                    .collect())
            })
            .await
    }

    /// The checkpoint of Group `group_id`'s tree at `size` (at most its size now), signed by
    /// the Authority key, with no cosignature: what the witness pusher sends (operator only).
    pub async fn tlog_checkpoint_at(
        &self,
        group_id: Id,
        size: u64,
    ) -> Result<TlogCheckpoint, Error> {
        let group = group_id.clone();
        let root = self
            .0
            .db
            .read(move |conn| {
                if size > crate::tlog::size(conn, group.as_str())? {
                    return Err(beyond(&format!("a tree of {size}")));
                }
                crate::tlog::root(conn, group.as_str(), size)
            })
            .await?;
        let head = TreeHead { size, root };
        let note = tlog::sign_checkpoint(&self.0.authority, &self.tlog_origin(&group_id), head)
            .map_err(Error::Rejected)?;
        Ok(TlogCheckpoint { note, head })
    }

    /// The tile at C2SP path `path` (`tile/…`) of Group `group_id`'s tree.
    pub async fn tlog_tile(
        &self,
        group_id: Id,
        path: String,
        reader: &Reader,
    ) -> Result<TlogTile, Error> {
        let tile = tlog::tile_of_path(&path)
            .ok_or_else(|| reject(ErrorCode::NotFound, format!("no tile {path}")))?;
        let reader = reader.clone();
        self.0
            .db
            .read(move |conn| {
                let group = group_id.as_str();
                if group_access(conn, group, &reader)?.is_none() {
                    return Err(not_visible(&group_id));
                }
                let size = crate::tlog::size(conn, group)?;
                // The tile's last node at its level, which must lie within the tree.
                let first = tile.level_index().checked_mul(TILE_WIDTH).ok_or_else(|| beyond(&path))?;
                let end = first.checked_add(u64::from(tile.width())).ok_or_else(|| beyond(&path))?;
                let shift = u32::from(tile.level()) * u32::from(tlog::TILE_HEIGHT);
                let nodes = size.checked_shr(shift).unwrap_or(0);
                if end > nodes {
                    return Err(beyond(&path));
                }
                let full = u64::from(tile.width()) == TILE_WIDTH;
                if !tile.is_data() {
                    let bytes = crate::tlog::tile(conn, group, &tile)?;
                    return Ok(TlogTile { bytes, full });
                }
                let compacted_through = crate::events::compacted(conn, group)?.map_or(0, |(through, _)| through);
                if first < compacted_through {
                    return Err(reject(
                        ErrorCode::NotFound,
                        format!("{path} holds Events compacted off the online log: their snapshot's archive holds them"),
                    ));
                }
                let mut bytes = Vec::new();
                let mut sequence = first;
                while sequence < end {
                    let page = crate::rows::events::after(conn, group, sequence, 256)?;
                    if page.is_empty() {
                        return Err(beyond(&path));
                    }
                    for row in page {
                        if row.sequence > end {
                            break;
                        }
                        if row.sequence != sequence + 1 {
                            return Err(Error::backend(std::io::Error::other(format!(
                                "group {group}: the online log skips from {sequence} to {}",
                                row.sequence
                            ))));
                        }
                        let event = row.into_event()?;
                        let canonical = event.canonical_bytes();
                        let whole = deliver(conn, &reader, event)?.event().is_some();
                        if !whole {
                            return Err(reject(
                                ErrorCode::Forbidden,
                                format!("{path} holds Events you may not read whole: read the hash tiles (tile/0/…) instead"),
                            ));
                        }
                        tlog::push_entry(&mut bytes, &canonical).ok_or_else(|| {
                            reject(
                                ErrorCode::Conflict,
                                format!("{path} holds an Event longer than an entry bundle holds (65,535 bytes)"),
                            )
                        })?;
                        sequence += 1;
                    }
                }
                Ok(TlogTile { bytes, full })
            })
            .await
    }

    /// The inclusion proof of Event `sequence` in the tree of `size` leaves (the tree as it is
    /// now when `None`).
    pub async fn tlog_inclusion(
        &self,
        group_id: Id,
        sequence: u64,
        size: Option<u64>,
        reader: &Reader,
    ) -> Result<Proof, Error> {
        self.tree_read(group_id, reader, move |conn, group, now| {
            let size = size.unwrap_or(now);
            if sequence == 0 || size > now || sequence > size {
                return Err(beyond(&format!("Event {sequence} in a tree of {size}")));
            }
            let hashes = crate::tlog::inclusion(conn, group, sequence - 1, size)?;
            Ok(Proof::new(size, Some(sequence - 1), &hashes))
        })
        .await
    }

    /// The consistency proof of the tree of `from` leaves with the tree of `to` (the tree as
    /// it is now when `None`).
    pub async fn tlog_consistency(
        &self,
        group_id: Id,
        from: u64,
        to: Option<u64>,
        reader: &Reader,
    ) -> Result<Proof, Error> {
        self.tree_read(group_id, reader, move |conn, group, now| {
            let to = to.unwrap_or(now);
            if to > now || from > to {
                return Err(beyond(&format!("a tree of {to} (from {from})")));
            }
            let hashes = crate::tlog::consistency(conn, group, from, to)?;
            Ok(Proof::new(to, None, &hashes))
        })
        .await
    }

    /// Runs `f` with the Group's tree size as it is now, once `reader` may read the Group
    /// (`not_found` otherwise, as for a Group that does not exist).
    async fn tree_read<T: Send + 'static>(
        &self,
        group_id: Id,
        reader: &Reader,
        f: impl FnOnce(&crate::sql::Connection, &str, u64) -> Result<T, Error> + Send + 'static,
    ) -> Result<T, Error> {
        let reader = reader.clone();
        self.0
            .db
            .read(move |conn| {
                let group = group_id.as_str();
                if group_access(conn, group, &reader)?.is_none() {
                    return Err(not_visible(&group_id));
                }
                let now = crate::tlog::size(conn, group)?;
                f(conn, group, now)
            })
            .await
    }
}
