//! The provenance graph in memory (DESIGN §6, ART-4): bounded lineage queries without a
//! recursive query per request.
//!
//! The authoritative edges are the `derivations` rows, written in the same transaction as the
//! `artifact.published` Event that carries them. This index is rebuilt from those tables at
//! start and then kept in step by `Store::publish`, which adds a publication only after its
//! transaction committed; edges are only ever added (the graph is append-only), so the index
//! can lag a commit by microseconds but never holds an edge the tables do not.
//!
//! Every traversal is iterative (a queue, never the call stack), bounded by depth, by a node
//! limit and by a time budget, and skips nodes the caller may not read: they are counted in
//! `withheld`, never named, and never traversed through (CTX-5).

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::{LazyLock, Mutex, RwLock};
use std::time::{Duration, Instant};

use serde::{Serialize, Serializer};
use smallvec::SmallVec;
use weft_api::ArtifactId;

/// Hash sets and maps for the index and its walks: keys are small integers or BLAKE3 ids, so a
/// fast, randomly seeded hasher instead of SipHash.
type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;
type FastSet<T> = HashSet<T, foldhash::fast::RandomState>;

/// `Node::group` when an artifact's manifests span several Groups (or it has none yet): the
/// manifests themselves must be consulted.
const MIXED: u32 = u32::MAX;
/// The end of a manifest chain.
const NO_MANIFEST: u32 = u32::MAX;

/// One manifest's key fields as the index keeps them, with its artifact's id and size:
/// everything an answer says about an artifact, in one aligned pair of cache lines, names
/// included (see `Name`).
#[derive(Clone, Copy, Debug)]
#[repr(C, align(128))]
struct ManifestNode {
    artifact: ArtifactId,
    manifest_id: ArtifactId,
    size: u64,
    sequence: u64,
    group_name: Name,
    mission: Name,
    work_item: Name,
    producer: Name,
    media_type: Name,
    /// The Group, numbered (see `Graph::groups`).
    group: u32,
    /// The same artifact's next manifest, or `NO_MANIFEST`.
    next: u32,
}

const _: () = assert!(std::mem::size_of::<ManifestNode>() == 128);

/// An interned name (a Group, Mission, WorkItem, Agent or media type): eight bytes, copied
/// freely, equal exactly when the text is. Names are kept once for as long as the process
/// runs: the index never forgets a publication, so it would never free a name either, and
/// copying a name into an answer then touches no memory beyond the record it sits in (a
/// reference-counted string would cost a cache miss per distinct name).
#[derive(Clone, Copy)]
pub struct Name(&'static String);

impl Name {
    fn new(text: &str) -> Self {
        static NAMES: LazyLock<Mutex<HashMap<&'static str, Name>>> = LazyLock::new(Mutex::default);
        // Short critical section: publications and index rebuilds only, never a query.
        let mut names = NAMES.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(&kept) = names.get(text) {
            return kept;
        }
        let kept: &'static String = Box::leak(Box::new(text.to_owned()));
        names.insert(kept.as_str(), Name(kept));
        Name(kept)
    }

    pub fn as_str(self) -> &'static str {
        self.0.as_str()
    }
}

impl std::ops::Deref for Name {
    type Target = str;
    fn deref(&self) -> &str {
        self.0
    }
}

impl PartialEq for Name {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self.0, other.0) // interned: one text, one address
    }
}

impl Eq for Name {}

impl std::hash::Hash for Name {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        std::ptr::hash(self.0, state);
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.0.as_str(), f)
    }
}

impl Serialize for Name {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.0)
    }
}

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
}

/// How many steps of a walk are loaded together (see `Walk::next_batch`).
const STEP_BATCH: usize = 32;

/// One step of a walk: from the node at position `at` of the answer's order (reached at
/// `depth`) along an edge to `next`.
#[derive(Clone, Copy, Debug)]
struct Step {
    at: u32,
    depth: u32,
    next: u32,
    is_source: bool,
    /// The artifact whose manifest declared the edge, and that manifest.
    declared_by: u32,
    manifest: u32,
    /// `next`'s `Node::group`, loaded with the rest of its batch.
    group: u32,
}

/// A breadth-first walk in progress. `reached` is both the queue and the answer's order:
/// nodes are appended when first discovered and expanded in that order, `head` (and
/// `next_edge`, inside one node's edge lists) marking how far expansion has come.
struct Walk<'a> {
    graph: &'a Graph,
    view: View<'a>,
    ancestors: bool,
    descendants: bool,
    max_depth: Option<u32>,
    /// Nodes past this position are not needed (they only tell that the page is truncated).
    page_end: usize,
    /// node → its position in `reached`
    position: FastMap<u32, u32>,
    /// (node, depth)
    reached: Vec<(u32, u32)>,
    head: usize,
    next_edge: usize,
    /// Neighbours the reader may not see: counted, never named.
    withheld: FastSet<u32>,
    /// (derived artifact, source), both reached, by position in `reached`
    derivations: Vec<(u32, u32)>,
    truncated: bool,
}

impl<'a> Walk<'a> {
    fn new(
        graph: &'a Graph,
        starts: &[u32],
        query: &Query,
        max_depth: Option<u32>,
        view: View<'a>,
    ) -> Self {
        let page_end = query.skip.saturating_add(query.limit);
        // Sized for a typical answer up front: growing costs rehashes and copies.
        let expected = page_end.saturating_add(1).min(512);
        let mut walk = Walk {
            graph,
            view,
            ancestors: matches!(query.direction, Direction::Ancestors | Direction::Both),
            descendants: matches!(query.direction, Direction::Descendants | Direction::Both),
            max_depth,
            page_end,
            position: FastMap::with_capacity_and_hasher(expected, Default::default()),
            reached: Vec::with_capacity(expected),
            head: 0,
            next_edge: 0,
            withheld: FastSet::default(),
            derivations: Vec::with_capacity(expected * 2),
            truncated: false,
        };
        for &start in starts {
            if !walk.position.contains_key(&start) {
                walk.position.insert(start, walk.reached.len() as u32);
                walk.reached.push((start, 0));
            }
        }
        walk
    }

    /// Refills `batch` with up to `STEP_BATCH` of the next steps, in order; `false` when the
    /// walk is done.
    fn next_batch(&mut self, batch: &mut Vec<Step>) -> bool {
        batch.clear();
        let graph = self.graph;
        let expandable = self.reached.len().min(self.page_end);
        // The edge lists of the next nodes to expand, read together first: a long list lives
        // on the heap, a cache miss of its own.
        let ahead = self
            .reached
            .get(self.head..expandable.min(self.head + 8))
            .unwrap_or_default();
        let touched: u32 = ahead
            .iter()
            .map(|&(n, _)| {
                let record = &graph.nodes[n as usize];
                record.sources.first().map_or(0, |e| e.0)
                    ^ record.derived.first().map_or(0, |e| e.0)
            })
            .fold(0, |a, b| a ^ b);
        std::hint::black_box(touched);
        while batch.len() < STEP_BATCH && self.head < expandable {
            let (node, depth) = self.reached[self.head];
            if self.next_edge == 0 && self.max_depth.is_some_and(|max| depth >= max) {
                self.head += 1;
                continue;
            }
            let record = &graph.nodes[node as usize];
            let up: &[(u32, u32)] = if self.ancestors { &record.sources } else { &[] };
            let down: &[(u32, u32)] = if self.descendants {
                &record.derived
            } else {
                &[]
            };
            let n_edges = up.len() + down.len();
            while self.next_edge < n_edges && batch.len() < STEP_BATCH {
                let (next, is_source, declared_by, manifest) = match up.get(self.next_edge) {
                    Some(&(source, manifest)) => (source, true, node, manifest),
                    None => {
                        let (derived, manifest) = down[self.next_edge - up.len()];
                        (derived, false, derived, manifest)
                    }
                };
                batch.push(Step {
                    at: self.head as u32,
                    depth,
                    next,
                    is_source,
                    declared_by,
                    manifest,
                    group: MIXED,
                });
                self.next_edge += 1;
            }
            if self.next_edge == n_edges {
                self.head += 1;
                self.next_edge = 0;
            }
        }
        !batch.is_empty()
    }

    /// Takes one step (its `group` loaded): records the edge if the view includes it, and
    /// discovers `next` if it is new, visible and still within the page.
    fn take(&mut self, step: Step) {
        let graph = self.graph;
        let declared_group = if step.is_source {
            graph.nodes[step.declared_by as usize].group
        } else {
            step.group
        };
        if !self.view.sees_edge(graph, declared_group, step.manifest) {
            return; // declared in a Group or at a time this view does not include
        }
        let reached_at = match self.position.get(&step.next) {
            Some(&p) => p,
            None if !self.view.timeless().sees_with(graph, step.next, step.group) => {
                self.withheld.insert(step.next);
                return;
            }
            None if !self.view.sees_with(graph, step.next, step.group) => return, // after `asOf`
            None if self.reached.len() > self.page_end => {
                self.truncated = true; // beyond this page: not needed
                return;
            }
            None => {
                let p = self.reached.len() as u32;
                self.position.insert(step.next, p);
                self.reached.push((step.next, step.depth + 1));
                p
            }
        };
        self.derivations.push(if step.is_source {
            (step.at, reached_at)
        } else {
            (reached_at, step.at)
        });
    }
}

/// One artifact, as a walk reads it: exactly one cache line, so a step costs one miss for the
/// neighbour's visibility and its edges (most edge lists fit inline; longer ones spill to the
/// heap). Its id and size, needed only for artifacts that make the answer, live in
/// `Graph::ids`.
#[derive(Debug)]
#[repr(C, align(64))]
struct Node {
    /// The Group all of this artifact's manifests are in, or `MIXED`.
    group: u32,
    /// Head of this artifact's manifest chain in `Graph::manifests`.
    first_manifest: u32,
    /// derivedFrom: `(source, manifest that declared the edge)`, the manifest being this
    /// artifact's (so `asOf` can tell when each edge appeared).
    sources: SmallVec<[(u32, u32); 3]>,
    /// The reverse: `(derived artifact, the derived artifact's manifest that declared it)`.
    derived: SmallVec<[(u32, u32); 2]>,
}

const _: () = assert!(std::mem::size_of::<Node>() == 64);

#[derive(Debug, Default)]
struct Graph {
    index: FastMap<ArtifactId, u32>,
    nodes: Vec<Node>,
    manifests: Vec<ManifestNode>,
    /// WorkItem / Mission → artifacts published in it.
    by_work_item: FastMap<&'static str, Vec<u32>>,
    by_mission: FastMap<&'static str, Vec<u32>>,
    /// The Groups, numbered in the order first seen (`Node::group`, `ManifestNode::group`).
    groups: FastMap<&'static str, u32>,
}

impl Graph {
    fn group(&mut self, name: Name) -> u32 {
        let next = self.groups.len() as u32;
        *self.groups.entry(name.as_str()).or_insert(next)
    }

    fn node(&mut self, id: ArtifactId) -> u32 {
        if let Some(&n) = self.index.get(&id) {
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
    fn id(&self, n: u32) -> ArtifactId {
        self.manifests_of(n)
            .next()
            .map_or(ArtifactId([0; 32]), |(_, m)| m.artifact)
    }

    /// The manifests of node `n`, oldest first.
    fn manifests_of(&self, n: u32) -> impl Iterator<Item = (u32, &ManifestNode)> {
        self.chain(self.nodes[n as usize].first_manifest)
    }

    /// The manifests from index `first` along its chain, with their indices.
    fn chain(&self, first: u32) -> impl Iterator<Item = (u32, &ManifestNode)> {
        let mut at = first;
        std::iter::from_fn(move || {
            let index = at;
            let manifest = self.manifests.get(index as usize)?;
            at = manifest.next;
            Some((index, manifest))
        })
    }

    fn add(&mut self, publication: &Publication) {
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
struct View<'a> {
    groups: Option<&'a [u32]>,
    as_of: Option<(u32, u64)>,
}

impl View<'_> {
    fn group_ok(&self, group: u32) -> bool {
        self.groups
            .is_none_or(|groups| groups.binary_search(&group).is_ok())
    }

    fn passes(&self, manifest: &ManifestNode) -> bool {
        self.group_ok(manifest.group)
            && self.as_of.is_none_or(|(group, sequence)| {
                manifest.group == group && manifest.sequence <= sequence
            })
    }

    /// Whether this view sees artifact `n`: one of its manifests passes.
    fn sees(&self, graph: &Graph, n: u32) -> bool {
        self.sees_with(graph, n, graph.nodes[n as usize].group)
    }

    /// `sees`, with `n`'s `Node::group` already loaded.
    fn sees_with(&self, graph: &Graph, n: u32, group: u32) -> bool {
        if self.as_of.is_none() && group != MIXED {
            return self.group_ok(group);
        }
        graph.manifests_of(n).any(|(_, m)| self.passes(m))
    }

    /// Whether `manifest`, which declared an edge, is in this view (`group` is the
    /// `Node::group` of the artifact it belongs to).
    fn sees_edge(&self, graph: &Graph, group: u32, manifest: u32) -> bool {
        if self.as_of.is_none() && group != MIXED {
            return self.group_ok(group);
        }
        self.passes(&graph.manifests[manifest as usize])
    }

    fn timeless(self) -> Self {
        View {
            groups: self.groups,
            as_of: None,
        }
    }
}

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
}

impl fmt::Display for NodeRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodeRef::Artifact(id) => fmt::Display::fmt(id, f),
            NodeRef::WorkItem(name) => write!(f, "workItem:{name}"),
            NodeRef::Mission(name) => write!(f, "mission:{name}"),
            NodeRef::Agent(name) => write!(f, "agent:{name}"),
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
    /// Nodes reached that belong only to Groups the caller cannot read: counted, not named.
    pub withheld: usize,
    pub truncated: bool,
    /// Pass back as `cursor` to continue a truncated answer.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
}

/// The index. Reads take a shared lock for the duration of one query.
#[derive(Debug, Default)]
pub(crate) struct Index {
    graph: RwLock<Graph>,
}

impl Index {
    pub(crate) fn add(&self, publication: &Publication) {
        // Short critical section, no await inside.
        self.graph
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .add(publication);
    }

    pub(crate) fn add_all(&self, publications: &[Publication]) {
        let mut graph = self.graph.write().unwrap_or_else(|p| p.into_inner());
        for publication in publications {
            graph.add(publication);
        }
    }

    /// Bytes the index takes, roughly (for the benchmark's report).
    pub(crate) fn approximate_bytes(&self) -> usize {
        let graph = self.graph.read().unwrap_or_else(|p| p.into_inner());
        // Edge lists that spilled out of their node onto the heap.
        let edges: usize = graph
            .nodes
            .iter()
            .map(|n| {
                [
                    n.sources.spilled().then(|| n.sources.capacity()),
                    n.derived.spilled().then(|| n.derived.capacity()),
                ]
                .into_iter()
                .flatten()
                .sum::<usize>()
            })
            .sum();
        let scopes: usize = graph
            .by_work_item
            .values()
            .chain(graph.by_mission.values())
            .map(Vec::capacity)
            .sum();
        graph.nodes.capacity() * std::mem::size_of::<Node>()
            + graph.index.capacity() * (std::mem::size_of::<(ArtifactId, u32)>() + 1)
            + graph.manifests.capacity() * std::mem::size_of::<ManifestNode>()
            + (edges * 2) * std::mem::size_of::<u32>()
            + scopes * std::mem::size_of::<u32>()
            + (graph.by_work_item.capacity() + graph.by_mission.capacity())
                * std::mem::size_of::<(&str, Vec<u32>)>()
    }

    /// The reader's Groups as the index's sorted interned ids (`None`: all).
    fn groups_of(graph: &Graph, reader_groups: Option<&[String]>) -> Option<Vec<u32>> {
        reader_groups.map(|groups| {
            let mut ids: Vec<u32> = groups
                .iter()
                .filter_map(|g| graph.groups.get(g.as_str()).copied())
                .collect();
            ids.sort_unstable();
            ids
        })
    }

    /// The view of a query: `None` if its `asOf` Group is unknown (nothing passes).
    fn view<'a>(graph: &Graph, groups: Option<&'a [u32]>, query: &Query) -> Option<View<'a>> {
        let as_of = match &query.as_of {
            None => None,
            Some((group, sequence)) => Some((*graph.groups.get(group.as_str())?, *sequence)),
        };
        Some(View { groups, as_of })
    }

    /// Whether a reader with these Groups (`None`: all) can see artifact `id`.
    pub(crate) fn sees(&self, id: &ArtifactId, reader_groups: Option<&[String]>) -> bool {
        let graph = self.graph.read().unwrap_or_else(|p| p.into_inner());
        let groups = Self::groups_of(&graph, reader_groups);
        let view = View {
            groups: groups.as_deref(),
            as_of: None,
        };
        graph.index.get(id).is_some_and(|&n| view.sees(&graph, n))
    }

    /// Ancestors and/or descendants of `root`, bounded; see the module docs. `None` if the
    /// reader cannot see `root`.
    pub(crate) fn traverse(
        &self,
        root: &ArtifactId,
        query: &Query,
        reader_groups: Option<&[String]>,
    ) -> Option<Lineage> {
        let graph = self.graph.read().unwrap_or_else(|p| p.into_inner());
        let &start = graph.index.get(root)?;
        let groups = Self::groups_of(&graph, reader_groups);
        let view = Self::view(&graph, groups.as_deref(), query)?;
        if !view.sees(&graph, start) {
            return None;
        }
        let mut answer = Self::walk(&graph, vec![start], query, view);
        answer.root = Some(*root);
        Some(answer)
    }

    /// Everything published inside a WorkItem or Mission (`scope` is `workItem` or `mission`)
    /// and what it was derived from, as the reader may see it. `None` if nothing is visible.
    pub(crate) fn scope(
        &self,
        scope: Scope,
        name: &str,
        query: &Query,
        reader_groups: Option<&[String]>,
    ) -> Option<Lineage> {
        let graph = self.graph.read().unwrap_or_else(|p| p.into_inner());
        let groups = Self::groups_of(&graph, reader_groups);
        let view = Self::view(&graph, groups.as_deref(), query)?;
        let members = match scope {
            Scope::WorkItem => graph.by_work_item.get(name)?,
            Scope::Mission => graph.by_mission.get(name)?,
        };
        let mut starts: Vec<u32> = Vec::new();
        let mut started: FastSet<u32> = FastSet::default();
        for &node in members {
            let in_scope = graph.manifests_of(node).any(|(_, m)| {
                view.passes(m)
                    && match scope {
                        Scope::WorkItem => m.work_item.as_str() == name,
                        Scope::Mission => m.mission.as_str() == name,
                    }
            });
            if in_scope && started.insert(node) {
                starts.push(node);
            }
        }
        if starts.is_empty() {
            return None;
        }
        let mut query = query.clone();
        query.direction = Direction::Ancestors;
        Some(Self::walk(&graph, starts, &query, view))
    }

    /// Breadth-first from `starts` (all at depth 0), bounded by depth, page and time budget;
    /// see `Walk`.
    fn walk(graph: &Graph, starts: Vec<u32>, query: &Query, view: View<'_>) -> Lineage {
        let wanted = |kind: &str| {
            query
                .edges
                .as_ref()
                .is_none_or(|kinds| kinds.iter().any(|k| k == kind))
        };
        let max_depth = if wanted("derivedFrom") {
            query.depth
        } else {
            Some(0)
        };
        let started = Instant::now();
        let mut walk = Walk::new(graph, &starts, query, max_depth, view);
        let mut batch: Vec<Step> = Vec::with_capacity(STEP_BATCH);
        let mut n_batches = 0u32;
        while walk.next_batch(&mut batch) {
            // The time budget, looked at every 1024 steps (also inside one huge fan-out).
            n_batches += 1;
            if n_batches.is_multiple_of(32) && started.elapsed() > query.budget {
                walk.truncated = true;
                break;
            }
            // The neighbours' records, loaded in one tight loop so their cache misses overlap
            // instead of queueing one behind another; the steps are then taken in order (the
            // same order as one node at a time).
            for step in &mut batch {
                step.group = graph.nodes[step.next as usize].group;
            }
            for step in &batch {
                walk.take(*step);
            }
        }
        let mut answer = Lineage {
            withheld: walk.withheld.len(),
            truncated: walk.truncated || walk.reached.len() > walk.page_end,
            ..Lineage::default()
        };
        if answer.truncated {
            answer.cursor = Some(walk.page_end.min(walk.reached.len()).to_string());
        }
        let page = walk
            .reached
            .get(query.skip..walk.page_end.min(walk.reached.len()))
            .unwrap_or_default();
        // Where an artifact sits in the page, if it made it.
        let in_page = |p: u32| {
            (p as usize)
                .checked_sub(query.skip)
                .filter(|&i| i < page.len())
        };
        answer
            .edges
            .reserve(3 * page.len() + walk.derivations.len());
        let ids = Self::describe(graph, page, view, &mut answer);
        let mut derived_seen: FastSet<(usize, usize)> =
            FastSet::with_capacity_and_hasher(walk.derivations.len(), Default::default());
        for &(child, source) in &walk.derivations {
            if let (Some(child), Some(source)) = (in_page(child), in_page(source))
                && derived_seen.insert((child, source))
            {
                answer.edges.push(Edge {
                    from: NodeRef::Artifact(ids[child]),
                    to: NodeRef::Artifact(ids[source]),
                    kind: "derivedFrom",
                });
            }
        }
        answer.edges.retain(|edge| wanted(edge.kind));
        answer
    }

    /// The page's artifacts with their visible manifests, and the WorkItems, Missions and
    /// Agents behind them with their typed edges (deduplicated; names are copied handles).
    /// Returns the page's artifact ids, in page order.
    fn describe(
        graph: &Graph,
        page: &[(u32, u32)],
        view: View<'_>,
        answer: &mut Lineage,
    ) -> Vec<ArtifactId> {
        // Each artifact's first manifest, copied out in one tight loop so that the page's cache
        // misses overlap; the rest of a chain (rare) is followed in place. Every artifact that
        // made the page is visible, so it has one.
        let heads: Vec<Option<ManifestNode>> = page
            .iter()
            .map(|&(node, _)| {
                let first = graph.nodes[node as usize].first_manifest;
                graph.manifests.get(first as usize).copied()
            })
            .collect();
        let mut part_of: FastSet<(Name, Name)> = FastSet::default();
        let (mut work_items, mut missions, mut agents): (
            FastSet<Name>,
            FastSet<Name>,
            FastSet<Name>,
        ) = Default::default();
        // (WorkItem, Agent) already linked to the current artifact
        let mut linked: Vec<(Name, Name)> = Vec::new();
        let ids: Vec<ArtifactId> = heads
            .iter()
            .map(|head| head.map_or(ArtifactId([0; 32]), |m| m.artifact))
            .collect();
        answer.artifacts.reserve(page.len());
        for (&(_, depth), head) in page.iter().zip(heads) {
            let Some(head) = head else {
                continue; // unreachable: a visible artifact has a manifest
            };
            let (id, size) = (head.artifact, head.size);
            let artifact = NodeRef::Artifact(id);
            let mut manifests = SmallVec::new();
            linked.clear();
            let rest = graph.chain(head.next).map(|(_, m)| *m);
            for m in std::iter::once(head).chain(rest) {
                if !view.passes(&m) {
                    continue;
                }
                manifests.push(ManifestSummary {
                    manifest_id: m.manifest_id,
                    group_id: m.group_name,
                    mission_id: m.mission,
                    work_item_id: m.work_item,
                    producer: m.producer,
                    media_type: m.media_type,
                    sequence: m.sequence,
                });
                if !linked.iter().any(|&(w, _)| w == m.work_item) {
                    answer.edges.push(Edge {
                        from: artifact,
                        to: NodeRef::WorkItem(m.work_item),
                        kind: "generatedBy",
                    });
                }
                if part_of.insert((m.work_item, m.mission)) {
                    answer.edges.push(Edge {
                        from: NodeRef::WorkItem(m.work_item),
                        to: NodeRef::Mission(m.mission),
                        kind: "partOf",
                    });
                }
                if !linked.iter().any(|&(_, a)| a == m.producer) {
                    answer.edges.push(Edge {
                        from: artifact,
                        to: NodeRef::Agent(m.producer),
                        kind: "attributedTo",
                    });
                }
                linked.push((m.work_item, m.producer));
                if work_items.insert(m.work_item) {
                    answer.work_items.push(m.work_item);
                }
                if missions.insert(m.mission) {
                    answer.missions.push(m.mission);
                }
                if agents.insert(m.producer) {
                    answer.agents.push(m.producer);
                }
            }
            answer.artifacts.push(ArtifactNode {
                id,
                depth,
                size,
                manifests,
            });
        }
        ids
    }

    /// One shortest derivation path between two artifacts (either direction), within
    /// `max_depth`, through artifacts and edges the reader can see only (CTX-5).
    pub(crate) fn path(
        &self,
        from: &ArtifactId,
        to: &ArtifactId,
        max_depth: u32,
        reader_groups: Option<&[String]>,
    ) -> Option<Vec<ArtifactId>> {
        let graph = self.graph.read().unwrap_or_else(|p| p.into_inner());
        let groups = Self::groups_of(&graph, reader_groups);
        let view = View {
            groups: groups.as_deref(),
            as_of: None,
        };
        let (&start, &goal) = (graph.index.get(from)?, graph.index.get(to)?);
        if !view.sees(&graph, start) || !view.sees(&graph, goal) {
            return None;
        }
        if start == goal {
            return Some(vec![graph.id(start)]);
        }
        [true, false].into_iter().find_map(|towards_sources| {
            let path = Self::meet(&graph, view, start, goal, max_depth, towards_sources)?;
            Some(path.into_iter().map(|n| graph.id(n)).collect())
        })
    }

    /// A shortest path from `start` to `goal` along sources (or along derived artifacts),
    /// searched breadth-first from both ends at once, a whole level of the smaller frontier
    /// at a time: each side then explores about the square root of what one search from
    /// `start` would. The first level in which the sides meet gives a shortest path: before
    /// it, every path was longer than both depths together; every meeting in it is exactly
    /// one longer.
    fn meet(
        graph: &Graph,
        view: View<'_>,
        start: u32,
        goal: u32,
        max_depth: u32,
        towards_sources: bool,
    ) -> Option<Vec<u32>> {
        /// One side: each reached node's parent (towards this side's end) and distance.
        struct Side {
            reached: FastMap<u32, (u32, u32)>,
            frontier: Vec<u32>,
            depth: u32,
            along_sources: bool,
        }
        let side = |end: u32, along_sources: bool| Side {
            reached: FastMap::from_iter([(end, (end, 0))]),
            frontier: vec![end],
            depth: 0,
            along_sources,
        };
        let (mut forward, mut backward) =
            (side(start, towards_sources), side(goal, !towards_sources));
        while forward.depth + backward.depth < max_depth
            && !forward.frontier.is_empty()
            && !backward.frontier.is_empty()
        {
            let grow_forward = forward.frontier.len() <= backward.frontier.len();
            let (growing, other) = if grow_forward {
                (&mut forward, &backward)
            } else {
                (&mut backward, &forward)
            };
            let mut next_frontier = Vec::new();
            let mut meeting = None;
            'level: for &node in &growing.frontier {
                let record = &graph.nodes[node as usize];
                let edges: &[(u32, u32)] = if growing.along_sources {
                    &record.sources
                } else {
                    &record.derived
                };
                for &(next, manifest) in edges {
                    // A source edge is declared by the derived artifact's manifest: `node`
                    // when walking to sources, `next` when walking to derived artifacts.
                    let declared_by = if growing.along_sources { node } else { next };
                    let declared_group = graph.nodes[declared_by as usize].group;
                    if growing.reached.contains_key(&next)
                        || !view.sees_edge(graph, declared_group, manifest)
                        || !view.sees(graph, next)
                    {
                        continue;
                    }
                    growing.reached.insert(next, (node, growing.depth + 1));
                    if other.reached.contains_key(&next) {
                        meeting = Some(next);
                        break 'level;
                    }
                    next_frontier.push(next);
                }
            }
            growing.frontier = next_frontier;
            growing.depth += 1;
            if let Some(middle) = meeting {
                let trail = |side: &Side| {
                    let mut trail = vec![middle];
                    let mut at = middle;
                    while let Some(&(parent, distance)) = side.reached.get(&at) {
                        if distance == 0 {
                            break;
                        }
                        trail.push(parent);
                        at = parent;
                    }
                    trail
                };
                let mut path = trail(&forward);
                path.reverse(); // start … middle
                path.extend(trail(&backward).into_iter().skip(1)); // … goal
                return Some(path);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    //! The index against a plain reference walk (one node at a time, over the publications
    //! as a list) on generated histories: artifacts published in several Groups, edges
    //! declared by later manifests, readers of some Groups, `asOf`, paging and both
    //! directions (ART-4, CTX-5).

    use std::collections::{BTreeSet, VecDeque};

    use proptest::prelude::*;

    use super::*;

    #[derive(Clone, Debug)]
    struct Published {
        artifact: usize,
        group: usize,
        sources: Vec<usize>,
        sequence: u64,
    }

    fn artifact_id(n: usize) -> ArtifactId {
        ArtifactId(*blake3::hash(format!("artifact {n}").as_bytes()).as_bytes())
    }

    fn group_name(g: usize) -> String {
        format!("g{g}")
    }

    /// Artifacts `0..n`, each published once or twice (the second time perhaps in another
    /// Group, declaring its own sources), sources always earlier artifacts.
    fn history() -> impl Strategy<Value = Vec<Published>> {
        (2usize..40).prop_flat_map(|n| {
            prop::collection::vec(
                (
                    0usize..3,
                    prop::collection::vec(any::<prop::sample::Index>(), 0..4),
                    prop::option::weighted(
                        0.25,
                        (
                            0usize..3,
                            prop::collection::vec(any::<prop::sample::Index>(), 0..3),
                        ),
                    ),
                ),
                n,
            )
            .prop_map(|artifacts| {
                let mut published = Vec::new();
                let mut later = Vec::new();
                for (artifact, (group, sources, second)) in artifacts.into_iter().enumerate() {
                    let pick = |indices: Vec<prop::sample::Index>| -> Vec<usize> {
                        let mut picked: Vec<usize> = if artifact == 0 {
                            Vec::new()
                        } else {
                            indices.iter().map(|i| i.index(artifact)).collect()
                        };
                        picked.sort_unstable();
                        picked.dedup();
                        picked
                    };
                    published.push((artifact, group, pick(sources)));
                    if let Some((group, sources)) = second {
                        later.push((artifact, group, pick(sources)));
                    }
                }
                // Second publications come after everything else, so some edges appear late.
                published
                    .into_iter()
                    .chain(later)
                    .enumerate()
                    .map(|(i, (artifact, group, sources))| Published {
                        artifact,
                        group,
                        sources,
                        sequence: i as u64 + 1,
                    })
                    .collect()
            })
        })
    }

    fn index_of(history: &[Published]) -> Index {
        let index = Index::default();
        for (i, p) in history.iter().enumerate() {
            index.add(&Publication {
                artifact: artifact_id(p.artifact),
                size: p.artifact as u64,
                manifest_id: ArtifactId(
                    *blake3::hash(format!("manifest {i}").as_bytes()).as_bytes(),
                ),
                group: group_name(p.group),
                mission: format!("m{}", p.artifact % 2),
                work_item: format!("w{}", p.artifact % 5),
                producer: format!("a{}", p.group),
                media_type: "text/plain".into(),
                sequence: p.sequence,
                sources: p.sources.iter().map(|&s| artifact_id(s)).collect(),
            });
        }
        index
    }

    /// A query from the first page, with time to spare, all edge types, no `asOf`.
    fn simple_query(direction: Direction, depth: Option<u32>, limit: usize) -> Query {
        Query {
            direction,
            depth,
            limit,
            skip: 0,
            budget: Duration::from_secs(60),
            edges: None,
            as_of: None,
        }
    }

    #[derive(Debug, PartialEq)]
    struct Walked {
        reached: Vec<(ArtifactId, u32)>,
        derived_from: BTreeSet<(ArtifactId, ArtifactId)>,
        withheld: usize,
        truncated: bool,
    }

    /// The reference: the same rules, written as plainly as possible.
    fn reference(
        history: &[Published],
        root: usize,
        query: &Query,
        reader: Option<&[usize]>,
    ) -> Option<Walked> {
        let as_of = query.as_of.as_ref().map(|(g, s)| (g.clone(), *s));
        let passes = |p: &Published, timeless: bool| {
            reader.is_none_or(|groups| groups.contains(&p.group))
                && (timeless
                    || as_of
                        .as_ref()
                        .is_none_or(|(g, s)| group_name(p.group) == *g && p.sequence <= *s))
        };
        let visible = |a: usize, timeless: bool| {
            history
                .iter()
                .any(|p| p.artifact == a && passes(p, timeless))
        };
        if !visible(root, false) {
            return None;
        }
        let page_end = query.skip + query.limit;
        let mut seen = BTreeSet::from([root]);
        let mut withheld = BTreeSet::new();
        let mut queue = VecDeque::from([(root, 0u32)]);
        let mut reached = Vec::new();
        let mut edges = Vec::new();
        let mut truncated = false;
        while let Some((node, depth)) = queue.pop_front() {
            reached.push((node, depth));
            if reached.len() > page_end {
                truncated = true;
                break;
            }
            if query.depth.is_some_and(|max| depth >= max) {
                continue;
            }
            let mut steps = Vec::new(); // (next, declaring publication, is a source)
            if matches!(query.direction, Direction::Ancestors | Direction::Both) {
                for p in history.iter().filter(|p| p.artifact == node) {
                    steps.extend(p.sources.iter().map(|&s| (s, p, true)));
                }
            }
            if matches!(query.direction, Direction::Descendants | Direction::Both) {
                for p in history.iter().filter(|p| p.sources.contains(&node)) {
                    steps.push((p.artifact, p, false));
                }
            }
            for (next, declared, is_source) in steps {
                if !passes(declared, false) {
                    continue;
                }
                if !visible(next, true) {
                    withheld.insert(next);
                    continue;
                }
                if !visible(next, false) {
                    continue;
                }
                edges.push(if is_source {
                    (node, next)
                } else {
                    (next, node)
                });
                if seen.insert(next) {
                    queue.push_back((next, depth + 1));
                }
            }
        }
        let page: Vec<(usize, u32)> = reached
            .into_iter()
            .skip(query.skip)
            .take(query.limit)
            .collect();
        let in_page = |a: usize| page.iter().any(|&(n, _)| n == a);
        Some(Walked {
            derived_from: edges
                .into_iter()
                .filter(|&(c, s)| in_page(c) && in_page(s))
                .map(|(c, s)| (artifact_id(c), artifact_id(s)))
                .collect(),
            reached: page.into_iter().map(|(n, d)| (artifact_id(n), d)).collect(),
            withheld: withheld.len(),
            truncated,
        })
    }

    fn walked(lineage: Lineage) -> Walked {
        Walked {
            reached: lineage.artifacts.iter().map(|a| (a.id, a.depth)).collect(),
            derived_from: lineage
                .edges
                .iter()
                .filter(|e| e.kind == "derivedFrom")
                .map(|e| match (e.from, e.to) {
                    (NodeRef::Artifact(c), NodeRef::Artifact(s)) => (c, s),
                    other => panic!("derivedFrom between {other:?}"),
                })
                .collect(),
            withheld: lineage.withheld,
            truncated: lineage.truncated,
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        #[test]
        fn index_walks_as_the_reference_does(
            history in history(),
            root in any::<prop::sample::Index>(),
            direction in prop::sample::select(vec![Direction::Ancestors, Direction::Descendants, Direction::Both]),
            depth in prop::option::of(0u32..6),
            limit in 1usize..30,
            skip in 0usize..10,
            reader in prop::option::of(prop::collection::vec(0usize..3, 0..3)),
            as_of in prop::option::weighted(0.3, (0usize..3, 0u64..60)),
        ) {
            let artifacts = history.iter().map(|p| p.artifact).max().map_or(0, |m| m + 1);
            let root = root.index(artifacts);
            let query = Query {
                direction,
                depth,
                limit,
                skip,
                budget: Duration::from_secs(60),
                edges: None,
                as_of: as_of.map(|(g, s)| (group_name(g), s)),
            };
            let names: Option<Vec<String>> = reader.as_ref().map(|gs| gs.iter().map(|&g| group_name(g)).collect());
            let index = index_of(&history);
            let got = index.traverse(&artifact_id(root), &query, names.as_deref()).map(walked);
            let want = reference(&history, root, &query, reader.as_deref());
            prop_assert_eq!(got, want);
        }
    }

    /// The reference path search: breadth-first from `from` over the visible edges towards
    /// sources, then towards derived artifacts; the number of artifacts on a shortest path.
    fn reference_path_len(
        history: &[Published],
        from: usize,
        to: usize,
        max_depth: u32,
        reader: Option<&[usize]>,
    ) -> Option<usize> {
        let passes = |p: &Published| reader.is_none_or(|groups| groups.contains(&p.group));
        let visible = |a: usize| history.iter().any(|p| p.artifact == a && passes(p));
        if !visible(from) || !visible(to) {
            return None;
        }
        // (derived, source), declared by a manifest the reader can see
        let edges: Vec<(usize, usize)> = history
            .iter()
            .filter(|p| passes(p))
            .flat_map(|p| p.sources.iter().map(move |&s| (p.artifact, s)))
            .filter(|&(d, s)| visible(d) && visible(s))
            .collect();
        for towards_sources in [true, false] {
            let mut distance = std::collections::BTreeMap::from([(from, 0u32)]);
            let mut queue = VecDeque::from([from]);
            while let Some(node) = queue.pop_front() {
                let d = distance[&node];
                if node == to {
                    return Some(d as usize + 1);
                }
                if d >= max_depth {
                    continue;
                }
                for &(derived, source) in &edges {
                    let next = match (towards_sources, derived == node, source == node) {
                        (true, true, _) => source,
                        (false, _, true) => derived,
                        _ => continue,
                    };
                    if let std::collections::btree_map::Entry::Vacant(e) = distance.entry(next) {
                        e.insert(d + 1);
                        queue.push_back(next);
                    }
                }
            }
        }
        None
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// The two-ended search finds a path exactly when the reference does, as short, and
        /// along edges the reader can see (CTX-5).
        #[test]
        fn paths_are_shortest_and_visible(
            history in history(),
            from in any::<prop::sample::Index>(),
            to in any::<prop::sample::Index>(),
            max_depth in 0u32..8,
            reader in prop::option::of(prop::collection::vec(0usize..3, 0..3)),
        ) {
            let artifacts = history.iter().map(|p| p.artifact).max().map_or(0, |m| m + 1);
            let (from, to) = (from.index(artifacts), to.index(artifacts));
            let names: Option<Vec<String>> = reader.as_ref().map(|gs| gs.iter().map(|&g| group_name(g)).collect());
            let index = index_of(&history);
            let got = index.path(&artifact_id(from), &artifact_id(to), max_depth, names.as_deref());
            let want = reference_path_len(&history, from, to, max_depth, reader.as_deref());
            prop_assert_eq!(got.as_ref().map(Vec::len), want);
            if let Some(path) = got {
                let number = |id: &ArtifactId| (0..artifacts).find(|&a| artifact_id(a) == *id);
                let steps: Vec<usize> = path.iter().filter_map(number).collect();
                prop_assert_eq!(steps.first(), Some(&from));
                prop_assert_eq!(steps.last(), Some(&to));
                let declared = |derived: usize, source: usize| {
                    history.iter().any(|p| {
                        p.artifact == derived
                            && p.sources.contains(&source)
                            && reader.as_ref().is_none_or(|g| g.contains(&p.group))
                    })
                };
                let up = steps.windows(2).all(|w| declared(w[0], w[1]));
                let down = steps.windows(2).all(|w| declared(w[1], w[0]));
                prop_assert!(up || down, "{steps:?} is not a path of visible edges");
            }
        }
    }

    #[test]
    fn a_huge_fan_out_is_cut_by_the_time_budget_with_a_cursor() {
        // One source with 5,000 derived artifacts, walked with no time to spare.
        let mut history = vec![Published {
            artifact: 0,
            group: 0,
            sources: vec![],
            sequence: 1,
        }];
        history.extend((1..=5000).map(|a| Published {
            artifact: a,
            group: 0,
            sources: vec![0],
            sequence: a as u64 + 1,
        }));
        let index = index_of(&history);
        let mut query = simple_query(Direction::Descendants, None, 10_000);
        query.budget = Duration::ZERO;
        let cut = index
            .traverse(&artifact_id(0), &query, None)
            .expect("visible");
        assert!(cut.truncated);
        assert!(cut.artifacts.len() < 5001, "{}", cut.artifacts.len());
        assert_eq!(cut.cursor, Some(cut.artifacts.len().to_string()));
        query.budget = Duration::from_secs(60);
        let whole = index
            .traverse(&artifact_id(0), &query, None)
            .expect("visible");
        assert!(!whole.truncated);
        assert_eq!(whole.artifacts.len(), 5001);
    }

    #[test]
    fn a_scope_lists_each_artifact_once_whatever_its_manifests() {
        // Artifacts 0..2000 in WorkItems w0..w4; artifact 0 published a second time.
        let mut history: Vec<Published> = (0..2000)
            .map(|a| Published {
                artifact: a,
                group: 0,
                sources: if a == 0 { vec![] } else { vec![a - 1] },
                sequence: a as u64 + 1,
            })
            .collect();
        history.push(Published {
            artifact: 0,
            group: 1,
            sources: vec![],
            sequence: 2001,
        });
        let index = index_of(&history);
        let query = simple_query(Direction::Ancestors, Some(0), 10_000);
        let answer = index
            .scope(Scope::WorkItem, "w0", &query, None)
            .expect("visible");
        let mut ids: Vec<ArtifactId> = answer.artifacts.iter().map(|a| a.id).collect();
        assert_eq!(ids.len(), 400);
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), 400, "each artifact once");
        assert!(answer.artifacts.iter().all(|a| a.depth == 0));
        assert_eq!(answer.work_items.len(), 1);
    }

    #[test]
    fn an_artifact_in_two_groups_is_seen_through_either() {
        let history = vec![
            Published {
                artifact: 0,
                group: 0,
                sources: vec![],
                sequence: 1,
            },
            Published {
                artifact: 1,
                group: 0,
                sources: vec![0],
                sequence: 2,
            },
            Published {
                artifact: 1,
                group: 1,
                sources: vec![],
                sequence: 3,
            },
        ];
        let index = index_of(&history);
        let query = simple_query(Direction::Ancestors, None, 10);
        // A reader of g1 sees artifact 1 (its g1 manifest) but not the edge its g0 manifest
        // declared, nor artifact 0, which is counted as withheld only if an edge it may see
        // leads there: none does.
        let g1 = [group_name(1)];
        let answer = index
            .traverse(&artifact_id(1), &query, Some(&g1))
            .map(walked);
        assert_eq!(
            answer,
            Some(Walked {
                reached: vec![(artifact_id(1), 0)],
                derived_from: BTreeSet::new(),
                withheld: 0,
                truncated: false,
            })
        );
        let both = [group_name(0), group_name(1)];
        let answer = index
            .traverse(&artifact_id(1), &query, Some(&both))
            .map(walked);
        assert_eq!(answer.map(|w| w.reached.len()), Some(2));
    }
}
