//! Reads: an artifact's view, paged listings, and its content opened for reading: a small
//! one from memory when its reader may be answered from there (`hot.rs`), else verified
//! from the store (`content/`, shared with every feature that reads stored bytes).

use base64::Engine as _;
use weft_api::views::{
    ArtifactPage, ArtifactView, DigestPair, DisposedRecord, ListedArtifact, ManifestRecord,
};
use weft_api::{ArtifactId, Digest, Envelope, ErrorCode, Id, Manifest};

use crate::access::Reader;
use crate::artifacts::handle::Artifacts;
use crate::error::{Error, reject};
use crate::events::to32;

/// Filters of `GET /v1/artifacts`.
#[derive(Clone, Debug, Default)]
pub struct ListFilter {
    pub mission_id: Option<Id>,
    pub work_item_id: Option<Id>,
    pub producer: Option<Id>,
    pub media_type: Option<String>,
    /// Only artifacts whose file name (`Manifest::file_name`) starts with this.
    pub name: Option<String>,
    pub after: Option<u64>,
    pub limit: u32,
}

impl Artifacts<'_> {
    pub async fn artifact(&self, digest: Digest, reader: &Reader) -> Result<ArtifactView, Error> {
        let reader = reader.clone();
        self.0
            .db
            .read(move |conn| {
                let not_found = || {
                    reject(
                        ErrorCode::NotFound,
                        format!("no artifact {digest} is visible to you"),
                    )
                };
                // Visibility is decided in the first lookup: another Group's artifact costs
                // what an absent one costs (`rows/manifests.rs`).
                let visible =
                    crate::rows::manifests::visible_manifests(conn, reader.seer(), &digest, true)?;
                let Some(first) = visible.first() else {
                    return Err(not_found());
                };
                let (digests, quarantined) = (first.digests, first.quarantined);
                let mut manifests = Vec::new();
                let mut disposed_manifests = Vec::new();
                // Oldest first, as the view has always listed them.
                for visible in visible.into_iter().rev() {
                    let envelope = visible.envelope.unwrap_or_default();
                    // A tombstone (issue #46): its record went by policy. Named only to a
                    // reader who may be sent its `records.disposed` Event (its Group's
                    // member who sees its Mission): a forwarded or reusable artifact's
                    // tombstone of another Group or Mission is left out, its Event unnamed.
                    if envelope.is_empty() {
                        if let Some(gone) =
                            crate::rows::manifests::record_disposed(conn, &visible.manifest_id)?
                            && reader.sees_mission(&gone.group_id, &gone.mission_id)
                        {
                            disposed_manifests.push(DisposedRecord {
                                id: ArtifactId(to32(visible.manifest_id)?),
                                sequence: visible.sequence,
                                disposed_sequence: gone.disposed,
                                classification: Some(gone.classification),
                            });
                        }
                        continue;
                    }
                    let envelope: Envelope =
                        serde_json::from_str(&envelope).map_err(Error::backend)?;
                    let payload = weft_api::dsse::BASE64
                        .decode(&envelope.payload)
                        .map_err(Error::backend)?;
                    let manifest = Manifest::parse(&payload)?;
                    manifests.push(ManifestRecord {
                        manifest_id: ArtifactId(to32(visible.manifest_id)?),
                        envelope,
                        manifest,
                        sequence: visible.sequence,
                    });
                }
                if manifests.is_empty() {
                    // Every record the reader may see went by policy: 410, naming the newest.
                    return Err(match disposed_manifests.last() {
                        Some(gone) => Error::RecordDisposed(gone.id, gone.disposed_sequence),
                        None => not_found(),
                    });
                }
                let reuse = match &reader {
                    Reader::Agent { group_id, .. } => {
                        super::reuse_record(conn, group_id.as_str(), &digests.blake3)?
                    }
                    Reader::Admin => None,
                };
                Ok(ArtifactView {
                    digests: DigestPair {
                        blake3: digests.blake3,
                        sha256: digests.sha256,
                    },
                    size: digests.size,
                    quarantined,
                    manifests,
                    disposed_manifests,
                    reuse,
                })
            })
            .await
    }

    pub async fn list_artifacts(
        &self,
        filter: ListFilter,
        reader: &Reader,
    ) -> Result<ArtifactPage, Error> {
        let reader = reader.clone();
        let limit = filter.limit.clamp(1, 1000);
        self.0
            .db
            .read(move |conn| {
                let query = crate::rows::manifests::ListQuery {
                    after: filter.after.unwrap_or(0),
                    mission_id: filter.mission_id.as_ref().map(Id::as_str),
                    work_item_id: filter.work_item_id.as_ref().map(Id::as_str),
                    producer: filter.producer.as_ref().map(Id::as_str),
                    media_type: filter.media_type.as_deref(),
                    name_prefix: filter.name.as_deref(),
                    group_id: match &reader {
                        Reader::Agent { group_id, .. } => Some(group_id.as_str()),
                        Reader::Admin => None,
                    },
                    // CTX-5: a scoped member lists its Missions' manifests and reusable knowledge.
                    missions_json: reader.missions_json(),
                    limit,
                };
                let rows = crate::rows::manifests::list(conn, &query)?;
                let mut items = Vec::new();
                let mut next = None;
                for (index, row) in rows.into_iter().enumerate() {
                    if index as u32 == limit {
                        next = items
                            .last()
                            .map(|(rowid, _): &(u64, ListedArtifact)| *rowid);
                        break;
                    }
                    let crate::rows::manifests::Listed {
                        rowid,
                        artifact,
                        manifest_id,
                        size,
                        media_type,
                        group_id,
                        mission_id,
                        work_item_id,
                        producer,
                        created_at,
                        sequence,
                        name,
                    } = row;
                    items.push((
                        rowid,
                        ListedArtifact {
                            artifact,
                            manifest_id,
                            size,
                            media_type,
                            group_id,
                            mission_id,
                            work_item_id,
                            producer,
                            created_at,
                            sequence,
                            name: (!name.is_empty()).then_some(name),
                        },
                    ));
                }
                Ok(ArtifactPage {
                    items: items.into_iter().map(|(_, item)| item).collect(),
                    next,
                })
            })
            .await
    }
}
