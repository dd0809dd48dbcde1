//! Pull mode (interface §7) as part of the simulated world: no `ORDER_SYSTEM_URL`, so nothing
//! is pushed; an order system polls the effects feed (`GET /admin/api/effects?dispatch=pending`,
//! the core's `feed_page` with its `MARK_SERVED`, one transaction) page by page and
//! acknowledges what it took (`POST …/ack`, the core's `ack_effect_batch`). In a pull seed the
//! transitions release nothing to the effects queue (the core's statements, `pull: true`), and
//! the dispatcher, the effects sweeper and redeliveries stay idle, as in the Worker.
//!
//! What the simulator adds: the order system's polls, its crashes between a page and its acks
//! (what it took is re-served until acknowledged), acks that fail, D1's faults. It skips a
//! fulfilment still awaiting its `order_ref` (it cannot ship one). What it takes is checked as
//! what a pushed order system receives ((d), (e), and (h) at the end), and a fulfilment is
//! never served once its invoice's refund committed ((f), at the page).
//!
//! Its own stream, forked after every other, so a push seed is drawn as before.

use paymos_core::rows::EffectRow;
use paymos_core::statements as st;

use super::{Sim, CRON_MS};
use crate::db::Fault;
use crate::rng::Rng;

/// At most this many polls in the final drain.
const DRAIN_POLLS: usize = 200;

#[derive(Debug, Clone)]
enum State {
    /// Waiting for the next poll.
    Idle,
    /// The next page to read: after this cursor (`None`: from the start).
    Page(Option<i64>),
    /// A page's effects taken, to acknowledge one by one; then the next page, if there is one.
    Acks(Vec<String>, Option<i64>),
}

pub(super) struct Puller {
    rng: Rng,
    /// The seed runs in pull mode now (no `ORDER_SYSTEM_URL`).
    pub(super) on: bool,
    /// When an operator redeploys with the other mode (sets or unsets `ORDER_SYSTEM_URL`),
    /// if they do in this seed: once, during the chaos.
    switch_at: Option<i64>,
    limit: u32,
    period_ms: i64,
    p_crash: f64,
    state: State,
    next_at: i64,
}

impl Puller {
    pub(super) fn new(mut rng: Rng, start: i64, chaos_end: i64) -> Puller {
        let on = rng.chance(0.3);
        let period_ms = *rng.pick(&[10_000, 60_000, CRON_MS]);
        let limit = rng.range(1, 4) as u32;
        let p_crash = *rng.pick(&[0.0, 0.05, 0.2]);
        // drawn last, so that the draws above are those of the seeds before the switch
        let switch_at = rng
            .chance(0.2)
            .then(|| start + rng.below((chaos_end - start).max(1) as u64) as i64);
        Puller {
            on,
            switch_at,
            limit,
            period_ms,
            p_crash,
            state: State::Idle,
            next_at: start + period_ms,
            rng,
        }
    }

    pub(super) fn describe(&self) -> String {
        let switch = match self.switch_at {
            Some(at) => format!(
                "; the other mode from {} s",
                (at - crate::clock::EPOCH_MS) / 1000
            ),
            None => String::new(),
        };
        if !self.on {
            return format!("pull mode: off{switch}");
        }
        format!(
            "pull mode: a poll every {} s, pages of {}, the order system dies {}{switch}",
            self.period_ms / 1000,
            self.limit,
            self.p_crash
        )
    }
}

impl Sim<'_> {
    /// When the operator's redeploy with the other mode is still to come.
    pub(super) fn switch_next_time(&self) -> Option<i64> {
        self.pl.switch_at.filter(|_| self.chaos)
    }

    /// The redeploy, when it is due: the mode flips. What the Worker then does: with a URL
    /// set, the effects sweeper hands every pending effect to the queue (those the feed
    /// served included); with it unset, transitions release nothing, the dispatcher answers
    /// what is still queued `pending_pull`, and the feed serves what is pending. Attempts
    /// already under way go on. The order system that pulled stops polling (what it took
    /// and did not acknowledge stays pending).
    pub(super) fn switch_mode(&mut self) -> bool {
        if !self.chaos || self.pl.switch_at.is_none_or(|at| self.now() < at) {
            return false;
        }
        self.pl.switch_at = None;
        self.pl.on = !self.pl.on;
        self.pl.state = State::Idle;
        self.pl.next_at = self.now() + self.pl.period_ms;
        self.trace(format!(
            "operator: redeploys with ORDER_SYSTEM_URL {}",
            if self.pl.on {
                "unset (pull mode)"
            } else {
                "set (push)"
            }
        ));
        true
    }

    pub(super) fn pull_next_time(&self) -> Option<i64> {
        match self.pl.state {
            State::Idle => self.chaos.then_some(self.pl.next_at),
            _ => Some(self.now()),
        }
    }

    /// One action of the order system that pulls, if one is due. `true` if it did something.
    pub(super) fn pull_step(&mut self) -> bool {
        let now = self.now();
        match std::mem::replace(&mut self.pl.state, State::Idle) {
            State::Idle if self.chaos && now >= self.pl.next_at => {
                self.pl.next_at = now + self.pl.period_ms;
                self.fx.stats.pull_polls += 1;
                self.pl.state = State::Page(None);
            }
            State::Idle => return false,
            _ if self.chaos && self.pl.rng.chance(self.pl.p_crash) => {
                self.trace("order system: dies mid-poll (what it took is served again)".into());
            }
            State::Page(after) => self.pull_page(after),
            State::Acks(mut ids, next) => {
                if ids.is_empty() {
                    self.pl.state = next.map_or(State::Idle, |n| State::Page(Some(n)));
                } else {
                    let id = ids.remove(0);
                    self.pull_ack(&id);
                    self.pl.state = State::Acks(ids, next);
                }
            }
        }
        true
    }

    fn pull_fault(&mut self) -> Fault {
        let outage = self.in_outage();
        super::write_fault(self.chaos, outage, &self.k, &mut self.pl.rng)
    }

    /// `GET /admin/api/effects?dispatch=pending&limit=N[&cursor=…]`: served (marked) and
    /// listed in one transaction; what the order system can ship, taken.
    fn pull_page(&mut self, after: Option<i64>) {
        let limit = self.pl.limit;
        let in_flight = st::InFlight {
            seconds: self.fx_settings().in_flight_seconds(),
        };
        let page = st::feed_page(None, Some("pending"), None, after, limit, Some(in_flight));
        let fault = self.pull_fault();
        let rows = self
            .db
            .batch(&page, fault)
            .result
            .and_then(|r| r.last().cloned().unwrap_or_default().to::<EffectRow>());
        let rows = match rows {
            Ok(rows) => rows,
            Err(e) => {
                self.trace(format!("order system: the feed answered 503 ({e})"));
                return;
            }
        };
        let more = rows.len() > limit as usize;
        let page: Vec<EffectRow> = rows.into_iter().take(limit as usize).collect();
        let next = more.then(|| page.last().map(|r| r.seq)).flatten();
        let mut taken = Vec::new();
        for e in page {
            let label = format!("{}:{}", e.resource_id, e.kind);
            if e.kind == "fulfilment" && e.order_ref.is_none() {
                self.trace(format!(
                    "order system: {label} awaits its order_ref: skipped"
                ));
                continue;
            }
            // (f) in pull mode: serving is the attempt, and none starts after the refund
            if e.kind == "fulfilment" && self.refunded(&label) {
                self.violation(format!(
                    "(f) {label} was served by the feed after its invoice's refund committed"
                ));
            }
            self.trace(format!("order system: pulled {label}"));
            self.taken(&e.id, e.resource_id, e.kind);
            taken.push(e.id);
        }
        self.pl.state = State::Acks(taken, next);
    }

    /// `POST /admin/api/effects/{id}/ack`: a refusal (cancelled meanwhile, or already) changes
    /// nothing; a failure leaves it pending, served again at the next poll.
    fn pull_ack(&mut self, id: &str) {
        let fault = self.pull_fault();
        let ex = self.db.batch(&st::ack_effect_batch(id), fault);
        let label = self.label(id);
        match ex.result {
            Ok(rows) if rows.last().is_some_and(|r| !r.is_empty()) => {
                self.fx.stats.pull_acks += 1;
                self.trace(format!("order system: ack {label} → delivered"));
            }
            Ok(_) => self.trace(format!("order system: ack {label} → refused")),
            Err(e) => self.trace(format!("order system: ack {label} failed ({e})")),
        }
    }

    /// Polls with faults off until a poll takes nothing: every effect it can ship acknowledged.
    pub(super) fn pull_drain(&mut self) -> bool {
        for _ in 0..DRAIN_POLLS {
            if !self.violations.is_empty() {
                return false;
            }
            self.fx.stats.pull_polls += 1;
            let acks = self.fx.stats.pull_acks;
            self.pl.state = State::Page(None);
            while !matches!(self.pl.state, State::Idle) {
                self.pull_step();
            }
            let taken_nothing = self.fx.stats.pull_acks == acks;
            if taken_nothing {
                return self.violations.is_empty();
            }
        }
        self.violation(format!(
            "pull drain: still taking after {DRAIN_POLLS} polls"
        ));
        false
    }
}
