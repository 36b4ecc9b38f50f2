//! The WorkItem conversation before acceptance over HTTP (CON-2, CON-3, CON-4): a candidate
//! of a live offer asks (`work.ask`), the Coordinator answers (`work.answer`), both in the
//! log and in the WorkItem's view; an unanswered question holds its asker's acceptance; a new
//! offer supersedes the old offer's questions.

use serde_json::{Value, json};

use super::harness::*;
use super::scope::scoped_agent;
use super::work::{group, offer, ok};
use super::work_setup::{command_doc, command_request, contract};

/// WorkItem `wi-q` of Mission m1, offered as `o1` to w1 and w2; answers the three agents.
async fn offered(h: &Harness) -> (Agent, Agent, Agent) {
    let (coordinator, w1, w2) = group(h).await;
    ok(
        h,
        &coordinator,
        "g1",
        "work.authorize",
        json!({"workItemId": "wi-q", "missionId": "m1", "contract": contract(&[])}),
    )
    .await;
    ok(
        h,
        &coordinator,
        "g1",
        "work.offer",
        offer("wi-q", "o1", &["w1", "w2"], h, 600),
    )
    .await;
    (coordinator, w1, w2)
}

fn ask(offer_id: &str, question_id: &str, text: &str) -> Value {
    json!({"workItemId": "wi-q", "offerId": offer_id, "questionId": question_id, "text": text})
}

fn answer(question_id: &str, text: &str) -> Value {
    json!({"workItemId": "wi-q", "questionId": question_id, "text": text})
}

/// Sends `kind` as `agent` and asserts it is refused `code` with nothing changed.
async fn refuse(h: &Harness, agent: &Agent, kind: &str, payload: Value, code: &str) -> Value {
    let document = command_doc(h, agent, "g1", kind, payload).await;
    refused(h, command_request(agent, "g1", &document), code)
        .await
        .json()
}

/// The question `question_id` as the WorkItem's view shows it to `reader`.
async fn question(h: &Harness, reader: &Agent, question_id: &str) -> Value {
    let view = h.get_json(reader, "/v1/workitems/wi-q").await;
    view["questions"]
        .as_array()
        .and_then(|questions| questions.iter().find(|q| q["questionId"] == question_id))
        .cloned()
        .unwrap_or_else(|| panic!("no question {question_id} in {view}"))
}

backends!(
    /// CON-2: a candidate of the live offer raises an ambiguity before acceptance and the
    /// Coordinator answers it: both are signed Commands whose Events (`work.question_asked`,
    /// `work.question_answered`) are in the Group's log; the WorkItem stays `offered`; the
    /// question and its answer are in `GET /v1/workitems/{id}` for the Coordinator and the
    /// candidates, and a member scoped to another Mission still sees no WorkItem.
    async fn con_2_a_candidate_asks_and_the_coordinator_answers_in_the_log(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, w2) = offered(&h).await;
        let asked = ok(
            &h,
            &w1,
            "g1",
            "work.ask",
            ask("o1", "q1", "Does ac-1 need the raw data or the summary?"),
        )
        .await;
        assert_eq!(asked["events"][0]["type"], "work.question_asked", "{asked}");
        assert_eq!(asked["state"]["state"], "offered");
        for reader in [&coordinator, &w1, &w2] {
            let shown = question(&h, reader, "q1").await;
            assert_eq!(shown["status"], "open", "{shown}");
            assert_eq!(shown["agentId"], "w1");
            assert_eq!(shown["offerId"], "o1");
            assert_eq!(shown["text"], "Does ac-1 need the raw data or the summary?");
        }
        let answered = ok(
            &h,
            &coordinator,
            "g1",
            "work.answer",
            json!({"workItemId": "wi-q", "questionId": "q1", "text": "The summary.",
                   "resolution": "clarified"}),
        )
        .await;
        assert_eq!(answered["events"][0]["type"], "work.question_answered");
        assert_eq!(answered["state"]["state"], "offered");
        let shown = question(&h, &w1, "q1").await;
        assert_eq!(shown["status"], "answered", "{shown}");
        assert_eq!(shown["answer"]["text"], "The summary.");
        assert_eq!(shown["answer"]["resolution"], "clarified");
        assert_eq!(shown["answer"]["answeredBy"], "c1");
        let asked_events = h.events_of(&coordinator, "work.question_asked").await;
        assert_eq!(asked_events.len(), 1);
        assert_eq!(asked_events[0]["payload"]["detail"]["questionId"], "q1");
        let answered_events = h.events_of(&w1, "work.question_answered").await;
        assert_eq!(answered_events.len(), 1);
        assert_eq!(
            answered_events[0]["payload"]["detail"]["text"],
            "The summary."
        );
        // Answered: the candidate accepts.
        let accepted = ok(
            &h,
            &w1,
            "g1",
            "work.accept_offer",
            json!({"workItemId": "wi-q", "offerId": "o1"}),
        )
        .await;
        assert_eq!(accepted["state"]["state"], "queued");
        // CTX-5 as before: a member scoped to another Mission sees no WorkItem, so no question.
        let outsider = scoped_agent(&h, "w9", &["worker"], &["m2"]).await;
        let hidden = h
            .call(
                axum::http::Method::GET,
                "/v1/workitems/wi-q",
                Some(&outsider.token),
                axum::body::Body::empty(),
            )
            .await;
        assert_eq!(hidden.code(), "unknown_work_item", "{hidden:?}");
    }
);

backends!(
    /// CON-2's roles and bounds: only a named candidate of the live offer asks (`forbidden`
    /// for a worker it does not name and for the Coordinator), only the Coordinator answers,
    /// texts are 1..=2048 bytes, a question id is asked once and answered once, an unknown
    /// question is `not_found`, and a candidate has at most 4 unanswered questions on a
    /// WorkItem; each refusal changes nothing.
    async fn con_2_only_a_candidate_asks_only_the_coordinator_answers_within_bounds(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, _) = offered(&h).await;
        let w3 = h.agent("w3", "g1", &["worker"]).await;
        refuse(&h, &w3, "work.ask", ask("o1", "q0", "why?"), "forbidden").await;
        refuse(
            &h,
            &coordinator,
            "work.ask",
            ask("o1", "q0", "why?"),
            "forbidden",
        )
        .await;
        refuse(&h, &w1, "work.ask", ask("o9", "q0", "why?"), "not_found").await;
        refuse(
            &h,
            &w1,
            "work.ask",
            ask("o1", "q0", "  "),
            "invalid_command",
        )
        .await;
        let long = "x".repeat(2049);
        refuse(
            &h,
            &w1,
            "work.ask",
            ask("o1", "q0", &long),
            "invalid_command",
        )
        .await;
        ok(
            &h,
            &w1,
            "g1",
            "work.ask",
            ask("o1", "q1", &"x".repeat(2048)),
        )
        .await;
        refuse(&h, &w1, "work.ask", ask("o1", "q1", "again"), "conflict").await;
        refuse(
            &h,
            &w1,
            "work.answer",
            answer("q1", "self-served"),
            "forbidden",
        )
        .await;
        refuse(
            &h,
            &coordinator,
            "work.answer",
            answer("q9", "what?"),
            "not_found",
        )
        .await;
        ok(&h, &coordinator, "g1", "work.answer", answer("q1", "yes")).await;
        refuse(
            &h,
            &coordinator,
            "work.answer",
            answer("q1", "twice"),
            "conflict",
        )
        .await;
        for n in 2..=5 {
            ok(
                &h,
                &w1,
                "g1",
                "work.ask",
                ask("o1", &format!("q{n}"), "and?"),
            )
            .await;
        }
        let flooded = refuse(&h, &w1, "work.ask", ask("o1", "q6", "and?"), "conflict").await;
        assert!(
            flooded["detail"]
                .as_str()
                .is_some_and(|d| d.contains("CON-2")),
            "{flooded}"
        );
    }
);

backends!(
    /// CON-3: while a candidate's question on an offer is unanswered, that candidate's
    /// `work.accept_offer` of it is refused `illegal_transition` (naming CON-3) and changes
    /// nothing; another candidate is not held; once answered, the asker accepts.
    async fn con_3_an_unanswered_question_holds_its_askers_acceptance(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, _) = offered(&h).await;
        ok(&h, &w1, "g1", "work.ask", ask("o1", "q1", "Which format?")).await;
        let accept = json!({"workItemId": "wi-q", "offerId": "o1"});
        let held = refuse(
            &h,
            &w1,
            "work.accept_offer",
            accept.clone(),
            "illegal_transition",
        )
        .await;
        assert!(
            held["detail"].as_str().is_some_and(|d| d.contains("CON-3")),
            "{held}"
        );
        ok(&h, &coordinator, "g1", "work.answer", answer("q1", "JSON.")).await;
        let accepted = ok(&h, &w1, "g1", "work.accept_offer", accept).await;
        assert_eq!(accepted["state"]["owner"]["agentId"], "w1", "{accepted}");
    }
);

backends!(
    /// CON-3 holds only the asker: another candidate of the same offer accepts while w1's
    /// question is open, and w1's question is then `superseded` (its offer was accepted).
    async fn con_3_another_candidate_is_not_held(kind: Kind) {
        let h = harness(kind).await;
        let (_, w1, w2) = offered(&h).await;
        ok(&h, &w1, "g1", "work.ask", ask("o1", "q1", "Which format?")).await;
        ok(
            &h,
            &w2,
            "g1",
            "work.accept_offer",
            json!({"workItemId": "wi-q", "offerId": "o1"}),
        )
        .await;
        assert_eq!(question(&h, &w1, "q1").await["status"], "superseded");
    }
);

backends!(
    /// CON-4: the Coordinator resolves an ambiguity with a new `work.offer` (after
    /// `work.revise_contract` with the corrected contract, or a replacement WorkItem): the old
    /// offer's unanswered questions are `superseded`, no longer answerable
    /// (`offer_withdrawn`, nothing changed) and no longer holding their asker, who accepts the
    /// new offer.
    async fn con_4_a_new_offer_supersedes_the_old_offers_questions(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, w1, _) = offered(&h).await;
        ok(
            &h,
            &w1,
            "g1",
            "work.ask",
            ask("o1", "q1", "ac-1 contradicts the notes"),
        )
        .await;
        ok(
            &h,
            &coordinator,
            "g1",
            "work.offer",
            offer("wi-q", "o2", &["w1"], &h, 600),
        )
        .await;
        assert_eq!(question(&h, &w1, "q1").await["status"], "superseded");
        refuse(
            &h,
            &coordinator,
            "work.answer",
            answer("q1", "late"),
            "offer_withdrawn",
        )
        .await;
        let accepted = ok(
            &h,
            &w1,
            "g1",
            "work.accept_offer",
            json!({"workItemId": "wi-q", "offerId": "o2"}),
        )
        .await;
        assert_eq!(accepted["state"]["state"], "queued", "{accepted}");
    }
);
