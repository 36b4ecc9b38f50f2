//! Admission limits held in memory: how many uploads run (per Agent and in all), how many
//! bytes each Agent's running uploads have received, how many downloads of stored files are
//! open (per Agent and in all), and the per-Agent rates of logins and Commands (`rates.rs`).
//!
//! Downloads are counted because a reader of a stored file holds an open file and up to a few
//! MiB of windows read ahead for as long as its body is alive (`blobs/reading.rs`), and an
//! HTTP/2 client can keep many bodies alive without reading any: a stream whose flow-control
//! window it never opens stalls nothing on the socket, so the accept loop's write timeout does
//! not cut it. The caps bound what one Agent, and everyone together, can pin that way.
//!
//! These are process-local on purpose: they protect this process's descriptors, disk and
//! signature checks, and a restart starts them empty (an upload in flight is lost with the
//! process anyway). The durable half of the unpublished-bytes cap, what an Agent already has
//! stored but not published, is read from the index by the upload itself (`artifacts/upload.rs`):
//! the exact sum, or a bound kept here from the last exact sum and the Agent's upload total in
//! the index, so what it uploaded through other servers counts (`rows/agent_upload_totals.rs`).
//! Bytes still in flight are counted by the server receiving them only: an Agent uploading
//! through N servers at once may pass the cap by what is in flight on the others, once. A
//! server of a version before 42 still running over a migrated index adds nothing to the
//! totals: until it stops, what the Agent uploads through it counts only there.
//!
//! Every refusal here is a [`weft_api::Rejection`] with a 429 or 503 code, so a client is told
//! to come back later (the HTTP layer adds `Retry-After`) and never sees a 500.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};
use weft_api::ErrorCode;

use crate::error::{Error, reject};
use crate::rates::Rate;

/// The limits' settings (from [`crate::Options`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Settings {
    pub(crate) max_uploads_per_agent: usize,
    pub(crate) max_open_uploads: usize,
    pub(crate) max_unpublished_bytes: u64,
    pub(crate) logins_per_minute: u32,
    pub(crate) commands_per_minute: u32,
    /// Proposals one Group may hold open (not yet authorized); 0: no cap.
    pub(crate) max_open_proposals: u64,
    /// Chunks one resumable upload may take.
    pub(crate) max_upload_chunks: u64,
    pub(crate) max_downloads_per_agent: usize,
    pub(crate) max_downloads_per_group: usize,
    pub(crate) max_open_downloads: usize,
    /// How long a download's body may go without a poll before it is cut (`downloads.rs`).
    pub(crate) download_idle: std::time::Duration,
}

/// What one Agent has in flight.
#[derive(Debug, Default)]
struct AgentUse {
    uploads: usize,
    /// Bytes received so far by this Agent's running uploads (shared with their permits).
    in_flight_bytes: Arc<AtomicU64>,
}

#[derive(Debug, Default)]
struct State {
    open_uploads: usize,
    open_downloads: usize,
    /// Downloads each Agent has open; an Agent with none has no entry.
    downloads: HashMap<String, usize>,
    /// Downloads each Group's sessions have open; likewise.
    group_downloads: HashMap<String, usize>,
    agents: HashMap<String, AgentUse>,
    /// Each Agent's last exact uncited sum and its upload total read before it: with the
    /// total now, an upper bound of its uncited bytes, so the exact sum, a walk over all of
    /// the Agent's uploads, runs only near the cap.
    uncited_bounds: HashMap<String, UncitedBound>,
}

/// An Agent's exact uncited bytes when last summed, and what it had uploaded uncited in all
/// (`rows/agent_upload_totals.rs`) when read just before that sum. The total only grows, and
/// citations and the sweep only lower the exact value, so `exact + (total now - total)` is
/// an upper bound, whichever server took the uploads since (an upload committed between the
/// two reads is counted twice: a bound may only be too high).
#[derive(Debug, Default)]
struct UncitedBound {
    exact: u64,
    total: u64,
}

/// The engine's admission limits. Cheap to share (`Arc` inside).
#[derive(Clone, Debug)]
pub(crate) struct Limits {
    settings: Settings,
    // A std Mutex: every critical section is a few map operations, with no `.await` inside.
    state: Arc<Mutex<State>>,
    logins: Arc<Rate>,
    commands: Arc<Rate>,
}

/// One admitted upload. Dropping it (the upload ended, failed or was cancelled) frees its slot
/// and its in-flight bytes.
#[derive(Debug)]
pub(crate) struct Permit {
    limits: Limits,
    agent: Option<String>,
    in_flight_bytes: Arc<AtomicU64>,
    /// Bytes this upload added to `in_flight_bytes`.
    counted: AtomicU64,
    /// Unpublished bytes the Agent already had stored when the upload began.
    stored_unpublished: u64,
}

/// One admitted download of a stored file. Dropping it (with the body that carries it: the
/// read ended, failed, or its connection or stream went away) frees its slot.
#[derive(Debug)]
pub(crate) struct DownloadPermit {
    limits: Limits,
    agent: Option<String>,
    group: Option<String>,
}

impl DownloadPermit {
    /// How long the body carrying this slot may go without a poll (`downloads.rs`).
    pub(crate) fn idle(&self) -> std::time::Duration {
        self.limits.settings.download_idle
    }
}

/// The error a byte stream carries when its Agent went past the unpublished-bytes cap; the
/// blob layer turns it back into [`ErrorCode::UploadQuotaExceeded`].
#[derive(Debug, thiserror::Error)]
#[error("the unpublished-bytes cap of {0} bytes is reached")]
pub(crate) struct QuotaExceeded(pub(crate) u64);

impl Limits {
    pub(crate) fn new(settings: Settings) -> Self {
        Self {
            settings,
            state: Arc::default(),
            logins: Arc::new(Rate::new(settings.logins_per_minute, "session requests")),
            commands: Arc::new(Rate::new(settings.commands_per_minute, "Commands")),
        }
    }

    /// Whether Agents' uncited bytes are capped at all.
    pub(crate) fn caps_uncited(&self) -> bool {
        self.settings.max_unpublished_bytes != 0
    }

    /// An upper bound of `agent`'s uncited blob bytes to admit an upload with instead of the
    /// exact sum, given its upload total `total` (read now): only when no upload of up to
    /// `largest_upload` bytes could pass the cap with it (so the bound never refuses what the
    /// exact sum would admit). `Some(0)` when there is no cap.
    pub(crate) fn uncited_bound(
        &self,
        agent: &str,
        total: u64,
        largest_upload: u64,
    ) -> Option<u64> {
        let cap = self.settings.max_unpublished_bytes;
        if cap == 0 {
            return Some(0);
        }
        self.lock()
            .uncited_bounds
            .get(agent)
            .map(|entry| {
                entry
                    .exact
                    .saturating_add(total.saturating_sub(entry.total))
            })
            .filter(|bound| bound.saturating_add(largest_upload) < cap)
    }

    /// Keeps `agent`'s exact uncited sum just read, and its upload total read before it.
    pub(crate) fn set_uncited_bound(&self, agent: &str, exact: u64, total: u64) {
        self.lock()
            .uncited_bounds
            .insert(agent.to_owned(), UncitedBound { exact, total });
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Admits one upload, by `agent` (`None`: the operator, who has no per-Agent caps), or
    /// refuses it: `overloaded` (503) when the process has too many uploads open,
    /// `too_many_uploads` (429) when this Agent does, `upload_quota_exceeded` (429) when its
    /// stored unpublished bytes already reach the cap.
    pub(crate) fn admit_upload(
        &self,
        agent: Option<&str>,
        stored_unpublished: u64,
    ) -> Result<Permit, Error> {
        let mut state = self.lock();
        if state.open_uploads >= self.settings.max_open_uploads {
            return Err(reject(
                ErrorCode::Overloaded,
                "the server has too many uploads open; retry later",
            ));
        }
        let in_flight_bytes = match agent {
            None => Arc::default(),
            Some(agent) => {
                let entry = state.agents.entry(agent.to_owned()).or_default();
                if entry.uploads >= self.settings.max_uploads_per_agent {
                    return Err(reject(
                        ErrorCode::TooManyUploads,
                        format!(
                            "at most {} uploads per agent may run at once",
                            self.settings.max_uploads_per_agent
                        ),
                    ));
                }
                let in_flight = entry.in_flight_bytes.load(Ordering::Relaxed);
                if stored_unpublished.saturating_add(in_flight)
                    >= self.settings.max_unpublished_bytes
                    && self.settings.max_unpublished_bytes > 0
                {
                    return Err(quota_error(self.settings.max_unpublished_bytes));
                }
                entry.uploads += 1;
                Arc::clone(&entry.in_flight_bytes)
            }
        };
        state.open_uploads += 1;
        Ok(Permit {
            limits: self.clone(),
            agent: agent.map(str::to_owned),
            in_flight_bytes,
            counted: AtomicU64::new(0),
            stored_unpublished,
        })
    }

    /// Admits one download of a stored file by `agent` acting in `group` (`None`: the
    /// operator, who has neither cap), or refuses it: `overloaded` (503) when the process has
    /// too many open, `too_many_downloads` (429) when this Agent or its Group does. The
    /// Group's cap keeps one Group's Agents from taking every slot of the process; the
    /// Agent's keeps one Agent from taking all of its Group's.
    pub(crate) fn admit_download(
        &self,
        agent: Option<&str>,
        group: Option<&str>,
    ) -> Result<DownloadPermit, Error> {
        let mut state = self.lock();
        if state.open_downloads >= self.settings.max_open_downloads {
            return Err(reject(
                ErrorCode::Overloaded,
                "the server has too many downloads open; retry later",
            ));
        }
        let open = |map: &HashMap<String, usize>, key: Option<&str>| {
            key.and_then(|key| map.get(key)).copied().unwrap_or(0)
        };
        let (by_agent, by_group) = (
            open(&state.downloads, agent),
            open(&state.group_downloads, group),
        );
        if agent.is_some() && by_agent >= self.settings.max_downloads_per_agent {
            return Err(reject(
                ErrorCode::TooManyDownloads,
                format!(
                    "at most {} downloads of stored files per agent may be open at once; \
                     finish or close one",
                    self.settings.max_downloads_per_agent
                ),
            ));
        }
        if group.is_some() && by_group >= self.settings.max_downloads_per_group {
            return Err(reject(
                ErrorCode::TooManyDownloads,
                format!(
                    "at most {} downloads of stored files per group may be open at once; \
                     retry later",
                    self.settings.max_downloads_per_group
                ),
            ));
        }
        if let Some(agent) = agent {
            state.downloads.insert(agent.to_owned(), by_agent + 1);
        }
        if let Some(group) = group {
            state.group_downloads.insert(group.to_owned(), by_group + 1);
        }
        state.open_downloads += 1;
        Ok(DownloadPermit {
            limits: self.clone(),
            agent: agent.map(str::to_owned),
            group: group.map(str::to_owned),
        })
    }

    /// Takes one login token of `agent` at `now`, or refuses with `rate_limited` (429).
    /// Called only after the session request's signature checked out, so nobody can spend
    /// another Agent's tokens.
    pub(crate) fn admit_login(&self, agent: &str, now: DateTime<Utc>) -> Result<(), Error> {
        self.logins.admit(agent, now)
    }

    /// Proposals one Group may hold open (0: no cap).
    pub(crate) fn max_open_proposals(&self) -> u64 {
        self.settings.max_open_proposals
    }

    pub(crate) fn max_upload_chunks(&self) -> u64 {
        self.settings.max_upload_chunks.max(1)
    }

    /// Takes one Command token of `agent` at `now`, or refuses with `rate_limited` (429).
    /// Called only after the Command's signature and session checked out.
    pub(crate) fn admit_command(&self, agent: &str, now: DateTime<Utc>) -> Result<(), Error> {
        self.commands.admit(agent, now)
    }
}

fn quota_error(cap: u64) -> Error {
    reject(
        ErrorCode::UploadQuotaExceeded,
        format!(
            "this agent holds {cap} or more unpublished bytes; publish them or wait for the sweep"
        ),
    )
}

impl Permit {
    /// Counts `n` more received bytes; refuses once the Agent's stored unpublished bytes plus
    /// everything its running uploads received would pass the cap.
    pub(crate) fn count(&self, n: u64) -> Result<(), QuotaExceeded> {
        let cap = self.limits.settings.max_unpublished_bytes;
        if self.agent.is_none() || cap == 0 {
            return Ok(());
        }
        self.counted.fetch_add(n, Ordering::Relaxed);
        let in_flight = self.in_flight_bytes.fetch_add(n, Ordering::Relaxed) + n;
        if self.stored_unpublished.saturating_add(in_flight) > cap {
            return Err(QuotaExceeded(cap));
        }
        Ok(())
    }

    /// `body` with every chunk counted as it arrives ([`Permit::count`]): a chunk that
    /// passes the cap fails the stream, which the upload answers `upload_quota_exceeded`.
    pub(crate) fn metered<'a, S>(
        &'a self,
        body: S,
    ) -> impl futures::Stream<Item = Result<bytes::Bytes, std::io::Error>> + Send + 'a
    where
        S: futures::Stream<Item = Result<bytes::Bytes, std::io::Error>> + Send + 'a,
    {
        futures::StreamExt::map(body, move |chunk| {
            let chunk = chunk?;
            self.count(chunk.len() as u64)
                .map_err(std::io::Error::other)?;
            Ok(chunk)
        })
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.in_flight_bytes
            .fetch_sub(self.counted.load(Ordering::Relaxed), Ordering::Relaxed);
        let mut state = self.limits.lock();
        state.open_uploads = state.open_uploads.saturating_sub(1);
        if let Some(agent) = &self.agent
            && let Some(entry) = state.agents.get_mut(agent)
        {
            entry.uploads = entry.uploads.saturating_sub(1);
            if entry.uploads == 0 {
                state.agents.remove(agent);
            }
        }
    }
}

impl Drop for DownloadPermit {
    fn drop(&mut self) {
        let mut state = self.limits.lock();
        state.open_downloads = state.open_downloads.saturating_sub(1);
        let state = &mut *state;
        for (map, key) in [
            (&mut state.downloads, &self.agent),
            (&mut state.group_downloads, &self.group),
        ] {
            if let Some(key) = key
                && let Some(open) = map.get_mut(key)
            {
                *open = open.saturating_sub(1);
                if *open == 0 {
                    map.remove(key);
                }
            }
        }
    }
}

/// Turns a [`QuotaExceeded`] carried in a body stream's `io::Error` back into its refusal.
pub(crate) fn quota_from_io(error: &std::io::Error) -> Option<Error> {
    error
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<QuotaExceeded>())
        .map(|QuotaExceeded(cap)| quota_error(*cap))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits::new(Settings {
            max_uploads_per_agent: 2,
            max_open_uploads: 3,
            max_unpublished_bytes: 100,
            logins_per_minute: 2,
            commands_per_minute: 0,
            max_open_proposals: 0,
            max_upload_chunks: 1,
            max_downloads_per_agent: 2,
            max_downloads_per_group: 3,
            max_open_downloads: 4,
            download_idle: std::time::Duration::from_secs(30),
        })
    }

    /// Issue #15: the uncited-bytes bound stands in for the exact sum only while no upload
    /// could reach the cap with it, and grows with the Agent's upload total (whichever
    /// server took the uploads) until the exact sum is read again.
    #[test]
    fn the_uncited_bound_is_used_only_far_below_the_cap() {
        let limits = limits();
        assert_eq!(
            limits.uncited_bound("a", 0, 10),
            None,
            "nothing known: read the sum"
        );
        limits.set_uncited_bound("a", 40, 1000);
        assert_eq!(limits.uncited_bound("a", 1000, 10), Some(40));
        assert_eq!(
            limits.uncited_bound("a", 1045, 10),
            Some(85),
            "45 bytes uploaded since, through any server"
        );
        assert_eq!(
            limits.uncited_bound("a", 1045, 15),
            None,
            "an upload of 15 could reach the cap of 100: read the exact sum"
        );
        limits.set_uncited_bound("a", 5, 1045);
        assert_eq!(limits.uncited_bound("a", 1045, 15), Some(5));
        assert_eq!(limits.uncited_bound("b", 1, 1), None, "no bound is made up");
        let unlimited = Limits::new(Settings {
            max_unpublished_bytes: 0,
            ..limits.settings
        });
        assert_eq!(
            unlimited.uncited_bound("a", 0, u64::MAX),
            Some(0),
            "no cap: no sum"
        );
    }

    #[test]
    fn uploads_are_capped_per_agent_then_in_all() {
        let limits = limits();
        let a1 = limits.admit_upload(Some("a"), 0).expect("first");
        let _a2 = limits.admit_upload(Some("a"), 0).expect("second");
        let refused = limits.admit_upload(Some("a"), 0).expect_err("third");
        assert_eq!(refused.code(), ErrorCode::TooManyUploads);
        let _b1 = limits.admit_upload(Some("b"), 0).expect("another agent");
        let refused = limits.admit_upload(None, 0).expect_err("process full");
        assert_eq!(refused.code(), ErrorCode::Overloaded);
        drop(a1);
        limits.admit_upload(Some("a"), 0).expect("a slot came back");
    }

    /// Stop 37: downloads are capped per Agent, per Group, then in all; the operator has
    /// only the process cap, a dropped permit gives its slot back, and an Agent or Group
    /// with none open keeps no entry.
    #[test]
    fn downloads_are_capped_per_agent_per_group_then_in_all() {
        let limits = limits();
        let a1 = limits.admit_download(Some("a"), Some("g")).expect("first");
        let a2 = limits.admit_download(Some("a"), Some("g")).expect("second");
        let refused = limits
            .admit_download(Some("a"), Some("g"))
            .expect_err("third of the Agent");
        assert_eq!(refused.code(), ErrorCode::TooManyDownloads);
        let b1 = limits
            .admit_download(Some("b"), Some("g"))
            .expect("another agent");
        let refused = limits
            .admit_download(Some("c"), Some("g"))
            .expect_err("fourth of the Group");
        assert_eq!(refused.code(), ErrorCode::TooManyDownloads);
        let other = limits
            .admit_download(Some("c"), Some("h"))
            .expect("another Group has room");
        let refused = limits.admit_download(None, None).expect_err("process full");
        assert_eq!(refused.code(), ErrorCode::Overloaded);
        let refused = limits
            .admit_download(Some("d"), Some("i"))
            .expect_err("process full");
        assert_eq!(
            refused.code(),
            ErrorCode::Overloaded,
            "the process cap comes first"
        );
        drop(a1);
        let a3 = limits
            .admit_download(Some("a"), Some("g"))
            .expect("a slot came back");
        drop((a2, a3, b1, other));
        let state = limits.lock();
        assert_eq!(state.open_downloads, 0);
        assert!(state.downloads.is_empty(), "{:?}", state.downloads);
        assert!(
            state.group_downloads.is_empty(),
            "{:?}",
            state.group_downloads
        );
        drop(state);
        let _uploads = [
            limits
                .admit_upload(Some("a"), 0)
                .expect("uploads are counted apart"),
            limits
                .admit_upload(Some("a"), 0)
                .expect("uploads are counted apart"),
        ];
        let _d = limits
            .admit_download(Some("a"), Some("g"))
            .expect("downloads are counted apart");
    }

    #[test]
    fn running_uploads_share_the_unpublished_cap() {
        let limits = limits();
        let first = limits.admit_upload(Some("a"), 40).expect("admitted");
        first.count(50).expect("90 of 100");
        let second = limits.admit_upload(Some("a"), 40).expect("admitted");
        assert!(second.count(20).is_err(), "40 stored + 70 in flight > 100");
        drop(first);
        drop(second);
        let refused = limits
            .admit_upload(Some("a"), 100)
            .expect_err("stored at the cap");
        assert_eq!(refused.code(), ErrorCode::UploadQuotaExceeded);
    }
}
