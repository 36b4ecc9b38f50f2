//! Caps on what one Group or one proposer may pile up in the index (issue #40): open
//! proposals, per Group and per proposer. Checked inside the writer transaction of the
//! `work.propose` it guards (after a retry's stored answer was looked up), so concurrent
//! proposals cannot overshoot it and a refusal appends nothing. Only proposals of a Mission
//! that is still `active` count: a Mission's end closes its proposals, so a flood cannot lock
//! the Group out for good.

use weft_api::ErrorCode;

use crate::error::{Error, reject};
use crate::unit::Tx;

/// The most open proposals one Agent may hold in a Group, whatever the Group's cap: one
/// member cannot use up the Group's allowance alone.
pub(super) const OPEN_PROPOSALS_PER_PROPOSER: u64 = 100;

/// Refuses `work.propose` with `quota_exceeded` (409) while `group` holds `cap` open proposals
/// (0: no cap), or `proposer` holds [`OPEN_PROPOSALS_PER_PROPOSER`] of them.
pub(super) fn admit_proposal(
    tx: &Tx<'_>,
    group: &str,
    proposer: &str,
    cap: u64,
) -> Result<(), Error> {
    if cap == 0 {
        return Ok(());
    }
    let (open, own) = crate::rows::proposals::open_in_group(tx, group, proposer)?;
    if open >= cap {
        return Err(reject(
            ErrorCode::QuotaExceeded,
            format!(
                "the Group holds {open} open proposals, at most {cap}; a coordinator authorizes them, or their Missions end"
            ),
        ));
    }
    if own >= OPEN_PROPOSALS_PER_PROPOSER {
        return Err(reject(
            ErrorCode::QuotaExceeded,
            format!(
                "{proposer} holds {own} open proposals in {group}, at most {OPEN_PROPOSALS_PER_PROPOSER}"
            ),
        ));
    }
    Ok(())
}
