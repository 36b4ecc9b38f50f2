//! Budgets in the six CON-1.7 dimensions and the one rule that spends them (OFL-12, DESIGN
//! §12): a usage delta fits only if, added to what every budget on the lineage has spent, it
//! stays within that budget's limit in every dimension. Spending exactly up to a limit is
//! allowed; one unit over is refused whole. The lineage is the WorkItem's budget, then its
//! Mission's, then each enclosing parent WorkItem's and Mission's (WorkItem ⊂ Mission ⊂ parent
//! Mission); storage reads the rows and writes the answer, this module only decides.
//! `fixtures/budget.json` holds the rule as data, checked by `api/tests/budget.rs`.
//!
//! `financial` is a decimal amount carried as a JSON number; it is compared in millionths
//! (rounded), so `0.1 + 0.2` spends exactly a limit of `0.3`.

use serde::{Deserialize, Serialize};

use super::contract::Budgets;
use super::views::BudgetView;

/// One of the six CON-1.7 dimensions, by its wire name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Dimension {
    Financial,
    Tokens,
    ToolCalls,
    ComputeSeconds,
    WallClockSeconds,
    SideEffects,
}

impl Dimension {
    pub const ALL: [Dimension; 6] = [
        Self::Financial,
        Self::Tokens,
        Self::ToolCalls,
        Self::ComputeSeconds,
        Self::WallClockSeconds,
        Self::SideEffects,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Financial => "financial",
            Self::Tokens => "tokens",
            Self::ToolCalls => "toolCalls",
            Self::ComputeSeconds => "computeSeconds",
            Self::WallClockSeconds => "wallClockSeconds",
            Self::SideEffects => "sideEffects",
        }
    }

    /// The whole-unit dimensions' value in `budgets` (`None` for `financial`).
    fn count(self, budgets: &Budgets) -> Option<u64> {
        match self {
            Self::Financial => None,
            Self::Tokens => Some(budgets.tokens),
            Self::ToolCalls => Some(budgets.tool_calls),
            Self::ComputeSeconds => Some(budgets.compute_seconds),
            Self::WallClockSeconds => Some(budgets.wall_clock_seconds),
            Self::SideEffects => Some(budgets.side_effects),
        }
    }
}

/// Why a delta does not fit: the first budget of the lineage (0: the WorkItem's) and the
/// first dimension it would overflow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Overflow {
    pub level: usize,
    pub dimension: Dimension,
}

impl Budgets {
    /// Every dimension is zero: nothing to charge.
    pub fn is_zero(&self) -> bool {
        micros(self.financial) == 0
            && Dimension::ALL
                .iter()
                .all(|d| d.count(self).is_none_or(|n| n == 0))
    }

    /// `self + other` in every dimension, saturating (a fold of the log; [`charge`] is the
    /// rule that refuses an overflow).
    pub fn saturating_add(&self, other: &Budgets) -> Budgets {
        Budgets {
            financial: (micros(self.financial) + micros(other.financial)) as f64 / 1e6,
            tokens: self.tokens.saturating_add(other.tokens),
            tool_calls: self.tool_calls.saturating_add(other.tool_calls),
            compute_seconds: self.compute_seconds.saturating_add(other.compute_seconds),
            wall_clock_seconds: self
                .wall_clock_seconds
                .saturating_add(other.wall_clock_seconds),
            side_effects: self.side_effects.saturating_add(other.side_effects),
        }
    }

    /// The same spend in every dimension (`financial` to the millionth).
    pub fn same_spend(&self, other: &Budgets) -> bool {
        micros(self.financial) == micros(other.financial)
            && Dimension::ALL[1..]
                .iter()
                .all(|d| d.count(self) == d.count(other))
    }
}

/// `financial` in millionths, rounded: the unit every comparison and sum uses.
fn micros(amount: f64) -> i128 {
    // Saturating cast: a limit beyond i128 millionths is no limit anyone can reach.
    (amount * 1e6).round() as i128
}

/// The spend of every budget on `lineage` after `delta`, in the same order; or the first
/// overflow (OFL-12: then nothing is charged anywhere).
pub fn charge(lineage: &[BudgetView], delta: &Budgets) -> Result<Vec<Budgets>, Overflow> {
    let mut after = Vec::with_capacity(lineage.len());
    for (level, line) in lineage.iter().enumerate() {
        let overflow = |dimension| Overflow { level, dimension };
        let spent_micros = micros(line.spent.financial) + micros(delta.financial);
        if spent_micros > micros(line.limit.financial) {
            return Err(overflow(Dimension::Financial));
        }
        let mut spent = Budgets {
            financial: spent_micros as f64 / 1e6,
            ..Budgets::default()
        };
        for dimension in &Dimension::ALL[1..] {
            let (Some(limit), Some(already), Some(more)) = (
                dimension.count(&line.limit),
                dimension.count(&line.spent),
                dimension.count(delta),
            ) else {
                continue;
            };
            let total = already
                .checked_add(more)
                .filter(|total| *total <= limit)
                .ok_or(overflow(*dimension))?;
            match dimension {
                Dimension::Tokens => spent.tokens = total,
                Dimension::ToolCalls => spent.tool_calls = total,
                Dimension::ComputeSeconds => spent.compute_seconds = total,
                Dimension::WallClockSeconds => spent.wall_clock_seconds = total,
                Dimension::SideEffects => spent.side_effects = total,
                Dimension::Financial => {}
            }
        }
        after.push(spent);
    }
    Ok(after)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(limit_tokens: u64, spent_tokens: u64) -> BudgetView {
        BudgetView {
            limit: Budgets {
                tokens: limit_tokens,
                ..Budgets::default()
            },
            spent: Budgets {
                tokens: spent_tokens,
                ..Budgets::default()
            },
        }
    }

    #[test]
    fn an_unsigned_sum_that_wraps_is_an_overflow_not_a_small_number() {
        let delta = Budgets {
            tokens: u64::MAX,
            ..Budgets::default()
        };
        assert_eq!(
            charge(&[line(u64::MAX, 1)], &delta),
            Err(Overflow {
                level: 0,
                dimension: Dimension::Tokens
            })
        );
    }

    #[test]
    fn financial_sums_in_millionths() {
        let lineage = [BudgetView {
            limit: Budgets {
                financial: 0.3,
                ..Budgets::default()
            },
            spent: Budgets {
                financial: 0.1,
                ..Budgets::default()
            },
        }];
        let delta = Budgets {
            financial: 0.2,
            ..Budgets::default()
        };
        let after = charge(&lineage, &delta).expect("0.1 + 0.2 fits 0.3");
        assert!((after[0].financial - 0.3).abs() < 1e-9);
    }
}
