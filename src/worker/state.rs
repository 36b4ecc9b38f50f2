//! What the runtime (`mod.rs`) keeps of each WorkItem, slot and arrival, and how a queued
//! WorkItem is read into what the Scheduler needs: plain data, which the runtime alone
//! changes.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use tokio::sync::watch;
use weft_api::Id;
use weft_api::work::contract::Level;
use weft_api::work::views::WorkItemView;

use super::config::WorkerConfig;
use super::execution::Outcome;
use super::link::Link;

/// A WorkItem this Worker owns and has not finished.
pub(super) struct Item {
    pub(super) group: String,
    pub(super) mission: String,
    pub(super) class: Level,
    pub(super) urgency: Level,
    pub(super) deadline: DateTime<Utc>,
    pub(super) since: DateTime<Utc>,
    pub(super) eligible: bool,
    pub(super) approved: bool,
    pub(super) checkpoint: Option<std::path::PathBuf>,
    pub(super) executor: Option<usize>,
}

pub(super) struct Slot {
    pub(super) work_item: String,
    pub(super) group: String,
    pub(super) rank: u64,
    pub(super) preempt: watch::Sender<bool>,
    /// The run's task: ended with the runtime (its executor with it, `kill_on_drop`).
    pub(super) task: Option<tokio::task::AbortHandle>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

pub(super) struct Finished {
    pub(super) slot: u32,
    pub(super) work_item: String,
    pub(super) outcome: Outcome,
}

/// One Group's event, as the subscription hands it over.
pub(super) struct Arrived {
    pub(super) group: String,
    pub(super) sequence: u64,
    pub(super) kind: String,
    pub(super) payload: String,
}

/// What the Scheduler needs of a queued WorkItem: its view (`cached` from its offer, else
/// read) and its Mission's priority class (read once per Mission).
pub(super) async fn fetch(
    link: &Link,
    work_item: &str,
    config: &WorkerConfig,
    cached: Option<WorkItemView>,
    classes: &mut BTreeMap<String, Level>,
) -> anyhow::Result<Item> {
    let id = Id::parse("workItemId", work_item)?;
    let view = match cached {
        Some(view) => view,
        None => link.api.work_item(&id).await?,
    };
    let class = match classes.get(&view.mission_id) {
        Some(class) => *class,
        None => {
            let class = link.api.scheduling(&id).await?.priority_class;
            classes.insert(view.mission_id.clone(), class);
            class
        }
    };
    let wanted = &view.contract.required_capabilities;
    let executor = config.executors.iter().position(|e| {
        wanted.is_empty()
            || wanted
                .iter()
                .any(|c| c.id == e.capability && c.version == e.version)
    });
    Ok(Item {
        group: view.group_id.clone(),
        mission: view.mission_id.clone(),
        class,
        urgency: view.contract.urgency,
        deadline: view.contract.deadline.to_utc(),
        since: Utc::now(),
        eligible: view.eligible,
        approved: !view.contract.needs_approval() || view.approval_granted,
        checkpoint: None,
        executor,
    })
}
