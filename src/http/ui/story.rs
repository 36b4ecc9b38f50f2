//! A WorkItem's story, the sections of its page that answer an auditor's questions (issue
//! #50): who was offered it and what they said (offers), under which leases it was worked
//! (every lease its history names, with its holder and epoch), which artifact was submitted
//! and which was a draft, and every Evidence record with the superseded ones marked. Each is
//! built from what `work.rs` already read: the WorkItem view, its history's Events, its
//! artifacts and its Evidence.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use weft_api::Event;
use weft_api::views::EvidenceRecord;
use weft_api::work::views::OfferView;

use super::frame::{escape, short, url_encode};

/// A history Event's payload as JSON (`Null` when it does not parse).
pub(super) fn payload(event: &Event) -> serde_json::Value {
    serde_json::from_str(event.payload.get()).unwrap_or_default()
}

/// The artifacts of the newest `work.submitted` in the history (oldest first), if any.
pub(super) fn submitted(history: &[Event]) -> Option<Vec<String>> {
    let newest = history
        .iter()
        .rev()
        .find(|event| event.kind == "work.submitted")?;
    let payload = payload(newest);
    Some(
        payload["detail"]["artifacts"]
            .as_array()
            .map(|artifacts| {
                artifacts
                    .iter()
                    .filter_map(|a| a.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default(),
    )
}

/// Whether an artifact was submitted, a draft (published under the WorkItem, not in its newest
/// submission), or neither yet (nothing submitted).
pub(super) fn role(submitted: Option<&[String]>, artifact: &str) -> &'static str {
    match submitted {
        Some(list) if list.iter().any(|a| a == artifact) => "submitted",
        Some(_) => "draft",
        None => "not submitted yet",
    }
}

/// The offers table: who was offered the WorkItem, until when, what became of the offer,
/// and each structured decline.
pub(super) fn offers(offers: &[OfferView]) -> String {
    if offers.is_empty() {
        return r#"<h2>Offers</h2><p id="offers">None.</p>"#.to_owned();
    }
    let mut out = String::from(
        r#"<h2>Offers</h2><table id="offers"><tr><th>offer</th><th>candidates</th><th>status</th><th>expires</th><th>contract</th><th>declined</th></tr>"#,
    );
    for offer in offers {
        let declined: Vec<String> = offer
            .declined
            .iter()
            .map(|(agent, reason)| {
                let reason = reason["reason"]
                    .as_str()
                    .map(str::to_owned)
                    .unwrap_or_else(|| reason.to_string());
                format!("{}: {}", escape(agent), escape(&short(&reason, 80)))
            })
            .collect();
        let _ = write!(
            out,
            "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>revision {}</td><td>{}</td></tr>",
            escape(&offer.offer_id),
            offer
                .candidates
                .iter()
                .map(|c| format!(
                    r#"<a href="/ui/search?q={}">{}</a>"#,
                    url_encode(c),
                    escape(c)
                ))
                .collect::<Vec<_>>()
                .join(", "),
            escape(&offer.status),
            escape(&offer.expires_at),
            offer.contract_revision,
            declined.join("; "),
        );
    }
    out.push_str("</table>");
    out
}

/// One lease as the history tells it.
#[derive(Default)]
struct LeaseStory {
    holder: Option<String>,
    epoch: u64,
    events: Vec<String>,
}

/// Every lease the history names (an Event's `detail.leaseId`), in the order first named,
/// with who held it, its ownership epoch and the Events that moved it.
pub(super) fn leases(history: &[Event]) -> String {
    let mut order: Vec<String> = Vec::new();
    let mut leases: BTreeMap<String, LeaseStory> = BTreeMap::new();
    for event in history {
        let payload = payload(event);
        let Some(lease) = payload["detail"]["leaseId"].as_str() else {
            continue;
        };
        if !leases.contains_key(lease) {
            order.push(lease.to_owned());
        }
        let story = leases.entry(lease.to_owned()).or_default();
        if story.holder.is_none() {
            story.holder = payload["owner"]
                .as_str()
                .or(payload["actor"]["agentId"].as_str())
                .map(str::to_owned);
            story.epoch = payload["ownershipEpoch"].as_u64().unwrap_or_default();
        }
        story
            .events
            .push(format!("#{} {}", event.sequence, escape(&event.kind)));
    }
    if order.is_empty() {
        return r#"<h2>Leases</h2><p id="leases">None yet.</p>"#.to_owned();
    }
    let mut out = String::from(
        r#"<h2>Leases</h2><table id="leases"><tr><th>lease</th><th>holder</th><th>ownership epoch</th><th>Events</th></tr>"#,
    );
    for lease in &order {
        let story = &leases[lease];
        let _ = write!(
            out,
            "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(lease),
            escape(story.holder.as_deref().unwrap_or("-")),
            story.epoch,
            story.events.join(", "),
        );
    }
    out.push_str("</table>");
    out
}

/// Every Evidence record of the WorkItem, newest first, a superseded one marked with the
/// record that supersedes it.
pub(super) fn evidence(records: &[EvidenceRecord]) -> String {
    if records.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        r#"<h2>All Evidence</h2><table id="evidence"><tr><th>Evidence</th><th>criterion</th><th>outcome</th><th>by</th><th>method</th><th>standing</th></tr>"#,
    );
    for record in records {
        let by = records
            .iter()
            .find(|other| other.evidence.supersedes == Some(record.evidence_id));
        let id = record.evidence_id.to_string();
        let standing = match by {
            Some(other) => format!(
                r#"<span class="superseded">superseded by <a href="/ui/evidence/{0}">{1}</a></span>"#,
                other.evidence_id,
                escape(&short(&other.evidence_id.to_string(), 22))
            ),
            None => "in force for its producer".to_owned(),
        };
        let _ = write!(
            out,
            r#"<tr><td><a href="/ui/evidence/{id}"><code title="{id}">{}</code></a></td><td>{}</td><td class="outcome-{outcome}">{outcome}</td><td>{}</td><td>{} {} {}</td><td>{standing}</td></tr>"#,
            escape(&short(&id, 22)),
            escape(&record.evidence.criterion),
            escape(record.evidence.producer.agent_id.as_str()),
            escape(record.evidence.method.kind.as_str()),
            escape(&record.evidence.method.name),
            escape(&record.evidence.method.version),
            outcome = record.evidence.result.outcome.as_str(),
        );
    }
    out.push_str("</table>");
    out
}
