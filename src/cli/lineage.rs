//! Lineage: `weft lineage` asks the provenance route and prints its answer as a tree (here),
//! or passes the server's rendering through (json, dot, mermaid, prov-json, intoto).
//!
//! The tree walks the answer as untyped JSON on purpose, for now: the lineage wire types are
//! moving into `weft_api`, and this printer will switch to them afterwards.

use anyhow::bail;
use weft_api::Digest;

use super::LineageArgs;

/// `weft lineage`: ancestors (or, with `--down`, descendants) in the chosen format.
pub(super) async fn print(args: LineageArgs) -> anyhow::Result<()> {
    let LineageArgs {
        client,
        digest,
        down,
        depth,
        limit,
        format,
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
    match format.as_str() {
        "dot" | "mermaid" | "json" | "prov-json" | "intoto" => {
            query.push(("format", format.clone()));
            print!(
                "{}",
                api.get_text(&format!("/v1/artifacts/{digest}/provenance"), &query)
                    .await?
            );
            if matches!(format.as_str(), "json" | "prov-json" | "intoto") {
                println!();
            }
        }
        "tree" => {
            let text = api
                .get_text(&format!("/v1/artifacts/{digest}/provenance"), &query)
                .await?;
            print_tree(&serde_json::from_str(&text)?, down);
        }
        other => bail!("--format {other:?} is not tree, json, dot, mermaid, prov-json or intoto"),
    }
    Ok(())
}

/// Prints a lineage answer as an indented tree: each artifact under the one it was reached
/// from, with its media type, WorkItem and producer.
fn print_tree(lineage: &serde_json::Value, down: bool) {
    use std::collections::{HashMap, HashSet};
    let artifacts = lineage["artifacts"].as_array().cloned().unwrap_or_default();
    let describe = |artifact: &serde_json::Value| {
        let manifest = &artifact["manifests"][0];
        format!(
            "{}  {}  {} by {}",
            artifact["id"].as_str().unwrap_or_default(),
            manifest["mediaType"].as_str().unwrap_or("-"),
            manifest["workItemId"].as_str().unwrap_or("-"),
            manifest["producer"].as_str().unwrap_or("-")
        )
    };
    let by_id: HashMap<&str, &serde_json::Value> = artifacts
        .iter()
        .filter_map(|a| Some((a["id"].as_str()?, a)))
        .collect();
    let mut children: HashMap<&str, Vec<&str>> = HashMap::new();
    for edge in lineage["edges"].as_array().into_iter().flatten() {
        if edge["type"] != "derivedFrom" {
            continue;
        }
        let (child, source) = (
            edge["from"].as_str().unwrap_or_default(),
            edge["to"].as_str().unwrap_or_default(),
        );
        let (parent, next) = if down {
            (source, child)
        } else {
            (child, source)
        };
        children.entry(parent).or_default().push(next);
    }
    let Some(root) = lineage["root"].as_str() else {
        return;
    };
    let mut printed = HashSet::new();
    let mut stack = vec![(root, 0usize)];
    while let Some((id, indent)) = stack.pop() {
        let Some(artifact) = by_id.get(id) else {
            continue;
        };
        let again = !printed.insert(id);
        println!(
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
    let withheld = lineage["withheld"].as_u64().unwrap_or(0);
    if withheld > 0 {
        println!("({withheld} nodes in Groups you cannot read were withheld)");
    }
    if lineage["truncated"].as_bool() == Some(true) {
        println!("(truncated; raise --limit or narrow --depth)");
    }
}
