//! The event log page's badge (issue #50): "chain verified from genesis to the signed
//! checkpoint at N". The server re-checks what `weft events verify` checks on an auditor's
//! machine: the checkpoint's signature with the authority key, then every Event's link and
//! content hash from the start of the online log (genesis, or the signed snapshot reference
//! the log was compacted to) up to the checkpoint, and says so. What it verified is kept per
//! Group (`state.rs`'s `ChainCache`), so a view re-checks only the Events appended since; a view checks
//! at most [`BUDGET`] Events and says how far it got, so one request cannot make the server
//! re-hash an unbounded log. The badge is the server's word: the page says how to check it
//! without trusting the server.

use weft_api::Id;
use weft_api::dsse::{CHECKPOINT_TYPE, SNAPSHOT_TYPE};
use weft_api::event::EventHash;
use weft_storage::Reader;

use super::frame::escape;
use crate::http::state::AppState;

/// The most Events one view re-checks.
const BUDGET: u64 = 50_000;

/// Events read per step.
const PAGE: u32 = 1000;

/// The badge for `group`, whose log the viewer may read (the caller checked).
pub(super) async fn badge(state: &AppState, group: &Id) -> String {
    match check(state, group).await {
        Ok(text) => format!(r#"<p class="good" id="chain" role="status">{text}</p>"#),
        Err(problem) => format!(
            r#"<p class="bad" id="chain" role="alert">Chain NOT verified: {}</p>"#,
            escape(&problem)
        ),
    }
}

async fn check(state: &AppState, group: &Id) -> Result<String, String> {
    // The Authority reads the whole log to check it; nothing of it is shown.
    let admin = Reader::Admin;
    let keys: Vec<_> = state
        .store
        .authority_keys()
        .into_iter()
        .map(|(_, key)| key)
        .collect();
    let delivery = state.store.delivery();
    let signed = delivery
        .checkpoint(group.clone(), &admin)
        .await
        .map_err(|e| e.to_string())?;
    let signed_ok = keys.iter().any(|key| {
        signed
            .envelope
            .verify(CHECKPOINT_TYPE, key)
            .ok()
            .and_then(|payload| serde_json::from_slice::<serde_json::Value>(payload.value()).ok())
            .is_some_and(|payload| {
                payload["sequence"].as_u64() == Some(signed.checkpoint.sequence)
                    && payload["hash"].as_str() == Some(signed.checkpoint.hash.to_string().as_str())
            })
    });
    if !signed_ok {
        return Err("the checkpoint is not signed by the authority key".to_owned());
    }
    let target = signed.checkpoint.sequence;
    // Where the online log starts: genesis, or the newest signed snapshot reference.
    let snapshots = state
        .store
        .compaction()
        .snapshots(group.clone(), &admin)
        .await
        .map_err(|e| e.to_string())?;
    let start = match snapshots.last() {
        None => (0, EventHash::GENESIS),
        Some(snapshot) => {
            let signed = keys.iter().any(|key| {
                snapshot
                    .envelope
                    .verify(SNAPSHOT_TYPE, key)
                    .ok()
                    .and_then(|payload| {
                        serde_json::from_slice::<weft_api::views::SnapshotReference>(
                            payload.value(),
                        )
                        .ok()
                    })
                    .as_ref()
                    == Some(&snapshot.reference)
            });
            if !signed {
                return Err(format!(
                    "snapshot {} is not signed by the authority key",
                    snapshot.reference.sequence
                ));
            }
            (
                snapshot.reference.sequence,
                snapshot.reference.event_chain_hash,
            )
        }
    };
    let from = if start.0 == 0 {
        "genesis".to_owned()
    } else {
        format!("the signed snapshot at {}", start.0)
    };
    let (mut sequence, mut head) = match state.chains.get(group.as_str()) {
        Some(known) if known.0 >= start.0 && known.0 <= target => known,
        _ => start,
    };
    let mut checked = 0;
    while sequence < target && checked < BUDGET {
        let page = delivery
            .events(group.clone(), sequence, PAGE, &admin)
            .await
            .map_err(|e| e.to_string())?;
        let page: Vec<_> = page
            .into_iter()
            .take_while(|event| event.sequence() <= target)
            .collect();
        if page.is_empty() {
            return Err(format!("the log ends at {sequence}, before the checkpoint"));
        }
        checked += page.len() as u64;
        (sequence, head) = weft_api::event::verify_chain(sequence, head, &page)?;
        state.chains.put(group.as_str(), (sequence, head));
    }
    if sequence < target {
        return Ok(format!(
            "Chain verified from {from} through sequence {sequence} of the signed checkpoint at {target} so far (the next view goes on)."
        ));
    }
    if head != signed.checkpoint.hash {
        return Err(format!(
            "the chain's hash at {target} is not the signed checkpoint's"
        ));
    }
    Ok(format!(
        "Chain verified from {from} to the signed checkpoint at {target}: every Event linked and hashed as its content says. Check it without trusting this server: <code>weft events verify --group {} --authority-key KEY</code>.",
        escape(group.as_str())
    ))
}
