//! The landing page (what the signed-in reader may see: its Group, Missions, artifacts) and
//! search (a digest in either form or bare hex, a WorkItem, Mission or Agent id). Search
//! redirects to the one page that matches, or answers "nothing visible matches" whether the
//! thing does not exist or is only not visible to this reader.

use std::collections::HashMap;
use std::fmt::Write as _;

use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Redirect, Response};
use weft_api::{Digest, Id};
use weft_storage::{EvidenceFilter, ListFilter, MissionScope};

use super::frame::{UiResult, Viewer, escape, page, short, url_encode};
use crate::http::state::AppState;

/// Artifacts listed per page of the landing page.
const ARTIFACTS_PER_PAGE: u32 = 50;

/// `GET /ui/` (and `GET /ui`), `?after=<cursor>` for the next page of artifacts.
pub(crate) async fn home(
    State(state): State<AppState>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> UiResult {
    let viewer = Viewer::of(&state, &headers).await?;
    let session = &viewer.session;
    let roles: Vec<String> = session
        .roles
        .iter()
        .map(|role| {
            serde_json::to_value(role)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_else(|| format!("{role:?}"))
        })
        .collect();
    let scope = match &session.scope {
        MissionScope::Group => "the whole Group".to_owned(),
        MissionScope::Missions(missions) => format!(
            "Missions {} only",
            missions.iter().cloned().collect::<Vec<_>>().join(", ")
        ),
    };
    let mut body = String::new();
    let _ = write!(
        body,
        r#"<h1>What you can see</h1>
<table id="group"><tr><th scope="row">Agent</th><td>{agent}</td></tr><tr><th scope="row">Group</th><td><a href="/ui/groups/{group_url}/events">{group}</a> (event log)</td></tr><tr><th scope="row">roles</th><td>{roles}</td></tr><tr><th scope="row">scope</th><td id="scope">{scope}</td></tr><tr><th scope="row">session expires</th><td>{expires}</td></tr></table>
{search}"#,
        agent = escape(session.agent_id.as_str()),
        group_url = url_encode(session.group_id.as_str()),
        group = escape(session.group_id.as_str()),
        roles = escape(&roles.join(", ")),
        scope = escape(&scope),
        expires = escape(&session.expires_at),
        search = search_form(""),
    );
    let missions = state.store.work().missions(&viewer.reader, 100).await?;
    body.push_str(r#"<h2>Missions</h2>"#);
    if missions.is_empty() {
        body.push_str(r#"<p id="missions">No Mission is visible to you.</p>"#);
    } else {
        body.push_str(r#"<table id="missions"><tr><th>Mission</th><th>title</th><th>state</th><th>WorkItems</th></tr>"#);
        for mission in &missions {
            let _ = write!(
                body,
                r#"<tr><td><a href="/ui/missions/{}">{}</a></td><td>{}</td><td>{}</td><td>{}</td></tr>"#,
                url_encode(&mission.mission_id),
                escape(&mission.mission_id),
                escape(&mission.title),
                escape(&format!("{:?}", mission.state).to_lowercase()),
                mission.work_items.len()
            );
        }
        body.push_str("</table>");
    }
    let after = query.get("after").and_then(|a| a.parse().ok());
    let listed = state
        .store
        .artifacts()
        .list_artifacts(
            ListFilter {
                after,
                limit: ARTIFACTS_PER_PAGE,
                ..ListFilter::default()
            },
            &viewer.reader,
        )
        .await?;
    body.push_str(r#"<h2>Artifacts (in order of publication)</h2>"#);
    if listed.items.is_empty() {
        body.push_str(r#"<p id="artifacts">No artifact is visible to you.</p>"#);
    } else {
        body.push_str(r#"<table id="artifacts"><tr><th>artifact</th><th>media type</th><th>WorkItem</th><th>producer</th><th>published</th></tr>"#);
        for item in &listed.items {
            let id = item.artifact.to_string();
            let _ = write!(
                body,
                r#"<tr><td><a href="/ui/artifacts/{id}" title="{id}">{}</a></td><td>{}</td><td><a href="/ui/workitems/{}">{}</a></td><td>{}</td><td>{}</td></tr>"#,
                escape(&short(&id, 30)),
                escape(&item.media_type),
                url_encode(&item.work_item_id),
                escape(&item.work_item_id),
                escape(&item.producer),
                escape(&item.created_at),
            );
        }
        body.push_str("</table>");
        if let Some(next) = listed.next {
            let _ = write!(
                body,
                r#"<p><a href="/ui/?after={next}">Next artifacts</a></p>"#
            );
        }
    }
    Ok(page(&viewer, "Home", &body))
}

fn search_form(value: &str) -> String {
    format!(
        r#"<form method="get" action="/ui/search" role="search"><label for="q">Search a digest (blake3: or sha256:, or bare hex), WorkItem, Mission, Agent or file name</label> <input id="q" name="q" size="70" value="{}"> <button type="submit">Search</button></form>"#,
        escape(value)
    )
}

/// `GET /ui/search?q=…`.
pub(crate) async fn search(
    State(state): State<AppState>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> UiResult {
    let viewer = Viewer::of(&state, &headers).await?;
    let text = query
        .get("q")
        .map(|q| q.trim().to_owned())
        .unwrap_or_default();
    if text.is_empty() {
        return Ok(page(
            &viewer,
            "Search",
            &format!("<h1>Search</h1>{}", search_form("")),
        ));
    }
    if let Some(found) = find(&state, &viewer, &text).await? {
        return Ok(found);
    }
    let body = format!(
        r#"<h1>Search</h1>{}<p id="no-match">Nothing visible matches <code>{}</code>.</p>"#,
        search_form(&text),
        escape(&short(&text, 80))
    );
    Ok(page(&viewer, "Search", &body))
}

/// The page `text` names, if one is visible: a redirect, or the producer's artifacts.
async fn find(state: &AppState, viewer: &Viewer, text: &str) -> UiResult<Option<Response>> {
    let reader = &viewer.reader;
    let is_hex = text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit());
    let digests: Vec<Digest> = if is_hex {
        let lower = text.to_ascii_lowercase();
        [format!("blake3:{lower}"), format!("sha256:{lower}")]
            .iter()
            .filter_map(|d| Digest::parse(d).ok())
            .collect()
    } else {
        Digest::parse(text).ok().into_iter().collect()
    };
    for digest in digests {
        if let Ok(view) = state.store.artifacts().artifact(digest, reader).await {
            let to = format!("/ui/artifacts/{}", view.digests.blake3);
            return Ok(Some(Redirect::to(&to).into_response()));
        }
    }
    let Ok(id) = Id::parse("id", text) else {
        return Ok(None);
    };
    if state
        .store
        .work()
        .work_item(id.clone(), reader)
        .await
        .is_ok()
    {
        let to = format!("/ui/workitems/{}", url_encode(id.as_str()));
        return Ok(Some(Redirect::to(&to).into_response()));
    }
    if state.store.work().mission(id.clone(), reader).await.is_ok() {
        let to = format!("/ui/missions/{}", url_encode(id.as_str()));
        return Ok(Some(Redirect::to(&to).into_response()));
    }
    // An Agent: what it did, reviewed and produced that this reader may see (issue #50).
    if let Some(found) = agent_page(state, viewer, text, id).await? {
        return Ok(Some(found));
    }
    named(state, viewer, text).await
}

/// The artifacts whose file name starts with `text` (issue #50: search by name), if any.
async fn named(state: &AppState, viewer: &Viewer, text: &str) -> UiResult<Option<Response>> {
    if text.len() > 255 {
        return Ok(None);
    }
    let found = state
        .store
        .artifacts()
        .list_artifacts(
            ListFilter {
                name: Some(text.to_owned()),
                limit: 100,
                ..ListFilter::default()
            },
            &viewer.reader,
        )
        .await?;
    if found.items.is_empty() {
        return Ok(None);
    }
    let mut body = format!(
        r#"<h1>Artifacts named <code>{}</code>…</h1>{}<table id="named"><tr><th>artifact</th><th>name</th><th>media type</th><th>WorkItem</th><th>published</th></tr>"#,
        escape(text),
        search_form(text)
    );
    for item in &found.items {
        let artifact = item.artifact.to_string();
        let _ = write!(
            body,
            r#"<tr><td><a href="/ui/artifacts/{artifact}">{}</a></td><td>{}</td><td>{}</td><td><a href="/ui/workitems/{}">{}</a></td><td>{}</td></tr>"#,
            escape(&short(&artifact, 30)),
            escape(item.name.as_deref().unwrap_or("")),
            escape(&item.media_type),
            url_encode(&item.work_item_id),
            escape(&item.work_item_id),
            escape(&item.created_at),
        );
    }
    body.push_str("</table>");
    Ok(Some(page(viewer, "Search", &body)))
}

/// The Agent `id`'s page: the Events it caused in the viewer's Group (offers, acceptances,
/// failures, reviews: whatever it signed), the Evidence it recorded, the artifacts it
/// produced; `None` when the reader sees none of them.
async fn agent_page(
    state: &AppState,
    viewer: &Viewer,
    text: &str,
    id: Id,
) -> UiResult<Option<Response>> {
    let reader = &viewer.reader;
    let group = viewer.session.group_id.clone();
    let (acts, older) = state
        .store
        .delivery()
        .actor_events(group.clone(), id.clone(), None, 100, reader)
        .await?;
    let reviewed = state
        .store
        .evidence()
        .list_evidence(
            EvidenceFilter {
                producer: Some(id.clone()),
                limit: 100,
                ..EvidenceFilter::default()
            },
            reader,
        )
        .await?;
    let produced = state
        .store
        .artifacts()
        .list_artifacts(
            ListFilter {
                producer: Some(id.clone()),
                limit: 100,
                ..ListFilter::default()
            },
            reader,
        )
        .await?;
    if acts.is_empty() && reviewed.items.is_empty() && produced.items.is_empty() {
        return Ok(None);
    }
    let group_url = url_encode(group.as_str());
    let mut body = format!(
        r#"<h1>Agent <code id="agent-id">{}</code></h1>{}<h2>What it did in {}</h2>"#,
        escape(id.as_str()),
        search_form(text),
        escape(group.as_str()),
    );
    if acts.is_empty() {
        body.push_str(r#"<p id="acts">Nothing you may see.</p>"#);
    } else {
        body.push_str(r#"<table id="acts"><tr><th>Event</th><th>when</th><th>what</th><th>about</th><th>Command</th></tr>"#);
        for event in &acts {
            let payload: serde_json::Value =
                serde_json::from_str(event.payload.get()).unwrap_or_default();
            let about = [
                "workItemId",
                "missionId",
                "artifact",
                "evidenceId",
                "packageId",
            ]
            .iter()
            .find_map(|field| payload[*field].as_str().map(|v| (*field, v.to_owned())));
            let about = match about {
                Some(("workItemId", v)) => format!(
                    r#"WorkItem <a href="/ui/workitems/{}">{}</a>"#,
                    url_encode(&v),
                    escape(&v)
                ),
                Some(("missionId", v)) => format!(
                    r#"Mission <a href="/ui/missions/{}">{}</a>"#,
                    url_encode(&v),
                    escape(&v)
                ),
                Some(("artifact", v)) => format!(
                    r#"artifact <a href="/ui/artifacts/{}">{}</a>"#,
                    url_encode(&v),
                    escape(&short(&v, 30))
                ),
                Some((field, v)) => format!("{field} {}", escape(&short(&v, 30))),
                None => String::new(),
            };
            let command = match &event.causation_command_id {
                Some(command) => format!(
                    r#"<a href="/v1/groups/{group_url}/commands/{}?agentId={}">{}</a>"#,
                    url_encode(command),
                    url_encode(id.as_str()),
                    escape(&short(command, 30))
                ),
                None => String::new(),
            };
            let _ = write!(
                body,
                r#"<tr><td><a href="/ui/groups/{group_url}/events?after={}&amp;limit=1">#{}</a></td><td>{}</td><td><code>{}</code></td><td>{about}</td><td>{command}</td></tr>"#,
                event.sequence.saturating_sub(1),
                event.sequence,
                escape(&event.appended_at),
                escape(&event.kind),
            );
        }
        body.push_str("</table>");
        if older.is_some() {
            let _ = write!(
                body,
                r#"<p class="muted">Older Events: <code>GET /v1/groups/{}/agents/{}/events?before={}</code></p>"#,
                escape(group.as_str()),
                escape(id.as_str()),
                older.unwrap_or_default()
            );
        }
    }
    body.push_str("<h2>Evidence it recorded</h2>");
    if reviewed.items.is_empty() {
        body.push_str(r#"<p id="reviewed">None you may see.</p>"#);
    } else {
        body.push_str(r#"<table id="reviewed"><tr><th>Evidence</th><th>WorkItem</th><th>criterion</th><th>outcome</th><th>method</th></tr>"#);
        for record in &reviewed.items {
            let evidence = &record.evidence;
            let work_item = evidence.work_item_id.as_str();
            let _ = write!(
                body,
                r#"<tr><td><code title="{id}">{}</code></td><td><a href="/ui/workitems/{}">{}</a></td><td>{}</td><td class="outcome-{outcome}">{outcome}</td><td>{}</td></tr>"#,
                escape(&short(&record.evidence_id.to_string(), 22)),
                url_encode(work_item),
                escape(work_item),
                escape(&evidence.criterion),
                escape(evidence.method.kind.as_str()),
                id = escape(&record.evidence_id.to_string()),
                outcome = evidence.result.outcome.as_str(),
            );
        }
        body.push_str("</table>");
    }
    body.push_str("<h2>Artifacts it produced</h2>");
    if produced.items.is_empty() {
        body.push_str(r#"<p id="artifacts">None you may see.</p>"#);
    } else {
        body.push_str(r#"<table id="artifacts"><tr><th>artifact</th><th>media type</th><th>WorkItem</th><th>published</th></tr>"#);
        for item in &produced.items {
            let artifact = item.artifact.to_string();
            let _ = write!(
                body,
                r#"<tr><td><a href="/ui/artifacts/{artifact}">{}</a></td><td>{}</td><td><a href="/ui/workitems/{}">{}</a></td><td>{}</td></tr>"#,
                escape(&short(&artifact, 30)),
                escape(&item.media_type),
                url_encode(&item.work_item_id),
                escape(&item.work_item_id),
                escape(&item.created_at),
            );
        }
        body.push_str("</table>");
    }
    Ok(Some(page(viewer, "Agent", &body)))
}
