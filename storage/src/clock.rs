//! Time, injected: the server uses the system clock, tests move a manual one.

use std::sync::Arc;
use std::sync::Mutex;

use chrono::{DateTime, Utc};

pub trait Clock: Send + Sync + std::fmt::Debug {
    fn now(&self) -> DateTime<Utc>;
}

#[derive(Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A clock that only moves when told to.
#[derive(Debug, Clone)]
pub struct ManualClock(Arc<Mutex<DateTime<Utc>>>);

impl ManualClock {
    pub fn new(start: DateTime<Utc>) -> Self {
        Self(Arc::new(Mutex::new(start)))
    }

    pub fn advance(&self, by: chrono::Duration) {
        // Short critical section, no await inside.
        let mut now = self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        *now += by;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// `instant` as the index keeps it: to the microsecond ([`format_instant`]), so that a row
/// held in memory compares as the same row read back.
pub(crate) fn stored(instant: DateTime<Utc>) -> DateTime<Utc> {
    use chrono::SubsecRound as _;
    instant.trunc_subsecs(6)
}

/// RFC 3339 UTC with microseconds: the one text form of instants in the index and the log
/// (`%Y-%m-%dT%H:%M:%S%.6fZ`, written without parsing a format string each time: a
/// renewal formats several, issue #44).
pub(crate) fn format_instant(instant: DateTime<Utc>) -> String {
    instant.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    proptest! {
        /// The text of an instant is the `%Y-%m-%dT%H:%M:%S%.6fZ` every stored instant has,
        /// for any instant from 1970 to 9999, leap seconds included.
        #[test]
        fn instants_keep_their_text_form(
            minute in 0i64..4_223_371_679,
            second in 0i64..60,
            nanos in 0u32..2_000_000_000,
        ) {
            // Past 10^9 nanoseconds is a leap second, which only a minute's last second has.
            let second = if nanos >= 1_000_000_000 { 59 } else { second };
            let instant = chrono::DateTime::from_timestamp(minute * 60 + second, nanos)
                .expect("in range");
            prop_assert_eq!(
                super::format_instant(instant),
                instant.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
            );
        }
    }
}
