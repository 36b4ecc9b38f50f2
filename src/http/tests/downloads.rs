//! Downloads of stored files (stop 37): the slots an Agent and a Group may hold, what takes
//! one and what does not, and, end to end over a real socket, an HTTP/2 client that opens a
//! download and never opens its stream's flow-control window. That stalls nothing on the
//! connection, so the accept loop's write timeout never fires; the download's watcher
//! (`storage/src/downloads.rs`) cuts the body once its client has taken nothing for the idle
//! timeout, and its slot comes back. That test runs in real time, about one second: the idle
//! timeout is counted in whole seconds (the watcher's own tests use a paused clock).

use std::time::Duration;

use axum::body::Body;
use axum::http::{Method, StatusCode};
use tower::ServiceExt as _;

use super::harness::*;

#[tokio::test]
async fn a_stalled_http2_download_is_cut_and_gives_its_slot_back() {
    let h = harness_with(Kind::Disk, |config| {
        config.max_upload_bytes = 64 * 1024 * 1024;
        config.max_downloads_per_agent = 1;
        config.body_idle_timeout_secs = 1;
    })
    .await;
    let worker = h.agent("w1", "g1", &["worker"]).await;
    let large: Vec<u8> = (0..16 * 1024 * 1024u32).map(|i| (i % 251) as u8).collect();
    let file = h.put(&worker, "g1", &large, &[]).await;

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(crate::serve::serve(
        listener,
        h.app.clone(),
        Duration::from_secs(10),
        Duration::from_secs(1),
        async move {
            let _ = stopped.await;
        },
    ));
    // One connection, HTTP/2 from the first byte, and a 64 KiB stream window that this
    // client opens further only as the body is read.
    let client = reqwest::Client::builder()
        .http2_prior_knowledge()
        .http2_initial_stream_window_size(65_535)
        .build()
        .expect("client");
    let url = format!("http://{address}/v1/artifacts/{file}/content");
    let get = || client.get(&url).bearer_auth(&worker.token).send();

    let stalled = get().await.expect("answered");
    assert_eq!(stalled.status(), reqwest::StatusCode::OK);
    assert_eq!(stalled.version(), reqwest::Version::HTTP_2);
    let refused = get().await.expect("answered");
    assert_eq!(
        refused.status(),
        reqwest::StatusCode::TOO_MANY_REQUESTS,
        "the one slot is held by the stalled stream"
    );

    // Within a few idle timeouts the stalled body is cut and the slot is back: the same
    // Agent, on the same connection, reads the whole file.
    let mut whole = None;
    for _ in 0..40 {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let answer = get().await.expect("answered");
        if answer.status() == reqwest::StatusCode::OK {
            whole = Some(answer.bytes().await.expect("the whole body"));
            break;
        }
        assert_eq!(answer.status(), reqwest::StatusCode::TOO_MANY_REQUESTS);
    }
    let whole = whole.expect("the slot came back within 10 s");
    assert!(whole[..] == large[..], "the second read is whole and right");
    // The stalled answer never completes as if whole: reading it on ends in an error.
    let rest = stalled.bytes().await;
    assert!(rest.is_err(), "a cut body is not a short success");

    let _ = stop.send(());
    assert!(server.await.expect("joins").expect("serves"));
}

backends!(
    /// Stop 37: a download of a stored file holds one slot of its Agent and of its Group
    /// while its body lives, so bodies kept open and never read (an HTTP/2 client can stall
    /// many streams without stalling its socket) pin a bounded number of files and
    /// read-ahead windows (the body is also cut once unpolled for the idle timeout,
    /// `storage/src/downloads.rs`). Past a cap: 429 `too_many_downloads` with Retry-After,
    /// nothing changed. Another Agent, a small artifact answered from memory, a HEAD, a 304
    /// and a refused Range take no slot; a body read to its end and a dropped body give theirs
    /// back; an artifact the caller may not see still answers 404, so the cap tells nobody
    /// what exists elsewhere.
    async fn open_downloads_of_stored_files_are_capped_per_agent_and_group(kind: Kind) {
        let h = harness_with(kind, |config| {
            config.max_downloads_per_agent = 2;
            config.max_downloads_per_group = 3;
        })
        .await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let colleague = h.agent("w2", "g1", &["worker"]).await;
        let third = h.agent("w3", "g1", &["worker"]).await;
        let outsider = h.agent("o1", "g2", &["worker"]).await;
        let large: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        let file = h.put(&worker, "g1", &large, &[]).await;
        let small = h.put(&worker, "g1", b"a small result", &[]).await;
        let elsewhere = b"another group's bytes, file-sized".repeat(4096);
        let elsewhere = h.put(&outsider, "g2", &elsewhere, &[]).await;
        let get = |agent: &Agent, id: &weft_api::ArtifactId, header: Option<(&str, String)>| {
            let mut request = request(
                Method::GET,
                &format!("/v1/artifacts/{id}/content"),
                Some(&agent.token),
                Body::empty(),
            );
            if let Some((name, value)) = header {
                let name = axum::http::HeaderName::from_bytes(name.as_bytes()).expect("name");
                request
                    .headers_mut()
                    .insert(name, value.parse().expect("value"));
            }
            request
        };
        let open = |agent: &Agent, id: &weft_api::ArtifactId| {
            let (app, request) = (h.app.clone(), get(agent, id, None));
            async move { app.oneshot(request).await.expect("infallible") }
        };
        let first = open(&worker, &file).await;
        let second = open(&worker, &file).await;
        assert_eq!(
            (first.status(), second.status()),
            (StatusCode::OK, StatusCode::OK)
        );

        let before = h.fingerprint().await;
        let answer = h.send(get(&worker, &file, None)).await;
        assert_eq!(answer.code(), "too_many_downloads", "{answer:?}");
        assert_eq!(answer.status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(answer.headers["retry-after"], "1");
        let answer = h.send(get(&worker, &small, None)).await;
        assert_eq!(
            (answer.status, &answer.body[..]),
            (StatusCode::OK, &b"a small result"[..])
        );
        let mut head = get(&worker, &file, None);
        *head.method_mut() = Method::HEAD;
        assert_eq!(
            h.send(head).await.status,
            StatusCode::OK,
            "a HEAD reads nothing"
        );
        let head = request(
            Method::HEAD,
            &format!("/v1/artifacts/{file}/content?proof=bao"),
            Some(&worker.token),
            Body::empty(),
        );
        let answer = h.send(head).await;
        assert_eq!(answer.status, StatusCode::OK, "nor does a HEAD of a proof");
        assert_eq!(answer.headers["content-type"], weft_api::bao::MEDIA_TYPE);
        let etag = Some(("if-none-match", format!("\"{file}\"")));
        let answer = h.send(get(&worker, &file, etag)).await;
        assert_eq!(answer.status, StatusCode::NOT_MODIFIED);
        let beyond = Some(("range", "bytes=400000-400001".to_owned()));
        let answer = h.send(get(&worker, &file, beyond)).await;
        assert_eq!(answer.code(), "invalid_range");
        let answer = h.send(get(&worker, &elsewhere, None)).await;
        assert_eq!(
            answer.code(),
            "not_found",
            "not visible: the cap is not reached first"
        );
        let nowhere = weft_api::ArtifactId::of(b"bytes nobody stored");
        let answer = h.send(get(&worker, &nowhere, None)).await;
        assert_eq!(answer.code(), "not_found");
        // The Group's third slot, then its cap.
        let held = open(&colleague, &file).await;
        assert_eq!(held.status(), StatusCode::OK);
        let answer = h.send(get(&third, &file, None)).await;
        assert_eq!(
            answer.code(),
            "too_many_downloads",
            "the Group's cap: {answer:?}"
        );
        let answer = h.send(get(&outsider, &elsewhere, None)).await;
        assert_eq!(
            answer.status,
            StatusCode::OK,
            "another Group is not held up"
        );
        assert_unchanged(&before, &h.fingerprint().await, "too_many_downloads");

        drop((first, held));
        let answer = h.send(get(&worker, &file, None)).await;
        assert_eq!(
            answer.status,
            StatusCode::OK,
            "a dropped body gave its slot back"
        );
        assert!(answer.body == large);
        // A body read to its end gives its slot back at its end, before it is dropped.
        let mut body = open(&worker, &file).await.into_body().into_data_stream();
        let mut read = Vec::new();
        while let Some(chunk) = futures::StreamExt::next(&mut body).await {
            read.extend_from_slice(&chunk.expect("a chunk"));
        }
        assert!(read == large);
        let last = open(&worker, &file).await;
        assert_eq!(
            last.status(),
            StatusCode::OK,
            "the ended body's slot is free"
        );
        let answer = h.send(get(&worker, &file, None)).await;
        assert_eq!(answer.code(), "too_many_downloads", "{answer:?}");
        let answer = h
            .send(request(
                Method::GET,
                &format!("/v1/artifacts/{file}/content?proof=bao"),
                Some(&worker.token),
                Body::empty(),
            ))
            .await;
        assert_eq!(
            answer.code(),
            "too_many_downloads",
            "a proof reads the file too"
        );
        drop((second, last, body));
    }
);

/// A snapshot blob is a download like an artifact's content: a GET holds one of the Agent's
/// slots while its body lives (429 `too_many_downloads` past the cap, nothing changed) and
/// gives it back when dropped; a HEAD answers the length without opening the blob or taking
/// a slot; a blob that is not one of this Group's snapshots answers 404 first.
#[tokio::test]
async fn a_snapshot_blob_takes_a_slot_and_its_head_takes_none() {
    let h = harness_with(Kind::Disk, |config| config.max_downloads_per_agent = 1).await;
    let worker = h.agent("w1", "g1", &["worker"]).await;
    h.compacted(&worker, "g1").await;
    let listed = h.get_json(&worker, "/v1/groups/g1/snapshots").await;
    let archive = listed["snapshots"][0]["archive"]
        .as_str()
        .expect("an archive")
        .to_owned();
    let uri = format!("/v1/groups/g1/snapshots/blobs/{archive}");
    let get = |method: Method| request(method, &uri, Some(&worker.token), Body::empty());
    let whole = h.send(get(Method::GET)).await;
    assert_eq!(whole.status, StatusCode::OK, "{whole:?}");

    let held = h
        .app
        .clone()
        .oneshot(get(Method::GET))
        .await
        .expect("infallible");
    assert_eq!(held.status(), StatusCode::OK);
    let before = h.fingerprint().await;
    let answer = h.send(get(Method::GET)).await;
    assert_eq!(answer.code(), "too_many_downloads", "{answer:?}");
    assert_unchanged(&before, &h.fingerprint().await, "too_many_downloads");
    let head = h.send(get(Method::HEAD)).await;
    assert_eq!(head.status, StatusCode::OK, "a HEAD takes no slot");
    assert_eq!(
        head.headers["content-length"].to_str().expect("ascii"),
        whole.body.len().to_string()
    );
    let elsewhere = weft_api::ArtifactId::of(b"not a snapshot blob");
    let answer = h
        .send(request(
            Method::HEAD,
            &format!("/v1/groups/g1/snapshots/blobs/{elsewhere}"),
            Some(&worker.token),
            Body::empty(),
        ))
        .await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND);
    drop(held);
    let again = h.send(get(Method::GET)).await;
    assert_eq!((again.status, &again.body), (StatusCode::OK, &whole.body));
}

/// EVD-3's review after a submission re-hashes the submitted artifacts as the Authority, one
/// Agent id every Group shares, so its slot is taken as the Group's (and the process's): with
/// the Group's one slot held by a colleague's download, the artifact is not read and the
/// integrity Evidence is inconclusive (not an error that ends the review unseen), and the
/// submission stands; with a slot of another Group held, the review runs and passes.
#[tokio::test]
async fn the_review_after_a_submission_takes_a_slot_of_its_group() {
    use super::budget::started_under;
    use super::work::{evidence_for, group, mission};
    use super::work_setup::{command_doc, command_request, contract};
    use serde_json::json;
    let h = harness_with(Kind::Disk, |config| {
        config.inline_blob_bytes = 0;
        config.max_downloads_per_group = 1;
    })
    .await;
    let (coordinator, w1, w2) = group(&h).await;
    mission(&h, &coordinator, "g1", "mission-1").await;
    let outsider = h.agent("x1", "g2", &["worker"]).await;
    let elsewhere = h.put(&outsider, "g2", b"another group's file", &[]).await;
    let mut checked = contract(&[]);
    checked["acceptanceCriteria"] = json!([
        {"id": "ac-1", "description": "the tests pass", "requiredEvidence": ["automated_test"]},
        {"id": "ac-int", "description": "the bytes are what was published", "requiredEvidence": ["integrity_check"]}
    ]);
    let open = |agent: &Agent, id: String| {
        let request = axum::http::Request::builder()
            .uri(format!("/v1/artifacts/{id}/content"))
            .header("authorization", format!("Bearer {}", agent.token))
            .body(Body::empty())
            .expect("request");
        let app = h.app.clone();
        async move { app.oneshot(request).await.expect("infallible") }
    };
    let integrity = |wi: &'static str| {
        let (h, coordinator) = (&h, &coordinator);
        async move {
            let criteria = h
                .get_json(coordinator, &format!("/v1/workitems/{wi}/criteria"))
                .await;
            criteria["criteria"]
                .as_array()
                .expect("criteria")
                .iter()
                .find(|c| c["criterion"] == "ac-int")
                .map(|c| c["latest"]["outcome"].clone())
        }
    };
    for (wi, held_by) in [("wi-held", &w2), ("wi-free", &outsider)] {
        let lease = started_under(&h, &coordinator, &w1, "mission-1", wi, checked.clone()).await;
        let (artifact, evidence) = evidence_for(&h, &w1, wi).await;
        let mut submit = command_doc(
            &h,
            &w1,
            "g1",
            "work.submit",
            json!({"workItemId": wi, "artifacts": [artifact.clone()], "evidence": [evidence]}),
        )
        .await;
        submit["leaseId"] = json!(lease);
        // The download that holds a slot: a colleague's in g1, or the outsider's in g2.
        let target = if held_by.token == w2.token {
            artifact
        } else {
            elsewhere.to_string()
        };
        let held = open(held_by, target).await;
        assert_eq!(held.status(), StatusCode::OK);
        let submitted = h.send(command_request(&w1, "g1", &submit)).await;
        assert_eq!(submitted.status, StatusCode::CREATED, "{submitted:?}");
        // The review is a reaction after the commit: it runs while the slot is held.
        h.store.reactions_settled().await;
        drop(held);
        let expected = if wi == "wi-held" {
            // The Group's one slot was held: the artifact was not read, and the Authority's
            // Evidence says so rather than nothing at all. The submission stands.
            "inconclusive"
        } else {
            "pass"
        };
        assert_eq!(integrity(wi).await, Some(json!(expected)), "{wi}");
    }
}
