//! The auditor page: logins, redirects and digests it refuses.

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};

use super::harness::*;

/// The auditor page refuses bad logins, foreign redirects and bad digests.
#[tokio::test]
async fn the_auditor_page_checks_its_input() {
    let h = harness(Kind::Memory).await;
    let worker = h.agent("w1", "g1", &["worker"]).await;
    let a = h.put(&worker, "g1", b"a", &[]).await;
    for bad in ["", "has%20space", "quote%22"] {
        let answer = h
            .call(
                Method::GET,
                &format!("/ui/login?token={bad}&next=/ui/"),
                None,
                Body::empty(),
            )
            .await;
        assert_eq!(answer.code(), "unauthorized", "{bad}");
    }
    let login = h
        .call(
            Method::GET,
            &format!("/ui/login?token={}&next=//evil.example/x", worker.token),
            None,
            Body::empty(),
        )
        .await;
    assert_eq!(login.status, StatusCode::SEE_OTHER);
    assert_eq!(
        login.headers["location"], "/ui/",
        "no redirect away from /ui/"
    );
    let cookie = login.headers["set-cookie"]
        .to_str()
        .expect("cookie")
        .to_owned();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let page = |uri: String, cookie: String| {
        let h = &h;
        async move {
            let request = Request::builder()
                .uri(uri)
                .header("cookie", cookie)
                .body(Body::empty())
                .expect("request");
            h.send(request).await
        }
    };
    let session_cookie = cookie.split(';').next().expect("pair").to_owned();
    let ok = page(format!("/ui/artifacts/{a}"), session_cookie.clone()).await;
    assert_eq!(ok.status, StatusCode::OK);
    assert!(
        ok.headers["content-security-policy"]
            .to_str()
            .expect("csp")
            .contains("default-src 'none'")
    );
    assert_eq!(
        page("/ui/artifacts/blake3:XYZ".into(), session_cookie.clone())
            .await
            .code(),
        "invalid_digest"
    );
    assert_eq!(
        page(
            format!("/ui/artifacts/{}", digest_of(b"unknown").blake3),
            session_cookie
        )
        .await
        .code(),
        "not_found"
    );
    assert_eq!(
        page(format!("/ui/artifacts/{a}"), "weft_session=forged".into())
            .await
            .code(),
        "unauthorized"
    );
}
