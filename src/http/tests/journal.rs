//! The Worker's offline journal (`weft_api::journal`, issue #13, OFL-3…OFL-8) against the real
//! server over loopback: Commands buffered while cut off are durable (a reopened journal has
//! them, a torn last line is cut off), the journal refuses what cannot be buffered, and on
//! reconnect it rebases, re-signs and sends them in order (OFL-8), each charged once; it stops
//! at the first refusal, recorded with the server's code, and sends nothing more after it.

use std::time::Duration as StdDuration;

use chrono::{DateTime, Duration, FixedOffset};
use serde_json::{Value, json};
use weft_api::Id;
use weft_api::client::Client;
use weft_api::journal::{Journal, JournalError, OfflineLease, Rebase, Status};
use weft_api::work::CommandType;
use weft_api::work::contract::Budgets;

use axum::http::Method;
use weft_api::Envelope;
use weft_api::work::COMMAND_TYPE;

use super::budget::{MISSION, budget_of, limit, mission_with, progress, quoting, started, usage};
use super::harness::*;
use super::work::group;

const WI: &str = "wi-j";

fn now(h: &Harness) -> DateTime<FixedOffset> {
    weft_storage::Clock::now(&h.clock).fixed_offset()
}

fn budgets(tokens: u64, financial: f64) -> Budgets {
    serde_json::from_value(usage(tokens, financial)).expect("usage")
}

/// The lease `agent` holds on `WI`, as the Worker knew it before losing the Authority.
async fn offline_lease(h: &Harness, agent: &Agent) -> OfflineLease {
    let view = h.get_json(agent, &format!("/v1/workitems/{WI}")).await;
    let lease = &view["lease"];
    let session = h
        .store
        .sessions()
        .authenticate(&agent.token)
        .await
        .expect("live session");
    OfflineLease {
        agent_id: Id::parse("a", lease["agentId"].as_str().expect("agent")).expect("id"),
        group_id: Id::parse("g", "g1").expect("id"),
        work_item_id: Id::parse("w", WI).expect("id"),
        lease_id: Id::parse("l", lease["leaseId"].as_str().expect("lease")).expect("id"),
        session_epoch: session.session_epoch,
        membership_epoch: session.membership_epoch,
        ownership_epoch: lease["ownershipEpoch"].as_u64().expect("epoch"),
        lease_expires_at: DateTime::parse_from_rfc3339(
            lease["expiresAt"].as_str().expect("expiresAt"),
        )
        .expect("RFC 3339"),
        grace_seconds: view["contract"]["leases"]["graceSeconds"]
            .as_u64()
            .expect("grace"),
    }
}

/// `agent`'s new session (the reconnect; LSE-9 revokes the historical lease) and a client on
/// it through a real listener.
async fn reconnect(h: &Harness, agent: &Agent) -> (Agent, Client) {
    let token = h.session(&agent.key, agent.id.as_str(), "g1").await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let base = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(crate::serve(
        listener,
        h.app.clone(),
        StdDuration::from_secs(5),
        StdDuration::from_secs(30),
        futures::future::pending(),
    ));
    let client = Client::new(base, Some(token.clone()));
    let agent = Agent {
        id: agent.id.clone(),
        key: agent.key.clone(),
        token,
    };
    (agent, client)
}

async fn rebase<'a>(h: &Harness, agent: &'a Agent) -> Rebase<'a> {
    let session = h
        .store
        .sessions()
        .authenticate(&agent.token)
        .await
        .expect("live session");
    Rebase {
        key: &agent.key,
        session_epoch: session.session_epoch,
        membership_epoch: session.membership_epoch,
        issued_at: now(h),
    }
}

fn checkpoint() -> Value {
    json!({"workItemId": WI, "checkpoint": {"note": "offline safe point"}})
}

backends!(
    /// OFL-3, OFL-8, OFL-10, OFL-11 from the Worker's side: two progress reports and a
    /// checkpoint buffered offline survive a reopen (and a torn last line), are sent in order
    /// on reconnect, each charged once; a second reconcile sends nothing.
    async fn a_journal_buffers_durably_and_reconciles_in_order(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, _) = group(&h).await;
        mission_with(&h, &coordinator, MISSION, limit(1000, 50.0), None).await;
        started(&h, &coordinator, &w1, MISSION, WI, limit(500, 10.0)).await;
        let lease = offline_lease(&h, &w1).await;
        let path = h.dir.path().join("journal.jsonl");
        let mut journal = Journal::open(&path).expect("open");
        h.clock.advance(Duration::seconds(10));
        let cut_off = now(&h);
        for tokens in [30, 40] {
            h.clock.advance(Duration::seconds(5));
            journal
                .buffer(
                    &lease,
                    cut_off,
                    CommandType::WorkProgress,
                    progress(WI, usage(tokens, 0.5)),
                    budgets(tokens, 0.5),
                    now(&h),
                )
                .expect("buffered");
        }
        h.clock.advance(Duration::seconds(5));
        journal
            .buffer(
                &lease,
                cut_off,
                CommandType::WorkCheckpoint,
                checkpoint(),
                budgets(20, 0.25),
                now(&h),
            )
            .expect("buffered");
        // Nothing more under a lease its own checkpoint ended, and only progress/checkpoints.
        let after = journal.buffer(
            &lease,
            cut_off,
            CommandType::WorkProgress,
            progress(WI, usage(1, 0.0)),
            budgets(1, 0.0),
            now(&h),
        );
        assert!(matches!(after, Err(JournalError::Refused(_))), "{after:?}");
        let submit = journal.buffer(
            &lease,
            cut_off,
            CommandType::WorkSubmit,
            json!({"workItemId": WI}),
            budgets(1, 0.0),
            now(&h),
        );
        assert!(
            matches!(submit, Err(JournalError::Refused(_))),
            "{submit:?}"
        );
        drop(journal);

        // A crash mid-append leaves a torn line: cut off on open, the rest intact.
        use std::io::Write as _;
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .expect("open");
        file.write_all(br#"{"record":"buffered","command":{"comm"#)
            .expect("torn");
        drop(file);
        let mut journal = Journal::open(&path).expect("reopen");
        assert_eq!(
            journal.pending().count(),
            3,
            "every buffered Command survived"
        );
        assert!(
            std::fs::read(&path).expect("read").ends_with(b"\n"),
            "the torn line is gone"
        );

        h.clock.advance(Duration::seconds(30));
        let (w1, client) = reconnect(&h, &w1).await;
        let done = journal
            .reconcile(&client, rebase(&h, &w1).await)
            .await
            .expect("reconciled");
        assert!(done.refused.is_none(), "{:?}", done.refused);
        let kinds: Vec<Vec<&str>> = done
            .accepted
            .iter()
            .map(|a| a.events.iter().map(|e| e.kind.as_str()).collect())
            .collect();
        let usage_recorded = "ext.missionweaveprotocol.core.resource_usage_recorded";
        assert_eq!(
            kinds,
            [
                vec![usage_recorded, "work.progress_reported"],
                vec![usage_recorded, "work.progress_reported"],
                vec![usage_recorded, "work.checkpointed"],
            ],
            "in buffering order, each after its usage (OFL-11)"
        );
        let (_, spent) = budget_of(&h, &w1, &format!("/v1/workitems/{WI}")).await;
        assert_eq!(spent, usage(90, 1.25));
        assert!(
            journal
                .entries()
                .iter()
                .all(|e| matches!(e.status, Status::Accepted { .. }))
        );

        // Durable outcomes: a reopened journal has nothing to send, and sending again is
        // answered from the Authority's record (charged once).
        let mut journal = Journal::open(&path).expect("reopen");
        assert_eq!(journal.pending().count(), 0);
        let again = journal
            .reconcile(&client, rebase(&h, &w1).await)
            .await
            .expect("nothing");
        assert!(again.accepted.is_empty());
        let (_, spent) = budget_of(&h, &w1, &format!("/v1/workitems/{WI}")).await;
        assert_eq!(spent, usage(90, 1.25), "charged once");
    }
);

backends!(
    /// OFL-12 through the journal: the second buffered report overflows the Mission's budget
    /// (not the WorkItem's); reconciliation applies the first, stops at the second with
    /// `budget_exceeded`, leaves the third pending and sends nothing more until the journal
    /// is discarded.
    async fn a_journal_stops_at_the_first_refusal(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, _) = group(&h).await;
        mission_with(&h, &coordinator, MISSION, limit(100, 50.0), None).await;
        started(&h, &coordinator, &w1, MISSION, WI, limit(500, 10.0)).await;
        let lease = offline_lease(&h, &w1).await;
        let path = h.dir.path().join("journal.jsonl");
        let mut journal = Journal::open(&path).expect("open");
        let cut_off = now(&h);
        for tokens in [60, 60, 1] {
            h.clock.advance(Duration::seconds(5));
            journal
                .buffer(
                    &lease,
                    cut_off,
                    CommandType::WorkProgress,
                    progress(WI, usage(tokens, 0.0)),
                    budgets(tokens, 0.0),
                    now(&h),
                )
                .expect("buffered");
        }
        let (w1, client) = reconnect(&h, &w1).await;
        let done = journal
            .reconcile(&client, rebase(&h, &w1).await)
            .await
            .expect("answered");
        assert_eq!(done.accepted.len(), 1);
        let (_, code, _) = done.refused.expect("stopped");
        assert_eq!(code, "budget_exceeded");
        let statuses: Vec<_> = journal.entries().iter().map(|e| e.status.clone()).collect();
        assert!(matches!(statuses[0], Status::Accepted { .. }));
        assert!(matches!(&statuses[1], Status::Refused { code, .. } if code == "budget_exceeded"));
        assert_eq!(statuses[2], Status::Pending);
        let (_, spent) = budget_of(&h, &w1, &format!("/v1/missions/{MISSION}")).await;
        assert_eq!(
            spent["tokens"], 60,
            "nothing of the refused delta was charged"
        );

        // Stopped: the journal sends nothing more, even reopened, until discarded.
        let mut journal = Journal::open(&path).expect("reopen");
        let again = journal
            .reconcile(&client, rebase(&h, &w1).await)
            .await
            .expect("answered");
        assert!(again.accepted.is_empty());
        assert_eq!(
            again.refused.map(|r| r.1).as_deref(),
            Some("budget_exceeded")
        );
        assert_eq!(journal.discard().expect("discarded"), 3);
        assert!(journal.entries().is_empty());
        let (_, spent) = budget_of(&h, &w1, &format!("/v1/missions/{MISSION}")).await;
        assert_eq!(spent["tokens"], 60);
    }
);

backends!(
    /// OFL-9 on the Worker's side: past the lease's expiry plus its grace nothing is buffered.
    async fn a_journal_refuses_past_the_grace_period(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, _) = group(&h).await;
        mission_with(&h, &coordinator, MISSION, limit(1000, 50.0), None).await;
        started(&h, &coordinator, &w1, MISSION, WI, limit(500, 10.0)).await;
        let lease = offline_lease(&h, &w1).await;
        let mut journal = Journal::open(&h.dir.path().join("journal.jsonl")).expect("open");
        let late = lease.lease_expires_at + Duration::seconds(lease.grace_seconds as i64 + 1);
        let refused = journal.buffer(
            &lease,
            now(&h),
            CommandType::WorkProgress,
            progress(WI, usage(1, 0.0)),
            budgets(1, 0.0),
            late,
        );
        assert!(
            matches!(refused, Err(JournalError::Refused(_))),
            "{refused:?}"
        );
        assert!(journal.entries().is_empty());
    }
);

/// `documents` signed by `agent` as one batch.
fn batch_request(agent: &Agent, documents: &[Value]) -> axum::http::Request<axum::body::Body> {
    let commands: Vec<Envelope> = documents
        .iter()
        .map(|d| Envelope::sign(&agent.key, COMMAND_TYPE, d.to_string().as_bytes()))
        .collect();
    request(
        Method::POST,
        "/v1/groups/g1/commands/batch",
        Some(&agent.token),
        serde_json::to_vec(&json!({"commands": commands})).expect("json"),
    )
}

fn progress_reports(events: &Value) -> usize {
    events["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["type"] == "work.progress_reported")
        .count()
}

backends!(
    /// The batch route the journal reconciles through (OFL-8's order): Commands apply in
    /// order in one transaction, the first refusal stops the batch with its index and code,
    /// nothing of it or after it is applied (OFL-12: no partial charge), and sending the batch
    /// again replays the accepted one; an empty or oversized batch, or the operator's, is
    /// refused whole with nothing changed.
    async fn a_batch_applies_in_order_and_stops_at_the_first_refusal(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, _) = group(&h).await;
        mission_with(&h, &coordinator, MISSION, limit(100, 50.0), None).await;
        let lease = started(&h, &coordinator, &w1, MISSION, WI, limit(500, 10.0)).await;
        let mut documents = Vec::new();
        for tokens in [60, 60, 1] {
            let payload = progress(WI, usage(tokens, 0.0));
            documents.push(quoting(&h, &w1, "work.progress", payload, &lease).await);
        }
        let answer = h.send(batch_request(&w1, &documents)).await;
        assert_eq!(answer.status, axum::http::StatusCode::OK, "{answer:?}");
        let body: Value = answer.json();
        assert_eq!(
            body["accepted"].as_array().expect("accepted").len(),
            1,
            "{body}"
        );
        assert_eq!(body["refused"]["index"], 1);
        assert_eq!(body["refused"]["problem"]["code"], "budget_exceeded");
        let (_, spent) = budget_of(&h, &w1, &format!("/v1/missions/{MISSION}")).await;
        assert_eq!(spent["tokens"], 60, "the refused delta charged nothing");
        let events = h
            .get_json(&w1, "/v1/groups/g1/events?after=0&limit=1000")
            .await;
        assert_eq!(
            progress_reports(&events),
            1,
            "nothing after the refusal applied"
        );

        let again: Value = h.send(batch_request(&w1, &documents)).await.json();
        assert_eq!(again["accepted"][0], body["accepted"][0], "replayed");
        assert_eq!(again["refused"]["index"], 1);
        let events = h
            .get_json(&w1, "/v1/groups/g1/events?after=0&limit=1000")
            .await;
        assert_eq!(progress_reports(&events), 1);

        // A refusal before the transaction (here: a Command of another Agent in w1's batch)
        // stops the batch at its index too, the Commands before it applied.
        let first = quoting(
            &h,
            &w1,
            "work.progress",
            progress(WI, usage(1, 0.0)),
            &lease,
        )
        .await;
        let mut foreign = first.clone();
        foreign["commandId"] = json!("cmd-foreign");
        foreign["agentId"] = json!("w2");
        let before = h.fingerprint().await;
        let answer: Value = h.send(batch_request(&w1, &[first, foreign])).await.json();
        assert_eq!(
            answer["accepted"].as_array().map(Vec::len),
            Some(1),
            "{answer}"
        );
        assert_eq!(answer["refused"]["index"], 1);
        assert_eq!(answer["refused"]["problem"]["code"], "producer_mismatch");
        assert_ne!(before, h.fingerprint().await, "the first one was applied");

        refused(&h, batch_request(&w1, &[]), "bad_request").await;
        refused(
            &h,
            batch_request(&w1, &vec![documents[2].clone(); 257]),
            "bad_request",
        )
        .await;
        let operator = admin_request(
            Method::POST,
            "/v1/groups/g1/commands/batch",
            json!({"commands": []}),
        );
        refused(&h, operator, "forbidden").await;
    }
);

backends!(
    /// A WorkItem's view (every Command's answer) lists its newest 64 Event sequences and says
    /// whether there are older ones, so a long-lived WorkItem's Commands do not grow with its age.
    async fn a_work_items_view_lists_its_newest_history(kind: Kind) {
        // 300 Commands at one instant of the test clock: past the default Command rate.
        let h = harness_with(kind, |config| config.commands_per_minute = 0).await;
        let (coordinator, w1, _) = group(&h).await;
        mission_with(&h, &coordinator, MISSION, limit(100_000, 50.0), None).await;
        let lease = started(&h, &coordinator, &w1, MISSION, WI, limit(100_000, 10.0)).await;
        let before = h.get_json(&w1, &format!("/v1/workitems/{WI}")).await;
        assert_eq!(before["historyTruncated"], false);
        let last_before = before["history"]
            .as_array()
            .and_then(|h| h.last())
            .and_then(Value::as_u64)
            .expect("a started WorkItem has history");
        for _ in 0..3 {
            let mut documents = Vec::new();
            for _ in 0..100 {
                let payload = progress(WI, usage(1, 0.0));
                documents.push(quoting(&h, &w1, "work.progress", payload, &lease).await);
            }
            let answer: Value = h.send(batch_request(&w1, &documents)).await.json();
            assert!(answer["refused"].is_null(), "{answer}");
        }
        let view = h.get_json(&w1, &format!("/v1/workitems/{WI}")).await;
        let history = view["history"].as_array().expect("history");
        assert_eq!(history.len(), 64);
        assert_eq!(view["historyTruncated"], true);
        let newest: Vec<u64> = history.iter().filter_map(Value::as_u64).collect();
        assert!(newest.windows(2).all(|w| w[0] < w[1]), "oldest first");
        assert!(newest[0] > last_before, "the newest ones");
        let head = h
            .get_json(&w1, "/v1/groups/g1/events?after=0&limit=1")
            .await;
        assert!(head.is_object());
    }
);

backends!(
    /// A "not now" (here `stale_session`: the journal rebased onto an old session) leaves the
    /// Command pending instead of stopping the journal for good; rebased onto the current
    /// session, it goes through.
    async fn a_journal_keeps_commands_pending_on_a_transient_refusal(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, _) = group(&h).await;
        mission_with(&h, &coordinator, MISSION, limit(1000, 50.0), None).await;
        started(&h, &coordinator, &w1, MISSION, WI, limit(500, 10.0)).await;
        let lease = offline_lease(&h, &w1).await;
        let mut journal = Journal::open(&h.dir.path().join("journal.jsonl")).expect("open");
        let cut_off = now(&h);
        h.clock.advance(Duration::seconds(5));
        journal
            .buffer(
                &lease,
                cut_off,
                CommandType::WorkProgress,
                progress(WI, usage(3, 0.0)),
                budgets(3, 0.0),
                now(&h),
            )
            .expect("buffered");
        let old = rebase(&h, &w1).await;
        let (old_epoch, old_membership) = (old.session_epoch, old.membership_epoch);
        let (w1, client) = reconnect(&h, &w1).await;
        let stale = Rebase {
            key: &w1.key,
            session_epoch: old_epoch,
            membership_epoch: old_membership,
            issued_at: now(&h),
        };
        let outcome = journal.reconcile(&client, stale).await;
        assert!(
            matches!(outcome, Err(JournalError::Unreachable(_))),
            "{outcome:?}"
        );
        assert_eq!(journal.pending().count(), 1, "still pending");
        assert!(journal.stopped().is_none());
        let done = journal
            .reconcile(&client, rebase(&h, &w1).await)
            .await
            .expect("sent");
        assert_eq!(done.accepted.len(), 1);
    }
);
