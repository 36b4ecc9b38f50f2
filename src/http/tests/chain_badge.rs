//! Issue #50, the event log page's badge: the server re-checks the Group's chain from genesis
//! to its signed checkpoint and says so, names what broke when an Event was rewritten behind
//! its back, and re-checks only what was appended since the last view.

use axum::body::Body;
use axum::http::{Request, StatusCode};

use super::harness::*;

async fn badge(h: &Harness, agent: &Agent) -> String {
    let request = Request::builder()
        .uri("/ui/groups/g1/events")
        .header("cookie", format!("weft_session={}", agent.token))
        .body(Body::empty())
        .expect("request");
    let answer = h.send(request).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    let page = String::from_utf8(answer.body.to_vec()).expect("html");
    page.split(r#"id="chain""#)
        .nth(1)
        .and_then(|rest| rest.split("</p>").next())
        .unwrap_or_else(|| panic!("no badge in {page}"))
        .to_owned()
}

impl Harness {
    /// The sequence of `group`'s newest Event, as its checkpoint says (also `truncation.rs`).
    pub(super) async fn head_of(&self, group: &str) -> u64 {
        self.store
            .delivery()
            .checkpoint(
                weft_api::Id::parse("g", group).expect("id"),
                &weft_storage::Reader::Admin,
            )
            .await
            .expect("checkpoint")
            .checkpoint
            .sequence
    }
}

#[tokio::test]
async fn the_event_log_says_its_chain_was_verified_to_the_signed_checkpoint() {
    let h = harness(Kind::Disk).await;
    let worker = h.agent("w1", "g1", &["worker"]).await;
    h.put(&worker, "g1", b"first", &[]).await;
    let at = h.head_of("g1").await;
    let text = badge(&h, &worker).await;
    assert!(
        text.contains(&format!(
            "Chain verified from genesis to the signed checkpoint at {at}"
        )),
        "{text}"
    );
    // Appended since: verified on the next view, from where the last one stopped.
    h.put(&worker, "g1", b"second", &[]).await;
    let at = h.head_of("g1").await;
    let text = badge(&h, &worker).await;
    assert!(text.contains(&format!("checkpoint at {at}")), "{text}");

    // An Event rewritten behind the server's back breaks the badge (the verified prefix is
    // remembered, so the rewrite is after it here; a restart re-checks from genesis).
    h.put(&worker, "g1", b"third", &[]).await;
    let at = h.head_of("g1").await;
    let index = h.dir.path().join("index.sqlite");
    let changed =
        weft_storage::bench_support::tamper::event_payload(&index, "g1", at, r#"{"forged":true}"#)
            .expect("tamper");
    assert_eq!(changed, 1);
    let text = badge(&h, &worker).await;
    assert!(
        text.contains("NOT verified") && text.contains(&format!("sequence {at}")),
        "{text}"
    );
}
