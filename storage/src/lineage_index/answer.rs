//! The query and answer types of a lineage walk (their wire shape is `weft_api::lineage`).

use std::fmt;
use std::time::Duration;

use serde::{Serialize, Serializer};
use smallvec::SmallVec;
use weft_api::ArtifactId;

use super::*;

/// The scope of a subgraph query.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    WorkItem,
    Mission,
}

/// Which way to walk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    Ancestors,
    Descendants,
    Both,
}

/// A bounded traversal request.
#[derive(Clone, Debug)]
pub struct Query {
    pub direction: Direction,
    /// Longest path followed; `None` for unbounded (still limited by `limit`).
    pub depth: Option<u32>,
    /// Most artifact nodes returned.
    pub limit: usize,
    /// Artifact nodes to skip (from the `cursor` of a truncated answer).
    pub skip: usize,
    pub budget: Duration,
    /// Edge types to include: `derivedFrom` (without it nothing is walked), `generatedBy`,
    /// `partOf`, `attributedTo`. `None`: all.
    pub edges: Option<Vec<String>>,
    /// Time travel: the graph as it stood after this sequence of this Group's log (only that
    /// Group's publications up to then are included).
    pub as_of: Option<(String, u64)>,
    /// Follow only the edges the manifests of this Mission declare (issue #50): the same
    /// bytes published in two Missions are two provenances, never one merged graph. `None`
    /// follows every manifest the reader may see (the lineage feature names one for every
    /// artifact query, `lineage/query.rs`).
    pub mission: Option<String>,
}

/// An artifact reached by a traversal.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactNode {
    pub id: ArtifactId,
    pub depth: u32,
    pub size: u64,
    /// Almost always one: kept inline, so an answer allocates nothing per artifact.
    pub manifests: SmallVec<[ManifestSummary; 1]>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ManifestSummary {
    pub manifest_id: ArtifactId,
    pub group_id: Name,
    pub mission_id: Name,
    pub work_item_id: Name,
    pub producer: Name,
    pub media_type: Name,
    pub sequence: u64,
}

/// An end of a typed edge: an artifact, WorkItem, Mission or Agent, displayed and serialized
/// as its node name (`blake3:<hex>`, `workItem:<id>`, `mission:<id>`, `agent:<id>`). Ids and names stay
/// as they are until then, so answers build no strings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NodeRef {
    Artifact(ArtifactId),
    WorkItem(Name),
    Mission(Name),
    Agent(Name),
    /// A Context Package version (DESIGN §11), by its id: `context:blake3:<hex>`.
    Context(ArtifactId),
}

impl fmt::Display for NodeRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodeRef::Artifact(id) => fmt::Display::fmt(id, f),
            NodeRef::WorkItem(name) => write!(f, "workItem:{name}"),
            NodeRef::Mission(name) => write!(f, "mission:{name}"),
            NodeRef::Agent(name) => write!(f, "agent:{name}"),
            NodeRef::Context(id) => write!(f, "context:{id}"),
        }
    }
}

impl Serialize for NodeRef {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

/// A typed edge of the answer.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Edge {
    pub from: NodeRef,
    pub to: NodeRef,
    #[serde(rename = "type")]
    pub kind: &'static str,
}

/// A Context Package version in a package's provenance.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextNode {
    pub id: ArtifactId,
    pub package_id: Name,
    pub version: u64,
    pub group_id: Name,
    pub mission_id: Name,
    pub generator: Name,
    pub sequence: u64,
    pub source_events: weft_api::context::EventRange,
}

/// The answer to a lineage query.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Lineage {
    pub root: Option<ArtifactId>,
    pub artifacts: Vec<ArtifactNode>,
    pub work_items: Vec<Name>,
    pub missions: Vec<Name>,
    pub agents: Vec<Name>,
    pub edges: Vec<Edge>,
    /// Context Package versions (only in a package's provenance, DESIGN §11).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub contexts: Vec<ContextNode>,
    /// Nodes reached that belong only to Groups the caller cannot read: counted, not named.
    pub withheld: usize,
    pub truncated: bool,
    /// Pass back as `cursor` to continue a truncated answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}
