//! `work.json`, the weft home's memory of the Execution Leases this agent holds (issue #12);
//! the owner's Commands that use it (`weft work progress`, `weft work token`) are in `owner`.
//!
//! `work.json` maps a WorkItem id to the lease the last answer about it showed this agent
//! holding: `{"workItems": {"wi-1": {"leaseId", "ownershipEpoch", "expiresAt"}}}`. Every
//! signed `weft work` Command and `weft work show` refresh the WorkItem's entry from the
//! server's answer: kept while the answer shows an Execution Lease held by this agent, dropped
//! otherwise (checkpoint, block, submit, expiry, another owner). `weft put` and `weft work
//! token` take the lease and ownership epoch from it when not told (`--lease`). It is a
//! convenience, never an authority: the server checks every lease it is shown (LSE-4/5), so
//! a stale entry only earns the server's `stale_lease`.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Context as _;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use weft_api::Id;
use weft_api::client::Client;

use crate::cli::keys::write_private;

const FILE: &str = "work.json";

/// One remembered Execution Lease.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(in crate::cli) struct LocalLease {
    pub(in crate::cli) lease_id: String,
    pub(in crate::cli) ownership_epoch: u64,
    pub(in crate::cli) expires_at: String,
    /// The contract's `leases.graceSeconds` (the offline journal's window, OFL-9).
    #[serde(default)]
    pub(in crate::cli) grace_seconds: u64,
}

/// `work.json`.
#[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct LocalState {
    pub(super) work_items: BTreeMap<String, LocalLease>,
}

impl LocalState {
    pub(super) fn load(home: &Path) -> anyhow::Result<Self> {
        let path = home.join(FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(error) => Err(error).with_context(|| format!("reading {}", path.display())),
        }
    }

    fn save(&self, home: &Path) -> anyhow::Result<()> {
        write_private(&home.join(FILE), &serde_json::to_vec_pretty(self)?)
    }

    /// Takes in what an answer about a WorkItem (a Command's `state`, or its view) says:
    /// remembers its Execution Lease if `agent_id` holds it, forgets it otherwise. Answers
    /// whether anything changed; an answer about no WorkItem changes nothing.
    pub(super) fn observe(&mut self, agent_id: &str, state: &Value) -> bool {
        let Some(work_item) = state["workItemId"].as_str() else {
            return false;
        };
        let lease = &state["lease"];
        let held = lease["kind"] == "execution" && lease["agentId"] == agent_id;
        let entry = match (
            held,
            lease["leaseId"].as_str(),
            lease["ownershipEpoch"].as_u64(),
        ) {
            (true, Some(lease_id), Some(ownership_epoch)) => Some(LocalLease {
                lease_id: lease_id.to_owned(),
                ownership_epoch,
                expires_at: lease["expiresAt"].as_str().unwrap_or_default().to_owned(),
                grace_seconds: state["contract"]["leases"]["graceSeconds"]
                    .as_u64()
                    .unwrap_or(0),
            }),
            _ => None,
        };
        let before = self.work_items.get(work_item).cloned();
        match &entry {
            Some(entry) => self.work_items.insert(work_item.to_owned(), entry.clone()),
            None => self.work_items.remove(work_item),
        };
        before != entry
    }
}

/// Refreshes `work.json` in `home` from an answer about a WorkItem. A failure to write is
/// reported, never fatal: the Command it follows was accepted.
pub(super) fn remember(home: &Path, agent_id: &str, state: &Value) {
    let outcome = LocalState::load(home).and_then(|mut local| {
        if local.observe(agent_id, state) {
            local.save(home)?;
        }
        Ok(())
    });
    if let Err(error) = outcome {
        eprintln!("warning: {FILE} not updated: {error:#}");
    }
}

/// Forgets what `work.json` in `home` remembers of `work_item` (its lease was refused
/// `stale_lease`). A failure to write is reported, never fatal.
pub(super) fn forget(home: &Path, work_item: &str) {
    let outcome = LocalState::load(home).and_then(|mut local| {
        if local.work_items.remove(work_item).is_some() {
            local.save(home)?;
        }
        Ok(())
    });
    if let Err(error) = outcome {
        eprintln!("warning: {FILE} not updated: {error:#}");
    }
}

/// The lease to publish under for `work_item` (`weft put`, `weft work token`): the one
/// `work.json` remembers, else the WorkItem's current Execution Lease when `agent_id` holds
/// it (one read of the WorkItem); `None` when neither names one.
pub(in crate::cli) async fn current(
    home: &Path,
    api: &Client,
    agent_id: &str,
    work_item: &Id,
) -> anyhow::Result<Option<LocalLease>> {
    if let Some(found) = LocalState::load(home)?
        .work_items
        .remove(work_item.as_str())
    {
        return Ok(Some(found));
    }
    let view = serde_json::to_value(api.work_item(work_item).await?)?;
    let mut local = LocalState::default();
    local.observe(agent_id, &view);
    Ok(local.work_items.remove(work_item.as_str()))
}
