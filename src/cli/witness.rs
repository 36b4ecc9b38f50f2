//! `weft witness`: a C2SP tlog-witness (c2sp.org/tlog-witness) for weft's per-Group logs
//! (issue #45). One `POST /add-checkpoint`; the rules are `weft_api::tlog::witness::decide`.
//!
//! - **Which logs**: `--log VKEY` names one log by its verifier key (origin and key);
//!   `--authority-key KEY` trusts every Group of the Authority with that key (origins
//!   `weft/<16 hex of its keyid>/<group>`). Any other origin is `404`.
//! - **State**: per origin, the tree it cosigned last, in `DATA_DIR/witness-state.json`,
//!   replaced whole (a new file, fsynced, renamed over the old, the directory fsynced) before
//!   a cosignature goes out, under one lock: two requests for one log never both cosign, and a
//!   crash never forgets a tree it cosigned. A state file that does not parse stops the start
//!   (a witness that lost its state must be retired, not restarted empty).
//! - **Key**: `DATA_DIR/witness.key` (created 0600 on first start), in `weft keygen`'s format.
//! - **Answers** (tlog-witness): 200 with the cosignature line; 409 `text/x.tlog.size` with
//!   the size it holds; 403 not signed by the log's key; 404 unknown log; 422 not consistent;
//!   400 malformed; 413 over 16 KiB.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use ed25519_dalek::{SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};
use weft_api::tlog;
use weft_api::tlog::witness::{self, AddCheckpoint, Decision, LogState};

/// `weft witness`'s flags.
#[derive(clap::Args, Debug)]
pub(super) struct WitnessArgs {
    /// Directory holding `witness.key` and `witness-state.json`.
    #[arg(long, default_value = "weft-witness")]
    data_dir: PathBuf,
    /// Address to listen on; `127.0.0.1:0` picks a free port.
    #[arg(long, default_value = "127.0.0.1:7171")]
    listen: SocketAddr,
    /// The witness's name, its cosignatures' key name (e.g. `witness.example/w1`).
    #[arg(long)]
    name: String,
    /// A log to witness, by its verifier key `ORIGIN+ID+BASE64` (repeatable).
    #[arg(long = "log")]
    logs: Vec<String>,
    /// An Authority's public key (base64, `GET /v1/authority/keys`): every Group log it signs
    /// is witnessed (repeatable).
    #[arg(long = "authority-key")]
    authority_keys: Vec<String>,
}

/// What the witness remembers: per origin, the tree it cosigned last.
#[derive(Default, Serialize, Deserialize)]
struct Remembered {
    logs: BTreeMap<String, Held>,
}

#[derive(Clone, Copy, Serialize, Deserialize)]
struct Held {
    size: u64,
    #[serde(with = "b64_32")]
    root: [u8; 32],
}

mod b64_32 {
    use base64::Engine as _;
    pub(super) fn serialize<S: serde::Serializer>(
        bytes: &[u8; 32],
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(bytes))
    }
    pub(super) fn deserialize<'de, D: serde::Deserializer<'de>>(
        d: D,
    ) -> Result<[u8; 32], D::Error> {
        let text: String = serde::Deserialize::deserialize(d)?;
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .ok()
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| serde::de::Error::custom("not base64 of 32 bytes"))
    }
}

struct Witness {
    name: String,
    key: SigningKey,
    logs: BTreeMap<String, VerifyingKey>,
    authorities: Vec<VerifyingKey>,
    state_path: PathBuf,
    state: std::sync::Mutex<Remembered>,
}

impl Witness {
    /// The key that signs `origin`'s checkpoints, if this witness witnesses it.
    fn log_key(&self, origin: &str) -> Option<VerifyingKey> {
        if let Some(key) = self.logs.get(origin) {
            return Some(*key);
        }
        let group = origin.strip_prefix("weft/")?.split_once('/')?.1;
        self.authorities
            .iter()
            .find(|key| tlog::origin(key, group) == origin)
            .copied()
    }
}

pub(super) async fn run(args: WitnessArgs) -> anyhow::Result<()> {
    std::fs::create_dir_all(&args.data_dir)
        .with_context(|| format!("creating {}", args.data_dir.display()))?;
    let key = load_or_create_key(&args.data_dir.join("witness.key"))?;
    let mut logs = BTreeMap::new();
    for vkey in &args.logs {
        let (origin, key) =
            tlog::parse_verifier_key(vkey).map_err(|e| anyhow::anyhow!("--log: {}", e.message))?;
        logs.insert(origin, key);
    }
    let authorities = args
        .authority_keys
        .iter()
        .map(|text| {
            weft_api::dsse::parse_public_key(text)
                .map_err(|e| anyhow::anyhow!("--authority-key: {}", e.message))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    anyhow::ensure!(
        !logs.is_empty() || !authorities.is_empty(),
        "name a log to witness (--log VKEY or --authority-key KEY)"
    );
    // The name must be a note key name, which the vkey's parse checks.
    let vkey = witness::witness_vkey(&args.name, &key.verifying_key());
    witness::WitnessKey::parse(&vkey).map_err(|e| anyhow::anyhow!("--name: {}", e.message))?;
    let state_path = args.data_dir.join("witness-state.json");
    let state = match std::fs::read(&state_path) {
        Ok(bytes) => serde_json::from_slice(&bytes).with_context(|| {
            format!(
                "{} does not parse: a witness that lost its state must be retired",
                state_path.display()
            )
        })?,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Remembered::default(),
        Err(error) => {
            return Err(error).with_context(|| format!("reading {}", state_path.display()));
        }
    };
    let witness = Arc::new(Witness {
        name: args.name,
        key,
        logs,
        authorities,
        state_path,
        state: std::sync::Mutex::new(state),
    });
    let app = axum::Router::new()
        .route("/add-checkpoint", axum::routing::post(add_checkpoint))
        .layer(DefaultBodyLimit::max(witness::MAX_REQUEST))
        .with_state(witness);
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("binding {}", args.listen))?;
    println!("listening on http://{}", listener.local_addr()?);
    println!("vkey {vkey}");
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(())
}

async fn add_checkpoint(State(witness): State<Arc<Witness>>, body: Bytes) -> Response {
    let text = |status: StatusCode, message: String| (status, message).into_response();
    let request = match AddCheckpoint::parse(&body) {
        Ok(request) => request,
        Err(rejection) => return text(StatusCode::BAD_REQUEST, rejection.message),
    };
    let origin = request
        .note
        .split(|b| *b == b'\n')
        .next()
        .and_then(|line| std::str::from_utf8(line).ok())
        .unwrap_or("")
        .to_owned();
    let Some(log_key) = witness.log_key(&origin) else {
        return text(
            StatusCode::NOT_FOUND,
            format!("no log {origin:?} is witnessed here"),
        );
    };
    // Decided, remembered and signed in one blocking task under the lock: a request the
    // client abandons cannot leave the state half-saved while another request decides.
    let witness = Arc::clone(&witness);
    let outcome = tokio::task::spawn_blocking(move || {
        decide_and_remember(&witness, &request, &origin, &log_key)
    })
    .await;
    let decision = match outcome {
        Ok(Ok(decision)) => decision,
        Ok(Err(error)) => {
            return text(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("the state was not saved: {error}"),
            );
        }
        Err(error) => return text(StatusCode::INTERNAL_SERVER_ERROR, error.to_string()),
    };
    match decision {
        Answer::Cosigned(line) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            line,
        )
            .into_response(),
        Answer::Refused(Decision::Conflict { size }) => (
            StatusCode::CONFLICT,
            [(header::CONTENT_TYPE, "text/x.tlog.size")],
            format!("{size}\n"),
        )
            .into_response(),
        Answer::Refused(Decision::Unsigned) => text(
            StatusCode::FORBIDDEN,
            "the checkpoint is not signed by the log's key".into(),
        ),
        Answer::Refused(Decision::Inconsistent) => text(
            StatusCode::UNPROCESSABLE_ENTITY,
            "the checkpoint does not extend the tree this witness cosigned".into(),
        ),
        Answer::Refused(Decision::Malformed(why)) => text(StatusCode::BAD_REQUEST, why),
        Answer::Refused(Decision::Cosign { .. }) => {
            text(StatusCode::INTERNAL_SERVER_ERROR, "unreachable".into())
        }
    }
}

/// What the witness answers: its cosignature line, or why not.
enum Answer {
    Cosigned(String),
    Refused(Decision),
}

/// Decides on `request`; for a cosignature, saves the new state whole (before anything is
/// answered) and signs. Runs on a blocking thread holding the state's lock throughout.
fn decide_and_remember(
    witness: &Witness,
    request: &AddCheckpoint,
    origin: &str,
    log_key: &VerifyingKey,
) -> std::io::Result<Answer> {
    let mut state = witness
        .state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let held = state.logs.get(origin).map(|h| LogState {
        size: h.size,
        root: h.root,
    });
    let (head, body) = match witness::decide(request, log_key, origin, held) {
        Decision::Cosign { state: head, body } => (head, body),
        refused => return Ok(Answer::Refused(refused)),
    };
    let mut next = Remembered {
        logs: state.logs.clone(),
    };
    next.logs.insert(
        origin.to_owned(),
        Held {
            size: head.size,
            root: head.root,
        },
    );
    let bytes = serde_json::to_vec_pretty(&next).map_err(std::io::Error::other)?;
    // Remembered before answered: a crash after this never cosigns a fork of it.
    replace_whole(&witness.state_path, &bytes)?;
    *state = next;
    let time = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    Ok(Answer::Cosigned(witness::cosign(
        &witness.key,
        &witness.name,
        time,
        &body,
    )))
}

/// Replaces `path` with `bytes` whole: a new file, fsynced, renamed over it, the directory
/// fsynced.
fn replace_whole(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    let temporary = path.with_extension("json.new");
    let mut file = std::fs::File::create(&temporary)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    std::fs::rename(&temporary, path)?;
    if let Some(parent) = path.parent() {
        std::fs::File::open(parent)?.sync_all()?;
    }
    Ok(())
}

/// The witness key, created on first start in `weft keygen`'s format.
fn load_or_create_key(path: &Path) -> anyhow::Result<SigningKey> {
    #[derive(Serialize, Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct KeyFile {
        secret_key: String,
        public_key: String,
    }
    let b64 = base64::engine::general_purpose::STANDARD;
    match std::fs::read(path) {
        Ok(bytes) => {
            let file: KeyFile = serde_json::from_slice(&bytes)
                .with_context(|| format!("parsing {}", path.display()))?;
            let secret: [u8; 32] = b64
                .decode(&file.secret_key)
                .ok()
                .and_then(|b| b.try_into().ok())
                .with_context(|| {
                    format!("{}: secretKey is not base64 of 32 bytes", path.display())
                })?;
            Ok(SigningKey::from_bytes(&secret))
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            let key = weft_api::dsse::generate_key();
            let file = KeyFile {
                secret_key: b64.encode(key.to_bytes()),
                public_key: b64.encode(key.verifying_key().as_bytes()),
            };
            super::keys::write_private(path, &serde_json::to_vec_pretty(&file)?)?;
            Ok(key)
        }
        Err(error) => Err(error).with_context(|| format!("reading {}", path.display())),
    }
}
