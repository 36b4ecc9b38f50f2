//! The receiving side of Group delivery, as pure logic (DLV-2…DLV-5).
//!
//! The server promises at-least-once, in-order delivery per Group, but a network in between
//! can duplicate, delay and reorder. A [`Sequencer`] turns any such delivery into exactly-once,
//! in-order processing: it drops duplicates, buffers Events that arrive early, hands out only
//! the next Event after the cursor, checks each against the hash chain, and advances the
//! cursor only when the application says the Event was processed. The cursor is therefore
//! always the highest contiguous processed sequence (DLV-5), never past a gap (DLV-4).
//! A `withheld` placeholder (CTX-5) takes its place in the sequence like any Event; only its
//! links are checked, since its content is not there to hash.

use std::collections::BTreeMap;

use crate::event::{Delivered, EventHash};

/// Why a delivered Event cannot be accepted.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ChainError {
    #[error("event {sequence} belongs to group {found}, not {expected}")]
    WrongGroup {
        sequence: u64,
        expected: String,
        found: String,
    },
    #[error("event {sequence} does not continue the chain (prevHash or hash mismatch)")]
    Broken { sequence: u64 },
    #[error("two different events claim sequence {sequence}")]
    Conflict { sequence: u64 },
}

/// Most Events buffered ahead of the cursor before the oldest-needed one arrives.
pub const MAX_BUFFERED: usize = 100_000;

#[derive(Clone, Debug)]
pub struct Sequencer {
    group_id: String,
    cursor: u64,
    /// Hash of the Event at `cursor`, when known (always known after the first one).
    head: Option<EventHash>,
    buffer: BTreeMap<u64, Delivered>,
}

impl Sequencer {
    /// Resumes after `cursor`; `head` is the hash of the Event at `cursor` if the application
    /// kept it (`EventHash::GENESIS` for a cursor of 0).
    pub fn new(group_id: impl Into<String>, cursor: u64, head: Option<EventHash>) -> Self {
        let head = if cursor == 0 {
            Some(EventHash::GENESIS)
        } else {
            head
        };
        Self {
            group_id: group_id.into(),
            cursor,
            head,
            buffer: BTreeMap::new(),
        }
    }

    /// The highest contiguous processed sequence.
    pub fn cursor(&self) -> u64 {
        self.cursor
    }

    pub fn head(&self) -> Option<EventHash> {
        self.head
    }

    pub fn buffered(&self) -> usize {
        self.buffer.len()
    }

    /// Takes a delivered Event. Duplicates (by sequence and Event id) are dropped; Events
    /// beyond the next one wait in the buffer.
    pub fn offer(&mut self, event: impl Into<Delivered>) -> Result<(), ChainError> {
        let event: Delivered = event.into();
        let sequence = event.sequence();
        if let Some(whole) = event.event()
            && whole.group_id != self.group_id
        {
            return Err(ChainError::WrongGroup {
                sequence,
                expected: self.group_id.clone(),
                found: whole.group_id.clone(),
            });
        }
        if sequence <= self.cursor {
            return Ok(()); // already processed: a duplicate
        }
        if let Some(held) = self.buffer.get(&sequence) {
            let same_id = match (held.event(), event.event()) {
                (Some(held), Some(event)) => held.event_id == event.event_id,
                (None, None) => true,
                _ => false,
            };
            return if same_id && held.hash() == event.hash() {
                Ok(())
            } else {
                Err(ChainError::Conflict { sequence })
            };
        }
        if event
            .event()
            .is_some_and(|whole| whole.computed_hash() != whole.hash)
        {
            return Err(ChainError::Broken { sequence });
        }
        if self.buffer.len() >= MAX_BUFFERED && sequence > self.cursor + MAX_BUFFERED as u64 {
            return Ok(()); // too far ahead: it will be delivered again after the gap fills
        }
        self.buffer.insert(sequence, event);
        Ok(())
    }

    /// The Event (or placeholder) at `cursor + 1`, if it arrived and continues the chain. It
    /// stays the next one until [`Sequencer::processed`] is called for it.
    pub fn next_ready(&self) -> Result<Option<&Delivered>, ChainError> {
        let Some(event) = self.buffer.get(&(self.cursor + 1)) else {
            return Ok(None);
        };
        if let Some(head) = self.head
            && event.prev_hash() != head
        {
            return Err(ChainError::Broken {
                sequence: event.sequence(),
            });
        }
        Ok(Some(event))
    }

    /// Records that the application processed the next Event; advances the cursor.
    pub fn processed(&mut self, sequence: u64) {
        if sequence == self.cursor + 1
            && let Some(event) = self.buffer.remove(&sequence)
        {
            self.cursor = sequence;
            self.head = Some(event.hash());
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::value::RawValue;

    use super::*;
    use crate::event::Event;
    use crate::event::Unhashed;

    fn chain(n: u64) -> Vec<Event> {
        let mut prev = EventHash::GENESIS;
        (1..=n)
            .map(|sequence| {
                let event_id = format!("e-{sequence}");
                let payload = format!("{{\"n\":{sequence}}}");
                let appended_at = "2026-11-30T00:00:00.000000Z";
                let hash = Unhashed {
                    event_id: &event_id,
                    group_id: "g",
                    sequence,
                    kind: "test",
                    causation_command_id: None,
                    payload_json: &payload,
                    appended_at,
                    prev_hash: &prev,
                }
                .hash();
                let event = Event {
                    event_id,
                    group_id: "g".into(),
                    sequence,
                    kind: "test".into(),
                    causation_command_id: None,
                    payload: RawValue::from_string(payload).expect("json"),
                    appended_at: appended_at.into(),
                    prev_hash: prev,
                    hash,
                };
                prev = hash;
                event
            })
            .collect()
    }

    /// Delivers `deliveries` (indices into the chain, with repeats and in any order), lets the
    /// "application" process whatever is ready after each delivery, and returns what it saw.
    fn run(events: &[Event], deliveries: &[usize]) -> (Vec<u64>, Sequencer) {
        let mut sequencer = Sequencer::new("g", 0, None);
        let mut seen = Vec::new();
        for &index in deliveries {
            sequencer.offer(events[index].clone()).expect("valid chain");
            while let Some(event) = sequencer.next_ready().expect("chain holds") {
                let sequence = event.sequence();
                seen.push(sequence);
                sequencer.processed(sequence);
                // DLV-5: the durable cursor is the highest contiguous processed sequence.
                assert_eq!(sequencer.cursor(), sequence);
            }
            assert!(
                seen.iter().copied().eq(1..=sequencer.cursor()),
                "never past a gap (DLV-4)"
            );
        }
        (seen, sequencer)
    }

    proptest! {
        /// DLV-2, DLV-3, DLV-4, DLV-5: for any duplicated, delayed and reordered delivery that
        /// eventually includes every Event, the handler sees each exactly once, in order.
        #[test]
        fn any_delivery_is_processed_exactly_once_in_order(
            n in 1u64..40,
            extra in proptest::collection::vec(0usize..1000, 0..120),
            seed in any::<u64>(),
        ) {
            let events = chain(n);
            let mut deliveries: Vec<usize> = (0..n as usize).collect();
            deliveries.extend(extra.iter().map(|i| i % n as usize));
            // A deterministic shuffle from the seed.
            let mut state = seed | 1;
            for i in (1..deliveries.len()).rev() {
                state ^= state << 13; state ^= state >> 7; state ^= state << 17;
                deliveries.swap(i, (state % (i as u64 + 1)) as usize);
            }
            let (seen, sequencer) = run(&events, &deliveries);
            prop_assert_eq!(seen, (1..=n).collect::<Vec<_>>());
            prop_assert_eq!(sequencer.buffered(), 0);
        }
    }

    #[test]
    fn a_broken_chain_is_an_error_not_a_skip() {
        let mut events = chain(3);
        events[1].payload = RawValue::from_string("{\"n\":99}".into()).expect("json");
        let mut sequencer = Sequencer::new("g", 0, None);
        sequencer.offer(events[0].clone()).expect("fine");
        assert_eq!(
            sequencer.offer(events[1].clone()),
            Err(ChainError::Broken { sequence: 2 })
        );
        // A forged Event whose own hash is consistent but which does not follow the chain.
        let forged = chain(2).pop().map(|mut e| {
            e.prev_hash = EventHash([7; 32]);
            e.hash = e.computed_hash();
            e
        });
        let mut sequencer = Sequencer::new("g", 0, None);
        sequencer.offer(events[0].clone()).expect("fine");
        sequencer.processed(1);
        sequencer
            .offer(forged.expect("event"))
            .expect("self-consistent");
        assert_eq!(
            sequencer.next_ready().err(),
            Some(ChainError::Broken { sequence: 2 })
        );
    }

    /// CTX-5: a withheld placeholder takes its Event's place: the Sequencer moves the cursor
    /// over it and `verify_chain` checks its links; one whose hash was changed breaks the
    /// next Event's link, and one whose prevHash was changed breaks its own.
    #[test]
    fn withheld_placeholders_keep_the_chain_and_the_cursor() {
        use crate::event::{Withheld, verify_chain};
        let events = chain(4);
        let delivered: Vec<Delivered> = events
            .iter()
            .map(|e| match e.sequence {
                2 | 3 => Delivered::Withheld(Withheld::of(e)),
                _ => Delivered::Event(e.clone()),
            })
            .collect();
        assert_eq!(
            verify_chain(0, EventHash::GENESIS, &delivered),
            Ok((4, events[3].hash))
        );
        let mut sequencer = Sequencer::new("g", 0, None);
        for entry in delivered.iter().rev() {
            sequencer.offer(entry.clone()).expect("fine");
        }
        while let Some(next) = sequencer.next_ready().expect("chain holds") {
            let sequence = next.sequence();
            sequencer.processed(sequence);
        }
        assert_eq!(
            (sequencer.cursor(), sequencer.head()),
            (4, Some(events[3].hash))
        );
        let mut forged = delivered.clone();
        if let Delivered::Withheld(placeholder) = &mut forged[2] {
            placeholder.hash = EventHash([9; 32]);
        }
        assert!(verify_chain(0, EventHash::GENESIS, &forged).is_err());
        let mut forged = delivered;
        if let Delivered::Withheld(placeholder) = &mut forged[1] {
            placeholder.prev_hash = EventHash([9; 32]);
        }
        assert!(verify_chain(0, EventHash::GENESIS, &forged).is_err());
        let json = serde_json::to_value(&forged[1]).expect("json");
        assert_eq!(json.as_object().map(|o| o.len()), Some(4), "{json}");
        let back: Delivered = serde_json::from_value(json).expect("parses back");
        assert!(back.event().is_none());
    }

    #[test]
    fn a_cursor_never_moves_without_processing() {
        let events = chain(5);
        let mut sequencer = Sequencer::new("g", 0, None);
        for event in &events[1..] {
            sequencer.offer(event.clone()).expect("fine");
        }
        assert!(
            sequencer.next_ready().expect("ok").is_none(),
            "1 is missing"
        );
        assert_eq!(sequencer.cursor(), 0);
        sequencer.offer(events[0].clone()).expect("fine");
        assert_eq!(
            sequencer.next_ready().expect("ok").map(|e| e.sequence()),
            Some(1)
        );
        assert_eq!(sequencer.cursor(), 0, "not processed yet");
    }
}
