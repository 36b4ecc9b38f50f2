//! `agent.key`, an Agent's signing key on disk (`weft keygen` writes it, mode 0600): the
//! secret key with its public half and key id for convenience. Read by the CLI from the weft
//! home and by `weft worker` from the path its `worker.toml` names.

use std::path::Path;

use anyhow::Context as _;
use base64::Engine as _;
use ed25519_dalek::SigningKey;
use serde::{Deserialize, Serialize};
use weft_api::dsse::BASE64;

/// The file's JSON.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct KeyFile {
    pub(crate) secret_key: String,
    pub(crate) public_key: String,
    pub(crate) keyid: String,
}

/// The signing key in the `agent.key` file at `path`.
pub(crate) fn read(path: &Path) -> anyhow::Result<SigningKey> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading {} (run `weft keygen`)", path.display()))?;
    let file: KeyFile =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    let secret: [u8; 32] = BASE64
        .decode(&file.secret_key)
        .ok()
        .and_then(|bytes| bytes.try_into().ok())
        .context("agent.key: secretKey is not base64 of 32 bytes")?;
    Ok(SigningKey::from_bytes(&secret))
}
