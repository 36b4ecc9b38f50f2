//! `weft worker --config worker.toml` (issue #47, DESIGN §13): the Worker's side of MWP §11.
//! Long because it is the one place where the runtime's state changes: offers, queue items,
//! slots, schedules and the offline flag, each step a short method.
//!
//! One task, the runtime, owns all decisions; everything slow runs beside it and reports back
//! on channels. At start it registers the Agent Card, opens one session per Group (a new
//! session revokes the leases of the last one, LSE-9, so nothing of a killed run stays
//! active), reconciles each Group's offline journal before anything else (OFL-5), deletes its
//! cursors and rebuilds every Group's queue by replaying the log (SCH-2, `queue.rs`). Then:
//! - **Offers** naming it go through admission control (`offers.rs`, the rule is
//!   `weft_api::worker::admission`, OFR-7…9): accepted with a commitment or declined with a
//!   structured reason. An accepted commitment (start window, completion, confidence,
//!   computation time) is the WorkItem's disclosed schedule (DIS-1), updated when it starts.
//! - **Scheduling**: the pure Scheduler (`weft_api::worker::scheduler`) places runnable
//!   WorkItems of all Groups into free slots by Group weight, Mission class and rank with
//!   aging, looking again when what it decides on changed or a second passed; its
//!   preemption rule asks a running item to checkpoint (`preemption.request`).
//! - **Execution**: each placement runs in its slot (`execution.rs`, `executor.rs`,
//!   `results.rs`).
//! - **Presence** every `presence_seconds` per Group, and soon after a schedule changes, with
//!   each Group's own schedules only (DIS-2); sessions renewed before they expire.
//! - **Offline**: a run that met an unreachable Authority marks the Worker offline: nothing
//!   new starts; every tick tries the Authority, and on reconnect the journals are reconciled
//!   before anything else.
//! - **A session gone for good** (401: replaced, expired, a Membership change) starts the
//!   runtime again as a restart does (`run`). What it keeps of each item is in `state.rs`.

mod config;
mod execution;
mod executor;
mod link;
mod offers;
mod queue;
mod results;
mod state;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use chrono::Utc;
use ed25519_dalek::SigningKey;
use serde_json::json;
use tokio::sync::{Mutex, mpsc, watch};
use weft_api::Id;
use weft_api::journal::{Journal, Rebase};
use weft_api::subscription::{Flow, Subscription};
use weft_api::work::CommandType;
use weft_api::work::WorkState;
use weft_api::work::contract::Level;
use weft_api::work::views::WorkItemView;
use weft_api::worker::admission::Capacity;
use weft_api::worker::card::{AgentCard, CapacityState, PresenceReport, Schedule};
use weft_api::worker::scheduler::{self, Fairness, Running, Waiting};

use config::WorkerConfig;
use execution::{Job, Outcome};
use link::Link;
use queue::GroupQueue;
use state::{Arrived, Finished, Item, Slot, fetch};

/// How often the runtime looks at its state when nothing arrives.
const TICK: Duration = Duration::from_millis(200);

/// Queued items of one (Group, Mission, urgency), as the Scheduler may be shown them.
type Bucket<'a> = Vec<(&'a String, &'a Item)>;

struct Runtime {
    config: WorkerConfig,
    key: Arc<SigningKey>,
    links: BTreeMap<String, Link>,
    queues: BTreeMap<String, GroupQueue>,
    journals: BTreeMap<String, Arc<Mutex<Journal>>>,
    items: BTreeMap<String, Item>,
    slots: BTreeMap<u32, Slot>,
    fairness: Fairness,
    decided: BTreeSet<String>,
    /// Views read when their offers were decided, until the WorkItem is queued here.
    views: BTreeMap<String, WorkItemView>,
    /// Each Mission's Organization priority class, once read.
    classes: BTreeMap<String, Level>,
    /// Something the Scheduler decides on changed since it last looked.
    changed: bool,
    last_look: Instant,
    /// WorkItems to look at again (a read that failed, a run the Authority ended): (Group, id).
    recheck: BTreeSet<(String, String)>,
    offline: bool,
    last_presence: Option<Instant>,
    /// DIS-1: the schedule disclosed for each accepted, unfinished WorkItem (by Group).
    schedules: BTreeMap<String, (String, Schedule)>,
    /// The schedule changed materially: report Presence as soon as the rate limit allows.
    disclose: bool,
    finished: (mpsc::Sender<Finished>, mpsc::Receiver<Finished>),
    /// Told when a Group's session is gone for good (replaced, expired, a Membership
    /// change: 401): the runtime starts again with new sessions.
    lost: mpsc::Sender<String>,
    /// Each Group's subscription task, ended with the runtime (held for its `Drop`).
    _subscriptions: Subscriptions,
}

/// Subscription tasks, ended when dropped: with the runtime, or when its start fails after
/// some were spawned.
#[derive(Default)]
struct Subscriptions(Vec<tokio::task::AbortHandle>);

impl Drop for Subscriptions {
    fn drop(&mut self) {
        for subscription in &self.0 {
            subscription.abort();
        }
    }
}

/// `weft worker --config FILE`: runs until interrupted. When a Group's session is gone for
/// good (replaced, expired while the Authority was away, ended by a Membership change), the
/// runtime starts again as after a restart (new sessions, journals reconciled first, queues
/// rebuilt from the log, executors left behind stopped): before, that Group's subscription
/// ended for good and the Worker stayed up, hearing nothing.
pub async fn run(config_path: &Path) -> anyhow::Result<()> {
    let stop = tokio::signal::ctrl_c();
    tokio::pin!(stop);
    let mut wait = Duration::from_secs(1);
    let mut lives = 0u64;
    loop {
        let began = Instant::now();
        let why = tokio::select! {
            ran = run_once(config_path) => match ran {
                Ok(why) => why,
                // The first start failing is the operator's to see (a wrong config, no
                // Authority); a later one is retried: another Group's work goes on after.
                Err(error) if lives == 0 => return Err(error),
                Err(error) => format!("starting again failed: {error:#}"),
            },
            _ = &mut stop => {
                tracing::info!("stopping: running WorkItems stay leased until their leases expire");
                return Ok(());
            }
        };
        lives += 1;
        if began.elapsed() > Duration::from_secs(60) {
            wait = Duration::from_secs(1);
        }
        tracing::warn!(
            "{why}; starting again in {} s with new sessions",
            wait.as_secs()
        );
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            _ = &mut stop => return Ok(()),
        }
        wait = (wait * 2).min(Duration::from_secs(30));
    }
}

/// One life of the runtime: `Ok(why)` when a session was lost and it must start again.
async fn run_once(config_path: &Path) -> anyhow::Result<String> {
    let config = WorkerConfig::load(config_path)?;
    let key = Arc::new(crate::keyfile::read(&config.key)?);
    std::fs::create_dir_all(&config.state_dir)
        .with_context(|| format!("creating {}", config.state_dir.display()))?;
    let (sender, mut arrivals) = mpsc::channel::<Arrived>(1024);
    let (lost, mut losses) = mpsc::channel::<String>(16);
    let mut runtime = Runtime::start(config, key, sender, lost).await?;
    let mut tick = tokio::time::interval(TICK);
    loop {
        tokio::select! {
            Some(arrived) = arrivals.recv() => {
                runtime.arrive(arrived);
                while let Ok(more) = arrivals.try_recv() {
                    runtime.arrive(more);
                }
            }
            Some(finished) = runtime.finished.1.recv() => runtime.finish(finished),
            Some(why) = losses.recv() => return Ok(why),
            _ = tick.tick() => {}
        }
        runtime.react().await;
    }
}

/// Whether `error` says the session itself is gone (401): nothing sent with it will be
/// accepted again.
fn session_gone(error: &weft_api::client::Error) -> bool {
    matches!(error, weft_api::client::Error::Api { status: 401, .. })
}

impl Runtime {
    async fn start(
        config: WorkerConfig,
        key: Arc<SigningKey>,
        events: mpsc::Sender<Arrived>,
        lost: mpsc::Sender<String>,
    ) -> anyhow::Result<Self> {
        let agent = Id::parse("agentId", &config.agent_id)?;
        executor::reap(&config.state_dir.join("slots"));
        // Checkpoints kept by an earlier life: its items are rebuilt without them.
        let _ = std::fs::remove_dir_all(executor::kept_checkpoints(&config.state_dir));
        let mut subscriptions = Subscriptions::default();
        let mut links = BTreeMap::new();
        let mut queues = BTreeMap::new();
        let mut journals = BTreeMap::new();
        for group in &config.groups {
            let group_id = Id::parse("group", &group.id)?;
            let link = Link::open(
                &config.authority,
                key.clone(),
                agent.clone(),
                group_id.clone(),
            )
            .await
            .with_context(|| format!("opening a session in {}", group.id))?;
            let dir = config.state_dir.join(&group.id);
            std::fs::create_dir_all(&dir)?;
            let mut journal = Journal::open(&dir.join("journal.jsonl"))?;
            // OFL-5: what was buffered offline goes before anything else.
            let reconciled = journal
                .reconcile(
                    &link.api,
                    Rebase {
                        key: &key,
                        session_epoch: link.session_epoch,
                        membership_epoch: link.membership_epoch,
                        issued_at: Utc::now().fixed_offset(),
                    },
                )
                .await;
            match reconciled {
                Ok(done) if done.refused.is_some() => {
                    tracing::warn!(
                        "{}: the journal stopped at a refusal: {:?}",
                        group.id,
                        done.refused
                    );
                    journal.discard()?;
                }
                Ok(_) => {}
                Err(error) => anyhow::bail!("reconciling {}'s journal: {error}", group.id),
            }
            // SCH-2: the queue is rebuilt by replay, never trusted from disk.
            let cursor = dir.join("cursor.json");
            let _ = std::fs::remove_file(&cursor);
            let subscription = Subscription::new(link.api.clone(), group_id.clone(), cursor);
            let sender = events.clone();
            let name = group.id.clone();
            let ended = lost.clone();
            let subscribed = tokio::spawn(async move {
                let result = subscription
                    .run(|event| {
                        let sender = sender.clone();
                        let arrived = Arrived {
                            group: name.clone(),
                            sequence: event.sequence,
                            kind: event.kind.clone(),
                            payload: event.payload.get().to_owned(),
                        };
                        async move {
                            sender.send(arrived).await.map_err(|e| e.to_string())?;
                            Ok(Flow::Continue)
                        }
                    })
                    .await;
                // Nothing of the Group is heard from here on: the runtime starts again (a
                // send fails only once it has ended anyway).
                let _ = ended
                    .send(format!("{name}: the subscription ended: {result:?}"))
                    .await;
            });
            subscriptions.0.push(subscribed.abort_handle());
            queues.insert(group.id.clone(), GroupQueue::new(agent.as_str()));
            journals.insert(group.id.clone(), Arc::new(Mutex::new(journal)));
            links.insert(group.id.clone(), link);
        }
        let card = AgentCard {
            agent_id: agent.clone(),
            version: config.card_version.clone(),
            capabilities: config.capabilities(),
            max_concurrency: config.slots,
            public_key: weft_api::client::card_key(&key),
            issued_at: Utc::now().fixed_offset(),
        };
        let first = links.values().next().context("no Group")?;
        // A restart within the card interval waits it out; the card is signed again, later.
        let mut card = card;
        for tries in 1.. {
            match first.api.put_card(&key, &card).await {
                Err(error)
                    if error.code() == Some(weft_api::ErrorCode::RateLimited) && tries < 5 =>
                {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    card.issued_at = Utc::now().fixed_offset();
                }
                answer => {
                    answer.context("registering the Agent Card")?;
                    break;
                }
            }
        }
        Ok(Self {
            config,
            key,
            links,
            queues,
            journals,
            items: BTreeMap::new(),
            slots: BTreeMap::new(),
            fairness: Fairness::default(),
            decided: BTreeSet::new(),
            recheck: BTreeSet::new(),
            changed: true,
            last_look: Instant::now(),
            views: BTreeMap::new(),
            classes: BTreeMap::new(),
            offline: false,
            last_presence: None,
            schedules: BTreeMap::new(),
            disclose: false,
            finished: mpsc::channel(64),
            lost,
            _subscriptions: subscriptions,
        })
    }

    fn arrive(&mut self, arrived: Arrived) {
        if let Some(queue) = self.queues.get_mut(&arrived.group) {
            queue.apply(arrived.sequence, &arrived.kind, &arrived.payload);
        }
    }

    fn finish(&mut self, finished: Finished) {
        if let Some(slot) = self.slots.remove(&finished.slot)
            && matches!(finished.outcome, Outcome::Submitted | Outcome::Failed(_))
        {
            // Done with: its checkpoint is kept no longer.
            let (dir, item) = (&self.config.state_dir, &finished.work_item);
            let _ = std::fs::remove_file(executor::kept_checkpoint(dir, &slot.group, item));
        }
        self.changed = true;
        self.schedules.remove(&finished.work_item);
        self.disclose = true;
        tracing::info!(work_item = %finished.work_item, "run ended: {:?}", finished.outcome);
        match finished.outcome {
            Outcome::Checkpointed { checkpoint } => {
                if let Some(item) = self.items.get_mut(&finished.work_item) {
                    item.checkpoint = checkpoint;
                }
            }
            Outcome::Offline { checkpoint } => {
                self.offline = true;
                if let Some(item) = self.items.get_mut(&finished.work_item) {
                    item.checkpoint = checkpoint;
                }
            }
            Outcome::Failed(why) => {
                tracing::warn!(work_item = %finished.work_item, "{why}");
                self.items.remove(&finished.work_item);
            }
            // The log decides what it is now: look again.
            Outcome::Lost(why) => {
                tracing::warn!(work_item = %finished.work_item, "{why}");
                if let Some(item) = self.items.remove(&finished.work_item) {
                    self.recheck.insert((item.group, finished.work_item));
                }
            }
            Outcome::Submitted => {
                self.items.remove(&finished.work_item);
            }
        }
    }

    async fn react(&mut self) {
        if self.offline {
            self.reconnect().await;
            return;
        }
        let before = (self.items.len(), self.slots.len());
        self.refresh_items().await;
        self.answer_offers().await;
        self.forward_preemptions();
        // The Scheduler looks again when what it decides on changed (an item came or went, a
        // slot freed, an eligibility changed) or a second passed (aging moves ranks).
        if before != (self.items.len(), self.slots.len())
            || self.last_look.elapsed() >= Duration::from_secs(1)
        {
            self.changed = true;
        }
        if self.changed {
            self.changed = false;
            self.last_look = Instant::now();
            self.preempt().await;
            self.schedule();
        }
        self.presence().await;
    }

    /// Tries the Authority; on an answer, reconciles every journal first (OFL-5).
    async fn reconnect(&mut self) {
        for (group, link) in &self.links {
            match link.api.current_session().await {
                Ok(_) => {}
                // The Authority answers, but the session expired while it was away: start
                // again with a new one (before, the Worker stayed offline for good).
                Err(error) if session_gone(&error) => {
                    let _ = self
                        .lost
                        .try_send(format!("{group}: the session is gone: {error}"));
                    return;
                }
                Err(_) => return,
            }
            let mut journal = self.journals[group].lock().await;
            let rebase = Rebase {
                key: &self.key,
                session_epoch: link.session_epoch,
                membership_epoch: link.membership_epoch,
                issued_at: Utc::now().fixed_offset(),
            };
            match journal.reconcile(&link.api, rebase).await {
                Ok(done) if done.refused.is_some() => {
                    tracing::warn!(
                        "{group}: the journal stopped at a refusal: {:?}",
                        done.refused
                    );
                    let _ = journal.discard();
                }
                Ok(_) => {}
                Err(error) => {
                    tracing::warn!("{group}: reconciling: {error}");
                    return;
                }
            }
        }
        tracing::info!("the Authority answers again; journals reconciled");
        self.offline = false;
    }

    /// Brings `items` in line with what the queues say.
    async fn refresh_items(&mut self) {
        let recheck = std::mem::take(&mut self.recheck);
        for (group, queue) in &mut self.queues {
            let mut touched = queue.take_touched();
            touched.extend(
                recheck
                    .iter()
                    .filter(|(g, _)| g == group)
                    .map(|(_, w)| w.clone()),
            );
            let moved = std::mem::take(&mut queue.moved);
            let link = &self.links[group];
            for work_item in touched {
                let queued = queue.mine_in(&work_item, WorkState::Queued);
                let running = self.slots.values().any(|s| s.work_item == work_item);
                if !queued {
                    if !running {
                        self.items.remove(&work_item);
                    }
                    continue;
                }
                if self.items.contains_key(&work_item) {
                    continue;
                }
                let cached = self.views.remove(&work_item);
                match fetch(link, &work_item, &self.config, cached, &mut self.classes).await {
                    Ok(item) => {
                        self.items.insert(work_item, item);
                    }
                    Err(error) => {
                        tracing::warn!("{work_item}: {error:#}; trying again");
                        self.recheck.insert((group.clone(), work_item));
                    }
                }
            }
            if moved {
                // A dependency may have been met, or an approval granted.
                for (id, item) in self.items.iter_mut().filter(|(_, i)| &i.group == group) {
                    if item.eligible && item.approved {
                        continue;
                    }
                    if let Ok(fresh) = fetch(link, id, &self.config, None, &mut self.classes).await
                    {
                        self.changed |=
                            item.eligible != fresh.eligible || item.approved != fresh.approved;
                        item.eligible = fresh.eligible;
                        item.approved = fresh.approved;
                    }
                }
            }
        }
    }

    /// Admission control on every undecided live offer (OFR-7…9, `offers.rs`).
    async fn answer_offers(&mut self) {
        let mut pending = Vec::new();
        for (group, queue) in &self.queues {
            for (work_item, offer) in &queue.offers {
                if !self.decided.contains(&offer.offer_id) {
                    pending.push((group.clone(), work_item.clone(), offer.offer_id.clone()));
                }
            }
        }
        if pending.is_empty() {
            return;
        }
        for answered in offers::answer(&self.links, pending, self.capacity()).await {
            if answered.decided {
                self.decided.insert(answered.offer_id);
            }
            // DIS-1: disclosed on acceptance, with the next Presence report; the view
            // spares reading the WorkItem again when it is queued.
            if let Some((schedule, view)) = answered.accepted {
                self.schedules
                    .insert(answered.work_item.clone(), (answered.group, schedule));
                self.views.insert(answered.work_item, view);
                self.disclose = true;
            }
        }
    }

    fn capacity(&self) -> Capacity {
        let queued = self
            .items
            .keys()
            .filter(|id| !self.slots.values().any(|s| &s.work_item == *id))
            .count();
        Capacity {
            slots: self.config.slots,
            running: self.slots.len() as u32,
            queued: queued as u32,
            max_queued: self.config.max_queued,
            executors: self
                .config
                .executors
                .iter()
                .map(|e| {
                    (
                        weft_api::work::contract::Capability {
                            id: e.capability.clone(),
                            version: e.version.clone(),
                        },
                        e.typical_seconds,
                    )
                })
                .collect(),
            allowed: self.config.permissions.clone(),
        }
    }

    /// A Coordinator's (or this Worker's) `preemption.request` reaches the executor (LSE-12).
    fn forward_preemptions(&self) {
        for slot in self.slots.values() {
            let requested = self.queues[&slot.group]
                .preemptions
                .contains(&slot.work_item);
            if requested && !*slot.preempt.borrow() {
                let _ = slot.preempt.send(true);
            }
        }
    }

    /// The Scheduler's own preemption rule (a starved Group, a far higher rank).
    async fn preempt(&mut self) {
        // The Scheduler's own preemption is for a full house only.
        if (self.slots.len() as u32) < self.config.slots {
            return;
        }
        let (waiting, running) = self.scheduler_view(1);
        let policy = self.config.policy();
        if let Some(victim) = scheduler::preemption(
            &policy,
            &self.config.shares(),
            &waiting,
            &running,
            self.config.slots,
            Utc::now(),
        ) && let Some(slot) = self.slots.values().find(|s| s.work_item == victim)
            && !self.queues[&slot.group].preemptions.contains(&victim)
            && !*slot.preempt.borrow()
        {
            let link = &self.links[&slot.group];
            if let Err(error) = link
                .send(
                    CommandType::PreemptionRequest,
                    json!({"workItemId": victim}),
                    None,
                )
                .await
            {
                tracing::warn!("{victim}: preemption.request refused: {error}");
            }
            let _ = slot.preempt.send(true);
        }
    }

    /// What the Scheduler is shown: the runnable queued items, at most `per_bucket` of each
    /// (Group, Mission, urgency), the best by the Scheduler's own order inside a bucket, plus
    /// any whose deadline presses, and the running ones. With `per_bucket` the number of free
    /// slots the Scheduler's choice is the one it would make over the whole queue, at a cost
    /// that does not grow with the queue.
    fn scheduler_view(&self, per_bucket: usize) -> (Vec<Waiting>, Vec<Running>) {
        let now = Utc::now();
        let running_ids: std::collections::HashSet<&str> =
            self.slots.values().map(|s| s.work_item.as_str()).collect();
        let pressing = now
            + chrono::Duration::seconds(
                i64::try_from(self.config.policy().aging_seconds).unwrap_or(i64::MAX / 2),
            );
        let mut buckets: BTreeMap<(&str, &str, Level), Bucket<'_>> = BTreeMap::new();
        for (id, item) in &self.items {
            let runnable = item.eligible
                && item.approved
                && item.executor.is_some()
                && item.deadline > now
                && !running_ids.contains(id.as_str());
            if runnable {
                buckets
                    .entry((&item.group, &item.mission, item.urgency))
                    .or_default()
                    .push((id, item));
            }
        }
        let mut waiting = Vec::new();
        for (_, mut bucket) in buckets {
            if bucket.len() > per_bucket {
                // The Scheduler's own order inside a bucket: rank (here the waited steps, the
                // pressing ones being kept anyway), then deadline, arrival, id.
                let aging = self.config.policy().aging_seconds.max(1);
                bucket.select_nth_unstable_by_key(per_bucket, |(id, item)| {
                    let waited = u64::try_from((now - item.since).num_seconds()).unwrap_or(0);
                    (
                        std::cmp::Reverse(waited / aging),
                        item.deadline,
                        item.since,
                        *id,
                    )
                });
                let (first, rest) = bucket.split_at(per_bucket);
                let urgent: Vec<(&String, &Item)> = rest
                    .iter()
                    .filter(|(_, item)| item.deadline < pressing)
                    .copied()
                    .collect();
                bucket = first.iter().copied().chain(urgent).collect();
            }
            waiting.extend(bucket.into_iter().map(|(id, item)| Waiting {
                work_item: id.clone(),
                group: item.group.clone(),
                mission: item.mission.clone(),
                priority_class: item.class,
                urgency: item.urgency,
                deadline: item.deadline,
                since: item.since,
                runnable: true,
            }));
        }
        let running = self
            .slots
            .iter()
            .map(|(slot, s)| Running {
                work_item: s.work_item.clone(),
                group: s.group.clone(),
                slot: *slot,
                rank: s.rank,
            })
            .collect();
        (waiting, running)
    }

    /// Places runnable items into free slots and starts them.
    fn schedule(&mut self) {
        let free: Vec<u32> = (1..=self.config.slots)
            .filter(|s| !self.slots.contains_key(s))
            .collect();
        if free.is_empty() {
            return;
        }
        let (waiting, running) = self.scheduler_view(free.len());
        let placements = scheduler::schedule(
            &self.config.policy(),
            &self.config.shares(),
            &mut self.fairness,
            &waiting,
            &running,
            &free,
            Utc::now(),
        );
        for placement in placements {
            let Some(item) = self.items.get_mut(&placement.work_item) else {
                continue;
            };
            let Some(executor) = item.executor.map(|i| self.config.executors[i].clone()) else {
                continue;
            };
            let Ok(work_item) = Id::parse("workItemId", &placement.work_item) else {
                continue;
            };
            // DIS-1: starting is a material change of the schedule.
            if let Some((_, schedule)) = self.schedules.get_mut(&placement.work_item) {
                let now = Utc::now().fixed_offset();
                let took = schedule.completion_at - schedule.start_to;
                schedule.start_from = now;
                schedule.start_to = now;
                schedule.completion_at = now + took;
                self.disclose = true;
            }
            let (preempt, preempt_rx) = watch::channel(false);
            let uid = self.config.slot_uid_base.map(|base| base + placement.slot);
            let job = Job {
                link: self.links[&placement.group].clone(),
                work_item,
                executor,
                slot_dir: self
                    .config
                    .state_dir
                    .join("slots")
                    .join(placement.slot.to_string()),
                uid,
                checkpoint: item.checkpoint.take(),
                card_version: self.config.card_version.clone(),
                preempt: preempt_rx,
                journal: self.journals[&placement.group].clone(),
                offline_grace: Duration::from_secs(self.config.offline_grace_seconds),
            };
            self.slots.insert(
                placement.slot,
                Slot {
                    work_item: placement.work_item.clone(),
                    group: placement.group.clone(),
                    rank: placement.rank,
                    preempt,
                    task: None,
                },
            );
            let done = self.finished.0.clone();
            let slot = placement.slot;
            let work_item = placement.work_item;
            let task = tokio::spawn(async move {
                let outcome = execution::run(job).await;
                let _ = done
                    .send(Finished {
                        slot,
                        work_item,
                        outcome,
                    })
                    .await;
            });
            if let Some(running) = self.slots.get_mut(&slot) {
                running.task = Some(task.abort_handle());
            }
        }
    }

    /// Presence in every Group (SCH-11) with its schedules (DIS-1: each Group sees only its
    /// own WorkItems, DIS-2), and session renewal.
    async fn presence(&mut self) {
        let every = Duration::from_secs(self.config.presence_seconds.max(2));
        let soonest = Duration::from_secs(2);
        let due = match self.last_presence {
            None => true,
            Some(at) => at.elapsed() >= every || self.disclose && at.elapsed() >= soonest,
        };
        if !due {
            return;
        }
        self.disclose = false;
        self.last_presence = Some(Instant::now());
        let free = self.config.slots - self.slots.len() as u32;
        let capacity = self.capacity();
        let state = if free > 0 {
            CapacityState::Available
        } else if capacity.queued + capacity.running >= capacity.max_queued {
            CapacityState::Saturated
        } else {
            CapacityState::Busy
        };
        for (group, link) in &mut self.links {
            if let Err(error) = link.renew_if_due(Utc::now()).await {
                tracing::warn!("{group}: renewing the session: {error}");
                if session_gone(&error) {
                    let _ = self
                        .lost
                        .try_send(format!("{group}: the session is gone: {error}"));
                }
            }
            let report = PresenceReport {
                free_slots: free,
                capacity_state: state,
                schedules: self
                    .schedules
                    .values()
                    .filter(|(g, _)| g == group)
                    .map(|(_, s)| s.clone())
                    .collect(),
            };
            if let Err(error) = link.api.report_presence(&link.group, &report).await {
                tracing::debug!("{group}: Presence: {error}");
            }
        }
    }
}
