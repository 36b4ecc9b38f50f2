//! The breadth-first walk: the answer list is the queue; steps are loaded in batches so the
//! cache misses of a wide frontier overlap.

use super::*;

/// How many steps of a walk are loaded together (see `Walk::next_batch`).
pub(super) const STEP_BATCH: usize = 32;

/// One step of a walk: from the node at position `at` of the answer's order (reached at
/// `depth`) along an edge to `next`.
#[derive(Clone, Copy, Debug)]
pub(super) struct Step {
    pub(super) at: u32,
    pub(super) depth: u32,
    pub(super) next: u32,
    pub(super) is_source: bool,
    /// The artifact whose manifest declared the edge, and that manifest.
    pub(super) declared_by: u32,
    pub(super) manifest: u32,
    /// `next`'s `Node::group`, loaded with the rest of its batch.
    pub(super) group: u32,
}

/// A breadth-first walk in progress. `reached` is both the queue and the answer's order:
/// nodes are appended when first discovered and expanded in that order, `head` (and
/// `next_edge`, inside one node's edge lists) marking how far expansion has come.
pub(super) struct Walk<'a> {
    pub(super) graph: &'a Graph,
    pub(super) view: View<'a>,
    pub(super) ancestors: bool,
    pub(super) descendants: bool,
    pub(super) max_depth: Option<u32>,
    /// Nodes past this position are not needed (they only tell that the page is truncated).
    pub(super) page_end: usize,
    /// node → its position in `reached`
    pub(super) position: FastMap<u32, u32>,
    /// (node, depth)
    pub(super) reached: Vec<(u32, u32)>,
    pub(super) head: usize,
    pub(super) next_edge: usize,
    /// Neighbours the reader may not see: counted, never named.
    pub(super) withheld: FastSet<u32>,
    /// (derived artifact, source), both reached, by position in `reached`
    pub(super) derivations: Vec<(u32, u32)>,
    pub(super) truncated: bool,
}

impl<'a> Walk<'a> {
    pub(super) fn new(
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
    pub(super) fn next_batch(&mut self, batch: &mut Vec<Step>) -> bool {
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
    pub(super) fn take(&mut self, step: Step) {
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
