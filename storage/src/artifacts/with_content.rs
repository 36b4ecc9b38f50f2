//! Publication with its bytes, in one request and one transaction (issue #15): the signed
//! manifest is verified first, then the bytes stream through the ordinary staging path (hashed
//! BLAKE3 + SHA-256 on the way in, inline in the index when small, a promoted file otherwise)
//! and must be the bytes the manifest names; the blob's rows, the manifest, its edges and its
//! `artifact.published` Event commit in one writer job, or nothing does.
//!
//! The two-request path (`PUT /v1/blobs`, then `POST /v1/artifacts`) costs two requests, two
//! group commits and a read; this one costs one of each fewer, which is most of what a small
//! publication costs.
//!
//! Who may: an Agent's session (or a capability token with both `blob:write` and
//! `artifact:publish`) whose Membership makes it a worker, checked from the session before a
//! byte is read and again in the transaction. The operator does not publish this way.
//! Bytes that will be a file (the manifest's size over the inline threshold) are first
//! checked against everything the transaction checks, on a read, so a refusal stages
//! nothing and has no promoted file to undo. Bytes of any size may stream for long, so the
//! transaction checks first that the session (or token) is still live, and the publication
//! takes the time of its transaction (LSE-5 is judged then).
//! A refusal keeps nothing of the bytes except a fenced owner's manifest, which is kept as
//! inert as on the other path (OFL-2). No timing oracle: admitted bytes are always staged,
//! whoever else holds them, and refused ones never are.

use bytes::Bytes;
use futures::Stream;
use weft_api::session::Role;
use weft_api::views::Published;
use weft_api::{Digest, Envelope, ErrorCode};

use super::publish::{Bytes as Known, Verified};
use super::upload::{Cited, Recorder};
use crate::access::Session;
use crate::acting::Acting;
use crate::artifacts::handle::Artifacts;
use crate::error::{Error, reject};

impl Artifacts<'_> {
    /// Publishes `envelope` with `body` as its bytes, as `session`'s Agent (under `grant`, a
    /// capability token, when given); the bytes must also be `expected` (the route's digest).
    pub async fn publish_with_content<S>(
        &self,
        envelope: Envelope,
        expected: Digest,
        body: S,
        session: &Session,
    ) -> Result<(Published, bool), Error>
    where
        S: Stream<Item = Result<Bytes, std::io::Error>> + Send,
    {
        let verified = self
            .verify_publication(&envelope, &session.reader())
            .await?;
        self.publish_verified_with_content(verified, expected, body, session, None)
            .await
    }

    /// [`Engine::publish_with_content`] of a manifest already verified for `session` (and
    /// for `grant`, when it goes under a capability token).
    pub(crate) async fn publish_verified_with_content<S>(
        &self,
        verified: Verified,
        expected: Digest,
        body: S,
        session: &Session,
        grant: Option<&crate::access::Grant>,
    ) -> Result<(Published, bool), Error>
    where
        S: Stream<Item = Result<Bytes, std::io::Error>> + Send,
    {
        let reader = session.reader();
        // The route's digest must be the manifest's, before a byte is read.
        let named = &verified.manifest.content;
        if !expected.names(&named.blake3, &named.sha256) {
            return Err(reject(
                ErrorCode::DigestMismatch,
                format!(
                    "the manifest names {} / {}, not {expected}",
                    named.blake3, named.sha256
                ),
            ));
        }
        if named.size > self.0.max_upload_bytes {
            return Err(reject(
                ErrorCode::BodyTooLarge,
                format!("uploads are limited to {} bytes", self.0.max_upload_bytes),
            ));
        }
        // Before a byte is read or staged; the transaction checks the Membership again.
        if !session.roles.contains(&Role::Worker) {
            return Err(reject(
                ErrorCode::Forbidden,
                format!(
                    "{} is not a worker in {}",
                    session.agent_id, session.group_id
                ),
            ));
        }
        // Bytes that will be a file: every check of the transaction first, so a refusal
        // writes nothing, costs the same whoever holds the bytes, and has no promoted file to
        // undo (which waits out every upload: the sweep's lock).
        let file = named.size > self.0.inline_blob_bytes;
        if file {
            self.precheck_publication(&verified).await?;
        }
        // The bytes are cited in the transaction that records them, or not kept: they never
        // count against the Agent's uncited bytes, only against its uploads in flight.
        let permit = self
            .0
            .limits
            .admit_upload(Some(session.agent_id.as_str()), 0)?;
        let counted = permit.metered(body);
        let staged = self
            .0
            .blobs
            .stage(counted, self.0.max_upload_bytes, self.0.inline_blob_bytes)
            .await?;
        self.0.upload_counters.staged(staged.digests.size);
        let (digests, inline) = (staged.digests, staged.inline.is_some());
        let named = &verified.manifest.content;
        // The manifest names `expected`: bytes that are the manifest's are the route's too.
        if (named.blake3, named.sha256, named.size)
            != (digests.blake3, digests.sha256, digests.size)
        {
            // `staged` is dropped here, which deletes the staged bytes.
            return Err(reject(
                ErrorCode::DigestMismatch,
                format!(
                    "the content hashes to {} / {} ({} bytes), not the manifest's {} / {} ({} bytes)",
                    digests.blake3,
                    digests.sha256,
                    digests.size,
                    named.blake3,
                    named.sha256,
                    named.size
                ),
            ));
        }
        // The publication is judged at the time its transaction holds its Group's lock (LSE-5:
        // its lease is judged then, not when the request began). The bytes may have taken
        // long, whatever their size (a slow body has no overall deadline): the caller must
        // still be live then, checked by the blob's part of that transaction, under the same
        // lock, before anything is recorded, so an ended caller hears why as it would at the
        // door, and a promoted file is undone as on any refusal.
        let acting = match grant {
            Some(grant) => Acting::token(grant),
            None => Acting::session(session),
        };
        // Inline bytes are recorded in the job's own transaction, just before the publication,
        // which need not look them up again; a file's row may have been read before its
        // promotion, so it is checked as on the other path (bar visibility: this request
        // sent the bytes, and no uploader row is written for them).
        let known = if inline {
            Known::JustRecorded
        } else {
            Known::JustPromoted
        };
        let (recording, aftermath) = verified.into_recording(known);
        let outcome = self
            .record_blob_and(
                digests,
                Some(staged),
                Recorder {
                    reader: &reader,
                    acting: Some(acting),
                },
                None,
                Cited::InTheSameTransaction,
                move |txn, _| recording(txn),
            )
            .await;
        drop(permit);
        self.conclude_publication(outcome, aftermath).await
    }
}
