//! The auditor console's pages in process: what a Mission-scoped member and another Group's
//! session see (nothing, answered as if it did not exist), verify-now (a session, a
//! same-site form with this session's token, and quarantine on a mismatch), the last
//! verification a read records, search, and HTML error pages under a strict CSP.

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};

use super::harness::*;
use super::scope::world;
use super::ui::html_code;

fn cookie(agent: &Agent) -> String {
    format!("weft_session={}", agent.token)
}

async fn get(h: &Harness, cookie: &str, uri: &str) -> Answer {
    let request = Request::builder()
        .uri(uri)
        .header("cookie", cookie)
        .body(Body::empty())
        .expect("request");
    h.send(request).await
}

/// A page's HTML, after checking it is one (status 200, the console's CSP, no script).
fn html(answer: &Answer) -> String {
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    let csp = answer.headers["content-security-policy"]
        .to_str()
        .expect("csp");
    for part in [
        "default-src 'none'",
        "style-src 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ] {
        assert!(csp.contains(part), "{csp}");
    }
    let body = String::from_utf8_lossy(&answer.body).into_owned();
    assert!(!body.contains("<script"), "no script on any page");
    body
}

/// The form token a page put in its forms.
fn form_token(page: &str) -> String {
    let start =
        page.find(r#"name="form" value=""#).expect("a form") + r#"name="form" value=""#.len();
    page[start..].split('"').next().expect("token").to_owned()
}

fn verify_request(cookie: &str, artifact: &str, form: &str, origin: Option<&str>) -> Request<Body> {
    let mut builder = Request::builder()
        .method(Method::POST)
        .uri(format!("/ui/artifacts/{artifact}/verify"))
        .header("host", "weft.test")
        .header("content-type", "application/x-www-form-urlencoded");
    if !cookie.is_empty() {
        builder = builder.header("cookie", cookie);
    }
    if let Some(origin) = origin {
        builder = builder.header("origin", origin);
    }
    builder
        .body(Body::from(format!("form={form}")))
        .expect("request")
}

/// Same status and the same page once each names its own thing: no existence oracle.
fn same_page(hidden: &Answer, hidden_id: &str, absent: &Answer, absent_id: &str) {
    assert_eq!(hidden.status, absent.status);
    let hidden = String::from_utf8_lossy(&hidden.body).replace(hidden_id, "ID");
    let absent = String::from_utf8_lossy(&absent.body).replace(absent_id, "ID");
    assert_eq!(hidden, absent);
}

/// A member scoped to mission-1 sees nothing of mission-2 anywhere in the console: not its
/// artifact, Mission or WorkItem pages, not in search, not on its landing page.
#[tokio::test]
async fn a_scoped_member_sees_nothing_of_another_mission() {
    let world = world(Kind::Memory).await;
    let (h, scoped) = (&world.h, cookie(&world.scoped));
    let home = html(&get(h, &scoped, "/ui/").await);
    assert!(
        home.contains("mission-1") && !home.contains("mission-2"),
        "{home}"
    );
    assert!(
        home.contains(&world.a1.to_string()[..30]) && !home.contains(&world.a2.to_string()[..30])
    );
    let absent = digest_of(b"never stored").blake3.to_string();
    let hidden = world.a2.to_string();
    same_page(
        &get(h, &scoped, &format!("/ui/artifacts/{hidden}")).await,
        &hidden,
        &get(h, &scoped, &format!("/ui/artifacts/{absent}")).await,
        &absent,
    );
    assert_eq!(
        html_code(&get(h, &scoped, &format!("/ui/artifacts/{hidden}")).await),
        "not_found"
    );
    for (kind, hidden, absent) in [
        ("missions", "mission-2", "mission-9"),
        ("workitems", "work-2", "work-9"),
    ] {
        same_page(
            &get(h, &scoped, &format!("/ui/{kind}/{hidden}")).await,
            hidden,
            &get(h, &scoped, &format!("/ui/{kind}/{absent}")).await,
            absent,
        );
    }
    for (hidden, absent) in [
        (hidden.as_str(), absent.as_str()),
        ("mission-2", "mission-9"),
        ("work-2", "work-9"),
    ] {
        let hidden_page = get(h, &scoped, &format!("/ui/search?q={hidden}")).await;
        let absent_page = get(h, &scoped, &format!("/ui/search?q={absent}")).await;
        assert!(html(&hidden_page).contains("Nothing visible matches"));
        same_page(&hidden_page, hidden, &absent_page, absent);
    }
    // What it may see, search finds: by digest in either form, bare hex, and by id.
    let a1 = world.a1.to_string();
    let sha = h
        .get_json(&world.scoped, &format!("/v1/artifacts/{a1}"))
        .await["digests"]["sha256"]
        .as_str()
        .expect("sha256")
        .to_owned();
    for query in [
        a1.clone(),
        sha.clone(),
        a1["blake3:".len()..].to_owned(),
        sha["sha256:".len()..].to_owned(),
    ] {
        let found = get(h, &scoped, &format!("/ui/search?q={query}")).await;
        assert_eq!(found.status, StatusCode::SEE_OTHER, "{query}");
        assert_eq!(
            found.headers["location"],
            format!("/ui/artifacts/{a1}").as_str()
        );
    }
    let found = get(h, &scoped, "/ui/search?q=mission-1").await;
    assert_eq!(found.headers["location"], "/ui/missions/mission-1");
    // The event log shows other Missions' Events as withheld placeholders only.
    let log = html(&get(h, &scoped, "/ui/groups/g1/events").await);
    assert!(
        log.contains("withheld") && !log.contains("mission two"),
        "{log}"
    );
    // The auditor sees both Missions.
    let auditor = html(&get(h, &cookie(&world.auditor), "/ui/").await);
    assert!(auditor.contains("mission-1") && auditor.contains("mission-2"));
    let mission = html(&get(h, &cookie(&world.auditor), "/ui/missions/mission-2").await);
    assert!(
        mission.contains(r#"data-node="work-2""#) && mission.contains(r#"id="budget""#),
        "{mission}"
    );
}

/// A session of another Group sees nothing of g1: its artifacts, Missions and event log.
#[tokio::test]
async fn another_groups_session_sees_nothing() {
    let world = world(Kind::Memory).await;
    let h = &world.h;
    let stranger = cookie(&h.agent("stranger", "g2", &["auditor"]).await);
    let a1 = world.a1.to_string();
    for uri in [
        format!("/ui/artifacts/{a1}"),
        "/ui/missions/mission-1".into(),
        "/ui/workitems/work-1".into(),
        "/ui/groups/g1/events".into(),
    ] {
        let answer = get(h, &stranger, &uri).await;
        assert_eq!(answer.status, StatusCode::NOT_FOUND, "{uri}");
        // The API's own codes: `unknown_work_item` for a WorkItem, `not_found` otherwise.
        let code = html_code(&answer);
        assert!(
            ["not_found", "unknown_work_item"].contains(&code.as_str()),
            "{uri}: {code}"
        );
    }
    let home = html(&get(h, &stranger, "/ui/").await);
    assert!(!home.contains("mission-1") && !home.contains(&a1[..30]));
    assert!(
        html(&get(h, &stranger, &format!("/ui/search?q={a1}")).await)
            .contains("Nothing visible matches")
    );
}

/// Verify-now needs a session and a same-site form carrying this session's token; refused,
/// it changes nothing. Accepted, it re-hashes and records who asked; a read records nothing.
#[tokio::test]
async fn verify_now_needs_a_session_and_a_same_site_form() {
    let h = harness(Kind::Memory).await;
    let worker = h.agent("w1", "g1", &["worker"]).await;
    let a = h.put(&worker, "g1", b"verify me", &[]).await.to_string();
    let session = cookie(&worker);
    let page = html(&get(&h, &session, &format!("/ui/artifacts/{a}")).await);
    assert!(page.contains("no recorded re-hash yet"), "{page}");
    assert!(
        page.contains("valid: key"),
        "the producer's signature is checked: {page}"
    );
    let token = form_token(&page);
    let before = h.fingerprint().await;
    for (request, code) in [
        (verify_request("", &a, &token, None), "unauthorized"),
        (
            verify_request(&session, &a, &token, Some("https://evil.example")),
            "forbidden",
        ),
        (
            verify_request(&session, &a, "", Some("http://weft.test")),
            "forbidden",
        ),
        (verify_request(&session, &a, "0000", None), "forbidden"),
    ] {
        let answer = h.send(request).await;
        assert_eq!(html_code(&answer), code);
        assert_unchanged(&before, &h.fingerprint().await, code);
    }
    let mut cross_site = verify_request(&session, &a, &token, None);
    cross_site
        .headers_mut()
        .insert("sec-fetch-site", "cross-site".parse().expect("value"));
    assert_eq!(html_code(&h.send(cross_site).await), "forbidden");
    assert_unchanged(&before, &h.fingerprint().await, "sec-fetch-site");

    let verified = h
        .send(verify_request(
            &session,
            &a,
            &token,
            Some("http://weft.test"),
        ))
        .await;
    let verified = html(&verified);
    assert!(
        verified.contains("Verified now") && verified.contains("verify-now by w1"),
        "{verified}"
    );
    // An ordinary read re-hashes but records nothing: no write on the read path.
    let before = h.fingerprint().await;
    let read = h
        .call(
            Method::GET,
            &format!("/v1/artifacts/{a}/content"),
            Some(&worker.token),
            Body::empty(),
        )
        .await;
    assert_eq!(read.status, StatusCode::OK);
    assert_unchanged(&before, &h.fingerprint().await, "a read");
    let page = html(&get(&h, &session, &format!("/ui/artifacts/{a}")).await);
    assert!(
        page.contains("intact: last re-hashed at") && page.contains("(verify-now by w1)"),
        "{page}"
    );
}

/// Verify-now on bytes that no longer match quarantines the artifact, as reads do.
#[tokio::test]
async fn verify_now_quarantines_corrupt_bytes() {
    let h = harness(Kind::Disk).await;
    let worker = h.agent("w1", "g1", &["worker"]).await;
    let a = h.put(&worker, "g1", b"soon corrupt", &[]).await;
    std::fs::write(h.blob_file(&a), b"SOON CORRUPT").expect("corrupt the blob");
    let session = cookie(&worker);
    let token = form_token(&html(
        &get(&h, &session, &format!("/ui/artifacts/{a}")).await,
    ));
    let answer = html(
        &h.send(verify_request(&session, &a.to_string(), &token, None))
            .await,
    );
    assert!(
        answer.contains("Integrity failure") && answer.contains("quarantined"),
        "{answer}"
    );
    let view = h.get_json(&worker, &format!("/v1/artifacts/{a}")).await;
    assert_eq!(view["quarantined"], true);
}

/// fsck records its intact re-hash too, and the artifact page says so.
#[tokio::test]
async fn fsck_records_the_last_verification() {
    let h = harness(Kind::Disk).await;
    let worker = h.agent("w1", "g1", &["worker"]).await;
    let a = h.put(&worker, "g1", b"checked offline", &[]).await;
    let report = h.store.fsck().await.expect("fsck");
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    let page = html(&get(&h, &cookie(&worker), &format!("/ui/artifacts/{a}")).await);
    assert!(
        page.contains("intact: last re-hashed at") && page.contains("(fsck)"),
        "{page}"
    );
}

/// Every console failure is an HTML page with its status; 401 is the sign-in form.
#[tokio::test]
async fn console_errors_are_html_pages() {
    let h = harness(Kind::Memory).await;
    let worker = h.agent("w1", "g1", &["worker"]).await;
    let session = cookie(&worker);
    for (uri, cookie, status, code) in [
        (
            "/ui/nowhere",
            session.as_str(),
            StatusCode::NOT_FOUND,
            "not_found",
        ),
        (
            "/ui/artifacts/blake3:XYZ",
            session.as_str(),
            StatusCode::BAD_REQUEST,
            "invalid_digest",
        ),
        (
            "/ui/workitems/bad%20id",
            session.as_str(),
            StatusCode::BAD_REQUEST,
            "invalid_id",
        ),
        (
            "/ui/",
            "weft_session=forged",
            StatusCode::UNAUTHORIZED,
            "unauthorized",
        ),
        (
            "/ui/groups/g1/events",
            "",
            StatusCode::UNAUTHORIZED,
            "unauthorized",
        ),
    ] {
        let answer = get(&h, cookie, uri).await;
        assert_eq!(answer.status, status, "{uri}");
        assert_eq!(html_code(&answer), code, "{uri}");
    }
    let signed_out = String::from_utf8_lossy(&get(&h, "", "/ui/").await.body).into_owned();
    assert!(
        signed_out.contains(r#"action="/ui/login""#),
        "401 is the sign-in form"
    );
    let style = h
        .call(Method::GET, "/ui/style.css", None, Body::empty())
        .await;
    assert_eq!(style.headers["content-type"], "text/css; charset=utf-8");
    let log = html(&get(&h, &session, "/ui/groups/g1/events?type=membership").await);
    assert!(
        log.contains(r#"data-type="membership."#) && !log.contains(r#"data-type="artifact."#),
        "{log}"
    );
}
