//! The artifact page: digests, size, media type, classification; each manifest with its
//! signature checked here against the producer's registered key; when the bytes were last
//! re-hashed and by what, with a "verify now" form; the Evidence citing the artifact and the
//! verdict in force per criterion; and the provenance graph (`graph.rs` lays it out).

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::time::Duration;

use axum::extract::{Form, Query, State};
use axum::http::HeaderMap;
use weft_api::views::ManifestRecord;
use weft_api::{Digest, Id};
use weft_storage::{Direction, EvidenceFilter, Lineage, LineageQuery, NodeRef};

use super::frame::{UiResult, Viewer, escape, page, short, url_encode};
use super::graph::{self, Link, LinkKind, Node, NodeKind};
use crate::http::params::{RawPath, path_digest};
use crate::http::state::AppState;

/// Artifact nodes per page of the graph; beyond, a "+ more" node leads to the next page.
const PAGE_NODES: usize = 200;

/// The graph's settings, from the query.
#[derive(Clone)]
struct GraphQuery {
    direction: &'static str,
    depth: u32,
    all_kinds: bool,
    page: usize,
    /// The Mission whose manifests the graph follows (issue #50); `None`: the newest.
    mission: Option<String>,
}

impl GraphQuery {
    fn of(query: &HashMap<String, String>) -> Self {
        Self {
            direction: match query.get("direction").map(String::as_str) {
                Some("descendants") => "descendants",
                Some("both") => "both",
                _ => "ancestors",
            },
            depth: query
                .get("depth")
                .and_then(|d| d.parse().ok())
                .unwrap_or(3)
                .min(50),
            all_kinds: query.get("kinds").is_some_and(|k| k == "all"),
            page: query
                .get("page")
                .and_then(|p| p.parse().ok())
                .unwrap_or(0)
                .min(10_000),
            mission: query
                .get("mission")
                .filter(|m| weft_api::Id::parse("missionId", m).is_ok())
                .cloned(),
        }
    }

    fn href(&self, id: &str, page: usize) -> String {
        format!(
            "/ui/artifacts/{id}?direction={}&depth={}{}{}{}",
            self.direction,
            self.depth,
            if self.all_kinds { "&kinds=all" } else { "" },
            if page > 0 {
                format!("&page={page}")
            } else {
                String::new()
            },
            self.mission
                .as_deref()
                .map(|m| format!("&mission={}", url_encode(m)))
                .unwrap_or_default()
        )
    }
}

/// `GET /ui/artifacts/{digest}?direction=ancestors|descendants|both&depth=N&kinds=all&page=P`.
pub(crate) async fn artifact(
    State(state): State<AppState>,
    digest: RawPath,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> UiResult {
    let viewer = Viewer::of(&state, &headers).await?;
    let digest = path_digest(digest)?;
    render(&state, &viewer, digest, &GraphQuery::of(&query), None).await
}

/// `POST /ui/artifacts/{digest}/verify` (form field `form`): re-hashes the stored bytes now
/// through storage's read path and shows the page with the result. A mismatch quarantines
/// the artifact, as any read does.
pub(crate) async fn verify_now(
    State(state): State<AppState>,
    digest: RawPath,
    headers: HeaderMap,
    form: Result<Form<HashMap<String, String>>, axum::extract::rejection::FormRejection>,
) -> UiResult {
    let viewer = Viewer::of(&state, &headers).await?;
    let fields = form.map(|Form(fields)| fields).unwrap_or_default();
    viewer.check_form(&headers, fields.get("form").map(String::as_str))?;
    let digest = path_digest(digest)?;
    let result = match state.store.artifacts().verify_now(digest, &viewer.reader).await {
        Ok(record) => format!(
            r#"<p class="good" id="verify-result" role="status">Verified now: the stored bytes hash to their address ({} at {}).</p>"#,
            escape(&record.verified_by),
            escape(&record.verified_at)
        ),
        Err(weft_storage::Error::Corrupt(_)) => r#"<p class="bad" id="verify-result" role="alert">Integrity failure: the stored bytes do not hash to their address. The artifact is quarantined until its bytes are uploaded again, unless an upload has just repaired it; reload to see its state.</p>"#.to_owned(),
        Err(error) => return Err(error.into()),
    };
    render(
        &state,
        &viewer,
        digest,
        &GraphQuery::of(&HashMap::new()),
        Some(result),
    )
    .await
}

/// `valid`, `INVALID` or `unknown key`, with the key id and its Agent.
async fn signature_status(state: &AppState, record: &ManifestRecord) -> (bool, String) {
    let keyid = match record.envelope.signer_keyid() {
        Ok(keyid) => keyid,
        Err(error) => return (false, format!("INVALID: {}", error.message)),
    };
    match state.store.directory().recorded_key(keyid.clone()).await {
        Ok(Some((agent, key))) => {
            let producer = &record.manifest.producer.agent_id;
            match record.check_signature(&key) {
                Ok(_) if &agent == producer => (true, format!("valid: key {keyid} of {agent}")),
                Ok(_) => (
                    false,
                    format!("INVALID: key {keyid} is {agent}'s, not the producer {producer}'s"),
                ),
                Err(error) => (
                    false,
                    format!("INVALID: {} (key {keyid} of {agent})", error.message),
                ),
            }
        }
        Ok(None) => (
            false,
            format!("not verified: no Agent registered key {keyid}"),
        ),
        Err(_) => (false, "not verified: the key could not be read".to_owned()),
    }
}

async fn render(
    state: &AppState,
    viewer: &Viewer,
    digest: Digest,
    graph_query: &GraphQuery,
    banner: Option<String>,
) -> UiResult {
    let reader = &viewer.reader;
    let view = state.store.artifacts().artifact(digest, reader).await?;
    let focus = Digest::Blake3(view.digests.blake3);
    let verification = state.store.artifacts().verification(focus, reader).await?;
    let id = view.digests.blake3.to_string();
    let newest = view.manifests.last().map(|r| &r.manifest);
    let status = if view.quarantined {
        r#"<strong class="bad">quarantined: the stored bytes failed verification</strong>"#
            .to_owned()
    } else {
        match &verification {
            Some(v) => format!(
                "intact: last re-hashed at {} ({})",
                escape(&v.verified_at),
                escape(&v.verified_by)
            ),
            None => "no recorded re-hash yet (verify now, or fsck, records one; every read re-hashes the bytes it serves)".to_owned(),
        }
    };
    let mut body = banner.unwrap_or_default();
    let _ = write!(
        body,
        r#"<h1>Artifact <code id="artifact-id">{id}</code></h1>
<table id="facts"><tr><th scope="row">sha256</th><td>{sha}</td></tr><tr><th scope="row">size</th><td>{size} bytes</td></tr><tr><th scope="row">media type</th><td>{media}</td></tr><tr><th scope="row">classification</th><td>{class}</td></tr><tr><th scope="row">verification</th><td id="status">{status}</td></tr></table>
<form method="post" action="/ui/artifacts/{id}/verify"><input type="hidden" name="form" value="{form}"><button type="submit" id="verify-now">Verify now</button> <span class="muted">re-hashes the stored bytes (BLAKE3 and SHA-256)</span></form>
<h2>Manifests</h2><table id="manifests"><tr><th>manifest</th><th>signature</th><th>producer</th><th>WorkItem</th><th>Mission</th><th>tools</th><th>created</th><th>sequence</th></tr>"#,
        id = escape(&id),
        sha = escape(&view.digests.sha256.to_string()),
        size = view.size,
        media = escape(newest.map(|m| m.content.media_type.as_str()).unwrap_or("-")),
        class = newest.map(|m| m.classification.as_str()).unwrap_or("-"),
        form = viewer.form_token,
    );
    for record in &view.manifests {
        let m = &record.manifest;
        let (valid, signature) = signature_status(state, record).await;
        let tools: Vec<String> = m
            .tools
            .iter()
            .map(|t| format!("{:?} {} {}", t.kind, t.id, t.version))
            .collect();
        let _ = write!(
            body,
            r#"<tr><td>{}</td><td class="{}">{}</td><td>{} (card {})</td><td><a href="/ui/workitems/{}">{}</a></td><td><a href="/ui/missions/{}">{}</a></td><td>{}</td><td>{}</td><td>{}</td></tr>"#,
            escape(&record.manifest_id.to_string()),
            if valid {
                "good signature"
            } else {
                "bad signature"
            },
            escape(&signature),
            escape(m.producer.agent_id.as_str()),
            escape(&m.producer.agent_card_version),
            url_encode(m.work_item_id.as_str()),
            escape(m.work_item_id.as_str()),
            url_encode(m.mission_id.as_str()),
            escape(m.mission_id.as_str()),
            escape(&tools.join(", ")),
            escape(&m.created_at.to_rfc3339()),
            record.sequence
        );
    }
    body.push_str("</table>");
    body.push_str(&super::content::section(state, viewer, &view).await);
    let newest_mission = view
        .manifests
        .last()
        .map(|record| record.manifest.mission_id.to_string())
        .unwrap_or_default();
    let group = viewer.session.group_id.to_string();
    let _ = write!(
        body,
        r#"<h2>Verify this yourself</h2><p class="muted">With the CLI, on your machine: the bytes are re-hashed, signatures are checked with keys you hold (else with the key the Authority registered, and it says so), and the log's hash chain is re-checked against the authority key you pinned.</p><pre id="verify-yourself">weft get {id} -o artifact.bin          # both digests checked before the file appears
weft show {id}                         # every manifest's signature
weft lineage {id} --mission {mission}  # its provenance in that Mission (the server's graph)
weft events verify --group {group} --authority-key KEY   # the whole hash chain to the signed head</pre>"#,
        id = escape(&id),
        mission = escape(&newest_mission),
        group = escape(&group),
    );
    body.push_str(&evidence_section(state, viewer, &view.digests.blake3).await?);
    let mut missions: Vec<String> = Vec::new();
    for record in &view.manifests {
        let mission = record.manifest.mission_id.to_string();
        if !missions.contains(&mission) {
            missions.push(mission);
        }
    }
    body.push_str(&graph_section(state, viewer, &id, focus, graph_query, &missions).await?);
    Ok(page(viewer, &format!("Artifact {}", short(&id, 20)), &body))
}

/// The Evidence citing the artifact, and the verdict in force for each of their criteria.
async fn evidence_section(
    state: &AppState,
    viewer: &Viewer,
    artifact: &weft_api::ArtifactId,
) -> UiResult<String> {
    let filter = EvidenceFilter {
        artifact: Some(*artifact),
        limit: 100,
        ..EvidenceFilter::default()
    };
    let evidence = state
        .store
        .evidence()
        .list_evidence(filter, &viewer.reader)
        .await?;
    let mut out = String::from(r#"<h2>Evidence citing this artifact</h2>"#);
    if evidence.items.is_empty() {
        out.push_str(r#"<p id="evidence">No Evidence visible to you cites it.</p>"#);
        return Ok(out);
    }
    // (Mission, WorkItem) → criteria cited, for the verdicts in force.
    let mut cited: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    out.push_str(r#"<table id="evidence"><tr><th>criterion</th><th>outcome</th><th>method</th><th>producer</th><th>WorkItem</th><th>summary</th><th>time</th></tr>"#);
    for record in &evidence.items {
        let e = &record.evidence;
        cited
            .entry((e.mission_id.to_string(), e.work_item_id.to_string()))
            .or_default()
            .push(e.criterion.clone());
        let _ = write!(
            out,
            r#"<tr><td>{}</td><td class="outcome-{}">{}</td><td>{}</td><td>{}</td><td><a href="/ui/workitems/{}">{}</a></td><td>{}</td><td>{}</td></tr>"#,
            escape(&e.criterion),
            e.result.outcome.as_str(),
            e.result.outcome.as_str(),
            e.method.kind.as_str(),
            escape(e.producer.agent_id.as_str()),
            url_encode(e.work_item_id.as_str()),
            escape(e.work_item_id.as_str()),
            escape(&short(&e.result.summary, 80)),
            escape(&e.timestamp.to_rfc3339()),
        );
    }
    out.push_str(r#"</table><h3>Verdict per criterion</h3><table id="verdicts"><tr><th>WorkItem</th><th>criterion</th><th>verdict in force</th><th>by</th><th>records (pass/fail/inconclusive)</th></tr>"#);
    for ((mission, work_item), criteria) in cited {
        let (Ok(mission_id), Ok(work_item_id)) = (
            Id::parse("missionId", &mission),
            Id::parse("workItemId", &work_item),
        ) else {
            continue;
        };
        let view = state
            .store
            .evidence()
            .criteria(work_item_id, Some(mission_id), &viewer.reader)
            .await?;
        for summary in view
            .criteria
            .iter()
            .filter(|c| criteria.contains(&c.criterion))
        {
            let _ = write!(
                out,
                r#"<tr><td>{}</td><td>{}</td><td class="outcome-{}">{}{}</td><td>{} ({})</td><td>{}/{}/{}</td></tr>"#,
                escape(&work_item),
                escape(&summary.criterion),
                summary.latest.outcome.as_str(),
                summary.latest.outcome.as_str(),
                if summary.contested {
                    " (contested)"
                } else {
                    ""
                },
                escape(&summary.latest.producer),
                summary.latest.method.as_str(),
                summary.counts.pass,
                summary.counts.fail,
                summary.counts.inconclusive,
            );
        }
    }
    out.push_str("</table>");
    Ok(out)
}

/// The provenance graph with its form and legend.
async fn graph_section(
    state: &AppState,
    viewer: &Viewer,
    id: &str,
    focus: Digest,
    graph_query: &GraphQuery,
    missions: &[String],
) -> UiResult<String> {
    // One Mission's manifests at a time (issue #50): the one asked for, else the newest.
    let mission = graph_query
        .mission
        .as_deref()
        .filter(|m| missions.iter().any(|known| known == m))
        .or(missions.last().map(String::as_str));
    let lineage_query = LineageQuery {
        direction: match graph_query.direction {
            "descendants" => Direction::Descendants,
            "both" => Direction::Both,
            _ => Direction::Ancestors,
        },
        depth: Some(graph_query.depth),
        limit: PAGE_NODES,
        skip: graph_query.page * PAGE_NODES,
        budget: Duration::from_millis(250),
        edges: if graph_query.all_kinds {
            None
        } else {
            Some(vec!["derivedFrom".to_owned()])
        },
        as_of: None,
        mission: mission.map(str::to_owned),
    };
    let lineage = state
        .store
        .lineage()
        .lineage(focus, lineage_query, &viewer.reader)
        .await?;
    let (nodes, links) = graph_of(&lineage, id, graph_query);
    let selected = |value: &str| {
        if value == graph_query.direction {
            " selected"
        } else {
            ""
        }
    };
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<h2>Provenance</h2>{scope}
<form method="get" action="/ui/artifacts/{id}"><label>direction <select name="direction"><option{a}>ancestors</option><option{d}>descendants</option><option{b}>both</option></select></label> <label>depth <input name="depth" type="number" min="0" max="50" value="{depth}"></label> <label>nodes <select name="kinds"><option value="artifacts">artifacts</option><option value="all"{all}>artifacts, WorkItems, Missions, Agents</option></select></label> <button type="submit">Show</button></form>
<p id="summary">{n} artifacts{withheld}{truncated}{page}</p>{legend}<div id="graph">{svg}</div>"#,
        id = escape(id),
        a = selected("ancestors"),
        d = selected("descendants"),
        b = selected("both"),
        depth = graph_query.depth,
        all = if graph_query.all_kinds {
            " selected"
        } else {
            ""
        },
        n = lineage.artifacts.len(),
        withheld = if lineage.withheld > 0 {
            format!(", {} withheld (Groups you cannot read)", lineage.withheld)
        } else {
            String::new()
        },
        truncated = if lineage.truncated {
            ", more on the next page"
        } else {
            ""
        },
        page = if graph_query.page > 0 {
            format!(
                r#", page {} (<a href="{}">first page</a>)"#,
                graph_query.page + 1,
                escape(&graph_query.href(id, 0))
            )
        } else {
            String::new()
        },
        legend = graph::legend(&NodeKind::ALL, &graph::PROVENANCE_LINKS),
        scope = mission_scope(id, graph_query, mission, missions),
        svg = graph::svg(&nodes, &links),
    );
    Ok(out)
}

/// Which Mission's manifests the graph follows, and links to the others the same bytes were
/// published in (issue #50: each is its own provenance, never merged).
fn mission_scope(
    id: &str,
    graph_query: &GraphQuery,
    shown: Option<&str>,
    missions: &[String],
) -> String {
    let Some(shown) = shown else {
        return String::new();
    };
    let mut out = format!(
        r#"<p id="mission-scope">as published in Mission <a href="/ui/missions/{}">{}</a>"#,
        url_encode(shown),
        escape(shown)
    );
    let others: Vec<String> = missions
        .iter()
        .filter(|m| m.as_str() != shown)
        .map(|m| {
            let switched = GraphQuery {
                mission: Some(m.clone()),
                ..graph_query.clone()
            };
            format!(
                r#"<a href="{}">{}</a>"#,
                escape(&switched.href(id, 0)),
                escape(m)
            )
        })
        .collect();
    if !others.is_empty() {
        out.push_str("; the same bytes were also published in ");
        out.push_str(&others.join(", "));
    }
    out.push_str("</p>");
    out
}

/// The lineage answer as graph nodes and links: sources left of what derives from them,
/// artifacts left of their WorkItems, WorkItems left of their Missions and Agents.
fn graph_of(lineage: &Lineage, focus: &str, graph_query: &GraphQuery) -> (Vec<Node>, Vec<Link>) {
    let mut nodes = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for artifact in &lineage.artifacts {
        let id = artifact.id.to_string();
        let manifest = artifact.manifests.first();
        let caption = manifest
            .map(|m| format!("{} · {} / {}", m.media_type, m.mission_id, m.work_item_id))
            .unwrap_or_default();
        index.insert(id.clone(), nodes.len());
        nodes.push(Node {
            label: id.clone(),
            title: format!(
                "{id}\n{} bytes{}",
                artifact.size,
                manifest
                    .map(|m| format!(
                        "\n{} by {} in WorkItem {} of Mission {}",
                        m.media_type, m.producer, m.work_item_id, m.mission_id
                    ))
                    .unwrap_or_default()
            ),
            caption,
            href: Some(graph_query.href(&id, 0)),
            kind: if id == focus {
                NodeKind::Focus
            } else {
                NodeKind::Artifact
            },
            name: id,
        });
    }
    let mut add_context = |nodes: &mut Vec<Node>, node: &NodeRef| -> Option<usize> {
        let name = node.to_string();
        if let Some(&at) = index.get(&name) {
            return Some(at);
        }
        let (kind, label, href) = match node {
            NodeRef::WorkItem(id) => (
                NodeKind::WorkItem,
                format!("WorkItem {id}"),
                Some(format!("/ui/workitems/{}", url_encode(&id.to_string()))),
            ),
            NodeRef::Mission(id) => (
                NodeKind::Mission,
                format!("Mission {id}"),
                Some(format!("/ui/missions/{}", url_encode(&id.to_string()))),
            ),
            NodeRef::Agent(id) => (NodeKind::Agent, format!("Agent {id}"), None),
            NodeRef::Artifact(_) | NodeRef::Context(_) => return None,
        };
        index.insert(name.clone(), nodes.len());
        nodes.push(Node {
            title: name.clone(),
            label,
            caption: String::new(),
            href,
            kind,
            name,
        });
        Some(nodes.len() - 1)
    };
    let mut links = Vec::new();
    for edge in &lineage.edges {
        let from = add_context(&mut nodes, &edge.from);
        let to = add_context(&mut nodes, &edge.to);
        let (Some(from), Some(to)) = (from, to) else {
            continue;
        };
        links.push(if edge.kind == "derivedFrom" {
            // The source is drawn left; the arrow points at it.
            Link {
                left: to,
                right: from,
                kind: LinkKind::DerivedFrom,
                arrow_left: true,
            }
        } else {
            Link {
                left: from,
                right: to,
                kind: LinkKind::Context(edge.kind),
                arrow_left: false,
            }
        });
    }
    if lineage.truncated {
        nodes.push(Node {
            label: "+ more".to_owned(),
            title: format!("more than {PAGE_NODES} artifacts: the next page"),
            caption: format!("page {}", graph_query.page + 2),
            href: Some(graph_query.href(focus, graph_query.page + 1)),
            kind: NodeKind::More,
            name: "more".to_owned(),
        });
    }
    (nodes, links)
}
