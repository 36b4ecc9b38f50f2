//! How many SQL statements the writer runs for the signed writes under a lease (issue #41:
//! one load per row per transaction), counted by the store's write meter
//! (`Store::start_metering_writes`), not by wall time: a `work.start`, a `lease.renew`, a
//! `work.progress`, a publication under the lease, a `work.checkpoint` and a publication
//! with its bytes in one request. No query may run
//! twice with the same parameters in one job (a row loaded twice: the unit of work,
//! `storage/src/unit.rs`, hands every check the row it loaded). The figures are printed
//! (`cargo test -p weft --lib statements -- --nocapture`) and held under ceilings that may
//! only come down.

use serde_json::json;
use weft_storage::SqlWork;

use super::harness::*;
use super::progress::{MISSION, checkpoint, now, ok_quoting, owned, progress, setup, start};
use super::with_content::publication as publication_in_one;
use super::work::{mission, ok};
use super::work_setup::contract;

/// The most writer statements each write ran on any backend (the memory backend's
/// publication also reads through the writer): a ratchet, lower them, raise them only for a
/// correctness fix that says so (below).
/// Before the unit of work (stop 40): publication 37, checkpoint 23 (the current lease was
/// loaded three times), and a `work.start` loaded its dependencies' states twice.
/// Issue #45 added two per Event appended (the Merkle tree's one read and one insert,
/// `storage/src/tlog.rs`): 23, 23, 22, 37 and 21 before. Issue #46 added one to a publication
/// of bytes stored earlier (the Group's quota bound, forgotten when the bytes are new to the
/// Group: `storage/src/artifacts/quota.rs`): 39 before. Stop 63: a WorkItem's view reads its
/// dependency edges and their states in one statement, a `work.progress` answers the report
/// it just wrote without reading it back, and a quoted lease that is the current one is read
/// once: 25, 25, 24, 40 and 23 before. Stop 64: a publication reads its signer's Membership
/// (roles and Mission scope) once, and its WorkItem's place and ownership once: 38 before.
/// And the most round trips each took on PostgreSQL (changes and the view's reads sent
/// ahead, `storage/src/sql/pipeline.rs`, `ahead.rs`; a statement's first preparation on a
/// connection is not counted): 30, 26, 23, 29 and 23 before stop 64, preparations counted.
/// Stop 65: the publication metered is the second on its connection (a new statement's
/// preparation waits for what was sent ahead), and its checks' first four reads (already
/// recorded? the key's Agent, the Group, the Membership) go together: 16 before. Stop 69: a
/// Command's Membership and session epoch travel with its lookup of an earlier answer: 15,
/// 13, 12 and 13 before (and a Group's newest Event is read once per writer transaction, not
/// per job, which a job metered alone does not show); then its WorkItem and, under a lease,
/// the current lease: 13, 11, 10 and 11 before. Stop 70: and its Mission, when the
/// connection knows the WorkItem's (it read the WorkItem before): 12, 9, 8 and 9 before.
/// Stop 71: a publication's shared lock against disposals travels with the blob's row: 13;
/// its WorkItem and lease are read with its first reads: 12.
/// The one-request publication (last, `PUT /v1/artifacts/{digest}`, the bench's) is metered
/// from stop 71: 20 statements, 14 round trips; its session's Membership (with its scope)
/// and epoch read together: 19 and 12; its Group's quota read with the session: 11; the blob's
/// inline copy read with the blob's row: 10.
const ROUND_TRIPS: [u64; 6] = [11, 8, 7, 10, 8, 10];

/// Raised once, at stop 72, by one for each Command (24, 23, 21 and 21 before): a Command
/// re-checks in its transaction that its signing key is still its Agent's current one (a
/// rotation or deactivation through another server between the door and the commit let a
/// Command signed with the retired key commit). The read travels with the lookup: no round
/// trip is added.
const CEILINGS: [(&str, u64); 6] = [
    ("work.start", 25),
    ("lease.renew", 24),
    ("work.progress", 22),
    ("publication", 36),
    ("work.checkpoint", 22),
    ("publication in one request", 19),
];

/// The work `write` did in the writer.
async fn metered<T>(h: &Harness, write: impl Future<Output = T>) -> (T, SqlWork) {
    h.store.start_metering_writes();
    let answer = write.await;
    (answer, h.store.stop_metering_writes())
}

backends!(
    /// The writes of one attempt under an Execution Lease: the statements each runs in the
    /// writer, and no row loaded twice in one.
    async fn statements_per_write(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, worker, _) = setup(&h).await;
        owned(&h, &coordinator, &worker, "wi-1", contract(&[])).await;
        let (lease, started) = metered(&h, start(&h, &worker, "wi-1")).await;
        let renew = json!({"workItemId": "wi-1"});
        let (_, renewed) = metered(&h, ok_quoting(&h, &worker, "lease.renew", renew, &lease)).await;
        let (_, progressed) = metered(
            &h,
            ok_quoting(&h, &worker, "work.progress", progress("wi-1", 40.0), &lease),
        )
        .await;

        // A first publication prepares its statements on the Group's writer connection (a
        // new statement's preparation waits for what was sent ahead): the second is metered.
        let mut published = None;
        for bytes in [&b"a first result"[..], b"a result"] {
            let digests = h.upload(&worker, bytes).await;
            let mut manifest = manifest(&worker, "g1", digests, &[]);
            manifest.mission_id = weft_api::Id::parse("m", MISSION).expect("id");
            manifest.work_item_id = weft_api::Id::parse("w", "wi-1").expect("id");
            manifest.execution.lease_id = weft_api::Id::parse("l", &lease).expect("id");
            let envelope = sign(&worker.key, &manifest);
            let (answer, work) = metered(&h, h.publish(&worker, &envelope)).await;
            assert_eq!(answer.status, axum::http::StatusCode::CREATED, "{answer:?}");
            published = Some(work);
        }
        let published = published.expect("metered");
        // The same in one request (manifest and bytes, `PUT /v1/artifacts/{digest}`), the
        // second metered likewise.
        let mut in_one = None;
        for bytes in [&b"a first result in one"[..], b"a result in one"] {
            let mut manifest = manifest(&worker, "g1", digest_of(bytes), &[]);
            manifest.mission_id = weft_api::Id::parse("m", MISSION).expect("id");
            manifest.work_item_id = weft_api::Id::parse("w", "wi-1").expect("id");
            manifest.execution.lease_id = weft_api::Id::parse("l", &lease).expect("id");
            let envelope = sign(&worker.key, &manifest);
            let request = publication_in_one(&worker, &envelope, bytes);
            let (answer, work) = metered(&h, h.send(request)).await;
            assert_eq!(answer.status, axum::http::StatusCode::CREATED, "{answer:?}");
            in_one = Some(work);
        }
        let in_one = in_one.expect("metered");

        let (_, checkpointed) = metered(
            &h,
            ok_quoting(&h, &worker, "work.checkpoint", checkpoint("wi-1"), &lease),
        )
        .await;

        let measured = [
            started,
            renewed,
            progressed,
            published,
            checkpointed,
            in_one,
        ];
        for (((write, ceiling), work), trips) in CEILINGS.iter().zip(&measured).zip(ROUND_TRIPS) {
            if kind == Kind::Postgres {
                assert!(
                    work.round_trips <= trips,
                    "{kind:?}: {write} took {} round trips (ceiling {trips})",
                    work.round_trips
                );
            }
            // PostgreSQL runs one statement more per write: the Group's row lock that
            // serialises several servers (issue #43); it counts no SAVEPOINT of SQLite's.
            let ceiling = &(ceiling + u64::from(kind == Kind::Postgres));
            println!(
                "{kind:?}: {write}: {} statements, {} rows, {} round trips",
                work.statements, work.rows, work.round_trips
            );
            assert!(work.statements > 0, "{kind:?}: {write}: the meter counts");
            // Known (stop 71): the one-request publication reads the signer's Membership in
            // its upload's liveness check and again with the publication's first reads.
            let known: &[&str] = match *write {
                "publication in one request" => &["roles, epoch, missions"],
                _ => &[],
            };
            assert!(
                work.repeated_loads.len() == known.len()
                    && known
                        .iter()
                        .zip(&work.repeated_loads)
                        .all(|(table, load)| load.contains(table)),
                "{kind:?}: {write} loaded a row twice: {:#?}",
                work.repeated_loads
            );
            assert!(
                work.statements <= *ceiling,
                "{kind:?}: {write} ran {} statements (ceiling {ceiling})",
                work.statements
            );
        }
    }
);

backends!(
    /// Issue #44: a renewal costs the same on its 400th as on its 300th: the same statements
    /// and the same rows (the view lists the newest 16 renewals, `renewalsTruncated` past
    /// them, and the newest 64 Events of the WorkItem; it listed every renewal, so each one
    /// read, answered and stored the lease's whole history). LSE-3: the renewal history is
    /// still the lease's, newest last.
    async fn a_renewal_costs_the_same_however_old_its_lease(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, worker, _) = setup(&h).await;
        owned(&h, &coordinator, &worker, "wi-1", contract(&[])).await;
        let lease = start(&h, &worker, "wi-1").await;
        let renew = || json!({"workItemId": "wi-1"});
        let mut costs = Vec::new();
        let mut last = serde_json::Value::Null;
        for n in 1..=400 {
            h.clock.advance(chrono::Duration::seconds(1));
            let (answer, work) =
                metered(&h, ok_quoting(&h, &worker, "lease.renew", renew(), &lease)).await;
            if n == 300 || n == 400 {
                costs.push((work.statements, work.rows));
            }
            last = answer;
        }
        assert_eq!(
            costs[0], costs[1],
            "{kind:?}: the 300th renewal against the 400th"
        );
        let shown = &last["state"]["lease"];
        assert_eq!(
            shown["renewals"].as_array().map(Vec::len),
            Some(16),
            "{kind:?}"
        );
        assert_eq!(shown["renewalsTruncated"], true, "{kind:?}");
        let newest = shown["renewals"][15].as_str().expect("an instant");
        let newest: chrono::DateTime<chrono::Utc> = newest.parse().expect("RFC 3339");
        assert_eq!(newest, now(&h), "{kind:?}: the newest renewal is last");
    }
);

backends!(
    /// A writer connection on PostgreSQL sends a work Command's Mission with its lookup when
    /// it knows the WorkItem's Mission (stop 70): a guess, checked against the WorkItem read.
    /// Taught a wrong one (another Mission of the Group, cancelled), `work.start` still runs
    /// against its own live Mission; the guess is read, then not used. Nothing to teach on
    /// SQLite, where the Mission is read where it is used.
    async fn a_wrong_guess_of_a_work_items_mission_is_not_used(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, worker, _) = setup(&h).await;
        mission(&h, &coordinator, "g1", "mission-2").await;
        let cancel = json!({"missionId": "mission-2"});
        ok(&h, &coordinator, "g1", "mission.cancel", cancel).await;
        owned(&h, &coordinator, &worker, "wi-1", contract(&[])).await;
        weft_storage::bench_support::teach_mission(&h.store, "g1", "wi-1", "mission-2")
            .await
            .expect("taught");
        let lease = start(&h, &worker, "wi-1").await;
        ok_quoting(&h, &worker, "work.progress", progress("wi-1", 10.0), &lease).await;
    }
);
