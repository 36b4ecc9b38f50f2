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

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use serde::Serialize;
use weft_api::ArtifactId;

/// One manifest's key fields, as the index keeps them (strings interned).
#[derive(Clone, Copy, Debug)]
struct ManifestNode {
    manifest_id: ArtifactId,
    group: u32,
    mission: u32,
    work_item: u32,
    producer: u32,
    media_type: u32,
    sequence: u64,
    work_item_label: u32,
    mission_label: u32,
    agent_label: u32,
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

#[derive(Debug, Default)]
struct Graph {
    index: HashMap<ArtifactId, u32>,
    ids: Vec<ArtifactId>,
    /// `blake3:<hex>` of each artifact, computed once so answers share it.
    names: Vec<Arc<str>>,
    sizes: Vec<u64>,
    manifests: Vec<Vec<ManifestNode>>,
    /// derivedFrom: artifact → `(source, slot)`, where `slot` indexes the artifact's manifest
    /// that declared the edge (so `asOf` can tell when each edge appeared).
    sources: Vec<Vec<(u32, u32)>>,
    /// The reverse: artifact → `(derived artifact, slot in the derived artifact's manifests)`.
    derived: Vec<Vec<(u32, u32)>>,
    /// WorkItem / Mission (interned) → artifacts published in it.
    by_work_item: HashMap<u32, Vec<u32>>,
    by_mission: HashMap<u32, Vec<u32>>,
    /// Interned names; answers share them instead of copying.
    strings: Vec<Arc<str>>,
    string_index: HashMap<Arc<str>, u32>,
}

impl Graph {
    fn intern(&mut self, text: &str) -> u32 {
        if let Some(&n) = self.string_index.get(text) {
            return n;
        }
        let n = self.strings.len() as u32;
        let shared: Arc<str> = Arc::from(text);
        self.strings.push(Arc::clone(&shared));
        self.string_index.insert(shared, n);
        n
    }

    fn node(&mut self, id: ArtifactId) -> u32 {
        if let Some(&n) = self.index.get(&id) {
            return n;
        }
        let n = self.ids.len() as u32;
        self.index.insert(id, n);
        self.ids.push(id);
        self.names.push(Arc::from(id.to_string()));
        self.sizes.push(0);
        self.manifests.push(Vec::new());
        self.sources.push(Vec::new());
        self.derived.push(Vec::new());
        n
    }

    /// Interned `kind:name` node label (e.g. `workItem:w-1`).
    fn label(&mut self, kind: &str, name: &str) -> u32 {
        self.intern(&format!("{kind}:{name}"))
    }

    fn add(&mut self, publication: &Publication) {
        let node = self.node(publication.artifact);
        self.sizes[node as usize] = publication.size;
        if self.manifests[node as usize]
            .iter()
            .any(|m| m.manifest_id == publication.manifest_id)
        {
            return;
        }
        let manifest = ManifestNode {
            manifest_id: publication.manifest_id,
            group: self.intern(&publication.group),
            mission: self.intern(&publication.mission),
            work_item: self.intern(&publication.work_item),
            producer: self.intern(&publication.producer),
            media_type: self.intern(&publication.media_type),
            sequence: publication.sequence,
            work_item_label: self.label("workItem", &publication.work_item),
            mission_label: self.label("mission", &publication.mission),
            agent_label: self.label("agent", &publication.producer),
        };
        self.by_work_item
            .entry(manifest.work_item)
            .or_default()
            .push(node);
        self.by_mission
            .entry(manifest.mission)
            .or_default()
            .push(node);
        let slot = self.manifests[node as usize].len() as u32;
        self.manifests[node as usize].push(manifest);
        for source in &publication.sources {
            let source = self.node(*source);
            self.sources[node as usize].push((source, slot));
            self.derived[source as usize].push((node, slot));
        }
    }
}

/// What a query may see: the reader's Groups (`None`: all) and, with `asOf`, only what one
/// Group's log held up to a sequence.
#[derive(Clone, Copy, Debug)]
struct View<'a> {
    groups: Option<&'a HashSet<u32>>,
    as_of: Option<(u32, u64)>,
}

impl View<'_> {
    fn passes(&self, manifest: &ManifestNode) -> bool {
        self.groups
            .is_none_or(|groups| groups.contains(&manifest.group))
            && self.as_of.is_none_or(|(group, sequence)| {
                manifest.group == group && manifest.sequence <= sequence
            })
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
    pub manifests: Vec<ManifestSummary>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ManifestSummary {
    pub manifest_id: ArtifactId,
    pub group_id: Arc<str>,
    pub mission_id: Arc<str>,
    pub work_item_id: Arc<str>,
    pub producer: Arc<str>,
    pub media_type: Arc<str>,
    pub sequence: u64,
}

/// A typed edge of the answer.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Edge {
    pub from: Arc<str>,
    pub to: Arc<str>,
    #[serde(rename = "type")]
    pub kind: &'static str,
}

/// The answer to a lineage query.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Lineage {
    pub root: Option<ArtifactId>,
    pub artifacts: Vec<ArtifactNode>,
    pub work_items: Vec<Arc<str>>,
    pub missions: Vec<Arc<str>>,
    pub agents: Vec<Arc<str>>,
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
        let n = graph.ids.len();
        let edges: usize = graph.sources.iter().map(Vec::capacity).sum::<usize>()
            + graph.derived.iter().map(Vec::capacity).sum::<usize>();
        let manifests: usize = graph.manifests.iter().map(Vec::capacity).sum();
        n * (32 + 8 + 3 * 24 + 48)
            + edges * 4
            + manifests * std::mem::size_of::<ManifestNode>()
            + graph
                .strings
                .iter()
                .map(|s| 2 * s.len() + 48)
                .sum::<usize>()
    }

    /// Whether `view` can see node `n`.
    fn visible(graph: &Graph, n: u32, view: View<'_>) -> bool {
        graph.manifests[n as usize].iter().any(|m| view.passes(m))
    }

    /// The view of a query: `None` if its `asOf` Group is unknown (nothing passes).
    fn view<'a>(
        graph: &Graph,
        groups: Option<&'a HashSet<u32>>,
        query: &Query,
    ) -> Option<View<'a>> {
        let as_of = match &query.as_of {
            None => None,
            Some((group, sequence)) => Some((*graph.string_index.get(group.as_str())?, *sequence)),
        };
        Some(View { groups, as_of })
    }

    fn groups_of(graph: &Graph, reader_groups: Option<&[String]>) -> Option<HashSet<u32>> {
        reader_groups.map(|groups| {
            groups
                .iter()
                .filter_map(|g| graph.string_index.get(g.as_str()).copied())
                .collect()
        })
    }

    /// Ancestors and/or descendants of `root`, bounded; see the module docs.
    pub(crate) fn traverse(
        &self,
        root: &ArtifactId,
        query: &Query,
        reader_groups: Option<&[String]>,
    ) -> Option<Lineage> {
        let graph = self.graph.read().unwrap_or_else(|p| p.into_inner());
        let &start = graph.index.get(root)?;
        let groups = Self::groups_of(&graph, reader_groups);
        let view = Self::view(&graph, groups.as_ref(), query)?;
        if !Self::visible(&graph, start, view) {
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
        let view = Self::view(&graph, groups.as_ref(), query)?;
        let &interned = graph.string_index.get(name)?;
        let members = match scope {
            Scope::WorkItem => graph.by_work_item.get(&interned)?,
            Scope::Mission => graph.by_mission.get(&interned)?,
        };
        let mut starts: Vec<u32> = Vec::new();
        for &node in members {
            let in_scope = graph.manifests[node as usize].iter().any(|m| {
                view.passes(m)
                    && match scope {
                        Scope::WorkItem => m.work_item == interned,
                        Scope::Mission => m.mission == interned,
                    }
            });
            if in_scope && !starts.contains(&node) {
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

    /// Breadth-first from `starts` (all at depth 0).
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
        let mut answer = Lineage::default();
        let mut seen: HashSet<u32> = starts.iter().copied().collect();
        let mut withheld: HashSet<u32> = HashSet::new();
        let mut queue: VecDeque<(u32, u32)> = starts.iter().map(|&s| (s, 0)).collect();
        let mut reached: Vec<(u32, u32)> = Vec::new();
        let mut edges: Vec<(u32, u32)> = Vec::new();
        while let Some((node, depth)) = queue.pop_front() {
            reached.push((node, depth));
            if reached.len() > query.skip + query.limit {
                answer.truncated = true;
                break;
            }
            if reached.len().is_multiple_of(1024) && started.elapsed() > query.budget {
                answer.truncated = true;
                break;
            }
            if max_depth.is_some_and(|max| depth >= max) {
                continue;
            }
            // (neighbour, is a source, the manifest that declared the edge: (artifact, slot))
            let mut neighbours: Vec<(u32, bool, u32, u32)> = Vec::new();
            if matches!(query.direction, Direction::Ancestors | Direction::Both) {
                neighbours.extend(
                    graph.sources[node as usize]
                        .iter()
                        .map(|&(s, slot)| (s, true, node, slot)),
                );
            }
            if matches!(query.direction, Direction::Descendants | Direction::Both) {
                neighbours.extend(
                    graph.derived[node as usize]
                        .iter()
                        .map(|&(d, slot)| (d, false, d, slot)),
                );
            }
            let without_time = View {
                groups: view.groups,
                as_of: None,
            };
            for (next, is_source, declared_by, slot) in neighbours {
                if !view.passes(&graph.manifests[declared_by as usize][slot as usize]) {
                    continue; // declared in a Group or at a time this view does not include
                }
                if !Self::visible(graph, next, without_time) {
                    withheld.insert(next);
                    continue;
                }
                if !Self::visible(graph, next, view) {
                    continue; // published after `asOf`
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
        if answer.truncated {
            let next_skip = (query.skip + query.limit).min(reached.len());
            answer.cursor = Some(next_skip.to_string());
        }
        let page: Vec<(u32, u32)> = reached
            .into_iter()
            .skip(query.skip)
            .take(query.limit)
            .collect();
        let in_page: HashSet<u32> = page.iter().map(|(n, _)| *n).collect();
        // Edges to WorkItems, Missions and Agents, deduplicated by interned ids; answers share
        // the index's names instead of building strings.
        let mut typed_seen: HashSet<(u32, u32, u8)> = HashSet::new();
        let (mut work_items, mut missions, mut agents) = (Vec::new(), Vec::new(), Vec::new());
        let (mut seen_work_items, mut seen_missions, mut seen_agents) =
            (HashSet::new(), HashSet::new(), HashSet::new());
        let name = |n: u32| Arc::clone(&graph.strings[n as usize]);
        for (node, depth) in &page {
            let mut manifests = Vec::new();
            for m in &graph.manifests[*node as usize] {
                if !view.passes(m) {
                    continue;
                }
                manifests.push(ManifestSummary {
                    manifest_id: m.manifest_id,
                    group_id: name(m.group),
                    mission_id: name(m.mission),
                    work_item_id: name(m.work_item),
                    producer: name(m.producer),
                    media_type: name(m.media_type),
                    sequence: m.sequence,
                });
                let artifact = Arc::clone(&graph.names[*node as usize]);
                if typed_seen.insert((*node, m.work_item_label, 0)) {
                    answer.edges.push(Edge {
                        from: Arc::clone(&artifact),
                        to: name(m.work_item_label),
                        kind: "generatedBy",
                    });
                }
                if typed_seen.insert((m.work_item_label, m.mission_label, 1)) {
                    answer.edges.push(Edge {
                        from: name(m.work_item_label),
                        to: name(m.mission_label),
                        kind: "partOf",
                    });
                }
                if typed_seen.insert((*node, m.agent_label, 2)) {
                    answer.edges.push(Edge {
                        from: artifact,
                        to: name(m.agent_label),
                        kind: "attributedTo",
                    });
                }
                if seen_work_items.insert(m.work_item) {
                    work_items.push(name(m.work_item));
                }
                if seen_missions.insert(m.mission) {
                    missions.push(name(m.mission));
                }
                if seen_agents.insert(m.producer) {
                    agents.push(name(m.producer));
                }
            }
            answer.artifacts.push(ArtifactNode {
                id: graph.ids[*node as usize],
                depth: *depth,
                size: graph.sizes[*node as usize],
                manifests,
            });
        }
        let mut derived_seen: HashSet<(u32, u32)> = HashSet::new();
        for (child, source) in edges {
            if in_page.contains(&child)
                && in_page.contains(&source)
                && derived_seen.insert((child, source))
            {
                answer.edges.push(Edge {
                    from: Arc::clone(&graph.names[child as usize]),
                    to: Arc::clone(&graph.names[source as usize]),
                    kind: "derivedFrom",
                });
            }
        }
        answer.work_items = work_items;
        answer.missions = missions;
        answer.agents = agents;
        answer.withheld = withheld.len();
        answer.edges.retain(|edge| wanted(edge.kind));
        answer
    }

    /// One shortest derivation path between two artifacts (either direction), within
    /// `max_depth`, through visible artifacts only.
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
            groups: groups.as_ref(),
            as_of: None,
        };
        let (&start, &goal) = (graph.index.get(from)?, graph.index.get(to)?);
        if !Self::visible(&graph, start, view) || !Self::visible(&graph, goal, view) {
            return None;
        }
        for towards_sources in [true, false] {
            let mut parent: HashMap<u32, u32> = HashMap::from([(start, start)]);
            let mut queue = VecDeque::from([(start, 0u32)]);
            while let Some((node, depth)) = queue.pop_front() {
                if node == goal {
                    let mut path = vec![graph.ids[node as usize]];
                    let mut at = node;
                    while at != start {
                        at = parent[&at];
                        path.push(graph.ids[at as usize]);
                    }
                    path.reverse();
                    return Some(path);
                }
                if depth >= max_depth {
                    continue;
                }
                let next = if towards_sources {
                    &graph.sources[node as usize]
                } else {
                    &graph.derived[node as usize]
                };
                for &(n, _) in next {
                    if Self::visible(&graph, n, view) && !parent.contains_key(&n) {
                        parent.insert(n, node);
                        queue.push_back((n, depth + 1));
                    }
                }
            }
        }
        None
    }
}
