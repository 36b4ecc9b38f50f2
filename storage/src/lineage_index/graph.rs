//! The graph's memory layout: one 64-byte `Node` per artifact, and the `View` a query may see.

use smallvec::SmallVec;
use weft_api::ArtifactId;

use super::*;

/// One artifact, as a walk reads it: exactly one cache line, so a step costs one miss for the
/// neighbour's visibility and its edges (most edge lists fit inline; longer ones spill to the
/// heap). Its id and size, needed only for artifacts that make the answer, live in its
/// manifests (`Graph::manifests`).
#[derive(Debug)]
#[repr(C, align(64))]
pub(super) struct Node {
    /// The Group all of this artifact's manifests are in, or `MIXED`.
    pub(super) group: u32,
    /// Head of this artifact's manifest chain in `Graph::manifests`.
    pub(super) first_manifest: u32,
    /// derivedFrom: `(source, manifest that declared the edge)`, the manifest being this
    /// artifact's (so `asOf` can tell when each edge appeared).
    pub(super) sources: SmallVec<[(u32, u32); 3]>,
    /// The reverse: `(derived artifact, the derived artifact's manifest that declared it)`.
    pub(super) derived: SmallVec<[(u32, u32); 2]>,
}

const _: () = assert!(std::mem::size_of::<Node>() == 64);

#[derive(Debug, Default)]
pub(super) struct Graph {
    pub(super) index: Ids,
    pub(super) nodes: Vec<Node>,
    pub(super) manifests: Vec<ManifestNode>,
    /// WorkItem / Mission → artifacts published in it.
    pub(super) by_work_item: FastMap<&'static str, Vec<u32>>,
    pub(super) by_mission: FastMap<&'static str, Vec<u32>>,
    /// The Groups, numbered in the order first seen (`Node::group`, `ManifestNode::group`).
    pub(super) groups: FastMap<&'static str, u32>,
}

impl Graph {
    pub(super) fn group(&mut self, name: Name) -> u32 {
        let next = self.groups.len() as u32;
        *self.groups.entry(name.as_str()).or_insert(next)
    }

    pub(super) fn node(&mut self, id: ArtifactId) -> u32 {
        if let Some(n) = self.index.get(&id) {
            return n;
        }
        let n = self.nodes.len() as u32;
        self.index.insert(id, n);
        self.nodes.push(Node {
            group: MIXED,
            first_manifest: NO_MANIFEST,
            sources: SmallVec::new(),
            derived: SmallVec::new(),
        });
        n
    }

    /// The id of artifact `n` (a published one: it has a manifest).
    pub(super) fn id(&self, n: u32) -> ArtifactId {
        self.manifests_of(n)
            .next()
            .map_or(ArtifactId([0; 32]), |(_, m)| m.artifact)
    }

    /// The manifests of node `n`, oldest first.
    pub(super) fn manifests_of(&self, n: u32) -> impl Iterator<Item = (u32, &ManifestNode)> {
        self.chain(self.nodes[n as usize].first_manifest)
    }

    /// The manifests from index `first` along its chain, with their indices.
    pub(super) fn chain(&self, first: u32) -> impl Iterator<Item = (u32, &ManifestNode)> {
        let mut at = first;
        std::iter::from_fn(move || {
            let index = at;
            let manifest = self.manifests.get(index as usize)?;
            at = manifest.next;
            Some((index, manifest))
        })
    }

    pub(super) fn add(&mut self, publication: &Publication) {
        let node = self.node(publication.artifact);
        if self
            .manifests_of(node)
            .any(|(_, m)| m.manifest_id == publication.manifest_id)
        {
            return;
        }
        let group_name = Name::new(&publication.group);
        let manifest = ManifestNode {
            artifact: publication.artifact,
            manifest_id: publication.manifest_id,
            size: publication.size,
            sequence: publication.sequence,
            group_name,
            mission: Name::new(&publication.mission),
            work_item: Name::new(&publication.work_item),
            producer: Name::new(&publication.producer),
            media_type: Name::new(&publication.media_type),
            group: self.group(group_name),
            next: NO_MANIFEST,
        };
        self.by_work_item
            .entry(manifest.work_item.as_str())
            .or_default()
            .push(node);
        self.by_mission
            .entry(manifest.mission.as_str())
            .or_default()
            .push(node);
        let index = self.manifests.len() as u32;
        self.manifests.push(manifest);
        // Append to the chain, keeping manifests oldest first.
        match self.manifests_of(node).last().map(|(last, _)| last) {
            Some(last) => self.manifests[last as usize].next = index,
            None => {
                self.nodes[node as usize].first_manifest = index;
                self.nodes[node as usize].group = manifest.group;
            }
        }
        if self.nodes[node as usize].group != manifest.group {
            self.nodes[node as usize].group = MIXED;
        }
        for source in &publication.sources {
            let source = self.node(*source);
            self.nodes[node as usize].sources.push((source, index));
            self.nodes[source as usize].derived.push((node, index));
        }
    }
}

/// What a query may see: the reader's Groups (`None`: all; sorted) and, with `asOf`, only what
/// one Group's log held up to a sequence.
#[derive(Clone, Copy, Debug)]
pub(super) struct View<'a> {
    pub(super) groups: Option<&'a [u32]>,
    pub(super) as_of: Option<(u32, u64)>,
    /// A Mission-scoped reader's Missions and its Group's reusable artifacts (CTX-5/6);
    /// `None`: the reader sees every Mission of its Groups.
    pub(super) missions: Option<&'a Audience>,
    /// Only edges declared by manifests of this Mission are followed (`Query::mission`).
    pub(super) follow: Option<Name>,
}

impl View<'_> {
    pub(super) fn group_ok(&self, group: u32) -> bool {
        self.groups
            .is_none_or(|groups| groups.binary_search(&group).is_ok())
    }

    /// Whether a Mission scope says nothing here: then a node's Group alone decides.
    fn group_decides(&self) -> bool {
        self.as_of.is_none() && self.missions.is_none()
    }

    pub(super) fn passes(&self, manifest: &ManifestNode) -> bool {
        self.group_ok(manifest.group)
            && self
                .missions
                .is_none_or(|audience| audience.covers(manifest))
            && self.as_of.is_none_or(|(group, sequence)| {
                manifest.group == group && manifest.sequence <= sequence
            })
    }

    /// Whether this view sees artifact `n`: one of its manifests passes.
    pub(super) fn sees(&self, graph: &Graph, n: u32) -> bool {
        self.sees_with(graph, n, graph.nodes[n as usize].group)
    }

    /// `sees`, with `n`'s `Node::group` already loaded.
    pub(super) fn sees_with(&self, graph: &Graph, n: u32, group: u32) -> bool {
        if self.group_decides() && group != MIXED {
            return self.group_ok(group);
        }
        graph.manifests_of(n).any(|(_, m)| self.passes(m))
    }

    /// Whether `manifest`, which declared an edge, is in this view (`group` is the
    /// `Node::group` of the artifact it belongs to).
    pub(super) fn sees_edge(&self, graph: &Graph, group: u32, manifest: u32) -> bool {
        if let Some(mission) = self.follow
            && graph.manifests[manifest as usize].mission != mission
        {
            return false;
        }
        if self.group_decides() && group != MIXED {
            return self.group_ok(group);
        }
        self.passes(&graph.manifests[manifest as usize])
    }

    pub(super) fn timeless(self) -> Self {
        View {
            groups: self.groups,
            as_of: None,
            missions: self.missions,
            follow: self.follow,
        }
    }
}
