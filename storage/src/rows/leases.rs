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
//! see one; it stores what they decide. Long (about 650 lines; the rule's tests are in
//! `leases_tests.rs`) because the row, its rule and every statement on the table stay in one
//! place.

use std::collections::BTreeSet;

use crate::sql::{Ahead, Connection, OptionalExtension as _, params};
use chrono::{DateTime, Utc};
use weft_api::Id;
use weft_api::work::offline::LeaseRecord;

use super::{id, instant};
use crate::clock::{format_instant, stored};
use crate::error::Error;
use crate::sql::Cached as _;
use crate::unit::Conn;
use crate::unit::Tx;

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
    fn read(row: &crate::sql::Row<'_>) -> crate::sql::Result<Self> {
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
    load_ahead(conn, lease_id)?.get(conn)
}

const READ_ONE: &str = concat!(
    "SELECT ",
    columns!(),
    " FROM leases l WHERE l.lease_id = ?1"
);

/// [`load`], sent ahead (`sql/ahead.rs`): a publication sends it with its first reads
/// (`artifacts/publish.rs`).
pub(crate) fn load_ahead(
    conn: &Connection,
    lease_id: &str,
) -> Result<Ahead<Option<Lease>, Error>, Error> {
    first_ahead(conn, READ_ONE, lease_id)
}

/// The first lease `sql` (of one parameter, `key`) answers, sent ahead.
fn first_ahead(
    conn: &Connection,
    sql: &str,
    key: &str,
) -> Result<Ahead<Option<Lease>, Error>, Error> {
    let rows = conn.rows_ahead(sql, [key], Raw::read)?;
    Ok(rows.then(|rows: Vec<Raw>| rows.into_iter().next().map(Raw::parse).transpose()))
}

/// The current (unreleased) lease of a WorkItem, if any: the newest started.
/// What the job's memo remembers a WorkItem's current lease under.
const CURRENT: &str = "leases.current";

/// The WorkItem's current (unreleased) lease, loaded once per writer job (`unit.rs`).
pub(crate) fn current(
    c: &(impl Conn + ?Sized),
    work_item_id: &str,
) -> Result<Option<Lease>, Error> {
    match c.memo() {
        Some(memo) => memo.load(CURRENT, work_item_id, || {
            read_current(c.conn(), work_item_id)
        }),
        None => read_current(c.conn(), work_item_id),
    }
}

/// A WorkItem's current (unreleased) lease, the newest.
pub(crate) const READ_CURRENT: &str = concat!(
    "SELECT ",
    columns!(),
    " FROM leases l WHERE l.work_item_id = ?1 AND l.released_at IS NULL
     ORDER BY l.started_at DESC LIMIT 1"
);

fn read_current(conn: &Connection, work_item_id: &str) -> Result<Option<Lease>, Error> {
    current_ahead(conn, work_item_id)?.get(conn)
}

/// [`current`], sent ahead (`sql/ahead.rs`): a Command sends it with its lookup of an earlier
/// answer (`work/command.rs`) and hands the answer to its job's memo ([`remember_current`]).
pub(crate) fn current_ahead(
    conn: &Connection,
    work_item_id: &str,
) -> Result<Ahead<Option<Lease>, Error>, Error> {
    first_ahead(conn, READ_CURRENT, work_item_id)
}

/// WorkItem `work_item_id`'s current lease is `lease`, as read ahead before the job changed
/// anything ([`current_ahead`]): what [`current`] would have loaded.
pub(crate) fn remember_current(tx: &Tx<'_>, work_item_id: &str, lease: Option<Lease>) {
    tx.loaded().remember(CURRENT, work_item_id, lease);
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

pub(crate) fn insert(tx: &Tx<'_>, lease: &New<'_>) -> Result<(), Error> {
    tx.run_later(
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
    // The new lease is the WorkItem's current one, as the row now reads.
    match (
        Id::parse("leaseId", lease.lease_id),
        Id::parse("workItemId", lease.work_item_id),
        Id::parse("agentId", lease.agent_id),
    ) {
        (Ok(lease_id), Ok(work_item_id), Ok(agent_id)) => {
            let row = Lease {
                lease_id,
                work_item_id,
                kind: lease.kind,
                agent_id,
                session_epoch: lease.session_epoch,
                ownership_epoch: lease.ownership_epoch,
                started_at: stored(lease.started_at),
                expires_at: stored(lease.expires_at),
                released_at: None,
                ended_by: None,
                closed_at: None,
                started_sequence: None,
                preemption: None,
            };
            tx.loaded().remember(CURRENT, lease.work_item_id, Some(row));
        }
        _ => tx.loaded().forget_all(),
    }
    Ok(())
}

/// Ends and closes every unreleased lease of the WorkItem at `at`, `by` a release or a
/// fencing; answers the ids of the leases ended, sorted.
pub(crate) fn close_open(
    tx: &Tx<'_>,
    work_item_id: &str,
    at: DateTime<Utc>,
    by: EndedBy,
) -> Result<Vec<String>, Error> {
    let mut ended = tx.rows(
        "UPDATE leases SET released_at = ?2, ended_by = ?3, closed_at = ?2
         WHERE work_item_id = ?1 AND released_at IS NULL
         RETURNING lease_id",
        params![work_item_id, format_instant(at), by.as_str()],
        |r| r.get::<_, String>(0),
    )?;
    ended.sort();
    tx.loaded().remember(CURRENT, work_item_id, None::<Lease>);
    Ok(ended)
}

/// Ends lease `lease_id` at `at` without closing it (it expired or was revoked: neither closes
/// a buffered Command's window, DESIGN §12).
pub(crate) fn end(
    tx: &Tx<'_>,
    lease_id: &str,
    at: DateTime<Utc>,
    by: EndedBy,
) -> Result<(), Error> {
    tx.run(
        "UPDATE leases SET released_at = ?2, ended_by = ?3 WHERE lease_id = ?1",
        params![lease_id, format_instant(at), by.as_str()],
    )?;
    // No longer anyone's current lease.
    tx.loaded().update::<Option<Lease>>(CURRENT, |current| {
        if current
            .as_ref()
            .is_some_and(|lease| lease.lease_id.as_str() == lease_id)
        {
            *current = None;
        }
    });
    Ok(())
}

/// Closes lease `lease_id` at `at` (a reconciled checkpoint closes its historical lease when
/// it was buffered, OFL-9).
pub(crate) fn close(tx: &Tx<'_>, lease_id: &str, at: DateTime<Utc>) -> Result<(), Error> {
    tx.run(
        "UPDATE leases SET closed_at = ?2 WHERE lease_id = ?1",
        params![lease_id, format_instant(at)],
    )?;
    let at = stored(at);
    change(tx, lease_id, |lease| lease.closed_at = Some(at));
    Ok(())
}

/// The lease now lasts until `expires_at` (a renewal, LSE-3).
pub(crate) fn renew(tx: &Tx<'_>, lease_id: &str, expires_at: DateTime<Utc>) -> Result<(), Error> {
    tx.run_later(
        "UPDATE leases SET expires_at = ?2 WHERE lease_id = ?1",
        params![lease_id, format_instant(expires_at)],
    )?;
    let expires_at = stored(expires_at);
    change(tx, lease_id, |lease| lease.expires_at = expires_at);
    Ok(())
}

/// The `work.started` Event at `sequence` opened lease `lease_id` (EVD-2).
pub(crate) fn note_started(tx: &Tx<'_>, lease_id: &str, sequence: u64) -> Result<(), Error> {
    tx.run_later(
        "UPDATE leases SET started_sequence = ?2 WHERE lease_id = ?1",
        params![lease_id, sequence],
    )?;
    change(tx, lease_id, |lease| {
        lease.started_sequence = Some(sequence)
    });
    Ok(())
}

/// `by` asked at `at` that lease `lease_id` end (LSE-12 step 1).
pub(crate) fn request_preemption(
    tx: &Tx<'_>,
    lease_id: &str,
    at: DateTime<Utc>,
    by: &str,
) -> Result<(), Error> {
    tx.run(
        "UPDATE leases SET preemption_requested_at = ?2, preemption_requested_by = ?3 WHERE lease_id = ?1",
        params![lease_id, format_instant(at), by],
    )?;
    let at = stored(at);
    let by = Id::parse("agentId", by)?;
    change(tx, lease_id, |lease| {
        lease.preemption = Some((at, by.clone()))
    });
    Ok(())
}

/// Applies `edit` to lease `lease_id` where the job's memo remembers it as a current lease.
fn change(tx: &Tx<'_>, lease_id: &str, mut edit: impl FnMut(&mut Lease)) {
    tx.loaded().update::<Option<Lease>>(CURRENT, |current| {
        if let Some(lease) = current
            .as_mut()
            .filter(|lease| lease.lease_id.as_str() == lease_id)
        {
            edit(lease);
        }
    });
}

/// The expiry and WorkItem of every unreleased lease (the deadlines loaded at open).
pub(crate) fn open_expiries(conn: &Connection) -> Result<Vec<(DateTime<Utc>, String)>, Error> {
    let rows = conn.rows(
        "SELECT expires_at, work_item_id FROM leases WHERE released_at IS NULL",
        [],
        |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)),
    )?;
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
    let work_items = conn.rows("SELECT l.work_item_id FROM leases l JOIN work_items w ON w.work_item_id = l.work_item_id
         WHERE l.agent_id = ?1 AND w.group_id = ?2 AND l.kind = 'execution' AND l.released_at IS NULL
         ORDER BY l.work_item_id", params![agent_id, group_id], |r| r.get::<_, String>(0))?.into_iter().map(Ok::<_, crate::sql::SqlError>)
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
    let agents = conn.rows("SELECT DISTINCT l.agent_id FROM leases l JOIN work_items w ON w.work_item_id = l.work_item_id
         WHERE l.work_item_id = ?1 AND w.group_id = ?2", [work_item_id, group_id], |row| row.get::<_, String>(0))?.into_iter().map(Ok::<_, crate::sql::SqlError>)
        .collect::<Result<_, _>>()?;
    Ok(agents)
}

/// fsck's rows naming an Event: each Execution Lease's `work.started` (as `group_id`,
/// `sequence`).
pub(crate) const STARTED_EVENTS: &str =
    "SELECT w.group_id AS group_id, l.started_sequence AS sequence FROM leases l
     JOIN work_items w ON w.work_item_id = l.work_item_id
     WHERE l.started_sequence IS NOT NULL";
