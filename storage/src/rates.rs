//! Token buckets per Agent, held in memory: how many session requests, and how many Commands,
//! one Agent may make per minute (issue #40: any member could otherwise flood its Group's log).
//!
//! A bucket holds up to a minute's worth of tokens and refills continuously, so an Agent may
//! burst a minute's allowance and then go on at the steady rate. A refusal is `rate_limited`
//! (429; the HTTP layer adds `Retry-After`). Buckets are taken only after the request's
//! signature checked out, so nobody can spend another Agent's tokens. Process-local on purpose,
//! like `limits.rs`: a restart starts every bucket full.

use std::collections::HashMap;
use std::sync::Mutex;

use chrono::{DateTime, Utc};
use weft_api::ErrorCode;

use crate::error::{Error, reject};

/// The tokens of one Agent's bucket at `at`.
#[derive(Clone, Copy, Debug)]
struct Bucket {
    tokens: f64,
    at: DateTime<Utc>,
}

/// One rate: `per_minute` of `what` per Agent (0: no limit).
#[derive(Debug)]
pub(crate) struct Rate {
    per_minute: u32,
    /// What is counted, for the refusal: "session requests", "Commands".
    what: &'static str,
    // A std Mutex: each critical section is a few map operations, with no `.await` inside.
    buckets: Mutex<HashMap<String, Bucket>>,
}

impl Rate {
    pub(crate) fn new(per_minute: u32, what: &'static str) -> Self {
        Self {
            per_minute,
            what,
            buckets: Mutex::default(),
        }
    }

    /// Takes one token of `agent` at `now`, or refuses with `rate_limited` (429).
    pub(crate) fn admit(&self, agent: &str, now: DateTime<Utc>) -> Result<(), Error> {
        let per_minute = f64::from(self.per_minute);
        if per_minute <= 0.0 {
            return Ok(());
        }
        // A poisoned lock only means another thread panicked mid-update of plain numbers.
        let mut buckets = self
            .buckets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let bucket = buckets.entry(agent.to_owned()).or_insert(Bucket {
            tokens: per_minute,
            at: now,
        });
        bucket.tokens = refilled(*bucket, now, per_minute);
        bucket.at = now;
        if bucket.tokens < 1.0 {
            return Err(reject(
                ErrorCode::RateLimited,
                format!(
                    "at most {} {} per agent per minute",
                    self.per_minute, self.what
                ),
            ));
        }
        bucket.tokens -= 1.0;
        // A bucket that has refilled carries no information: forget it, so the map holds only
        // the Agents seen within about the last minute.
        buckets.retain(|_, bucket| refilled(*bucket, now, per_minute) < per_minute);
        Ok(())
    }
}

/// The tokens of `bucket` at `now`, refilled at `per_minute` up to `per_minute`.
fn refilled(bucket: Bucket, now: DateTime<Utc>, per_minute: f64) -> f64 {
    let minutes = (now - bucket.at).num_milliseconds().max(0) as f64 / 60_000.0;
    (bucket.tokens + minutes * per_minute).min(per_minute)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_refill_with_time() {
        let rate = Rate::new(2, "session requests");
        let start = Utc::now();
        rate.admit("a", start).expect("1");
        rate.admit("a", start).expect("2");
        let refused = rate.admit("a", start).expect_err("3");
        assert_eq!(refused.code(), ErrorCode::RateLimited);
        rate.admit("b", start)
            .expect("another agent has its own bucket");
        rate.admit("a", start + chrono::Duration::seconds(30))
            .expect("one token back after half a minute");
    }
}
