//! Uploads (ART-1, ART-3): the round trip by either digest, malformed and mismatched digests,
//! size limits and broken or stalled bodies on the stream, the empty blob, and deduplication.

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use base64::Engine as _;
use bytes::Bytes;
use futures::StreamExt as _;
use serde_json::json;

use super::harness::*;

backends!(
    /// ART-1: an Artifact is its bytes, looked up by either digest; ART-5: the read is verified.
    async fn upload_then_read_round_trips_with_both_digests(kind: Kind) {
        let h = harness_files(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let bytes = b"{\"hello\":\"world\"}".to_vec();
        let id = h.put(&worker, "g1", &bytes, &[]).await;
        let digests = digest_of(&bytes);
        for form in [digests.blake3.to_string(), digests.sha256.to_string()] {
            let answer = h
                .call(
                    Method::GET,
                    &format!("/v1/artifacts/{form}/content"),
                    Some(&worker.token),
                    Body::empty(),
                )
                .await;
            assert_eq!(answer.status, StatusCode::OK, "{kind:?}");
            assert_eq!(answer.body, bytes);
            assert_eq!(answer.headers["etag"], format!("\"{id}\"").as_str());
            assert_eq!(answer.headers["content-type"], "application/json");
            assert_eq!(answer.headers["x-content-type-options"], "nosniff");
            let sha = base64::engine::general_purpose::STANDARD.encode(digests.sha256.0);
            assert_eq!(
                answer.headers["repr-digest"],
                format!("sha-256=:{sha}:").as_str()
            );
        }
        if kind == Kind::Disk {
            assert!(h.blob_file(&id).exists(), "DESIGN §8.1 layout");
        }
    }
);

backends!(
    async fn malformed_digests_are_refused_and_change_nothing(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let hex = digest_of(b"x").blake3.hex();
        for bad in [
            format!("blake3:{}", hex.to_uppercase()),
            format!("blake3:{}", &hex[..63]),
            format!("blake3:{hex}00"),
            format!("blake3:{}zz", &hex[..62]),
            format!("md5:{hex}"),
            hex.clone(),
            format!("%20blake3:{hex}"),
            format!("blake3:{hex}%20"),
            format!("blake3:%20{}", &hex[..63]),
        ] {
            let put = request(
                Method::PUT,
                &format!("/v1/blobs/{bad}"),
                Some(&worker.token),
                b"x".to_vec(),
            );
            let answer = refused(&h, put, "invalid_digest").await;
            assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{bad}");
            let get = request(
                Method::GET,
                &format!("/v1/artifacts/{bad}/content"),
                Some(&worker.token),
                Body::empty(),
            );
            refused(&h, get, "invalid_digest").await;
        }
    }
);

backends!(
    async fn digest_mismatch_keeps_nothing(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let claimed = digest_of(b"other bytes");
        for claimed in [claimed.blake3.to_string(), claimed.sha256.to_string()] {
            let put = request(
                Method::PUT,
                &format!("/v1/blobs/{claimed}"),
                Some(&worker.token),
                b"these bytes".to_vec(),
            );
            let answer = refused(&h, put, "digest_mismatch").await;
            assert_eq!(answer.status, StatusCode::BAD_REQUEST);
        }
    }
);

backends!(
    async fn oversized_bodies_are_cut_on_the_stream(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        // No Content-Length: the limit must hold on the stream itself.
        let chunks = (0..8).map(|_| Ok::<_, std::io::Error>(Bytes::from(vec![7u8; 1024 * 1024])));
        let post = request(
            Method::POST,
            "/v1/blobs",
            Some(&worker.token),
            Body::from_stream(futures::stream::iter(chunks)),
        );
        let answer = refused(&h, post, "body_too_large").await;
        assert_eq!(answer.status, StatusCode::PAYLOAD_TOO_LARGE);
        // A declared length over the limit is refused before reading.
        let declared = Request::builder()
            .method(Method::POST)
            .uri("/v1/blobs")
            .header("authorization", format!("Bearer {}", worker.token))
            .header("content-length", (MAX_UPLOAD + 1).to_string())
            .body(Body::empty())
            .expect("request");
        refused(&h, declared, "body_too_large").await;
        // JSON routes have their own, smaller limit.
        let big = vec![b' '; 2 * 1024 * 1024];
        let post = request(Method::POST, "/v1/artifacts", Some(&worker.token), big);
        refused(&h, post, "body_too_large").await;
    }
);

backends!(
    async fn a_body_that_fails_midway_keeps_nothing(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let chunks: Vec<Result<Bytes, std::io::Error>> = vec![
            Ok(Bytes::from(vec![1u8; 2 * 1024 * 1024])),
            Err(std::io::Error::new(
                std::io::ErrorKind::ConnectionReset,
                "client went away",
            )),
        ];
        let post = request(
            Method::POST,
            "/v1/blobs",
            Some(&worker.token),
            Body::from_stream(futures::stream::iter(chunks)),
        );
        let answer = refused(&h, post, "incomplete_body").await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    }
);

backends!(
    async fn a_stalled_body_times_out(kind: Kind) {
        let h = harness_with(kind, |config| config.body_idle_timeout_secs = 1).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let first = futures::stream::iter([Ok::<_, std::io::Error>(Bytes::from_static(b"start"))]);
        let stalled = first.chain(futures::stream::pending());
        let post = request(
            Method::POST,
            "/v1/blobs",
            Some(&worker.token),
            Body::from_stream(stalled),
        );
        let answer = refused(&h, post, "timeout").await;
        assert_eq!(answer.status, StatusCode::REQUEST_TIMEOUT);
    }
);

backends!(
    async fn the_empty_blob_round_trips(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let id = h.put(&worker, "g1", b"", &[]).await;
        let answer = h
            .call(
                Method::GET,
                &format!("/v1/artifacts/{id}/content"),
                Some(&worker.token),
                Body::empty(),
            )
            .await;
        assert_eq!(answer.status, StatusCode::OK);
        assert!(answer.body.is_empty());
        assert_eq!(answer.headers["content-length"], "0");
        let answer = h
            .call(
                Method::GET,
                &format!("/v1/artifacts/{id}"),
                Some(&worker.token),
                Body::empty(),
            )
            .await;
        assert_eq!(answer.json()["size"], json!(0), "{kind:?}");
    }
);

backends!(
    /// ART-1: immutable and content-addressed; the same bytes are one object, never rewritten.
    async fn same_bytes_twice_and_concurrently_store_one_object(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let bytes = vec![42u8; 3 * 1024 * 1024 + 5];
        let digests = digest_of(&bytes);
        let uri = format!("/v1/blobs/{}", digests.blake3);
        let first = h
            .call(Method::PUT, &uri, Some(&worker.token), bytes.clone())
            .await;
        assert_eq!(first.status, StatusCode::CREATED);
        let second = h
            .call(Method::PUT, &uri, Some(&worker.token), bytes.clone())
            .await;
        assert_eq!(
            second.status,
            StatusCode::OK,
            "already visible to its uploader"
        );
        let other = b"concurrent".repeat(100_000);
        let uploads = (0..8).map(|_| {
            h.call(
                Method::POST,
                "/v1/blobs",
                Some(&worker.token),
                other.clone(),
            )
        });
        for answer in futures::future::join_all(uploads).await {
            assert!(answer.status.is_success(), "{answer:?}");
        }
        h.assert_staging_empty().await;
        let stats = h.stats().await;
        assert_eq!((stats.blobs, stats.blob_objects), (2, 2), "{kind:?}");
    }
);
