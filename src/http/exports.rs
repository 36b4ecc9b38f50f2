//! Standard exports of provenance: W3C PROV-JSON for any lineage answer, and an in-toto
//! Statement v1 with an SLSA-provenance-v1-shaped predicate for one artifact, wrapped in a
//! DSSE envelope signed by the server's authority key.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};
use weft_api::views::ArtifactView;
use weft_api::{ArtifactId, Digest, ErrorCode, Sha256Digest};
use weft_storage::{Lineage, Reader};

use super::error::HttpError;

pub(crate) const INTOTO_PAYLOAD_TYPE: &str = "application/vnd.in-toto+json";

/// A PROV qualified name in the `weft` namespace. Its local part must be an XML NCName
/// (PROV-XML's `prov:id` is an `xsd:QName`), and ids may hold `:`, which no NCName may:
/// `_` is written `__` and `:` `_-`, which reads back unambiguously (`w:1` → `agent_w_-1`).
fn qname(kind: &str, id: &str) -> String {
    let mut local = String::with_capacity(id.len() + 4);
    for c in id.chars() {
        match c {
            '_' => local.push_str("__"),
            ':' => local.push_str("_-"),
            c => local.push(c),
        }
    }
    format!("weft:{kind}_{local}")
}

/// The node name used in edges (`blake3:…`, `workItem:…`, `mission:…`, `agent:…`) as a QName.
fn node_qname(node: &str) -> String {
    match node.split_once(':') {
        Some(("blake3", hex)) => qname("blake3", hex),
        Some(("workItem", id)) => qname("workItem", id),
        Some(("mission", id)) => qname("mission", id),
        Some(("agent", id)) => qname("agent", id),
        _ => qname("node", node),
    }
}

/// W3C PROV-JSON: artifacts are entities, WorkItems and Missions activities, producers agents;
/// derivedFrom → wasDerivedFrom, generatedBy → wasGeneratedBy, attributedTo → wasAttributedTo,
/// each WorkItem `used` the sources of what it generated and `wasAssociatedWith` the Agents
/// its artifacts are attributed to. partOf is the WorkItem's
/// `weft:partOf` attribute (PROV has no activity-in-activity relation).
pub(crate) fn prov_json(lineage: &Lineage) -> Value {
    let mut entities = Map::new();
    for artifact in &lineage.artifacts {
        let mut attributes = Map::new();
        attributes.insert(
            "prov:type".into(),
            json!({"$": "weft:Artifact", "type": "prov:QUALIFIED_NAME"}),
        );
        attributes.insert("weft:size".into(), json!(artifact.size));
        if let Some(manifest) = artifact.manifests.first() {
            attributes.insert("weft:mediaType".into(), json!(manifest.media_type));
        }
        entities.insert(
            node_qname(&artifact.id.to_string()),
            Value::Object(attributes),
        );
    }
    for context in &lineage.contexts {
        entities.insert(
            node_qname(&format!("context:{}", context.id)),
            json!({
                "prov:type": {"$": "weft:ContextPackage", "type": "prov:QUALIFIED_NAME"},
                "weft:packageId": context.package_id.as_str(),
                "weft:version": context.version,
            }),
        );
    }
    let mut activities = Map::new();
    let mut agents = Map::new();
    let mut relations: [(&str, Map<String, Value>); 5] = [
        ("wasDerivedFrom", Map::new()),
        ("wasGeneratedBy", Map::new()),
        ("wasAttributedTo", Map::new()),
        ("used", Map::new()),
        ("wasAssociatedWith", Map::new()),
    ];
    let mut generated_by: Vec<(String, String)> = Vec::new();
    let mut attributed_to: Vec<(String, String)> = Vec::new();
    let mut derived: Vec<(String, String)> = Vec::new();
    for edge in &lineage.edges {
        let (from, to) = (
            node_qname(&edge.from.to_string()),
            node_qname(&edge.to.to_string()),
        );
        match edge.kind {
            "derivedFrom" => {
                let n = relations[0].1.len();
                relations[0].1.insert(
                    format!("_:d{n}"),
                    json!({"prov:generatedEntity": from, "prov:usedEntity": to}),
                );
                derived.push((from, to));
            }
            "generatedBy" => {
                activities.entry(to.clone()).or_insert_with(
                    || json!({"prov:type": {"$": "weft:WorkItem", "type": "prov:QUALIFIED_NAME"}}),
                );
                let n = relations[1].1.len();
                relations[1].1.insert(
                    format!("_:g{n}"),
                    json!({"prov:entity": from, "prov:activity": to}),
                );
                generated_by.push((from, to));
            }
            "attributedTo" => {
                agents.entry(to.clone()).or_insert_with(|| json!({"prov:type": {"$": "prov:SoftwareAgent", "type": "prov:QUALIFIED_NAME"}}));
                let n = relations[2].1.len();
                relations[2].1.insert(
                    format!("_:a{n}"),
                    json!({"prov:entity": from, "prov:agent": to}),
                );
                attributed_to.push((from, to));
            }
            "partOf" => {
                activities.entry(to.clone()).or_insert_with(
                    || json!({"prov:type": {"$": "weft:Mission", "type": "prov:QUALIFIED_NAME"}}),
                );
                let entry = activities.entry(from).or_insert_with(
                    || json!({"prov:type": {"$": "weft:WorkItem", "type": "prov:QUALIFIED_NAME"}}),
                );
                if let Value::Object(attributes) = entry {
                    attributes.insert(
                        "weft:partOf".into(),
                        json!({"$": to, "type": "prov:QUALIFIED_NAME"}),
                    );
                }
            }
            // A package version is an entity revising its previous version and derived
            // from the Artifacts it cites (DESIGN §11).
            "revisionOf" | "cites" => {
                for (node, kind) in [
                    (&from, "weft:ContextPackage"),
                    (
                        &to,
                        if edge.kind == "cites" {
                            "weft:Artifact"
                        } else {
                            "weft:ContextPackage"
                        },
                    ),
                ] {
                    entities.entry(node.clone()).or_insert_with(
                        || json!({"prov:type": {"$": kind, "type": "prov:QUALIFIED_NAME"}}),
                    );
                }
                let n = relations[0].1.len();
                let mut relation = json!({"prov:generatedEntity": from, "prov:usedEntity": to});
                if edge.kind == "revisionOf" {
                    relation["prov:type"] =
                        json!({"$": "prov:Revision", "type": "prov:QUALIFIED_NAME"});
                } else {
                    relation["prov:type"] =
                        json!({"$": "weft:Cites", "type": "prov:QUALIFIED_NAME"});
                }
                relations[0].1.insert(format!("_:d{n}"), relation);
            }
            _ => {}
        }
    }
    // A WorkItem used the sources of every artifact it generated.
    for (artifact, activity) in &generated_by {
        for (child, source) in &derived {
            if child == artifact {
                let n = relations[3].1.len();
                relations[3].1.insert(
                    format!("_:u{n}"),
                    json!({"prov:activity": activity, "prov:entity": source}),
                );
            }
        }
    }
    // A WorkItem was carried out by the Agents its artifacts are attributed to (once each).
    let mut associated = BTreeSet::new();
    for (artifact, activity) in &generated_by {
        for (attributed, agent) in &attributed_to {
            if attributed == artifact && associated.insert((activity, agent)) {
                let n = relations[4].1.len();
                relations[4].1.insert(
                    format!("_:as{n}"),
                    json!({"prov:activity": activity, "prov:agent": agent}),
                );
            }
        }
    }
    let mut document = Map::new();
    document.insert("prefix".into(), json!({"weft": "https://weft.dev/ns#"}));
    document.insert("entity".into(), Value::Object(entities));
    if !activities.is_empty() {
        document.insert("activity".into(), Value::Object(activities));
    }
    if !agents.is_empty() {
        document.insert("agent".into(), Value::Object(agents));
    }
    for (name, records) in relations {
        if !records.is_empty() {
            document.insert(name.into(), Value::Object(records));
        }
    }
    Value::Object(document)
}

/// The sources of an in-toto Statement as one reader sees them: the sha256 of each readable
/// source (so a dependency names both digests), and the ids of the others.
#[derive(Debug, Default)]
pub(crate) struct StatementSources {
    pub(crate) sha256: BTreeMap<ArtifactId, Sha256Digest>,
    pub(crate) hidden: BTreeSet<ArtifactId>,
}

/// The in-toto Statement about `digest` as `reader` may see it: only sources the reader can
/// read are named; the others are counted in `withheldSources` (CTX-5: counted, never
/// named). Publication refuses a source the publishing Group cannot read, so a manifest the
/// reader sees names hidden sources only if it was recorded before that rule.
pub(crate) async fn intoto_for(
    store: &weft_storage::Store,
    digest: Digest,
    reader: &Reader,
) -> Result<Value, HttpError> {
    let view = store.artifacts().artifact(digest, reader).await?;
    let mut sources = StatementSources::default();
    if let Some(record) = view.manifests.last() {
        for source in &record.manifest.sources {
            match store
                .artifacts()
                .artifact(Digest::Blake3(*source), reader)
                .await
            {
                Ok(source_view) => {
                    sources.sha256.insert(*source, source_view.digests.sha256);
                }
                Err(weft_storage::Error::Rejected(rejection))
                    if rejection.code == ErrorCode::NotFound =>
                {
                    sources.hidden.insert(*source);
                }
                Err(error) => return Err(error.into()),
            }
        }
    }
    Ok(intoto_statement(&view, &sources))
}

/// An in-toto timestamp: RFC 3339 in UTC, ending in `Z` (the validators refuse offsets).
pub(crate) fn utc_timestamp<Tz: chrono::TimeZone>(time: &chrono::DateTime<Tz>) -> String {
    time.with_timezone(&chrono::Utc)
        .to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
}

/// Percent-encodes everything but RFC 3986's unreserved characters, for a URI segment.
fn uri_segment(text: &str) -> String {
    let mut encoded = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            encoded.push(char::from(byte));
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    encoded
}

/// An in-toto Statement v1 about one artifact: both digests as the subject, and an SLSA
/// provenance v1 predicate (sources as resolvedDependencies, tool/model/capability versions,
/// the producer as builder), taken from the artifact's newest visible manifest. Sources in
/// `sources.hidden` are left out and counted.
///
/// Every ResourceDescriptor carries what the in-toto validators require (a `uri`, `digest`
/// or `content`): sources both digests, tools a `urn:weft:<kind>:<id>:<version>` uri; and
/// every timestamp is RFC 3339 in UTC with a `Z`.
pub(crate) fn intoto_statement(view: &ArtifactView, sources: &StatementSources) -> Value {
    let digest = |blake3: &str, sha256: Option<&str>| {
        let mut digest = Map::new();
        digest.insert("blake3".into(), json!(blake3));
        if let Some(sha256) = sha256 {
            digest.insert("sha256".into(), json!(sha256));
        }
        Value::Object(digest)
    };
    let subject = json!([{
        "name": view.digests.blake3.to_string(),
        "digest": digest(&view.digests.blake3.hex(), Some(&view.digests.sha256.hex())),
    }]);
    let Some(record) = view.manifests.last() else {
        return json!({"_type": "https://in-toto.io/Statement/v1", "subject": subject, "predicateType": "https://slsa.dev/provenance/v1", "predicate": {}});
    };
    let manifest = &record.manifest;
    let mut dependencies: Vec<Value> = manifest
        .sources
        .iter()
        .filter(|source| !sources.hidden.contains(source))
        .map(|source| {
            let sha256 = sources.sha256.get(source).map(Sha256Digest::hex);
            json!({"name": source.to_string(), "digest": digest(&source.hex(), sha256.as_deref())})
        })
        .collect();
    dependencies.extend(manifest.tools.iter().map(|tool| {
        let kind = format!("{:?}", tool.kind).to_lowercase();
        json!({
            "name": tool.id,
            "uri": format!("urn:weft:{kind}:{}:{}", uri_segment(&tool.id), uri_segment(&tool.version)),
            "annotations": {"kind": kind, "version": tool.version},
        })
    }));
    let mut internal = json!({
        "leaseId": manifest.execution.lease_id,
        "ownershipEpoch": manifest.execution.ownership_epoch,
        "classification": manifest.classification.as_str(),
    });
    if !sources.hidden.is_empty() {
        internal["withheldSources"] = json!(sources.hidden.len());
    }
    json!({
        "_type": "https://in-toto.io/Statement/v1",
        "subject": subject,
        "predicateType": "https://slsa.dev/provenance/v1",
        "predicate": {
            "buildDefinition": {
                "buildType": "https://weft.dev/mwp/workitem/v1",
                "externalParameters": {
                    "groupId": manifest.group_id,
                    "missionId": manifest.mission_id,
                    "workItemId": manifest.work_item_id,
                    "mediaType": manifest.content.media_type,
                    "schema": manifest.content.schema,
                },
                "internalParameters": internal,
                "resolvedDependencies": dependencies,
            },
            "runDetails": {
                "builder": {
                    "id": format!("https://weft.dev/agents/{}", manifest.producer.agent_id),
                    "version": {"agentCardVersion": manifest.producer.agent_card_version},
                },
                "metadata": {
                    "invocationId": record.manifest_id.to_string(),
                    "finishedOn": utc_timestamp(&manifest.created_at),
                },
            },
        },
    })
}
