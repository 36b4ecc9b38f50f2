//! A same-origin front for the browser tests' sign-in (issue #40: `POST /ui/login` refuses a
//! cross-site post, so a local file can no longer submit it).
//!
//! It serves `GET /sign-in?next=…`, a page whose form posts the session token to
//! `/ui/login` on its own origin, and forwards every other request, headers and `Host`
//! included, to the weft server, as a reverse proxy in front of it would. Redirects are
//! passed through, not followed.

use axum::Router;
use axum::body::Body;
use axum::extract::{Query, Request, State};
use axum::http::{HeaderName, StatusCode};
use axum::response::{Html, IntoResponse, Response};

#[derive(Clone)]
struct Front {
    upstream: String,
    token: String,
    client: reqwest::Client,
}

/// Starts the front for `upstream` (the server's base URL); answers its base URL.
pub(crate) async fn start(upstream: String, token: String) -> String {
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client");
    let front = Front {
        upstream,
        token,
        client,
    };
    let app = Router::new()
        .route("/sign-in", axum::routing::get(sign_in))
        .fallback(forward)
        .with_state(front);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{address}")
}

async fn sign_in(
    State(front): State<Front>,
    Query(query): Query<std::collections::HashMap<String, String>>,
) -> Html<String> {
    let next = query.get("next").cloned().unwrap_or_else(|| "/ui/".into());
    Html(format!(
        r#"<!doctype html><form method="post" action="/ui/login"><input name="token" value="{}"><input name="next" value="{}"></form><script>document.forms[0].submit()</script>"#,
        front.token,
        next.replace('&', "&amp;").replace('"', "&quot;")
    ))
}

async fn forward(State(front): State<Front>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let path = parts
        .uri
        .path_and_query()
        .map_or("/", |path| path.as_str())
        .to_owned();
    let Ok(body) = axum::body::to_bytes(body, 16 << 20).await else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let mut upstream = front
        .client
        .request(parts.method, format!("{}{path}", front.upstream))
        .body(body);
    for (name, value) in &parts.headers {
        if !matches!(
            name.as_str(),
            "connection" | "content-length" | "transfer-encoding"
        ) {
            upstream = upstream.header(name, value);
        }
    }
    let Ok(answer) = upstream.send().await else {
        return StatusCode::BAD_GATEWAY.into_response();
    };
    let mut response = Response::builder().status(answer.status().as_u16());
    for (name, value) in answer.headers() {
        if name.as_str() != "transfer-encoding" {
            response = response.header(
                HeaderName::from_bytes(name.as_str().as_bytes()).expect("name"),
                value.as_bytes(),
            );
        }
    }
    let bytes = answer.bytes().await.unwrap_or_default();
    response.body(Body::from(bytes)).expect("response")
}
