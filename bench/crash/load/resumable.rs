//! Resumable uploads across kills: a session whose start was acknowledged and which a kill
//! cut is resumed in a later burst. After the restart its durable offset (`HEAD`) may not be
//! behind the last chunk the server acknowledged (each chunk is fsynced and its offset
//! committed before the `202`), the rest is sent from that offset, and the finish re-hashes
//! the whole upload, so a torn or lost chunk shows as a `digest_mismatch`. A session cut
//! during its finish may have finished: then its blob exists.

use rand::Rng as _;
use rand::rngs::StdRng;
use weft_api::Digest;
use weft_api::client::Error;
use weft_api::digest::{Digests, Hasher};
use weft_api::views::UploadReceipt;

use super::super::record::PendingUpload;
use super::{Burst, content};

/// A new upload (started by [`upload`]): random bytes over the inline threshold, up to 3 MiB,
/// in chunks of 256 KiB to 1 MiB.
pub(super) fn new_job(rng: &mut StdRng, kill: usize) -> PendingUpload {
    PendingUpload {
        upload_id: String::new(),
        key: rng.random(),
        size: rng.random_range(65_537..=3 << 20),
        chunk: rng.random_range(256 * 1024..=1024 * 1024),
        acked: 0,
        finishing: false,
        kill,
    }
}

/// Starts `job` (when new) or resumes it after a kill, sends the rest and finishes it.
/// Answers the digests and the finish's answer; `None` when nothing is left to finish (a
/// loss, or a finish that completed before the kill). A job cut by a kill goes back to the
/// record's pending list.
pub(super) async fn upload(
    burst: &Burst,
    mut job: PendingUpload,
) -> Option<(Digests, Result<UploadReceipt, Error>)> {
    let bytes = content(&job.key, job.size);
    let digests = Hasher::digest(&bytes);
    if job.upload_id.is_empty() {
        match burst.client.start_upload().await {
            Ok(session) => job.upload_id = session.upload_id,
            Err(e) => return Some((digests, Err(e))),
        }
    } else {
        match burst.client.upload_offset(&job.upload_id).await {
            Ok(Some(offset)) => {
                let kill = burst.kill;
                let behind = offset < job.acked || offset > job.size as u64;
                burst.note(|r| {
                    r.resumed += 1;
                    if behind {
                        r.losses.push(format!(
                            "kill {kill}: upload {} resumed at durable offset {offset}, {} bytes of {} were acknowledged",
                            job.upload_id, job.acked, job.size
                        ));
                    }
                });
                job.acked = offset.min(job.size as u64);
            }
            Ok(None) => return gone(burst, &job, &digests).await,
            Err(e) => {
                keep(burst, job, &e);
                return Some((digests, Err(e)));
            }
        }
    }
    while job.acked < job.size as u64 {
        let start = job.acked as usize;
        let end = (start + job.chunk).min(job.size);
        let sent = burst
            .client
            .append_chunk(&job.upload_id, job.acked, bytes.slice(start..end))
            .await;
        match sent {
            Ok(answer) if answer.offset == end as u64 => job.acked = answer.offset,
            Ok(answer) => {
                let text = format!(
                    "PATCH answered offset {} for a chunk ending at {end}",
                    answer.offset
                );
                return Some((digests, Err(Error::Protocol(text))));
            }
            Err(e) => {
                keep(burst, job, &e);
                return Some((digests, Err(e)));
            }
        }
    }
    job.finishing = true;
    let finished = burst
        .client
        .finish_upload(&job.upload_id, &Digest::Blake3(digests.blake3))
        .await;
    if let Err(e) = &finished {
        // A server error on the finish of an upload whose chunks were acknowledged means
        // they can no longer become a blob: counted as lost (the first campaigns found a
        // crash window here, a session row left without its object).
        if let Error::Api { status, body } = e
            && *status >= 500
        {
            let (kill, id) = (burst.kill, job.upload_id.clone());
            let code = body.code;
            burst.note(|r| {
                r.losses.push(format!(
                    "kill {kill}: the finish of upload {id} ({} acknowledged bytes) answered {status} {code:?}",
                    job.acked
                ))
            });
            return Some((digests, finished));
        }
        keep(burst, job, e);
    }
    Some((digests, finished))
}

/// Keeps a job a kill cut (a transport failure) for the next burst; a refusal ends it.
fn keep(burst: &Burst, job: PendingUpload, error: &Error) {
    if matches!(error, Error::Http(_) | Error::Io(_)) {
        burst.note(|r| r.pending_uploads.push(job));
    }
}

/// The server no longer knows the session: fine only if its finish was sent and the blob
/// exists (the finish committed, its answer was cut).
async fn gone(
    burst: &Burst,
    job: &PendingUpload,
    digests: &Digests,
) -> Option<(Digests, Result<UploadReceipt, Error>)> {
    let head = burst
        .http
        .head(format!("{}/v1/blobs/{}", burst.url, digests.blake3))
        .bearer_auth(&burst.world.token)
        .send()
        .await;
    let exists = match head {
        Ok(response) => response.status().is_success(),
        Err(e) => {
            // The server went away again: try once more in the next burst.
            let e = Error::Http(e);
            keep(burst, job.clone(), &e);
            return Some((*digests, Err(e)));
        }
    };
    let kill = burst.kill;
    burst.note(|r| {
        if job.finishing && exists {
            r.finished_unacked += 1;
        } else {
            r.losses.push(format!(
                "kill {kill}: upload {} (started in burst {}, {} of {} bytes acknowledged{}) is gone after the restart",
                job.upload_id,
                job.kill,
                job.acked,
                job.size,
                if job.finishing { ", finish sent, no blob" } else { "" }
            ));
        }
    });
    None
}
