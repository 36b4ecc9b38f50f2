//! Response shapes of the read API, shared by server and client.

use serde::{Deserialize, Serialize};

use crate::digest::{ArtifactId, Digests, Sha256Digest};
use crate::dsse::Envelope;
use crate::manifest::Manifest;

/// Answer to `PUT /v1/blobs/{digest}` and `POST /v1/blobs`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UploadReceipt {
    pub blake3: ArtifactId,
    pub sha256: Sha256Digest,
    pub size: u64,
}

/// Answer to `POST /v1/artifacts`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Published {
    pub artifact: ArtifactId,
    pub manifest_id: ArtifactId,
    pub sequence: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DigestPair {
    pub blake3: ArtifactId,
    pub sha256: Sha256Digest,
}

/// One manifest of an artifact, as stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManifestRecord {
    pub manifest_id: ArtifactId,
    pub envelope: Envelope,
    pub manifest: Manifest,
    pub sequence: u64,
}

/// Answer to `GET /v1/artifacts/{digest}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactView {
    pub digests: DigestPair,
    pub size: u64,
    pub quarantined: bool,
    pub manifests: Vec<ManifestRecord>,
}

impl ArtifactView {
    pub fn digests(&self) -> Digests {
        Digests {
            blake3: self.digests.blake3,
            sha256: self.digests.sha256,
            size: self.size,
        }
    }
}

/// One row of `GET /v1/artifacts`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListedArtifact {
    pub artifact: ArtifactId,
    pub manifest_id: ArtifactId,
    pub size: u64,
    pub media_type: String,
    pub group_id: String,
    pub mission_id: String,
    pub work_item_id: String,
    pub producer: String,
    pub created_at: String,
    pub sequence: u64,
}

/// Answer to `GET /v1/artifacts`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactPage {
    pub items: Vec<ListedArtifact>,
    /// Pass as `after` to get the next page; absent on the last page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next: Option<u64>,
}

/// Answer to `GET /v1/groups/{g}/events`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct EventPage {
    pub events: Vec<crate::event::Event>,
}
