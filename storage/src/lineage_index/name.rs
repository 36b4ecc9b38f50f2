//! `Name`: interned names (Groups, Missions, WorkItems, Agents, media types) as eight-byte handles.

use std::collections::HashMap;
use std::fmt;
use std::sync::{LazyLock, Mutex};

use serde::{Serialize, Serializer};

/// An interned name (a Group, Mission, WorkItem, Agent or media type): eight bytes, copied
/// freely, equal exactly when the text is. Names are kept once for as long as the process
/// runs: the index never forgets a publication, so it would never free a name either, and
/// copying a name into an answer then touches no memory beyond the record it sits in (a
/// reference-counted string would cost a cache miss per distinct name).
#[derive(Clone, Copy)]
pub struct Name(&'static String);

impl Name {
    pub(crate) fn new(text: &str) -> Self {
        static NAMES: LazyLock<Mutex<HashMap<&'static str, Name>>> = LazyLock::new(Mutex::default);
        // Short critical section: publications and index rebuilds only, never a query.
        let mut names = NAMES.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(&kept) = names.get(text) {
            return kept;
        }
        let kept: &'static String = Box::leak(Box::new(text.to_owned()));
        names.insert(kept.as_str(), Name(kept));
        Name(kept)
    }

    pub fn as_str(self) -> &'static str {
        self.0.as_str()
    }
}

impl std::ops::Deref for Name {
    type Target = str;
    fn deref(&self) -> &str {
        self.0
    }
}

impl PartialEq for Name {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self.0, other.0) // interned: one text, one address
    }
}

impl Eq for Name {}

impl std::hash::Hash for Name {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        std::ptr::hash(self.0, state);
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.0.as_str(), f)
    }
}

impl Serialize for Name {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.0)
    }
}
