//! Lineage: `weft lineage` asks the provenance route and prints its answer as a tree (here),
//! or passes the server's rendering through (dot, mermaid, prov-json, intoto).
//!
//! The tree and the json output decode the answer as `weft_api::lineage::Lineage`, the shape
//! the server's round-trip test pins, so a drift in the answer fails loudly here instead of
//! printing dashes. The json output is that answer re-serialised: the same bytes the server
//! sent, since the api type has the server's fields in the server's order.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

use anyhow::bail;
use weft_api::Digest;
use weft_api::lineage::{ArtifactNode, Lineage, ManifestSummary};

use super::args::LineageArgs;

/// `weft lineage`: ancestors (or, with `--down`, descendants) in the chosen format.
pub(super) async fn print(args: LineageArgs) -> anyhow::Result<()> {
    let LineageArgs {
        client,
        digest,
        down,
        depth,
        limit,
        format,
        mission,
    } = args;
    let (_, api) = client.session()?;
    let digest = Digest::parse(&digest)?;
    let mut query: Vec<(&str, String)> = vec![
        (
            "direction",
            if down { "descendants" } else { "ancestors" }.to_owned(),
        ),
        ("limit", limit.to_string()),
    ];
    if let Some(depth) = depth {
        query.push(("depth", depth.to_string()));
    }
    if let Some(mission) = mission {
        query.push(("missionId", mission));
    }
    let route = format!("/v1/artifacts/{digest}/provenance");
    match format.as_str() {
        "dot" | "mermaid" | "prov-json" | "intoto" => {
            query.push(("format", format.clone()));
            print!("{}", api.get_text(&route, &query).await?);
            if matches!(format.as_str(), "prov-json" | "intoto") {
                println!();
            }
        }
        "json" => {
            query.push(("format", format.clone()));
            let lineage: Lineage = serde_json::from_str(&api.get_text(&route, &query).await?)?;
            println!("{}", serde_json::to_string(&lineage)?);
        }
        "tree" => {
            let lineage: Lineage = serde_json::from_str(&api.get_text(&route, &query).await?)?;
            print!("{}", tree(&lineage, down));
        }
        other => bail!("--format {other:?} is not tree, json, dot, mermaid, prov-json or intoto"),
    }
    Ok(())
}

/// A lineage answer as an indented tree: each artifact under the one it was reached from,
/// with its media type, WorkItem and producer; an artifact reached again says `(see above)`.
fn tree(lineage: &Lineage, down: bool) -> String {
    let mut out = String::new();
    let describe = |artifact: &ArtifactNode| {
        let manifest = artifact.manifests.first();
        let field = |pick: fn(&ManifestSummary) -> &str| manifest.map_or("-", pick).to_owned();
        format!(
            "{}  {}  {} by {}",
            artifact.id,
            field(|m| &m.media_type),
            field(|m| &m.work_item_id),
            field(|m| &m.producer)
        )
    };
    let by_id: HashMap<String, &ArtifactNode> = lineage
        .artifacts
        .iter()
        .map(|a| (a.id.to_string(), a))
        .collect();
    let mut children: HashMap<&str, Vec<&str>> = HashMap::new();
    for edge in &lineage.edges {
        if edge.kind != "derivedFrom" {
            continue;
        }
        let (child, source) = (edge.from.as_str(), edge.to.as_str());
        let (parent, next) = if down {
            (source, child)
        } else {
            (child, source)
        };
        children.entry(parent).or_default().push(next);
    }
    let Some(root) = lineage.root else {
        return out;
    };
    let root = root.to_string();
    let mut printed = HashSet::new();
    let mut stack = vec![(root.as_str(), 0usize)];
    while let Some((id, indent)) = stack.pop() {
        let Some(artifact) = by_id.get(id) else {
            continue;
        };
        let again = !printed.insert(id);
        let _ = writeln!(
            out,
            "{}{}{}",
            "  ".repeat(indent),
            describe(artifact),
            if again { "  (see above)" } else { "" }
        );
        if again {
            continue;
        }
        for next in children.get(id).into_iter().flatten().rev() {
            stack.push((next, indent + 1));
        }
    }
    if lineage.withheld > 0 {
        let _ = writeln!(
            out,
            "({} nodes in Groups you cannot read were withheld)",
            lineage.withheld
        );
    }
    if lineage.truncated {
        let _ = writeln!(out, "(truncated; raise --limit or narrow --depth)");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tree of a diamond (`d` from `a` and `c`, `c` from `b`, `b` from `a`), with a
    /// manifest-less artifact, a withheld source and a cut answer: pinned byte for byte (it
    /// matched the untyped printer this one replaced on this and other answers).
    #[test]
    fn tree_prints_a_diamond_once_with_withheld_and_truncated() {
        let h = |c: char| format!("blake3:{}", c.to_string().repeat(64));
        let (a, b, c, d) = (h('a'), h('b'), h('c'), h('d'));
        let m = |w: &str| {
            serde_json::json!({"manifestId": h('e'), "groupId": "g1", "missionId": "m1",
                "workItemId": w, "producer": "agent-1", "mediaType": "text/plain", "sequence": 3})
        };
        let answer: Lineage = serde_json::from_value(serde_json::json!({
            "root": d, "artifacts": [
                {"id": d, "depth": 0, "size": 1, "manifests": [m("w1")]},
                {"id": a, "depth": 1, "size": 1, "manifests": [m("w2"), m("w3")]},
                {"id": c, "depth": 1, "size": 1, "manifests": []},
                {"id": b, "depth": 2, "size": 1, "manifests": [m("w1")]}],
            "workItems": ["w1"], "missions": ["m1"], "agents": ["agent-1"],
            "edges": [
                {"from": d, "to": a, "type": "derivedFrom"},
                {"from": d, "to": c, "type": "derivedFrom"},
                {"from": c, "to": b, "type": "derivedFrom"},
                {"from": b, "to": a, "type": "derivedFrom"},
                {"from": d, "to": "workItem:w1", "type": "generatedBy"}],
            "withheld": 2, "truncated": true, "cursor": "4"}))
        .expect("a lineage answer");
        let expected = format!(
            "{d}  text/plain  w1 by agent-1\n\
             \x20 {a}  text/plain  w2 by agent-1\n\
             \x20 {c}  -  - by -\n\
             \x20   {b}  text/plain  w1 by agent-1\n\
             \x20     {a}  text/plain  w2 by agent-1  (see above)\n\
             (2 nodes in Groups you cannot read were withheld)\n\
             (truncated; raise --limit or narrow --depth)\n"
        );
        assert_eq!(tree(&answer, false), expected);
    }
}
