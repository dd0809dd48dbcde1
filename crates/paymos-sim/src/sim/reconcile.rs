//! Reconciliation as part of the simulated world: the **core's** walk
//! (`paymos_core::actors::reconcile::Walk`, the state machine the Worker drives) over SQLite,
//! against a simulated provider API that lists the world's paid invoices newest first, a few
//! at a time, now and then failing, and in some seeds ignoring `starting_after` (a stuck
//! cursor). One step of the walk per scheduler step; D1 faults as anywhere else; a walk whose
//! D1 call fails is over (the invocation dies), its lease left to expire.

use paymos_core::actors::reconcile::{Ended, ProviderPage, Start, Step, Walk, CAUSE};
use paymos_core::actors::transition::Change;
use paymos_core::statements::{self as st, Arg};
use paymos_core::{ResourceKind, State};

use super::{hex, Actor, Sim};
use crate::db::as_json;

impl Sim<'_> {
    /// A walk starts: an operator's or the final one (an operator's run, `Start::Manual`).
    pub(super) fn start_reconcile(&mut self, full: bool) {
        let holder = hex(&self.rng.bytes16());
        let walk = Walk::new(Start::Manual { full }, holder, 1_000, self.now() / 1000);
        self.trace(format!("reconcile: a walk starts (full: {full})"));
        self.reconcile(Box::new(walk));
    }

    /// One step of a walk.
    pub(super) fn reconcile(&mut self, mut walk: Box<Walk>) {
        let ran = match walk.step() {
            Step::Acquire(b) => {
                let fault = self.fault_write();
                self.db.run(&b, fault).result.map(Some)
            }
            Step::Open(statements)
            | Step::Lookup(statements)
            | Step::Record(statements)
            | Step::Finish(statements) => {
                let fault = self.fault_batch(statements.len());
                self.db.batch(&statements, fault).result.map(Some)
            }
            Step::Fetch {
                starting_after,
                paid_since,
            } => {
                let page = self.provider_page(starting_after.as_deref(), paid_since);
                walk.fetched(page);
                Ok(None)
            }
            Step::BringToPaid(invoice) => self.bring_to_paid(&mut walk, &invoice.id).map(|()| None),
            Step::Done(ended) => {
                self.trace(format!("reconcile: {ended:?}"));
                self.last_reconcile = Some(ended);
                return;
            }
        };
        // a database step's rows go to the walk (the others have had their answer)
        let done = ran.and_then(|rows| match rows {
            Some(rows) => walk.ran(&as_json(&rows)?),
            None => Ok(()),
        });
        match done {
            Ok(()) => self.actors.push(Actor::Reconcile { walk }),
            Err(e) => {
                // the invocation dies on a D1 error; its lease expires
                self.trace(format!("reconcile: the walk's invocation failed ({e})"));
                self.last_reconcile = None;
            }
        }
    }

    /// The guarded transition to paid (cause reconciliation, the provider's order_ref).
    fn bring_to_paid(&mut self, walk: &mut Walk, id: &str) -> Result<(), String> {
        let r = self.by_resource[id];
        let res = self.world.resources[r].clone();
        let before = self.rm[r].applied;
        self.transition(
            r,
            Change {
                resource_id: res.id.clone(),
                kind: ResourceKind::Invoice,
                to: State::Paid,
                order_ref: res.order_ref.clone(),
                amount: res.amount.clone(),
                currency: res.currency.clone(),
                cause_kind: paymos_core::CauseKind::Reconciliation,
                cause: CAUSE.to_string(),
                delivery: None,
                pull: false,
            },
        )?;
        self.stats.reconciled += 1;
        let row = self.db.read(&st::LOAD_RESOURCE.bind(vec![Arg::text(id)]));
        walk.brought(self.rm[r].applied > before, row.text(0, "status"));
        Ok(())
    }

    /// `GET /v1/invoices?status=paid`: the world's invoices paid at the provider now, newest
    /// first (ids in no particular order), 1 to 3 a page; sometimes a 503; in a seed whose
    /// provider is stuck, `starting_after` ignored.
    fn provider_page(
        &mut self,
        after: Option<&str>,
        paid_since: Option<i64>,
    ) -> Result<ProviderPage, String> {
        if self.chaos && self.frng.chance(0.05) {
            return Err("the provider API answered 503".into());
        }
        let now = self.now();
        let mut paid: Vec<(i64, String)> = self
            .world
            .resources
            .iter()
            .filter(|r| r.live && r.kind == ResourceKind::Invoice)
            .filter(|r| r.provider_state(now) == Some(State::Paid))
            .filter_map(|r| {
                let at = r
                    .events
                    .iter()
                    .filter(|e| e.emit_at <= now && e.to == Some(State::Paid))
                    .map(|e| e.emit_at)
                    .next_back()?;
                Some((at, r.id.clone()))
            })
            .filter(|(at, _)| paid_since.is_none_or(|s| at / 1000 >= s))
            .collect();
        paid.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let from = match after {
            _ if self.chaos && self.k.provider_stuck => 0,
            None => 0,
            Some(c) => paid.iter().position(|(_, id)| id == c).map_or(0, |i| i + 1),
        };
        let size = self.frng.range(1, 3) as usize;
        let end = (from + size).min(paid.len());
        let data = paid[from.min(end)..end]
            .iter()
            .map(|(_, id)| {
                let r = &self.world.resources[self.by_resource[id]];
                paymos_core::actors::reconcile::ProviderInvoice {
                    id: id.clone(),
                    status: Some("paid".into()),
                    amount: r.amount.clone(),
                    currency: r.currency.clone(),
                    order_ref: r.order_ref.clone(),
                }
            })
            .collect();
        Ok(ProviderPage {
            data,
            has_more: end < paid.len(),
        })
    }

    /// The final reconciliation (faults off): walked to its end; a lease left by a walk that
    /// died is waited out.
    pub(super) fn final_reconciliation(&mut self) -> bool {
        for _ in 0..5 {
            self.last_reconcile = None;
            self.start_reconcile(true);
            if !self.drain("final reconciliation") {
                return false;
            }
            match &self.last_reconcile {
                Some(Ended::Walked { state: "done", .. }) => return true,
                Some(Ended::LeaseHeld) => {
                    let t = self.now() + 301_000;
                    crate::clock::set_now_ms(t);
                }
                other => {
                    let other = format!("{other:?}");
                    self.violation(format!(
                        "the final reconciliation (no faults) did not finish: {other}"
                    ));
                    return false;
                }
            }
        }
        self.violation("the final reconciliation never got the lease".into());
        false
    }
}
