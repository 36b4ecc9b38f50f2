//! What other tools' standards ask of the HTTP surface (issue #40): RFC 6750 challenges,
//! RFC 9110 media types and conditional requests, DSSE readers' tolerance of unknown fields.

use axum::body::Body;
use axum::http::{Method, StatusCode};

use super::harness::*;

/// issue #40: a 401 for a request with no credentials at all names no error code in its
/// `WWW-Authenticate` (RFC 6750 §3.1); a bad token's 401 still says `invalid_token`.
#[tokio::test]
async fn a_401_without_credentials_names_no_error() {
    let h = harness(Kind::Memory).await;
    let anonymous = request(Method::GET, "/v1/artifacts", None, Body::empty());
    let answer = refused(&h, anonymous, "unauthorized").await;
    assert_eq!(answer.status, StatusCode::UNAUTHORIZED);
    let challenge = answer.headers["www-authenticate"].to_str().expect("ascii");
    assert!(challenge.starts_with("Bearer"), "{challenge}");
    assert!(!challenge.contains("error="), "{challenge}");
    let forged = request(
        Method::GET,
        "/v1/artifacts",
        Some("not-a-token"),
        Body::empty(),
    );
    let answer = refused(&h, forged, "unauthorized").await;
    let challenge = answer.headers["www-authenticate"].to_str().expect("ascii");
    assert!(challenge.contains("error=\"invalid_token\""), "{challenge}");
}

/// issue #40: a media type whose parameters do not parse (RFC 9110 §5.6.6) is refused at
/// publication (`invalid_manifest`, nothing changed), never stored and served back.
#[tokio::test]
async fn a_media_type_with_unparseable_parameters_is_refused() {
    let h = harness(Kind::Memory).await;
    let worker = h.agent("w1", "g1", &["worker"]).await;
    h.put(&worker, "g1", b"first", &[]).await; // the WorkItem and lease exist now
    let digests = h.upload(&worker, b"second").await;
    for bad in ["text/plain; =x", "text/plain; charset", "text/plain; a=\"b"] {
        let mut manifest = manifest(&worker, "g1", digests, &[]);
        manifest.content.media_type = bad.to_owned();
        let envelope = h
            .bind_to_lease(&worker, &sign(&worker.key, &manifest))
            .await;
        let answer = refused(&h, publish_request(&worker, &envelope), "invalid_manifest").await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{bad}");
    }
    let mut manifest = manifest(&worker, "g1", digests, &[]);
    manifest.content.media_type = "text/plain; charset=\"utf-8\"".to_owned();
    let answer = h.publish(&worker, &sign(&worker.key, &manifest)).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
}

/// issue #40: a DSSE envelope with an unknown top-level field is accepted, as DSSE readers
/// ignore unknown fields (the signature covers only the payload and its type).
#[tokio::test]
async fn a_dsse_envelope_with_an_unknown_field_is_accepted() {
    let h = harness(Kind::Memory).await;
    let worker = h.agent("w1", "g1", &["worker"]).await;
    h.put(&worker, "g1", b"first", &[]).await;
    let digests = h.upload(&worker, b"second").await;
    let envelope = h
        .bind_to_lease(
            &worker,
            &sign(&worker.key, &manifest(&worker, "g1", digests, &[])),
        )
        .await;
    let mut body = serde_json::to_value(&envelope).expect("json");
    body["comment"] = serde_json::json!("added by a proxy");
    body["signatures"][0]["extension"] = serde_json::json!({"x": 1});
    let post = request(
        Method::POST,
        "/v1/artifacts",
        Some(&worker.token),
        serde_json::to_vec(&body).expect("json"),
    );
    let answer = h.send(post).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
}

/// A GET of `id`'s content as `token`, with `query` and `headers`.
async fn content_get(
    h: &Harness,
    token: &str,
    id: &weft_api::ArtifactId,
    query: &str,
    headers: &[(&str, &str)],
) -> Answer {
    let mut request = axum::http::Request::builder()
        .uri(format!("/v1/artifacts/{id}/content{query}"))
        .header("authorization", format!("Bearer {token}"));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    h.send(request.body(Body::empty()).expect("request")).await
}

/// issue #40: `If-Range` and `If-Match` (RFC 9110 §13): a matching `If-Range` gets the 206,
/// a non-matching one the full 200; `If-Match` with another tag is 412
/// `precondition_failed` (nothing changed); `*` and the matching ETag proceed.
#[tokio::test]
async fn if_range_and_if_match_are_honoured() {
    let h = harness(Kind::Memory).await;
    let worker = h.agent("w1", "g1", &["worker"]).await;
    let bytes: Vec<u8> = (0..1000u32).map(|i| (i % 251) as u8).collect();
    let id = h.put(&worker, "g1", &bytes, &[]).await;
    let etag = format!("\"{id}\"");
    let range = ("range", "bytes=10-19");
    let matching = content_get(&h, &worker.token, &id, "", &[range, ("if-range", &etag)]).await;
    assert_eq!(matching.status, StatusCode::PARTIAL_CONTENT);
    assert_eq!(matching.body, bytes[10..20]);
    for other in ["\"other\"", "W/\"other\"", "Tue, 15 Nov 1994 08:12:31 GMT"] {
        let whole = content_get(&h, &worker.token, &id, "", &[range, ("if-range", other)]).await;
        assert_eq!(whole.status, StatusCode::OK, "{other}");
        assert_eq!(whole.body, bytes, "{other}");
        assert!(!whole.headers.contains_key("content-range"), "{other}");
    }
    let failed = axum::http::Request::builder()
        .uri(format!("/v1/artifacts/{id}/content"))
        .header("authorization", format!("Bearer {}", worker.token))
        .header("if-match", "\"other\"")
        .body(Body::empty())
        .expect("request");
    let answer = refused(&h, failed, "precondition_failed").await;
    assert_eq!(answer.status, StatusCode::PRECONDITION_FAILED);
    for tag in ["*", etag.as_str(), &format!("\"other\", {etag}")] {
        let answer = content_get(&h, &worker.token, &id, "", &[("if-match", tag)]).await;
        assert_eq!(answer.status, StatusCode::OK, "{tag}");
        assert_eq!(answer.body, bytes, "{tag}");
    }
}

/// issue #40: a `?proof=bao` answer is its own representation: its own ETag (from digest,
/// range and format), the bao media type, the proved range in `Weft-Proof-Range`, and none of
/// the content's `ETag`, `Repr-Digest` or `Content-Range`.
#[tokio::test]
async fn a_proof_carries_its_own_representation_headers() {
    let h = harness(Kind::Memory).await;
    let worker = h.agent("w1", "g1", &["worker"]).await;
    let bytes: Vec<u8> = (0..40_000u32).map(|i| (i % 7) as u8).collect();
    let id = h.put(&worker, "g1", &bytes, &[]).await;
    let content_etag = format!("\"{id}\"");
    let ranged = content_get(
        &h,
        &worker.token,
        &id,
        "?proof=bao",
        &[("range", "bytes=100-199")],
    )
    .await;
    let whole = content_get(&h, &worker.token, &id, "?proof=bao", &[]).await;
    for (answer, proved) in [
        (&ranged, "bytes 100-199/40000"),
        (&whole, "bytes 0-39999/40000"),
    ] {
        assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
        assert_eq!(answer.headers["content-type"], "application/vnd.weft.bao");
        assert_eq!(answer.headers["weft-proof-range"], proved);
        // A proof's body depends on the range asked for: no cache may answer another's.
        assert_eq!(answer.headers["vary"], "accept, range, if-range");
        assert!(!answer.headers.contains_key("repr-digest"));
        assert!(!answer.headers.contains_key("content-range"));
        let etag = answer.headers["etag"].to_str().expect("ascii");
        assert_ne!(etag, content_etag);
        assert!(
            etag.starts_with('"') && etag.ends_with('"') && etag.contains(".bao."),
            "{etag}"
        );
    }
    assert_ne!(
        ranged.headers["etag"], whole.headers["etag"],
        "one ETag per range"
    );
    // The proof's ETag revalidates the proof, not the content.
    let etag = ranged.headers["etag"].to_str().expect("ascii").to_owned();
    let again = content_get(
        &h,
        &worker.token,
        &id,
        "?proof=bao",
        &[("range", "bytes=100-199"), ("if-none-match", &etag)],
    )
    .await;
    assert_eq!(again.status, StatusCode::NOT_MODIFIED);
    let content = content_get(&h, &worker.token, &id, "", &[("if-none-match", &etag)]).await;
    assert_eq!(content.status, StatusCode::OK);
    assert_eq!(content.headers["etag"], content_etag.as_str());
    assert!(content.headers.contains_key("repr-digest"));
}

/// Asserts `body` carries every field the document's schema for `(method, path, status)`
/// requires, one level into each required object.
fn assert_declared(method: &str, path: &str, status: u16, body: &serde_json::Value) {
    let document = crate::http::meta::document();
    let schema = &document["paths"][path][method]["responses"][status.to_string()]["content"]["application/json"]
        ["schema"];
    let required = |schema: &serde_json::Value| -> Vec<String> {
        schema["required"]
            .as_array()
            .map(|names| {
                names
                    .iter()
                    .filter_map(|n| n.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let top = required(schema);
    assert!(
        !top.is_empty(),
        "{method} {path} {status}: a real schema, not any object"
    );
    for field in top {
        assert!(
            body.get(&field).is_some(),
            "{method} {path}: {field} in {body}"
        );
        for inner in required(&schema["properties"][&field]) {
            assert!(
                body[&field].get(&inner).is_some(),
                "{method} {path}: {field}.{inner}"
            );
        }
    }
}

/// issue #40: the main success bodies are declared with their fields (not only
/// `{"type":"object"}`), and the server's answers carry them.
#[tokio::test]
async fn the_declared_success_bodies_are_what_the_server_answers() {
    let h = harness(Kind::Memory).await;
    let worker = h.agent("w1", "g1", &["worker"]).await;
    h.put(&worker, "g1", b"first", &[]).await;
    let digests = h.upload(&worker, b"second").await;
    let envelope = sign(&worker.key, &manifest(&worker, "g1", digests, &[]));
    let published = h.publish(&worker, &envelope).await;
    assert_eq!(published.status, StatusCode::CREATED);
    assert_declared("post", "/v1/artifacts", 201, &published.json());
    let id = digests.blake3;
    let shown = h.get_json(&worker, &format!("/v1/artifacts/{id}")).await;
    assert_declared("get", "/v1/artifacts/{digest}", 200, &shown);
    let checkpoint = h.get_json(&worker, "/v1/groups/g1/checkpoint").await;
    assert_declared("get", "/v1/groups/{group_id}/checkpoint", 200, &checkpoint);
    let grant = h
        .send(session_request(
            &worker.key,
            "w1",
            "g1",
            h.clock_now(),
            &random_nonce(),
        ))
        .await;
    assert_eq!(grant.status, StatusCode::CREATED, "{grant:?}");
    assert_declared("post", "/v1/sessions", 201, &grant.json());
}
