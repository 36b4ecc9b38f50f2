//! The unit of work's memory (issue #41): the rows one job has loaded in its transaction,
//! so that every check of a Command or a publication is handed the same row instead of
//! reading it again.
//!
//! A writer job's [`crate::db::Tx`] carries a [`Memo`]; a reader's plain connection has none
//! (a read is one statement's snapshot anyway). Only a table's `rows/` file reads or writes
//! its entries: it loads through [`Memo::load`], and every change it makes to the table
//! updates or forgets what is remembered, in the same function as the SQL. A nested savepoint
//! that rolls back forgets everything (`Tx::nested`). Functions that may run on either take
//! `&impl Conn`.
//!
//! The write meter (`sql.rs`) reports a query run twice with the same parameters in one job
//! as a repeated load; `src/http/tests/statements.rs` holds a Command and a publication to
//! none.

use std::any::Any;
use std::cell::RefCell;
use std::collections::HashMap;

use rusqlite::Connection;

use crate::error::Error;

/// What is remembered: by table (or query) and key, a value of the type its `rows/` file
/// loads.
type Remembered = HashMap<(&'static str, String), Box<dyn Any>>;

/// Rows loaded in one job, by table (or query) and key.
#[derive(Default)]
pub(crate) struct Memo {
    rows: RefCell<Remembered>,
}

impl Memo {
    /// The remembered value of `(what, key)`, or `load`'s, remembered.
    pub(crate) fn load<T: Clone + 'static>(
        &self,
        what: &'static str,
        key: &str,
        load: impl FnOnce() -> Result<T, Error>,
    ) -> Result<T, Error> {
        let known = self
            .rows
            .borrow()
            .get(&(what, key.to_owned()))
            .and_then(|value| value.downcast_ref::<T>())
            .cloned();
        if let Some(value) = known {
            return Ok(value);
        }
        // Not borrowed while loading: a load may itself go through the memo.
        let value = load()?;
        self.remember(what, key, value.clone());
        Ok(value)
    }

    /// `(what, key)` is now `value` (a change the caller just made).
    pub(crate) fn remember<T: 'static>(&self, what: &'static str, key: &str, value: T) {
        self.rows
            .borrow_mut()
            .insert((what, key.to_owned()), Box::new(value));
    }

    /// Applies `change` to every remembered value of `what`.
    pub(crate) fn update<T: 'static>(&self, what: &'static str, mut change: impl FnMut(&mut T)) {
        for ((table, _), value) in self.rows.borrow_mut().iter_mut() {
            if *table == what
                && let Some(value) = value.downcast_mut::<T>()
            {
                change(value);
            }
        }
    }

    /// Forgets what is remembered of `(what, key)`.
    pub(crate) fn forget(&self, what: &'static str, key: &str) {
        self.rows.borrow_mut().remove(&(what, key.to_owned()));
    }

    /// Forgets everything (a rolled-back savepoint).
    pub(crate) fn forget_all(&self) {
        self.rows.borrow_mut().clear();
    }
}

/// A connection a storage function may run on: a writer job's transaction, which remembers
/// the rows it loaded, or a plain connection, which does not.
pub(crate) trait Conn {
    fn conn(&self) -> &Connection;
    fn memo(&self) -> Option<&Memo>;
}

impl Conn for Connection {
    fn conn(&self) -> &Connection {
        self
    }
    fn memo(&self) -> Option<&Memo> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_remembered_row_is_loaded_once_and_changes_are_seen() {
        let memo = Memo::default();
        let mut loads = 0;
        for _ in 0..3 {
            let value = memo
                .load("leases.current", "wi-1", || {
                    loads += 1;
                    Ok(Some(7u64))
                })
                .expect("load");
            assert_eq!(value, Some(7));
        }
        assert_eq!(loads, 1);
        memo.update::<Option<u64>>("leases.current", |value| *value = value.map(|v| v + 1));
        let changed = memo.load("leases.current", "wi-1", || Ok(None::<u64>));
        assert_eq!(changed.expect("load"), Some(8));
        memo.forget_all();
        let reloaded = memo.load("leases.current", "wi-1", || Ok(None::<u64>));
        assert_eq!(reloaded.expect("load"), None);
    }
}
