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

/// What the page keeps of one history Event: its line in the timeline, the lease it moved
/// (id, holder, ownership epoch), the artifacts it submitted; bounded, whatever the payload.
pub(super) struct Told {
    pub(super) sequence: u64,
    kind: String,
    /// The timeline's line, HTML.
    pub(super) line: String,
    lease: Option<(String, Option<String>, u64)>,
    submitted: Option<Vec<String>>,
}

impl Told {
    pub(super) fn of(event: &Event) -> Self {
        let payload: serde_json::Value =
            serde_json::from_str(event.payload.get()).unwrap_or_default();
        let lease = payload["detail"]["leaseId"].as_str().map(|lease| {
            let holder = payload["owner"]
                .as_str()
                .or(payload["actor"]["agentId"].as_str())
                .map(str::to_owned);
            let epoch = payload["ownershipEpoch"].as_u64().unwrap_or_default();
            (lease.to_owned(), holder, epoch)
        });
        let submitted = (event.kind == "work.submitted").then(|| {
            payload["detail"]["artifacts"]
                .as_array()
                .map(|artifacts| {
                    artifacts
                        .iter()
                        .filter_map(|a| a.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default()
        });
        Self {
            sequence: event.sequence,
            kind: event.kind.clone(),
            line: story_line(&event.kind, &event.appended_at, &payload),
            lease,
            submitted,
        }
    }

    /// An Event of the history compacted into the Group's archive (no longer online).
    pub(super) fn archived(sequence: u64) -> Self {
        Self {
            sequence,
            kind: String::new(),
            line: "in the Group's archive (compacted; <code>weft events verify</code> reads it)"
                .to_owned(),
            lease: None,
            submitted: None,
        }
    }

    /// An Event of the history this reader may not see.
    pub(super) fn withheld(sequence: u64) -> Self {
        Self {
            sequence,
            kind: String::new(),
            line: "withheld".to_owned(),
            lease: None,
            submitted: None,
        }
    }
}

/// The artifacts of the newest `work.submitted` in the history (oldest first), if any.
pub(super) fn submitted(history: &[Told]) -> Option<Vec<String>> {
    history.iter().rev().find_map(|told| told.submitted.clone())
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
pub(super) fn leases(history: &[Told]) -> String {
    let mut order: Vec<String> = Vec::new();
    let mut leases: BTreeMap<String, LeaseStory> = BTreeMap::new();
    for told in history {
        let Some((lease, holder, epoch)) = &told.lease else {
            continue;
        };
        if !leases.contains_key(lease) {
            order.push(lease.clone());
        }
        let story = leases.entry(lease.clone()).or_default();
        if story.holder.is_none() {
            story.holder = holder.clone();
            story.epoch = *epoch;
        }
        story
            .events
            .push(format!("#{} {}", told.sequence, escape(&told.kind)));
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

/// A WorkItem Event as a line of its story: when, the Event, who acted (the Command's
/// signer; none for the Authority's own), and the state, owner and ownership epoch it left,
/// with a failure's or decline's reason.
fn story_line(kind: &str, appended_at: &str, payload: &serde_json::Value) -> String {
    let mut line = format!(
        r#"<time>{}</time> <code>{}</code>"#,
        escape(appended_at),
        escape(kind)
    );
    match payload["actor"]["agentId"].as_str() {
        Some(agent) => {
            let _ = write!(line, " by <strong>{}</strong>", escape(agent));
        }
        None => line.push_str(r#" <span class="muted">by the Authority</span>"#),
    }
    if let Some(state) = payload["state"].as_str() {
        let _ = write!(line, " · {}", escape(state));
    }
    if let Some(owner) = payload["owner"].as_str() {
        let _ = write!(
            line,
            " · owner {} (epoch {})",
            escape(owner),
            payload["ownershipEpoch"].as_u64().unwrap_or_default()
        );
    }
    let detail = &payload["detail"];
    for field in ["leaseId", "reason", "failure", "offerId"] {
        if let Some(value) = detail[field].as_str() {
            let _ = write!(line, " · {field} {}", escape(&short(value, 80)));
        }
    }
    line
}
