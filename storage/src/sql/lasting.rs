//! [`Lasting`]: facts a connection learnt from what it read that stay true once learnt, kept
//! for the connection's life so a later job need not read them again: a WorkItem's Mission
//! (it never changes), or a Group's usage at least as counted in a `usage_epoch` (usage only
//! grows within an epoch; whatever shrinks it moves the epoch on). A fact read in a
//! transaction that then failed to commit may be false: the writer forgets them all then
//! (`db/writer.rs`).

use std::cell::RefCell;
use std::collections::HashMap;

/// The most facts a connection remembers: at most about 5 MiB (keys of up to a few hundred
/// bytes). Past it they are forgotten all at once, which costs only reads.
const MOST: usize = 16_384;

/// Facts by what they are about and key.
#[derive(Default)]
pub(crate) struct Lasting(RefCell<HashMap<(&'static str, String), String>>);

impl Lasting {
    pub(crate) fn known(&self, what: &'static str, key: &str) -> Option<String> {
        self.0.borrow().get(&(what, key.to_owned())).cloned()
    }

    pub(crate) fn learn(&self, what: &'static str, key: &str, value: &str) {
        let mut facts = self.0.borrow_mut();
        if facts.len() >= MOST {
            facts.clear();
        }
        facts.insert((what, key.to_owned()), value.to_owned());
    }

    pub(crate) fn forget_all(&self) {
        self.0.borrow_mut().clear();
    }
}
