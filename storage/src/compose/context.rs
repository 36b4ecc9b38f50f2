//! A Context Package's cited Events (CTX-3: the package from `context/`, the Events from
//! `delivery`) and its provenance (DESIGN §11: its versions from `context/`, each cited
//! Artifact's lineage from `lineage/`).

use std::collections::HashSet;

use weft_api::context::ContextRecord;
use weft_api::event::Delivered;
use weft_api::{ArtifactId, Digest, ErrorCode, Id};

use crate::access::Reader;
use crate::context::handle::Context;
use crate::delivery::handle::Delivery;
use crate::error::{Error, reject};
use crate::lineage::handle::Lineage;
use crate::lineage_index::{ContextNode, Edge, Lineage as Graph, Name, NodeRef, Query};

impl Context<'_> {
    /// CTX-3: the Events a version cites, for a reader whose Membership may read that Group's
    /// log. A forwarded copy cites the log of the Group it came from: a session of the Group it
    /// was forwarded to may not read that log (`forbidden`), it reads the summary only.
    pub async fn context_events(
        &self,
        package_id: Id,
        version: Option<u64>,
        reader: &Reader,
    ) -> Result<(ContextRecord, Vec<Delivered>), Error> {
        let record = self.context_version(package_id, version, reader).await?;
        let package = &record.package;
        if !reader.in_group(package.group_id.as_str()) {
            return Err(reject(
                ErrorCode::Forbidden,
                format!(
                    "the cited Events are in the log of {}, which your Membership does not cover",
                    package.group_id
                ),
            ));
        }
        let range = package.source_events;
        let count = range.to - range.from + 1;
        let mut events = Vec::new();
        let mut after = range.from - 1;
        while after < range.to {
            let limit = (range.to - after).min(10_000) as u32;
            let page = Delivery(self.0)
                .events(package.group_id.clone(), after, limit, reader)
                .await?;
            let Some(last) = page.last() else { break };
            after = last.sequence();
            events.extend(page);
        }
        debug_assert!(events.len() as u64 <= count);
        Ok((record, events))
    }

    /// Provenance of a package (DESIGN §11): every version in the reader's Group with
    /// `revisionOf` edges to its previous version, `cites` edges to the Artifacts it cites and
    /// `attributedTo` its generator, plus the lineage of each cited Artifact under `query`.
    pub async fn context_provenance(
        &self,
        package_id: Id,
        query: Query,
        reader: &Reader,
    ) -> Result<Graph, Error> {
        let versions = self.context_versions(package_id, reader).await?.versions;
        let mut lineage = Graph {
            root: versions.last().map(|latest| latest.context_id),
            ..Graph::default()
        };
        let mut cited: Vec<ArtifactId> = Vec::new();
        let mut agents: Vec<Name> = Vec::new();
        for version in &versions {
            let package = &version.package;
            let node = NodeRef::Context(version.context_id);
            if let Some(previous) = package.previous {
                lineage.edges.push(Edge {
                    from: node,
                    to: NodeRef::Context(previous),
                    kind: "revisionOf",
                });
            }
            for artifact in &package.artifacts {
                lineage.edges.push(Edge {
                    from: node,
                    to: NodeRef::Artifact(*artifact),
                    kind: "cites",
                });
                if !cited.contains(artifact) {
                    cited.push(*artifact);
                }
            }
            let generator = Name::new(package.generator.agent_id.as_str());
            lineage.edges.push(Edge {
                from: node,
                to: NodeRef::Agent(generator),
                kind: "attributedTo",
            });
            if !agents.contains(&generator) {
                agents.push(generator);
            }
            lineage.contexts.push(ContextNode {
                id: version.context_id,
                package_id: Name::new(package.package_id.as_str()),
                version: package.version,
                group_id: Name::new(version.group_id.as_str()),
                mission_id: Name::new(package.mission_id.as_str()),
                generator,
                sequence: version.sequence,
                source_events: package.source_events,
            });
        }
        let mut seen: HashSet<ArtifactId> = HashSet::new();
        let mut edges: HashSet<Edge> = lineage.edges.iter().cloned().collect();
        for artifact in cited {
            let found = match Lineage(self.0)
                .lineage(Digest::Blake3(artifact), query.clone(), reader)
                .await
            {
                Ok(found) => found,
                Err(Error::Rejected(rejection)) if rejection.code == ErrorCode::NotFound => {
                    lineage.withheld += 1;
                    continue;
                }
                Err(error) => return Err(error),
            };
            for node in found.artifacts {
                if seen.insert(node.id) {
                    lineage.artifacts.push(node);
                }
            }
            for edge in found.edges {
                if edges.insert(edge.clone()) {
                    lineage.edges.push(edge);
                }
            }
            merge(&mut lineage.work_items, found.work_items);
            merge(&mut lineage.missions, found.missions);
            merge(&mut agents, found.agents);
            lineage.withheld += found.withheld;
            lineage.truncated |= found.truncated;
        }
        lineage.agents = agents;
        Ok(lineage)
    }
}

fn merge(into: &mut Vec<Name>, from: Vec<Name>) {
    for name in from {
        if !into.contains(&name) {
            into.push(name);
        }
    }
}
