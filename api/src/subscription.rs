//! A Group subscription that never skips an Event (cargo feature `client`).
//!
//! It follows `GET /v1/groups/{g}/events/stream` from its durable cursor, reconnects with
//! backoff after any disconnect or server crash, deduplicates, processes in order and verifies
//! the hash chain through a [`Sequencer`], persists its cursor (a small JSON file, written
//! atomically and fsynced) only after the handler returns, and ACKs in batches. Exactly-once
//! *processing* on top of at-least-once delivery (DLV-1…DLV-6, DLV-8).

use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

use futures::StreamExt as _;
use serde::{Deserialize, Serialize};

use crate::client::{Client, Error};
use crate::delivery::Sequencer;
use crate::dsse::SNAPSHOT_TYPE;
use crate::event::{Delivered, Event, EventHash};
use crate::id::Id;
use crate::views::{SignedSnapshot, SnapshotReference};

/// One Server-Sent Events frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SseFrame {
    pub id: Option<String>,
    pub event: Option<String>,
    pub data: String,
}

/// Splits an SSE byte stream into frames. Bytes are buffered until a frame is complete, so a
/// multi-byte character split across network chunks is decoded whole.
#[derive(Debug, Default)]
pub struct SseDecoder {
    buffer: Vec<u8>,
}

impl SseDecoder {
    /// Adds bytes; returns the frames they completed (comments and keep-alives are dropped).
    pub fn push(&mut self, chunk: &[u8]) -> Vec<SseFrame> {
        self.buffer.extend_from_slice(chunk);
        let mut frames = Vec::new();
        while let Some(end) = self.buffer.windows(2).position(|pair| pair == b"\n\n") {
            let raw: Vec<u8> = self.buffer.drain(..end + 2).collect();
            let text = String::from_utf8_lossy(&raw);
            let mut frame = SseFrame {
                id: None,
                event: None,
                data: String::new(),
            };
            for line in text.lines() {
                let field = |name: &str| {
                    line.strip_prefix(name)
                        .map(|v| v.strip_prefix(' ').unwrap_or(v).to_owned())
                };
                if let Some(data) = field("data:") {
                    if !frame.data.is_empty() {
                        frame.data.push('\n');
                    }
                    frame.data.push_str(&data);
                } else if let Some(event) = field("event:") {
                    frame.event = Some(event);
                } else if let Some(id) = field("id:") {
                    frame.id = Some(id);
                }
            }
            if !frame.data.is_empty() {
                frames.push(frame);
            }
        }
        frames
    }
}

/// What the handler wants after an Event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    Continue,
    Stop,
}

/// The durable cursor file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CursorState {
    pub group_id: String,
    pub sequence: u64,
    pub hash: Option<EventHash>,
}

/// Called with a verified snapshot (its signed reference and its state document) when the
/// cursor is older than the server's online log (DLV-10).
pub type Restore = Box<dyn FnMut(&SnapshotReference, &[u8]) -> Result<(), String> + Send + Sync>;

pub struct Subscription {
    client: Client,
    group_id: Id,
    cursor_path: PathBuf,
    /// ACK after this many processed Events (and when stopping).
    pub ack_every: u64,
    /// Longest wait between reconnection attempts.
    pub max_backoff: Duration,
    /// Restores application state from a snapshot; without it, `cursor_too_old` is an error.
    pub restore: Option<Restore>,
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription")
            .field("group_id", &self.group_id)
            .field("cursor_path", &self.cursor_path)
            .finish_non_exhaustive()
    }
}

impl Subscription {
    pub fn new(client: Client, group_id: Id, cursor_path: PathBuf) -> Self {
        Self {
            client,
            group_id,
            cursor_path,
            ack_every: 100,
            max_backoff: Duration::from_secs(2),
            restore: None,
        }
    }

    /// The persisted cursor, or the start of the log.
    pub fn load_cursor(&self) -> Result<CursorState, Error> {
        match std::fs::read(&self.cursor_path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| Error::Protocol(format!("cursor file: {e}"))),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(CursorState {
                group_id: self.group_id.to_string(),
                sequence: 0,
                hash: None,
            }),
            Err(error) => Err(error.into()),
        }
    }

    fn save_cursor(&self, state: &CursorState) -> Result<(), Error> {
        use std::io::Write as _;
        let partial = self.cursor_path.with_extension("partial");
        let mut file = std::fs::File::create(&partial)?;
        file.write_all(&serde_json::to_vec(state).map_err(|e| Error::Protocol(e.to_string()))?)?;
        file.sync_all()?;
        std::fs::rename(&partial, &self.cursor_path)?;
        Ok(())
    }

    /// Runs until the handler says [`Flow::Stop`] or fails. Returns the final cursor.
    /// Transport failures and server restarts are retried; refusals (4xx) and broken chains
    /// are returned.
    pub async fn run<F, Fut>(mut self, mut handler: F) -> Result<u64, Error>
    where
        F: FnMut(Event) -> Fut,
        Fut: Future<Output = Result<Flow, String>>,
    {
        let start = self.load_cursor()?;
        let mut sequencer = Sequencer::new(self.group_id.to_string(), start.sequence, start.hash);
        let mut acked = start.sequence;
        let mut backoff = Duration::from_millis(50);
        loop {
            let attempt = self.follow(&mut sequencer, &mut acked, &mut handler).await;
            match attempt {
                Ok(Flow::Stop) => {
                    self.ack(sequencer.cursor(), &mut acked).await;
                    return Ok(sequencer.cursor());
                }
                Ok(Flow::Continue) => backoff = Duration::from_millis(50), // the stream ended cleanly
                Err(Error::Api { status: 410, body })
                    if body.snapshot.is_some() && self.restore.is_some() =>
                {
                    let snapshot = body
                        .snapshot
                        .ok_or_else(|| Error::Protocol("no snapshot".into()))?;
                    sequencer = self.restore_from(&snapshot).await?;
                }
                Err(Error::Api { status, body }) if status < 500 => {
                    return Err(Error::Api { status, body });
                }
                Err(error @ (Error::Protocol(_) | Error::Io(_) | Error::Integrity { .. })) => {
                    return Err(error);
                }
                Err(_transport) => {
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(self.max_backoff);
                }
            }
        }
    }

    /// DLV-10: restores from `snapshot` as [`Subscription::run`] does on `cursor_too_old`
    /// (signature, Group and state digest checked, then the state handed to `restore` and the
    /// cursor saved); returns the sequence to resume after. Refused, with nothing restored
    /// or saved, if any check fails.
    pub async fn restore_snapshot(&mut self, snapshot: &SignedSnapshot) -> Result<u64, Error> {
        Ok(self.restore_from(snapshot).await?.cursor())
    }

    /// DLV-10: verify the snapshot reference's signature and the state's digest, hand the
    /// state to the application, and resume from the snapshot's sequence.
    async fn restore_from(&mut self, snapshot: &SignedSnapshot) -> Result<Sequencer, Error> {
        let keys = self.client.authority_keys().await?;
        let signed_by_authority = keys
            .keys
            .iter()
            .filter_map(|key| crate::dsse::parse_public_key(&key.public_key).ok())
            .any(|key| {
                snapshot
                    .envelope
                    .verify(SNAPSHOT_TYPE, &key)
                    .is_ok_and(|payload| {
                        serde_json::from_slice::<SnapshotReference>(payload.value())
                            .ok()
                            .as_ref()
                            == Some(&snapshot.reference)
                    })
            });
        if !signed_by_authority || snapshot.reference.group_id != self.group_id.as_str() {
            return Err(Error::Protocol(
                "the snapshot reference is not signed by the server's authority key".into(),
            ));
        }
        let reference = &snapshot.reference;
        let mut state = Vec::new();
        let path = format!(
            "/v1/groups/{}/snapshots/blobs/{}",
            self.group_id, reference.state_digest
        );
        // The signed `uri` (DESIGN §7) must name that same place.
        if reference.uri.as_ref().is_some_and(|uri| *uri != path) {
            return Err(Error::Protocol(format!("the snapshot's uri is not {path}")));
        }
        let digests = self.client.download_path(&path, &mut state).await?;
        if digests.blake3 != reference.state_digest {
            return Err(Error::Integrity {
                expected: reference.state_digest.to_string(),
                actual: digests.blake3.to_string(),
            });
        }
        if let Some(restore) = self.restore.as_mut() {
            restore(reference, &state)
                .map_err(|e| Error::Protocol(format!("restore failed: {e}")))?;
        }
        let cursor = CursorState {
            group_id: self.group_id.to_string(),
            sequence: reference.sequence,
            hash: Some(reference.event_chain_hash),
        };
        self.save_cursor(&cursor)?;
        Ok(Sequencer::new(
            self.group_id.to_string(),
            reference.sequence,
            Some(reference.event_chain_hash),
        ))
    }

    async fn ack(&self, cursor: u64, acked: &mut u64) {
        if cursor > *acked && self.client.ack(&self.group_id, cursor).await.is_ok() {
            *acked = cursor;
        }
    }

    /// One connection: stream, sequence, handle, persist. `Ok(Continue)` when the stream ended.
    async fn follow<F, Fut>(
        &self,
        sequencer: &mut Sequencer,
        acked: &mut u64,
        handler: &mut F,
    ) -> Result<Flow, Error>
    where
        F: FnMut(Event) -> Fut,
        Fut: Future<Output = Result<Flow, String>>,
    {
        let response = self
            .client
            .event_stream(&self.group_id, sequencer.cursor())
            .await?;
        let mut body = response.bytes_stream();
        let mut decoder = SseDecoder::default();
        while let Some(chunk) = body.next().await {
            for frame in decoder.push(&chunk?) {
                if frame.event.as_deref() == Some("error") {
                    continue; // the stream ends after an error; reconnecting tells why
                }
                let data = frame.data;
                let event: Delivered = serde_json::from_str(&data)
                    .map_err(|e| Error::Protocol(format!("bad event frame: {e}")))?;
                sequencer
                    .offer(event)
                    .map_err(|e| Error::Protocol(e.to_string()))?;
                while let Some(event) = sequencer
                    .next_ready()
                    .map_err(|e| Error::Protocol(e.to_string()))?
                {
                    let (sequence, hash) = (event.sequence(), event.hash());
                    // A withheld placeholder (CTX-5) moves the cursor; the handler never
                    // sees it, since there is nothing in it to handle.
                    let flow = match event.event().cloned() {
                        Some(event) => handler(event).await.map_err(|e| {
                            Error::Protocol(format!("handler failed at {sequence}: {e}"))
                        })?,
                        None => Flow::Continue,
                    };
                    sequencer.processed(sequence);
                    self.save_cursor(&CursorState {
                        group_id: self.group_id.to_string(),
                        sequence,
                        hash: Some(hash),
                    })?;
                    if sequence >= *acked + self.ack_every {
                        self.ack(sequence, acked).await;
                    }
                    if flow == Flow::Stop {
                        return Ok(Flow::Stop);
                    }
                }
            }
        }
        Ok(Flow::Continue)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Frames split anywhere, even inside a multi-byte character, decode whole.
    #[test]
    fn frames_survive_any_split() {
        let stream = "id: 1\nevent: t\ndata: {\"x\":\"caf\u{e9} \u{1f980}\"}\n\n:keep-alive\n\nid: 2\ndata: a\ndata: b\n\n".as_bytes();
        for split in 0..stream.len() {
            let mut decoder = SseDecoder::default();
            let mut frames = decoder.push(&stream[..split]);
            frames.extend(decoder.push(&stream[split..]));
            assert_eq!(frames.len(), 2, "split at {split}");
            assert_eq!(frames[0].data, "{\"x\":\"caf\u{e9} \u{1f980}\"}");
            assert_eq!(
                (frames[0].id.as_deref(), frames[0].event.as_deref()),
                (Some("1"), Some("t"))
            );
            assert_eq!(frames[1].data, "a\nb");
        }
    }
}
