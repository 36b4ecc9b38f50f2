//! Issue #40, "any member can flood the Group's log": a per-Agent Command rate (429
//! `rate_limited` with Retry-After, as logins have), a per-Group cap on open proposals (409
//! `quota_exceeded`), and no `work.propose` from a read-only auditor (`forbidden`). Each
//! refusal appends nothing.

use axum::http::StatusCode;
use serde_json::json;

use super::harness::{Agent, Harness, Kind, backends, harness_with, refused};
use super::work_setup::{budget, command_doc, command_request, contract};

/// `agent` proposes `proposal` in `mission-1`; the answer's status.
async fn propose(h: &Harness, agent: &Agent, proposal: &str) -> StatusCode {
    let payload =
        json!({"proposalId": proposal, "missionId": "mission-1", "contract": contract(&[])});
    let document = command_doc(h, agent, "g1", "work.propose", payload).await;
    h.send(command_request(agent, "g1", &document)).await.status
}

backends!(
    /// Issue #40: past its Command rate an Agent's Command is 429 `rate_limited` with
    /// Retry-After and nothing appended; the bucket refills with the (injected) clock.
    async fn commands_past_the_rate_are_refused(kind: Kind) {
        let h = harness_with(kind, |config| config.commands_per_minute = 3).await;
        h.ensure_work_item("g1", "mission-1", "work-1").await;
        let worker = h.agent("flooder", "g1", &["worker"]).await;
        for n in 0..3 {
            assert_eq!(
                propose(&h, &worker, &format!("p-{n}")).await,
                StatusCode::CREATED
            );
        }
        let payload =
            json!({"proposalId": "p-over", "missionId": "mission-1", "contract": contract(&[])});
        let document = command_doc(&h, &worker, "g1", "work.propose", payload).await;
        let answer = refused(
            &h,
            command_request(&worker, "g1", &document),
            "rate_limited",
        )
        .await;
        assert_eq!(answer.status, StatusCode::TOO_MANY_REQUESTS);
        assert!(answer.headers.contains_key("retry-after"), "{answer:?}");
        h.clock.advance(chrono::Duration::seconds(20));
        assert_eq!(propose(&h, &worker, "p-later").await, StatusCode::CREATED);
    }
);

backends!(
    /// Issue #40: a Group holds at most `max_open_proposals` open proposals; one more is 409
    /// `quota_exceeded` with nothing appended.
    async fn open_proposals_are_capped_per_group(kind: Kind) {
        let h = harness_with(kind, |config| config.max_open_proposals = 2).await;
        h.ensure_work_item("g1", "mission-1", "work-1").await;
        let worker = h.agent("proposer", "g1", &["worker"]).await;
        let reviewer = h.agent("other", "g1", &["reviewer"]).await;
        assert_eq!(propose(&h, &worker, "p-1").await, StatusCode::CREATED);
        assert_eq!(propose(&h, &reviewer, "p-2").await, StatusCode::CREATED);
        for agent in [&worker, &reviewer] {
            let payload =
                json!({"proposalId": "p-3", "missionId": "mission-1", "contract": contract(&[])});
            let document = command_doc(&h, agent, "g1", "work.propose", payload).await;
            refused(
                &h,
                command_request(agent, "g1", &document),
                "quota_exceeded",
            )
            .await;
        }
    }
);

backends!(
    /// Issue #40, T1/GAP-5: an auditor's role is read-only, so its `work.propose` is
    /// `forbidden` with nothing appended.
    async fn an_auditor_may_not_propose(kind: Kind) {
        let h = harness_with(kind, |_| {}).await;
        h.ensure_work_item("g1", "mission-1", "work-1").await;
        let auditor = h.agent("auditor", "g1", &["auditor"]).await;
        let payload =
            json!({"proposalId": "p-audit", "missionId": "mission-1", "contract": contract(&[])});
        let document = command_doc(&h, &auditor, "g1", "work.propose", payload).await;
        refused(&h, command_request(&auditor, "g1", &document), "forbidden").await;
    }
);

backends!(
    /// Issue #40 (review): only proposals of a Mission still `active` count against the cap,
    /// so a flood into one Mission cannot lock the Group out for good: once that Mission ends,
    /// its open proposals stop counting and a proposal elsewhere is accepted again.
    async fn a_missions_end_frees_its_proposals(kind: Kind) {
        let h = harness_with(kind, |config| config.max_open_proposals = 1).await;
        h.ensure_work_item("g1", "mission-1", "work-1").await;
        let coordinator = h.agent("c-flood", "g1", &["coordinator"]).await;
        let worker = h.agent("proposer", "g1", &["worker"]).await;
        let mission = json!({"missionId": "m-flood", "title": "t", "priorityClass": "normal",
                             "budget": budget()});
        let create = command_doc(&h, &coordinator, "g1", "mission.create", mission).await;
        let created = h.send(command_request(&coordinator, "g1", &create)).await;
        assert_eq!(created.status, StatusCode::CREATED, "{created:?}");
        let flood =
            json!({"proposalId": "p-flood", "missionId": "m-flood", "contract": contract(&[])});
        let document = command_doc(&h, &worker, "g1", "work.propose", flood).await;
        let answer = h.send(command_request(&worker, "g1", &document)).await;
        assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
        let blocked = command_doc(
            &h,
            &worker,
            "g1",
            "work.propose",
            json!({"proposalId": "p-2", "missionId": "mission-1", "contract": contract(&[])}),
        )
        .await;
        refused(
            &h,
            command_request(&worker, "g1", &blocked),
            "quota_exceeded",
        )
        .await;
        let cancel = command_doc(
            &h,
            &coordinator,
            "g1",
            "mission.cancel",
            json!({"missionId": "m-flood"}),
        )
        .await;
        let cancelled = h.send(command_request(&coordinator, "g1", &cancel)).await;
        assert_eq!(cancelled.status, StatusCode::CREATED, "{cancelled:?}");
        assert_eq!(
            propose(&h, &worker, "p-2").await,
            StatusCode::CREATED,
            "{kind:?}"
        );
    }
);

backends!(
    /// Issue #40 (review): one proposer holds at most `OPEN_PROPOSALS_PER_PROPOSER` (100) open
    /// proposals whatever the Group's cap, so one member cannot use up the Group's allowance;
    /// the 101st is `quota_exceeded` with nothing appended, and another member still proposes.
    async fn one_proposer_holds_at_most_a_hundred_open_proposals(kind: Kind) {
        let h = harness_with(kind, |config| config.max_open_proposals = 1000).await;
        h.ensure_work_item("g1", "mission-1", "work-1").await;
        let worker = h.agent("proposer", "g1", &["worker"]).await;
        let other = h.agent("other", "g1", &["reviewer"]).await;
        for n in 0..100 {
            let proposal = format!("p-{n}");
            assert_eq!(
                propose(&h, &worker, &proposal).await,
                StatusCode::CREATED,
                "{kind:?}"
            );
        }
        let payload =
            json!({"proposalId": "p-100", "missionId": "mission-1", "contract": contract(&[])});
        let document = command_doc(&h, &worker, "g1", "work.propose", payload).await;
        refused(
            &h,
            command_request(&worker, "g1", &document),
            "quota_exceeded",
        )
        .await;
        assert_eq!(propose(&h, &other, "p-other").await, StatusCode::CREATED);
    }
);
