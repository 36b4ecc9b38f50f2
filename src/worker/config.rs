//! `worker.toml`: who the Worker is, where its Authority is, the Groups it joins with their
//! weights and slot quotas, its slots, its executors (one command line per capability) and
//! its scheduling policy. Unknown keys are refused, so a misspelt setting is an error, not a
//! silent default.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use serde::Deserialize;
use weft_api::Id;
use weft_api::work::contract::{Capability, Permissions};
use weft_api::worker::card::MAX_CONCURRENCY;
use weft_api::worker::scheduler::{GroupShare, Policy};

/// The whole file.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct WorkerConfig {
    /// The Authority's base URL.
    pub(super) authority: String,
    pub(super) agent_id: String,
    /// The agent key file (`weft keygen`'s `agent.key`), relative to this file.
    pub(super) key: PathBuf,
    /// Where the Worker keeps its local projections, cursors, journal and slot directories,
    /// relative to this file.
    pub(super) state_dir: PathBuf,
    /// The card version it registers (signed payloads claim it).
    #[serde(default = "default_card_version")]
    pub(super) card_version: String,
    /// Execution slots, numbered 1..=slots (the card's `maxConcurrency`).
    pub(super) slots: u32,
    /// Accepted and not finished, at most (admission declines `capacity` past it).
    #[serde(default = "default_max_queued")]
    pub(super) max_queued: u32,
    /// Seconds between Presence reports.
    #[serde(default = "default_presence_seconds")]
    pub(super) presence_seconds: u64,
    /// When the Authority cannot be reached, running reversible work continues this long
    /// (OFL-3), never past its lease's grace.
    #[serde(default = "default_grace_seconds")]
    pub(super) offline_grace_seconds: u64,
    /// Run each slot's executor as uid `slot_uid_base + slot` (when the Worker runs as root):
    /// another slot's files and process cannot be read.
    #[serde(default)]
    pub(super) slot_uid_base: Option<u32>,
    #[serde(default)]
    pub(super) scheduling: Scheduling,
    /// What executors may be allowed to use (`*` allows all).
    #[serde(default = "allow_all")]
    pub(super) permissions: Permissions,
    #[serde(rename = "group")]
    pub(super) groups: Vec<GroupConfig>,
    #[serde(rename = "executor")]
    pub(super) executors: Vec<ExecutorConfig>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Scheduling {
    pub(super) aging_seconds: Option<u64>,
    /// Mission weights per Organization priority class, low → critical.
    pub(super) class_weights: Option<[u32; 4]>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct GroupConfig {
    pub(super) id: String,
    #[serde(default = "one")]
    pub(super) weight: u32,
    /// At most this many slots at once for this Group.
    pub(super) max_slots: Option<u32>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ExecutorConfig {
    pub(super) capability: String,
    pub(super) version: String,
    /// The command line: program and arguments, run in the slot's working directory.
    pub(super) command: Vec<String>,
    /// About how long one run takes (admission's estimate).
    #[serde(default = "default_typical")]
    pub(super) typical_seconds: u64,
    /// Environment variables the executor gets besides the protocol's (nothing else is
    /// inherited).
    #[serde(default)]
    pub(super) env: std::collections::BTreeMap<String, String>,
    /// CPU seconds and address space (bytes) the platform enforces on the executor.
    pub(super) cpu_seconds: Option<u64>,
    pub(super) memory_bytes: Option<u64>,
}

fn default_card_version() -> String {
    "1".into()
}
fn default_max_queued() -> u32 {
    64
}
fn default_presence_seconds() -> u64 {
    10
}
fn default_grace_seconds() -> u64 {
    120
}
fn default_typical() -> u64 {
    30
}
fn one() -> u32 {
    1
}
fn allow_all() -> Permissions {
    Permissions {
        tools: vec!["*".into()],
        data: vec!["*".into()],
        operations: vec!["*".into()],
    }
}

impl WorkerConfig {
    /// Reads and checks `path`; relative paths in it are resolved against its directory.
    pub(super) fn load(path: &Path) -> anyhow::Result<Self> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        let mut config: Self =
            toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
        let base = path.parent().unwrap_or(Path::new("."));
        config.key = base.join(&config.key);
        config.state_dir = base.join(&config.state_dir);
        config.check()?;
        Ok(config)
    }

    fn check(&self) -> anyhow::Result<()> {
        Id::parse("agentId", &self.agent_id)?;
        if !(1..=MAX_CONCURRENCY).contains(&self.slots) {
            bail!("slots must be 1..={MAX_CONCURRENCY}");
        }
        if self.groups.is_empty() {
            bail!("name at least one [[group]]");
        }
        for (i, group) in self.groups.iter().enumerate() {
            Id::parse("group.id", &group.id)?;
            if group.weight == 0 || group.weight > 1000 {
                bail!("group {}: weight must be 1..=1000", group.id);
            }
            if self.groups[..i].iter().any(|g| g.id == group.id) {
                bail!("group {} is listed twice", group.id);
            }
        }
        if let Some(base) = self.slot_uid_base {
            // Every slot's uid (and gid, the same) is one of its own: no system uid or group
            // (below 1000: `shadow`, daemons `clear_slot` would stop), never the Worker's, never
            // -1 (which `chown` reads as "unchanged").
            let last = base.checked_add(self.slots).filter(|last| *last < u32::MAX);
            let own = rustix::process::getuid().as_raw();
            if base < 1000 || last.is_none() || (base..=last.unwrap_or(u32::MAX)).contains(&own) {
                bail!(
                    "slot_uid_base must be 1000 or more, end below 4294967295 and not cover the Worker's own uid {own}"
                );
            }
        }
        if self.executors.is_empty() {
            bail!("name at least one [[executor]]");
        }
        for executor in &self.executors {
            if executor.command.is_empty() {
                bail!("executor {}: command is empty", executor.capability);
            }
        }
        Ok(())
    }

    pub(super) fn capabilities(&self) -> Vec<Capability> {
        self.executors
            .iter()
            .map(|e| Capability {
                id: e.capability.clone(),
                version: e.version.clone(),
            })
            .collect()
    }

    pub(super) fn policy(&self) -> Policy {
        let default = Policy::default();
        Policy {
            aging_seconds: self
                .scheduling
                .aging_seconds
                .unwrap_or(default.aging_seconds),
            class_weights: self
                .scheduling
                .class_weights
                .unwrap_or(default.class_weights),
        }
    }

    pub(super) fn shares(&self) -> Vec<GroupShare> {
        self.groups
            .iter()
            .map(|g| GroupShare {
                group: g.id.clone(),
                weight: g.weight,
                max_slots: g.max_slots,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
authority = "http://127.0.0.1:7070"
agent_id = "w1"
key = "w1.key"
state_dir = "state"
slots = 2
[[group]]
id = "g1"
[[executor]]
capability = "cap.x"
version = "1"
command = ["true"]
"#;

    fn load(text: &str) -> anyhow::Result<WorkerConfig> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("worker.toml");
        std::fs::write(&path, text)?;
        WorkerConfig::load(&path)
    }

    /// A misspelt key, a bad slot count, a Group twice, a weight of 0 and an empty command
    /// are each refused; relative paths are read against the file's directory.
    #[test]
    fn worker_toml_is_checked_whole() {
        let config = load(GOOD).expect("the good file loads");
        assert!(config.key.ends_with("w1.key") && config.key.is_absolute());
        for (what, bad) in [
            (
                "unknown key",
                GOOD.replace("slots = 2", "slots = 2\nslot = 3"),
            ),
            ("no slots", GOOD.replace("slots = 2", "slots = 0")),
            ("too many slots", GOOD.replace("slots = 2", "slots = 257")),
            (
                "a Group twice",
                GOOD.replace(
                    "[[group]]\nid = \"g1\"",
                    "[[group]]\nid = \"g1\"\n[[group]]\nid = \"g1\"",
                ),
            ),
            (
                "weight 0",
                GOOD.replace("id = \"g1\"", "id = \"g1\"\nweight = 0"),
            ),
            (
                "empty command",
                GOOD.replace("command = [\"true\"]", "command = []"),
            ),
            (
                "bad agent id",
                GOOD.replace("agent_id = \"w1\"", "agent_id = \"\""),
            ),
            // Slot uids: never system ones, never past u32, never the Worker's own.
            (
                "system uids",
                GOOD.replace("slots = 2", "slots = 2\nslot_uid_base = 41"),
            ),
            (
                "slot uids past u32",
                GOOD.replace("slots = 2", "slots = 2\nslot_uid_base = 4294967295"),
            ),
            (
                "the Worker's own uid",
                GOOD.replace(
                    "slots = 2",
                    &format!(
                        "slots = 2\nslot_uid_base = {}",
                        rustix::process::getuid().as_raw()
                    ),
                ),
            ),
        ] {
            assert!(load(&bad).is_err(), "{what} was accepted");
        }
    }
}
