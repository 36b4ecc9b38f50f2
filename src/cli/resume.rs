//! `weft put`'s resumable path: a file larger than `--chunk-size` goes up in chunks through an
//! upload session (`/v1/uploads`). The session's id is remembered in `uploads.json` in the
//! weft home, keyed by the file's path, size and modification time, so the same `weft put`
//! run again after an interruption asks the server for its durable offset (HEAD) and sends
//! only the rest; the progress bar starts there.
//!
//! The client hashes the file itself (BLAKE3, re-reading the part already sent when it
//! resumes) and names the digest at the finish; the server re-hashes and refuses a mismatch.
//! Memory stays at one chunk. A changed file has another key, so it never resumes a stale
//! session; the server sweeps abandoned ones.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context as _, bail};
use indicatif::ProgressBar;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt as _, AsyncSeekExt as _};
use weft_api::client::Client;
use weft_api::views::UploadReceipt;
use weft_api::{ArtifactId, Digest};

use super::keys::write_private;
use super::session::SessionFile;

const FILE: &str = "uploads.json";
/// Test hook: stop (with an error) after this many chunks, as an interruption would.
const STOP_AFTER: &str = "WEFT_TEST_STOP_AFTER_CHUNKS";

/// `uploads.json`: upload sessions in progress, by file key.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Remembered {
    uploads: BTreeMap<String, Entry>,
}

/// A session is resumed only by the same server, Agent and Group that started it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Entry {
    server: String,
    agent_id: String,
    group_id: String,
    upload_id: String,
}

impl Remembered {
    fn load(home: &Path) -> anyhow::Result<Self> {
        let path = home.join(FILE);
        match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .with_context(|| format!("parsing {}", path.display())),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(error) => Err(error).with_context(|| format!("reading {}", path.display())),
        }
    }

    fn save(&self, home: &Path) -> anyhow::Result<()> {
        write_private(&home.join(FILE), &serde_json::to_vec_pretty(self)?)
    }
}

/// The file's key: its canonical path, size and modification time (nanoseconds).
fn file_key(path: &Path) -> anyhow::Result<(String, u64)> {
    let canonical =
        std::fs::canonicalize(path).with_context(|| format!("reading {}", path.display()))?;
    let metadata = std::fs::metadata(&canonical)?;
    let modified = metadata
        .modified()?
        .duration_since(std::time::UNIX_EPOCH)
        .map(|since| since.as_nanos())
        .unwrap_or_default();
    let size = metadata.len();
    Ok((format!("{} {size} {modified}", canonical.display()), size))
}

/// Uploads `path` in chunks of `chunk_size`, resuming a remembered session when the server
/// still holds it.
pub(super) async fn upload(
    api: &Client,
    home: &Path,
    session: &SessionFile,
    path: &Path,
    chunk_size: u64,
    bar: &ProgressBar,
) -> anyhow::Result<UploadReceipt> {
    let (key, size) = file_key(path)?;
    let mut remembered = Remembered::load(home)?;
    let wanted = |upload_id: String| Entry {
        server: api.base().to_owned(),
        agent_id: session.agent_id.clone(),
        group_id: session.group_id.clone(),
        upload_id,
    };
    let mut resumed = None;
    if let Some(entry) = remembered.uploads.get(&key)
        && *entry == wanted(entry.upload_id.clone())
        && let Some(offset) = api.upload_offset(&entry.upload_id).await?
        && offset <= size
    {
        resumed = Some((entry.upload_id.clone(), offset));
    }
    let (upload_id, mut offset) = match resumed {
        Some(found) => found,
        None => {
            let started = api.start_upload().await?;
            remembered
                .uploads
                .insert(key.clone(), wanted(started.upload_id.clone()));
            remembered.save(home)?;
            (started.upload_id, 0)
        }
    };
    if offset > 0 {
        eprintln!("resuming upload {upload_id} at byte {offset} of {size}");
    }
    bar.set_position(offset);
    let mut file = tokio::fs::File::open(path)
        .await
        .with_context(|| format!("reading {}", path.display()))?;
    let mut hasher = blake3::Hasher::new();
    // The part the server already holds is hashed from the local file, not sent again.
    let mut prefix = (&mut file).take(offset);
    let mut buffer = vec![0u8; 1024 * 1024];
    loop {
        let n = prefix.read(&mut buffer).await?;
        if n == 0 {
            break;
        }
        hasher.update(&buffer[..n]);
    }
    file.seek(std::io::SeekFrom::Start(offset)).await?;
    let stop_after: Option<u64> = std::env::var(STOP_AFTER).ok().and_then(|n| n.parse().ok());
    let mut n_chunks = 0u64;
    while offset < size {
        let length = usize::try_from(chunk_size.min(size - offset))?;
        let mut chunk = vec![0u8; length];
        file.read_exact(&mut chunk)
            .await
            .with_context(|| format!("reading {} (did it change?)", path.display()))?;
        hasher.update(&chunk);
        let answer = api.append_chunk(&upload_id, offset, chunk.into()).await?;
        offset += length as u64;
        if answer.offset != offset {
            bail!(
                "the server holds {} bytes of upload {upload_id}, not {offset}",
                answer.offset
            );
        }
        bar.set_position(offset);
        n_chunks += 1;
        if stop_after == Some(n_chunks) {
            bail!(
                "stopped after {n_chunks} chunks ({STOP_AFTER}); run the same `weft put` again to resume"
            );
        }
    }
    let digest = Digest::Blake3(ArtifactId(*hasher.finalize().as_bytes()));
    let finished = api.finish_upload(&upload_id, &digest).await;
    // Finished or discarded (a digest mismatch): the session is gone either way.
    if finished.is_ok()
        || finished.as_ref().err().and_then(|e| e.code())
            == Some(weft_api::ErrorCode::DigestMismatch)
    {
        remembered.uploads.remove(&key);
        remembered.save(home)?;
    }
    Ok(finished?)
}
