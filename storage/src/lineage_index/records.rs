//! The lineage index's records and their hash tables: a publication as it is added, a
//! manifest as a node keeps it, who walks the graph (`Audience`), and the fast hasher's map
//! and set. A leaf: the index (`mod.rs`), its graph and its walks all build on these.

use std::collections::{HashMap, HashSet};

use weft_api::ArtifactId;

use super::name::Name;

/// Hash sets and maps for the index and its walks: keys are small integers or BLAKE3 ids, so a
/// fast, randomly seeded hasher instead of SipHash.
pub(super) type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;
pub(crate) type FastSet<T> = HashSet<T, foldhash::fast::RandomState>;

/// Who walks the graph: the Groups it reads (`None`: all) and, for a Mission-scoped member,
/// its Missions and the reusable artifacts of its Group (CTX-5/6). A manifest of another
/// Mission is invisible to it exactly as another Group's is: its node is counted in
/// `withheld`, never named, never traversed through.
#[derive(Clone, Debug, Default)]
pub(crate) struct Audience {
    pub(crate) groups: Option<Vec<String>>,
    /// `None`: every Mission of the Groups.
    pub(crate) missions: Option<FastSet<String>>,
    pub(crate) reusable: FastSet<ArtifactId>,
}

impl Audience {
    /// A reader of these Groups' every Mission (`None`: all Groups).
    pub(crate) fn of_groups(groups: Option<&[String]>) -> Self {
        Self {
            groups: groups.map(<[String]>::to_vec),
            ..Self::default()
        }
    }

    /// Whether a Mission-scoped reader may see `manifest`: its Mission, or reusable knowledge.
    pub(super) fn covers(&self, manifest: &ManifestNode) -> bool {
        self.missions
            .as_ref()
            .is_none_or(|missions| missions.contains(manifest.mission.as_str()))
            || self.reusable.contains(&manifest.artifact)
    }

    /// The scope part of a `View` (`graph.rs`): `None` when the reader sees every Mission.
    pub(super) fn mission_view(&self) -> Option<&Self> {
        self.missions.is_some().then_some(self)
    }
}

/// `Node::group` when an artifact's manifests span several Groups (or it has none yet): the
/// manifests themselves must be consulted.
pub(super) const MIXED: u32 = u32::MAX;
/// The end of a manifest chain.
pub(super) const NO_MANIFEST: u32 = u32::MAX;

/// One manifest's key fields as the index keeps them, with its artifact's id and size:
/// everything an answer says about an artifact, in one aligned pair of cache lines, names
/// included (see `Name`).
#[derive(Clone, Copy, Debug)]
#[repr(C, align(128))]
pub(super) struct ManifestNode {
    pub(super) artifact: ArtifactId,
    pub(super) manifest_id: ArtifactId,
    pub(super) size: u64,
    pub(super) sequence: u64,
    pub(super) group_name: Name,
    pub(super) mission: Name,
    pub(super) work_item: Name,
    pub(super) producer: Name,
    pub(super) media_type: Name,
    /// The Group, numbered (see `Graph::groups`).
    pub(super) group: u32,
    /// The same artifact's next manifest, or `NO_MANIFEST`.
    pub(super) next: u32,
}

const _: () = assert!(std::mem::size_of::<ManifestNode>() == 128);

/// A publication, as added to the index.
#[derive(Clone, Debug)]
pub(crate) struct Publication {
    pub(crate) artifact: ArtifactId,
    pub(crate) size: u64,
    pub(crate) manifest_id: ArtifactId,
    pub(crate) group: String,
    pub(crate) mission: String,
    pub(crate) work_item: String,
    pub(crate) producer: String,
    pub(crate) media_type: String,
    pub(crate) sequence: u64,
    pub(crate) sources: Vec<ArtifactId>,
    /// Its `manifests` row's rowid (see `restart.rs`).
    pub(crate) rowid: u64,
}
