//! Bytes that stream while their caller ends (issue #15, LSE-5/LSE-7): bytes of any size may
//! take long (a slow body has no overall deadline), so what may end meanwhile (the capability
//! token, the session) is checked again after them, in the transaction that would record
//! them, and a request whose caller ended while it streamed records nothing: a publication
//! with its bytes, a plain blob upload, a resumable upload's chunk or finish; inline bytes or
//! a file. Each test holds its request part-way on a channel (no sleeps) and asserts the
//! exact code and that nothing changed.

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use serde_json::json;
use weft_api::Envelope;

use super::harness::*;
use super::uploads::start_as;
use super::with_content::{BOUNDARY, bound, content_part, manifest_part, multipart};

/// A request as `bearer`, held part-way: it runs on its own task and has taken content the
/// upload pulls after every check made before the bytes; `finish` sends the rest and
/// answers the status and the problem's code.
struct Held {
    sender: tokio::sync::mpsc::Sender<Result<bytes::Bytes, std::io::Error>>,
    rest: Vec<u8>,
    task: tokio::task::JoinHandle<(StatusCode, bytes::Bytes)>,
}

impl Held {
    /// A publication of `bytes` under `envelope` (`PUT /v1/artifacts/{digest}`).
    async fn start(h: &Harness, bearer: &str, envelope: &Envelope, bytes: &[u8]) -> Self {
        let body = multipart(&[manifest_part(envelope), content_part(bytes)]);
        let uri = format!("/v1/artifacts/{}", digest_of(bytes).blake3);
        let kind = format!("multipart/form-data; boundary={BOUNDARY}");
        Self::request(
            h,
            bearer,
            Method::PUT,
            &uri,
            &[("content-type", &kind)],
            &body,
        )
        .await
    }

    /// A plain upload of `bytes` (`PUT /v1/blobs/{digest}`).
    async fn upload(h: &Harness, bearer: &str, bytes: &[u8]) -> Self {
        let uri = format!("/v1/blobs/{}", digest_of(bytes).blake3);
        let kind = [("content-type", "application/octet-stream")];
        Self::request(h, bearer, Method::PUT, &uri, &kind, bytes).await
    }

    /// `bytes` as the first chunk of the resumable upload at `location` (`PATCH`), or, with
    /// `finish`, as its last chunk (`PUT …?digest=`).
    async fn chunk(h: &Harness, bearer: &str, location: &str, bytes: &[u8], finish: bool) -> Self {
        let range = format!("0-{}", bytes.len() - 1);
        let headers = [("content-range", range.as_str())];
        if finish {
            let uri = format!("{location}?digest={}", digest_of(bytes).blake3);
            Self::request(h, bearer, Method::PUT, &uri, &headers, bytes).await
        } else {
            Self::request(h, bearer, Method::PATCH, location, &headers, bytes).await
        }
    }

    async fn request(
        h: &Harness,
        bearer: &str,
        method: Method,
        uri: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Self {
        let (first, rest) = body.split_at(body.len() / 2);
        let (sender, mut receiver) =
            tokio::sync::mpsc::channel::<Result<bytes::Bytes, std::io::Error>>(1);
        let stream = futures::stream::poll_fn(move |cx| receiver.poll_recv(cx));
        let mut request = Request::builder()
            .method(method)
            .uri(uri)
            .header("authorization", format!("Bearer {bearer}"));
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request
            .body(Body::from_stream(stream))
            .expect("valid request");
        let app = h.app.clone();
        let task = tokio::spawn(async move {
            let response = tower::ServiceExt::oneshot(app, request)
                .await
                .expect("infallible");
            let status = response.status();
            let body = axum::body::to_bytes(response.into_body(), usize::MAX)
                .await
                .unwrap_or_default();
            (status, body)
        });
        // Capacity 1: a send completes only once the handler took the chunk before it. The
        // third chunk is content the upload pulls after every check made before the bytes, so
        // once the fourth send completes, the checks up front are behind the request.
        for chunk in [&first[..1], &first[1..], &rest[..1000], &rest[1000..2000]] {
            sender
                .send(Ok(bytes::Bytes::copy_from_slice(chunk)))
                .await
                .expect("the handler reads");
        }
        Self {
            sender,
            rest: rest[2000..].to_vec(),
            task,
        }
    }

    async fn finish(self) -> (StatusCode, serde_json::Value) {
        self.sender
            .send(Ok(bytes::Bytes::from(self.rest)))
            .await
            .expect("the upload reads on");
        drop(self.sender);
        let (status, answer) = self.task.await.expect("the request finishes");
        let answer: serde_json::Value = serde_json::from_slice(&answer).expect("json");
        (status, answer["code"].clone())
    }
}

impl Held {
    /// Finishes a request whose caller ended while it was held: it must answer 401 with
    /// `code` and leave the store as `before` (`what` names the case).
    async fn refused(
        self,
        h: &Harness,
        before: &weft_storage::Fingerprint,
        code: &str,
        what: &str,
    ) {
        assert_eq!(
            self.finish().await,
            (StatusCode::UNAUTHORIZED, json!(code)),
            "{what}"
        );
        assert_unchanged(before, &h.fingerprint().await, what);
    }
}

/// The store's fingerprint while a held upload's bytes are staged: afterwards nothing of
/// them may be left.
async fn fingerprint_while_held(h: &Harness) -> weft_storage::Fingerprint {
    let mut before = h.store.fingerprint().await.expect("fingerprint");
    before.staging_objects = 0;
    before
}

/// Bytes stored inline (under the default 64 KiB threshold) and bytes that go to a file.
const SIZES: [u32; 2] = [20_000, 300_000];

/// A capability token on `worker`'s lease of `work-1` (which `bound` set up) with `scope`:
/// the token, its id and the lease.
async fn token(h: &Harness, worker: &Agent, scope: &[&str]) -> (String, String, String) {
    let view = h.get_json(worker, "/v1/workitems/work-1").await;
    let lease = view["lease"]["leaseId"]
        .as_str()
        .expect("a lease")
        .to_owned();
    let issued = super::tokens::issue(h, worker, &lease, scope, 600).await;
    let field = |name: &str| issued[name].as_str().expect(name).to_owned();
    (field("token"), field("tokenId"), lease)
}

/// Revokes the token `token_id` on `lease` as its owner.
async fn revoke(h: &Harness, worker: &Agent, lease: &str, token_id: &str) {
    let revoked = h
        .call(
            Method::DELETE,
            &format!("/v1/leases/{lease}/tokens/{token_id}"),
            Some(&worker.token),
            Body::empty(),
        )
        .await;
    assert_eq!(revoked.status, StatusCode::NO_CONTENT, "{revoked:?}");
}

/// What is held: a publication with its bytes (`PUT /v1/artifacts/{digest}`, as `bound`
/// sets it up) or a plain upload (`PUT /v1/blobs/{digest}`).
const REQUESTS: [&str; 2] = ["publication", "upload"];

impl Held {
    /// `what` (one of [`REQUESTS`]) of `bytes` as `bearer`, `envelope` being the publication's.
    async fn of(what: &str, h: &Harness, bearer: &str, envelope: &Envelope, bytes: &[u8]) -> Self {
        if what == "publication" {
            Self::start(h, bearer, envelope, bytes).await
        } else {
            Self::upload(h, bearer, bytes).await
        }
    }
}

backends!(
    /// Bytes may take long: the capability token they are sent under is checked again after
    /// them, so one revoked while they streamed records nothing (LSE-7), though the lease,
    /// the session and the manifest are all still good: no publication, no blob row, no
    /// uploader row, nothing counted against the lease owner; inline bytes or a file. The
    /// review of stop 31 found the inline publication and both uploads recorded.
    async fn a_token_revoked_while_the_bytes_stream_records_nothing(kind: Kind) {
        for what in REQUESTS {
            for size in SIZES {
                let h = harness(kind).await;
                let worker = h.agent("w1", "g1", &["worker"]).await;
                let bytes: Vec<u8> = (0..size).map(|i| (i % 241) as u8).collect();
                let envelope = bound(&h, &worker, &bytes).await;
                let (token, token_id, lease) =
                    token(&h, &worker, &["blob:write", "artifact:publish"]).await;
                let held = Held::of(what, &h, &token, &envelope, &bytes).await;
                revoke(&h, &worker, &lease, &token_id).await;
                let before = fingerprint_while_held(&h).await;
                let case = format!("a revoked token's {what} of {size} bytes");
                held.refused(&h, &before, "unauthorized", &case).await;
            }
        }
    }
);

backends!(
    /// The same for a session: one replaced by a newer session while the bytes streamed
    /// answers `stale_session` from the check after the bytes (without it a publication's
    /// transaction would answer `stale_lease`: the replaced session's lease ended, LSE-9), and
    /// records nothing, inline bytes or a file.
    async fn a_session_replaced_while_the_bytes_stream_records_nothing(kind: Kind) {
        for what in REQUESTS {
            for size in SIZES {
                let h = harness(kind).await;
                let worker = h.agent("w1", "g1", &["worker"]).await;
                let bytes: Vec<u8> = (0..size).map(|i| (i % 239) as u8).collect();
                let envelope = bound(&h, &worker, &bytes).await;
                let held = Held::of(what, &h, &worker.token, &envelope, &bytes).await;
                h.session(&worker.key, "w1", "g1").await;
                let before = fingerprint_while_held(&h).await;
                let case = format!("a replaced session's {what} of {size} bytes");
                held.refused(&h, &before, "stale_session", &case).await;
            }
        }
    }
);

backends!(
    /// A resumable upload under a capability token: a chunk, or the finish's last chunk,
    /// that streamed while the token was revoked records nothing (LSE-7): the offset stays,
    /// no blob. The review of stop 31 found the chunk's offset moved and the finish recorded.
    async fn a_token_revoked_while_a_resumable_chunk_streams_records_nothing(kind: Kind) {
        for finish in [false, true] {
            let h = harness(kind).await;
            let worker = h.agent("w1", "g1", &["worker"]).await;
            let bytes: Vec<u8> = (0..20_000u32).map(|i| (i % 227) as u8).collect();
            bound(&h, &worker, &bytes).await;
            let (token, token_id, lease) = token(&h, &worker, &["blob:write"]).await;
            let location = start_as(&h, &token).await;
            // The upload's object as before the chunk: while held it holds part of it, which
            // a refused chunk cuts back.
            let listing = h.fingerprint().await.blob_listing;
            let held = Held::chunk(&h, &token, &location, &bytes, finish).await;
            revoke(&h, &worker, &lease, &token_id).await;
            let mut before = fingerprint_while_held(&h).await;
            before.blob_listing = listing;
            held.refused(
                &h,
                &before,
                "unauthorized",
                &format!("a revoked token's resumable chunk (finish: {finish})"),
            )
            .await;
        }
    }
);

backends!(
    /// Another Group's session that knows an upload's id learns nothing from a finish or a
    /// cancel while the owner's chunk is streaming: `not_found`, as for an idle upload or none
    /// (the review of stop 31 found `conflict`, the owner's claim, answered first), and the
    /// owner's chunk goes on.
    async fn another_groups_finish_or_cancel_of_a_busy_upload_is_not_found(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let stranger = h.agent("w2", "g2", &["worker"]).await;
        let bytes: Vec<u8> = (0..20_000u32).map(|i| (i % 223) as u8).collect();
        let location = start_as(&h, &worker.token).await;
        let held = Held::chunk(&h, &worker.token, &location, &bytes, false).await;
        let finish = format!("{location}?digest={}", digest_of(&bytes).blake3);
        for (method, uri) in [(Method::PUT, finish.as_str()), (Method::DELETE, &location)] {
            let request = Request::builder()
                .method(method.clone())
                .uri(uri)
                .header("authorization", format!("Bearer {}", stranger.token))
                .header("content-length", "0")
                .body(Body::empty())
                .expect("valid request");
            let answer = h.send(request).await;
            assert_eq!(answer.status, StatusCode::NOT_FOUND, "{method} {answer:?}");
            assert_eq!(answer.json()["code"], "not_found", "{method}");
        }
        let (status, _) = held.finish().await;
        assert_eq!(status, StatusCode::ACCEPTED, "the owner's chunk");
    }
);

backends!(
    /// LSE-7 in the storage's own transactions: a resumable upload's start, its cancel and the
    /// discard after a wrong digest check there that the caller is still live, so a session
    /// replaced after it was let in starts, cancels and discards nothing (`stale_session`,
    /// every table and object unchanged). The routes refuse a replaced session at the door
    /// first; here a caller of the storage holds the replaced session's `Session`.
    async fn a_replaced_session_starts_cancels_and_discards_no_resumable_upload(kind: Kind) {
        use weft_api::{ArtifactId, Digest, ErrorCode};
        use weft_storage::Uploader;

        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let old = h
            .store
            .sessions()
            .authenticate(&worker.token)
            .await
            .expect("live");
        let as_old = || Uploader::Agent(&old);
        let started = h
            .store
            .artifacts()
            .start_upload(as_old())
            .await
            .expect("starts");
        let id = started.upload_id;
        let chunk: Vec<u8> = (0..20_000u32).map(|i| (i % 211) as u8).collect();
        let chunk = futures::stream::iter([Ok(bytes::Bytes::from(chunk))]);
        let moved = h
            .store
            .artifacts()
            .append_upload(&id, 0, chunk, as_old())
            .await;
        assert_eq!(moved.expect("a chunk").offset, 20_000);
        h.session(&worker.key, "w1", "g1").await; // replaces `old`
        let before = h.fingerprint().await;
        let code = |error: weft_storage::Error| error.code();
        assert_eq!(
            h.store
                .artifacts()
                .start_upload(as_old())
                .await
                .map_err(code)
                .err(),
            Some(ErrorCode::StaleSession),
            "start"
        );
        assert_eq!(
            h.store
                .artifacts()
                .cancel_upload(&id, as_old())
                .await
                .map_err(code)
                .err(),
            Some(ErrorCode::StaleSession),
            "cancel"
        );
        let wrong = Digest::Blake3(ArtifactId([0; 32]));
        let none = None::<(
            u64,
            futures::stream::Empty<Result<bytes::Bytes, std::io::Error>>,
        )>;
        assert_eq!(
            h.store
                .artifacts()
                .finish_upload(&id, wrong, none, as_old())
                .await
                .map(|_| ())
                .map_err(code)
                .err(),
            Some(ErrorCode::StaleSession),
            "the discard after a wrong digest"
        );
        assert_unchanged(
            &before,
            &h.fingerprint().await,
            "a replaced session's resumable calls",
        );
    }
);
