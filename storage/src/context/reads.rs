//! Reading Context Packages: the latest version, all versions, one version, the Event range a
//! version cites (CTX-3) and its provenance (`revisionOf` between versions, `cites` of the
//! Artifacts, each cited Artifact's own lineage), in the reader's Group only.
//!
//! A package of another Group answers `not_found`, as one that does not exist (no existence
//! oracle). Visibility goes through the reader's Group as every other read does; a Mission
//! scope of the Membership (CTX-5) applies here once `Reader` carries it.

use std::collections::HashSet;
use std::sync::Arc;

use base64::Engine as _;
use rusqlite::Connection;
use weft_api::context::{ContextPackage, ContextRecord, ContextVersions};
use weft_api::dsse::BASE64;
use weft_api::event::Delivered;
use weft_api::{ArtifactId, Digest, Envelope, ErrorCode, Id};

use crate::access::Reader;
use crate::engine::Engine;
use crate::error::{Error, reject};
use crate::events::to32;
use crate::lineage_index::{ContextNode, Edge, Lineage, Name, NodeRef, Query};

pub(super) fn no_package(package_id: &Id) -> Error {
    reject(
        ErrorCode::NotFound,
        format!("no Context Package {package_id} is visible to you"),
    )
}

/// One `context_packages` row: id, Group, sequence, forwarded from, envelope.
type Row = crate::rows::context_packages::Row;

fn to_record(
    (id, group_id, sequence, forwarded_from, envelope): Row,
) -> Result<ContextRecord, Error> {
    let envelope: Envelope = serde_json::from_str(&envelope).map_err(Error::backend)?;
    let payload = BASE64.decode(&envelope.payload).map_err(Error::backend)?;
    let package = ContextPackage::parse(&payload)?;
    Ok(ContextRecord {
        context_id: ArtifactId(to32(id)?),
        group_id: Id::parse("groupId", &group_id)?,
        sequence,
        forwarded_from: forwarded_from
            .map(|group| Id::parse("groupId", &group))
            .transpose()?,
        envelope,
        package,
    })
}

/// Version `version` (the latest when `None`) of `package_id` as indexed in `group_id`.
pub(super) fn version_row(
    conn: &Connection,
    group_id: &str,
    package_id: &str,
    version: Option<u64>,
) -> Result<Option<ContextRecord>, Error> {
    crate::rows::context_packages::version(conn, group_id, package_id, version)?
        .map(to_record)
        .transpose()
}

fn all_rows(
    conn: &Connection,
    group_id: &str,
    package_id: &str,
) -> Result<Vec<ContextRecord>, Error> {
    crate::rows::context_packages::versions(conn, group_id, package_id)?
        .into_iter()
        .map(to_record)
        .collect()
}

/// Where `reader` finds the package `id` names: `(Group, packageId, version)`. `id` is a
/// packageId, or a version's own id (`blake3:…`, then that version). A session looks in its
/// own Group; the operator in the Group the package was published in.
fn resolve(
    conn: &Connection,
    reader: &Reader,
    id: &Id,
) -> Result<Option<(String, String, Option<u64>)>, Error> {
    let Some(found) = locate(conn, reader, id)? else {
        return Ok(None);
    };
    // A Mission-scoped member sees the packages of its Missions only (CTX-5); another
    // Mission's answers as one that does not exist.
    if reader.sees_whole_group() {
        return Ok(Some(found));
    }
    let mission = crate::rows::context_packages::mission_of(conn, &found.0, &found.1)?;
    Ok(mission
        .is_some_and(|mission| reader.sees_mission(&found.0, &mission))
        .then_some(found))
}

/// [`resolve`] before the Mission scope.
fn locate(
    conn: &Connection,
    reader: &Reader,
    id: &Id,
) -> Result<Option<(String, String, Option<u64>)>, Error> {
    let own = match reader {
        Reader::Agent { group_id, .. } => Some(group_id.as_str()),
        Reader::Admin => None,
    };
    if let Ok(context_id) = ArtifactId::parse(id.as_str()) {
        return Ok(
            crate::rows::context_packages::locate(conn, &context_id, own)?
                .map(|(group, package, version)| (group, package, Some(version))),
        );
    }
    let group: Option<String> = match own {
        Some(group) => Some(group.to_owned()),
        None => crate::rows::context_packages::group_of(conn, id.as_str())?,
    };
    Ok(group.map(|group| (group, id.to_string(), None)))
}

impl Engine {
    /// Version `version` of a package, the latest when `None`.
    pub(crate) async fn context_version(
        &self,
        package_id: Id,
        version: Option<u64>,
        reader: &Reader,
    ) -> Result<ContextRecord, Error> {
        let reader = reader.clone();
        self.db
            .read(move |conn| {
                let Some((group, package, named)) = resolve(conn, &reader, &package_id)? else {
                    return Err(no_package(&package_id));
                };
                version_row(conn, &group, &package, version.or(named))?
                    .ok_or_else(|| no_package(&package_id))
            })
            .await
    }

    /// Every version of a package in the reader's Group, oldest first.
    pub(crate) async fn context_versions(
        &self,
        package_id: Id,
        reader: &Reader,
    ) -> Result<ContextVersions, Error> {
        let reader = reader.clone();
        self.db
            .read(move |conn| {
                let Some((group, package, _)) = resolve(conn, &reader, &package_id)? else {
                    return Err(no_package(&package_id));
                };
                let versions = all_rows(conn, &group, &package)?;
                if versions.is_empty() {
                    return Err(no_package(&package_id));
                }
                Ok(ContextVersions {
                    package_id: Id::parse("packageId", &package)?,
                    versions,
                })
            })
            .await
    }

    /// CTX-3: the Events a version cites, for a reader whose Membership may read that Group's
    /// log. A forwarded copy cites the log of the Group it came from: a session of the Group it
    /// was forwarded to may not read that log (`forbidden`), it reads the summary only.
    pub(crate) async fn context_events(
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
            let page = self
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
    pub(crate) async fn context_provenance(
        self: &Arc<Self>,
        package_id: Id,
        query: Query,
        reader: &Reader,
    ) -> Result<Lineage, Error> {
        let versions = self.context_versions(package_id, reader).await?.versions;
        let mut lineage = Lineage {
            root: versions.last().map(|latest| latest.context_id),
            ..Lineage::default()
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
            let found = match self
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

/// fsck: every indexed version's payload hashes to its id and is signed by a key its generator
/// had, and a version after 1 names a previous version indexed in the same Group.
pub(crate) fn check_rows(conn: &Connection) -> Result<Vec<String>, Error> {
    let rows = crate::rows::context_packages::all_with_previous(conn)?;
    let mut problems = Vec::new();
    for (row, previous) in rows {
        let (id, group) = (row.0.clone(), row.1.clone());
        let name = ArtifactId(to32(id)?);
        let record = match to_record(row) {
            Ok(record) => record,
            Err(error) => {
                problems.push(format!("context {name} in {group}: unreadable ({error})"));
                continue;
            }
        };
        let signed = record
            .envelope
            .signer_keyid()
            .ok()
            .and_then(|keyid| crate::access::recorded_key(conn, &keyid).ok().flatten())
            .filter(|(agent, _)| *agent == record.package.generator.agent_id)
            .and_then(|(_, key)| {
                record
                    .envelope
                    .verify(weft_api::context::CONTEXT_TYPE, &key)
                    .ok()
            });
        match signed {
            Some(payload) if ArtifactId::of(payload.value()) == name => {}
            Some(_) => problems.push(format!(
                "context {name} in {group}: payload does not hash to its id"
            )),
            None => problems.push(format!(
                "context {name} in {group}: not signed by its generator's key"
            )),
        }
        if let Some(previous) = previous {
            let found = crate::rows::context_packages::version_of_id(conn, &group, &previous)?;
            if found.is_none() && record.forwarded_from.is_none() {
                problems.push(format!(
                    "context {name} in {group}: previous version is not indexed"
                ));
            }
        }
    }
    Ok(problems)
}

#[cfg(test)]
mod tests {
    use ed25519_dalek::SigningKey;
    use serde_json::json;
    use weft_api::KeyId;

    use super::*;

    /// fsck's context check: a row signed by its generator's recorded key passes; one whose
    /// signer is not the generator, or whose id is not its payload's, is reported.
    #[test]
    fn fsck_reports_a_context_row_that_is_not_what_it_claims() {
        let conn = Connection::open_in_memory().expect("database");
        crate::schema::migrate(&conn).expect("schema");
        // Rows stand alone here (no Group or Agent rows).
        conn.execute_batch("PRAGMA foreign_keys = OFF")
            .expect("pragma");
        let key = SigningKey::from_bytes(&[7; 32]);
        crate::rows::agent_keys::insert(
            &conn,
            KeyId::of(&key.verifying_key()).as_str(),
            "a1",
            key.verifying_key().as_bytes(),
            "now",
        )
        .expect("key");
        let payload = |agent: &str, package: &str| {
            json!({
                "packageId": package, "version": 1, "previous": null, "groupId": "g1",
                "missionId": "m1", "workItemId": null, "sourceEvents": {"from": 1, "to": 1},
                "artifacts": [], "decisions": [], "constraints": [], "openQuestions": [],
                "generator": {"agentId": agent, "agentCardVersion": "1"},
                "createdAt": "2026-11-30T12:00:00Z"
            })
            .to_string()
        };
        let insert = |package: &str, payload: &str, id: ArtifactId| {
            let envelope =
                Envelope::sign(&key, weft_api::context::CONTEXT_TYPE, payload.as_bytes());
            let envelope = serde_json::to_string(&envelope).expect("json");
            crate::rows::context_packages::insert(
                &conn,
                &crate::rows::context_packages::New {
                    context_id: &id,
                    group_id: "g1",
                    package_id: package,
                    version: 1,
                    previous: None,
                    mission_id: "m1",
                    work_item_id: None,
                    events_from: 1,
                    events_to: 1,
                    artifacts: "[]",
                    generator: "a1",
                    envelope: &envelope,
                    sequence: 1,
                    forwarded: None,
                },
            )
            .expect("row");
        };
        let good = payload("a1", "good");
        insert("good", &good, ArtifactId::of(good.as_bytes()));
        assert_eq!(check_rows(&conn).expect("check"), Vec::<String>::new());
        let impostor = payload("a2", "impostor");
        insert("impostor", &impostor, ArtifactId::of(impostor.as_bytes()));
        let renamed = payload("a1", "renamed");
        insert("renamed", &renamed, ArtifactId::of(b"other bytes"));
        let problems = check_rows(&conn).expect("check");
        assert_eq!(problems.len(), 2, "{problems:?}");
        assert!(
            problems
                .iter()
                .any(|p| p.contains("not signed by its generator's key")),
            "{problems:?}"
        );
        assert!(
            problems
                .iter()
                .any(|p| p.contains("does not hash to its id")),
            "{problems:?}"
        );
    }
}
