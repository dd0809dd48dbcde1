//! The actors' decisions, sans I/O: each actor of the protocol (the dispatcher, the
//! consumers, the dead-letter consumers, the sweepers, replay, reconciliation's page step) as
//! step functions that take the rows a driver loaded, the message, the settings and `now`, and
//! return what to do next as data (statements to run, a request to make, ack or retry with a
//! delay, a line to log). Two drivers run them: the Worker (`src/`) over D1, Queues and
//! `fetch`, and the simulator (`crates/paymos-sim`) over SQLite, its queue model and its
//! faults, which crashes a driver between any two of its steps.
//!
//! Test-only parameters (`Mutation`s) let the simulator's teeth revert a fix in this shared
//! code; production drivers always pass the default (none).

pub mod archive;
pub mod consume;
pub mod cron;
pub mod dead_letter;
pub mod dispatch;
pub mod reconcile;
pub mod sweep;
pub mod transition;

/// A queue message's answer, as both drivers give it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// Done with it (processed, or nothing to do).
    Ack,
    /// Deliver it again after this many seconds (the queue counts it against `max_retries`).
    Retry(u32),
    /// Done with it, and send a fresh message for the same work after this many seconds (a
    /// wait that must not spend the queue's retries).
    AckAndSendAfter(u32),
}

/// Runs a driver whose I/O never makes it wait to its end, in one poll (the drivers' tests).
#[cfg(test)]
pub(crate) fn run_at_once<F: std::future::Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match f.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(out) => out,
        std::task::Poll::Pending => panic!("this I/O never makes the driver wait"),
    }
}
