//! Which checkpoint a log with witnesses serves, and which tree each witness is sent next
//! (issue #45): pure rules over the cosignatures kept, `(witness, size)`.
//!
//! The size worth serving is the newest a majority of the configured witnesses cosigned
//! ([`quorum`]), else the newest any cosigned ([`served_size`]). The server never serves a
//! smaller size than it served before (`storage/src/rows/tlog_served.rs` keeps the largest):
//! cosignatures of an older tree that land late (a witness that read the tree before it
//! grew) do not take the served checkpoint back, which a client would take for a fork.
//!
//! Witnesses are kept on common sizes so that a majority forms: a witness behind the newest
//! cosigned size is sent that size, not the tree as it is now; one that holds it is sent the
//! current tree only once a majority holds it too, or after it waited [`PATIENCE`] rounds (a
//! majority down must not stop the others from cosigning).

/// How many rounds a witness that holds the newest cosigned size waits for a majority to
/// hold it too before it is sent the current tree anyway.
pub const PATIENCE: u32 = 5;

/// A majority of `witnesses` configured.
pub fn quorum(witnesses: usize) -> usize {
    witnesses / 2 + 1
}

/// How many of `cosigned` are of `size`.
fn count(cosigned: &[(String, u64)], size: u64) -> usize {
    cosigned.iter().filter(|(_, at)| *at == size).count()
}

/// The size to serve, given the cosignatures of the `witnesses` configured (`None`: the tree
/// as it is now).
pub fn served_size(cosigned: &[(String, u64)], witnesses: usize) -> Option<u64> {
    let quorum = quorum(witnesses);
    let majority = cosigned
        .iter()
        .map(|(_, size)| *size)
        .filter(|size| count(cosigned, *size) >= quorum)
        .max();
    majority.or_else(|| cosigned.iter().map(|(_, size)| *size).max())
}

/// What one witness is sent next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// The tree at this size (the newest cosigned, or the current).
    Push(u64),
    /// Nothing this round: it holds the newest cosigned size, which a majority does not yet.
    Wait,
    /// Nothing: it holds the current tree.
    Idle,
}

/// What a witness that holds `held` is sent, given the cosignatures of the `witnesses`
/// configured, the current tree's size, and how many rounds it `waited` already.
pub fn next(
    held: u64,
    cosigned: &[(String, u64)],
    witnesses: usize,
    current: u64,
    waited: u32,
) -> Next {
    let newest = cosigned.iter().map(|(_, size)| *size).max().unwrap_or(0);
    if held < newest {
        return Next::Push(newest);
    }
    if held >= current {
        return Next::Idle;
    }
    if newest > 0 && count(cosigned, newest) < quorum(witnesses) && waited < PATIENCE {
        return Next::Wait;
    }
    Next::Push(current)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(rows: &[(&str, u64)]) -> Vec<(String, u64)> {
        rows.iter().map(|(w, s)| ((*w).to_owned(), *s)).collect()
    }

    /// A majority's size is worth serving over a newer one fewer witnesses cosigned; with
    /// no majority, the newest cosigned.
    #[test]
    fn a_majority_is_worth_more_than_a_newer_tree() {
        assert_eq!(served_size(&rows(&[]), 3), None);
        assert_eq!(served_size(&rows(&[("a", 12)]), 3), Some(12));
        assert_eq!(served_size(&rows(&[("a", 12), ("b", 10)]), 3), Some(12));
        assert_eq!(
            served_size(&rows(&[("a", 12), ("b", 10), ("c", 10)]), 3),
            Some(10)
        );
        assert_eq!(served_size(&rows(&[("a", 12)]), 1), Some(12));
    }

    /// Every sequence of cosignatures in which each witness's sizes only grow serves sizes
    /// that never go back, once a majority formed.
    #[test]
    fn once_a_majority_formed_the_served_size_only_grows() {
        let order = [
            ("a", 12),
            ("b", 12),
            ("a", 20),
            ("c", 12),
            ("c", 20),
            ("a", 30),
        ];
        let mut seen = Vec::new();
        let mut last = 0;
        for (witness, size) in order {
            seen.push((witness.to_owned(), size));
            let served = served_size(&seen, 3).expect("cosigned");
            if seen.len() >= 2 {
                assert!(served >= last, "{seen:?}: {served} after {last}");
                last = served;
            }
        }
        assert_eq!(last, 20);
    }

    #[test]
    fn witnesses_are_kept_on_common_sizes() {
        let cosigned = rows(&[("a", 12)]);
        // Behind the newest cosigned size: sent that size, not the current tree.
        assert_eq!(next(0, &cosigned, 3, 40, 0), Next::Push(12));
        // Holding it alone: waits for a majority, then goes on after PATIENCE rounds.
        assert_eq!(next(12, &cosigned, 3, 40, 0), Next::Wait);
        assert_eq!(next(12, &cosigned, 3, 40, PATIENCE), Next::Push(40));
        // A majority holds it: the current tree.
        let cosigned = rows(&[("a", 12), ("b", 12)]);
        assert_eq!(next(12, &cosigned, 3, 40, 0), Next::Push(40));
        assert_eq!(next(40, &rows(&[("a", 40)]), 1, 40, 0), Next::Idle);
        // Nothing cosigned yet: the current tree.
        assert_eq!(next(0, &[], 3, 7, 0), Next::Push(7));
    }
}
