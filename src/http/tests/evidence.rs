//! Evidence for reviewers (EVD-1, EVD-3 steps 1, 2 and 5, EVD-4, EVD-5): recording, fetching by
//! criterion, the criteria summary, access, bad input, and the built-in reviewer.

use super::*;
use weft_api::evidence::EVIDENCE_TYPE;

fn evidence(
    agent: &Agent,
    group: &str,
    work_item: &str,
    criterion: &str,
    outcome: &str,
    artifacts: &[ArtifactId],
) -> Value {
    json!({
        "subject": {"kind": "workItem", "id": work_item},
        "missionId": "mission-1", "groupId": group, "workItemId": work_item,
        "criterion": criterion,
        "method": {"kind": "automated_test", "name": "pytest suite", "version": "1.4"},
        "result": {"outcome": outcome, "summary": "412 passed", "metrics": {"passed": 412}},
        "producer": {"agentId": agent.id, "agentCardVersion": "1"},
        "timestamp": "2026-11-30T12:05:00Z",
        "artifacts": artifacts,
    })
}

fn sign_evidence(key: &SigningKey, payload: &Value) -> Envelope {
    Envelope::sign(key, EVIDENCE_TYPE, payload.to_string().as_bytes())
}

impl Harness {
    async fn record(&self, agent: &Agent, envelope: &Envelope) -> Answer {
        self.call(
            Method::POST,
            "/v1/evidence",
            Some(&agent.token),
            serde_json::to_vec(envelope).expect("json"),
        )
        .await
    }

    async fn get_json(&self, agent: &Agent, uri: &str) -> Value {
        let answer = self
            .call(Method::GET, uri, Some(&agent.token), Body::empty())
            .await;
        assert_eq!(answer.status, StatusCode::OK, "{uri}: {answer:?}");
        answer.json()
    }
}

/// EVD-4 and the by-criterion queries: record, correct by superseding, read the summary.
#[tokio::test]
async fn evidence_is_recorded_and_fetched_by_criterion() {
    for kind in KINDS {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let reviewer = h.agent("r1", "g1", &["reviewer"]).await;
        let report = h.put(&worker, "g1", b"{\"tests\":412}", &[]).await;
        let first = h
            .record(
                &reviewer,
                &sign_evidence(
                    &reviewer.key,
                    &evidence(&reviewer, "g1", "work-1", "ac-2", "fail", &[report]),
                ),
            )
            .await;
        assert_eq!(first.status, StatusCode::CREATED, "{first:?}");
        let first_id = first.json()["evidenceId"].as_str().expect("id").to_owned();
        h.record(
            &worker,
            &sign_evidence(
                &worker.key,
                &evidence(&worker, "g1", "work-1", "ac-1", "pass", &[]),
            ),
        )
        .await;
        let mut correction = evidence(&reviewer, "g1", "work-1", "ac-2", "pass", &[report]);
        correction["supersedes"] = json!(first_id);
        let second = h
            .record(&reviewer, &sign_evidence(&reviewer.key, &correction))
            .await;
        assert_eq!(second.status, StatusCode::CREATED, "{second:?}");
        let second_id = second.json()["evidenceId"].as_str().expect("id").to_owned();

        let page = h
            .get_json(&worker, "/v1/evidence?workItemId=work-1&criterion=ac-2")
            .await;
        let ids: Vec<&str> = page["items"]
            .as_array()
            .expect("items")
            .iter()
            .filter_map(|i| i["evidenceId"].as_str())
            .collect();
        assert_eq!(ids, [second_id.as_str(), first_id.as_str()], "newest first");
        let failing = h
            .get_json(&worker, "/v1/evidence?workItemId=work-1&outcome=fail")
            .await;
        assert_eq!(failing["items"].as_array().map(Vec::len), Some(1));
        // DESIGN §8 names the filter `result`.
        let by_result = h
            .get_json(&worker, "/v1/evidence?workItemId=work-1&result=fail")
            .await;
        assert_eq!(by_result, failing);
        let both = h
            .get_json(
                &worker,
                "/v1/evidence?workItemId=work-1&result=fail&outcome=fail",
            )
            .await;
        assert_eq!(both, failing);
        let paged = h
            .get_json(&worker, "/v1/evidence?workItemId=work-1&limit=2")
            .await;
        let next = paged["next"].as_u64().expect("a second page");
        let rest = h
            .get_json(
                &worker,
                &format!("/v1/evidence?workItemId=work-1&after={next}"),
            )
            .await;
        assert_eq!(rest["items"].as_array().map(Vec::len), Some(1));

        let criteria = h.get_json(&worker, "/v1/workitems/work-1/criteria").await;
        let ac2 = &criteria["criteria"][1];
        assert_eq!(ac2["criterion"], "ac-2");
        assert_eq!(
            ac2["latest"]["outcome"], "pass",
            "the superseded fail is no longer in force"
        );
        assert_eq!(
            ac2["counts"],
            json!({"pass": 1, "fail": 1, "inconclusive": 0})
        );
        assert_eq!(ac2["contested"], json!(false));
        assert_eq!(criteria["criteria"][0]["criterion"], "ac-1");

        let one = h
            .get_json(&worker, &format!("/v1/evidence/{second_id}"))
            .await;
        assert_eq!(one["evidence"]["supersedes"], json!(first_id));
        let citing = h
            .get_json(&worker, &format!("/v1/artifacts/{report}/evidence"))
            .await;
        assert_eq!(
            citing["items"].as_array().map(Vec::len),
            Some(2),
            "{kind:?}"
        );
        // Recording the same envelope again is idempotent.
        assert_eq!(
            h.record(&reviewer, &sign_evidence(&reviewer.key, &correction))
                .await
                .status,
            StatusCode::OK
        );
    }
}

#[tokio::test]
async fn contested_criteria_are_flagged() {
    let h = harness(Kind::Memory).await;
    let worker = h.agent("w1", "g1", &["worker"]).await;
    let reviewer = h.agent("r1", "g1", &["reviewer"]).await;
    h.record(
        &worker,
        &sign_evidence(
            &worker.key,
            &evidence(&worker, "g1", "work-1", "ac-3", "pass", &[]),
        ),
    )
    .await;
    h.record(
        &reviewer,
        &sign_evidence(
            &reviewer.key,
            &evidence(&reviewer, "g1", "work-1", "ac-3", "fail", &[]),
        ),
    )
    .await;
    let criteria = h.get_json(&worker, "/v1/workitems/work-1/criteria").await;
    assert_eq!(criteria["criteria"][0]["contested"], json!(true));
    assert_eq!(criteria["criteria"][0]["producers"], json!(["r1", "w1"]));
}

/// EVD-4/EVD-5 bad input: each refused with its code, nothing stored.
#[tokio::test]
async fn bad_evidence_is_refused_and_changes_nothing() {
    for kind in KINDS {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let reviewer = h.agent("r1", "g1", &["reviewer"]).await;
        let outsider = h.agent("x1", "g2", &["reviewer"]).await;
        let auditor = h.agent("a1", "g1", &["auditor"]).await;
        let report = h.put(&worker, "g1", b"report", &[]).await;
        let hidden = h
            .put(
                &h.agent("x2", "g2", &["worker"]).await,
                "g2",
                b"hidden",
                &[],
            )
            .await;
        let other_item = h
            .record(
                &reviewer,
                &sign_evidence(
                    &reviewer.key,
                    &evidence(&reviewer, "g1", "work-2", "ac-1", "pass", &[]),
                ),
            )
            .await;
        let other_id = other_item.json()["evidenceId"]
            .as_str()
            .expect("id")
            .to_owned();
        let before = h.stats().await;
        let good = evidence(&reviewer, "g1", "work-1", "ac-2", "pass", &[report]);
        let envelope = sign_evidence(&reviewer.key, &good);
        let mutated = |f: &dyn Fn(&mut Value)| {
            let mut payload = good.clone();
            f(&mut payload);
            sign_evidence(&reviewer.key, &payload)
        };
        let mut replayed =
            Envelope::sign(&reviewer.key, MANIFEST_TYPE, good.to_string().as_bytes());
        let cases: Vec<(&str, &Agent, Envelope)> = vec![
            (
                "bad_signature",
                &reviewer,
                with_sig(&envelope, |mut s| {
                    s[0] ^= 1;
                    s
                }),
            ),
            (
                "bad_signature",
                &reviewer,
                with_sig(&envelope, |s| s[..60].to_vec()),
            ),
            ("bad_signature", &reviewer, with_sig(&envelope, s_plus_l)),
            ("wrong_payload_type", &reviewer, replayed.clone()),
            (
                "producer_mismatch",
                &worker,
                sign_evidence(&worker.key, &good),
            ),
            ("producer_mismatch", &worker, envelope.clone()),
            (
                "not_a_member",
                &outsider,
                sign_evidence(
                    &outsider.key,
                    &evidence(&outsider, "g1", "work-1", "ac-2", "pass", &[]),
                ),
            ),
            (
                "forbidden",
                &auditor,
                sign_evidence(
                    &auditor.key,
                    &evidence(&auditor, "g1", "work-1", "ac-2", "pass", &[]),
                ),
            ),
            (
                "invalid_evidence",
                &reviewer,
                mutated(&|p| p["reasoning"] = json!("first I thought…")),
            ),
            (
                "invalid_evidence",
                &reviewer,
                mutated(&|p| p["criterion"] = json!("ac-2; DROP")),
            ),
            (
                "invalid_evidence",
                &reviewer,
                mutated(&|p| p["criterion"] = json!("ac\u{202e}2")),
            ),
            (
                "invalid_evidence",
                &reviewer,
                mutated(&|p| p["result"]["summary"] = json!("x".repeat(5000))),
            ),
            (
                "invalid_evidence",
                &reviewer,
                mutated(&|p| {
                    p.as_object_mut().map(|o| o.remove("timestamp"));
                }),
            ),
            (
                "unknown_artifact",
                &reviewer,
                mutated(&|p| p["artifacts"] = json!([digest_of(b"never").blake3])),
            ),
            (
                "unknown_artifact",
                &reviewer,
                mutated(&|p| p["artifacts"] = json!([hidden])),
            ),
            (
                "unknown_evidence",
                &reviewer,
                mutated(&|p| p["supersedes"] = json!(digest_of(b"no such").blake3)),
            ),
            (
                "supersedes_mismatch",
                &reviewer,
                mutated(&|p| p["supersedes"] = json!(other_id)),
            ),
        ];
        for (code, caller, envelope) in cases {
            assert_eq!(h.record(caller, &envelope).await.code(), code, "{kind:?}");
        }
        // The payload type is bound by PAE: relabelling the envelope breaks the signature.
        replayed.payload_type = EVIDENCE_TYPE.into();
        assert_eq!(h.record(&reviewer, &replayed).await.code(), "bad_signature");
        for (bad, code) in [
            ("criterion=a%20b", "invalid_id"),
            ("outcome=maybe", "bad_request"),
            ("result=maybe", "bad_request"),
            ("result=pass&outcome=fail", "bad_request"),
            ("method=vibes", "bad_request"),
            ("after=-1", "bad_request"),
            ("workItemId=..", "invalid_id"),
            ("bogus=1", "bad_request"),
        ] {
            let answer = h
                .call(
                    Method::GET,
                    &format!("/v1/evidence?{bad}"),
                    Some(&reviewer.token),
                    Body::empty(),
                )
                .await;
            assert_eq!(answer.code(), code, "{bad}");
        }
        assert_eq!(h.stats().await, before, "{kind:?}");
    }
}

/// Evidence is visible only to members of its Group.
#[tokio::test]
async fn evidence_stays_in_its_group() {
    for kind in KINDS {
        let h = harness(kind).await;
        let reviewer = h.agent("r1", "g1", &["reviewer"]).await;
        let outsider = h.agent("x1", "g2", &["reviewer"]).await;
        let recorded = h
            .record(
                &reviewer,
                &sign_evidence(
                    &reviewer.key,
                    &evidence(&reviewer, "g1", "work-1", "ac-1", "pass", &[]),
                ),
            )
            .await;
        let id = recorded.json()["evidenceId"]
            .as_str()
            .expect("id")
            .to_owned();
        assert_eq!(
            h.get_json(&outsider, "/v1/evidence?workItemId=work-1")
                .await["items"],
            json!([])
        );
        assert_eq!(
            h.get_json(&outsider, "/v1/workitems/work-1/criteria").await["criteria"],
            json!([])
        );
        let answer = h
            .call(
                Method::GET,
                &format!("/v1/evidence/{id}"),
                Some(&outsider.token),
                Body::empty(),
            )
            .await;
        assert_eq!(answer.code(), "not_found", "{kind:?}");
    }
}

/// EVD-3 steps 1, 2 and 5: the built-in reviewer re-hashes and validates, and preserves the
/// results as Evidence signed by the server's own key.
#[tokio::test]
async fn the_builtin_reviewer_checks_integrity_and_schemas() {
    let h = harness(Kind::Disk).await;
    let worker = h.agent("w1", "g1", &["worker"]).await;
    let reviewer = h.agent("r1", "g1", &["reviewer"]).await;
    let schema = h.put(&worker, "g1", br#"{"type":"object","required":["passed"],"properties":{"passed":{"type":"integer"}}}"#, &[]).await;
    let publish_with_schema = |bytes: &'static [u8], schema_ref: Option<String>| {
        let worker = &worker;
        let h = &h;
        async move {
            let digests = h.upload(worker, bytes).await;
            let mut manifest = manifest(worker, "g1", digests, &[]);
            manifest.content.schema = schema_ref;
            assert_eq!(
                h.publish(worker, &sign(&worker.key, &manifest))
                    .await
                    .status,
                StatusCode::CREATED
            );
            digests.blake3
        }
    };
    let valid = publish_with_schema(br#"{"passed": 412}"#, Some(schema.to_string())).await;
    let invalid = publish_with_schema(br#"{"passed": "many"}"#, Some(schema.to_string())).await;
    let by_uri = publish_with_schema(
        br#"{"passed": 1}"#,
        Some("https://example.org/report.v1.json".into()),
    )
    .await;
    let unschemed = publish_with_schema(br#"{"x": 1}"#, None).await;
    let answer = h
        .admin_json(
            Method::POST,
            "/v1/admin/schemas",
            json!({"uri": "https://example.org/report.v1.json", "artifact": schema}),
        )
        .await;
    assert_eq!(answer.status, StatusCode::NO_CONTENT, "{answer:?}");

    let review = |artifacts: Vec<ArtifactId>, checks: Value, token: String| {
        let h = &h;
        async move {
            let body = json!({"criterion": "ac-1", "artifacts": artifacts, "checks": checks});
            h.json_as(
                Method::POST,
                "/v1/workitems/work-1/review",
                &token,
                body,
                &[],
            )
            .await
        }
    };
    let answer = review(
        vec![valid, by_uri],
        json!(["integrity", "schema"]),
        reviewer.token.clone(),
    )
    .await;
    assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    let records = answer.json()["evidence"].clone();
    assert_eq!(records[0]["evidence"]["method"]["kind"], "integrity_check");
    assert_eq!(records[0]["evidence"]["result"]["outcome"], "pass");
    assert_eq!(
        records[1]["evidence"]["method"]["kind"],
        "schema_validation"
    );
    assert_eq!(
        records[1]["evidence"]["result"]["outcome"], "pass",
        "{records}"
    );
    assert_eq!(
        records[1]["evidence"]["producer"]["agentId"],
        "weft-authority"
    );

    // The server's signature verifies with the key it publishes.
    let keys = h
        .call(Method::GET, "/v1/authority/keys", None, Body::empty())
        .await
        .json();
    let key = weft_api::dsse::parse_public_key(keys["keys"][0]["publicKey"].as_str().expect("key"))
        .expect("valid key");
    let envelope: Envelope =
        serde_json::from_value(records[1]["envelope"].clone()).expect("envelope");
    envelope
        .verify(EVIDENCE_TYPE, &key)
        .expect("signed by the authority key");

    let answer = review(
        vec![invalid, unschemed],
        json!(["schema"]),
        reviewer.token.clone(),
    )
    .await;
    let record = &answer.json()["evidence"][0]["evidence"];
    assert_eq!(
        record["result"]["outcome"], "fail",
        "a failed check is Evidence, not an HTTP error"
    );
    assert!(
        record["result"]["summary"]
            .as_str()
            .expect("summary")
            .contains("inconclusive")
    );

    // A flipped bit: integrity fails (and the blob is quarantined).
    let path = h.blob_file(&valid);
    let mut stored = std::fs::read(&path).expect("blob");
    stored[3] ^= 1;
    std::fs::write(&path, stored).expect("write");
    let answer = review(vec![valid], json!(["integrity"]), reviewer.token.clone()).await;
    assert_eq!(
        answer.json()["evidence"][0]["evidence"]["result"]["outcome"],
        "fail"
    );
    let criteria = h.get_json(&reviewer, "/v1/workitems/work-1/criteria").await;
    assert_eq!(criteria["criteria"][0]["latest"]["outcome"], "fail");

    // Who may ask, and about what.
    let before = h.stats().await;
    assert_eq!(
        review(vec![valid], json!(["integrity"]), worker.token.clone())
            .await
            .code(),
        "forbidden"
    );
    let request = Request::builder()
        .method(Method::POST)
        .uri("/v1/workitems/no-such-item/review")
        .header("authorization", format!("Bearer {}", reviewer.token))
        .body(Body::from(
            json!({"criterion": "ac-1", "artifacts": [valid], "checks": ["integrity"]}).to_string(),
        ))
        .expect("request");
    assert_eq!(h.send(request).await.code(), "unknown_work_item");
    assert_eq!(
        review(
            vec![digest_of(b"nope").blake3],
            json!(["integrity"]),
            reviewer.token.clone()
        )
        .await
        .code(),
        "unknown_artifact"
    );
    assert_eq!(
        review(vec![valid], json!(["vibes"]), reviewer.token.clone())
            .await
            .code(),
        "bad_request"
    );
    assert_eq!(
        review(vec![valid], json!([]), reviewer.token.clone())
            .await
            .code(),
        "bad_request"
    );
    assert_eq!(h.stats().await, before);
}

/// Schema registration and the reserved authority identity refuse bad input and change nothing.
#[tokio::test]
async fn schema_registration_and_reserved_ids_are_checked() {
    for kind in KINDS {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let schema = h.put(&worker, "g1", br#"{"type":"object"}"#, &[]).await;
        let before = h.stats().await;
        for (body, code) in [
            (
                json!({"uri": "ftp://example.org/s.json", "artifact": schema}),
                "bad_request",
            ),
            (json!({"uri": "", "artifact": schema}), "bad_request"),
            (
                json!({"uri": "https://example.org/s.json", "artifact": digest_of(b"never published").blake3}),
                "unknown_artifact",
            ),
            (
                json!({"uri": "https://example.org/s.json", "artifact": schema, "extra": 1}),
                "bad_request",
            ),
            (
                json!({"uri": "https://example.org/s.json", "artifact": "blake3:XYZ"}),
                "bad_request",
            ),
        ] {
            assert_eq!(
                h.admin_json(Method::POST, "/v1/admin/schemas", body.clone())
                    .await
                    .code(),
                code,
                "{body}"
            );
        }
        let as_worker = h
            .json_as(
                Method::POST,
                "/v1/admin/schemas",
                &worker.token,
                json!({"uri": "https://example.org/s.json", "artifact": schema}),
                &[],
            )
            .await;
        assert_eq!(as_worker.code(), "forbidden");
        // Nobody may register as the server's reviewer, nor with the server's key.
        let authority_key = h
            .call(Method::GET, "/v1/authority/keys", None, Body::empty())
            .await
            .json()["keys"][0]["publicKey"]
            .clone();
        let answer = h
            .admin_json(Method::POST, "/v1/admin/agents", json!({"agentId": "weft-authority", "publicKey": BASE64.encode([9u8; 32]), "agentCardVersion": "1"}))
            .await;
        assert_eq!(answer.code(), "conflict");
        let answer = h
            .admin_json(
                Method::POST,
                "/v1/admin/agents",
                json!({"agentId": "impostor", "publicKey": authority_key, "agentCardVersion": "1"}),
            )
            .await;
        assert_eq!(answer.code(), "conflict");
        assert_eq!(h.stats().await, before, "{kind:?}");
    }
}
