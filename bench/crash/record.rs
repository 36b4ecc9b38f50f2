//! What the load was told: every acknowledged write (a 2xx whose whole body arrived and
//! parsed), with the kill during whose burst it was acknowledged, and every Event the
//! subscriber received. The oracle checks the server against this record after restarts;
//! nothing unacknowledged is ever written here.

use std::collections::BTreeMap;

use weft_api::ArtifactId;
use weft_api::event::EventHash;

/// How a blob went up, which decides where the server keeps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum BlobKind {
    /// Up to the 64 KiB inline threshold: stored in the index, in the row's transaction.
    Inline,
    /// A file without an outboard (over 64 KiB, under 1 MiB).
    File,
    /// A file of 1 MiB or more: written with its BLAKE3 outboard.
    Outboarded,
    /// Through `/v1/uploads` in chunks (any size over the inline threshold).
    Resumable,
}

impl BlobKind {
    pub(super) const ALL: [Self; 4] = [Self::Inline, Self::File, Self::Outboarded, Self::Resumable];

    pub(super) fn of_size(size: usize) -> Self {
        match size {
            0..=65_536 => Self::Inline,
            65_537..1_048_576 => Self::File,
            _ => Self::Outboarded,
        }
    }

    pub(super) fn label(self) -> &'static str {
        match self {
            Self::Inline => "blobs <= 64 KiB (inline)",
            Self::File => "blobs 64 KiB-1 MiB (file)",
            Self::Outboarded => "blobs >= 1 MiB (file + outboard)",
            Self::Resumable => "resumable uploads (/v1/uploads)",
        }
    }
}

#[derive(Clone, Debug)]
pub(super) struct Blob {
    pub(super) digest: ArtifactId,
    pub(super) size: u64,
    pub(super) kind: BlobKind,
    pub(super) kill: usize,
}

#[derive(Clone, Debug)]
pub(super) struct Publication {
    pub(super) artifact: ArtifactId,
    pub(super) manifest_id: ArtifactId,
    pub(super) sequence: u64,
    pub(super) kill: usize,
}

#[derive(Clone, Debug)]
pub(super) struct EvidenceAck {
    pub(super) evidence_id: ArtifactId,
    pub(super) sequence: u64,
    pub(super) kill: usize,
}

#[derive(Clone, Debug)]
pub(super) struct Charge {
    /// The signed `work.progress`, exactly as sent.
    pub(super) envelope: weft_api::Envelope,
    pub(super) answer: Answer,
    pub(super) kill: usize,
}

/// What a charge's request got back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Answer {
    /// Nothing whole yet (cut by a kill): it may or may not have been applied; re-sent after
    /// the restart.
    Pending,
    /// Its answer arrived whole (at first or when re-sent): applied exactly once.
    Acked,
    /// A whole refusal: not applied (counted with the refusals, never re-sent).
    Refused,
}

#[derive(Clone, Debug)]
pub(super) struct CommandAck {
    pub(super) command_id: String,
    /// The Events the answer named: (sequence, type).
    pub(super) events: Vec<(u64, String)>,
    pub(super) kill: usize,
}

/// A resumable upload a kill cut after its start was acknowledged: what it takes to resume it
/// (its bytes are regenerated from `key`).
#[derive(Clone, Debug)]
pub(super) struct PendingUpload {
    /// Empty until the start is answered.
    pub(super) upload_id: String,
    pub(super) key: [u8; 32],
    pub(super) size: usize,
    pub(super) chunk: usize,
    /// The offset the last answered chunk ended at.
    pub(super) acked: u64,
    /// Whether the finish was sent.
    pub(super) finishing: bool,
    /// The burst that started it.
    pub(super) kill: usize,
}

#[derive(Debug, Default)]
pub(super) struct Record {
    pub(super) blobs: Vec<Blob>,
    pub(super) publications: Vec<Publication>,
    pub(super) evidence: Vec<EvidenceAck>,
    pub(super) commands: Vec<CommandAck>,
    /// Every `work.progress` sent, each charging one token to the WorkItem (and its Mission):
    /// recorded before it is sent, so one cut by a kill is re-sent, same bytes, after the
    /// restart. Each must be charged exactly once.
    pub(super) charges: Vec<Charge>,
    /// Charges re-sent after a restart because their answer was cut by the kill (each must
    /// then be applied once: now, or before the kill with its answer lost).
    pub(super) charges_resent: u64,
    /// The highest sequence an ACK was answered for (the server's cursor may not be behind).
    pub(super) acked_cursor: u64,
    /// ACK requests answered.
    pub(super) acks: u64,
    /// Every Event the subscriber received, by sequence: its hash (a later replay must agree).
    pub(super) seen: BTreeMap<u64, EventHash>,
    /// How many of each list earlier oracle runs read back completely (the next run reads the
    /// rest, plus a sample of these).
    pub(super) checked_blobs: usize,
    pub(super) checked_publications: usize,
    pub(super) checked_evidence: usize,
    /// Resumable uploads cut by a kill, to resume in a later burst; how many were resumed
    /// after a restart, and how many turned out finished (the finish committed, its answer cut).
    pub(super) pending_uploads: Vec<PendingUpload>,
    pub(super) resumed: u64,
    /// Publications acknowledged through `PUT /v1/artifacts/{digest}` (also in `blobs` and
    /// `publications`).
    pub(super) with_content: u64,
    pub(super) finished_unacked: u64,
    /// Requests cut by a kill (transport errors), and refusals by status and code.
    pub(super) cut: u64,
    pub(super) refusals: BTreeMap<String, u64>,
    /// Violations found while the load ran (a stream that skipped or changed an Event).
    pub(super) losses: Vec<String>,
}

impl Record {
    /// Published artifacts, to cite from Evidence.
    pub(super) fn published(&self, pick: usize) -> Option<ArtifactId> {
        (!self.publications.is_empty())
            .then(|| self.publications[pick % self.publications.len()].artifact)
    }
}
