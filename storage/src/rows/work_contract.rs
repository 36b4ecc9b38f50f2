//! A WorkItem's contract as its row holds it: parsed, and the text it was read from.
//!
//! Every Command on a WorkItem loads its row, and a contract is the row's largest value (one
//! to a few KiB of JSON). It changes only at `work.authorize` and `work.revise_contract`, so
//! most loads read a text already parsed: [`Contract::read`] keeps the newest parse of each
//! WorkItem's contract in a small process-wide map and reuses it when the text read is the
//! same, byte for byte (the parse is a pure function of the text, so a reuse cannot differ
//! from a fresh parse, on any engine or server). A save writes the text it was read from
//! unless the contract was replaced ([`Contract::new`]).
//!
//! The map holds at most [`KEPT_BYTES`] of contract text (the parses take a few times that),
//! and no text over [`KEPT_LARGEST`]; past the bound, it starts again empty (the old entries
//! are dropped after the lock is released).

use std::borrow::Cow;
use std::collections::HashMap;
use std::ops::Deref;
use std::sync::{Arc, LazyLock, Mutex};

use weft_api::work::contract::WorkContract;

use super::{from_json, to_json};
use crate::error::Error;

/// At most this much contract text is kept parsed (bytes).
pub(crate) const KEPT_BYTES: usize = 8 << 20;

/// A contract text longer than this is parsed at each read, never kept (bytes).
pub(crate) const KEPT_LARGEST: usize = 256 << 10;

/// A contract and, when it came from a row, that row's text.
#[derive(Clone, Debug)]
pub(crate) struct Contract {
    parsed: Arc<WorkContract>,
    text: Option<Arc<str>>,
}

impl Deref for Contract {
    type Target = WorkContract;

    fn deref(&self) -> &WorkContract {
        &self.parsed
    }
}

impl Contract {
    /// A contract not read from a row (a new or revised one): a save serialises it.
    pub(crate) fn new(contract: WorkContract) -> Self {
        Self {
            parsed: Arc::new(contract),
            text: None,
        }
    }

    /// WorkItem `work_item_id`'s contract from its row's `text`: the kept parse when the text
    /// is the one it was parsed from, else a fresh parse (kept for the next read).
    pub(crate) fn read(work_item_id: &str, text: String) -> Result<Self, Error> {
        if let Some((kept_text, parsed)) = kept().get(work_item_id)
            && **kept_text == *text
        {
            return Ok(Self {
                parsed: Arc::clone(parsed),
                text: Some(Arc::clone(kept_text)),
            });
        }
        let parsed = Arc::new(from_json::<WorkContract>(&text)?);
        let text: Arc<str> = Arc::from(text);
        if text.len() <= KEPT_LARGEST {
            let dropped = kept().insert(work_item_id, Arc::clone(&text), Arc::clone(&parsed));
            drop(dropped);
        }
        Ok(Self {
            parsed,
            text: Some(text),
        })
    }

    /// The text a save writes: the one read, or the contract serialised.
    pub(crate) fn text(&self) -> Result<Cow<'_, str>, Error> {
        match &self.text {
            Some(text) => Ok(Cow::Borrowed(text)),
            None => Ok(Cow::Owned(to_json(&*self.parsed)?)),
        }
    }
}

#[derive(Default)]
struct Kept {
    by_work_item: HashMap<String, (Arc<str>, Arc<WorkContract>)>,
    bytes: usize,
}

impl Kept {
    fn get(&self, work_item_id: &str) -> Option<&(Arc<str>, Arc<WorkContract>)> {
        self.by_work_item.get(work_item_id)
    }

    /// Keeps `text` and its parse for `work_item_id`; answers what it let go, for the caller
    /// to drop once the lock is released.
    #[must_use]
    fn insert(
        &mut self,
        work_item_id: &str,
        text: Arc<str>,
        parsed: Arc<WorkContract>,
    ) -> HashMap<String, (Arc<str>, Arc<WorkContract>)> {
        let mut dropped = HashMap::new();
        if self.bytes + text.len() > KEPT_BYTES {
            dropped = std::mem::take(&mut self.by_work_item);
            self.bytes = 0;
        }
        self.bytes += text.len();
        if let Some((old, _)) = self
            .by_work_item
            .insert(work_item_id.to_owned(), (text, parsed))
        {
            self.bytes -= old.len();
        }
        dropped
    }
}

fn kept() -> std::sync::MutexGuard<'static, Kept> {
    static KEPT: LazyLock<Mutex<Kept>> = LazyLock::new(Mutex::default);
    // A panic while holding the lock leaves a map whose every entry is a text and its own
    // parse.
    KEPT.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rows::work_items::sample_contract;

    #[test]
    fn a_text_read_again_reuses_its_parse_and_another_text_is_parsed_afresh() -> Result<(), Error> {
        let first = to_json(&sample_contract("first"))?;
        let a = Contract::read("wi-contract-test", first.clone())?;
        let b = Contract::read("wi-contract-test", first.clone())?;
        assert!(
            Arc::ptr_eq(&a.parsed, &b.parsed),
            "the same text reuses the parse"
        );
        assert_eq!(b.text()?, first, "a save writes the text read");
        let second = to_json(&sample_contract("second"))?;
        let c = Contract::read("wi-contract-test", second.clone())?;
        assert_eq!(
            c.objective, "second",
            "another text is parsed, not the kept one reused"
        );
        assert_eq!(c.text()?, second);
        let revised = Contract::new(sample_contract("third"));
        assert!(
            revised.text()?.contains("\"third\""),
            "a new contract is serialised"
        );
        assert!(
            Contract::read("wi-contract-test", "{".to_owned()).is_err(),
            "a bad text is a corrupt row"
        );
        Ok(())
    }
}
