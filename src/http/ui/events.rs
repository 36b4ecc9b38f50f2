//! The Group's event log as a timeline: `?type=` keeps one Event type (or a prefix such as
//! `work.`), `?after=` pages by sequence, and each Event shows its hash and a link to the
//! Event its `prevHash` names, so an auditor can walk the chain by hand. A Mission-scoped
//! member sees `withheld` placeholders for other Missions' Events, as the API gives them.

use std::collections::HashMap;
use std::fmt::Write as _;

use axum::extract::{Query, State};
use axum::http::HeaderMap;
use weft_api::event::Delivered;

use super::frame::{UiResult, Viewer, escape, page, short, url_encode};
use crate::http::params::{RawPath, path_id};
use crate::http::state::AppState;

const PAGE: u32 = 100;

/// `GET /ui/groups/{group_id}/events?type=…&after=N&limit=L`.
pub(crate) async fn events(
    State(state): State<AppState>,
    group: RawPath,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> UiResult {
    let viewer = Viewer::of(&state, &headers).await?;
    let group = path_id("groupId", group)?;
    let after: u64 = query
        .get("after")
        .and_then(|a| a.parse().ok())
        .unwrap_or(0)
        .min(i64::MAX as u64);
    let limit: u32 = query
        .get("limit")
        .and_then(|l| l.parse().ok())
        .unwrap_or(PAGE)
        .clamp(1, 1000);
    let kind = query
        .get("type")
        .map(|t| t.trim().to_owned())
        .unwrap_or_default();
    // `order=newest` (issue #50): the page that ends at `before` (default: the head), newest
    // first; the log is read forwards as always, the page only turned round.
    let newest_first = query.get("order").is_some_and(|o| o == "newest");
    let after = if newest_first {
        let head = state
            .store
            .delivery()
            .checkpoint(group.clone(), &viewer.reader)
            .await?
            .checkpoint
            .sequence;
        let before: u64 = query
            .get("before")
            .and_then(|b| b.parse().ok())
            .unwrap_or(u64::MAX)
            .min(head + 1);
        before.saturating_sub(1).saturating_sub(u64::from(limit))
    } else {
        after
    };
    let mut delivered = state
        .store
        .delivery()
        .events(group.clone(), after, limit, &viewer.reader)
        .await?;
    if newest_first {
        delivered.reverse();
    }
    let group_url = url_encode(group.as_str());
    let type_url = url_encode(&kind);
    let mut body = format!(
        r#"<h1>Event log of Group <code>{group}</code></h1>
<form method="get" action="/ui/groups/{group_url}/events"><label for="type">Event type (or prefix, e.g. <code>work.</code>)</label> <input id="type" name="type" value="{kind}"> <label for="after">after sequence</label> <input id="after" name="after" type="number" min="0" value="{after}"> <label><input type="checkbox" name="order" value="newest"{newest}> newest first</label> <button type="submit">Filter</button></form>
{badge}
<ol class="timeline" id="events">"#,
        badge = super::chain::badge(&state, &group).await,
        group = escape(group.as_str()),
        kind = escape(&kind),
        newest = if newest_first { " checked" } else { "" },
    );
    let mut last = after;
    let mut shown = 0;
    for entry in &delivered {
        let (sequence, event_kind, prev_hash, hash, when, withheld) = match entry {
            Delivered::Event(event) => (
                event.sequence,
                event.kind.as_str(),
                event.prev_hash,
                event.hash,
                event.appended_at.as_str(),
                false,
            ),
            Delivered::Withheld(placeholder) => (
                placeholder.sequence,
                placeholder.kind.as_str(),
                placeholder.prev_hash,
                placeholder.hash,
                "",
                true,
            ),
        };
        last = sequence;
        if !kind.is_empty() && !event_kind.starts_with(kind.as_str()) {
            continue;
        }
        shown += 1;
        let prev = if sequence > 1 {
            format!(
                r#"<a href="/ui/groups/{group_url}/events?after={}&amp;limit=1" title="{prev_hash}">{}</a>"#,
                sequence - 2,
                escape(&short(&prev_hash.to_string(), 24))
            )
        } else {
            "genesis".to_owned()
        };
        let parsed: Option<serde_json::Value> = match entry {
            Delivered::Event(event) => serde_json::from_str(event.payload.get()).ok(),
            Delivered::Withheld(_) => None,
        };
        let who = parsed
            .as_ref()
            .and_then(actor_of)
            .map_or_else(String::new, |agent| {
                format!(
                    r#" by <a class="actor" href="/ui/search?q={}">{}</a>"#,
                    url_encode(agent),
                    escape(agent)
                )
            });
        let detail = match entry {
            Delivered::Event(event) => format!(
                r#"<details><summary>payload</summary><pre class="payload">{}</pre></details>"#,
                escape(&short(
                    &parsed
                        .as_ref()
                        .and_then(|value| serde_json::to_string_pretty(value).ok())
                        .unwrap_or_else(|| event.payload.get().to_owned()),
                    8000
                ))
            ),
            Delivered::Withheld(_) => {
                r#"<p class="muted">withheld: another Mission's Event</p>"#.to_owned()
            }
        };
        let _ = write!(
            body,
            r#"<li id="e{sequence}" data-type="{kind_attr}"><strong>#{sequence}</strong> <code>{kind_text}</code>{who} {when}<br><span class="muted">hash</span> <a href="/ui/groups/{group_url}/events?after={before}&amp;limit=1" title="{hash}">{hash_short}</a> · <span class="muted">prevHash</span> {prev}{detail}</li>"#,
            kind_attr = escape(event_kind),
            kind_text = escape(event_kind),
            when = if withheld {
                String::new()
            } else {
                escape(when)
            },
            before = sequence - 1,
            hash_short = escape(&short(&hash.to_string(), 24)),
        );
    }
    body.push_str("</ol>");
    if shown == 0 {
        body.push_str(r#"<p id="no-events">No Event here matches.</p>"#);
    }
    if newest_first {
        if after > 0 {
            let _ = write!(
                body,
                r#"<p><a id="next-page" href="/ui/groups/{group_url}/events?order=newest&amp;before={}&amp;type={type_url}&amp;limit={limit}">Earlier Events</a></p>"#,
                after + 1
            );
        }
    } else if delivered.len() as u32 == limit {
        let _ = write!(
            body,
            r#"<p><a id="next-page" href="/ui/groups/{group_url}/events?after={last}&amp;type={type_url}&amp;limit={limit}">Later Events</a></p>"#
        );
    }
    if after > 0 && !newest_first {
        let _ = write!(
            body,
            r#"<p><a href="/ui/groups/{group_url}/events?type={type_url}">From the start</a></p>"#
        );
    }
    Ok(page(&viewer, &format!("Events of {}", group), &body))
}

/// Who an Event says acted: the signer of the Command that caused it (`actor`, issue #50),
/// else the producer of a published artifact or recorded Evidence, else the Agent a session
/// or key Event is about. `None`: the Authority's own Events (expiry, revocation).
fn actor_of(payload: &serde_json::Value) -> Option<&str> {
    payload["actor"]["agentId"]
        .as_str()
        .or_else(|| payload["producer"].as_str())
        .or_else(|| payload["agentId"].as_str())
}
