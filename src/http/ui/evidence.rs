//! `GET /ui/evidence/{id}` (issue #50): one Evidence record as an auditor reads it: what it
//! judges (WorkItem, criterion, the artifacts it cites), how (method, its name and version,
//! the metrics), by whom, and where it stands in its correction chain: the records it
//! supersedes, back to the first, and the one that supersedes it, if any.

use std::fmt::Write as _;

use axum::extract::State;
use axum::http::HeaderMap;
use weft_api::ArtifactId;
use weft_api::evidence::Metric;
use weft_api::views::EvidenceRecord;
use weft_storage::EvidenceFilter;

use super::frame::{UiResult, Viewer, escape, page, short, url_encode};
use crate::http::error::HttpError;
use crate::http::params::RawPath;
use crate::http::state::AppState;

/// How far back the page follows `supersedes` (a longer chain says where it stops).
const CHAIN_STEPS: usize = 32;

fn link(id: &ArtifactId) -> String {
    format!(
        r#"<a href="/ui/evidence/{id}"><code title="{id}">{}</code></a>"#,
        escape(&short(&id.to_string(), 22))
    )
}

/// The page of one Evidence record the viewer may read (`not_found` otherwise).
pub(crate) async fn evidence(
    State(state): State<AppState>,
    id: RawPath,
    headers: HeaderMap,
) -> UiResult {
    let viewer = Viewer::of(&state, &headers).await?;
    let axum::extract::Path(id) =
        id.map_err(|_| HttpError::new(weft_api::ErrorCode::InvalidDigest, "not valid UTF-8"))?;
    let id = ArtifactId::parse(&id).map_err(HttpError::from)?;
    let store = state.store.evidence();
    let record = store.evidence(id, &viewer.reader).await?;
    let evidence = &record.evidence;
    let work_item = evidence.work_item_id.as_str();
    let mut body = format!(
        r#"<h1>Evidence <code id="evidence-id">{id}</code></h1>
<table id="facts"><tr><th scope="row">WorkItem</th><td><a href="/ui/workitems/{wi_url}">{wi}</a></td></tr><tr><th scope="row">Mission</th><td><a href="/ui/missions/{m_url}">{m}</a></td></tr><tr><th scope="row">criterion</th><td>{criterion}</td></tr><tr><th scope="row">outcome</th><td class="outcome-{outcome}" id="outcome">{outcome}</td></tr><tr><th scope="row">summary</th><td>{summary}</td></tr><tr><th scope="row">method</th><td id="method">{kind}: {name} {version}</td></tr><tr><th scope="row">producer</th><td><a href="/ui/search?q={producer_url}">{producer}</a></td></tr><tr><th scope="row">recorded</th><td>{at} (sequence {sequence})</td></tr></table>"#,
        id = escape(&id.to_string()),
        wi_url = url_encode(work_item),
        wi = escape(work_item),
        m_url = url_encode(evidence.mission_id.as_str()),
        m = escape(evidence.mission_id.as_str()),
        criterion = escape(&evidence.criterion),
        outcome = evidence.result.outcome.as_str(),
        summary = escape(&evidence.result.summary),
        kind = escape(evidence.method.kind.as_str()),
        name = escape(&evidence.method.name),
        version = escape(&evidence.method.version),
        producer_url = url_encode(evidence.producer.agent_id.as_str()),
        producer = escape(evidence.producer.agent_id.as_str()),
        at = escape(&evidence.timestamp.to_rfc3339()),
        sequence = record.sequence,
    );
    body.push_str("<h2>Metrics</h2>");
    if evidence.result.metrics.is_empty() {
        body.push_str(r#"<p id="metrics">None.</p>"#);
    } else {
        body.push_str(r#"<table id="metrics"><tr><th>metric</th><th>value</th></tr>"#);
        for (name, value) in &evidence.result.metrics {
            let value = match value {
                Metric::Number(n) => n.to_string(),
                Metric::Text(t) => t.clone(),
            };
            let _ = write!(
                body,
                "<tr><td>{}</td><td>{}</td></tr>",
                escape(name),
                escape(&value)
            );
        }
        body.push_str("</table>");
    }
    body.push_str("<h2>Artifacts it cites</h2>");
    if evidence.artifacts.is_empty() {
        body.push_str(r#"<p id="cites">None.</p>"#);
    } else {
        body.push_str(r#"<ul id="cites">"#);
        for artifact in &evidence.artifacts {
            let _ = write!(
                body,
                r#"<li><a href="/ui/artifacts/{artifact}">{}</a></li>"#,
                escape(&short(&artifact.to_string(), 30))
            );
        }
        body.push_str("</ul>");
    }
    body.push_str(&chain(&state, &viewer, &record).await?);
    let _ = write!(
        body,
        r#"<h2>Verify this yourself</h2><pre id="verify-yourself">weft criteria {wi}   # the verdict in force per criterion, from the records
weft evidence ls --work-item {wi}   # every record, with its signature checked</pre>"#,
        wi = escape(work_item),
    );
    Ok(page(
        &viewer,
        &format!("Evidence {}", short(&id.to_string(), 20)),
        &body,
    ))
}

/// The correction chain around `record`: the record that supersedes it (a reviewer's
/// correction is a new record, EVD-2), and those it supersedes, newest first.
async fn chain(state: &AppState, viewer: &Viewer, record: &EvidenceRecord) -> UiResult<String> {
    let store = state.store.evidence();
    let mut out = String::from(r#"<h2>Corrections</h2><ul id="chain">"#);
    // Its corrections, looked up by what they supersede (an index), however old it is.
    let newer = store
        .list_evidence(
            EvidenceFilter {
                supersedes: Some(record.evidence_id),
                limit: 100,
                ..EvidenceFilter::default()
            },
            &viewer.reader,
        )
        .await?;
    let superseded_by: Vec<&EvidenceRecord> = newer.items.iter().collect();
    match superseded_by.as_slice() {
        [] => out.push_str(r#"<li id="superseded-by">Not superseded: this record is in force for its producer.</li>"#),
        by => {
            for other in by {
                let _ = write!(
                    out,
                    r#"<li id="superseded-by" class="superseded">Superseded by {} ({}, {})</li>"#,
                    link(&other.evidence_id),
                    escape(other.evidence.producer.agent_id.as_str()),
                    other.evidence.result.outcome.as_str()
                );
            }
        }
    }
    let mut next = record.evidence.supersedes;
    let mut steps = 0;
    while let Some(older) = next {
        if steps == CHAIN_STEPS {
            out.push_str(r#"<li class="muted">… older corrections not shown.</li>"#);
            break;
        }
        steps += 1;
        match store.evidence(older, &viewer.reader).await {
            Ok(older_record) => {
                let _ = write!(
                    out,
                    r#"<li class="supersedes">Supersedes {} ({}, {})</li>"#,
                    link(&older),
                    escape(older_record.evidence.producer.agent_id.as_str()),
                    older_record.evidence.result.outcome.as_str()
                );
                next = older_record.evidence.supersedes;
            }
            Err(error) if error.code() == weft_api::ErrorCode::Disposed => {
                let _ = write!(
                    out,
                    r#"<li class="supersedes">Supersedes <code>{}</code> (disposed of by a retention policy)</li>"#,
                    escape(&short(&older.to_string(), 22))
                );
                break;
            }
            Err(_) => {
                let _ = write!(
                    out,
                    r#"<li class="supersedes">Supersedes <code>{}</code> (not visible to you)</li>"#,
                    escape(&short(&older.to_string(), 22))
                );
                break;
            }
        }
    }
    out.push_str("</ul>");
    Ok(out)
}
