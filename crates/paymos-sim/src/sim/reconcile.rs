//! Reconciliation as part of the simulated world: the **core's** walk
//! (`paymos_core::actors::reconcile::Walk`, the state machine the Worker drives) over SQLite,
//! against a simulated provider API that lists the world's paid invoices newest first, a few
//! at a time, now and then failing, and in some seeds ignoring `starting_after` (a stuck
//! cursor). One step of the walk per scheduler step; D1 faults as anywhere else; a walk whose
//! D1 call fails is over (the invocation dies), its lease left to expire.

use paymos_core::actors::reconcile::{
    self, Ended, ProviderInvoice, ProviderPage, Start, Walk, CAUSE,
};
use paymos_core::actors::transition::Change;
use paymos_core::statements::{self as st, Arg, Bound};
use paymos_core::{ResourceKind, State};
use serde_json::Value;

use super::{hex, Actor, Sim};
use crate::coroutine::{Coroutine, Port, Resumed, Returned};
use crate::db::as_json;

/// What the core's walk driver (`reconcile::drive`) asks of the world, one call at a time.
#[derive(Debug)]
pub(super) enum Call {
    Statement(Bound<'static>),
    Batch(Vec<Bound<'static>>),
    Fetch(Option<String>, Option<i64>),
    BringToPaid(ProviderInvoice),
}

pub(super) type Reconciler = Coroutine<Call, Result<Ended, String>>;

/// The walk's I/O in the simulated world: every call goes to the scheduler.
struct Io(Port<Call>);

impl reconcile::Io for Io {
    type Error = String;
    async fn statement(&mut self, b: Bound<'static>) -> Result<Vec<Value>, String> {
        self.0.call(Call::Statement(b)).await
    }
    async fn batch(&mut self, statements: Vec<Bound<'static>>) -> Result<Vec<Vec<Value>>, String> {
        self.0.call(Call::Batch(statements)).await
    }
    async fn fetch(
        &mut self,
        after: Option<String>,
        since: Option<i64>,
    ) -> Result<ProviderPage, String> {
        self.0.call(Call::Fetch(after, since)).await
    }
    async fn bring_to_paid(
        &mut self,
        invoice: &ProviderInvoice,
    ) -> Result<(bool, Option<String>), String> {
        self.0.call(Call::BringToPaid(invoice.clone())).await
    }
    fn unreadable(why: String) -> String {
        why
    }
}

impl Sim<'_> {
    /// A walk starts: an operator's or the final one (an operator's run, `Start::Manual`).
    pub(super) fn start_reconcile(&mut self, full: bool) {
        let holder = hex(&self.rng.bytes16());
        let mut walk = Walk::new(Start::Manual { full }, holder, 1_000, self.now() / 1000);
        self.trace(format!("reconcile: a walk starts (full: {full})"));
        let driver = Box::new(Coroutine::new(|port| async move {
            reconcile::drive(&mut walk, &mut Io(port)).await
        }));
        self.reconcile(driver, None);
    }

    /// One call of a walk. A walk whose D1 call fails is over (the invocation dies; its lease
    /// expires).
    pub(super) fn reconcile(&mut self, mut driver: Box<Reconciler>, returned: Option<Returned>) {
        let returned: Returned = match driver.resume(returned) {
            Resumed::Asks(Call::Statement(b)) => {
                let fault = self.fault_write();
                let rows = self.db.run(&b, fault).result;
                Box::new(rows.and_then(|r| as_json(&r)).map(|mut r| r.remove(0)))
            }
            Resumed::Asks(Call::Batch(statements)) => {
                let fault = self.fault_batch(statements.len());
                let rows = self.db.batch(&statements, fault).result;
                Box::new(rows.and_then(|r| as_json(&r)))
            }
            Resumed::Asks(Call::Fetch(after, since)) => {
                Box::new(self.provider_page(after.as_deref(), since))
            }
            Resumed::Asks(Call::BringToPaid(invoice)) => Box::new(self.bring_to_paid(&invoice.id)),
            Resumed::Done(Ok(ended)) => {
                self.trace(format!("reconcile: {ended:?}"));
                self.last_reconcile = Some(ended);
                return;
            }
            Resumed::Done(Err(e)) => {
                self.trace(format!("reconcile: the walk's invocation failed ({e})"));
                self.last_reconcile = None;
                return;
            }
        };
        let returned = Some(returned);
        self.actors.push(Actor::Reconcile { driver, returned });
    }

    /// The guarded transition to paid (cause reconciliation, the provider's order_ref).
    fn bring_to_paid(&mut self, id: &str) -> Result<(bool, Option<String>), String> {
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
                pull: self.pl.on,
            },
        )?;
        self.stats.reconciled += 1;
        // none when the guarded write created nothing for an invoice never seen here (refused,
        // a refund on record holding it back): the Worker answers the transition's status,
        // None, the same
        let row = self.db.read(&st::LOAD_RESOURCE.bind(vec![Arg::text(id)]));
        let status = (!row.is_empty()).then(|| row.text(0, "status")).flatten();
        Ok((self.rm[r].applied > before, status))
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
