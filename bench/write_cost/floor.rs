//! The floor of a signed durable write on this machine (issue #44), for `write_cost.rs`: the
//! least any server can do to answer a signed Command durably, run as its own process (this
//! bench's binary again, with [`FLOOR_DIR`] set) so its CPU is read from `/proc` exactly as
//! weft's is. Per request it does what no Authority can skip, with the same crates as weft:
//! HTTP/1.1 (axum on hyper, tokio's multi-threaded runtime, mimalloc), the envelope's JSON,
//! the same signature check (`Envelope::verify`), the payload's JSON, and the Command
//! appended to a SQLite log in WAL mode with `synchronous = FULL`, answered only after its
//! commit. A writer thread commits whatever has gathered since its last commit in one
//! transaction (a group commit, as weft's writer does); the answer is DESIGN §10's
//! `201 {commandId, events: [{sequence, type}]}` without a `state`. What it leaves out is what
//! weft adds to that: sessions and epochs, roles, the lease and its fencing, the WorkItem's
//! state machine, idempotency, the Event's hash-chain and Merkle tree, the view it answers.

use std::sync::mpsc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use ed25519_dalek::VerifyingKey;
use tokio::sync::oneshot;
use weft_api::Envelope;
use weft_api::work::COMMAND_TYPE;

/// Set to a directory: this process is the floor server, with its log there.
pub(crate) const FLOOR_DIR: &str = "WEFT_BENCH_FLOOR_DIR";
/// The hex of the one public key the floor server accepts.
const FLOOR_KEY: &str = "WEFT_BENCH_FLOOR_KEY";

/// One Command for the writer: its JSON payload and where to send its sequence.
type Append = (Vec<u8>, oneshot::Sender<i64>);

#[derive(Clone)]
struct Floor {
    key: VerifyingKey,
    appends: mpsc::Sender<Append>,
}

/// Starts the floor server as a child of this process and answers it with its base URL.
pub(crate) fn start(dir: &std::path::Path, key: &VerifyingKey) -> (super::weft::Process, String) {
    let port = super::weft::free_port();
    let child = std::process::Command::new(std::env::current_exe().expect("this bench"))
        .env(FLOOR_DIR, dir)
        .env(FLOOR_KEY, hex(key.as_bytes()))
        .env("WEFT_BENCH_FLOOR_PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("the floor server starts");
    super::weft::wait_until_listening(port);
    (
        super::weft::Process(child),
        format!("http://127.0.0.1:{port}"),
    )
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> [u8; 32] {
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).expect("hex key");
    }
    out
}

/// The floor server's `main`: serves until its parent kills it.
pub(crate) fn serve(dir: &str) {
    let key = VerifyingKey::from_bytes(&unhex(&std::env::var(FLOOR_KEY).expect("key")))
        .expect("a public key");
    let port: u16 = std::env::var("WEFT_BENCH_FLOOR_PORT")
        .expect("port")
        .parse()
        .expect("a port");
    let conn = rusqlite::Connection::open(std::path::Path::new(dir).join("floor.db"))
        .expect("the floor's log");
    conn.execute_batch(
        "PRAGMA journal_mode = WAL;
         PRAGMA synchronous = FULL;
         CREATE TABLE IF NOT EXISTS log (sequence INTEGER PRIMARY KEY, payload BLOB NOT NULL);",
    )
    .expect("schema");
    let (appends, pending) = mpsc::channel::<Append>();
    std::thread::spawn(move || write(conn, pending));
    let app = axum::Router::new()
        .route("/v1/groups/{group}/commands", axum::routing::post(command))
        .with_state(Floor { key, appends });
    tokio::runtime::Runtime::new()
        .expect("runtime")
        .block_on(async move {
            let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
                .await
                .expect("bind");
            axum::serve(listener, app).await.expect("serve");
        });
}

/// Commits every Command gathered since the last commit in one transaction, then answers each.
fn write(mut conn: rusqlite::Connection, pending: mpsc::Receiver<Append>) {
    while let Ok(first) = pending.recv() {
        let mut batch = vec![first];
        batch.extend(pending.try_iter());
        let tx = conn.transaction().expect("begin");
        let mut sequences = Vec::with_capacity(batch.len());
        {
            let mut insert = tx
                .prepare_cached("INSERT INTO log (payload) VALUES (?1)")
                .expect("prepare");
            for (payload, _) in &batch {
                insert.execute([payload]).expect("append");
                sequences.push(tx.last_insert_rowid());
            }
        }
        tx.commit().expect("commit");
        for ((_, answer), sequence) in batch.into_iter().zip(sequences) {
            let _ = answer.send(sequence);
        }
    }
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
struct Payload {
    command_id: String,
    #[serde(rename = "type")]
    kind: String,
    #[allow(dead_code)] // parsed, as any server must
    payload: serde_json::Value,
}

async fn command(State(floor): State<Floor>, body: Bytes) -> axum::response::Response {
    let Ok(envelope) = serde_json::from_slice::<Envelope>(&body) else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let Ok(payload) = envelope.verify(COMMAND_TYPE, &floor.key) else {
        return StatusCode::UNAUTHORIZED.into_response();
    };
    let payload = payload.into_inner();
    let Ok(parsed) = serde_json::from_slice::<Payload>(&payload) else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let (answer, sequence) = oneshot::channel();
    if floor.appends.send((payload, answer)).is_err() {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    }
    let Ok(sequence) = sequence.await else {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    };
    (
        StatusCode::CREATED,
        axum::Json(serde_json::json!({
            "commandId": parsed.command_id,
            "events": [{"sequence": sequence, "type": parsed.kind}],
        })),
    )
        .into_response()
}
