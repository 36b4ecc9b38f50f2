//! The layered layout: boxes never overlap, links only go rightward through gaps and lanes,
//! barycentre sweeps never make crossings worse than the input order, and 200 nodes fit.

use super::*;

fn link(left: usize, right: usize) -> Link {
    Link {
        left,
        right,
        kind: LinkKind::DerivedFrom,
        arrow_left: true,
    }
}

/// Every property a drawn layout must have, whatever the graph.
fn check(n_nodes: usize, links: &[Link]) -> Layout {
    let layout = layout(n_nodes, links);
    let boxes = &layout.places;
    for (a, first) in boxes.iter().enumerate() {
        assert!(first.x >= 0 && first.y >= 0, "node {a} inside");
        assert!(
            first.x + BOX_W <= layout.width && first.y + BOX_H <= layout.height,
            "node {a} within bounds {first:?}"
        );
        for (b, second) in boxes.iter().enumerate().skip(a + 1) {
            let apart = first.x + BOX_W <= second.x
                || second.x + BOX_W <= first.x
                || first.y + BOX_H <= second.y
                || second.y + BOX_H <= first.y;
            assert!(apart, "boxes {a} and {b} overlap: {first:?} {second:?}");
        }
    }
    for (link, route) in links.iter().zip(&layout.routes) {
        let (from, to) = (boxes[link.left], boxes[link.right]);
        assert!(
            from.layer < to.layer,
            "link {}→{} goes rightward",
            link.left,
            link.right
        );
        for pair in route.windows(2) {
            let ((x1, y1), (x2, y2)) = (pair[0], pair[1]);
            assert!(x1 <= x2, "routes run left to right");
            for place in boxes {
                if x1 < x2 && y1 == y2 && x2 - x1 == BOX_W {
                    // A lane: straight through a column, never through a box of it.
                    let inside = place.x == x1 && place.y < y1 && y1 < place.y + BOX_H;
                    assert!(!inside, "a lane crosses a box");
                } else {
                    // A curve between columns: no box lies in the gap it spans.
                    let in_gap = place.x < x2 && place.x + BOX_W > x1;
                    assert!(
                        !in_gap,
                        "a curve from x {x1} to {x2} crosses the box at {place:?}"
                    );
                }
            }
        }
    }
    layout
}

#[test]
fn a_chain_and_a_diamond_lay_out_by_depth() {
    // 0 ← 1 ← 3, 0 ← 2 ← 3: a diamond.
    let layout = check(4, &[link(0, 1), link(0, 2), link(1, 3), link(2, 3)]);
    let layers: Vec<usize> = layout.places.iter().map(|p| p.layer).collect();
    assert_eq!(layers, vec![0, 1, 1, 2]);
    assert_eq!(layout.crossings, 0);
}

#[test]
fn a_long_link_passes_through_lanes_not_boxes() {
    // 0 → 1 → 2 → 3 and 0 → 3: the long link gets a lane in layers 1 and 2.
    let layout = check(4, &[link(0, 1), link(1, 2), link(2, 3), link(0, 3)]);
    assert_eq!(
        layout.routes[3].len(),
        2 + 2 * 2,
        "two lanes of two points each"
    );
}

#[test]
fn sweeps_remove_crossings_of_a_twisted_input() {
    // Left layer 0,1,2; right layer 3,4,5 wired in reverse: the input order crosses 3 times.
    let links = [link(0, 5), link(1, 4), link(2, 3)];
    let input = crossings_between(&[(0, 2), (1, 1), (2, 0)]);
    assert_eq!(input, 3);
    let layout = check(6, &links);
    assert!(
        layout.crossings <= input,
        "never worse than the input order"
    );
    assert_eq!(layout.crossings, 0, "the barycentre order untwists it");
}

#[test]
fn a_fixed_example_is_no_worse_than_its_input_order() {
    // A small lineage with shared sources: sweeps may not untangle everything, but never
    // end worse than where they started.
    let links = [
        link(0, 4),
        link(1, 4),
        link(2, 5),
        link(0, 6),
        link(3, 6),
        link(1, 7),
        link(4, 8),
        link(5, 8),
        link(7, 9),
        link(6, 9),
    ];
    let layout = check(10, &links);
    assert!(layout.crossings <= 4, "{}", layout.crossings);
}

#[test]
fn two_hundred_nodes_stay_within_bounds() {
    // Ten layers of twenty, each node derived from two of the layer before it.
    let mut links = Vec::new();
    for layer in 1..10 {
        for index in 0..20 {
            let node = layer * 20 + index;
            links.push(link((layer - 1) * 20 + index, node));
            links.push(link((layer - 1) * 20 + (index * 7 + 3) % 20, node));
        }
    }
    let layout = check(200, &links);
    assert_eq!(layout.places.iter().map(|p| p.layer).max(), Some(9));
    assert!(layout.width < 10 * (BOX_W + 80) && layout.height < 20 * (BOX_H + 20) + 40 * 30);
    let svg = svg(
        &(0..200)
            .map(|index| Node {
                label: format!("node {index} with a label much longer than its box allows"),
                title: format!("node {index}"),
                caption: String::new(),
                href: None,
                kind: NodeKind::Artifact,
                name: format!("n{index}"),
            })
            .collect::<Vec<_>>(),
        &links,
    );
    assert_eq!(svg.matches("<rect").count(), 200);
    assert!(
        svg.contains(">node 12 with a label much long…</text>")
            && svg.contains("<title>node 12</title>"),
        "labels are cut to their box, the tooltip keeps the whole title"
    );
}
