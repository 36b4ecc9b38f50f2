//! The one harness of the in-process HTTP tests: a [`Harness`] (router, store, clock, data
//! directory) per backend, [`Agent`]s with keys and sessions, request builders, signing and
//! setup helpers, and the two checks every suite leans on:
//!
//! - [`backends!`] stamps one named test per backend, so `cargo test upload_then_read` runs
//!   `…::upload_then_read::memory` and `…::upload_then_read::disk`, and a failure names the
//!   backend instead of hiding the other one behind it;
//! - [`refused`] sends a request, checks its problem+json `code`, and checks that nothing
//!   changed: every row of every table hashes the same before and after, and `staging/` is
//!   empty (the engine's promise that a rejected change commits nothing).
//!
//! The tests themselves live in sibling files, one per feature; this file holds no test. It is
//! long (a little over 600 lines) because it is the one place for what every suite shares.

use std::collections::BTreeSet;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode};
use base64::Engine as _;
use bytes::Bytes;
use ed25519_dalek::SigningKey;
use serde_json::{Value, json};
use tower::ServiceExt as _;
use weft_api::dsse::{BASE64, MANIFEST_TYPE, SESSION_TYPE};
use weft_api::manifest::{Classification, Content, Execution, Producer, Tool, ToolKind};
use weft_api::{ArtifactId, Digests, Envelope, Id, Manifest};
use weft_storage::{Fingerprint, ManualClock, Options, Stats, Store};

use crate::config::Config;
use crate::http::{AppState, app};

/// The three backends every suite runs against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    /// object_store `InMemory` and SQLite in memory; lineage walked inline.
    Memory,
    /// `LocalFileSystem` and SQLite on disk; lineage walked on the blocking pool.
    Disk,
    /// Blobs on a Garage node on loopback (one per test process, a key prefix per test) and
    /// SQLite on disk; lineage walked on the blocking pool.
    Garage,
    /// The index and logs in PostgreSQL (a throwaway cluster per test process, a database
    /// per test) and blobs on Garage, as several servers run them.
    Postgres,
}

/// Whether this process can run the PostgreSQL variant: PostgreSQL's binaries and Garage are
/// found. Without them the variant passes after saying it skipped, unless `WEFT_POSTGRES`
/// is set (as `scripts/test` sets it): then it fails.
pub(super) fn postgres_available() -> bool {
    if weft_testkit::shared_postgres().is_some() {
        return garage_available();
    }
    assert!(
        !weft_testkit::postgres_required(),
        "WEFT_POSTGRES is set but no PostgreSQL runs"
    );
    eprintln!("skipped: no PostgreSQL (set WEFT_POSTGRES or run scripts/test)");
    false
}

/// Whether this process can run the Garage variant: a Garage binary is found (and then one
/// node runs for the whole process). Without one the variant passes after saying it skipped,
/// unless `WEFT_GARAGE` is set (as `scripts/test` sets it): then it fails.
pub(super) fn garage_available() -> bool {
    if weft_testkit::shared_garage().is_some() {
        return true;
    }
    assert!(
        !weft_testkit::garage_required(),
        "WEFT_GARAGE is set but no Garage runs"
    );
    eprintln!("skipped: no Garage binary (set WEFT_GARAGE or run scripts/test)");
    false
}

/// Stamps one test per backend: `backends!(async fn name(kind: Kind) { … })` becomes a module
/// `name` holding `#[tokio::test] async fn memory()` and `#[tokio::test] async fn disk()`,
/// both running the body with their [`Kind`]. Attributes (doc comments) go on the module.
macro_rules! backends {
    ($(#[$attribute:meta])* async fn $name:ident($kind:ident: Kind) $body:block) => {
        $(#[$attribute])*
        mod $name {
            use super::*;

            async fn run($kind: Kind) $body

            #[tokio::test]
            async fn memory() {
                run(Kind::Memory).await
            }

            #[tokio::test]
            async fn disk() {
                run(Kind::Disk).await
            }

            #[tokio::test]
            async fn garage() {
                if $crate::http::tests::harness::garage_available() {
                    run(Kind::Garage).await
                }
            }

            #[tokio::test]
            async fn postgres() {
                if $crate::http::tests::harness::postgres_available() {
                    run(Kind::Postgres).await
                }
            }
        }
    };
}
pub(super) use backends;

/// Upload limit in these tests, small enough to exceed cheaply.
pub(super) const MAX_UPLOAD: u64 = 4 * 1024 * 1024;
pub(super) const ADMIN: &str = "admin-test-token";

pub(super) struct Harness {
    pub(super) app: Router,
    pub(super) store: Store,
    pub(super) clock: ManualClock,
    pub(super) dir: tempfile::TempDir,
    /// The backend this harness runs on.
    pub(super) kind: Kind,
    /// Its S3 location and credentials file (the Garage backend), kept for [`restart`].
    pub(super) s3: Option<(weft_storage::S3Location, std::path::PathBuf)>,
    /// Its PostgreSQL database (the PostgreSQL backend), kept for [`restart`].
    pub(super) index: Option<String>,
    /// Group → the session token of the harness's own coordinator there (`work_setup.rs`).
    pub(super) coordinators: std::sync::Mutex<std::collections::HashMap<String, String>>,
    /// The store's fault-injection hooks (off unless a test turns one on).
    pub(super) faults: weft_storage::Faults,
}

pub(super) struct Agent {
    pub(super) id: Id,
    pub(super) key: SigningKey,
    pub(super) token: String,
}

#[derive(Debug)]
pub(super) struct Answer {
    pub(super) status: StatusCode,
    pub(super) headers: HeaderMap,
    pub(super) body: Bytes,
}

impl Answer {
    pub(super) fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.body))
    }

    /// The problem+json code, after checking the body really is problem+json.
    pub(super) fn code(&self) -> String {
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

pub(super) async fn harness(kind: Kind) -> Harness {
    harness_with(kind, |_| {}).await
}

/// A harness that stores every blob as a file (no inline blobs), for tests about the file
/// layout and what happens to files on disk.
pub(super) async fn harness_files(kind: Kind) -> Harness {
    harness_with(kind, |config| config.inline_blob_bytes = 0).await
}

pub(super) async fn harness_with(kind: Kind, adjust: impl FnOnce(&mut Config)) -> Harness {
    let garage = matches!(kind, Kind::Garage | Kind::Postgres)
        .then(|| weft_testkit::shared_garage().expect("garage runs"));
    harness_on(kind, garage, adjust).await
}

/// A harness whose blobs are on node 0 of `garage` (its own, for tests that stop nodes).
pub(super) async fn harness_on_garage(
    garage: &weft_testkit::Garage,
    adjust: impl FnOnce(&mut Config),
) -> Harness {
    harness_on(Kind::Garage, Some(garage), adjust).await
}

async fn harness_on(
    kind: Kind,
    garage: Option<&weft_testkit::Garage>,
    adjust: impl FnOnce(&mut Config),
) -> Harness {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = Config::with_data_dir(dir.path().to_path_buf());
    config.in_memory = kind == Kind::Memory;
    config.max_upload_bytes = MAX_UPLOAD;
    if let Some(garage) = garage {
        on_garage(&mut config, &dir, garage);
    }
    if kind == Kind::Postgres {
        let cluster = weft_testkit::shared_postgres().expect("PostgreSQL runs");
        config.index = Some(cluster.new_database());
    }
    adjust(&mut config);
    let index = config.index.clone();
    let s3 = config.blobs.clone().zip(config.s3_credentials_file.clone());
    let clock = ManualClock::new(chrono::Utc::now());
    let mut options: Options = config.storage_options();
    options.clock = Arc::new(clock.clone());
    // Every test's database writes through the fault-injection VFS, so the whole suite also
    // checks that it is the default VFS while nothing is armed.
    let faults = weft_storage::Faults::with_database().expect("the VFS registers");
    options.faults = faults.clone();
    if kind != Kind::Memory {
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
        kind,
        s3,
        index,
        coordinators: Default::default(),
        faults,
    }
}

/// Points `config` at node 0 of `garage`, under a key prefix of this test's own (the name of
/// its data directory), so tests sharing one Garage never see each other's keys.
fn on_garage(config: &mut Config, dir: &tempfile::TempDir, garage: &weft_testkit::Garage) {
    let prefix = dir
        .path()
        .file_name()
        .map(|name| name.to_string_lossy().trim_start_matches('.').to_owned())
        .unwrap_or_default();
    let location = garage.location(0, &prefix);
    config.blobs = Some(location.parse().expect("a valid location"));
    config.s3_credentials_file = Some(garage.credentials_file().to_path_buf());
}

/// A new server on the same data directory, as after a restart (the disk backend), with the
/// same fault hooks and the default configuration (`harness_with`'s adjustments are not kept).
pub(super) async fn restart(h: Harness) -> Harness {
    let Harness {
        app: old_app,
        store: old_store,
        clock,
        dir,
        kind: old_kind,
        s3,
        index,
        coordinators,
        faults,
    } = h;
    drop(old_app);
    drop(old_store);
    let mut config = Config::with_data_dir(dir.path().to_path_buf());
    config.max_upload_bytes = MAX_UPLOAD;
    if let Some((location, credentials)) = &s3 {
        config.blobs = Some(location.clone());
        config.s3_credentials_file = Some(credentials.clone());
    }
    config.index = index.clone();
    let mut options: weft_storage::Options = config.storage_options();
    options.clock = Arc::new(clock.clone());
    options.faults = faults.clone();
    options.lineage_inline_budget = None;
    let store = weft_storage::Store::open(options)
        .await
        .expect("store reopens");
    let state = AppState::new(store.clone(), ADMIN, &config);
    Harness {
        app: app(state),
        store,
        clock,
        dir,
        kind: old_kind,
        s3,
        index,
        coordinators,
        faults,
    }
}

/// Sends `request`, asserts it was refused with the problem+json `expected_code`, and asserts
/// that it changed nothing: every table's rows hash the same before and after, and the store's
/// `staging/` area is empty. Returns the answer for any further assertion (status, headers).
pub(super) async fn refused(h: &Harness, request: Request<Body>, expected_code: &str) -> Answer {
    let mut what = format!("{} {}", request.method(), request.uri());
    what.truncate(160); // some URIs carry a 10 KiB id
    let before = h.fingerprint().await;
    let answer = h.send(request).await;
    assert_eq!(answer.code(), expected_code, "{what}: {answer:?}");
    assert_unchanged(&before, &h.fingerprint().await, &what);
    answer
}

/// Panics, naming the tables that changed and their row counts, unless the two fingerprints
/// are equal but for `blob_disposals`: on a shared index a refused upload deletes the bytes it
/// placed and records that for other servers' uploads (`rows/blob_disposals.rs`).
pub(super) fn assert_unchanged(before: &Fingerprint, after: &Fingerprint, context: &str) {
    let skip = ["blob_disposals"];
    let (before, after) = (&before.without(&skip), &after.without(&skip));
    if before == after {
        return;
    }
    let names: BTreeSet<&String> = before.tables.keys().chain(after.tables.keys()).collect();
    let changed: Vec<String> = names
        .into_iter()
        .filter(|name| before.tables.get(*name) != after.tables.get(*name))
        .map(|name| {
            let rows = |f: &Fingerprint| f.tables.get(name).map(|(rows, _)| *rows);
            format!("{name} (rows {:?} -> {:?})", rows(before), rows(after))
        })
        .collect();
    panic!(
        "{context} changed tables {changed:?}; blob objects {} -> {}, staging objects {} -> {}",
        before.blob_objects, after.blob_objects, before.staging_objects, after.staging_objects
    );
}

pub(super) fn digest_of(bytes: &[u8]) -> Digests {
    weft_api::digest::Hasher::digest(bytes)
}

/// A request with an optional bearer token.
pub(super) fn request(
    method: Method,
    uri: &str,
    token: Option<&str>,
    body: impl Into<Body>,
) -> Request<Body> {
    let mut request = Request::builder().method(method).uri(uri);
    if let Some(token) = token {
        request = request.header("authorization", format!("Bearer {token}"));
    }
    request.body(body.into()).expect("valid request")
}

/// A JSON request as `token`, with any `extra` headers.
pub(super) fn json_request(
    method: Method,
    uri: &str,
    token: &str,
    body: Value,
    extra: &[(&str, &str)],
) -> Request<Body> {
    let mut request = Request::builder()
        .method(method)
        .uri(uri)
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", "application/json");
    for (name, value) in extra {
        request = request.header(*name, *value);
    }
    request
        .body(Body::from(body.to_string()))
        .expect("valid request")
}

/// A JSON request as the admin.
pub(super) fn admin_request(method: Method, uri: &str, body: Value) -> Request<Body> {
    json_request(method, uri, ADMIN, body, &[])
}

/// `envelope` published by `agent`.
pub(super) fn publish_request(agent: &Agent, envelope: &Envelope) -> Request<Body> {
    request(
        Method::POST,
        "/v1/artifacts",
        Some(&agent.token),
        serde_json::to_vec(envelope).expect("json"),
    )
}

/// A session request for `agent_id` in `group`, signed with `key`.
pub(super) fn session_request(
    key: &SigningKey,
    agent_id: &str,
    group: &str,
    issued_at: String,
    nonce: &str,
) -> Request<Body> {
    let payload =
        json!({"agentId": agent_id, "groupId": group, "issuedAt": issued_at, "nonce": nonce});
    let envelope = Envelope::sign(key, SESSION_TYPE, payload.to_string().as_bytes());
    request(
        Method::POST,
        "/v1/sessions",
        None,
        serde_json::to_vec(&envelope).expect("json"),
    )
}

impl Harness {
    pub(super) async fn send(&self, request: Request<Body>) -> Answer {
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

    pub(super) async fn call(
        &self,
        method: Method,
        uri: &str,
        token: Option<&str>,
        body: impl Into<Body>,
    ) -> Answer {
        self.send(request(method, uri, token, body)).await
    }

    pub(super) async fn admin_json(&self, method: Method, uri: &str, body: Value) -> Answer {
        self.send(admin_request(method, uri, body)).await
    }

    /// A JSON request as `token`, with any `extra` headers.
    pub(super) async fn json_as(
        &self,
        method: Method,
        uri: &str,
        token: &str,
        body: Value,
        extra: &[(&str, &str)],
    ) -> Answer {
        self.send(json_request(method, uri, token, body, extra))
            .await
    }

    /// A GET as `agent` that must succeed; its JSON body.
    /// Group g1's Events of type `kind` (its first 1,000), as `reader` reads them.
    pub(super) async fn events_of(&self, reader: &Agent, kind: &str) -> Vec<Value> {
        let events = self
            .get_json(reader, "/v1/groups/g1/events?limit=1000")
            .await;
        events["events"]
            .as_array()
            .expect("events")
            .iter()
            .filter(|e| e["type"] == kind)
            .cloned()
            .collect()
    }

    pub(super) async fn get_json(&self, agent: &Agent, uri: &str) -> Value {
        let answer = self
            .call(Method::GET, uri, Some(&agent.token), Body::empty())
            .await;
        assert_eq!(answer.status, StatusCode::OK, "{uri}: {answer:?}");
        answer.json()
    }

    pub(super) async fn stats(&self) -> Stats {
        self.store.stats().await.expect("stats")
    }

    /// The store's fingerprint once `staging/` is empty; panics if it does not empty.
    pub(super) async fn fingerprint(&self) -> Fingerprint {
        self.assert_staging_empty().await;
        self.store.fingerprint().await.expect("fingerprint")
    }

    /// Registers `agent_id`, makes it a member of `group` with `roles`, opens a session.
    pub(super) async fn agent(&self, agent_id: &str, group: &str, roles: &[&str]) -> Agent {
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

    /// Makes `agent` a member of `group` too and opens a session there: the same Agent acting
    /// in another Group (a session acts in its own Group only).
    pub(super) async fn join(&self, agent: &Agent, group: &str, roles: &[&str]) -> Agent {
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
            .admin_json(
                Method::PUT,
                &format!("/v1/admin/groups/{group}/members/{}", agent.id),
                json!({"roles": roles}),
            )
            .await;
        assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
        Agent {
            id: agent.id.clone(),
            key: agent.key.clone(),
            token: self.session(&agent.key, agent.id.as_str(), group).await,
        }
    }

    pub(super) async fn session(&self, key: &SigningKey, agent_id: &str, group: &str) -> String {
        let answer = self
            .open_session(key, agent_id, group, self.clock_now(), &random_nonce())
            .await;
        assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
        answer.json()["token"].as_str().expect("token").to_owned()
    }

    pub(super) fn clock_now(&self) -> String {
        weft_storage::Clock::now(&self.clock).to_rfc3339()
    }

    pub(super) async fn open_session(
        &self,
        key: &SigningKey,
        agent_id: &str,
        group: &str,
        issued_at: String,
        nonce: &str,
    ) -> Answer {
        self.send(session_request(key, agent_id, group, issued_at, nonce))
            .await
    }

    pub(super) async fn upload(&self, agent: &Agent, bytes: &[u8]) -> Digests {
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

    /// Publishes `envelope` as `agent`, first making sure the WorkItem it names exists and
    /// that `agent` holds its current Execution Lease ([`Harness::ensure_lease`]). When the
    /// envelope is exactly `sign(&agent.key, manifest)` of a manifest `agent` produced, its
    /// `execution` is rewritten to that lease and epoch and re-signed with `agent.key` (so
    /// tests build manifests without knowing lease ids); any other envelope (another
    /// producer, a broken signature, non-canonical bytes) is sent as it is.
    pub(super) async fn publish(&self, agent: &Agent, envelope: &Envelope) -> Answer {
        let envelope = self.bind_to_lease(agent, envelope).await;
        self.send(publish_request(agent, &envelope)).await
    }

    /// Uploads `bytes` and publishes a manifest for them in `group`; returns the artifact id.
    /// Four artifacts of `agent` in `group`, then the log compacted to its newest Event: the
    /// Group has one snapshot (a state document and an Event archive).
    pub(super) async fn compacted(&self, agent: &Agent, group: &str) {
        for n in 0..4 {
            self.put(agent, group, format!("artifact {n}").as_bytes(), &[])
                .await;
        }
        self.store
            .compaction()
            .compact(weft_storage::Retention::events(1))
            .await
            .expect("compaction");
    }

    pub(super) async fn put(
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

    /// Like [`Harness::put`], for `work_item` instead of the default `work-1`.
    pub(super) async fn put_in(
        &self,
        agent: &Agent,
        group: &str,
        bytes: &[u8],
        sources: &[ArtifactId],
        work_item: &str,
    ) -> ArtifactId {
        let digests = self.upload(agent, bytes).await;
        let mut manifest = manifest(agent, group, digests, sources);
        manifest.work_item_id = Id::parse("w", work_item).expect("id");
        let answer = self.publish(agent, &sign(&agent.key, &manifest)).await;
        assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
        digests.blake3
    }

    /// Replaces the inline copy of `id` in the disk backend's index with `bytes`, behind the
    /// server's back (a corrupted row).
    pub(super) fn tamper_inline(&self, id: &ArtifactId, bytes: &[u8]) {
        let index = self.dir.path().join("index.sqlite");
        let changed =
            weft_storage::bench_support::tamper::inline_bytes(&index, id, bytes).expect("tamper");
        assert_eq!(changed, 1, "{id} is stored inline");
    }

    /// Overwrites the SHA-256 digest the disk backend's index records for `id` with
    /// `sha256`, behind the server's back (a corrupted row whose bytes still match their
    /// address).
    pub(super) fn tamper_sha256(&self, id: &ArtifactId, sha256: [u8; 32]) {
        let index = self.dir.path().join("index.sqlite");
        let changed =
            weft_storage::bench_support::tamper::sha256(&index, id, sha256).expect("tamper");
        assert_eq!(changed, 1, "{id} has a blob row");
    }

    /// Where the disk backend keeps `id`'s bytes (DESIGN §8.1 layout).
    pub(super) fn blob_file(&self, id: &ArtifactId) -> std::path::PathBuf {
        let hex = id.hex();
        self.dir
            .path()
            .join("blobs/blake3")
            .join(&hex[..2])
            .join(&hex)
    }

    /// Replaces the stored bytes of blob `id` behind the server's back, as a failing disk or
    /// a tampered bucket would: its file on the disk backend, its object on Garage.
    pub(super) async fn overwrite_blob(&self, id: &ArtifactId, bytes: &[u8]) {
        let on_garage = matches!(self.kind, Kind::Garage | Kind::Postgres);
        let Some((location, _)) = self.s3.as_ref().filter(|_| on_garage) else {
            std::fs::write(self.blob_file(id), bytes).expect("blob file written");
            return;
        };
        use object_store::ObjectStoreExt as _;
        let bucket = object_store::aws::AmazonS3Builder::new()
            .with_bucket_name(&location.bucket)
            .with_region(&location.region)
            .with_endpoint(location.endpoint.clone().expect("Garage's endpoint"))
            .with_allow_http(true)
            .with_access_key_id(weft_testkit::KEY_ID)
            .with_secret_access_key(weft_testkit::KEY_SECRET)
            .build()
            .expect("an S3 client");
        let hex = id.hex();
        let key = format!("{}/blobs/blake3/{}/{hex}", location.prefix, &hex[..2]);
        bucket
            .put(&object_store::path::Path::from(key), bytes.to_vec().into())
            .await
            .expect("object overwritten");
    }

    /// Waits (bounded) until no staging object is left: cancelled uploads clean up on a
    /// spawned task, so the check polls instead of assuming an order.
    pub(super) async fn assert_staging_empty(&self) {
        for _ in 0..200 {
            if self.stats().await.staging_objects == 0 {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        panic!("staging still holds {:?}", self.stats().await);
    }
}

pub(super) fn random_nonce() -> String {
    hex::encode(rand::random::<[u8; 16]>())
}

/// A valid manifest by `agent` for `digests` in `group`, mission `mission-1`, work item `work-1`.
/// The default Mission or WorkItem id of a test manifest in `group`: `base` in g1, and
/// `base-group` elsewhere (Mission and WorkItem ids are unique in the whole store).
pub(super) fn default_id(base: &str, group: &str) -> String {
    if group == "g1" {
        base.to_owned()
    } else {
        format!("{base}-{group}")
    }
}

pub(super) fn manifest(
    agent: &Agent,
    group: &str,
    digests: Digests,
    sources: &[ArtifactId],
) -> Manifest {
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
        mission_id: Id::parse("m", &default_id("mission-1", group)).expect("id"),
        group_id: Id::parse("g", group).expect("id"),
        work_item_id: Id::parse("w", &default_id("work-1", group)).expect("id"),
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

pub(super) fn sign(key: &SigningKey, manifest: &Manifest) -> Envelope {
    Envelope::sign(
        key,
        MANIFEST_TYPE,
        &serde_json::to_vec(manifest).expect("json"),
    )
}

/// Breaks an envelope's signature in the given way.
pub(super) fn with_sig(envelope: &Envelope, mutate: impl FnOnce(Vec<u8>) -> Vec<u8>) -> Envelope {
    let mut envelope = envelope.clone();
    let sig = BASE64
        .decode(&envelope.signatures[0].sig)
        .expect("own encoding");
    envelope.signatures[0].sig = BASE64.encode(mutate(sig));
    envelope
}

/// S + L: the same signature with a non-canonical scalar, which verify_strict must refuse.
pub(super) fn s_plus_l(mut sig: Vec<u8>) -> Vec<u8> {
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
