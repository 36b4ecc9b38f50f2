//! The lease rule's tests ([`super::leases::Lease::admits`]): every refusal, at its edges.

use std::collections::BTreeSet;

use crate::sql::Connection;
use chrono::{DateTime, Utc};
use weft_api::Id;
use weft_api::work::machine::WorkState;

use super::leases::*;

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
    // The WorkItem alone (no Group or Mission rows): `holders` reads its Group.
    conn.execute_batch("PRAGMA foreign_keys = OFF")
        .expect("pragma");
    let contract = super::work_items::sample_contract("o");
    let work_item = super::work_items::sample("wi", "g1", "m1", WorkState::Active, contract);
    super::work_items::seed(&conn, &work_item).expect("work item");
    let tx = crate::unit::Tx::over(&conn);
    // What the job's memo answers after each change must be what the table says (unit.rs).
    let same = |what: &str| {
        let remembered = current(&tx, "wi").expect("current");
        assert_eq!(remembered, current(&conn, "wi").expect("current"), "{what}");
    };
    same("before the lease");
    insert(
        &tx,
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
    same("inserted");
    note_started(&tx, "lease-1", 7).expect("started");
    same("started");
    let mut expected = lease();
    assert_eq!(
        load(&conn, "lease-1").expect("load"),
        Some(expected.clone())
    );
    assert_eq!(
        current(&conn, "wi").expect("current"),
        Some(expected.clone())
    );
    request_preemption(&tx, "lease-1", at(5), "c1").expect("preempt");
    same("preemption requested");
    renew(&tx, "lease-1", at(600)).expect("renew");
    same("renewed");
    let ended = close_open(&tx, "wi", at(9), EndedBy::Fenced).expect("close");
    same("closed");
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
