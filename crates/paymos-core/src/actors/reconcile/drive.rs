//! Reconciliation's driver, written once: the loop that walks a [`Walk`] through its steps
//! over whatever I/O it is given. The Worker gives it D1, the provider's API over `fetch` and
//! the guarded transition (`src/reconcile.rs`); the simulator gives it SQLite and a simulated
//! provider, one call per scheduler step.

use serde_json::Value;

use super::{Ended, ProviderInvoice, ProviderPage, Step, Walk};
use crate::statements::Bound;

/// What the walk's driver does to the world. A database call that fails ends the invocation
/// (the lease expires; the run goes on from its cursor in a later one).
#[allow(async_fn_in_trait)]
pub trait Io {
    type Error;
    /// The lease's one statement: its rows.
    async fn statement(&mut self, b: Bound<'static>) -> Result<Vec<Value>, Self::Error>;
    /// A step's statements as one transaction: each statement's rows.
    async fn batch(
        &mut self,
        statements: Vec<Bound<'static>>,
    ) -> Result<Vec<Vec<Value>>, Self::Error>;
    /// A page of the provider's paid invoices, newest first, or why not.
    async fn fetch(
        &mut self,
        starting_after: Option<String>,
        paid_since: Option<i64>,
    ) -> Result<ProviderPage, String>;
    /// The guarded transition to paid (cause reconciliation, the provider's order_ref,
    /// amount, currency; facts the guard refuses still fill what the invoice lacks): whether
    /// it applied, and the status after it.
    async fn bring_to_paid(
        &mut self,
        invoice: &ProviderInvoice,
    ) -> Result<(bool, Option<String>), Self::Error>;
    /// The error for rows the walk cannot read (a schema out of step with the statements).
    fn unreadable(why: String) -> Self::Error;
}

/// Walks `walk` until it is over.
pub async fn drive<I: Io>(walk: &mut Walk, io: &mut I) -> Result<Ended, I::Error> {
    loop {
        match walk.step() {
            Step::Acquire(b) => {
                let rows = io.statement(b).await?;
                walk.ran(&[rows]).map_err(I::unreadable)?;
            }
            Step::Open(statements)
            | Step::Lookup(statements)
            | Step::Record(statements)
            | Step::Finish(statements) => {
                let rows = io.batch(statements).await?;
                walk.ran(&rows).map_err(I::unreadable)?;
            }
            Step::Fetch {
                starting_after,
                paid_since,
            } => walk.fetched(io.fetch(starting_after, paid_since).await),
            Step::BringToPaid(invoice) => {
                let (applied, status) = io.bring_to_paid(&invoice).await?;
                walk.brought(applied, status);
            }
            Step::Fill(invoice) => {
                io.bring_to_paid(&invoice).await?;
                walk.filled();
            }
            Step::Done(ended) => return Ok(ended),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::actors::reconcile::Start;

    /// A database whose lease statement answers `lease`; logs what was asked.
    struct Lease {
        lease: Result<Vec<Value>, &'static str>,
        asked: Vec<&'static str>,
    }

    impl Io for Lease {
        type Error = String;
        async fn statement(&mut self, b: Bound<'static>) -> Result<Vec<Value>, String> {
            self.asked.push(b.statement.name);
            self.lease.clone().map_err(String::from)
        }
        async fn batch(&mut self, _: Vec<Bound<'static>>) -> Result<Vec<Vec<Value>>, String> {
            Err("no run is opened in these tests".into())
        }
        async fn fetch(
            &mut self,
            _: Option<String>,
            _: Option<i64>,
        ) -> Result<ProviderPage, String> {
            unreachable!("no run, no page")
        }
        async fn bring_to_paid(
            &mut self,
            _: &ProviderInvoice,
        ) -> Result<(bool, Option<String>), String> {
            unreachable!("no run, no invoice")
        }
        fn unreadable(why: String) -> String {
            why
        }
    }

    fn walk() -> Walk {
        Walk::new(
            Start::Manual { full: true },
            "holder".into(),
            1_000,
            1_764_450_000,
        )
    }

    #[test]
    fn a_lease_held_elsewhere_ends_the_walk_after_one_statement() {
        let mut io = Lease {
            lease: Ok(Vec::new()),
            asked: Vec::new(),
        };
        let ended = crate::actors::run_at_once(drive(&mut walk(), &mut io));
        assert_eq!(ended, Ok(Ended::LeaseHeld));
        assert_eq!(io.asked.len(), 1);
    }

    #[test]
    fn a_failed_database_call_ends_the_invocation() {
        let mut io = Lease {
            lease: Err("D1_ERROR"),
            asked: Vec::new(),
        };
        let ended = crate::actors::run_at_once(drive(&mut walk(), &mut io));
        assert_eq!(ended, Err("D1_ERROR".to_string()));
    }
}
