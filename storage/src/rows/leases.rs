//! The `leases` table: the only SQL that names it, its typed row [`Lease`], and the one rule
//! of whether a lease admits what is presented under it ([`Lease::admits`], LSE-4/5, LSE-7,
//! OFL-1).
//!
//! Every lease check of the project goes through [`Lease::admits`]: a manifest's and an owner
//! Evidence's lease (`artifacts::binding`), a Command's quoted lease and the WorkItem's
//! current one (`work::expiry::check_quoted_lease`, `work::checks::check_lease`), a
//! capability token's lease (`work::tokens`) and whether a buffered Command's historical lease
//! still runs (`work::offline`; the binding itself is judged by `weft_api::work::offline`).
//! The rule answers a typed [`Refusal`]; each caller maps it to its own code and words (a
//! publication says `stale_lease`, a token at the door `unauthorized`), so the callers differ
//! in what they present ([`Claim`]) and in how they answer, never in the rule.
//!
//! What this file does not decide: when a lease ends (`work::expiry`, `work::apply`) or who may
//! see one; it stores what they decide. Long (about 750 lines, a third of them the rule's
//! tests) because the row, its rule and every statement on the table stay in one place.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use rusqlite::{Connection, OptionalExtension as _, params};
use weft_api::Id;
use weft_api::work::offline::LeaseRecord;

use super::{id, instant};
use crate::clock::format_instant;
use crate::error::Error;
use crate::sql::Cached as _;

/// What a lease holds (the schema's `kind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// The right to execute (`work.start`, LSE-1); the only kind that publishes or carries
    /// capability tokens.
    Execution,
    /// Ownership without execution (named by the schema; no Command grants one today).
    Ownership,
    /// Ownership held across a block (PRG-5).
    Blocked,
}

impl Kind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Execution => "execution",
            Self::Ownership => "ownership",
            Self::Blocked => "blocked",
        }
    }

    fn parse(text: &str) -> Result<Self, Error> {
        match text {
            "execution" => Ok(Self::Execution),
            "ownership" => Ok(Self::Ownership),
            "blocked" => Ok(Self::Blocked),
            other => Err(corrupt(format!("lease kind {other:?}"))),
        }
    }
}

/// Why a lease ended (the schema's `ended_by`, v12; NULL on leases ended before it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EndedBy {
    /// Its owner checkpointed, blocked, submitted, unblocked, or the result was accepted.
    Released,
    /// It passed its `expiresAt` (LSE-8).
    Expired,
    /// Its Agent's new session replaced the one it ran under (LSE-9).
    Revoked,
    /// Its owner was fenced: ownership expired, reassigned, cancelled or failed (SM-6, OFL-1).
    Fenced,
}

impl EndedBy {
    fn as_str(self) -> &'static str {
        match self {
            Self::Released => "released",
            Self::Expired => "expired",
            Self::Revoked => "revoked",
            Self::Fenced => "fenced",
        }
    }

    fn parse(text: &str) -> Result<Self, Error> {
        match text {
            "released" => Ok(Self::Released),
            "expired" => Ok(Self::Expired),
            "revoked" => Ok(Self::Revoked),
            "fenced" => Ok(Self::Fenced),
            other => Err(corrupt(format!("lease ended_by {other:?}"))),
        }
    }
}

fn corrupt(what: String) -> Error {
    Error::backend(std::io::Error::other(format!("corrupt leases row: {what}")))
}

/// A `leases` row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Lease {
    pub(crate) lease_id: Id,
    pub(crate) work_item_id: Id,
    pub(crate) kind: Kind,
    /// The Agent holding it.
    pub(crate) agent_id: Id,
    /// The session of its Agent it was granted under (LSE-9).
    pub(crate) session_epoch: u64,
    /// The WorkItem's ownership epoch it was granted under (OFL-1).
    pub(crate) ownership_epoch: u64,
    pub(crate) started_at: DateTime<Utc>,
    /// After its latest renewal (LSE-3).
    pub(crate) expires_at: DateTime<Utc>,
    /// When it ended, for whatever reason; `None` while it is the WorkItem's current lease.
    pub(crate) released_at: Option<DateTime<Utc>>,
    pub(crate) ended_by: Option<EndedBy>,
    /// When it was closed for OFL-9: its release or fencing, or the `bufferedAt` of the
    /// reconciled checkpoint that released it; `None` while it runs, expired or revoked.
    pub(crate) closed_at: Option<DateTime<Utc>>,
    /// The `work.started` Event that opened an Execution Lease (EVD-2).
    pub(crate) started_sequence: Option<u64>,
    /// A pending preemption request (LSE-12 step 1): when, and by whom.
    pub(crate) preemption: Option<(DateTime<Utc>, Id)>,
}

/// Every column of a row, in the order [`Raw`] reads them (`l`: the table's alias).
macro_rules! columns {
    () => {
        "l.lease_id, l.work_item_id, l.kind, l.agent_id, l.session_epoch, l.ownership_epoch,
         l.started_at, l.expires_at, l.released_at, l.ended_by, l.closed_at, l.started_sequence,
         l.preemption_requested_at, l.preemption_requested_by"
    };
}

/// A row as SQLite hands it over, before its words and instants are parsed.
struct Raw {
    lease_id: String,
    work_item_id: String,
    kind: String,
    agent_id: String,
    session_epoch: u64,
    ownership_epoch: u64,
    started_at: String,
    expires_at: String,
    released_at: Option<String>,
    ended_by: Option<String>,
    closed_at: Option<String>,
    started_sequence: Option<u64>,
    preemption_requested_at: Option<String>,
    preemption_requested_by: Option<String>,
}

/// How many columns [`columns!`] names: a join's own columns follow them.
const N_COLUMNS: usize = 14;

impl Raw {
    fn read(row: &rusqlite::Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self {
            lease_id: row.get(0)?,
            work_item_id: row.get(1)?,
            kind: row.get(2)?,
            agent_id: row.get(3)?,
            session_epoch: row.get(4)?,
            ownership_epoch: row.get(5)?,
            started_at: row.get(6)?,
            expires_at: row.get(7)?,
            released_at: row.get(8)?,
            ended_by: row.get(9)?,
            closed_at: row.get(10)?,
            started_sequence: row.get(11)?,
            preemption_requested_at: row.get(12)?,
            preemption_requested_by: row.get(13)?,
        })
    }

    fn parse(self) -> Result<Lease, Error> {
        let optional_instant = |text: Option<String>| text.as_deref().map(instant).transpose();
        let preemption = match (self.preemption_requested_at, self.preemption_requested_by) {
            (Some(at), Some(by)) => Some((instant(&at)?, id("agentId", &by)?)),
            _ => None,
        };
        Ok(Lease {
            lease_id: id("leaseId", &self.lease_id)?,
            work_item_id: id("workItemId", &self.work_item_id)?,
            kind: Kind::parse(&self.kind)?,
            agent_id: id("agentId", &self.agent_id)?,
            session_epoch: self.session_epoch,
            ownership_epoch: self.ownership_epoch,
            started_at: instant(&self.started_at)?,
            expires_at: instant(&self.expires_at)?,
            released_at: optional_instant(self.released_at)?,
            ended_by: self.ended_by.as_deref().map(EndedBy::parse).transpose()?,
            closed_at: optional_instant(self.closed_at)?,
            started_sequence: self.started_sequence,
            preemption,
        })
    }
}

/// What a caller presents of a lease for [`Lease::admits`]; the parts it does not check are
/// `None`, each for a protocol reason its field says.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Claim<'a> {
    /// The lease named (a manifest's `execution.leaseId`, a Command's quoted lease).
    pub(crate) lease_id: &'a str,
    /// The WorkItem it is named for.
    pub(crate) work_item_id: &'a str,
    /// Who signed a record under the lease, and the ownership epoch the record names (LSE-4,
    /// OFL-1): a manifest or an owner's Evidence. `None` when nothing is signed under it: a
    /// Command's quote (the table judges the caller's ownership) or a token's own lease.
    pub(crate) signer: Option<(&'a str, u64)>,
    /// The WorkItem's current owner and ownership epoch, when the lease is to act (publish,
    /// record Evidence, carry a capability token): it must then be an Execution Lease whose
    /// Agent still owns the WorkItem under the lease's epoch (LSE-4, LSE-7). `None` for a
    /// Command's quote, whose ownership the table judges.
    pub(crate) acts_for: Option<Ownership<'a>>,
}

/// A WorkItem's ownership as it stands (the `work_items` row's `owner`, `ownership_epoch`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ownership<'a> {
    pub(crate) owner: Option<&'a str>,
    pub(crate) ownership_epoch: u64,
}

/// Why a lease does not admit a [`Claim`], the first of these in this order. The order is
/// the protocol's: who the record is (the lease, its WorkItem, its holder and epoch) before
/// whether the holder was fenced (OFL-2 keeps a fenced owner's manifest inert, whether or not
/// its lease still runs), before what the lease is and whether it still runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The claim names another lease than this one (a Command quoting another lease than
    /// its WorkItem's current one).
    OtherLease,
    /// The lease is of another WorkItem.
    OtherWorkItem,
    /// The lease is held by another Agent than the signer.
    OtherHolder,
    /// The lease is of another ownership epoch than the record names.
    OtherEpoch,
    /// The signer was fenced: its epoch is older than the WorkItem's (OFL-1, OFL-2).
    Fenced,
    /// Not an Execution Lease, and only one acts.
    NotExecution,
    /// The lease ended (released, expired, revoked or fenced).
    Ended,
    /// The lease passed its `expiresAt` (not yet marked ended).
    Expired,
    /// Its Agent no longer owns the WorkItem under the lease's ownership epoch.
    NotOwned,
}

impl Lease {
    /// Whether this lease admits `claim` at `at`: the one lease rule (LSE-4/5, LSE-7, OFL-1).
    /// See [`Refusal`] for the order in which the checks answer.
    pub(crate) fn admits(&self, claim: &Claim<'_>, at: DateTime<Utc>) -> Result<(), Refusal> {
        if claim.lease_id != self.lease_id.as_str() {
            return Err(Refusal::OtherLease);
        }
        if claim.work_item_id != self.work_item_id.as_str() {
            return Err(Refusal::OtherWorkItem);
        }
        if let Some((signer, epoch)) = claim.signer {
            if signer != self.agent_id.as_str() {
                return Err(Refusal::OtherHolder);
            }
            if epoch != self.ownership_epoch {
                return Err(Refusal::OtherEpoch);
            }
            if claim
                .acts_for
                .is_some_and(|ownership| epoch < ownership.ownership_epoch)
            {
                return Err(Refusal::Fenced);
            }
        }
        if claim.acts_for.is_some() && self.kind != Kind::Execution {
            return Err(Refusal::NotExecution);
        }
        if self.released_at.is_some() {
            return Err(Refusal::Ended);
        }
        if at >= self.expires_at {
            return Err(Refusal::Expired);
        }
        if let Some(ownership) = claim.acts_for
            && (ownership.owner != Some(self.agent_id.as_str())
                || ownership.ownership_epoch != self.ownership_epoch)
        {
            return Err(Refusal::NotOwned);
        }
        Ok(())
    }

    /// The claim of whoever acts under this very lease as its own Agent (a capability token):
    /// only whether it runs, and whether its Agent still owns the WorkItem, are left to judge.
    pub(crate) fn own_claim<'a>(&'a self, acts_for: Option<Ownership<'a>>) -> Claim<'a> {
        Claim {
            lease_id: self.lease_id.as_str(),
            work_item_id: self.work_item_id.as_str(),
            signer: None,
            acts_for,
        }
    }

    /// The record a buffered Command's binding is judged against (OFL-9): its close time is
    /// `closed_at`, or, for a lease that ended before schema v12 said why, its release.
    pub(crate) fn record(&self) -> LeaseRecord {
        let closed_at = match self.ended_by {
            None => self.released_at,
            Some(_) => self.closed_at,
        };
        LeaseRecord {
            work_item_id: self.work_item_id.to_string(),
            agent_id: self.agent_id.to_string(),
            session_epoch: self.session_epoch,
            ownership_epoch: self.ownership_epoch,
            started_at: self.started_at.fixed_offset(),
            expires_at: self.expires_at.fixed_offset(),
            closed_at: closed_at.map(|at| at.fixed_offset()),
        }
    }
}

/// The lease `lease_id`, if there is one.
pub(crate) fn load(conn: &Connection, lease_id: &str) -> Result<Option<Lease>, Error> {
    conn.row(
        concat!(
            "SELECT ",
            columns!(),
            " FROM leases l WHERE l.lease_id = ?1"
        ),
        [lease_id],
        Raw::read,
    )
    .optional()?
    .map(Raw::parse)
    .transpose()
}

/// The current (unreleased) lease of a WorkItem, if any: the newest started.
pub(crate) fn current(conn: &Connection, work_item_id: &str) -> Result<Option<Lease>, Error> {
    conn.row(
        concat!(
            "SELECT ",
            columns!(),
            " FROM leases l WHERE l.work_item_id = ?1 AND l.released_at IS NULL
             ORDER BY l.started_at DESC LIMIT 1"
        ),
        [work_item_id],
        Raw::read,
    )
    .optional()?
    .map(Raw::parse)
    .transpose()
}

/// The WorkItem a lease is of, as a capability token acts for it: its Group, Mission and
/// ownership.
#[derive(Clone, Debug)]
pub(crate) struct WorkItemOf {
    pub(crate) group_id: String,
    pub(crate) mission_id: String,
    pub(crate) owner: Option<String>,
    pub(crate) ownership_epoch: u64,
}

impl WorkItemOf {
    pub(crate) fn ownership(&self) -> Ownership<'_> {
        Ownership {
            owner: self.owner.as_deref(),
            ownership_epoch: self.ownership_epoch,
        }
    }
}

/// The lease `lease_id` with its WorkItem's Group, Mission and ownership, in one read (a
/// capability token resolves on every request it carries).
pub(crate) fn load_with_work_item(
    conn: &Connection,
    lease_id: &str,
) -> Result<Option<(Lease, WorkItemOf)>, Error> {
    let found = conn
        .row(
            concat!(
                "SELECT ",
                columns!(),
                ", w.group_id, w.mission_id, w.owner, w.ownership_epoch
                 FROM leases l JOIN work_items w ON w.work_item_id = l.work_item_id
                 WHERE l.lease_id = ?1"
            ),
            [lease_id],
            |row| {
                Ok((
                    Raw::read(row)?,
                    WorkItemOf {
                        group_id: row.get(N_COLUMNS)?,
                        mission_id: row.get(N_COLUMNS + 1)?,
                        owner: row.get(N_COLUMNS + 2)?,
                        ownership_epoch: row.get(N_COLUMNS + 3)?,
                    },
                ))
            },
        )
        .optional()?;
    found
        .map(|(raw, work_item)| Ok((raw.parse()?, work_item)))
        .transpose()
}

/// A new lease, as `work.start` (execution) and `work.block` (blocked) grant it.
pub(crate) struct New<'a> {
    pub(crate) lease_id: &'a str,
    pub(crate) work_item_id: &'a str,
    pub(crate) kind: Kind,
    pub(crate) agent_id: &'a str,
    pub(crate) session_epoch: u64,
    pub(crate) ownership_epoch: u64,
    pub(crate) started_at: DateTime<Utc>,
    pub(crate) expires_at: DateTime<Utc>,
}

pub(crate) fn insert(conn: &Connection, lease: &New<'_>) -> Result<(), Error> {
    conn.run(
        "INSERT INTO leases (lease_id, work_item_id, kind, agent_id, session_epoch, ownership_epoch, started_at, expires_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        params![
            lease.lease_id,
            lease.work_item_id,
            lease.kind.as_str(),
            lease.agent_id,
            lease.session_epoch,
            lease.ownership_epoch,
            format_instant(lease.started_at),
            format_instant(lease.expires_at),
        ],
    )?;
    Ok(())
}

/// Ends and closes every unreleased lease of the WorkItem at `at`, `by` a release or a
/// fencing; answers the ids of the leases ended, sorted.
pub(crate) fn close_open(
    conn: &Connection,
    work_item_id: &str,
    at: DateTime<Utc>,
    by: EndedBy,
) -> Result<Vec<String>, Error> {
    let mut statement = conn.prepare_cached(
        "UPDATE leases SET released_at = ?2, ended_by = ?3, closed_at = ?2
         WHERE work_item_id = ?1 AND released_at IS NULL
         RETURNING lease_id",
    )?;
    let mut ended = statement
        .query_map(
            params![work_item_id, format_instant(at), by.as_str()],
            |r| r.get::<_, String>(0),
        )?
        .collect::<Result<Vec<_>, _>>()?;
    ended.sort();
    Ok(ended)
}

/// Ends lease `lease_id` at `at` without closing it (it expired or was revoked: neither closes
/// a buffered Command's window, DESIGN §12).
pub(crate) fn end(
    conn: &Connection,
    lease_id: &str,
    at: DateTime<Utc>,
    by: EndedBy,
) -> Result<(), Error> {
    conn.run(
        "UPDATE leases SET released_at = ?2, ended_by = ?3 WHERE lease_id = ?1",
        params![lease_id, format_instant(at), by.as_str()],
    )?;
    Ok(())
}

/// Closes lease `lease_id` at `at` (a reconciled checkpoint closes its historical lease when
/// it was buffered, OFL-9).
pub(crate) fn close(conn: &Connection, lease_id: &str, at: DateTime<Utc>) -> Result<(), Error> {
    conn.run(
        "UPDATE leases SET closed_at = ?2 WHERE lease_id = ?1",
        params![lease_id, format_instant(at)],
    )?;
    Ok(())
}

/// The lease now lasts until `expires_at` (a renewal, LSE-3).
pub(crate) fn renew(
    conn: &Connection,
    lease_id: &str,
    expires_at: DateTime<Utc>,
) -> Result<(), Error> {
    conn.run(
        "UPDATE leases SET expires_at = ?2 WHERE lease_id = ?1",
        params![lease_id, format_instant(expires_at)],
    )?;
    Ok(())
}

/// The `work.started` Event at `sequence` opened lease `lease_id` (EVD-2).
pub(crate) fn note_started(conn: &Connection, lease_id: &str, sequence: u64) -> Result<(), Error> {
    conn.run(
        "UPDATE leases SET started_sequence = ?2 WHERE lease_id = ?1",
        params![lease_id, sequence],
    )?;
    Ok(())
}

/// `by` asked at `at` that lease `lease_id` end (LSE-12 step 1).
pub(crate) fn request_preemption(
    conn: &Connection,
    lease_id: &str,
    at: DateTime<Utc>,
    by: &str,
) -> Result<(), Error> {
    conn.run(
        "UPDATE leases SET preemption_requested_at = ?2, preemption_requested_by = ?3 WHERE lease_id = ?1",
        params![lease_id, format_instant(at), by],
    )?;
    Ok(())
}

/// The expiry and WorkItem of every unreleased lease (the deadlines loaded at open).
pub(crate) fn open_expiries(conn: &Connection) -> Result<Vec<(DateTime<Utc>, String)>, Error> {
    let mut statement = conn
        .prepare_cached("SELECT expires_at, work_item_id FROM leases WHERE released_at IS NULL")?;
    let rows = statement
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?
        .collect::<Result<Vec<_>, _>>()?;
    rows.into_iter()
        .map(|(expires_at, work_item_id)| Ok((instant(&expires_at)?, work_item_id)))
        .collect()
}

/// The WorkItems of Group `group_id` on which Agent `agent_id` holds an unreleased Execution
/// Lease (a new session revokes them, LSE-9), in id order.
pub(crate) fn open_execution_work_items(
    conn: &Connection,
    agent_id: &str,
    group_id: &str,
) -> Result<BTreeSet<String>, Error> {
    let mut statement = conn.prepare_cached(
        "SELECT l.work_item_id FROM leases l JOIN work_items w ON w.work_item_id = l.work_item_id
         WHERE l.agent_id = ?1 AND w.group_id = ?2 AND l.kind = 'execution' AND l.released_at IS NULL
         ORDER BY l.work_item_id",
    )?;
    let work_items = statement
        .query_map(params![agent_id, group_id], |r| r.get::<_, String>(0))?
        .collect::<Result<BTreeSet<_>, _>>()?;
    Ok(work_items)
}

/// Every Agent that ever held a lease of WorkItem `work_item_id` in Group `group_id` (leases
/// are never deleted); none for a WorkItem of another Group.
pub(crate) fn holders(
    conn: &Connection,
    work_item_id: &str,
    group_id: &str,
) -> Result<BTreeSet<String>, Error> {
    let mut statement = conn.prepare_cached(
        "SELECT DISTINCT l.agent_id FROM leases l JOIN work_items w ON w.work_item_id = l.work_item_id
         WHERE l.work_item_id = ?1 AND w.group_id = ?2",
    )?;
    let agents = statement
        .query_map([work_item_id, group_id], |row| row.get::<_, String>(0))?
        .collect::<Result<_, _>>()?;
    Ok(agents)
}

/// fsck's rows naming an Event: each Execution Lease's `work.started` (as `group_id`,
/// `sequence`).
pub(crate) const STARTED_EVENTS: &str =
    "SELECT w.group_id AS group_id, l.started_sequence AS sequence FROM leases l
     JOIN work_items w ON w.work_item_id = l.work_item_id
     WHERE l.started_sequence IS NOT NULL";

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> DateTime<Utc> {
        let start: DateTime<Utc> = "2026-12-01T00:00:00Z".parse().expect("instant");
        start + chrono::Duration::seconds(seconds)
    }

    fn lease() -> Lease {
        Lease {
            lease_id: Id::parse("leaseId", "lease-1").expect("id"),
            work_item_id: Id::parse("workItemId", "wi").expect("id"),
            kind: Kind::Execution,
            agent_id: Id::parse("agentId", "w1").expect("id"),
            session_epoch: 1,
            ownership_epoch: 2,
            started_at: at(0),
            expires_at: at(300),
            released_at: None,
            ended_by: None,
            closed_at: None,
            started_sequence: Some(7),
            preemption: None,
        }
    }

    fn signed<'a>(signer: &'a str, epoch: u64, ownership: Ownership<'a>) -> Claim<'a> {
        Claim {
            lease_id: "lease-1",
            work_item_id: "wi",
            signer: Some((signer, epoch)),
            acts_for: Some(ownership),
        }
    }

    const OWNED: Ownership<'static> = Ownership {
        owner: Some("w1"),
        ownership_epoch: 2,
    };

    /// LSE-4/LSE-5: a record under the current Execution Lease of its owner is admitted until
    /// the lease's expiry, compared as time, and not at it.
    #[test]
    fn a_current_execution_lease_admits_its_owner_until_it_expires() {
        let lease = lease();
        assert_eq!(lease.admits(&signed("w1", 2, OWNED), at(299)), Ok(()));
        assert_eq!(
            lease.admits(&signed("w1", 2, OWNED), at(300)),
            Err(Refusal::Expired)
        );
    }

    /// OFL-1/OFL-2: a signer whose epoch the WorkItem left is fenced, even once its lease
    /// ended (the fencing ended it), and that answer comes before the lease's own state.
    #[test]
    fn a_fenced_signer_is_told_so_before_its_lease_ended() {
        let mut lease = lease();
        lease.released_at = Some(at(10));
        let moved_on = Ownership {
            owner: Some("w2"),
            ownership_epoch: 3,
        };
        assert_eq!(
            lease.admits(&signed("w1", 2, moved_on), at(20)),
            Err(Refusal::Fenced)
        );
        assert_eq!(
            lease.admits(&signed("w1", 2, OWNED), at(20)),
            Err(Refusal::Ended)
        );
    }

    /// LSE-4: who signs and under which epoch is checked before anything else of the lease.
    #[test]
    fn another_holder_or_epoch_is_refused_first() {
        let lease = lease();
        assert_eq!(
            lease.admits(&signed("w2", 2, OWNED), at(400)),
            Err(Refusal::OtherHolder)
        );
        assert_eq!(
            lease.admits(&signed("w1", 1, OWNED), at(400)),
            Err(Refusal::OtherEpoch)
        );
        let mut claim = signed("w1", 2, OWNED);
        claim.work_item_id = "other";
        assert_eq!(lease.admits(&claim, at(0)), Err(Refusal::OtherWorkItem));
        claim.lease_id = "lease-2";
        assert_eq!(lease.admits(&claim, at(0)), Err(Refusal::OtherLease));
    }

    /// LSE-7: only an Execution Lease acts, and only while its Agent owns the WorkItem under
    /// its epoch; a Command's quote (nothing acts) asks neither.
    #[test]
    fn only_an_owned_execution_lease_acts() {
        let mut lease = lease();
        let reassigned = Ownership {
            owner: Some("w1"),
            ownership_epoch: 5,
        };
        assert_eq!(
            lease.admits(&lease.own_claim(Some(reassigned)), at(0)),
            Err(Refusal::NotOwned)
        );
        lease.kind = Kind::Blocked;
        assert_eq!(
            lease.admits(&lease.own_claim(Some(OWNED)), at(0)),
            Err(Refusal::NotExecution)
        );
        assert_eq!(lease.admits(&lease.own_claim(None), at(0)), Ok(()));
    }

    /// OFL-9: a lease that ended before v12 said why is closed at its release; otherwise at
    /// its `closed_at` (none after an expiry or a revocation).
    #[test]
    fn the_offline_record_closes_at_the_release_only_for_old_rows() {
        let mut lease = lease();
        lease.released_at = Some(at(100));
        assert_eq!(lease.record().closed_at, Some(at(100).fixed_offset()));
        lease.ended_by = Some(EndedBy::Expired);
        assert_eq!(lease.record().closed_at, None);
    }

    #[test]
    fn a_row_round_trips_through_the_table() {
        let conn = Connection::open_in_memory().expect("open");
        crate::schema::migrate(&conn).expect("schema");
        conn.execute_batch(
            "INSERT INTO groups (group_id, created_at) VALUES ('g1', 'now');
             INSERT INTO missions VALUES ('m1', 'g1', 't', 'normal', '{}', 'active', 1, NULL, NULL, 1, '{}');
             INSERT INTO work_items VALUES ('wi', 'g1', 'm1', 'active', 3, 0, '{}', 'w1', 2, NULL, 0, NULL, 1, '{}');",
        )
        .expect("rows");
        insert(
            &conn,
            &New {
                lease_id: "lease-1",
                work_item_id: "wi",
                kind: Kind::Execution,
                agent_id: "w1",
                session_epoch: 1,
                ownership_epoch: 2,
                started_at: at(0),
                expires_at: at(300),
            },
        )
        .expect("insert");
        note_started(&conn, "lease-1", 7).expect("started");
        let mut expected = lease();
        assert_eq!(
            load(&conn, "lease-1").expect("load"),
            Some(expected.clone())
        );
        assert_eq!(
            current(&conn, "wi").expect("current"),
            Some(expected.clone())
        );
        request_preemption(&conn, "lease-1", at(5), "c1").expect("preempt");
        renew(&conn, "lease-1", at(600)).expect("renew");
        let ended = close_open(&conn, "wi", at(9), EndedBy::Fenced).expect("close");
        assert_eq!(ended, vec!["lease-1".to_owned()]);
        expected.expires_at = at(600);
        expected.released_at = Some(at(9));
        expected.closed_at = Some(at(9));
        expected.ended_by = Some(EndedBy::Fenced);
        expected.preemption = Some((at(5), Id::parse("agentId", "c1").expect("id")));
        assert_eq!(load(&conn, "lease-1").expect("load"), Some(expected));
        assert_eq!(current(&conn, "wi").expect("current"), None);
        assert_eq!(
            holders(&conn, "wi", "g1").expect("holders"),
            BTreeSet::from(["w1".to_owned()])
        );
        assert!(holders(&conn, "wi", "g2").expect("holders").is_empty());
    }
}
