//! Issue #50, who did what: every Event a Command causes names its signer (`actor`: Agent
//! and key id) beside `causationCommandId`, and `GET /v1/groups/{g}/commands/{commandId}`
//! gives the signed envelope back to the operator and the Group's Group-wide members, so an
//! auditor checks who offered, accepted or failed with the Agent's registered key.

use axum::body::Body;
use axum::http::{Method, StatusCode};
use serde_json::Value;

use super::harness::*;
use super::progress::{MISSION, owned, setup, start};
use super::scope::scoped_agent;
use super::work_setup::contract;

fn key_id(agent: &Agent) -> String {
    weft_api::KeyId::of(&agent.key.verifying_key()).to_string()
}

/// A console page as `agent` (signed in by its session cookie): its HTML, once it is a `200`.
async fn console_page(h: &Harness, agent: &Agent, uri: &str) -> String {
    let request = axum::http::Request::builder()
        .uri(uri)
        .header("cookie", format!("weft_session={}", agent.token))
        .body(Body::empty())
        .expect("request");
    let answer = h.send(request).await;
    assert_eq!(answer.status, StatusCode::OK, "{uri}: {answer:?}");
    String::from_utf8(answer.body.to_vec()).expect("html")
}

backends!(
    async fn events_name_who_signed_their_command(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, worker, _) = setup(&h).await;
        owned(&h, &coordinator, &worker, "wi-1", contract(&[])).await;
        start(&h, &worker, "wi-1").await;

        let offered = h.events_of(&coordinator, "work.offered").await;
        let offered = offered.last().expect("an offer");
        assert_eq!(offered["payload"]["actor"]["agentId"], "c1", "{offered}");
        assert_eq!(
            offered["payload"]["actor"]["keyId"],
            key_id(&coordinator).as_str()
        );
        let started = h.events_of(&coordinator, "work.started").await;
        let started = started.last().expect("a start");
        assert_eq!(started["payload"]["actor"]["agentId"], "w1", "{started}");
        let command_id = started["causationCommandId"]
            .as_str()
            .expect("the Command that caused it");

        // The Command back, as the worker signed it: its signature checks with w1's key.
        let uri = format!("/v1/groups/g1/commands/{command_id}");
        for reader in [&coordinator, &worker] {
            let signed = h.get_json(reader, &uri).await;
            assert_eq!(signed["agentId"], "w1");
            let envelope: weft_api::Envelope =
                serde_json::from_value(signed["envelope"].clone()).expect("an envelope");
            let payload = envelope
                .verify(weft_api::work::COMMAND_TYPE, &worker.key.verifying_key())
                .expect("signed by w1's registered key")
                .into_inner();
            let command: Value = serde_json::from_slice(&payload).expect("a Command");
            assert_eq!(command["commandId"], command_id);
            assert_eq!(command["type"], "work.start");
        }
        let anonymous = h.call(Method::GET, &uri, None, Body::empty()).await;
        assert_eq!(
            anonymous.status,
            StatusCode::UNAUTHORIZED,
            "no token, no answer"
        );

        // Another Group, a Mission-scoped member and an unknown id answer alike.
        let outsider = h.agent("o1", "g2", &["coordinator"]).await;
        let scoped = scoped_agent(&h, "s1", &["worker"], &[MISSION]).await;
        for (reader, uri) in [
            (&outsider, uri.clone()),
            (&outsider, format!("/v1/groups/g2/commands/{command_id}")),
            (&scoped, uri.clone()),
            (
                &coordinator,
                "/v1/groups/g1/commands/no-such-command".to_owned(),
            ),
        ] {
            let answer = h
                .call(Method::GET, &uri, Some(&reader.token), Body::empty())
                .await;
            assert_eq!(answer.status, StatusCode::NOT_FOUND, "{uri}: {answer:?}");
        }
    }
);

backends!(
    /// Issue #50: the registered key behind a key id, for an auditor holding a signature to
    /// check it (`weft show`): any caller, a key id at a time (it lists nothing); an unknown
    /// key id is `not_found`, a malformed one `bad_request`, no token `unauthorized`.
    async fn a_registered_key_is_found_by_its_id(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, worker, _) = setup(&h).await;
        let outsider = h.agent("o1", "g2", &["worker"]).await;
        let uri = format!("/v1/keys/{}", key_id(&worker));
        for reader in [&coordinator, &outsider] {
            let found = h.get_json(reader, &uri).await;
            assert_eq!(found["agentId"], "w1");
            assert_eq!(found["keyid"], key_id(&worker).as_str());
            let key = weft_api::dsse::parse_public_key(found["publicKey"].as_str().expect("key"))
                .expect("a public key");
            assert_eq!(key, worker.key.verifying_key());
        }
        let unknown = format!("/v1/keys/ed25519:{}", "0".repeat(64));
        for (uri, token, status) in [
            (
                unknown.as_str(),
                Some(&coordinator.token),
                StatusCode::NOT_FOUND,
            ),
            (
                "/v1/keys/rsa:1",
                Some(&coordinator.token),
                StatusCode::BAD_REQUEST,
            ),
            (uri.as_str(), None, StatusCode::UNAUTHORIZED),
        ] {
            let answer = h
                .call(Method::GET, uri, token.map(String::as_str), Body::empty())
                .await;
            assert_eq!(answer.status, status, "{uri}: {answer:?}");
        }
    }
);

backends!(
    /// Issue #50: the console's event log names who acted on each line (the Command's signer,
    /// linked to a search for that Agent) and pretty-prints the payload.
    async fn the_event_log_page_names_the_actor(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, worker, _) = setup(&h).await;
        owned(&h, &coordinator, &worker, "wi-1", contract(&[])).await;
        start(&h, &worker, "wi-1").await;
        let page = console_page(&h, &coordinator, "/ui/groups/g1/events?type=work.").await;
        let line = |kind: &str| {
            page.split("<li ")
                .find(|line| line.contains(&format!("data-type=\"{kind}\"")))
                .unwrap_or_else(|| panic!("no {kind} line in {page}"))
                .to_owned()
        };
        assert!(
            line("work.offered").contains(r#"by <a class="actor" href="/ui/search?q=c1">c1</a>"#)
        );
        assert!(line("work.started").contains(">w1</a>"));
        assert!(
            line("work.started").contains("<pre class=\"payload\">{\n"),
            "pretty-printed"
        );

        // Newest first on request, in pages that go back.
        let newest = console_page(
            &h,
            &coordinator,
            "/ui/groups/g1/events?order=newest&limit=2",
        )
        .await;
        let sequences: Vec<u64> = newest
            .split("<li id=\"e")
            .skip(1)
            .filter_map(|rest| rest.split('"').next()?.parse().ok())
            .collect();
        assert_eq!(sequences.len(), 2, "{newest}");
        assert!(sequences[0] > sequences[1], "newest first: {sequences:?}");
        assert!(
            newest.contains(&format!("order=newest&amp;before={}", sequences[1])),
            "a link to the page before: {newest}"
        );
    }
);

backends!(
    /// Issue #50: a WorkItem's page tells its story, one line per Event: when, what, who
    /// acted, and the state and owner it left.
    async fn the_work_item_page_tells_who_did_what(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, worker, _) = setup(&h).await;
        owned(&h, &coordinator, &worker, "wi-1", contract(&[])).await;
        start(&h, &worker, "wi-1").await;
        let page = console_page(&h, &coordinator, "/ui/workitems/wi-1").await;
        let history = page
            .split(r#"id="history">"#)
            .nth(1)
            .and_then(|rest| rest.split("</ol>").next())
            .expect("a history");
        for (event, actor) in [
            ("work.authorized", "c1"),
            ("work.offered", "c1"),
            ("work.offer_accepted", "w1"),
            ("work.started", "w1"),
        ] {
            assert!(
                history.contains(&format!("<code>{event}</code> by <strong>{actor}</strong>")),
                "{event} by {actor}: {history}"
            );
        }
        assert!(history.contains("owner w1 (epoch 1)"), "{history}");
    }
);

backends!(
    /// Issue #50: the artifact and WorkItem pages show the CLI lines that check them on the
    /// auditor's own machine.
    async fn pages_say_how_to_verify_them_yourself(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, worker, _) = setup(&h).await;
        owned(&h, &coordinator, &worker, "wi-1", contract(&[])).await;
        let artifact = h.put(&worker, "g1", b"checked elsewhere", &[]).await;
        for (uri, lines) in [
            (
                format!("/ui/artifacts/{artifact}"),
                vec![
                    format!("weft get {artifact} -o artifact.bin"),
                    format!("weft show {artifact}"),
                    "weft events verify --group g1".to_owned(),
                ],
            ),
            (
                "/ui/workitems/wi-1".to_owned(),
                vec![
                    "weft criteria wi-1".to_owned(),
                    "weft work show wi-1".to_owned(),
                ],
            ),
        ] {
            let page = console_page(&h, &coordinator, &uri).await;
            for line in lines {
                assert!(page.contains(&line), "{uri} lacks {line}");
            }
        }
    }
);

backends!(
    /// Issue #50: a Command id is its Agent's, so two Agents may have used one: reading it back
    /// without `agentId` is `bad_request` naming both, and `agentId` picks one.
    async fn a_command_id_two_agents_used_needs_the_agent(kind: Kind) {
        let h = harness(kind).await;
        let (coordinator, _, _) = setup(&h).await;
        let other = h.agent("c2", "g1", &["coordinator"]).await;
        for (agent, work_item) in [(&coordinator, "wi-a"), (&other, "wi-b")] {
            let payload = serde_json::json!({"workItemId": work_item, "missionId": MISSION,
                                             "contract": contract(&[])});
            let mut document = crate::http::tests::work_setup::command_doc(
                &h,
                agent,
                "g1",
                "work.authorize",
                payload,
            )
            .await;
            document["commandId"] = serde_json::json!("shared");
            let answer = h
                .send(crate::http::tests::work_setup::command_request(
                    agent, "g1", &document,
                ))
                .await;
            assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
        }
        let both = h
            .call(
                Method::GET,
                "/v1/groups/g1/commands/shared",
                Some(&coordinator.token),
                Body::empty(),
            )
            .await;
        assert_eq!(both.status, StatusCode::BAD_REQUEST, "{both:?}");
        let detail = both.json()["detail"].to_string();
        assert!(detail.contains("c1") && detail.contains("c2"), "{detail}");
        let picked = h
            .get_json(&coordinator, "/v1/groups/g1/commands/shared?agentId=c2")
            .await;
        assert_eq!(picked["agentId"], "c2");
    }
);
