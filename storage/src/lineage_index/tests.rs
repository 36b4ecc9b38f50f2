//! The index against a plain reference walk (one node at a time, over the publications
//! as a list) on generated histories: artifacts published in several Groups, edges
//! declared by later manifests, readers of some Groups, `asOf`, paging and both
//! directions (ART-4, CTX-5).

use std::collections::{BTreeSet, VecDeque};
use std::time::Duration;

use proptest::prelude::*;

use super::*;

#[derive(Clone, Debug)]
pub(super) struct Published {
    pub(super) artifact: usize,
    group: usize,
    sources: Vec<usize>,
    sequence: u64,
}

pub(super) fn artifact_id(n: usize) -> ArtifactId {
    ArtifactId(*blake3::hash(format!("artifact {n}").as_bytes()).as_bytes())
}

pub(super) fn group_name(g: usize) -> String {
    format!("g{g}")
}

/// Artifacts `0..n`, each published once or twice (the second time perhaps in another
/// Group, declaring its own sources), sources always earlier artifacts.
pub(super) fn history() -> impl Strategy<Value = Vec<Published>> {
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

/// The `i`-th publication of a history (its manifests row is `i + 1`).
pub(super) fn publication(i: usize, p: &Published) -> Publication {
    Publication {
        artifact: artifact_id(p.artifact),
        size: p.artifact as u64,
        manifest_id: ArtifactId(*blake3::hash(format!("manifest {i}").as_bytes()).as_bytes()),
        group: group_name(p.group),
        mission: format!("m{}", p.artifact % 2),
        work_item: format!("w{}", p.artifact % 5),
        producer: format!("a{}", p.group),
        media_type: "text/plain".into(),
        sequence: p.sequence,
        sources: p.sources.iter().map(|&s| artifact_id(s)).collect(),
        rowid: i as u64 + 1,
    }
}

pub(super) fn index_of(history: &[Published]) -> Index {
    let index = Index::default();
    for (i, p) in history.iter().enumerate() {
        index.add(&publication(i, p));
    }
    index
}

/// A query from the first page, with time to spare, all edge types, no `asOf`.
pub(super) fn simple_query(direction: Direction, depth: Option<u32>, limit: usize) -> Query {
    Query {
        direction,
        depth,
        limit,
        skip: 0,
        budget: Duration::from_secs(60),
        edges: None,
        as_of: None,
        mission: None,
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
            mission: None,
        };
        let names: Option<Vec<String>> = reader.as_ref().map(|gs| gs.iter().map(|&g| group_name(g)).collect());
        let index = index_of(&history);
        let got = index.traverse(&artifact_id(root), &query, &Audience::of_groups(names.as_deref())).map(walked);
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
        let got = index.path(&artifact_id(from), &artifact_id(to), max_depth, &Audience::of_groups(names.as_deref()));
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
        .traverse(&artifact_id(0), &query, &Audience::default())
        .expect("visible");
    assert!(cut.truncated);
    assert!(cut.artifacts.len() < 5001, "{}", cut.artifacts.len());
    assert_eq!(cut.cursor, Some(cut.artifacts.len().to_string()));
    query.budget = Duration::from_secs(60);
    let whole = index
        .traverse(&artifact_id(0), &query, &Audience::default())
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
        .scope(Scope::WorkItem, "w0", &query, &Audience::default())
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
        .traverse(&artifact_id(1), &query, &Audience::of_groups(Some(&g1)))
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
        .traverse(&artifact_id(1), &query, &Audience::of_groups(Some(&both)))
        .map(walked);
    assert_eq!(answer.map(|w| w.reached.len()), Some(2));
}
