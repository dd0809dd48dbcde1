//! How a cron invocation shares `INVOCATION_BUDGET` (Cloudflare: 1,000 subrequests and 1,000
//! D1 queries per invocation on the paid plan, 50 on the free plan) among its steps, so that
//! the whole invocation stays within it.

use super::reconcile::MIN_BUDGET;
use crate::alerts::{AlertKind, RUN_COST, SEND_COST};

/// What every run spends outside the shares: the probe of D1, this isolate's counters' flush,
/// and the daily run's two prunes.
pub const FIXED: u32 = 4;

/// Each step's share of one cron invocation's budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shares {
    /// Taken first, run last (it never holds the sweepers back): a fifth.
    pub archive: u32,
    /// The alerts' run and as many sends as fit: a fifth, at least one send, at most one
    /// send of every kind.
    pub alerts: u32,
    /// Half of the rest.
    pub reconcile: u32,
    /// A quarter of the rest each.
    pub delivery_sweep: u32,
    pub effect_sweep: u32,
}

pub fn shares(budget: u32) -> Shares {
    let archive = budget / 5;
    let every_kind = RUN_COST + SEND_COST * AlertKind::ALL.len() as u32;
    let alerts = (budget / 5).min(every_kind).max(RUN_COST + SEND_COST);
    let rest = budget.saturating_sub(FIXED + archive + alerts);
    Shares {
        archive,
        alerts,
        reconcile: rest / 2,
        delivery_sweep: rest / 4,
        effect_sweep: rest / 4,
    }
}

impl Shares {
    /// What the invocation may spend at most: each share, or the least a step takes whatever
    /// its share (reconciliation always walks a page; a sweeper claims one chunk of two calls).
    pub fn most(&self) -> u32 {
        FIXED
            + self.archive
            + self.alerts
            + self.reconcile.max(MIN_BUDGET)
            + self.delivery_sweep.max(2)
            + self.effect_sweep.max(2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_the_free_plan_up_the_cron_stays_within_its_budget() {
        for budget in 50..=1000 {
            let s = shares(budget);
            assert!(s.most() <= budget, "{budget}: {s:?} spends {}", s.most());
            assert!(s.reconcile >= MIN_BUDGET, "{budget}: {s:?}");
            assert!(s.alerts >= RUN_COST + SEND_COST);
        }
        // the paid plan: every alert kind can be sent in one run, and what they cannot spend
        // goes to the others
        let paid = shares(1000);
        assert_eq!(paid.alerts, RUN_COST + 10 * SEND_COST);
        assert_eq!(paid.reconcile, (1000 - FIXED - 200 - paid.alerts) / 2);
    }
}
