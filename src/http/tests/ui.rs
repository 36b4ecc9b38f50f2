//! The auditor console's door: logins, redirects and digests it refuses, each refusal an
//! HTML page (never JSON in a browser) with the code in `#error-code`.

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};

use super::harness::*;

/// The code an HTML error page shows, after checking it is HTML under the console's CSP.
pub(super) fn html_code(answer: &Answer) -> String {
    let content_type = answer.headers["content-type"].to_str().expect("type");
    assert!(
        content_type.starts_with("text/html"),
        "{content_type}: {answer:?}"
    );
    assert!(answer.headers.contains_key("content-security-policy"));
    let body = String::from_utf8_lossy(&answer.body);
    let start = body.find(r#"id="error-code""#).expect("an error page");
    let text = &body[start..];
    let text = &text[text.find('>').expect("tag") + 1..];
    text.split(['<', ':']).next().expect("code").to_owned()
}

/// The auditor page refuses bad logins, foreign redirects and bad digests.
#[tokio::test]
async fn the_auditor_page_checks_its_input() {
    let h = harness(Kind::Memory).await;
    let worker = h.agent("w1", "g1", &["worker"]).await;
    let a = h.put(&worker, "g1", b"a", &[]).await;
    // Issue #10 finding 9b: signing in is a POSTed form; GET only shows the form and sets
    // nothing, even with a token in the URL.
    let get = h
        .call(
            Method::GET,
            &format!("/ui/login?token={}&next=/ui/x", worker.token),
            None,
            Body::empty(),
        )
        .await;
    assert_eq!(get.status, StatusCode::OK);
    assert!(
        !get.headers.contains_key("set-cookie"),
        "a URL token sets no cookie"
    );
    let form = |token: &str, next: &str| {
        let body = format!("token={token}&next={next}");
        Request::builder()
            .method(Method::POST)
            .uri("/ui/login")
            .header("content-type", "application/x-www-form-urlencoded")
            .body(Body::from(body))
            .expect("request")
    };
    // Malformed tokens, tokens that are no live session, and the admin token are refused.
    for bad in ["", "has%20space", "quote%22", "not-a-session", ADMIN] {
        let answer = h.send(form(bad, "/ui/")).await;
        assert_eq!(answer.status, StatusCode::UNAUTHORIZED, "{bad}");
        assert_eq!(html_code(&answer), "unauthorized", "{bad}");
        assert!(!answer.headers.contains_key("set-cookie"), "{bad}");
    }
    // Signed in, the page goes on to `next`, a local /ui/ page only (no open redirect).
    let goes_to = |answer: &Answer| {
        let body = String::from_utf8_lossy(&answer.body).into_owned();
        let start = body.find("url=").expect("refresh") + 4;
        body[start..].split('"').next().expect("url").to_owned()
    };
    let login = h.send(form(&worker.token, "/ui/artifacts/x")).await;
    assert_eq!(login.status, StatusCode::OK);
    assert_eq!(goes_to(&login), "/ui/artifacts/x");
    for foreign in [
        "//evil.example/x",
        "https://evil.example/",
        "/ui/..%5C..%5Cevil",
        "/v1/artifacts",
    ] {
        let answer = h.send(form(&worker.token, foreign)).await;
        assert_eq!(goes_to(&answer), "/ui/", "{foreign}");
    }
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
        html_code(&page("/ui/artifacts/blake3:XYZ".into(), session_cookie.clone()).await),
        "invalid_digest"
    );
    assert_eq!(
        html_code(
            &page(
                format!("/ui/artifacts/{}", digest_of(b"unknown").blake3),
                session_cookie
            )
            .await
        ),
        "not_found"
    );
    assert_eq!(
        html_code(&page(format!("/ui/artifacts/{a}"), "weft_session=forged".into()).await),
        "unauthorized"
    );
    assert_eq!(
        html_code(
            &page(
                format!("/ui/artifacts/{a}"),
                format!("weft_session={ADMIN}")
            )
            .await
        ),
        "unauthorized",
        "the admin token is no UI cookie"
    );
}

/// A login form post with `headers`.
fn login_post(token: &str, headers: &[(&str, &str)]) -> Request<Body> {
    let mut request = Request::builder()
        .method(Method::POST)
        .uri("/ui/login")
        .header("host", "weft.example")
        .header("content-type", "application/x-www-form-urlencoded");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request
        .body(Body::from(format!("token={token}&next=/ui/")))
        .expect("request")
}

/// issue #40: login CSRF: a cross-site `POST /ui/login` is refused `forbidden` and sets no
/// cookie (nothing changed); a same-site one signs in. Console answers carry
/// `X-Frame-Options: DENY` beside the CSP.
#[tokio::test]
async fn a_cross_site_login_is_refused() {
    let h = harness(Kind::Memory).await;
    let worker = h.agent("w1", "g1", &["worker"]).await;
    for foreign in [
        [
            ("sec-fetch-site", "cross-site"),
            ("origin", "https://weft.example"),
        ],
        [
            ("sec-fetch-site", "same-site"),
            ("origin", "https://weft.example"),
        ],
        [("origin", "https://evil.example"), ("x-unrelated", "1")],
        [("origin", "null"), ("x-unrelated", "1")],
        [("origin", "null"), ("sec-fetch-site", "cross-site")],
    ] {
        let before = h.fingerprint().await;
        let answer = h.send(login_post(&worker.token, &foreign)).await;
        assert_eq!(answer.status, StatusCode::FORBIDDEN, "{foreign:?}");
        assert_eq!(html_code(&answer), "forbidden", "{foreign:?}");
        assert!(!answer.headers.contains_key("set-cookie"), "{foreign:?}");
        assert_eq!(answer.headers["x-frame-options"], "DENY");
        assert_unchanged(&before, &h.fingerprint().await, "cross-site login");
    }
    for same in [
        vec![
            ("sec-fetch-site", "same-origin"),
            ("origin", "https://weft.example"),
        ],
        vec![("origin", "http://weft.example")],
        vec![],
        // What Chromium sends for a same-origin post from a `no-referrer` page (issue #50).
        vec![("origin", "null"), ("sec-fetch-site", "same-origin")],
    ] {
        let answer = h.send(login_post(&worker.token, &same)).await;
        assert_eq!(answer.status, StatusCode::OK, "{same:?}");
        assert_eq!(answer.headers["x-frame-options"], "DENY");
        let cookie = answer.headers["set-cookie"].to_str().expect("cookie");
        assert!(!cookie.contains("Secure"), "{cookie}");
    }
    let form = h.call(Method::GET, "/ui/login", None, Body::empty()).await;
    assert_eq!(form.headers["x-frame-options"], "DENY");
}

/// issue #40: the console cookie is `Secure` when the request came through TLS, as a trusted
/// proxy says with `X-Forwarded-Proto` or `Forwarded` (`--trust-forwarded-proto`); without
/// that setting the header is ignored.
#[tokio::test]
async fn the_cookie_is_secure_behind_a_trusted_tls_proxy() {
    let secure = |answer: &Answer| {
        assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
        let cookie = answer.headers["set-cookie"].to_str().expect("cookie");
        cookie.ends_with("; Secure")
    };
    let untrusting = harness(Kind::Memory).await;
    let worker = untrusting.agent("w1", "g1", &["worker"]).await;
    let https = [("x-forwarded-proto", "https")];
    assert!(!secure(
        &untrusting.send(login_post(&worker.token, &https)).await
    ));
    let h = harness_with(Kind::Memory, |config| config.trust_forwarded_proto = true).await;
    let worker = h.agent("w1", "g1", &["worker"]).await;
    assert!(secure(&h.send(login_post(&worker.token, &https)).await));
    let forwarded = [("forwarded", "for=192.0.2.1;proto=https;host=weft.example")];
    assert!(secure(&h.send(login_post(&worker.token, &forwarded)).await));
    let plain = [("x-forwarded-proto", "http")];
    assert!(!secure(&h.send(login_post(&worker.token, &plain)).await));
    assert!(!secure(&h.send(login_post(&worker.token, &[])).await));
}
