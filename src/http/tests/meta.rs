//! What every route shares: 405 for unsupported methods, the OpenAPI description and docs,
//! metrics, health and request ids.

use axum::body::Body;
use axum::http::{Method, StatusCode};

use super::harness::*;

backends!(
    async fn unsupported_methods_answer_405(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let uri = format!("/v1/blobs/{}", digest_of(b"x").blake3);
        for (method, uri) in [
            (Method::TRACE, uri.as_str()),
            (Method::PATCH, uri.as_str()),
            (Method::TRACE, "/v1/blobs"),
            (Method::DELETE, "/v1/artifacts"),
        ] {
            let unsupported = request(method, uri, Some(&worker.token), Body::empty());
            let answer = refused(&h, unsupported, "method_not_allowed").await;
            assert_eq!(answer.status, StatusCode::METHOD_NOT_ALLOWED);
        }
    }
);

#[tokio::test]
async fn openapi_and_metrics_are_served() {
    let h = harness(Kind::Memory).await;
    let worker = h.agent("w1", "g1", &["worker"]).await;
    h.put(&worker, "g1", b"counted", &[]).await;
    let spec = h
        .call(Method::GET, "/v1/openapi.json", None, Body::empty())
        .await
        .json();
    for path in [
        "/v1/blobs/{digest}",
        "/v1/artifacts",
        "/v1/artifacts/{digest}/content",
        "/v1/sessions",
        "/v1/admin/agents",
    ] {
        assert!(
            spec["paths"].get(path).is_some(),
            "{path} missing from the OpenAPI description"
        );
    }
    let docs = h.call(Method::GET, "/docs/", None, Body::empty()).await;
    assert_eq!(docs.status, StatusCode::OK);
    assert!(
        !String::from_utf8_lossy(&docs.body).contains("https://"),
        "docs load no external assets"
    );
    // swagger-ui reads the very document the API serves, not a copy of its own.
    let initializer = h
        .call(
            Method::GET,
            "/docs/swagger-initializer.js",
            None,
            Body::empty(),
        )
        .await;
    assert!(
        String::from_utf8_lossy(&initializer.body).contains("\"/v1/openapi.json\""),
        "{initializer:?}"
    );
    let metrics = h
        .call(Method::GET, "/metrics", Some(ADMIN), Body::empty())
        .await;
    assert!(String::from_utf8_lossy(&metrics.body).contains("weft_upload_bytes_total"));
    assert!(
        h.call(Method::GET, "/healthz", None, Body::empty())
            .await
            .headers
            .contains_key("x-request-id")
    );
}

backends!(
    /// Cursors are SQLite integers: `after` above i64::MAX is `bad_request` on every paged
    /// route (it was a 500), and i64::MAX itself is an empty page.
    async fn cursors_above_i64_are_bad_requests(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let artifact = h.put(&worker, "g1", b"paged", &[]).await;
        let routes = [
            "/v1/artifacts".to_owned(),
            "/v1/evidence".to_owned(),
            "/v1/groups/g1/events".to_owned(),
            format!("/v1/artifacts/{artifact}/evidence"),
        ];
        for route in routes {
            let over = format!("{route}?after=9223372036854775808");
            let answer = h
                .call(Method::GET, &over, Some(&worker.token), Body::empty())
                .await;
            assert_eq!(answer.code(), "bad_request", "{over}: {answer:?}");
            let max = format!("{route}?after=9223372036854775807");
            let answer = h
                .call(Method::GET, &max, Some(&worker.token), Body::empty())
                .await;
            assert_eq!(answer.status, StatusCode::OK, "{max}: {answer:?}");
        }
    }
);

/// Every JSON route that reads a body (POST and PUT of the router's own table, so a new one
/// is checked without touching the tests), as (method, uri with ids filled in, token).
fn json_body_routes(worker_token: &str) -> Vec<(Method, String, String)> {
    // The JSON routes whose handlers take no body at all.
    let bodiless = [
        "/v1/admin/groups/{group_id}",
        "/v1/admin/agents/{agent_id}/deactivate",
        "/v1/admin/gc",
    ];
    let digest = digest_of(b"x").blake3.to_string();
    let mut routes = Vec::new();
    for route in crate::http::json_routes() {
        if !matches!(route.method, Method::POST | Method::PUT) || bodiless.contains(&route.path) {
            continue;
        }
        let uri = route
            .path
            .replace("{group_id}", "g1")
            .replace("{agent_id}", "w1")
            .replace("{digest}", &digest)
            .replace("{lease_id}", "lease-1")
            .replace("{work_item_id}", "work-1")
            .replace("{package_id}", "package-1");
        assert!(!uri.contains('{'), "a path parameter to fill in {uri}");
        let token = if uri.starts_with("/v1/admin/") {
            ADMIN
        } else {
            worker_token
        };
        routes.push((route.method.clone(), uri, token.to_owned()));
    }
    assert!(routes.len() >= 15, "{routes:?}");
    routes
}

/// A JSON request with `body` as its bytes.
fn raw_json_request(
    method: Method,
    uri: &str,
    token: &str,
    body: Body,
) -> axum::http::Request<Body> {
    axum::http::Request::builder()
        .method(method)
        .uri(uri)
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", "application/json")
        .body(body)
        .expect("request")
}

/// Issue #16: a malformed JSON body is `invalid_json` on every JSON route that reads one
/// (some answered `bad_request`), and changes nothing.
#[tokio::test]
async fn malformed_json_is_invalid_json_on_every_json_body_route() {
    let h = harness(Kind::Memory).await;
    let worker = h.agent("w1", "g1", &["worker"]).await;
    for (method, uri, token) in json_body_routes(&worker.token) {
        let malformed = raw_json_request(method, &uri, &token, Body::from("{"));
        let answer = refused(&h, malformed, "invalid_json").await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{uri}");
    }
}

/// Issue #16: a JSON body that stalls past `--request-timeout-secs` answers 408
/// problem+json `timeout` on every JSON body route (tower's layer answered an empty 408).
/// The requests run together, so the whole test waits one deadline.
#[tokio::test]
async fn a_stalled_json_body_is_problem_json_timeout_on_every_json_body_route() {
    let h = harness_with(Kind::Memory, |config| {
        config.request_timeout_secs = 1;
        config.body_idle_timeout_secs = 600;
    })
    .await;
    let worker = h.agent("w1", "g1", &["worker"]).await;
    let stalled = json_body_routes(&worker.token)
        .into_iter()
        .map(|(method, uri, token)| {
            let first = futures::stream::iter([Ok::<_, std::io::Error>(
                bytes::Bytes::from_static(b"{\"a\""),
            )]);
            let body =
                Body::from_stream(futures::StreamExt::chain(first, futures::stream::pending()));
            let request = raw_json_request(method, &uri, &token, body);
            let h = &h;
            async move { (uri, h.send(request).await) }
        });
    for (uri, answer) in futures::future::join_all(stalled).await {
        assert_eq!(
            answer.status,
            StatusCode::REQUEST_TIMEOUT,
            "{uri}: {answer:?}"
        );
        assert_eq!(
            answer.headers.get("content-type").map(|v| v.as_bytes()),
            Some(&b"application/problem+json"[..]),
            "{uri}"
        );
        assert_eq!(answer.code(), "timeout", "{uri}");
    }
}

/// The metric family a Prometheus sample line belongs to (histogram series folded in).
fn family(sample: &str) -> &str {
    let name = sample.split(['{', ' ']).next().unwrap_or_default();
    ["_bucket", "_sum", "_count"]
        .iter()
        .find_map(|suffix| name.strip_suffix(suffix))
        .filter(|base| *base == crate::telemetry::HTTP_DURATION)
        .unwrap_or(name)
}

/// Issue #16: `/metrics` has `# HELP` and `# TYPE` for every family, every counter from the
/// start (registered at zero, so this test's scrape sees failures it never caused), and
/// request counts and latency histograms per matched route template and status, never the
/// raw path.
#[tokio::test]
async fn metrics_describe_every_family_and_count_requests_per_route_template() {
    let h = harness(Kind::Memory).await;
    let worker = h.agent("w1", "g1", &["worker"]).await;
    let artifact = h.put(&worker, "g1", b"counted per route", &[]).await;
    let shown = h
        .call(
            Method::GET,
            &format!("/v1/artifacts/{artifact}"),
            Some(&worker.token),
            Body::empty(),
        )
        .await;
    assert_eq!(shown.status, StatusCode::OK);
    let unrouted = format!("/v1/nowhere/{}", artifact.hex());
    let missing = h
        .call(Method::GET, &unrouted, Some(&worker.token), Body::empty())
        .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    let scrape = h
        .call(Method::GET, "/metrics", Some(ADMIN), Body::empty())
        .await;
    let text = String::from_utf8(scrape.body.to_vec()).expect("utf-8");

    for (name, _, _) in crate::telemetry::COUNTERS {
        assert!(text.contains(&format!("# HELP {name} ")), "{name}:\n{text}");
        assert!(
            text.contains(&format!("# TYPE {name} counter")),
            "{name}:\n{text}"
        );
    }
    for sample in text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
    {
        let family = family(sample);
        assert!(
            text.contains(&format!("# HELP {family} ")),
            "no HELP for {family}"
        );
        assert!(
            text.contains(&format!("# TYPE {family} ")),
            "no TYPE for {family}"
        );
    }
    assert!(text.contains(&format!(
        "# TYPE {} histogram",
        crate::telemetry::HTTP_DURATION
    )));
    let series = |prefix: &str, labels: &[&str]| {
        text.lines()
            .any(|line| line.starts_with(prefix) && labels.iter().all(|label| line.contains(label)))
    };
    let show = [
        "route=\"/v1/artifacts/{digest}\"",
        "method=\"GET\"",
        "status=\"200\"",
    ];
    assert!(series("weft_http_requests_total{", &show), "{text}");
    assert!(
        series("weft_http_request_duration_seconds_bucket{", &show),
        "{text}"
    );
    assert!(
        series(
            "weft_http_requests_total{",
            &["route=\"unmatched\"", "status=\"404\""]
        ),
        "{text}"
    );
    assert!(
        !text.contains(&artifact.hex()),
        "a raw path leaked:\n{text}"
    );
}

/// issue #40: `/metrics` is the operator's: a session of any role is refused `forbidden`,
/// the admin token reads it.
#[tokio::test]
async fn metrics_are_for_the_admin_token_only() {
    let h = harness(Kind::Memory).await;
    for role in ["worker", "auditor", "coordinator"] {
        let agent = h.agent(&format!("a-{role}"), "g1", &[role]).await;
        let answer = refused(
            &h,
            request(Method::GET, "/metrics", Some(&agent.token), Body::empty()),
            "forbidden",
        )
        .await;
        assert_eq!(answer.status, StatusCode::FORBIDDEN);
    }
    let metrics = h
        .call(Method::GET, "/metrics", Some(ADMIN), Body::empty())
        .await;
    assert_eq!(metrics.status, StatusCode::OK);
    assert!(String::from_utf8_lossy(&metrics.body).contains("# TYPE"));
}
