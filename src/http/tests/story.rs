//! Issue #50, a WorkItem's story on one page: its offers, every lease with its holder and
//! epoch, which artifact was submitted and which was a draft, every Evidence record with the
//! superseded ones marked, and an Evidence page with its method, metrics and correction chain.
//! An auditor answers "who accepted this WorkItem, under which lease was its result produced,
//! and which Evidence was superseded" from the console.

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use serde_json::{Value, json};
use weft_api::Envelope;
use weft_api::evidence::EVIDENCE_TYPE;

use super::budget::{MISSION, limit, mission_with, started};
use super::harness::*;
use super::work::ok;
use super::work_setup::{command_doc, command_request, evidence_payload};

/// A console page as `agent`, signed in by its session cookie.
async fn page(h: &Harness, agent: &Agent, uri: &str) -> String {
    let request = Request::builder()
        .uri(uri)
        .header("cookie", format!("weft_session={}", agent.token))
        .body(Body::empty())
        .expect("request");
    let answer = h.send(request).await;
    assert_eq!(answer.status, StatusCode::OK, "{uri}: {answer:?}");
    String::from_utf8(answer.body.to_vec()).expect("html")
}

/// The part of `html` inside the element with id `id` up to `end`.
fn part<'a>(html: &'a str, id: &str, end: &str) -> &'a str {
    html.split(&format!(r#"id="{id}">"#))
        .nth(1)
        .and_then(|rest| rest.split(end).next())
        .unwrap_or_else(|| panic!("no #{id} in {html}"))
}

/// `payload` recorded by `agent` (bound to its lease when it owns the WorkItem): its id.
async fn recorded(h: &Harness, agent: &Agent, payload: &Value) -> String {
    let envelope = Envelope::sign(&agent.key, EVIDENCE_TYPE, payload.to_string().as_bytes());
    let envelope = h.bind_evidence(agent, &envelope).await;
    let answer = h
        .send(request(
            Method::POST,
            "/v1/evidence",
            Some(&agent.token),
            serde_json::to_vec(&envelope).expect("json"),
        ))
        .await;
    assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    answer.json()["evidenceId"]
        .as_str()
        .expect("an id")
        .to_owned()
}

backends!(
    async fn the_work_item_page_tells_the_whole_story(kind: Kind) {
        let h = harness(kind).await;
        let coordinator = h.agent("c1", "g1", &["coordinator"]).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let reviewer = h.agent("r1", "g1", &["reviewer"]).await;
        mission_with(&h, &coordinator, MISSION, limit(1_000_000, 100.0), None).await;
        let wi = "wi-story";
        let lease = started(&h, &coordinator, &worker, MISSION, wi, limit(1000, 1.0)).await;
        let draft = h.put_in(&worker, "g1", b"a first draft", &[], wi).await;
        let report = h.put_in(&worker, "g1", b"the report", &[], wi).await;
        let claim = recorded(
            &h,
            &worker,
            &evidence_payload(&worker, "g1", MISSION, wi, "automated_test", &[]),
        )
        .await;
        // A reviewer's pass, then its own correction of it.
        let mut review = evidence_payload(&reviewer, "g1", MISSION, wi, "reviewer_agent", &[]);
        let first_review = recorded(&h, &reviewer, &review).await;
        review["supersedes"] = json!(first_review);
        review["result"]["summary"] = json!("re-checked");
        let correction = recorded(&h, &reviewer, &review).await;
        let submit =
            json!({"workItemId": wi, "artifacts": [report.to_string()], "evidence": [claim]});
        let mut submit = command_doc(&h, &worker, "g1", "work.submit", submit).await;
        submit["leaseId"] = json!(lease);
        let submitted = h.send(command_request(&worker, "g1", &submit)).await;
        assert_eq!(submitted.status, StatusCode::CREATED, "{submitted:?}");
        ok(
            &h,
            &coordinator,
            "g1",
            "work.accept_result",
            json!({"workItemId": wi}),
        )
        .await;

        let html = page(&h, &coordinator, &format!("/ui/workitems/{wi}")).await;
        // Who accepted it: the story line names the coordinator.
        let history = part(&html, "history", "</ol>");
        assert!(
            history.contains("<code>work.result_accepted</code> by <strong>c1</strong>"),
            "{history}"
        );
        // Under which lease its result was produced, held by whom.
        let leases = part(&html, "leases", "</table>");
        assert!(
            leases.contains(&format!("<code>{lease}</code>")),
            "{leases}"
        );
        assert!(leases.contains("<td>w1</td>"), "{leases}");
        // Which artifact was submitted, which was a draft.
        let artifacts = part(&html, "artifacts", "</table>");
        for (artifact, role) in [(report, "submitted"), (draft, "draft")] {
            let row = artifacts
                .split("<tr>")
                .find(|row| row.contains(&artifact.to_string()))
                .unwrap_or_else(|| panic!("{artifact} in {artifacts}"));
            assert!(
                row.contains(&format!(r#"<td class="role">{role}</td>"#)),
                "{row}"
            );
        }
        // Who was offered it.
        let offers = part(&html, "offers", "</table>");
        assert!(offers.contains(r#"href="/ui/search?q=w1""#), "{offers}");
        // Which Evidence was superseded, and by which record.
        let evidence = part(&html, "evidence", "</table>");
        let superseded = evidence
            .split("<tr>")
            .find(|row| row.contains(&format!(r#"title="{first_review}""#)))
            .expect("the first review");
        assert!(
            superseded.contains(&format!(
                "superseded by <a href=\"/ui/evidence/{correction}\""
            )),
            "{superseded}"
        );

        // The Evidence page: method and version, metrics, and the chain both ways.
        let first = page(&h, &coordinator, &format!("/ui/evidence/{first_review}")).await;
        assert!(
            part(&first, "method", "</td>").contains("reviewer_agent"),
            "{first}"
        );
        assert!(first.contains(r#"id="metrics""#), "{first}");
        assert!(
            part(&first, "chain", "</ul>").contains(&format!("/ui/evidence/{correction}")),
            "{first}"
        );
        let newer = page(&h, &coordinator, &format!("/ui/evidence/{correction}")).await;
        let chain = part(&newer, "chain", "</ul>");
        assert!(chain.contains("Not superseded"), "{chain}");
        assert!(
            chain.contains(&format!("/ui/evidence/{first_review}")),
            "{chain}"
        );

        // Another Group's member finds no such record.
        let outsider = h.agent("o1", "g2", &["coordinator"]).await;
        let request = Request::builder()
            .uri(format!("/ui/evidence/{correction}"))
            .header("cookie", format!("weft_session={}", outsider.token))
            .body(Body::empty())
            .expect("request");
        assert_eq!(h.send(request).await.status, StatusCode::NOT_FOUND);
    }
);

backends!(
    /// A WorkItem whose early Events were compacted into the Group's archive still has its
    /// page: those lines say where the Events went; the online ones are told as before.
    async fn a_compacted_history_is_still_told(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, worker, _) = crate::http::tests::progress::setup(&h).await;
        crate::http::tests::progress::owned(
            &h,
            &coordinator,
            &worker,
            "wi-1",
            crate::http::tests::work_setup::contract(&[]),
        )
        .await;
        crate::http::tests::progress::start(&h, &worker, "wi-1").await;
        h.store
            .compaction()
            .compact(weft_storage::Retention::events(1))
            .await
            .expect("compaction");
        let html = page(&h, &coordinator, "/ui/workitems/wi-1").await;
        let history = part(&html, "history", "</ol>");
        assert!(history.contains("in the Group's archive"), "{history}");
        assert!(
            history.contains("<code>work.started</code> by <strong>w1</strong>"),
            "the newest Event is still online: {history}"
        );
    }
);
