//! The agent's key and the files under the weft home (`WEFT_HOME`, default `~/.weft`):
//! `weft keygen`, reading `agent.key` back, and writing private files there.
//!
//! `session.json` lives in the same directory but belongs to `session`; it is written through
//! `write_private` here so both files get the same 0600 treatment.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use base64::Engine as _;
use ed25519_dalek::SigningKey;
use weft_api::KeyId;
use weft_api::dsse::BASE64;

use super::args::ClientArgs;

impl ClientArgs {
    /// The weft home: `--home`/`WEFT_HOME`, else `~/.weft`.
    pub(super) fn home(&self) -> anyhow::Result<PathBuf> {
        if let Some(home) = &self.home {
            return Ok(home.clone());
        }
        let user_home = std::env::var_os("HOME").context("set WEFT_HOME or HOME")?;
        Ok(PathBuf::from(user_home).join(".weft"))
    }

    /// The agent's signing key, from `agent.key` in the weft home.
    pub(super) fn key(&self) -> anyhow::Result<SigningKey> {
        crate::keyfile::read(&self.home()?.join("agent.key"))
    }
}

/// `weft keygen`: a fresh key in `agent.key`; refuses to replace one without `--force`.
pub(super) fn keygen(client: &ClientArgs, force: bool, json: bool) -> anyhow::Result<()> {
    let path = client.home()?.join("agent.key");
    if path.exists() && !force {
        bail!("{} exists; pass --force to replace it", path.display());
    }
    let key = weft_api::dsse::generate_key();
    let public = key.verifying_key();
    let file = crate::keyfile::KeyFile {
        secret_key: BASE64.encode(key.to_bytes()),
        public_key: BASE64.encode(public.as_bytes()),
        keyid: KeyId::of(&public).to_string(),
    };
    write_private(&path, &serde_json::to_vec_pretty(&file)?)?;
    eprintln!("wrote {}", path.display());
    if json {
        let out = serde_json::json!({
            "path": path.display().to_string(),
            "publicKey": file.public_key,
            "keyid": file.keyid,
        });
        println!("{out}");
        return Ok(());
    }
    println!("publicKey {}", file.public_key);
    println!("keyid     {}", file.keyid);
    Ok(())
}

/// Writes `bytes` to `path` readable by its owner only (mode 0600 on Unix): the key and the
/// session token are secrets. Creates the weft home if it does not exist yet.
pub(super) fn write_private(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write as _;
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    let mut file = options
        .open(path)
        .with_context(|| format!("writing {}", path.display()))?;
    file.write_all(bytes)?;
    file.sync_all()?;
    Ok(())
}
