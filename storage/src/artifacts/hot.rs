//! Small artifacts read from memory (issue #15): who may be answered from the cache of small
//! blobs (`engine/hot.rs`, where the cache and its rules are described). A read keeps what it
//! verified there (`content/`).

use weft_api::ArtifactId;

impl crate::engine::Engine {
    /// The media type a Group-wide reader sees for an artifact its Group published, decided
    /// from memory; `None` leaves visibility to the index (see `engine/hot.rs` for who
    /// qualifies). The bytes then come from `Hot::get` or the blob's row.
    pub(crate) fn visible_in_memory(
        &self,
        id: &ArtifactId,
        reader: &crate::access::Reader,
    ) -> Option<String> {
        let crate::access::Reader::Agent {
            group_id,
            scope: crate::access::MissionScope::Group,
            ..
        } = reader
        else {
            return None;
        };
        if self.hot.was_forwarded(id) {
            return None;
        }
        self.lineage.newest_media_type_in(id, group_id.as_str())
    }
}
