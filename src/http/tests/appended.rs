//! An Event's `appendedAt` does not go back along its Group's chain: a server whose clock is
//! behind the one that appended before it (several servers), or a clock stepped back, stamps
//! its Event with its predecessor's instant, within the 5-minute clock margin; a predecessor
//! further ahead came from a wrong clock and is not carried on (`storage/src/events.rs`,
//! `stamp`).

use chrono::Duration;

use super::harness::*;

backends! {
    async fn appended_at_does_not_go_back_along_a_chain(kind: Kind) {
        let h = harness(kind).await;
        let worker = h.agent("w1", "g1", &["worker"]).await;
        let x = h.put(&worker, "g1", b"x", &[]).await;
        let before = h.events_of(&worker, "artifact.published").await;
        let at = before[0]["appendedAt"].as_str().expect("appendedAt").to_owned();
        // The next append's server reads a time two minutes behind.
        h.clock.advance(Duration::minutes(-2));
        h.put(&worker, "g1", b"y", &[x]).await;
        let after = h.events_of(&worker, "artifact.published").await;
        assert_eq!(after.len(), 2, "{kind:?}");
        assert_eq!(after[1]["appendedAt"], at.as_str(), "{kind:?}: stamped as its predecessor");
        // Once the clock passes the predecessor again, Events carry their own time.
        h.clock.advance(Duration::minutes(3));
        h.put(&worker, "g1", b"z", &[]).await;
        let events = h.get_json(&worker, "/v1/groups/g1/events?limit=1000").await;
        let stamps: Vec<String> = events["events"]
            .as_array()
            .expect("events")
            .iter()
            .map(|e| e["appendedAt"].as_str().expect("appendedAt").to_owned())
            .collect();
        assert!(stamps.windows(2).all(|w| w[0] <= w[1]), "{kind:?}: {stamps:?}");
        let last = stamps.last().expect("an Event").clone();
        assert!(last > at, "{kind:?}: {stamps:?}");
        // A predecessor more than the margin ahead is not carried on: the wrong clock's
        // time would pin every later Event.
        h.clock.advance(Duration::hours(-1));
        h.put(&worker, "g1", b"w", &[]).await;
        let events = h.events_of(&worker, "artifact.published").await;
        let newest = events.last().expect("an Event")["appendedAt"].as_str().expect("at").to_owned();
        assert!(newest < last, "{kind:?}: {newest} carries {last} on");
    }
}
