//! In-process HTTP tests: `server::app(state).oneshot(request)`, every test run against both
//! backends (object_store `InMemory` + SQLite in memory, and `LocalFileSystem` + SQLite on
//! disk). Each refused request asserts its problem+json `code` and that nothing changed.

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode};
use base64::Engine as _;
use bytes::Bytes;
use ed25519_dalek::SigningKey;
use futures::StreamExt as _;
use serde_json::{Value, json};
use tower::ServiceExt as _;
use weft_api::dsse::{BASE64, MANIFEST_TYPE, SESSION_TYPE};
use weft_api::manifest::{Classification, Content, Execution, Producer, Tool, ToolKind};
use weft_api::{ArtifactId, Digests, Envelope, Id, Manifest};
use weft_storage::{ManualClock, Options, Stats, Store};

use super::{AppState, app};
use crate::config::Config;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Memory,
    Disk,
}
const KINDS: [Kind; 2] = [Kind::Memory, Kind::Disk];

/// Upload limit in these tests, small enough to exceed cheaply.
const MAX_UPLOAD: u64 = 4 * 1024 * 1024;
const ADMIN: &str = "admin-test-token";

struct Harness {
    app: Router,
    store: Store,
    clock: ManualClock,
    dir: tempfile::TempDir,
}

struct Agent {
    id: Id,
    key: SigningKey,
    token: String,
}

#[derive(Debug)]
struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.body))
    }
    /// The problem+json code, after checking the body really is problem+json.
    fn code(&self) -> String {
        assert_eq!(
            self.headers
                .get("content-type")
                .and_then(|v| v.to_str().ok()),
            Some("application/problem+json"),
            "status {} body {:?}",
            self.status,
            self.body
        );
        let body = self.json();
        assert_eq!(body["status"], json!(self.status.as_u16()));
        body["code"].as_str().unwrap_or_default().to_owned()
    }
}

async fn harness(kind: Kind) -> Harness {
    harness_with(kind, |_| {}).await
}

async fn harness_with(kind: Kind, adjust: impl FnOnce(&mut Config)) -> Harness {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = Config::with_data_dir(dir.path().to_path_buf());
    config.in_memory = kind == Kind::Memory;
    config.max_upload_bytes = MAX_UPLOAD;
    adjust(&mut config);
    let clock = ManualClock::new(chrono::Utc::now());
    let mut options: Options = config.storage_options();
    options.clock = Arc::new(clock.clone());
    if kind == Kind::Disk {
        // The in-memory run walks lineage inline, this one on the blocking pool: both paths.
        options.lineage_inline_budget = None;
    }
    let store = Store::open(options).await.expect("store opens");
    let state = AppState::new(store.clone(), ADMIN, &config);
    Harness {
        app: app(state),
        store,
        clock,
        dir,
    }
}

fn digest_of(bytes: &[u8]) -> Digests {
    weft_api::digest::Hasher::digest(bytes)
}

impl Harness {
    async fn send(&self, request: Request<Body>) -> Answer {
        let response = self
            .app
            .clone()
            .oneshot(request)
            .await
            .expect("infallible service");
        let status = response.status();
        let headers = response.headers().clone();
        let body = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap_or_default();
        Answer {
            status,
            headers,
            body,
        }
    }

    async fn call(
        &self,
        method: Method,
        uri: &str,
        token: Option<&str>,
        body: impl Into<Body>,
    ) -> Answer {
        let mut request = Request::builder().method(method).uri(uri);
        if let Some(token) = token {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        self.send(request.body(body.into()).expect("valid request"))
            .await
    }

    async fn admin_json(&self, method: Method, uri: &str, body: Value) -> Answer {
        self.json_as(method, uri, ADMIN, body, &[]).await
    }

    /// A JSON request as `token`, with any `extra` headers.
    async fn json_as(
        &self,
        method: Method,
        uri: &str,
        token: &str,
        body: Value,
        extra: &[(&str, &str)],
    ) -> Answer {
        let mut request = Request::builder()
            .method(method)
            .uri(uri)
            .header("authorization", format!("Bearer {token}"))
            .header("content-type", "application/json");
        for (name, value) in extra {
            request = request.header(*name, *value);
        }
        self.send(
            request
                .body(Body::from(body.to_string()))
                .expect("valid request"),
        )
        .await
    }

    async fn stats(&self) -> Stats {
        self.store.stats().await.expect("stats")
    }

    /// Registers `agent_id`, makes it a member of `group` with `roles`, opens a session.
    async fn agent(&self, agent_id: &str, group: &str, roles: &[&str]) -> Agent {
        let key = SigningKey::from_bytes(blake3::hash(agent_id.as_bytes()).as_bytes());
        let answer = self
            .call(
                Method::PUT,
                &format!("/v1/admin/groups/{group}"),
                Some(ADMIN),
                Body::empty(),
            )
            .await;
        assert!(answer.status.is_success(), "{answer:?}");
        let answer = self
            .admin_json(Method::POST, "/v1/admin/agents", json!({"agentId": agent_id, "publicKey": BASE64.encode(key.verifying_key().as_bytes()), "agentCardVersion": "1"}))
            .await;
        assert!(answer.status.is_success(), "{answer:?}");
        let answer = self
            .admin_json(
                Method::PUT,
                &format!("/v1/admin/groups/{group}/members/{agent_id}"),
                json!({"roles": roles}),
            )
            .await;
        assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
        let id = Id::parse("agentId", agent_id).expect("test id");
        let token = self.session(&key, agent_id, group).await;
        Agent { id, key, token }
    }

    async fn session(&self, key: &SigningKey, agent_id: &str, group: &str) -> String {
        let answer = self
            .open_session(key, agent_id, group, self.clock_now(), &random_nonce())
            .await;
        assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
        answer.json()["token"].as_str().expect("token").to_owned()
    }

    fn clock_now(&self) -> String {
        weft_storage::Clock::now(&self.clock).to_rfc3339()
    }

    async fn open_session(
        &self,
        key: &SigningKey,
        agent_id: &str,
        group: &str,
        issued_at: String,
        nonce: &str,
    ) -> Answer {
        let payload =
            json!({"agentId": agent_id, "groupId": group, "issuedAt": issued_at, "nonce": nonce});
        let envelope = Envelope::sign(key, SESSION_TYPE, payload.to_string().as_bytes());
        self.call(
            Method::POST,
            "/v1/sessions",
            None,
            serde_json::to_vec(&envelope).expect("json"),
        )
        .await
    }

    async fn upload(&self, agent: &Agent, bytes: &[u8]) -> Digests {
        let digests = digest_of(bytes);
        let answer = self
            .call(
                Method::PUT,
                &format!("/v1/blobs/{}", digests.blake3),
                Some(&agent.token),
                bytes.to_vec(),
            )
            .await;
        assert!(answer.status.is_success(), "{answer:?}");
        digests
    }

    async fn publish(&self, agent: &Agent, envelope: &Envelope) -> Answer {
        self.call(
            Method::POST,
            "/v1/artifacts",
            Some(&agent.token),
            serde_json::to_vec(envelope).expect("json"),
        )
        .await
    }

    /// Uploads `bytes` and publishes a manifest for them in `group`; returns the artifact id.
    async fn put(
        &self,
        agent: &Agent,
        group: &str,
        bytes: &[u8],
        sources: &[ArtifactId],
    ) -> ArtifactId {
        let digests = self.upload(agent, bytes).await;
        let envelope = sign(&agent.key, &manifest(agent, group, digests, sources));
        let answer = self.publish(agent, &envelope).await;
        assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
        digests.blake3
    }

    fn blob_file(&self, id: &ArtifactId) -> std::path::PathBuf {
        let hex = id.hex();
        self.dir
            .path()
            .join("blobs/blake3")
            .join(&hex[..2])
            .join(&hex)
    }

    /// Waits (bounded) until no staging object is left: cancelled uploads clean up on a
    /// spawned task, so the check polls instead of assuming an order.
    async fn assert_staging_empty(&self) {
        for _ in 0..200 {
            if self.stats().await.staging_objects == 0 {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        panic!("staging still holds {:?}", self.stats().await);
    }
}

fn random_nonce() -> String {
    hex::encode(rand::random::<[u8; 16]>())
}

fn manifest(agent: &Agent, group: &str, digests: Digests, sources: &[ArtifactId]) -> Manifest {
    Manifest {
        content: Content {
            blake3: digests.blake3,
            sha256: digests.sha256,
            size: digests.size,
            media_type: "application/json".into(),
            schema: None,
        },
        producer: Producer {
            agent_id: agent.id.clone(),
            agent_card_version: "1".into(),
        },
        mission_id: Id::parse("m", "mission-1").expect("id"),
        group_id: Id::parse("g", group).expect("id"),
        work_item_id: Id::parse("w", "work-1").expect("id"),
        execution: Execution {
            lease_id: Id::parse("l", "lease-1").expect("id"),
            ownership_epoch: 1,
        },
        sources: sources.to_vec(),
        tools: vec![Tool {
            kind: ToolKind::Model,
            id: "m".into(),
            version: "1".into(),
        }],
        created_at: chrono::Utc::now().fixed_offset(),
        classification: Classification::Internal,
        retrieval_uri: format!(
            "https://weft.example/v1/artifacts/{}/content",
            digests.blake3
        ),
        annotations: Default::default(),
    }
}

fn sign(key: &SigningKey, manifest: &Manifest) -> Envelope {
    Envelope::sign(
        key,
        MANIFEST_TYPE,
        &serde_json::to_vec(manifest).expect("json"),
    )
}

// ---------------------------------------------------------------------------------------
// Upload

/// ART-1: an Artifact is its bytes, looked up by either digest; ART-5: the read is verified.
#[tokio::test]
async fn upload_then_read_round_trips_with_both_digests() {
    for kind in KINDS {
        let h = harness(kind).await;
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
}

#[tokio::test]
async fn malformed_digests_are_refused_and_change_nothing() {
    for kind in KINDS {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let hex = digest_of(b"x").blake3.hex();
        let before = h.stats().await;
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
            let answer = h
                .call(
                    Method::PUT,
                    &format!("/v1/blobs/{bad}"),
                    Some(&worker.token),
                    b"x".to_vec(),
                )
                .await;
            assert_eq!(
                (answer.status, answer.code().as_str()),
                (StatusCode::BAD_REQUEST, "invalid_digest"),
                "{bad}"
            );
            let answer = h
                .call(
                    Method::GET,
                    &format!("/v1/artifacts/{bad}/content"),
                    Some(&worker.token),
                    Body::empty(),
                )
                .await;
            assert_eq!(answer.code(), "invalid_digest", "{bad}");
        }
        assert_eq!(h.stats().await, before, "{kind:?}");
    }
}

#[tokio::test]
async fn digest_mismatch_keeps_nothing() {
    for kind in KINDS {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let before = h.stats().await;
        let claimed = digest_of(b"other bytes");
        for claimed in [claimed.blake3.to_string(), claimed.sha256.to_string()] {
            let answer = h
                .call(
                    Method::PUT,
                    &format!("/v1/blobs/{claimed}"),
                    Some(&worker.token),
                    b"these bytes".to_vec(),
                )
                .await;
            assert_eq!(
                (answer.status, answer.code().as_str()),
                (StatusCode::BAD_REQUEST, "digest_mismatch")
            );
        }
        h.assert_staging_empty().await;
        assert_eq!(h.stats().await, before, "{kind:?}");
    }
}

#[tokio::test]
async fn oversized_bodies_are_cut_on_the_stream() {
    for kind in KINDS {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let before = h.stats().await;
        // No Content-Length: the limit must hold on the stream itself.
        let chunks = (0..8).map(|_| Ok::<_, std::io::Error>(Bytes::from(vec![7u8; 1024 * 1024])));
        let answer = h
            .call(
                Method::POST,
                "/v1/blobs",
                Some(&worker.token),
                Body::from_stream(futures::stream::iter(chunks)),
            )
            .await;
        assert_eq!(
            (answer.status, answer.code().as_str()),
            (StatusCode::PAYLOAD_TOO_LARGE, "body_too_large")
        );
        // A declared length over the limit is refused before reading.
        let request = Request::builder()
            .method(Method::POST)
            .uri("/v1/blobs")
            .header("authorization", format!("Bearer {}", worker.token))
            .header("content-length", (MAX_UPLOAD + 1).to_string())
            .body(Body::empty())
            .expect("request");
        assert_eq!(h.send(request).await.code(), "body_too_large");
        // JSON routes have their own, smaller limit.
        let big = vec![b' '; 2 * 1024 * 1024];
        let answer = h
            .call(Method::POST, "/v1/artifacts", Some(&worker.token), big)
            .await;
        assert_eq!(answer.code(), "body_too_large");
        h.assert_staging_empty().await;
        assert_eq!(h.stats().await, before, "{kind:?}");
    }
}

#[tokio::test]
async fn a_body_that_fails_midway_keeps_nothing() {
    for kind in KINDS {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let before = h.stats().await;
        let chunks: Vec<Result<Bytes, std::io::Error>> = vec![
            Ok(Bytes::from(vec![1u8; 2 * 1024 * 1024])),
            Err(std::io::Error::new(
                std::io::ErrorKind::ConnectionReset,
                "client went away",
            )),
        ];
        let answer = h
            .call(
                Method::POST,
                "/v1/blobs",
                Some(&worker.token),
                Body::from_stream(futures::stream::iter(chunks)),
            )
            .await;
        assert_eq!(
            (answer.status, answer.code().as_str()),
            (StatusCode::BAD_REQUEST, "incomplete_body")
        );
        h.assert_staging_empty().await;
        assert_eq!(h.stats().await, before, "{kind:?}");
    }
}

#[tokio::test]
async fn a_stalled_body_times_out() {
    for kind in KINDS {
        let h = harness_with(kind, |config| config.body_idle_timeout_secs = 1).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let before = h.stats().await;
        let first = futures::stream::iter([Ok::<_, std::io::Error>(Bytes::from_static(b"start"))]);
        let stalled = first.chain(futures::stream::pending());
        let answer = h
            .call(
                Method::POST,
                "/v1/blobs",
                Some(&worker.token),
                Body::from_stream(stalled),
            )
            .await;
        assert_eq!(
            (answer.status, answer.code().as_str()),
            (StatusCode::REQUEST_TIMEOUT, "timeout")
        );
        h.assert_staging_empty().await;
        assert_eq!(h.stats().await, before, "{kind:?}");
    }
}

#[tokio::test]
async fn the_empty_blob_round_trips() {
    for kind in KINDS {
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
}

/// ART-1: immutable and content-addressed; the same bytes are one object, never rewritten.
#[tokio::test]
async fn same_bytes_twice_and_concurrently_store_one_object() {
    for kind in KINDS {
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
}

#[tokio::test]
async fn unsupported_methods_answer_405() {
    for kind in KINDS {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let uri = format!("/v1/blobs/{}", digest_of(b"x").blake3);
        for (method, uri) in [
            (Method::TRACE, uri.as_str()),
            (Method::PATCH, uri.as_str()),
            (Method::TRACE, "/v1/blobs"),
            (Method::DELETE, "/v1/artifacts"),
        ] {
            let answer = h
                .call(method.clone(), uri, Some(&worker.token), Body::empty())
                .await;
            assert_eq!(
                (answer.status, answer.code().as_str()),
                (StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed"),
                "{method} {uri}"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------
// Ids and admin

#[tokio::test]
async fn ids_with_path_and_unicode_tricks_are_refused() {
    for kind in KINDS {
        let h = harness(kind).await;
        let before = h.stats().await;
        let long = "a".repeat(10 * 1024);
        for bad in [
            "%2e%2e",
            "..",
            "..%2Fetc",
            "a%2Fb",
            "a%00b",
            "a%5Cb",
            "caf%C3%A9",
            "cafe%CC%81",
            "a%E2%80%8Bb",
            "a%E2%80%AEb",
            "%EF%BD%81",
            "a%20b",
            long.as_str(),
        ] {
            let answer = h
                .call(
                    Method::PUT,
                    &format!("/v1/admin/groups/{bad}"),
                    Some(ADMIN),
                    Body::empty(),
                )
                .await;
            assert_eq!(
                (answer.status, answer.code().as_str()),
                (StatusCode::BAD_REQUEST, "invalid_id"),
                "{bad}"
            );
        }
        for bad in [
            "../x",
            "a\u{0}b",
            "a\\b",
            "cafe\u{301}",
            "a\u{200b}b",
            "a\u{202e}b",
            long.as_str(),
        ] {
            let answer = h
                .admin_json(Method::POST, "/v1/admin/agents", json!({"agentId": bad, "publicKey": BASE64.encode([9u8; 32]), "agentCardVersion": "1"}))
                .await;
            assert_eq!(answer.code(), "invalid_id", "{bad:?}");
        }
        assert_eq!(h.stats().await, before, "{kind:?}");
    }
}

#[tokio::test]
async fn admin_calls_need_the_admin_token() {
    for kind in KINDS {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let before = h.stats().await;
        let answer = h
            .call(
                Method::PUT,
                "/v1/admin/groups/g2",
                Some(&worker.token),
                Body::empty(),
            )
            .await;
        assert_eq!(
            (answer.status, answer.code().as_str()),
            (StatusCode::FORBIDDEN, "forbidden")
        );
        let answer = h
            .call(Method::PUT, "/v1/admin/groups/g2", None, Body::empty())
            .await;
        assert_eq!(
            (answer.status, answer.code().as_str()),
            (StatusCode::UNAUTHORIZED, "unauthorized")
        );
        let answer = h
            .call(
                Method::PUT,
                "/v1/admin/groups/g2",
                Some("not-a-token"),
                Body::empty(),
            )
            .await;
        assert_eq!(answer.code(), "unauthorized");
        // Same agent, another key: conflict.
        let other = SigningKey::from_bytes(&[3u8; 32]);
        let answer = h
            .admin_json(Method::POST, "/v1/admin/agents", json!({"agentId": "w1", "publicKey": BASE64.encode(other.verifying_key().as_bytes()), "agentCardVersion": "1"}))
            .await;
        assert_eq!(
            (answer.status, answer.code().as_str()),
            (StatusCode::CONFLICT, "conflict")
        );
        let answer = h
            .admin_json(
                Method::POST,
                "/v1/admin/agents",
                json!({"agentId": "w9", "publicKey": "AAAA", "agentCardVersion": "1"}),
            )
            .await;
        assert_eq!(answer.code(), "bad_request");
        let answer = h.admin_json(Method::POST, "/v1/admin/agents", json!({"agentId": "w9", "publicKey": BASE64.encode([1u8; 32]), "agentCardVersion": "1", "extra": 1})).await;
        assert_eq!(answer.code(), "bad_request");
        assert_eq!(h.stats().await, before, "{kind:?}");
        // Every route but /healthz needs authentication.
        assert_eq!(
            h.call(Method::GET, "/healthz", None, Body::empty())
                .await
                .status,
            StatusCode::OK
        );
        for uri in ["/metrics", "/v1/artifacts", "/v1/groups/g1/events"] {
            assert_eq!(
                h.call(Method::GET, uri, None, Body::empty()).await.code(),
                "unauthorized",
                "{uri}"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------
// Sessions

#[tokio::test]
async fn session_requests_are_checked() {
    for kind in KINDS {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        h.agent("w2", "g2", &["worker"]).await;
        let before = h.stats().await;
        let skewed =
            (weft_storage::Clock::now(&h.clock) - chrono::Duration::minutes(6)).to_rfc3339();
        assert_eq!(
            h.open_session(&worker.key, "w1", "g1", skewed, &random_nonce())
                .await
                .code(),
            "clock_skew"
        );
        assert_eq!(
            h.open_session(&worker.key, "w1", "g2", h.clock_now(), &random_nonce())
                .await
                .code(),
            "not_a_member"
        );
        assert_eq!(
            h.open_session(&worker.key, "w2", "g2", h.clock_now(), &random_nonce())
                .await
                .code(),
            "producer_mismatch"
        );
        let stranger = SigningKey::from_bytes(&[5u8; 32]);
        assert_eq!(
            h.open_session(&stranger, "w1", "g1", h.clock_now(), &random_nonce())
                .await
                .code(),
            "unknown_key"
        );
        assert_eq!(
            h.open_session(&worker.key, "w1", "g1", h.clock_now(), "short")
                .await
                .code(),
            "bad_request"
        );
        // A manifest envelope replayed at the session endpoint.
        let manifest_envelope = Envelope::sign(&worker.key, MANIFEST_TYPE, b"{}");
        let answer = h
            .call(
                Method::POST,
                "/v1/sessions",
                None,
                serde_json::to_vec(&manifest_envelope).expect("json"),
            )
            .await;
        assert_eq!(answer.code(), "wrong_payload_type");
        assert_eq!(h.stats().await, before, "{kind:?}");
        let nonce = random_nonce();
        assert_eq!(
            h.open_session(&worker.key, "w1", "g1", h.clock_now(), &nonce)
                .await
                .status,
            StatusCode::CREATED
        );
        assert_eq!(
            h.open_session(&worker.key, "w1", "g1", h.clock_now(), &nonce)
                .await
                .code(),
            "nonce_reused"
        );
    }
}

#[tokio::test]
async fn sessions_go_stale_when_replaced_membership_changes_or_time_passes() {
    for kind in KINDS {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let newer = h.session(&worker.key, "w1", "g1").await;
        let answer = h
            .call(
                Method::GET,
                "/v1/artifacts",
                Some(&worker.token),
                Body::empty(),
            )
            .await;
        assert_eq!(
            (answer.status, answer.code().as_str()),
            (StatusCode::UNAUTHORIZED, "stale_session")
        );
        assert_eq!(
            h.call(Method::GET, "/v1/artifacts", Some(&newer), Body::empty())
                .await
                .status,
            StatusCode::OK
        );
        h.admin_json(
            Method::PUT,
            "/v1/admin/groups/g1/members/w1",
            json!({"roles": ["worker", "reviewer"]}),
        )
        .await;
        assert_eq!(
            h.call(Method::GET, "/v1/artifacts", Some(&newer), Body::empty())
                .await
                .code(),
            "stale_session"
        );
        let latest = h.session(&worker.key, "w1", "g1").await;
        h.clock.advance(chrono::Duration::hours(13));
        assert_eq!(
            h.call(Method::GET, "/v1/artifacts", Some(&latest), Body::empty())
                .await
                .code(),
            "unauthorized",
            "{kind:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------
// Publish

/// Breaks an envelope's signature in the given way.
fn with_sig(envelope: &Envelope, mutate: impl FnOnce(Vec<u8>) -> Vec<u8>) -> Envelope {
    let mut envelope = envelope.clone();
    let sig = BASE64
        .decode(&envelope.signatures[0].sig)
        .expect("own encoding");
    envelope.signatures[0].sig = BASE64.encode(mutate(sig));
    envelope
}

/// S + L: the same signature with a non-canonical scalar, which verify_strict must refuse.
fn s_plus_l(mut sig: Vec<u8>) -> Vec<u8> {
    const L: [u8; 32] = [
        0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde,
        0x14, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10,
    ];
    let mut carry = 0u16;
    for (byte, l) in sig[32..].iter_mut().zip(L) {
        let sum = u16::from(*byte) + u16::from(l) + carry;
        *byte = sum as u8;
        carry = sum >> 8;
    }
    sig
}

#[tokio::test]
async fn bad_signatures_and_wrong_signers_are_refused() {
    for kind in KINDS {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let colleague = h.agent("w2", "g1", &["worker"]).await;
        let outsider = h.agent("w3", "g2", &["worker"]).await;
        let reviewer = h.agent("r1", "g1", &["reviewer"]).await;
        let digests = h.upload(&worker, b"payload").await;
        h.upload(&outsider, b"payload").await;
        h.upload(&reviewer, b"payload").await;
        let good = sign(&worker.key, &manifest(&worker, "g1", digests, &[]));
        let before = h.stats().await;
        let cases: Vec<(&str, &Agent, Envelope)> = vec![
            (
                "bad_signature",
                &worker,
                with_sig(&good, |s| s[..63].to_vec()),
            ),
            (
                "bad_signature",
                &worker,
                with_sig(&good, |s| [s, vec![0]].concat()),
            ),
            ("bad_signature", &worker, with_sig(&good, s_plus_l)),
            (
                "bad_signature",
                &worker,
                with_sig(&good, |mut s| {
                    s[5] ^= 1;
                    s
                }),
            ),
            (
                "unknown_key",
                &worker,
                sign(
                    &SigningKey::from_bytes(&[8u8; 32]),
                    &manifest(&worker, "g1", digests, &[]),
                ),
            ),
            // Signed by a registered key that is not the producer's.
            (
                "producer_mismatch",
                &colleague,
                sign(&colleague.key, &manifest(&worker, "g1", digests, &[])),
            ),
            // Someone else's envelope, published by a caller who did not sign it.
            ("producer_mismatch", &colleague, good.clone()),
            // The producer is a member of another Group only.
            (
                "not_a_member",
                &outsider,
                sign(&outsider.key, &manifest(&outsider, "g1", digests, &[])),
            ),
            // A member without the worker role.
            (
                "forbidden",
                &reviewer,
                sign(&reviewer.key, &manifest(&reviewer, "g1", digests, &[])),
            ),
        ];
        for (code, caller, envelope) in cases {
            assert_eq!(h.publish(caller, &envelope).await.code(), code, "{kind:?}");
        }
        // The manifest replayed as a session request (payloadType swapped): PAE binds the type.
        let mut replayed = good.clone();
        replayed.payload_type = SESSION_TYPE.into();
        assert_eq!(
            h.publish(&worker, &replayed).await.code(),
            "wrong_payload_type"
        );
        let answer = h
            .call(
                Method::POST,
                "/v1/sessions",
                None,
                serde_json::to_vec(&replayed).expect("json"),
            )
            .await;
        assert_eq!(answer.code(), "bad_signature");
        // Two signatures, or none.
        let mut doubled = good.clone();
        doubled.signatures.push(doubled.signatures[0].clone());
        assert_eq!(h.publish(&worker, &doubled).await.code(), "bad_signature");
        assert_eq!(h.stats().await, before, "{kind:?}");
        assert_eq!(h.publish(&worker, &good).await.status, StatusCode::CREATED);
    }
}

#[tokio::test]
async fn malformed_manifest_json_is_refused() {
    for kind in KINDS {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let digests = h.upload(&worker, b"payload").await;
        let good: Value =
            serde_json::to_value(manifest(&worker, "g1", digests, &[])).expect("json");
        let good_text = good.to_string();
        let before = h.stats().await;
        let inner = &good_text[1..good_text.len() - 1];
        let payloads = [
            format!("{{{inner},\"groupId\":\"g1\"}}"), // duplicate key
            format!("{{{inner},\"extra\":1}}"),        // unknown field
            format!("{good_text} trailing"),           // trailing garbage
            good_text.replace("\"work-1\"", "\"\\ud800\""), // lone surrogate
            format!(
                "{{{inner},\"annotations\":{}1{}}}",
                "[".repeat(4000),
                "]".repeat(4000)
            ), // depth bomb
            good_text.replace("\"schema\":null,", ""), // missing ART-3 field
            "not json at all".to_owned(),
        ];
        for payload in &payloads {
            let envelope = Envelope::sign(&worker.key, MANIFEST_TYPE, payload.as_bytes());
            let answer = h.publish(&worker, &envelope).await;
            assert_eq!(
                (answer.status, answer.code().as_str()),
                (StatusCode::BAD_REQUEST, "invalid_manifest"),
                "{}",
                &payload[..payload.len().min(120)]
            );
        }
        // The same defects in the envelope itself.
        let envelope =
            serde_json::to_string(&sign(&worker.key, &manifest(&worker, "g1", digests, &[])))
                .expect("json");
        let body = &envelope[1..envelope.len() - 1];
        for text in [
            format!("{{{body},\"payloadType\":\"x\"}}"),
            format!("{{{body},\"extra\":true}}"),
            format!("{envelope}]"),
            format!("{}{envelope}{}", "[".repeat(5000), "]".repeat(5000)),
            envelope.replace("\"payloadType\"", "\"payloadType\\ud800\""),
        ] {
            let answer = h
                .call(
                    Method::POST,
                    "/v1/artifacts",
                    Some(&worker.token),
                    text.clone(),
                )
                .await;
            assert_eq!(
                answer.code(),
                "invalid_json",
                "{}",
                &text[..text.len().min(80)]
            );
        }
        let answer = h
            .send(
                Request::builder()
                    .method(Method::POST)
                    .uri("/v1/artifacts")
                    .header("authorization", format!("Bearer {}", worker.token))
                    .header("content-type", "text/plain")
                    .body(Body::from(envelope.clone()))
                    .expect("request"),
            )
            .await;
        assert_eq!(
            (answer.status, answer.code().as_str()),
            (StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type")
        );
        assert_eq!(h.stats().await, before, "{kind:?}");
    }
}

/// ART-3 (the manifest's digests and size must be the stored bytes'), ART-4 (sources form an
/// acyclic provenance graph with no dangling edge).
#[tokio::test]
async fn publication_checks_the_blob_sources_and_cycles() {
    for kind in KINDS {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let outsider = h.agent("w3", "g2", &["worker"]).await;
        let a = h.put(&worker, "g1", b"artifact A", &[]).await;
        let b = h.put(&worker, "g1", b"artifact B", &[a]).await;
        let hidden = h.put(&outsider, "g2", b"in another group", &[]).await;
        h.upload(&outsider, b"outsider only").await;
        let before = h.stats().await;
        // ART-4 / DESIGN §6: a second manifest for A's bytes citing B would close a cycle.
        let digests_a = digest_of(b"artifact A");
        let cycle = sign(&worker.key, &manifest(&worker, "g1", digests_a, &[b]));
        assert_eq!(h.publish(&worker, &cycle).await.code(), "cycle");
        let missing_source = digest_of(b"never published").blake3;
        let unknown = sign(
            &worker.key,
            &manifest(&worker, "g1", digests_a, &[missing_source]),
        );
        assert_eq!(h.publish(&worker, &unknown).await.code(), "unknown_source");
        let unreadable = sign(&worker.key, &manifest(&worker, "g1", digests_a, &[hidden]));
        assert_eq!(
            h.publish(&worker, &unreadable).await.code(),
            "unknown_source"
        );
        // Bytes that were never uploaded, or were uploaded only by someone else.
        let never = sign(
            &worker.key,
            &manifest(&worker, "g1", digest_of(b"not uploaded"), &[]),
        );
        assert_eq!(h.publish(&worker, &never).await.code(), "blob_not_found");
        let theirs = sign(
            &worker.key,
            &manifest(&worker, "g1", digest_of(b"outsider only"), &[]),
        );
        assert_eq!(h.publish(&worker, &theirs).await.code(), "blob_not_found");
        // Digests or size that disagree with the stored bytes.
        let mut wrong_size = digest_of(b"artifact A");
        wrong_size.size += 1;
        let lying = sign(&worker.key, &manifest(&worker, "g1", wrong_size, &[]));
        assert_eq!(h.publish(&worker, &lying).await.code(), "digest_mismatch");
        let mut wrong_sha = digest_of(b"artifact A");
        wrong_sha.sha256 = digest_of(b"artifact B").sha256;
        let lying = sign(&worker.key, &manifest(&worker, "g1", wrong_sha, &[]));
        assert_eq!(h.publish(&worker, &lying).await.code(), "digest_mismatch");
        let mut unknown_group = manifest(&worker, "g1", digests_a, &[]);
        unknown_group.group_id = Id::parse("g", "nowhere").expect("id");
        assert_eq!(
            h.publish(&worker, &sign(&worker.key, &unknown_group))
                .await
                .code(),
            "unknown_group"
        );
        let mut self_source = manifest(&worker, "g1", digests_a, &[]);
        self_source.sources = vec![a];
        assert_eq!(
            h.publish(&worker, &sign(&worker.key, &self_source))
                .await
                .code(),
            "cycle"
        );
        let mut wrong_card = manifest(&worker, "g1", digests_a, &[]);
        wrong_card.producer.agent_card_version = "2".into();
        assert_eq!(
            h.publish(&worker, &sign(&worker.key, &wrong_card))
                .await
                .code(),
            "producer_mismatch"
        );
        assert_eq!(h.stats().await, before, "{kind:?}");
    }
}

/// ART-2 (bytes stay out of the log), LSE-4 (the published Event carries the lease),
/// DLV-7 (reading the log never trims it).
#[tokio::test]
async fn publishing_appends_a_hash_chained_event_and_is_idempotent() {
    for kind in KINDS {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let digests = h.upload(&worker, b"bytes").await;
        let envelope = sign(&worker.key, &manifest(&worker, "g1", digests, &[]));
        let first = h.publish(&worker, &envelope).await;
        assert_eq!(first.status, StatusCode::CREATED);
        let again = h.publish(&worker, &envelope).await;
        assert_eq!(again.status, StatusCode::OK);
        assert_eq!(first.json(), again.json());
        let answer = h
            .call(
                Method::GET,
                "/v1/groups/g1/events",
                Some(&worker.token),
                Body::empty(),
            )
            .await;
        let page: weft_api::views::EventPage =
            serde_json::from_slice(&answer.body).expect("events");
        let kinds: Vec<&str> = page.events.iter().map(|e| e.kind.as_str()).collect();
        assert_eq!(
            kinds,
            [
                "group.created",
                "membership.set",
                "session.opened",
                "artifact.published"
            ]
        );
        weft_api::event::verify_chain(0, weft_api::EventHash::GENESIS, &page.events)
            .expect("chain verifies");
        assert_eq!(first.json()["sequence"], json!(4));
        // ART-2: the log carries digests, never the bytes.
        assert!(!String::from_utf8_lossy(&answer.body).contains("Ynl0ZXM="));
        // LSE-4: the publication references the execution lease it was made under.
        let published = serde_json::to_value(&page.events[3].payload).expect("payload");
        assert_eq!(
            (
                published["leaseId"].as_str(),
                published["ownershipEpoch"].as_u64()
            ),
            (Some("lease-1"), Some(1))
        );
        // DLV-7: replaying (the only consumer so far) leaves the whole history in place.
        let again = h
            .call(
                Method::GET,
                "/v1/groups/g1/events",
                Some(&worker.token),
                Body::empty(),
            )
            .await;
        assert_eq!(again.body, answer.body);
        for bad in ["after=-1", "after=abc", "after=1&limit=x", "bogus=1"] {
            let answer = h
                .call(
                    Method::GET,
                    &format!("/v1/groups/g1/events?{bad}"),
                    Some(&worker.token),
                    Body::empty(),
                )
                .await;
            assert_eq!(answer.code(), "bad_request", "{bad} {kind:?}");
        }
    }
}

// ---------------------------------------------------------------------------------------
// Access

#[tokio::test]
async fn other_groups_learn_nothing_about_your_bytes() {
    for kind in KINDS {
        let h = harness(kind).await;
        let alice = h.agent("alice", "ga", &["worker"]).await;
        let bob = h.agent("bob", "gb", &["worker"]).await;
        let secret = b"group A's secret";
        let id = h.put(&alice, "ga", secret, &[]).await;
        let sha = digest_of(secret).sha256;
        for uri in [
            format!("/v1/artifacts/{id}"),
            format!("/v1/artifacts/{id}/content"),
            format!("/v1/artifacts/{sha}"),
        ] {
            assert_eq!(
                h.call(Method::GET, &uri, Some(&bob.token), Body::empty())
                    .await
                    .code(),
                "not_found",
                "{uri}"
            );
        }
        let head = h
            .call(
                Method::HEAD,
                &format!("/v1/blobs/{id}"),
                Some(&bob.token),
                Body::empty(),
            )
            .await;
        assert_eq!(head.status, StatusCode::NOT_FOUND);
        let head = h
            .call(
                Method::HEAD,
                &format!("/v1/blobs/{id}"),
                Some(&alice.token),
                Body::empty(),
            )
            .await;
        assert_eq!(head.status, StatusCode::OK);
        // Uploading A's bytes answers exactly as for new bytes: 201, not 200.
        let upload = h
            .call(
                Method::PUT,
                &format!("/v1/blobs/{id}"),
                Some(&bob.token),
                secret.to_vec(),
            )
            .await;
        assert_eq!(upload.status, StatusCode::CREATED);
        let fresh = h
            .call(
                Method::PUT,
                &format!("/v1/blobs/{}", digest_of(b"new").blake3),
                Some(&bob.token),
                b"new".to_vec(),
            )
            .await;
        assert_eq!(fresh.status, StatusCode::CREATED);
        let listing = h
            .call(
                Method::GET,
                "/v1/artifacts",
                Some(&bob.token),
                Body::empty(),
            )
            .await;
        assert_eq!(listing.json()["items"], json!([]), "{kind:?}");
        let events = h
            .call(
                Method::GET,
                "/v1/groups/ga/events",
                Some(&bob.token),
                Body::empty(),
            )
            .await;
        assert_eq!(events.code(), "not_found");
        // Having uploaded the bytes, bob may publish them in his own Group.
        h.put(&bob, "gb", secret, &[]).await;
        assert_eq!(
            h.call(
                Method::GET,
                &format!("/v1/artifacts/{id}/content"),
                Some(&bob.token),
                Body::empty()
            )
            .await
            .status,
            StatusCode::OK
        );
        let view = h
            .call(
                Method::GET,
                &format!("/v1/artifacts/{id}"),
                Some(&bob.token),
                Body::empty(),
            )
            .await;
        assert_eq!(
            view.json()["manifests"].as_array().map(Vec::len),
            Some(1),
            "bob sees only his own manifest"
        );
    }
}

#[tokio::test]
async fn listing_filters_and_pages() {
    for kind in KINDS {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        for n in 0..5 {
            h.put(&worker, "g1", format!("item {n}").as_bytes(), &[])
                .await;
        }
        let page = h
            .call(
                Method::GET,
                "/v1/artifacts?missionId=mission-1&limit=2",
                Some(&worker.token),
                Body::empty(),
            )
            .await
            .json();
        assert_eq!(page["items"].as_array().map(Vec::len), Some(2));
        let next = page["next"].as_u64().expect("more pages");
        let rest = h
            .call(
                Method::GET,
                &format!("/v1/artifacts?after={next}&limit=10"),
                Some(&worker.token),
                Body::empty(),
            )
            .await
            .json();
        assert_eq!(rest["items"].as_array().map(Vec::len), Some(3));
        assert!(rest.get("next").is_none());
        let none = h
            .call(
                Method::GET,
                "/v1/artifacts?missionId=other",
                Some(&worker.token),
                Body::empty(),
            )
            .await
            .json();
        assert_eq!(none["items"], json!([]));
        assert_eq!(
            h.call(
                Method::GET,
                "/v1/artifacts?missionId=..",
                Some(&worker.token),
                Body::empty()
            )
            .await
            .code(),
            "invalid_id",
            "{kind:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------
// Read: ranges, caching, verification (ART-5)

#[tokio::test]
async fn ranges_etags_and_conditional_requests() {
    for kind in KINDS {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let bytes: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        let id = h.put(&worker, "g1", &bytes, &[]).await;
        let uri = format!("/v1/artifacts/{id}/content");
        let get = |headers: Vec<(&'static str, String)>| {
            let mut request = Request::builder()
                .uri(uri.clone())
                .header("authorization", format!("Bearer {}", worker.token));
            for (name, value) in headers {
                request = request.header(name, value);
            }
            h.send(request.body(Body::empty()).expect("request"))
        };
        let partial = get(vec![("range", "bytes=1048570-1048580".into())]).await;
        assert_eq!(partial.status, StatusCode::PARTIAL_CONTENT);
        assert_eq!(partial.body, bytes[1_048_570..=1_048_580]);
        assert_eq!(
            partial.headers["content-range"],
            "bytes 1048570-1048580/3000000"
        );
        let suffix = get(vec![("range", "bytes=-10".into())]).await;
        assert_eq!(suffix.body, bytes[bytes.len() - 10..]);
        let unsatisfiable = get(vec![("range", "bytes=3000000-3000001".into())]).await;
        assert_eq!(
            (unsatisfiable.status, unsatisfiable.code().as_str()),
            (StatusCode::RANGE_NOT_SATISFIABLE, "invalid_range")
        );
        assert_eq!(unsatisfiable.headers["content-range"], "bytes */3000000");
        let multiple = get(vec![("range", "bytes=0-1,5-6".into())]).await;
        assert_eq!(
            (multiple.status, multiple.body.len()),
            (StatusCode::OK, bytes.len())
        );
        let cached = get(vec![("if-none-match", format!("\"{id}\""))]).await;
        assert_eq!(cached.status, StatusCode::NOT_MODIFIED);
        assert!(cached.body.is_empty());
        let stale = get(vec![("if-none-match", "\"blake3:00\"".into())]).await;
        assert_eq!(stale.status, StatusCode::OK, "{kind:?}");
    }
}

/// Reads a content response to its end; `Err` when the body was aborted.
async fn read_to_end(h: &Harness, uri: &str, token: &str) -> (StatusCode, Result<Vec<u8>, String>) {
    let request = Request::builder()
        .uri(uri)
        .header("authorization", format!("Bearer {token}"))
        .body(Body::empty())
        .expect("request");
    let response = h.app.clone().oneshot(request).await.expect("infallible");
    let status = response.status();
    let mut body = response.into_body().into_data_stream();
    let mut received = Vec::new();
    while let Some(chunk) = body.next().await {
        match chunk {
            Ok(chunk) => received.extend_from_slice(&chunk),
            Err(error) => return (status, Err(error.to_string())),
        }
    }
    (status, Ok(received))
}

#[tokio::test]
async fn corrupted_blobs_are_never_served_as_success() {
    // ART-5: bit flip, truncation and swapped files on disk (the local backend only).
    let h = harness(Kind::Disk).await;
    let worker = h.agent("w1", "g1", &["worker"]).await;
    let first: Vec<u8> = (0..2_500_000u32).map(|i| (i % 13) as u8).collect();
    let second: Vec<u8> = (0..2_500_000u32).map(|i| (i % 17) as u8).collect();
    let a = h.put(&worker, "g1", &first, &[]).await;
    let b = h.put(&worker, "g1", &second, &[]).await;
    let c = h.put(&worker, "g1", b"will be truncated", &[]).await;
    // Bit flip in the middle of A.
    let path = h.blob_file(&a);
    let mut stored = std::fs::read(&path).expect("blob");
    stored[1_234_567] ^= 0x20;
    std::fs::write(&path, &stored).expect("write");
    // Swap B with a file of the same length holding other bytes.
    let swapped: Vec<u8> = second.iter().map(|b| b.wrapping_add(1)).collect();
    std::fs::write(h.blob_file(&b), &swapped).expect("write");
    // Truncate C.
    std::fs::write(h.blob_file(&c), b"will be").expect("write");
    for id in [a, b] {
        let uri = format!("/v1/artifacts/{id}/content");
        let (status, body) = read_to_end(&h, &uri, &worker.token).await;
        assert_eq!(
            status,
            StatusCode::OK,
            "headers were sent before the mismatch was known"
        );
        assert!(
            body.is_err(),
            "the body must end with an error, not cleanly"
        );
        // Now quarantined: later reads fail at once, ranges too.
        let answer = h
            .call(Method::GET, &uri, Some(&worker.token), Body::empty())
            .await;
        assert_eq!(
            (answer.status, answer.code().as_str()),
            (StatusCode::INTERNAL_SERVER_ERROR, "integrity_failure")
        );
    }
    let answer = h
        .call(
            Method::GET,
            &format!("/v1/artifacts/{c}/content"),
            Some(&worker.token),
            Body::empty(),
        )
        .await;
    assert_eq!(answer.code(), "integrity_failure");
    assert_eq!(h.stats().await.quarantined, 3);
    let events = h
        .call(
            Method::GET,
            "/v1/groups/g1/events",
            Some(&worker.token),
            Body::empty(),
        )
        .await
        .json();
    let failures = events["events"]
        .as_array()
        .expect("events")
        .iter()
        .filter(|e| e["type"] == "artifact.integrity_failure")
        .count();
    assert_eq!(failures, 3, "each quarantine is an audit Event");
    let view = h
        .call(
            Method::GET,
            &format!("/v1/artifacts/{a}"),
            Some(&worker.token),
            Body::empty(),
        )
        .await
        .json();
    assert_eq!(view["quarantined"], json!(true));
    // fsck sees all three.
    let report = h.store.fsck().await.expect("fsck");
    assert!(report.problems.len() >= 3, "{:?}", report.problems);
    // Re-uploading the good bytes repairs the blob.
    let answer = h
        .call(
            Method::PUT,
            &format!("/v1/blobs/{a}"),
            Some(&worker.token),
            first.clone(),
        )
        .await;
    assert!(answer.status.is_success());
    let (status, body) =
        read_to_end(&h, &format!("/v1/artifacts/{a}/content"), &worker.token).await;
    assert_eq!(
        (status, body.map(|b| b == first)),
        (StatusCode::OK, Ok(true))
    );
}

#[tokio::test]
async fn a_range_read_of_a_corrupt_blob_fails_too() {
    let h = harness(Kind::Disk).await;
    let worker = h.agent("w1", "g1", &["worker"]).await;
    let bytes = vec![5u8; 3 * 1024 * 1024];
    let id = h.put(&worker, "g1", &bytes, &[]).await;
    let path = h.blob_file(&id);
    let mut stored = std::fs::read(&path).expect("blob");
    let last = stored.len() - 1;
    stored[last] ^= 1; // outside the requested range
    std::fs::write(&path, &stored).expect("write");
    let request = Request::builder()
        .uri(format!("/v1/artifacts/{id}/content"))
        .header("authorization", format!("Bearer {}", worker.token))
        .header("range", "bytes=0-9")
        .body(Body::empty())
        .expect("request");
    let response = h.app.clone().oneshot(request).await.expect("infallible");
    assert_eq!(response.status(), StatusCode::PARTIAL_CONTENT);
    assert!(
        axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .is_err(),
        "every stored byte is verified"
    );
}

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

/// ART-6: a retrieval URI is a location, never an identity. A manifest whose URI points at
/// other bytes changes nothing about what its digest names.
#[tokio::test]
async fn retrieval_uris_are_never_identities() {
    for kind in KINDS {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let other = h.put(&worker, "g1", b"the other artifact", &[]).await;
        let digests = h.upload(&worker, b"this artifact").await;
        let mut misleading = manifest(&worker, "g1", digests, &[]);
        misleading.retrieval_uri = format!("https://weft.example/v1/artifacts/{other}/content");
        assert_eq!(
            h.publish(&worker, &sign(&worker.key, &misleading))
                .await
                .status,
            StatusCode::CREATED
        );
        let answer = h
            .call(
                Method::GET,
                &format!("/v1/artifacts/{}/content", digests.blake3),
                Some(&worker.token),
                Body::empty(),
            )
            .await;
        assert_eq!(answer.body.as_ref(), b"this artifact", "{kind:?}");
    }
}

#[path = "tests/evidence.rs"]
mod evidence;

#[path = "tests/delivery.rs"]
mod delivery;

#[path = "tests/lineage.rs"]
mod lineage;
