//! The provenance graph in memory (DESIGN §6, ART-4): bounded lineage queries without a
//! recursive query per request. The engine holds it (`Engine::lineage`); the lineage feature
//! (`lineage/`) runs the queries over it for a reader. (Long, about 600 lines: the index's
//! every question, walks, paths, visibility and media types, on one lock, with the layout
//! notes they share.)
//!
//! The authoritative edges are the `derivations` rows, written in the same transaction as the
//! `artifact.published` Event that carries them. At start this index is read from its snapshot
//! plus the rows committed after it, or else rebuilt from those tables (`restart.rs`; the file
//! format is `snapshot.rs`), and then kept in step by `Store::publish`, which adds a
//! publication only after its transaction committed; edges are only ever added (the graph is
//! append-only), so the index can lag a commit by microseconds but never holds an edge the
//! tables do not.
//!
//! Every traversal is iterative (a queue, never the call stack), bounded by depth, by a node
//! limit and by a time budget, and skips nodes the caller may not read: they are counted in
//! `withheld`, never named, and never traversed through (CTX-5).
//!
//! Layout, for cache misses rather than pointers: one 64-byte record per artifact (its Group,
//! or "mixed" when its manifests span Groups; the head of its manifest chain; its sources and
//! derived artifacts, inline up to three and two, each edge with the manifest that declared
//! it, and so the Group sequence, for `asOf`), and one 128-byte record per manifest holding
//! everything an answer says about the artifact (ids, size, sequence, and the Group, Mission,
//! WorkItem, producer and media type as interned [`Name`]s); ids find their records through
//! `ids.rs` (a snapshot's ids sorted, plus a hash map of those added since). Traversals are breadth-first
//! over the answer list itself and take their steps in batches of 32 whose neighbour records
//! are loaded in one tight loop, so the misses of a wide frontier overlap. The reader's Group
//! is its session's (a session acts in its own Group only), so a query by `blake3:` touches
//! no database. Path searches run breadth-first from both ends at once, a level of
//! the smaller frontier at a time, through visible artifacts and edges only. A walk runs on
//! the calling thread for up to `Options::lineage_inline_budget` (5 ms); one cut by that runs
//! again on the blocking pool with its whole budget (`lineage/query.rs`).

mod answer;
mod coverage;
mod graph;
mod ids;
mod name;
mod records;
mod restart;
#[cfg(test)]
mod restart_tests;
mod snapshot;
#[cfg(test)]
mod tests;
mod walk;

use std::sync::{Mutex, RwLock};
use std::time::Instant;

use smallvec::SmallVec;
use weft_api::ArtifactId;

use graph::{Graph, Node, View};
use ids::Ids;
pub(crate) use records::FastSet;
pub(crate) use records::{Audience, Publication};
use records::{FastMap, MIXED, ManifestNode, NO_MANIFEST};
use walk::{STEP_BATCH, Step, Walk};

pub use answer::{
    ArtifactNode, ContextNode, Direction, Edge, Lineage, ManifestSummary, NodeRef, Query, Scope,
};
use coverage::Coverage;
pub use name::Name;
pub use restart::{LineageStart, SnapshotSaved};
pub(crate) use restart::{load_publication, load_publications_after, snapshot_path};

/// The index. Reads take a shared lock for the duration of one query.
#[derive(Debug, Default)]
pub(crate) struct Index {
    graph: RwLock<Graph>,
    /// Which rows `graph` holds; changed only while holding `graph`'s write lock, so a
    /// snapshot taken under its read lock sees the two agree.
    coverage: Mutex<Coverage>,
    /// `Coverage::through` of the snapshot on disk, as this process read or wrote it.
    saved_through: std::sync::atomic::AtomicU64,
    /// Held while a snapshot is written, so two saves never share the temporary file.
    saving: Mutex<()>,
}

impl Index {
    fn coverage(&self) -> std::sync::MutexGuard<'_, Coverage> {
        self.coverage.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds one committed publication.
    pub(crate) fn add(&self, publication: &Publication) {
        // Short critical sections, no await inside.
        let mut graph = self.graph.write().unwrap_or_else(|p| p.into_inner());
        graph.add(publication);
        self.coverage()
            .note(publication.rowid, publication.manifest_id);
    }

    /// How many publications (manifests) the index holds.
    pub(crate) fn manifests(&self) -> u64 {
        let graph = self.graph.read().unwrap_or_else(|p| p.into_inner());
        graph.manifests.len() as u64
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
            + graph.index.heap_bytes()
            + graph.manifests.capacity() * std::mem::size_of::<ManifestNode>()
            + (edges * 2) * std::mem::size_of::<u32>()
            + scopes * std::mem::size_of::<u32>()
            + (graph.by_work_item.capacity() + graph.by_mission.capacity())
                * std::mem::size_of::<(&str, Vec<u32>)>()
    }

    /// The reader's Groups as the index's sorted interned ids (`None`: all).
    fn groups_of(graph: &Graph, audience: &Audience) -> Option<Vec<u32>> {
        audience.groups.as_deref().map(|groups| {
            let mut ids: Vec<u32> = groups
                .iter()
                .filter_map(|g| graph.groups.get(g.as_str()).copied())
                .collect();
            ids.sort_unstable();
            ids
        })
    }

    /// The view of a query: `None` if its `asOf` Group is unknown (nothing passes).
    fn view<'a>(
        graph: &Graph,
        groups: Option<&'a [u32]>,
        audience: &'a Audience,
        query: &Query,
    ) -> Option<View<'a>> {
        let as_of = match &query.as_of {
            None => None,
            Some((group, sequence)) => Some((*graph.groups.get(group.as_str())?, *sequence)),
        };
        let follow = match &query.mission {
            None => None,
            // The Mission's interned name, from a manifest of it (no lock on the name table
            // on a query); a Mission the index never heard of declared no edge: nothing passes.
            Some(mission) => {
                let &node = graph.by_mission.get(mission.as_str())?.first()?;
                let (_, manifest) = graph
                    .manifests_of(node)
                    .find(|(_, m)| m.mission.as_str() == mission.as_str())?;
                Some(manifest.mission)
            }
        };
        Some(View {
            groups,
            as_of,
            missions: audience.mission_view(),
            follow,
        })
    }

    /// Whether a reader with these Groups (`None`: all) can see artifact `id`.
    pub(crate) fn sees(&self, id: &ArtifactId, audience: &Audience) -> bool {
        let graph = self.graph.read().unwrap_or_else(|p| p.into_inner());
        let groups = Self::groups_of(&graph, audience);
        let view = View {
            groups: groups.as_deref(),
            as_of: None,
            missions: audience.mission_view(),
            follow: None,
        };
        graph.index.get(id).is_some_and(|n| view.sees(&graph, n))
    }

    /// The Missions whose manifests of `id` the reader may see, oldest first, each once.
    pub(crate) fn missions_of(&self, id: &ArtifactId, audience: &Audience) -> Vec<String> {
        let graph = self.graph.read().unwrap_or_else(|p| p.into_inner());
        let groups = Self::groups_of(&graph, audience);
        let view = View {
            groups: groups.as_deref(),
            as_of: None,
            missions: audience.mission_view(),
            follow: None,
        };
        let mut missions: Vec<String> = Vec::new();
        if let Some(n) = graph.index.get(id) {
            for (_, manifest) in graph.manifests_of(n) {
                let mission = manifest.mission.as_str();
                if view.passes(manifest) && !missions.iter().any(|m| m == mission) {
                    missions.push(mission.to_owned());
                }
            }
        }
        missions
    }

    /// The media type of the newest manifest of `id` in Group `group` (by its sequence in
    /// that Group, which is commit order), or `None` if the Group published no manifest of it.
    /// For a Group-wide reader of `group` this is what the index's read of the manifests
    /// answers for an artifact that was not forwarded into the Group (`engine/hot.rs`).
    pub(crate) fn newest_media_type_in(&self, id: &ArtifactId, group: &str) -> Option<String> {
        let graph = self.graph.read().unwrap_or_else(|p| p.into_inner());
        let &g = graph.groups.get(group)?;
        let n = graph.index.get(id)?;
        graph
            .manifests_of(n)
            .filter(|(_, manifest)| manifest.group == g)
            .max_by_key(|(_, manifest)| manifest.sequence)
            .map(|(_, manifest)| manifest.media_type.as_str().to_owned())
    }

    /// Ancestors and/or descendants of `root`, bounded; see the module docs. `None` if the
    /// reader cannot see `root`.
    pub(crate) fn traverse(
        &self,
        root: &ArtifactId,
        query: &Query,
        audience: &Audience,
    ) -> Option<Lineage> {
        let graph = self.graph.read().unwrap_or_else(|p| p.into_inner());
        let start = graph.index.get(root)?;
        let groups = Self::groups_of(&graph, audience);
        let view = Self::view(&graph, groups.as_deref(), audience, query)?;
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
        audience: &Audience,
    ) -> Option<Lineage> {
        let graph = self.graph.read().unwrap_or_else(|p| p.into_inner());
        let groups = Self::groups_of(&graph, audience);
        let mut view = Self::view(&graph, groups.as_deref(), audience, query)?;
        let members = match scope {
            Scope::WorkItem => graph.by_work_item.get(name)?,
            Scope::Mission => graph.by_mission.get(name)?,
        };
        let mut starts: Vec<u32> = Vec::new();
        let mut started: FastSet<u32> = FastSet::default();
        // The Missions of the WorkItem's manifests this view passes (one, unless two Groups
        // the reader sees name a WorkItem alike).
        let mut missions: Vec<Name> = Vec::new();
        for &node in members {
            let mut in_scope = false;
            for (_, m) in graph.manifests_of(node) {
                let named = match scope {
                    Scope::WorkItem => m.work_item.as_str() == name,
                    Scope::Mission => m.mission.as_str() == name,
                };
                if named && view.passes(m) {
                    in_scope = true;
                    if scope == Scope::WorkItem && !missions.contains(&m.mission) {
                        missions.push(m.mission);
                    }
                }
            }
            if in_scope && started.insert(node) {
                starts.push(node);
            }
        }
        if starts.is_empty() {
            return None;
        }
        // A WorkItem's provenance is its Mission's, as a Mission's is (issue #50): only the
        // edges its Mission's manifests declared, never another Mission's that shares bytes.
        if let ([mission], None) = (missions.as_slice(), view.follow) {
            view.follow = Some(*mission);
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
        audience: &Audience,
    ) -> Option<Vec<ArtifactId>> {
        let graph = self.graph.read().unwrap_or_else(|p| p.into_inner());
        let groups = Self::groups_of(&graph, audience);
        let view = View {
            groups: groups.as_deref(),
            as_of: None,
            missions: audience.mission_view(),
            follow: None,
        };
        let (start, goal) = (graph.index.get(from)?, graph.index.get(to)?);
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
