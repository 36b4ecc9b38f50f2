//! The built-in reviewer (EVD-3 steps 1, 2 and 5) and what it relies on: schema registration,
//! and the reserved authority identity nobody else may register as.

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use base64::Engine as _;
use serde_json::{Value, json};
use weft_api::dsse::BASE64;
use weft_api::{ArtifactId, Envelope};

use super::harness::*;
use weft_api::evidence::EVIDENCE_TYPE;

/// EVD-3 steps 1, 2 and 5: the built-in reviewer re-hashes and validates, and preserves the
/// results as Evidence signed by the server's own key.
#[tokio::test]
async fn the_builtin_reviewer_checks_integrity_and_schemas() {
    let h = harness_files(Kind::Disk).await;
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
    // Two checks, two criteria (issue #16): one check kind cannot contest another.
    assert_eq!(records[0]["evidence"]["criterion"], "ac-1.integrity");
    assert_eq!(records[1]["evidence"]["criterion"], "ac-1.schema");
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
    let review_request = |artifacts: Vec<ArtifactId>, checks: Value, token: &str| {
        let body = json!({"criterion": "ac-1", "artifacts": artifacts, "checks": checks});
        json_request(
            Method::POST,
            "/v1/workitems/work-1/review",
            token,
            body,
            &[],
        )
    };
    let as_worker = review_request(vec![valid], json!(["integrity"]), &worker.token);
    refused(&h, as_worker, "forbidden").await;
    // Without a content-type, unlike the others.
    let unknown_item = Request::builder()
        .method(Method::POST)
        .uri("/v1/workitems/no-such-item/review")
        .header("authorization", format!("Bearer {}", reviewer.token))
        .body(Body::from(
            json!({"criterion": "ac-1", "artifacts": [valid], "checks": ["integrity"]}).to_string(),
        ))
        .expect("request");
    refused(&h, unknown_item, "unknown_work_item").await;
    let never_published = vec![digest_of(b"nope").blake3];
    for (artifacts, checks, code) in [
        (never_published, json!(["integrity"]), "unknown_artifact"),
        (vec![valid], json!(["vibes"]), "bad_request"),
        (vec![valid], json!([]), "bad_request"),
    ] {
        refused(&h, review_request(artifacts, checks, &reviewer.token), code).await;
    }
}

/// The integrity check recomputes SHA-256 from the bytes the read verified against their
/// address, which an ordinary read does not: a blob row that records a wrong SHA-256 fails the
/// check, naming both digests, and is not quarantined (its bytes are its address). Each re-hash
/// of a stored file holds one of the reviewer's download slots, as a GET does, and so does the
/// schema check's read of the schema and the artifact: with the one slot held by a download,
/// either review is refused with `too_many_downloads` and no table changes; once the download
/// is dropped both run.
#[tokio::test]
async fn the_integrity_check_recomputes_sha256_and_holds_a_download_slot() {
    use tower::ServiceExt as _;
    let h = harness_with(Kind::Disk, |config| {
        config.inline_blob_bytes = 0;
        config.max_downloads_per_agent = 1;
    })
    .await;
    let worker = h.agent("w1", "g1", &["worker"]).await;
    let reviewer = h.agent("r1", "g1", &["reviewer"]).await;
    let schema = h.put(&worker, "g1", br#"{"type":"object"}"#, &[]).await;
    let digests = h.upload(&worker, br#"{"passed": 3}"#).await;
    let mut described = manifest(&worker, "g1", digests, &[]);
    described.content.schema = Some(schema.to_string());
    let published = h.publish(&worker, &sign(&worker.key, &described)).await;
    assert_eq!(published.status, StatusCode::CREATED, "{published:?}");
    let report = digests.blake3;
    let check_request = |check: &str| {
        json_request(
            Method::POST,
            "/v1/workitems/work-1/review",
            &reviewer.token,
            json!({"criterion": "ac-1", "artifacts": [report], "checks": [check]}),
            &[],
        )
    };
    let review_request = || check_request("integrity");
    let outcome = |answer: &Answer| {
        let result = answer.json()["evidence"][0]["evidence"]["result"].clone();
        (
            result["outcome"].as_str().expect("outcome").to_owned(),
            result["summary"].as_str().expect("summary").to_owned(),
        )
    };
    let answer = h.send(review_request()).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    assert_eq!(outcome(&answer).0, "pass");

    h.tamper_sha256(&report, [7; 32]);
    let answer = h.send(review_request()).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    let (result, summary) = outcome(&answer);
    assert_eq!(result, "fail", "{summary}");
    assert!(
        summary.contains(&format!(
            "where the index records sha256:{}",
            "07".repeat(32)
        )),
        "{summary}"
    );
    let content = format!("/v1/artifacts/{report}/content");
    let read = h
        .call(Method::GET, &content, Some(&reviewer.token), Body::empty())
        .await;
    assert_eq!(
        read.status,
        StatusCode::OK,
        "bytes that match their address are not quarantined: {read:?}"
    );

    let held = h
        .app
        .clone()
        .oneshot(
            Request::builder()
                .uri(&content)
                .header("authorization", format!("Bearer {}", reviewer.token))
                .body(Body::empty())
                .expect("request"),
        )
        .await
        .expect("infallible");
    assert_eq!(held.status(), StatusCode::OK);
    refused(&h, review_request(), "too_many_downloads").await;
    // The schema check reads the schema and the artifact into memory from their files, and
    // each read takes the slot too.
    refused(&h, check_request("schema"), "too_many_downloads").await;
    drop(held);
    let answer = h.send(review_request()).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    let answer = h.send(check_request("schema")).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    assert_eq!(outcome(&answer).0, "pass", "{answer:?}");
}

/// Issue #16: one review of a binary artifact with both checks is not contested against
/// itself: integrity passes under one criterion, schema is inconclusive under another; and a caller may
/// map each check to a criterion of its own.
#[tokio::test]
async fn each_check_kind_records_under_its_own_criterion() {
    let h = harness(Kind::Memory).await;
    let worker = h.agent("w1", "g1", &["worker"]).await;
    let reviewer = h.agent("r1", "g1", &["reviewer"]).await;
    let binary = h.put(&worker, "g1", &[0u8, 159, 146, 150, 255], &[]).await;
    let review = |body: Value| {
        let h = &h;
        let token = reviewer.token.clone();
        async move {
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
        json!({"criterion": "ac-1", "artifacts": [binary], "checks": ["integrity", "schema"]}),
    )
    .await;
    assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    let answer = review(json!({"artifacts": [binary], "criteria": {"integrity": "bytes-intact", "schema": "shape"}})).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    let records = answer.json()["evidence"].clone();
    assert_eq!(records[0]["evidence"]["criterion"], "bytes-intact");
    assert_eq!(records[1]["evidence"]["criterion"], "shape");

    let criteria = h.get_json(&reviewer, "/v1/workitems/work-1/criteria").await;
    let summary: Vec<(String, String, bool)> = criteria["criteria"]
        .as_array()
        .expect("criteria")
        .iter()
        .map(|c| {
            (
                c["criterion"].as_str().expect("criterion").to_owned(),
                c["latest"]["outcome"].as_str().expect("outcome").to_owned(),
                c["contested"].as_bool().expect("contested"),
            )
        })
        .collect();
    let row = |name: &str, outcome: &str| (name.to_owned(), outcome.to_owned(), false);
    assert_eq!(
        summary,
        vec![
            row("ac-1.integrity", "pass"),
            row("ac-1.schema", "inconclusive"),
            row("bytes-intact", "pass"),
            row("shape", "inconclusive"),
        ],
        "{criteria}"
    );

    // A map naming a check that does not run, or no criterion at all: refused, nothing kept.
    let request = |body: Value| {
        json_request(
            Method::POST,
            "/v1/workitems/work-1/review",
            &reviewer.token,
            body,
            &[],
        )
    };
    refused(&h, request(json!({"artifacts": [binary], "checks": ["integrity"], "criteria": {"schema": "shape"}})), "bad_request").await;
    refused(
        &h,
        request(json!({"artifacts": [binary], "checks": ["integrity"]})),
        "bad_request",
    )
    .await;
    refused(
        &h,
        request(json!({"artifacts": [binary], "criteria": {"schema": "not a criterion"}})),
        "invalid_evidence",
    )
    .await;
}

backends!(
    /// Schema registration and the reserved authority identity refuse bad input and change nothing.
    async fn schema_registration_and_reserved_ids_are_checked(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let schema = h.put(&worker, "g1", br#"{"type":"object"}"#, &[]).await;
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
            refused(
                &h,
                admin_request(Method::POST, "/v1/admin/schemas", body),
                code,
            )
            .await;
        }
        let as_worker = json_request(
            Method::POST,
            "/v1/admin/schemas",
            &worker.token,
            json!({"uri": "https://example.org/s.json", "artifact": schema}),
            &[],
        );
        refused(&h, as_worker, "forbidden").await;
        // Nobody may register as the server's reviewer, nor with the server's key.
        let authority_key = h
            .call(Method::GET, "/v1/authority/keys", None, Body::empty())
            .await
            .json()["keys"][0]["publicKey"]
            .clone();
        for body in [
            json!({"agentId": "weft-authority", "publicKey": BASE64.encode([9u8; 32]), "agentCardVersion": "1"}),
            json!({"agentId": "impostor", "publicKey": authority_key, "agentCardVersion": "1"}),
        ] {
            refused(
                &h,
                admin_request(Method::POST, "/v1/admin/agents", body),
                "conflict",
            )
            .await;
        }
    }
);

backends!(
    /// Issue #10 finding 5 and #11: the built-in reviewer never picks a Mission for the
    /// caller: a WorkItem belongs to one Mission (a manifest naming it under another is
    /// refused), a named Mission must be the WorkItem's, and the Evidence names it.
    async fn the_reviewer_reviews_one_named_mission(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let reviewer = h.agent("r1", "g1", &["reviewer"]).await;
        let mut published = Vec::new();
        let digests = h.upload(&worker, b"first").await;
        let answer = h
            .publish(
                &worker,
                &sign(&worker.key, &manifest(&worker, "g1", digests, &[])),
            )
            .await;
        assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
        published.push(digests.blake3);
        // Issue #11: work-1 belongs to mission-1; a manifest naming it under mission-2 is
        // refused, so a WorkItem id never spans Missions.
        let digests = h.upload(&worker, b"second").await;
        let mut other = manifest(&worker, "g1", digests, &[]);
        other.mission_id = weft_api::Id::parse("m", "mission-2").expect("id");
        refused(
            &h,
            publish_request(&worker, &sign(&worker.key, &other)),
            "mission_mismatch",
        )
        .await;
        let review_request = |body: Value| {
            json_request(
                Method::POST,
                "/v1/workitems/work-1/review",
                &reviewer.token,
                body,
                &[],
            )
        };
        let first = published[0];
        refused(
            &h,
            review_request(json!({"criterion": "ac-1", "artifacts": [first], "checks": ["integrity"], "missionId": "mission-3"})),
            "unknown_work_item",
        )
        .await;
        let answer = h
            .send(review_request(json!({"criterion": "ac-1", "artifacts": [first], "checks": ["integrity"], "missionId": "mission-1"})))
            .await;
        assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
        assert_eq!(
            answer.json()["evidence"][0]["evidence"]["missionId"],
            "mission-1"
        );
    }
);
