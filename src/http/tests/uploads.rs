//! Resumable uploads (issue #16): chunks in order then a finish store the same blob as a
//! one-shot upload; a chunk at the wrong offset is refused with the current offset; the offset
//! survives a restart; a wrong digest discards the session; nobody else can see or touch a
//! session; idle sessions are swept; the size limit applies to the total.
//! It is a little over 600 lines long because every refusal is spelled out, on both backends.

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};

use super::harness::*;

/// A request on an upload session as `token`, with extra headers.
pub(super) fn on_upload(
    method: Method,
    uri: &str,
    token: &str,
    headers: &[(&str, String)],
    body: impl Into<Body>,
) -> Request<Body> {
    let mut request = Request::builder()
        .method(method)
        .uri(uri)
        .header("authorization", format!("Bearer {token}"));
    for (name, value) in headers {
        request = request.header(*name, value.as_str());
    }
    request.body(body.into()).expect("valid request")
}

/// `PATCH` of `bytes` at `start`, with `Content-Range`.
pub(super) fn chunk(location: &str, token: &str, start: u64, bytes: &[u8]) -> Request<Body> {
    let end = start + bytes.len() as u64 - 1;
    on_upload(
        Method::PATCH,
        location,
        token,
        &[("content-range", format!("{start}-{end}"))],
        bytes.to_vec(),
    )
}

/// Starts a session as `agent`; its `Location`.
async fn start(h: &Harness, agent: &Agent) -> String {
    start_as(h, &agent.token).await
}

/// Starts a session with the bearer `token` (a session's or a capability token); its
/// `Location`.
pub(super) async fn start_as(h: &Harness, token: &str) -> String {
    let answer = h
        .send(on_upload(
            Method::POST,
            "/v1/uploads",
            token,
            &[],
            Body::empty(),
        ))
        .await;
    assert_eq!(answer.status, StatusCode::ACCEPTED, "{answer:?}");
    assert_eq!(answer.headers["upload-offset"], "0");
    assert_eq!(answer.headers["range"], "0-0");
    let location = answer.headers["location"]
        .to_str()
        .expect("ascii")
        .to_owned();
    assert_eq!(
        location,
        format!(
            "/v1/uploads/{}",
            answer.json()["uploadId"].as_str().expect("id")
        )
    );
    location
}

/// The durable offset HEAD answers.
pub(super) async fn offset(h: &Harness, location: &str, token: &str) -> u64 {
    let answer = h
        .send(on_upload(Method::HEAD, location, token, &[], Body::empty()))
        .await;
    assert_eq!(answer.status, StatusCode::NO_CONTENT, "{answer:?}");
    answer.headers["upload-offset"]
        .to_str()
        .expect("ascii")
        .parse()
        .expect("integer")
}

/// Sends `bytes` in chunks of `size` from `from`; each answer names the new offset.
pub(super) async fn send_chunks(
    h: &Harness,
    location: &str,
    token: &str,
    bytes: &[u8],
    from: usize,
    size: usize,
) {
    let mut at = from;
    while at < bytes.len() {
        let end = (at + size).min(bytes.len());
        let answer = h
            .send(chunk(location, token, at as u64, &bytes[at..end]))
            .await;
        assert_eq!(answer.status, StatusCode::ACCEPTED, "{answer:?}");
        assert_eq!(answer.json()["offset"], end as u64);
        assert_eq!(answer.headers["range"], format!("0-{}", end - 1).as_str());
        at = end;
    }
}

pub(super) fn finish(location: &str, token: &str, digest: &str) -> Request<Body> {
    on_upload(
        Method::PUT,
        &format!("{location}?digest={digest}"),
        token,
        &[("content-length", "0".to_owned())],
        Body::empty(),
    )
}

/// Bytes that differ at every position, so a misplaced chunk changes the digest.
fn sample(size: usize) -> Vec<u8> {
    (0..size).map(|i| (i * 131 % 251) as u8).collect()
}

backends!(
    /// Chunks in order, then a finish: the same blob, digests and uploader record as a one-shot
    /// upload (the one-shot upload of the same bytes afterwards answers "already yours").
    async fn chunks_in_order_then_finish_store_the_blob(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        // Sizes: an empty session, one byte, and several uneven chunks across a hash batch.
        for size in [0usize, 1, 1024 * 1024 + 4097] {
            let bytes = sample(size);
            let location = start(&h, &worker).await;
            send_chunks(&h, &location, &worker.token, &bytes, 0, 300_001).await;
            assert_eq!(offset(&h, &location, &worker.token).await, size as u64);
            let digests = digest_of(&bytes);
            let answer = h
                .send(finish(
                    &location,
                    &worker.token,
                    &digests.blake3.to_string(),
                ))
                .await;
            assert_eq!(answer.status, StatusCode::CREATED, "{size}: {answer:?}");
            assert_eq!(answer.json()["blake3"], digests.blake3.to_string());
            assert_eq!(answer.json()["sha256"], digests.sha256.to_string());
            assert_eq!(answer.json()["size"], size as u64);
            assert_eq!(
                answer.headers["location"],
                format!("/v1/blobs/{}", digests.blake3).as_str()
            );
            // The session is gone; the blob is the uploader's, as after a one-shot upload.
            let head = h
                .send(on_upload(
                    Method::HEAD,
                    &location,
                    &worker.token,
                    &[],
                    Body::empty(),
                ))
                .await;
            assert_eq!(head.status, StatusCode::NOT_FOUND);
            let again = h
                .call(
                    Method::PUT,
                    &format!("/v1/blobs/{}", digests.blake3),
                    Some(&worker.token),
                    bytes.clone(),
                )
                .await;
            assert_eq!(
                again.status,
                StatusCode::OK,
                "already visible to its uploader"
            );
            if kind == Kind::Disk {
                assert_eq!(
                    std::fs::read(h.blob_file(&digests.blake3)).expect("blob file"),
                    bytes
                );
                // Issue #15: a resumed blob of 1 MiB or more has its outboard at once, built
                // by the finish's re-hash, like a one-shot upload's.
                let outboard = h.dir.path().join("outboards").join(digests.blake3.hex());
                assert_eq!(outboard.exists(), size >= 1024 * 1024, "{size}");
            }
        }
        if kind == Kind::Disk {
            let left = std::fs::read_dir(h.dir.path().join("uploads"))
                .expect("uploads dir")
                .count();
            assert_eq!(left, 0, "finished sessions leave no object");
        }
    }
);

backends!(
    /// A last chunk may come with the finish, at the offset (`Content-Range`) or without a
    /// range (where the upload stands); by sha256 too.
    async fn a_last_chunk_comes_with_the_finish(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let bytes = sample(5000);
        for with_range in [true, false] {
            let location = start(&h, &worker).await;
            send_chunks(&h, &location, &worker.token, &bytes[..3000], 0, 1000).await;
            let digests = digest_of(&bytes);
            let headers = if with_range {
                vec![("content-range", "3000-4999".to_owned())]
            } else {
                vec![]
            };
            let put = on_upload(
                Method::PUT,
                &format!("{location}?digest={}", digests.sha256),
                &worker.token,
                &headers,
                bytes[3000..].to_vec(),
            );
            let answer = h.send(put).await;
            assert!(answer.status.is_success(), "{answer:?}");
            assert_eq!(answer.json()["blake3"], digests.blake3.to_string());
        }
    }
);

backends!(
    /// A chunk that does not start at the durable offset is refused (416, with the offset in
    /// `Upload-Offset` and `Range`) and changes nothing, the staged bytes included.
    async fn a_chunk_at_the_wrong_offset_is_refused(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let bytes = sample(3000);
        let location = start(&h, &worker).await;
        send_chunks(&h, &location, &worker.token, &bytes[..1000], 0, 1000).await;
        for start_at in [0u64, 999, 1001, 5000] {
            let answer = refused(
                &h,
                chunk(&location, &worker.token, start_at, &bytes[1000..2000]),
                "upload_offset_mismatch",
            )
            .await;
            assert_eq!(answer.status, StatusCode::RANGE_NOT_SATISFIABLE);
            assert_eq!(answer.headers["upload-offset"], "1000", "{start_at}");
            assert_eq!(answer.headers["range"], "0-999");
        }
        // With Upload-Offset instead of Content-Range, and as a last chunk of the finish.
        let by_offset = on_upload(
            Method::PATCH,
            &location,
            &worker.token,
            &[("upload-offset", "7".to_owned())],
            b"abc".to_vec(),
        );
        refused(&h, by_offset, "upload_offset_mismatch").await;
        let digest = digest_of(&bytes).blake3;
        let last = on_upload(
            Method::PUT,
            &format!("{location}?digest={digest}"),
            &worker.token,
            &[("content-range", "0-1999".to_owned())],
            bytes[..2000].to_vec(),
        );
        refused(&h, last, "upload_offset_mismatch").await;
        // Malformed or missing ranges, and a body shorter or longer than its range.
        for bad in ["", "abc", "5-4", "-1-3", "1000-"] {
            let patch = on_upload(
                Method::PATCH,
                &location,
                &worker.token,
                &[("content-range", bad.to_owned())],
                b"x".to_vec(),
            );
            refused(&h, patch, "bad_request").await;
        }
        let bare = on_upload(Method::PATCH, &location, &worker.token, &[], b"x".to_vec());
        refused(&h, bare, "bad_request").await;
        for body in [&bytes[1000..1500], &bytes[1000..2500]] {
            let wrong_length = on_upload(
                Method::PATCH,
                &location,
                &worker.token,
                &[("content-range", "1000-1999".to_owned())],
                body.to_vec(),
            );
            refused(&h, wrong_length, "incomplete_body").await;
        }
        assert_eq!(offset(&h, &location, &worker.token).await, 1000);
        send_chunks(&h, &location, &worker.token, &bytes, 1000, 1000).await;
        let answer = h
            .send(finish(&location, &worker.token, &digest.to_string()))
            .await;
        assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    }
);

/// After a restart HEAD answers the durable offset and the upload finishes; a tail a crash
/// left past the durable offset is cut off by the next chunk.
#[tokio::test]
async fn the_offset_survives_a_restart() {
    let h = harness(Kind::Disk).await;
    let worker = h.agent("w1", "g1", &["worker"]).await;
    let bytes = sample(200_000);
    let location = start(&h, &worker).await;
    send_chunks(&h, &location, &worker.token, &bytes[..120_000], 0, 60_000).await;
    let id = location.rsplit('/').next().expect("id").to_owned();
    let h = restart(h).await;
    assert_eq!(offset(&h, &location, &worker.token).await, 120_000);
    // A crash mid-chunk: bytes written past the recorded offset but never acknowledged.
    let object = h.dir.path().join("uploads").join(&id);
    let mut staged = std::fs::read(&object).expect("staged object");
    staged.extend_from_slice(b"torn chunk");
    std::fs::write(&object, &staged).expect("write");
    assert_eq!(offset(&h, &location, &worker.token).await, 120_000);
    send_chunks(&h, &location, &worker.token, &bytes, 120_000, 50_000).await;
    let digests = digest_of(&bytes);
    let answer = h
        .send(finish(
            &location,
            &worker.token,
            &digests.blake3.to_string(),
        ))
        .await;
    assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    assert_eq!(
        std::fs::read(h.blob_file(&digests.blake3)).expect("blob"),
        bytes
    );
}

/// An object under `uploads/` that no session names (a crash between a row's removal and its
/// file's) is removed at start; a session's object is kept.
#[tokio::test]
async fn start_up_removes_upload_objects_without_a_session() {
    let h = harness(Kind::Disk).await;
    let worker = h.agent("w1", "g1", &["worker"]).await;
    let location = start(&h, &worker).await;
    send_chunks(&h, &location, &worker.token, b"kept", 0, 4).await;
    let stray = h.dir.path().join("uploads").join("up-stray");
    std::fs::write(&stray, b"left over").expect("write");
    let h = restart(h).await;
    assert!(!stray.exists());
    assert_eq!(offset(&h, &location, &worker.token).await, 4);
}

backends!(
    /// A finish whose digest does not match keeps nothing: the session and its bytes go, and
    /// the store is as before the session started.
    async fn a_wrong_digest_at_the_finish_keeps_nothing(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let before = h.fingerprint().await;
        let location = start(&h, &worker).await;
        send_chunks(&h, &location, &worker.token, &sample(4000), 0, 1500).await;
        let other = digest_of(b"something else").blake3;
        let answer = h
            .send(finish(&location, &worker.token, &other.to_string()))
            .await;
        assert_eq!(answer.code(), "digest_mismatch", "{answer:?}");
        assert_eq!(answer.status, StatusCode::BAD_REQUEST);
        assert_unchanged(&before, &h.fingerprint().await, "a mismatched finish");
        let head = h
            .send(on_upload(
                Method::HEAD,
                &location,
                &worker.token,
                &[],
                Body::empty(),
            ))
            .await;
        assert_eq!(head.status, StatusCode::NOT_FOUND);
        // A malformed or missing digest is refused before anything is read.
        let location = start(&h, &worker).await;
        refused(
            &h,
            finish(&location, &worker.token, "blake3:00"),
            "invalid_digest",
        )
        .await;
        let bare = on_upload(Method::PUT, &location, &worker.token, &[], Body::empty());
        refused(&h, bare, "bad_request").await;
    }
);

backends!(
    /// Only the Agent and Group that started a session see it: another Agent of the Group,
    /// the same Agent in another Group, and unknown ids all get `not_found`; the operator and
    /// an auditor may not start one.
    async fn nobody_else_sees_or_touches_a_session(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let colleague = h.agent("w2", "g1", &["worker"]).await;
        let elsewhere = h.join(&worker, "g2", &["worker"]).await;
        let location = start(&h, &worker).await;
        send_chunks(&h, &location, &worker.token, b"mine", 0, 4).await;
        let digest = digest_of(b"mine").blake3.to_string();
        for token in [&colleague.token, &elsewhere.token] {
            let head = h
                .send(on_upload(
                    Method::HEAD,
                    &location,
                    token,
                    &[],
                    Body::empty(),
                ))
                .await;
            assert_eq!(
                head.status,
                StatusCode::NOT_FOUND,
                "a HEAD answers without a body"
            );
            refused(&h, chunk(&location, token, 4, b"theirs"), "not_found").await;
            let malformed = on_upload(
                Method::PATCH,
                &location,
                token,
                &[("content-range", String::new())],
                b"x".to_vec(),
            );
            refused(&h, malformed, "not_found").await;
            refused(&h, finish(&location, token, &digest), "not_found").await;
            refused(
                &h,
                on_upload(Method::DELETE, &location, token, &[], Body::empty()),
                "not_found",
            )
            .await;
        }
        let unknown = "/v1/uploads/up-00000000000000000000000000000000";
        let before = h.fingerprint().await;
        refused(
            &h,
            on_upload(
                Method::PATCH,
                unknown,
                &worker.token,
                &[("upload-offset", "0".to_owned())],
                Body::empty(),
            ),
            "not_found",
        )
        .await;
        let head = h
            .send(on_upload(
                Method::HEAD,
                unknown,
                &worker.token,
                &[],
                Body::empty(),
            ))
            .await;
        assert_eq!(head.status, StatusCode::NOT_FOUND);
        assert_unchanged(&before, &h.fingerprint().await, "HEAD of others' sessions");
        refused(
            &h,
            on_upload(Method::POST, "/v1/uploads", ADMIN, &[], Body::empty()),
            "forbidden",
        )
        .await;
        let auditor = h.agent("a1", "g1", &["auditor"]).await;
        refused(
            &h,
            on_upload(
                Method::POST,
                "/v1/uploads",
                &auditor.token,
                &[],
                Body::empty(),
            ),
            "forbidden",
        )
        .await;
        assert_eq!(offset(&h, &location, &worker.token).await, 4);
    }
);

backends!(
    /// DELETE cancels: the session and its bytes go.
    async fn delete_cancels_a_session(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let before = h.fingerprint().await;
        let location = start(&h, &worker).await;
        send_chunks(&h, &location, &worker.token, &sample(2000), 0, 700).await;
        let answer = h
            .send(on_upload(
                Method::DELETE,
                &location,
                &worker.token,
                &[],
                Body::empty(),
            ))
            .await;
        assert_eq!(answer.status, StatusCode::NO_CONTENT, "{answer:?}");
        assert_unchanged(&before, &h.fingerprint().await, "a cancelled session");
    }
);

backends!(
    /// A session idle past the unpublished-blob TTL is swept with its bytes; a session that
    /// received a chunk recently is kept.
    async fn idle_sessions_are_swept(kind: Kind) {
        let h = harness(kind).await;
        let mut worker = h.agent("w1", "g1", &["worker"]).await;
        let before = h.fingerprint().await;
        let idle = start(&h, &worker).await;
        send_chunks(&h, &idle, &worker.token, &sample(3000), 0, 1000).await;
        h.clock.advance(chrono::Duration::hours(23));
        worker.token = h.session(&worker.key, "w1", "g1").await; // 12 h sessions
        let busy = start(&h, &worker).await;
        h.clock.advance(chrono::Duration::hours(2));
        let report = h.store.artifacts().sweep().await.expect("sweep");
        assert_eq!(report.upload_sessions_removed, 1, "{report:?}");
        let head = h
            .send(on_upload(
                Method::HEAD,
                &idle,
                &worker.token,
                &[],
                Body::empty(),
            ))
            .await;
        assert_eq!(head.status, StatusCode::NOT_FOUND);
        assert_eq!(offset(&h, &busy, &worker.token).await, 0);
        let cancel = h
            .send(on_upload(
                Method::DELETE,
                &busy,
                &worker.token,
                &[],
                Body::empty(),
            ))
            .await;
        assert_eq!(cancel.status, StatusCode::NO_CONTENT);
        // The new session token left rows and an Event; the upload left nothing.
        let after = h.fingerprint().await;
        assert_eq!(
            after.tables["upload_sessions"],
            before.tables["upload_sessions"]
        );
        assert_eq!(
            after.blob_listing, before.blob_listing,
            "no upload object left"
        );
    }
);

backends!(
    /// `--max-upload-bytes` applies to the whole upload, not to each chunk: a chunk that would
    /// carry the total past it is refused, declared or not, and changes nothing.
    async fn the_size_limit_applies_to_the_total(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let location = start(&h, &worker).await;
        let half = (MAX_UPLOAD / 2) as usize;
        let bytes = sample(half + 1);
        send_chunks(&h, &location, &worker.token, &bytes, 0, half + 1).await;
        // Declared: refused before a byte is read.
        let declared = chunk(&location, &worker.token, half as u64 + 1, &bytes[..half]);
        let answer = refused(&h, declared, "body_too_large").await;
        assert_eq!(answer.status, StatusCode::PAYLOAD_TOO_LARGE);
        // Undeclared: refused on the stream, the partial chunk cut back.
        let undeclared = on_upload(
            Method::PATCH,
            &location,
            &worker.token,
            &[("upload-offset", (half + 1).to_string())],
            bytes[..half].to_vec(),
        );
        refused(&h, undeclared, "body_too_large").await;
        assert_eq!(offset(&h, &location, &worker.token).await, half as u64 + 1);
        // Exactly at the limit is fine.
        let rest = sample(half - 1);
        send_chunks(
            &h,
            &location,
            &worker.token,
            &[bytes.clone(), rest].concat(),
            half + 1,
            half,
        )
        .await;
        assert_eq!(offset(&h, &location, &worker.token).await, MAX_UPLOAD);
    }
);

backends!(
    /// Issue #40: a finish whose last chunk was made durable but whose answer was lost can be
    /// re-sent as it was: the chunk ends exactly at the durable offset and holds the durable
    /// tail, so the finish stores the blob. A different tail there is still 416
    /// `upload_offset_mismatch` with nothing changed.
    async fn a_cut_off_finish_can_be_sent_again(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let bytes = sample(3000);
        let location = start(&h, &worker).await;
        // The whole upload durable, its last chunk included, as after a finish cut off.
        send_chunks(&h, &location, &worker.token, &bytes, 0, 1000).await;
        let digest = digest_of(&bytes).blake3;
        let last_chunk = |tail: &[u8]| {
            on_upload(
                Method::PUT,
                &format!("{location}?digest={digest}"),
                &worker.token,
                &[("content-range", "2000-2999".to_owned())],
                tail.to_vec(),
            )
        };
        let mut other = bytes[2000..].to_vec();
        other[500] ^= 1;
        let answer = refused(&h, last_chunk(&other), "upload_offset_mismatch").await;
        assert_eq!(answer.headers["upload-offset"], "3000");
        let answer = h.send(last_chunk(&bytes[2000..])).await;
        assert!(answer.status.is_success(), "{answer:?}");
        assert_eq!(answer.json()["blake3"], digest.to_string(), "{answer:?}");
    }
);
