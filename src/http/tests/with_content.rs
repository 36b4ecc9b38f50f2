//! Publication with its bytes in one request (`PUT /v1/artifacts/{digest}`, issue #15): the
//! bytes and the manifest commit together (ART-2, ART-3) under the same checks as the
//! two-request path (signer, Group, role, Execution Lease LSE-4/5, capability token scopes
//! LSE-6), inline or as a file; every refusal keeps nothing of either (exact code, every table
//! and the blob store unchanged).

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use serde_json::json;
use weft_api::{Envelope, Id};

use super::harness::*;

pub(super) const BOUNDARY: &str = "weft-test-boundary-7MA4YWxkTrZu0gW";

/// One part of a `multipart/form-data` body.
pub(super) struct Part<'a> {
    name: &'a str,
    content_type: &'a str,
    bytes: Vec<u8>,
}

pub(super) fn manifest_part(envelope: &Envelope) -> Part<'static> {
    Part {
        name: "manifest",
        content_type: "application/json",
        bytes: serde_json::to_vec(envelope).expect("json"),
    }
}

pub(super) fn content_part(bytes: &[u8]) -> Part<'static> {
    Part {
        name: "content",
        content_type: "application/octet-stream",
        bytes: bytes.to_vec(),
    }
}

pub(super) fn multipart(parts: &[Part<'_>]) -> Vec<u8> {
    let mut body = Vec::new();
    for part in parts {
        body.extend_from_slice(
            format!(
                "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"{}\"\r\nContent-Type: {}\r\n\r\n",
                part.name, part.content_type
            )
            .as_bytes(),
        );
        body.extend_from_slice(&part.bytes);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{BOUNDARY}--\r\n").as_bytes());
    body
}

/// `PUT /v1/artifacts/{digest}` with `parts`, as `bearer` (if any).
fn put_request(bearer: Option<&str>, digest: &str, parts: &[Part<'_>]) -> Request<Body> {
    let mut request = Request::builder()
        .method(Method::PUT)
        .uri(format!("/v1/artifacts/{digest}"))
        .header(
            "content-type",
            format!("multipart/form-data; boundary={BOUNDARY}"),
        );
    if let Some(bearer) = bearer {
        request = request.header("authorization", format!("Bearer {bearer}"));
    }
    request
        .body(Body::from(multipart(parts)))
        .expect("valid request")
}

/// A manifest of `bytes` by `agent` in g1, bound to `agent`'s current Execution Lease of the
/// default WorkItem (made and started if needed).
pub(super) async fn bound(h: &Harness, agent: &Agent, bytes: &[u8]) -> Envelope {
    let envelope = sign(&agent.key, &manifest(agent, "g1", digest_of(bytes), &[]));
    h.bind_to_lease(agent, &envelope).await
}

/// The publication request of `bytes` under `envelope`, as `agent`.
pub(super) fn publication(agent: &Agent, envelope: &Envelope, bytes: &[u8]) -> Request<Body> {
    put_request(
        Some(&agent.token),
        &digest_of(bytes).blake3.to_string(),
        &[manifest_part(envelope), content_part(bytes)],
    )
}

backends!(
    /// ART-2/ART-3: one request stores the bytes (inline when small, a file when not) and
    /// publishes their manifest with its Event; the bytes read back verified; the same request
    /// again answers 200 and adds nothing.
    async fn one_request_stores_the_bytes_and_publishes_them(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let small = b"{\"summary\": \"four lines\"}".to_vec();
        let large: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        for bytes in [&small, &large] {
            let envelope = bound(&h, &worker, bytes).await;
            let answer = h.send(publication(&worker, &envelope, bytes)).await;
            assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
            let published = answer.json();
            let digest = digest_of(bytes).blake3;
            assert_eq!(published["artifact"], json!(digest.to_string()));
            let sequence = published["sequence"].as_u64().expect("a sequence");
            let content = h
                .call(
                    Method::GET,
                    &format!("/v1/artifacts/{digest}/content"),
                    Some(&worker.token),
                    Body::empty(),
                )
                .await;
            assert_eq!(content.status, StatusCode::OK);
            assert_eq!(&content.body[..], &bytes[..]);
            let events = h
                .get_json(
                    &worker,
                    &format!("/v1/groups/g1/events?after={}", sequence - 1),
                )
                .await;
            let event = &events["events"][0];
            assert_eq!(event["type"], "artifact.published", "{events}");
            assert_eq!(event["payload"]["artifact"], json!(digest.to_string()));
            let before = h.fingerprint().await;
            // The manifest is what lets its publisher read the bytes (above): no uploader
            // row is written beside it (issue #15: one random index page less per commit).
            assert_eq!(before.tables["blob_uploaders"].0, 0);
            let again = h.send(publication(&worker, &envelope, bytes)).await;
            assert_eq!(again.status, StatusCode::OK, "{again:?}");
            assert_eq!(again.json()["sequence"], json!(sequence));
            // A repeat changes nothing anywhere.
            assert_eq!(before, h.fingerprint().await);
        }
        if kind == Kind::Disk {
            assert!(h.blob_file(&digest_of(&large).blake3).exists());
            assert!(!h.blob_file(&digest_of(&small).blake3).exists(), "inline");
        }
    }
);

backends!(
    /// Each refusal keeps neither the bytes nor the manifest: wrong bytes for the path or the
    /// manifest, parts missing, out of order or unknown, not multipart, the wrong caller.
    async fn refusals_keep_neither_bytes_nor_manifest(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let colleague = h.agent("w2", "g1", &["worker"]).await;
        let reviewer = h.agent("r1", "g1", &["reviewer", "auditor"]).await;
        let outsider = h.agent("w3", "g2", &["worker"]).await;
        let bytes = b"the bytes of the report".to_vec();
        let other = b"other bytes".to_vec();
        let envelope = bound(&h, &worker, &bytes).await;
        let digest = digest_of(&bytes).blake3.to_string();
        let (m, c) = (manifest_part(&envelope), content_part(&bytes));
        let token = Some(worker.token.as_str());
        let cases: Vec<(&str, Request<Body>)> = vec![
            // The path names other bytes than the body carries.
            (
                "digest_mismatch",
                put_request(
                    token,
                    &digest_of(&other).blake3.to_string(),
                    &[manifest_part(&envelope), content_part(&bytes)],
                ),
            ),
            // The manifest and the path agree, the body carries other bytes.
            (
                "digest_mismatch",
                put_request(
                    token,
                    &digest,
                    &[manifest_part(&envelope), content_part(&other)],
                ),
            ),
            // The same, with the path in its sha256 form.
            (
                "digest_mismatch",
                put_request(
                    token,
                    &digest_of(&bytes).sha256.to_string(),
                    &[manifest_part(&envelope), content_part(&other)],
                ),
            ),
            // The body and the path agree, the manifest names other bytes.
            (
                "digest_mismatch",
                put_request(
                    token,
                    &digest_of(&other).blake3.to_string(),
                    &[manifest_part(&envelope), content_part(&other)],
                ),
            ),
            (
                "bad_request",
                put_request(
                    token,
                    &digest,
                    &[content_part(&bytes), manifest_part(&envelope)],
                ),
            ),
            (
                "bad_request",
                put_request(token, &digest, &[manifest_part(&envelope)]),
            ),
            ("bad_request", put_request(token, &digest, &[])),
            (
                "bad_request",
                put_request(
                    token,
                    &digest,
                    &[
                        Part {
                            name: "notes",
                            content_type: "text/plain",
                            bytes: b"x".to_vec(),
                        },
                        manifest_part(&envelope),
                        content_part(&bytes),
                    ],
                ),
            ),
            (
                "invalid_json",
                put_request(
                    token,
                    &digest,
                    &[
                        Part {
                            name: "manifest",
                            content_type: "application/json",
                            bytes: b"{".to_vec(),
                        },
                        content_part(&bytes),
                    ],
                ),
            ),
            (
                "bad_signature",
                put_request(
                    token,
                    &digest,
                    &[
                        manifest_part(&with_sig(&envelope, s_plus_l)),
                        content_part(&bytes),
                    ],
                ),
            ),
            (
                "invalid_digest",
                put_request(
                    token,
                    "blake3:nothex",
                    &[manifest_part(&envelope), content_part(&bytes)],
                ),
            ),
            (
                "unauthorized",
                put_request(
                    None,
                    &digest,
                    &[manifest_part(&envelope), content_part(&bytes)],
                ),
            ),
            // The operator does not publish, even another's signed manifest.
            (
                "forbidden",
                put_request(
                    Some(ADMIN),
                    &digest,
                    &[manifest_part(&envelope), content_part(&bytes)],
                ),
            ),
            // Someone else's signed manifest, sent by a colleague.
            (
                "producer_mismatch",
                publication(&colleague, &envelope, &bytes),
            ),
            // A member without the worker role, with a manifest of its own.
            (
                "forbidden",
                publication(
                    &reviewer,
                    &sign(
                        &reviewer.key,
                        &manifest(&reviewer, "g1", digest_of(&bytes), &[]),
                    ),
                    &bytes,
                ),
            ),
            // A session of g2 publishing into g1.
            (
                "not_a_member",
                publication(
                    &outsider,
                    &sign(
                        &outsider.key,
                        &manifest(&outsider, "g1", digest_of(&bytes), &[]),
                    ),
                    &bytes,
                ),
            ),
            // LSE-4: a lease the WorkItem never had.
            (
                "stale_lease",
                publication(
                    &worker,
                    &{
                        let mut unbound = manifest(&worker, "g1", digest_of(&bytes), &[]);
                        unbound.execution.lease_id = Id::parse("l", "no-such-lease").expect("id");
                        sign(&worker.key, &unbound)
                    },
                    &bytes,
                ),
            ),
        ];
        for (code, request) in cases {
            refused(&h, request, code).await;
        }
        // Not multipart at all: the bytes as a blob upload would send them.
        let plain = request(
            Method::PUT,
            &format!("/v1/artifacts/{digest}"),
            token,
            bytes.clone(),
        );
        refused(&h, plain, "unsupported_media_type").await;
        // Nothing of the bytes is visible after all that; the good request still works.
        let head = h
            .call(
                Method::HEAD,
                &format!("/v1/blobs/{digest}"),
                token,
                Body::empty(),
            )
            .await;
        assert_eq!(head.status, StatusCode::NOT_FOUND);
        let answer = h.send(put_request(token, &digest, &[m, c])).await;
        assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    }
);

backends!(
    /// The bytes are bounded by the upload limit on this route too, and refused whole.
    async fn content_over_the_upload_limit_is_refused_whole(kind: Kind) {
        let h = harness_with(kind, |config| config.max_upload_bytes = 64 * 1024).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let bytes = vec![7u8; 64 * 1024 + 1];
        let envelope = bound(&h, &worker, &bytes).await;
        refused(
            &h,
            publication(&worker, &envelope, &bytes),
            "body_too_large",
        )
        .await;
    }
);

backends!(
    /// LSE-6: a capability token publishes with its bytes only with both `blob:write` and
    /// `artifact:publish`, for its own lease.
    async fn a_token_needs_both_scopes(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let bytes = b"made under a token".to_vec();
        let envelope = bound(&h, &worker, &bytes).await;
        let view = h.get_json(&worker, "/v1/workitems/work-1").await;
        let lease = view["lease"]["leaseId"]
            .as_str()
            .expect("a lease")
            .to_owned();
        let issue = |scope: Vec<&'static str>| {
            json_request(
                Method::POST,
                &format!("/v1/leases/{lease}/tokens"),
                &worker.token,
                json!({"scope": scope, "ttlSeconds": 600}),
                &[],
            )
        };
        let digest = digest_of(&bytes).blake3.to_string();
        for scope in [vec!["blob:write"], vec!["artifact:publish"]] {
            let issued = h.send(issue(scope.clone())).await;
            assert_eq!(issued.status, StatusCode::CREATED, "{issued:?}");
            let token = issued.json()["token"].as_str().expect("a token").to_owned();
            let request = put_request(
                Some(&token),
                &digest,
                &[manifest_part(&envelope), content_part(&bytes)],
            );
            refused(&h, request, "forbidden").await;
        }
        let issued = h.send(issue(vec!["blob:write", "artifact:publish"])).await;
        let token = issued.json()["token"].as_str().expect("a token").to_owned();
        let answer = h
            .send(put_request(
                Some(&token),
                &digest,
                &[manifest_part(&envelope), content_part(&bytes)],
            ))
            .await;
        assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    }
);

/// `parts` as a body, with `before` ahead of the first boundary and `after` in place of the
/// closing delimiter (`None`: the usual one).
fn framed(before: &[u8], parts: &[Part<'_>], after: Option<&[u8]>) -> Vec<u8> {
    let mut body = before.to_vec();
    let whole = multipart(parts);
    let closing = format!("--{BOUNDARY}--\r\n");
    body.extend_from_slice(&whole[..whole.len() - closing.len()]);
    body.extend_from_slice(after.unwrap_or(closing.as_bytes()));
    body
}

fn raw_put(token: &str, digest: &str, body: Vec<u8>) -> Request<Body> {
    Request::builder()
        .method(Method::PUT)
        .uri(format!("/v1/artifacts/{digest}"))
        .header(
            "content-type",
            format!("multipart/form-data; boundary={BOUNDARY}"),
        )
        .header("authorization", format!("Bearer {token}"))
        .body(Body::from(body))
        .expect("valid request")
}

backends!(
    /// The body's framing is checked before the transaction: a part after the content, a
    /// body cut before its closing delimiter, and a preamble over its bound (nobody makes the
    /// server buffer what comes before the content) each commit nothing.
    async fn a_malformed_frame_commits_nothing(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let bytes = b"framed bytes".to_vec();
        let envelope = bound(&h, &worker, &bytes).await;
        let digest = digest_of(&bytes).blake3.to_string();
        let parts = [manifest_part(&envelope), content_part(&bytes)];
        let extra = [
            manifest_part(&envelope),
            content_part(&bytes),
            content_part(b"more"),
        ];
        let cases = [
            ("bad_request", framed(b"", &extra, None)),
            ("incomplete_body", framed(b"", &parts, Some(b""))),
            (
                "body_too_large",
                framed(
                    &vec![b'x'; crate::http::with_content::BEFORE_CONTENT as usize + 1],
                    &parts,
                    None,
                ),
            ),
        ];
        for (code, body) in cases {
            refused(&h, raw_put(&worker.token, &digest, body), code).await;
        }
        let answer = h
            .send(raw_put(&worker.token, &digest, framed(b"", &parts, None)))
            .await;
        assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    }
);

backends!(
    /// Bytes that will be a file are refused before a byte is staged when the transaction
    /// would refuse them (LSE-4 here): the refusal writes nothing and costs the same whoever
    /// holds the bytes (no staging, no promotion to undo), and an upload limit the manifest's
    /// size is over is refused from the manifest alone.
    async fn a_file_publication_is_checked_before_its_bytes(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let large: Vec<u8> = (0..300_000u32).map(|i| (i % 253) as u8).collect();
        // Held already by another Group: still no staging for a refused request.
        let other = h.agent("w9", "g2", &["worker"]).await;
        h.upload(&other, &large).await;
        bound(&h, &worker, &large).await;
        let mut stale = manifest(&worker, "g1", digest_of(&large), &[]);
        stale.execution.lease_id = Id::parse("l", "no-such-lease").expect("id");
        let staged_before = h.store.artifacts().upload_counters().staged_uploads;
        refused(
            &h,
            publication(&worker, &sign(&worker.key, &stale), &large),
            "stale_lease",
        )
        .await;
        assert_eq!(
            h.store.artifacts().upload_counters().staged_uploads,
            staged_before
        );
    }
);
