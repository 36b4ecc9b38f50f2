//! CTX-5, Mission isolation: a Membership scoped to some Missions of its Group reads and writes
//! only those Missions. Another Mission's Artifact, Evidence, WorkItem, Mission and lineage
//! answer exactly as if they did not exist (same status, same body but for the id asked
//! about); its Events reach the member as `withheld` placeholders whose links still chain.
//! Coordinators and auditors see the whole Group, and a scope for them is refused.
//! The shared world (two Missions, a scoped member) is built by [`world`], which `reuse.rs`
//! uses too.

use axum::body::Body;
use axum::http::{Method, StatusCode};
use serde_json::{Value, json};
use weft_api::ArtifactId;

use super::delivery::{open_stream, read_events};
use super::harness::{
    Agent, Answer, Harness, Kind, admin_request, backends, digest_of, harness, manifest,
    publish_request, refused, request, sign,
};
use super::work_setup::{
    command_doc, command_request, contract, evidence_payload, signed_evidence,
};

/// Two Missions of Group g1, each with an Artifact by an unscoped worker, a member scoped to
/// `mission-1` and an auditor.
pub(super) struct World {
    pub(super) h: Harness,
    pub(super) producer: Agent,
    pub(super) scoped: Agent,
    pub(super) auditor: Agent,
    /// Published in `mission-1` / `work-1`.
    pub(super) a1: ArtifactId,
    /// Published in `mission-2` / `work-2`.
    pub(super) a2: ArtifactId,
}

pub(super) async fn world(kind: Kind) -> World {
    let h = harness(kind).await;
    let producer = h.agent("producer", "g1", &["worker"]).await;
    let a1 = h.put(&producer, "g1", b"mission one's notes", &[]).await;
    let answer = publish_in(
        &h,
        &producer,
        "mission-2",
        "work-2",
        b"mission two's secret",
        &[],
    )
    .await;
    assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    let a2 = digest_of(b"mission two's secret").blake3;
    let scoped = scoped_agent(&h, "scoped", &["worker"], &["mission-1"]).await;
    let auditor = h.agent("auditor", "g1", &["auditor"]).await;
    World {
        h,
        producer,
        scoped,
        auditor,
        a1,
        a2,
    }
}

/// Uploads `bytes` and publishes them as `agent` in `mission` / `work_item` of g1 (the
/// harness gives `agent` the WorkItem's lease first, when it can).
pub(super) async fn publish_in(
    h: &Harness,
    agent: &Agent,
    mission: &str,
    work_item: &str,
    bytes: &[u8],
    sources: &[ArtifactId],
) -> Answer {
    let digests = h.upload(agent, bytes).await;
    let mut manifest = manifest(agent, "g1", digests, sources);
    manifest.mission_id = weft_api::Id::parse("m", mission).expect("id");
    manifest.work_item_id = weft_api::Id::parse("w", work_item).expect("id");
    h.publish(agent, &sign(&agent.key, &manifest)).await
}

/// Registers `agent_id` in g1 with `roles`, scopes its Membership to `missions`, and opens a
/// session under the scoped Membership.
pub(super) async fn scoped_agent(
    h: &Harness,
    agent_id: &str,
    roles: &[&str],
    missions: &[&str],
) -> Agent {
    let agent = h.agent(agent_id, "g1", roles).await;
    let answer = h
        .admin_json(
            Method::PUT,
            &format!("/v1/admin/groups/g1/members/{agent_id}"),
            json!({"roles": roles, "missions": missions}),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(answer.json()["missions"], json!(missions));
    let token = h.session(&agent.key, agent_id, "g1").await;
    Agent { token, ..agent }
}

/// `GET uri` as `agent`.
pub(super) async fn get(h: &Harness, agent: &Agent, uri: &str) -> Answer {
    h.call(Method::GET, uri, Some(&agent.token), Body::empty())
        .await
}

/// Asserts that asking for `hidden` answers exactly as asking for `absent` (which does not
/// exist): same status, and the same body once each names its own id (no existence oracle).
pub(super) async fn same_as_absent(
    h: &Harness,
    agent: &Agent,
    route: &str,
    hidden: &str,
    absent: &str,
) {
    let hidden_answer = get(h, agent, &route.replace("{}", hidden)).await;
    let absent_answer = get(h, agent, &route.replace("{}", absent)).await;
    assert!(
        hidden_answer.status.is_client_error(),
        "{route}: {hidden_answer:?}"
    );
    assert_eq!(hidden_answer.status, absent_answer.status, "{route}");
    let text =
        |answer: &Answer, id: &str| String::from_utf8_lossy(&answer.body).replace(id, "<id>");
    assert_eq!(
        text(&hidden_answer, hidden),
        text(&absent_answer, absent),
        "{route}"
    );
}

/// The `artifact` of each item of a listing.
fn listed(answer: &Answer) -> Vec<String> {
    answer.json()["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|item| item["artifact"].as_str().expect("artifact").to_owned())
        .collect()
}

backends!(
    /// CTX-5: a scoped member reads its Missions' Artifacts (view, content, listing, blob) and
    /// nothing of another Mission's, which answers as a nonexistent Artifact does; an auditor
    /// reads both.
    async fn scoped_members_read_only_their_missions_artifacts(kind: Kind) {
        let World {
            h,
            scoped,
            auditor,
            a1,
            a2,
            ..
        } = world(kind).await;
        let absent = digest_of(b"never published").blake3.to_string();
        let hidden = a2.to_string();
        assert_eq!(
            get(&h, &scoped, &format!("/v1/artifacts/{a1}"))
                .await
                .status,
            StatusCode::OK
        );
        for route in [
            "/v1/artifacts/{}",
            "/v1/artifacts/{}/content",
            "/v1/artifacts/{}/provenance",
            "/v1/artifacts/{}/evidence",
        ] {
            same_as_absent(&h, &scoped, route, &hidden, &absent).await;
        }
        let sha256 = digest_of(b"mission two's secret").sha256.to_string();
        let absent_sha256 = digest_of(b"never published").sha256.to_string();
        same_as_absent(&h, &scoped, "/v1/artifacts/{}", &sha256, &absent_sha256).await;
        let head = |digest: String| {
            let token = scoped.token.clone();
            let h = &h;
            async move {
                h.call(
                    Method::HEAD,
                    &format!("/v1/blobs/{digest}"),
                    Some(&token),
                    Body::empty(),
                )
                .await
                .status
            }
        };
        assert_eq!(head(hidden.clone()).await, head(absent.clone()).await);
        assert_eq!(
            listed(&get(&h, &scoped, "/v1/artifacts").await),
            [a1.to_string()]
        );
        assert!(listed(&get(&h, &scoped, "/v1/artifacts?missionId=mission-2").await).is_empty());
        // A snapshot's state document covers every Mission: not for a scoped member.
        let snapshots = get(&h, &scoped, "/v1/groups/g1/snapshots").await;
        assert_eq!(snapshots.code(), "not_found");
        // Auditors (and coordinators) see the whole Group.
        assert_eq!(
            get(&h, &auditor, &format!("/v1/artifacts/{a2}"))
                .await
                .status,
            StatusCode::OK
        );
        assert_eq!(
            listed(&get(&h, &auditor, "/v1/artifacts").await),
            [a1.to_string(), a2.to_string()]
        );
    }
);

backends!(
    /// CTX-5: another Mission's Evidence, WorkItems, Missions and lineage answer a scoped
    /// member as if they did not exist; its own Mission's are there.
    async fn scoped_members_get_no_evidence_work_or_lineage_of_other_missions(kind: Kind) {
        let World {
            h,
            producer,
            scoped,
            auditor,
            a2,
            ..
        } = world(kind).await;
        let payload = evidence_payload(
            &producer,
            "g1",
            "mission-2",
            "work-2",
            "automated_test",
            &[&a2.to_string()],
        );
        let envelope: weft_api::Envelope =
            serde_json::from_slice(&signed_evidence(&producer, &payload)).expect("envelope");
        let envelope = h.bind_evidence(&producer, &envelope).await;
        let recorded = h
            .send(request(
                Method::POST,
                "/v1/evidence",
                Some(&producer.token),
                serde_json::to_vec(&envelope).expect("json"),
            ))
            .await;
        assert_eq!(recorded.status, StatusCode::CREATED, "{recorded:?}");
        let evidence_id = recorded.json()["evidenceId"]
            .as_str()
            .expect("id")
            .to_owned();
        let items = |answer: Answer| answer.json()["items"].as_array().expect("items").len();
        assert_eq!(
            items(get(&h, &scoped, "/v1/evidence?workItemId=work-2").await),
            0
        );
        assert_eq!(
            items(get(&h, &scoped, "/v1/evidence?missionId=mission-2").await),
            0
        );
        assert_eq!(
            items(get(&h, &auditor, "/v1/evidence?workItemId=work-2").await),
            1
        );
        let absent_evidence = digest_of(b"no such evidence").blake3.to_string();
        same_as_absent(
            &h,
            &scoped,
            "/v1/evidence/{}",
            &evidence_id,
            &absent_evidence,
        )
        .await;
        same_as_absent(&h, &scoped, "/v1/workitems/{}", "work-2", "no-such-item").await;
        same_as_absent(
            &h,
            &scoped,
            "/v1/missions/{}",
            "mission-2",
            "no-such-mission",
        )
        .await;
        same_as_absent(
            &h,
            &scoped,
            "/v1/missions/{}/workitems",
            "mission-2",
            "no-such-mission",
        )
        .await;
        same_as_absent(
            &h,
            &scoped,
            "/v1/workitems/{}/provenance",
            "work-2",
            "no-such-item",
        )
        .await;
        same_as_absent(
            &h,
            &scoped,
            "/v1/missions/{}/provenance",
            "mission-2",
            "no-such-mission",
        )
        .await;
        assert_eq!(
            get(&h, &scoped, "/v1/workitems/work-1").await.status,
            StatusCode::OK
        );
        assert_eq!(
            get(&h, &scoped, "/v1/missions/mission-1").await.status,
            StatusCode::OK
        );
        assert_eq!(
            get(&h, &auditor, "/v1/workitems/work-2").await.status,
            StatusCode::OK
        );
    }
);

backends!(
    /// CTX-5, DESIGN §11: a scoped member's replay shows another Mission's Events as
    /// `{sequence, type: "withheld", prevHash, hash}` and nothing else; the chain and its
    /// sequence still verify client-side; Group-level Events and its own Mission's are whole.
    async fn scoped_replays_withhold_other_missions_events_and_still_chain(kind: Kind) {
        let World {
            h,
            scoped,
            auditor,
            a2,
            ..
        } = world(kind).await;
        let answer = get(&h, &scoped, "/v1/groups/g1/events?limit=1000").await;
        assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
        let raw = answer.json();
        let page: weft_api::views::EventPage = serde_json::from_slice(&answer.body).expect("page");
        let (head, _) =
            weft_api::event::verify_chain(0, weft_api::EventHash::GENESIS, &page.events)
                .expect("the chain verifies around placeholders");
        let whole = get(&h, &auditor, "/v1/groups/g1/events?limit=1000").await;
        let whole: weft_api::views::EventPage = serde_json::from_slice(&whole.body).expect("page");
        assert!(
            whole.events.iter().all(|e| e.event().is_some()),
            "an auditor sees every Event"
        );
        assert_eq!(
            whole.events.len() as u64,
            head,
            "the same sequences, none skipped"
        );
        let mut n_withheld = 0;
        for (entry, delivered) in raw["events"]
            .as_array()
            .expect("events")
            .iter()
            .zip(&page.events)
        {
            match delivered.event() {
                None => {
                    n_withheld += 1;
                    let keys: Vec<&String> = entry.as_object().expect("object").keys().collect();
                    assert_eq!(keys, ["hash", "prevHash", "sequence", "type"], "{entry}");
                    assert_eq!(entry["type"], "withheld");
                }
                Some(event) => {
                    let payload: Value =
                        serde_json::from_str(event.payload.get()).expect("payload");
                    if let Some(mission) = payload["missionId"].as_str() {
                        assert_eq!(mission, "mission-1", "{} leaked", event.kind);
                    }
                }
            }
        }
        // mission-2's creation, its WorkItem's authorization, offer, acceptance and start,
        // and a2's publication.
        assert!(n_withheld >= 6, "{n_withheld} withheld");
        assert!(!String::from_utf8_lossy(&answer.body).contains(&a2.to_string()));
        // The placeholders ride the stream the same way (same `deliver`); the Sequencer a
        // Worker's subscription uses takes them in order (api/src/delivery.rs tests).
    }
);

backends!(
    /// CTX-5: a scoped member publishes, records Evidence and sends Commands in its Missions
    /// only; for another Mission it is refused as another Group's member would be (whether or
    /// not the Mission exists), with nothing changed; SM-T1: its `work.propose` in its own
    /// Mission is accepted.
    async fn scoped_members_write_only_in_their_missions(kind: Kind) {
        let World { h, scoped, .. } = world(kind).await;
        let digests = h.upload(&scoped, b"a scoped member's draft").await;
        let mut elsewhere = manifest(&scoped, "g1", digests, &[]);
        elsewhere.mission_id = weft_api::Id::parse("m", "mission-2").expect("id");
        elsewhere.work_item_id = weft_api::Id::parse("w", "work-2").expect("id");
        refused(
            &h,
            publish_request(&scoped, &sign(&scoped.key, &elsewhere)),
            "not_a_member",
        )
        .await;
        let evidence =
            evidence_payload(&scoped, "g1", "mission-2", "work-2", "automated_test", &[]);
        refused(
            &h,
            request(
                Method::POST,
                "/v1/evidence",
                Some(&scoped.token),
                signed_evidence(&scoped, &evidence),
            ),
            "not_a_member",
        )
        .await;
        // Its own Mission with another Mission's WorkItem: answered as an unknown WorkItem,
        // exactly as one that does not exist (never `mission_mismatch` naming mission-2).
        let mut answers = Vec::new();
        for work_item in ["work-2", "no-such-work"] {
            let evidence =
                evidence_payload(&scoped, "g1", "mission-1", work_item, "automated_test", &[]);
            let answer = refused(
                &h,
                request(
                    Method::POST,
                    "/v1/evidence",
                    Some(&scoped.token),
                    signed_evidence(&scoped, &evidence),
                ),
                "unknown_work_item",
            )
            .await;
            let detail = answer.json()["detail"]
                .as_str()
                .unwrap_or_default()
                .replace(work_item, "W");
            answers.push(detail);
        }
        assert_eq!(answers[0], answers[1]);
        let propose = |mission: &str, proposal: &str| json!({"proposalId": proposal, "missionId": mission, "contract": contract(&[])});
        for (mission, proposal) in [
            ("mission-2", "p-elsewhere"),
            ("no-such-mission", "p-nowhere"),
        ] {
            let document = command_doc(
                &h,
                &scoped,
                "g1",
                "work.propose",
                propose(mission, proposal),
            )
            .await;
            refused(&h, command_request(&scoped, "g1", &document), "not_found").await;
        }
        for work_item in ["work-2", "no-such-item"] {
            let document = command_doc(
                &h,
                &scoped,
                "g1",
                "work.start",
                json!({"workItemId": work_item}),
            )
            .await;
            refused(
                &h,
                command_request(&scoped, "g1", &document),
                "unknown_work_item",
            )
            .await;
        }
        let document = command_doc(
            &h,
            &scoped,
            "g1",
            "work.propose",
            propose("mission-1", "p-here"),
        )
        .await;
        let answer = h.send(command_request(&scoped, "g1", &document)).await;
        assert_eq!(
            answer.status,
            StatusCode::CREATED,
            "its own Mission: {answer:?}"
        );
    }
);

backends!(
    /// CTX-5: coordinators and auditors see the whole Group, so a scope for them is refused, as
    /// is an empty one; a change of scope moves the Membership's epoch (the old session is
    /// `stale_membership`) and is carried in `membership.set`.
    async fn mission_scopes_are_checked_and_move_the_epoch(kind: Kind) {
        let World { h, scoped, .. } = world(kind).await;
        h.agent("someone", "g1", &["worker"]).await;
        for body in [
            json!({"roles": ["coordinator"], "missions": ["mission-1"]}),
            json!({"roles": ["worker", "auditor"], "missions": ["mission-1"]}),
            json!({"roles": ["worker"], "missions": []}),
        ] {
            refused(
                &h,
                admin_request(Method::PUT, "/v1/admin/groups/g1/members/someone", body),
                "bad_request",
            )
            .await;
        }
        let before = get(&h, &scoped, "/v1/artifacts").await;
        assert_eq!(before.status, StatusCode::OK);
        let answer = h
            .admin_json(
                Method::PUT,
                "/v1/admin/groups/g1/members/scoped",
                json!({"roles": ["worker"], "missions": ["mission-2", "mission-2"]}),
            )
            .await;
        assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
        assert_eq!(answer.json()["missions"], json!(["mission-2"]));
        let stale = get(&h, &scoped, "/v1/artifacts").await;
        assert_eq!(stale.code(), "stale_membership");
        let events = get(
            &h,
            &h.agent("reader", "g1", &["auditor"]).await,
            "/v1/groups/g1/events?limit=1000",
        )
        .await;
        let last_set = events.json()["events"]
            .as_array()
            .expect("events")
            .iter()
            .rev()
            .find(|e| e["type"] == "membership.set" && e["payload"]["agentId"] == "scoped")
            .cloned()
            .expect("membership.set");
        assert_eq!(last_set["payload"]["missions"], json!(["mission-2"]));
    }
);

backends!(
    /// CTX-5, DESIGN §11: the SSE stream withholds exactly what the replay does, and an Event
    /// of another Mission appended while the stream is open arrives as a placeholder too.
    async fn scoped_streams_withhold_other_missions_events_live_too(kind: Kind) {
        let World {
            h,
            producer,
            scoped,
            ..
        } = world(kind).await;
        let replay = get(&h, &scoped, "/v1/groups/g1/events?limit=1000")
            .await
            .json();
        let replayed = replay["events"].as_array().expect("events").clone();
        let response = open_stream(&h, &scoped.token, "?after=0", None).await;
        assert_eq!(response.status(), StatusCode::OK);
        let reader = tokio::spawn(read_events(response.into_body(), replayed.len() + 1));
        // The producer still holds work-2's lease: one Event, artifact.published in mission-2.
        let answer = publish_in(&h, &producer, "mission-2", "work-2", b"a live secret", &[]).await;
        assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
        let streamed = reader.await.expect("reader");
        assert_eq!(streamed.len(), replayed.len() + 1, "{streamed:?}");
        assert_eq!(streamed[..replayed.len()], replayed[..]);
        let live = streamed.last().expect("live");
        let keys: Vec<&String> = live.as_object().expect("object").keys().collect();
        assert_eq!(keys, ["hash", "prevHash", "sequence", "type"], "{live}");
        assert_eq!(live["type"], "withheld");
        assert_eq!(live["prevHash"], replayed.last().expect("last")["hash"]);
    }
);
