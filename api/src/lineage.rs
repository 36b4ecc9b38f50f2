//! The wire shape of the lineage (provenance) answers the server sends as JSON: an artifact's
//! lineage (`GET /v1/artifacts/{digest}/provenance?format=json`), a WorkItem's or Mission's
//! subgraph (`GET /v1/workitems/{id}/provenance`, `GET /v1/missions/{id}/provenance`), impact
//! (`GET /v1/provenance/impact`) — all one [`Lineage`] — and a derivation path
//! (`GET /v1/provenance/path`, a [`LineagePath`]).
//!
//! The engine keeps its own answer types (interned names, enum edge ends) because the lineage
//! benchmark depends on their layout; these are the plain mirrors a client decodes. They accept
//! fields they do not know, so an older client keeps working against a newer server; drift is
//! caught by the server's round-trip test instead, which re-serialises every answer and
//! compares it with what the server sent (a field missing here fails it).

use serde::{Deserialize, Serialize};

use crate::digest::ArtifactId;

/// The answer to a lineage query: the artifacts reached (with the depth each was reached at),
/// the WorkItems, Missions and Agents on the way, the typed edges between them, how many nodes
/// were withheld (in Groups the caller cannot read: counted, never named) and whether a limit
/// or the time budget cut the answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Lineage {
    /// The artifact the walk started from; `null` for WorkItem and Mission subgraphs.
    pub root: Option<ArtifactId>,
    pub artifacts: Vec<ArtifactNode>,
    pub work_items: Vec<String>,
    pub missions: Vec<String>,
    pub agents: Vec<String>,
    pub edges: Vec<Edge>,
    /// Context Package versions: only in a package's provenance (DESIGN §11).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub contexts: Vec<ContextNode>,
    pub withheld: u64,
    pub truncated: bool,
    /// Present only on a truncated answer: pass it back as `cursor` to continue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

/// A Context Package version in a package's provenance: `revisionOf` edges link it to its
/// previous version, `cites` edges to the Artifacts it cites.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextNode {
    pub id: ArtifactId,
    pub package_id: String,
    pub version: u64,
    pub group_id: String,
    pub mission_id: String,
    pub generator: String,
    pub sequence: u64,
    pub source_events: crate::context::EventRange,
}

/// An artifact reached by the walk.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactNode {
    pub id: ArtifactId,
    /// Edges followed from the root (0 for the root itself).
    pub depth: u32,
    pub size: u64,
    /// The key fields of the artifact's manifests the caller may read (almost always one).
    pub manifests: Vec<ManifestSummary>,
}

/// The key fields of one manifest of an artifact.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManifestSummary {
    pub manifest_id: ArtifactId,
    pub group_id: String,
    pub mission_id: String,
    pub work_item_id: String,
    pub producer: String,
    pub media_type: String,
    pub sequence: u64,
}

/// A typed edge. Its ends are node names: `blake3:<hex>` for an artifact, `workItem:<id>`,
/// `mission:<id>` or `agent:<id>`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Edge {
    pub from: String,
    pub to: String,
    /// `derivedFrom`, `generatedBy`, `partOf` or `attributedTo`.
    #[serde(rename = "type")]
    pub kind: String,
}

/// The answer to `GET /v1/provenance/path`: one shortest derivation path, its ends included.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LineagePath {
    pub path: Vec<ArtifactId>,
    /// Edges on the path (`path.len() - 1`).
    pub length: u64,
}
