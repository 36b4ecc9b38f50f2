//! The WorkItem page (state, contract, owner, lease, Evidence by criterion, artifacts, and the
//! story's sections from `story.rs`: every Evidence record, offers, leases, history) and the
//! Mission page (its WorkItem DAG with states, drawn by `graph.rs`, and
//! its budget: limits and spent). Both read through the same views as `GET /v1/workitems/{id}`
//! and `GET /v1/missions/{id}`, so a WorkItem of a Mission the reader cannot see is not found.

use std::collections::HashMap;
use std::fmt::Write as _;

use axum::extract::State;
use axum::http::HeaderMap;
use serde::Serialize;
use weft_api::work::views::BudgetView;
use weft_storage::ListFilter;

use super::frame::{UiResult, Viewer, escape, page, short, url_encode};
use super::graph::{self, Link, LinkKind, Node, NodeKind};
use super::story;
use crate::http::params::{RawPath, path_id};
use crate::http::state::AppState;

/// A value's wire word (`in_progress`, `worker`), for enums serialized as strings.
fn word<T: Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(text)) => text,
        Ok(other) => other.to_string(),
        Err(_) => "-".to_owned(),
    }
}

/// The budget table: each dimension's limit and what is spent.
fn budget_table(budget: &BudgetView) -> String {
    let limit = serde_json::to_value(&budget.limit).unwrap_or_default();
    let spent = serde_json::to_value(&budget.spent).unwrap_or_default();
    let mut out = String::from(
        r#"<table id="budget"><tr><th>dimension</th><th>limit</th><th>spent</th></tr>"#,
    );
    if let Some(limits) = limit.as_object() {
        for (dimension, value) in limits {
            let _ = write!(
                out,
                "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(dimension),
                escape(&value.to_string()),
                escape(
                    &spent
                        .get(dimension)
                        .map(|v| v.to_string())
                        .unwrap_or_default()
                )
            );
        }
    }
    out.push_str("</table>");
    out
}

/// `GET /ui/workitems/{id}`.
pub(crate) async fn work_item(
    State(state): State<AppState>,
    id: RawPath,
    headers: HeaderMap,
) -> UiResult {
    let viewer = Viewer::of(&state, &headers).await?;
    let id = path_id("workItemId", id)?;
    let view = state
        .store
        .work()
        .work_item(id.clone(), &viewer.reader)
        .await?;
    let group = url_encode(&view.group_id);
    let mut body = String::new();
    let owner = view
        .owner
        .as_ref()
        .map(|o| {
            format!(
                "{} (epoch {}{})",
                o.agent_id,
                o.ownership_epoch,
                o.expires_at
                    .as_ref()
                    .map(|e| format!(", until {e}"))
                    .unwrap_or_default()
            )
        })
        .unwrap_or_else(|| "none".to_owned());
    let lease = view
        .lease
        .as_ref()
        .map(|l| {
            format!(
                "{} {} by {}, since {}, expires {}",
                l.kind, l.lease_id, l.agent_id, l.started_at, l.expires_at
            )
        })
        .unwrap_or_else(|| "none".to_owned());
    let _ = write!(
        body,
        r#"<h1>WorkItem <code id="work-item-id">{id}</code></h1>
<table id="facts"><tr><th scope="row">state</th><td id="state">{state}</td></tr><tr><th scope="row">Mission</th><td><a href="/ui/missions/{mission_url}">{mission}</a></td></tr><tr><th scope="row">objective</th><td>{objective}</td></tr><tr><th scope="row">owner</th><td>{owner}</td></tr><tr><th scope="row">lease</th><td>{lease}</td></tr><tr><th scope="row">attempts</th><td>{attempts}</td></tr><tr><th scope="row">depends on</th><td>{deps}</td></tr><tr><th scope="row">revision</th><td>{revision} (contract {contract_revision})</td></tr></table>
<h2>Budget</h2>{budget}
<details><summary>Contract (revision {contract_revision})</summary><pre>{contract}</pre></details>"#,
        id = escape(&view.work_item_id),
        state = escape(&word(&view.state)),
        mission_url = url_encode(&view.mission_id),
        mission = escape(&view.mission_id),
        objective = escape(&view.contract.objective),
        owner = escape(&owner),
        lease = escape(&lease),
        attempts = view.attempts,
        deps = view
            .depends_on
            .iter()
            .map(|d| format!(
                r#"<a href="/ui/workitems/{}">{}</a>"#,
                url_encode(d),
                escape(d)
            ))
            .collect::<Vec<_>>()
            .join(", "),
        revision = view.revision,
        contract_revision = view.contract_revision,
        budget = budget_table(&view.budget),
        contract = escape(&serde_json::to_string_pretty(&view.contract).unwrap_or_default()),
    );
    let _ = write!(
        body,
        r#"<h2>Verify this yourself</h2><pre id="verify-yourself">weft work show {id}          # state, owner, lease, history
weft criteria {id}           # the verdict in force per criterion
weft events verify --group {group} --authority-key KEY   # the log these Events are in</pre>"#,
        id = escape(&view.work_item_id),
        group = escape(&view.group_id),
    );
    // The history, read 16 Events at a time and kept as what the story needs of each (its
    // line, its lease, its submission), never the payloads themselves (bounded memory).
    let group_id = weft_api::Id::parse("groupId", &view.group_id)?;
    let mut told: Vec<story::Told> = Vec::with_capacity(view.history.len());
    for chunk in view.history.chunks(16) {
        let read = state
            .store
            .delivery()
            .events_at(group_id.clone(), chunk.to_vec(), &viewer.reader)
            .await?;
        for sequence in chunk {
            let event = read.iter().find(|event| event.sequence() == *sequence);
            told.push(match event {
                Some(weft_api::event::Delivered::Event(event)) => story::Told::of(event),
                Some(weft_api::event::Delivered::Withheld(_)) => story::Told::withheld(*sequence),
                None => story::Told::archived(*sequence),
            });
        }
    }
    let submitted = story::submitted(&told);
    // Evidence by criterion: the verdict in force of each (the same rule as the API's).
    let mission_id = weft_api::Id::parse("missionId", &view.mission_id)?;
    let criteria = state
        .store
        .evidence()
        .criteria(id.clone(), Some(mission_id.clone()), &viewer.reader)
        .await;
    body.push_str("<h2>Evidence by criterion</h2>");
    match criteria {
        Ok(criteria) if !criteria.criteria.is_empty() => {
            body.push_str(r#"<table id="criteria"><tr><th>criterion</th><th>verdict in force</th><th>by</th><th>records (pass/fail/inconclusive)</th><th>Evidence</th></tr>"#);
            for c in &criteria.criteria {
                let _ = write!(
                    body,
                    r#"<tr><td>{}</td><td class="outcome-{}">{}{}</td><td>{} ({}, {})</td><td>{}/{}/{}</td><td><a href="/ui/evidence/{}"><code>{}</code></a></td></tr>"#,
                    escape(&c.criterion),
                    c.latest.outcome.as_str(),
                    c.latest.outcome.as_str(),
                    if c.contested { " (contested)" } else { "" },
                    escape(&c.latest.producer),
                    c.latest.method.as_str(),
                    escape(&word(&c.latest.standing)),
                    c.counts.pass,
                    c.counts.fail,
                    c.counts.inconclusive,
                    escape(&c.latest.evidence_id.to_string()),
                    escape(&format!(
                        "evidence {}",
                        short(&c.latest.evidence_id.to_string(), 22)
                    )),
                );
            }
            body.push_str("</table>");
        }
        _ => body.push_str(r#"<p id="criteria">No Evidence yet.</p>"#),
    }
    let artifacts = state
        .store
        .artifacts()
        .list_artifacts(
            ListFilter {
                work_item_id: Some(id.clone()),
                mission_id: Some(mission_id),
                limit: 200,
                ..ListFilter::default()
            },
            &viewer.reader,
        )
        .await?;
    body.push_str("<h2>Artifacts</h2>");
    if artifacts.items.is_empty() {
        body.push_str(r#"<p id="artifacts">No artifact published yet.</p>"#);
    } else {
        body.push_str(r#"<table id="artifacts"><tr><th>artifact</th><th>media type</th><th>producer</th><th>published</th><th>role</th></tr>"#);
        for item in &artifacts.items {
            let artifact = item.artifact.to_string();
            let _ = write!(
                body,
                r#"<tr><td><a href="/ui/artifacts/{artifact}" title="{artifact}">{}</a></td><td>{}</td><td>{}</td><td>{}</td><td class="role">{}</td></tr>"#,
                escape(&short(&artifact, 30)),
                escape(&item.media_type),
                escape(&item.producer),
                escape(&item.created_at),
                story::role(submitted.as_deref(), &artifact),
            );
        }
        body.push_str("</table>");
    }
    let records = state
        .store
        .evidence()
        .list_evidence(
            weft_storage::EvidenceFilter {
                work_item_id: Some(id.clone()),
                mission_id: Some(weft_api::Id::parse("missionId", &view.mission_id)?),
                limit: 200,
                ..weft_storage::EvidenceFilter::default()
            },
            &viewer.reader,
        )
        .await?;
    body.push_str(&story::evidence(&records.items));
    body.push_str(&story::offers(&view.offers));
    if view.offers_truncated {
        body.push_str(r#"<p class="muted">Older offers are in the Group's log.</p>"#);
    }
    body.push_str(&story::leases(&told));
    body.push_str(r#"<h2>History</h2><ol class="timeline" id="history">"#);
    for told in &told {
        let _ = write!(
            body,
            r#"<li><a href="/ui/groups/{group}/events?after={}&amp;limit=1">#{}</a> {}</li>"#,
            told.sequence.saturating_sub(1),
            told.sequence,
            told.line
        );
    }
    body.push_str("</ol>");
    if view.history_truncated {
        body.push_str(r#"<p class="muted">Older Events are in the Group's log.</p>"#);
    }
    Ok(page(
        &viewer,
        &format!("WorkItem {}", view.work_item_id),
        &body,
    ))
}

/// `GET /ui/missions/{id}`.
pub(crate) async fn mission(
    State(state): State<AppState>,
    id: RawPath,
    headers: HeaderMap,
) -> UiResult {
    let viewer = Viewer::of(&state, &headers).await?;
    let id = path_id("missionId", id)?;
    let view = state
        .store
        .work()
        .mission(id.clone(), &viewer.reader)
        .await?;
    let dag = state.store.work().mission_graph(id, &viewer.reader).await?;
    let mut index: HashMap<&str, usize> = HashMap::new();
    let nodes: Vec<Node> = dag
        .nodes
        .iter()
        .enumerate()
        .map(|(at, node)| {
            index.insert(node.work_item_id.as_str(), at);
            let state = word(&node.state);
            Node {
                label: node.work_item_id.clone(),
                title: format!("{} ({state})", node.work_item_id),
                caption: format!("{state}{}", if node.eligible { " · eligible" } else { "" }),
                href: Some(format!("/ui/workitems/{}", url_encode(&node.work_item_id))),
                kind: NodeKind::WorkItem,
                name: node.work_item_id.clone(),
            }
        })
        .collect();
    let links: Vec<Link> = dag
        .edges
        .iter()
        .filter_map(|edge| {
            Some(Link {
                left: *index.get(edge.to.as_str())?,
                right: *index.get(edge.from.as_str())?,
                kind: LinkKind::DependsOn,
                arrow_left: true,
            })
        })
        .collect();
    let mut body = String::new();
    let _ = write!(
        body,
        r#"<h1>Mission <code id="mission-id">{id}</code></h1>
<table id="facts"><tr><th scope="row">title</th><td>{title}</td></tr><tr><th scope="row">state</th><td id="state">{state}</td></tr><tr><th scope="row">priority</th><td>{priority}</td></tr><tr><th scope="row">Group</th><td><a href="/ui/groups/{group_url}/events">{group}</a></td></tr><tr><th scope="row">parent WorkItem</th><td>{parent}</td></tr></table>
<h2>Budget</h2>{budget}
<h2>WorkItems</h2>{legend}<div id="graph">{svg}</div>"#,
        id = escape(&view.mission_id),
        title = escape(&view.title),
        state = escape(&word(&view.state)),
        priority = escape(&word(&view.priority_class)),
        group_url = url_encode(&view.group_id),
        group = escape(&view.group_id),
        parent = view
            .parent_work_item_id
            .as_ref()
            .map(|p| format!(
                r#"<a href="/ui/workitems/{}">{}</a>"#,
                url_encode(p),
                escape(p)
            ))
            .unwrap_or_else(|| "none".to_owned()),
        budget = budget_table(&view.budget),
        legend = graph::legend(
            &[(NodeKind::WorkItem, "WorkItem (state in its box)")],
            &graph::WORK_LINKS
        ),
        svg = graph::svg(&nodes, &links),
    );
    Ok(page(
        &viewer,
        &format!("Mission {}", view.mission_id),
        &body,
    ))
}
