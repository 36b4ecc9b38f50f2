//! Who may say what in Evidence, and which Evidence is in force (EVD-1, DESIGN §5.1).
//!
//! Five pure rules, each checked against the table in `fixtures/evidence_rules.json`:
//! - [`may_claim`]: a method kind is claimed only by a producer whose standing may produce it
//!   (a Worker cannot sign an `integrity_check` or a `human` review);
//! - [`may_supersede`]: a record is corrected only by its own producer or by a reviewer or
//!   coordinator of its Group (Memberships are Group-wide, so "of that Mission" is "of the
//!   Group the record belongs to");
//! - [`may_supersede_method`]: a deterministic check is superseded only by a re-run of it;
//! - [`may_supersede_producer`]: the Authority's record only by the Authority;
//! - [`on_own_work`]: separation of duties, a producer's standing on work it did itself is a
//!   Worker's, whatever its roles;
//! - [`in_force`]: the verdict on a criterion is the newest record of the highest standing
//!   still in force, so a Worker's Evidence never overrides a review; records of that same
//!   standing that disagree make the criterion `contested`.
//!
//! Storage computes a producer's [`Standing`] when it records the Evidence and keeps it with
//! the record: a later change of roles does not reweigh what was already said.

use serde::{Deserialize, Serialize};

use crate::evidence::{MethodKind, Outcome};
use crate::session::Role;

/// What an Evidence producer's word weighs, from its roles in the Group when it recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Standing {
    /// A Worker: its Evidence is a claim about its own work (EVD-1: not sufficient).
    Worker,
    Coordinator,
    Reviewer,
    /// The server's built-in reviewer (`weft-authority`).
    Authority,
    /// An Organization approver approving an Artifact as reusable knowledge (CTX-6): the only
    /// Evidence an approver records (criterion [`crate::evidence::REUSE_CRITERION`], subject
    /// the Artifact). Storage gives this standing to that Evidence only; [`Standing::of_roles`]
    /// never answers it.
    Approver,
}

impl Standing {
    pub const ALL: [Standing; 5] = [
        Standing::Worker,
        Standing::Coordinator,
        Standing::Reviewer,
        Standing::Authority,
        Standing::Approver,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Worker => "worker",
            Self::Coordinator => "coordinator",
            Self::Reviewer => "reviewer",
            Self::Authority => "authority",
            Self::Approver => "approver",
        }
    }

    /// The standing of a member with `roles`: its highest producing role; `None` when no role
    /// may record Evidence (auditors and approvers).
    pub fn of_roles(roles: &[Role]) -> Option<Standing> {
        roles
            .iter()
            .filter_map(|role| match role {
                Role::Worker => Some(Standing::Worker),
                Role::Coordinator => Some(Standing::Coordinator),
                Role::Reviewer => Some(Standing::Reviewer),
                Role::Auditor | Role::Approver => None,
            })
            .max()
    }

    /// The rank that decides which records are in force: every review (the server's,
    /// a reviewer's, a coordinator's) outranks a Worker's claim; reviews rank equally, so a
    /// reviewer who disagrees with the server's check makes the criterion contested instead
    /// of silently winning or losing.
    pub fn rank(self) -> u8 {
        match self {
            Self::Worker => 0,
            Self::Coordinator | Self::Reviewer | Self::Authority | Self::Approver => 1,
        }
    }
}

impl std::str::FromStr for Standing {
    type Err = ();

    fn from_str(text: &str) -> Result<Self, ()> {
        Standing::ALL
            .into_iter()
            .find(|standing| standing.as_str() == text)
            .ok_or(())
    }
}

/// Whether a producer of `standing` may claim `method`.
///
/// | method              | worker | coordinator | reviewer | authority | approver |
/// |---------------------|--------|-------------|----------|-----------|----------|
/// | `integrity_check`   |        |             | yes      | yes       |
/// | `schema_validation` |        |             | yes      | yes       |
/// | `automated_test`    | yes    | yes         | yes      |           |
/// | `business_rule`     | yes    | yes         | yes      |           |
/// | `reviewer_agent`    |        |             | yes      |           |
/// | `human`             |        | yes         | yes      |           | yes      |
///
/// The server's reviewer signs only the two deterministic checks it runs; a `human` verdict
/// comes from the people who accept or fail results; a Worker may report its own tests and
/// rule checks, which rank below any review anyway.
pub fn may_claim(standing: Standing, method: MethodKind) -> bool {
    use MethodKind as M;
    use Standing as S;
    match method {
        M::IntegrityCheck | M::SchemaValidation => matches!(standing, S::Reviewer | S::Authority),
        M::AutomatedTest => matches!(standing, S::Worker | S::Coordinator | S::Reviewer),
        // The Authority checks one rule itself: a child Mission's approval (T16, `work/child.rs`).
        M::BusinessRule => matches!(
            standing,
            S::Worker | S::Coordinator | S::Reviewer | S::Authority
        ),
        M::ReviewerAgent => standing == S::Reviewer,
        M::Human => matches!(standing, S::Coordinator | S::Reviewer | S::Approver),
    }
}

/// Separation of duties: the standing of a producer recording Evidence on its own work (a
/// WorkItem it owns or held a lease of or published for, an Artifact it published). Whatever
/// its roles, its word there is a Worker's claim: it may report its own tests and rule checks,
/// never review itself (no method only reviewers claim), and it cannot supersede another
/// producer's record. The server's own reviewer has no work of its own.
pub fn on_own_work(standing: Standing) -> Standing {
    match standing {
        Standing::Authority => Standing::Authority,
        _ => Standing::Worker,
    }
}

/// Whether a producer of `standing` may supersede a record, given whether it is that
/// record's own producer. The record must also be of the same Group, Mission, WorkItem and
/// criterion (checked by storage, `supersedes_mismatch`).
pub fn may_supersede(standing: Standing, own_record: bool) -> bool {
    own_record || matches!(standing, Standing::Reviewer | Standing::Coordinator)
}

/// Whether a record of method `earlier` may be superseded by one of method `correction`. The
/// Authority's deterministic checks (`integrity_check`, `schema_validation`) are facts about
/// bytes: only a re-run of the same check replaces one, never anyone's opinion (issue #40: a
/// coordinator's `human` pass over a failed schema check). Every other method may be
/// corrected by any method the corrector may claim.
pub fn may_supersede_method(earlier: MethodKind, correction: MethodKind) -> bool {
    match earlier {
        MethodKind::IntegrityCheck | MethodKind::SchemaValidation => correction == earlier,
        _ => true,
    }
}

/// A record of the server's own reviewer (`Standing::Authority`) is corrected only by the
/// server itself: it checked the bytes, and another producer's claim to have re-run the check
/// is not that check (issue #40 review). A new run of the built-in reviewer outweighs it
/// instead. Anyone else's record is corrected as [`may_supersede`] says.
pub fn may_supersede_producer(earlier: Standing, corrector: Standing) -> bool {
    earlier != Standing::Authority || corrector == Standing::Authority
}

/// One record on a criterion, as [`in_force`] weighs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Weighed {
    pub outcome: Outcome,
    pub standing: Standing,
    /// Another record names this one in `supersedes`.
    pub superseded: bool,
}

/// The verdict on one criterion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InForce {
    /// Index (in the given order) of the record that is the verdict.
    pub latest: usize,
    /// Records of the verdict's rank still in force disagree.
    pub contested: bool,
}

/// The verdict among `records` given in record order: the newest record of the highest rank
/// still in force; `None` when every record was superseded.
pub fn in_force(records: &[Weighed]) -> Option<InForce> {
    let top = records
        .iter()
        .filter(|record| !record.superseded)
        .map(|record| record.standing.rank())
        .max()?;
    let mut latest = None;
    let mut outcomes = Vec::new();
    for (index, record) in records.iter().enumerate() {
        if record.superseded || record.standing.rank() != top {
            continue;
        }
        latest = Some(index);
        if !outcomes.contains(&record.outcome) {
            outcomes.push(record.outcome);
        }
    }
    latest.map(|latest| InForce {
        latest,
        contested: outcomes.len() > 1,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standing_names_round_trip() {
        for standing in Standing::ALL {
            assert_eq!(standing.as_str().parse(), Ok(standing));
            let json = serde_json::to_string(&standing).expect("unit variant");
            assert_eq!(json, format!("\"{}\"", standing.as_str()));
        }
    }

    #[test]
    fn the_highest_producing_role_counts() {
        assert_eq!(
            Standing::of_roles(&[Role::Worker, Role::Reviewer]),
            Some(Standing::Reviewer)
        );
        assert_eq!(Standing::of_roles(&[Role::Auditor, Role::Approver]), None);
        assert_eq!(Standing::of_roles(&[]), None);
    }
}
