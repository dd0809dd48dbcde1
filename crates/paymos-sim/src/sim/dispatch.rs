//! The effects outbox's dispatcher (interface §3, §7) as part of the simulated world: the
//! effects queue (at least once), the **core's** dispatcher (`paymos_core::actors::dispatch`,
//! its `drive` over its `Batch`: the very code the Worker runs) over SQLite, its dead-letter
//! queue (the core's `dispatch::dead_letter`), the effects sweeper (`CLAIM_EFFECTS` at cron
//! times), an operator's `REDELIVER_EFFECT`, and a simulated order system that records every
//! POST it takes, with latency.
//!
//! What is the simulator's own here is the world and the checks: the queue, the faults, the
//! order system, the crashes between the driver's steps (including the one between an
//! attempt's commit and its request), and the invariants.
//!
//! It runs in its own lane: every step of the scheduler first gives it one action, drawn from
//! its own random stream, and the clock stops at its times when nothing else is due. It never
//! draws from the other streams nor counts as a step, so the rest of a seed's schedule is what
//! it would be without it.

use std::collections::BTreeMap;

use paymos_core::actors::dispatch::{self, Batch, DeadLetter, PostError, Push, Reply};
use paymos_core::actors::Answer;
use paymos_core::rows::{DispatchRow, StartedAttempt};
use paymos_core::statements::{self as st, Arg, Bound};
use paymos_core::time::unix_of_iso;

use super::{Sim, CRON_MS};
use crate::clock;
use crate::coroutine::{Coroutine, Port, Resumed, Returned};
use crate::db::Fault;
use crate::queue::{Msg, Queue};
use crate::rng::Rng;

/// wrangler.toml: `max_retries = 20` on the effects queue.
pub const EFFECTS_MAX_RETRIES: u32 = 20;
/// The effects dead-letter queue's consumer: the platform's default.
const EFFECTS_DLQ_MAX_RETRIES: u32 = 3;
/// At most this many lane actions in the final effects drain.
const EFFECTS_DRAIN_MAX: usize = 20_000;
/// `ORDER_SYSTEM_TIMEOUT_MS`: an answer later than this is a timeout for the dispatcher.
const TIMEOUT_MS: i64 = 10_000;

/// A message of the effects queue: `{effect_id}` and what the platform keeps about it.
type EMsg = Msg<String>;

/// A POST the simulated order system took (its answer may have been lost).
#[derive(Debug, Clone)]
struct Received {
    id: String,
    kind: String,
    resource: String,
}

/// A POST on its way: it reaches the order system, and its answer the dispatcher, at `until`.
#[derive(Debug, Clone)]
struct Flight {
    id: String,
    /// Its place in the wave.
    at: usize,
    until: i64,
}

/// What the core's dispatcher driver (`dispatch::drive`) asks of the world, one call at a time.
#[derive(Debug)]
enum Call {
    Load(Bound<'static>),
    Start(Bound<'static>),
    Post(Vec<(String, String)>),
    Record(Vec<Bound<'static>>),
}

/// The driver's answers, and the D1 failure that ended it early.
type Driven = (Vec<Reply>, Option<String>);
type Dispatcher = Coroutine<Call, Driven>;

/// The dispatcher's I/O in the simulated world: every call goes to the lane's scheduler.
struct Io(Port<Call>);

impl dispatch::Io for Io {
    type Error = String;
    fn now(&self) -> i64 {
        clock::now_ms() / 1000
    }
    async fn load(&mut self, b: Bound<'static>) -> Result<Vec<DispatchRow>, String> {
        self.0.call(Call::Load(b)).await
    }
    async fn start(&mut self, b: Bound<'static>) -> Result<Vec<StartedAttempt>, String> {
        self.0.call(Call::Start(b)).await
    }
    async fn post(&mut self, wave: &[(String, String)]) -> Vec<Result<(), PostError>> {
        self.0.call(Call::Post(wave.to_vec())).await
    }
    async fn record(&mut self, statements: Vec<Bound<'static>>) -> Result<Vec<bool>, String> {
        self.0.call(Call::Record(statements)).await
    }
}

/// The core's driver over a new batch, as `effects::consume` runs it.
fn dispatcher(mut batch: Batch) -> Dispatcher {
    Coroutine::new(|port| async move {
        match dispatch::drive(&mut batch, &mut Io(port)).await {
            Ok(replies) => (replies, None),
            Err(e) => (batch.db_failed(&e), Some(e)),
        }
    })
}

/// Where a dispatcher invocation stands between two actions.
#[derive(Debug)]
enum Next {
    /// Resume its driver with what its last call returned.
    Resume(Option<Returned>),
    /// Execute this call (asked at the end of the last action).
    Execute(Call),
}

#[derive(Debug)]
enum DActor {
    Dispatch {
        msgs: Vec<EMsg>,
        driver: Box<Dispatcher>,
        next: Next,
        /// A wave's POSTs in the air, and the results of those that landed.
        flights: Vec<Flight>,
        landed: Vec<Option<Result<(), PostError>>>,
    },
    DeadLetter {
        msg: EMsg,
        done: bool,
    },
}

impl DActor {
    /// When it can act next (a batch whose POSTs are all in flight waits for the first).
    fn ready_at(&self) -> Option<i64> {
        match self {
            DActor::Dispatch { flights, .. } if !flights.is_empty() => {
                flights.iter().map(|f| f.until).min()
            }
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum LCand {
    Actor(usize),
    Dispatch,
    DeadLetter,
    Sweep,
    Redeliver,
}

counters! {
#[derive(Debug, Clone, Default)]
pub struct EffectStats {
    pub effects: usize,
    pub effect_messages: usize,
    pub posts: usize,
    pub received: usize,
    pub delivered: usize,
    /// Looks deferred behind an earlier effect of the resource (pending, or a cancelled
    /// fulfilment's last attempt possibly in flight).
    pub waited_for_earlier: usize,
    /// Attempts the core decided to start whose start returned nothing (cancelled by their
    /// refund meanwhile, or another copy started first).
    pub not_started: usize,
    pub dispatch_d1_failures: usize,
    pub claimed: usize,
    pub redelivered: usize,
    pub dead_by_ladder: usize,
    /// Dead letters the effects DLQ handed back to the dispatcher (never marked dead).
    pub handed_back: usize,
    /// Fulfilments a refund cancelled, and of those, the ones it also revoked (attempted).
    pub cancelled: usize,
    pub cancelled_and_revoked: usize,
    /// At the end: a fulfilment the order system took whose revocation is dead by its ladder.
    pub fulfilled_revocation_dead: usize,
    /// Fulfilments left pending at the end because their order_ref was never learned.
    pub awaiting_order_ref_at_end: usize,
    /// Pull mode (`pull.rs`): the order system's polls of the feed, and its acks that
    /// marked an effect delivered.
    pub pull_polls: usize,
    pub pull_acks: usize,
}
}

/// The dispatcher's part of a seed.
pub(super) struct Fx {
    rng: Rng,
    /// `EFFECT_RETRY_SCALE`.
    scale: f64,
    /// Concurrent dispatcher invocations, and `max_batch_size`.
    dispatchers: usize,
    batch: usize,
    /// The order system: 5xx rate, rate of POSTs taken whose answer is lost, a window in
    /// which it answers nothing but 503.
    p_fail: f64,
    p_timeout: f64,
    down: Option<(i64, i64)>,
    queue: Queue<String>,
    dlq: Queue<String>,
    actors: Vec<DActor>,
    busy: usize,
    dlq_busy: bool,
    next_cron: i64,
    /// Times an operator redelivers an effect (`POST /admin/api/effects/{id}/redeliver`).
    redeliveries: Vec<i64>,
    /// Every POST the order system took, in the order it took them.
    received: Vec<Received>,
    labels: BTreeMap<String, String>,
    pub stats: EffectStats,
}

impl Fx {
    pub(super) fn new(mut rng: Rng, start: i64, chaos_end: i64) -> Fx {
        let scale = *rng.pick(&[1.0, 1.0 / 15.0, 1.0 / 60.0]);
        // an order system down for a minute to two hours: longer than a compressed ladder, so
        // that some effects go dead by it (visible, redeliverable) and the 16 hours are tested
        let down = rng.chance(0.3).then(|| {
            let s = start + rng.below((chaos_end - start).max(1) as u64) as i64;
            (s, s + rng.range(60_000, 7_200_000) as i64)
        });
        let mut redeliveries: Vec<i64> = (0..rng.below(3))
            .map(|_| start + rng.below((chaos_end - start).max(1) as u64) as i64)
            .collect();
        redeliveries.sort_unstable();
        Fx {
            scale,
            dispatchers: rng.range(1, 3) as usize,
            batch: rng.range(1, 4) as usize,
            p_fail: *rng.pick(&[0.0, 0.1, 0.3]),
            p_timeout: *rng.pick(&[0.0, 0.05, 0.2]),
            down,
            queue: Queue::new(EFFECTS_MAX_RETRIES),
            dlq: Queue::new(EFFECTS_DLQ_MAX_RETRIES),
            actors: Vec::new(),
            busy: 0,
            dlq_busy: false,
            next_cron: start + CRON_MS,
            redeliveries,
            received: Vec::new(),
            labels: BTreeMap::new(),
            stats: EffectStats::default(),
            rng,
        }
    }

    pub(super) fn describe(&self) -> String {
        format!(
            "effects: scale {:.4}, {} dispatcher(s) of batch {}, order system 5xx {}, \
             timeouts {}, down {:?}, {} redelivery op(s)",
            self.scale,
            self.dispatchers,
            self.batch,
            self.p_fail,
            self.p_timeout,
            self.down,
            self.redeliveries.len()
        )
    }

    fn quiet(&self) -> bool {
        self.queue.is_empty() && self.dlq.is_empty() && self.actors.is_empty()
    }
}

impl Sim<'_> {
    // ------------------------------------------------------------------ faults (own stream)

    fn fx_chaos(&self) -> bool {
        self.chaos
    }

    fn fx_fault_read(&mut self) -> Fault {
        if !self.fx_chaos() {
            return Fault::None;
        }
        if self.in_outage() || self.fx.rng.chance(self.k.p_d1) {
            Fault::Before
        } else {
            Fault::None
        }
    }

    pub(super) fn fx_fault_batch(&mut self, n: usize) -> Fault {
        if !self.fx_chaos() {
            return Fault::None;
        }
        if self.in_outage() {
            Fault::Before
        } else if self.fx.rng.chance(self.k.p_d1) {
            match self.fx.rng.below(n as u64) as usize {
                0 => Fault::Before,
                i => Fault::At(i),
            }
        } else if self.fx.rng.chance(self.k.p_after_commit) {
            Fault::AfterCommit
        } else {
            Fault::None
        }
    }

    fn fx_crash(&mut self) -> bool {
        self.fx_chaos() && self.fx.rng.chance(self.k.p_crash)
    }

    pub(super) fn fx_settings(&self) -> dispatch::Settings {
        dispatch::Settings {
            scale: self.fx.scale,
            timeout_ms: TIMEOUT_MS as u64,
            mutation: self.opts.mutations.dispatch,
        }
    }

    /// A stable name for an effect in the trace (`effect_id` is random: never traced, never
    /// ordered by).
    pub(super) fn label(&mut self, id: &str) -> String {
        if let Some(l) = self.fx.labels.get(id) {
            return l.clone();
        }
        let rows = self
            .db
            .read(&(st::LOAD_EFFECT.bind(vec![Arg::text(id)])).into_owned());
        let l = if rows.is_empty() {
            "unknown effect".to_string()
        } else {
            format!(
                "{}:{}",
                rows.text(0, "resource_id").unwrap_or_default(),
                rows.text(0, "kind").unwrap_or_default()
            )
        };
        self.fx.labels.insert(id.to_string(), l.clone());
        l
    }

    fn labels(&mut self, ids: &[String]) -> String {
        ids.iter()
            .map(|i| self.label(i))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The one effect `id` as the dispatcher loads it (the checker's read).
    fn dispatch_row(&mut self, id: &str) -> Option<DispatchRow> {
        let rows = self
            .db
            .read(&(st::LOAD_EFFECTS_FOR_DISPATCH.bind(vec![Arg::json_list(&[id])])).into_owned());
        rows.to::<DispatchRow>().ok()?.into_iter().next()
    }

    // ------------------------------------------------------------------ the queue

    /// `queue::enqueue_effects`: `Ok`, or an error after which the messages may or may not be
    /// on the queue.
    pub(super) fn fx_send(&mut self, ids: &[String], who: &str) {
        if ids.is_empty() {
            return;
        }
        let names = self.labels(ids);
        let msgs = ids
            .iter()
            .map(|id| Msg::new(id.clone(), self.now()))
            .collect();
        let sent = self.fx.queue.send(self.platform(), msgs, &mut self.fx.rng);
        if sent.enqueued {
            self.fx.stats.effect_messages += ids.len();
        }
        self.trace(format!(
            "effects: {who} enqueues [{names}] {}",
            match (sent.failed, sent.enqueued) {
                (false, _) => "ok",
                (true, true) => "failed (enqueued anyway)",
                (true, false) => "failed (left to the sweeper)",
            }
        ));
    }

    /// `queue::enqueue_effect_after`: one fresh message (its own attempts), visible after
    /// `delay_ms`; whether it was sent (the dispatcher leaves an unsent one to the sweeper, the
    /// dead letter tries again).
    fn fx_send_after(&mut self, id: &str, delay_ms: i64) -> bool {
        let l = self.label(id);
        if self.platform().send_fails(&mut self.fx.rng) {
            self.trace(format!("effects: fresh message for {l} not sent"));
            return false;
        }
        self.fx.stats.effect_messages += 1;
        self.fx
            .queue
            .push(Msg::new(id.to_string(), self.now() + delay_ms));
        true
    }

    /// `message.retry_in(delay)` (or an invocation that died): another attempt, or the
    /// dead-letter queue once `max_retries` are spent.
    fn fx_retry(&mut self, msg: EMsg, delay_ms: i64) {
        let Err(msg) = self.fx.queue.retry(msg, self.now(), delay_ms) else {
            return;
        };
        let l = self.label(&msg.body);
        self.trace(format!(
            "effects queue: {l} exhausted {} attempts → dead-letter queue",
            msg.attempts
        ));
        self.fx
            .dlq
            .dead_letter(msg.body, self.now(), &mut self.fx.rng);
    }

    fn fx_ack(&mut self, msg: EMsg) {
        self.fx
            .queue
            .ack(self.platform(), msg, self.now(), &mut self.fx.rng);
    }

    // ------------------------------------------------------------------ the lane

    fn fx_candidates(&self) -> Vec<LCand> {
        let now = self.now();
        let mut c: Vec<LCand> = (0..self.fx.actors.len())
            .filter(|i| self.fx.actors[*i].ready_at().is_none_or(|t| t <= now))
            .map(LCand::Actor)
            .collect();
        if self.fx.busy < self.fx.dispatchers && self.fx.queue.visible(now) > 0 {
            c.push(LCand::Dispatch);
        }
        if !self.fx.dlq_busy && self.fx.dlq.visible(now) > 0 {
            c.push(LCand::DeadLetter);
        }
        // in pull mode the Worker's effects sweeper sends nothing (no URL), and the
        // simulator's operators redeliver only while effects are pushed
        if now >= self.fx.next_cron && !self.pl.on {
            c.push(LCand::Sweep);
        }
        if self.fx_chaos() && !self.pl.on && self.fx.redeliveries.first().is_some_and(|t| *t <= now)
        {
            c.push(LCand::Redeliver);
        }
        c
    }

    /// When the lane next has something to do (the clock stops there).
    pub(super) fn fx_next_time(&self) -> Option<i64> {
        let actors = self
            .fx
            .actors
            .iter()
            .map(|a| a.ready_at().unwrap_or(self.now()));
        let q = self.fx.queue.times().chain(self.fx.dlq.times());
        let ops = (self.fx_chaos() && !self.pl.on)
            .then(|| self.fx.redeliveries.first().copied())
            .flatten();
        actors.chain(q).chain(ops).min()
    }

    /// One action of the dispatcher's lane, if one is due. `true` if it did something.
    pub(super) fn fx_step(&mut self) -> bool {
        let cands = self.fx_candidates();
        if cands.is_empty() {
            return false;
        }
        let pick = *self.fx.rng.pick(&cands);
        match pick {
            LCand::Actor(i) => match self.fx.actors.swap_remove(i) {
                DActor::Dispatch {
                    msgs,
                    driver,
                    next,
                    flights,
                    landed,
                } => self.dispatch(msgs, driver, next, flights, landed),
                DActor::DeadLetter { msg, done } => self.fx_dead_letter(msg, done),
            },
            LCand::Dispatch => {
                let msgs = self.take_batch();
                let messages = msgs
                    .iter()
                    .map(|m| dispatch::Message {
                        effect_id: m.body.clone(),
                        attempts: m.attempts,
                    })
                    .collect();
                // a message still queued when the redeploy unset the URL: `pending_pull`
                let push = if self.pl.on { Push::Pull } else { Push::To };
                let batch = Batch::new(messages, push, self.fx_settings());
                self.fx.busy += 1;
                let driver = Box::new(dispatcher(batch));
                self.dispatch(msgs, driver, Next::Resume(None), Vec::new(), Vec::new());
            }
            LCand::DeadLetter => {
                let msg = self.fx.dlq.take_first(self.now());
                let msg = msg.expect("a visible dead letter");
                self.fx.dlq_busy = true;
                self.fx_dead_letter(msg, false);
            }
            LCand::Sweep => {
                self.fx.next_cron += CRON_MS * ((self.now() - self.fx.next_cron) / CRON_MS + 1);
                self.fx_sweep();
            }
            LCand::Redeliver => {
                self.fx.redeliveries.remove(0);
                self.fx_redeliver();
            }
        }
        true
    }

    /// 1 to `max_batch_size` visible messages, in any order.
    fn take_batch(&mut self) -> Vec<EMsg> {
        let now = self.now();
        let max = self.fx.batch.min(self.fx.queue.visible(now));
        let n = self.fx.rng.range(1, max as u64) as usize;
        self.fx.queue.take(n, now, &mut self.fx.rng)
    }

    // ------------------------------------------------------------------ the dispatcher

    /// One action of a dispatcher invocation: a POST's answer lands, or its driver (the
    /// core's `dispatch::drive`, the Worker's) is resumed to its next call, which is executed
    /// with the simulated platform's faults. It may die before any action (every message
    /// comes back), between an attempt's commit and its request included.
    fn dispatch(
        &mut self,
        msgs: Vec<EMsg>,
        mut driver: Box<Dispatcher>,
        next: Next,
        mut flights: Vec<Flight>,
        mut landed: Vec<Option<Result<(), PostError>>>,
    ) {
        if self.fx_crash() {
            let at = if flights.is_empty() {
                ""
            } else {
                " with requests in flight"
            };
            return self.fx_died(msgs, &format!("died{at}"));
        }
        let now = self.now();
        if let Some(i) = flights.iter().position(|f| f.until <= now) {
            // a POST's answer (or its timeout) reaches the dispatcher
            let flight = flights.swap_remove(i);
            landed[flight.at] = Some(self.order_system(&flight.id));
            let next = if flights.is_empty() {
                let results: Vec<Result<(), PostError>> =
                    landed.drain(..).map(|r| r.expect("landed")).collect();
                Next::Resume(Some(Box::new(results)))
            } else {
                next
            };
            return self.fx_park(msgs, driver, next, flights, landed);
        }
        if !flights.is_empty() {
            return self.fx_park(msgs, driver, next, flights, landed);
        }
        let call = match next {
            Next::Execute(call) => call,
            Next::Resume(returned) => match driver.resume(returned) {
                Resumed::Asks(call) => call,
                Resumed::Done(driven) => return self.fx_done(msgs, driven),
            },
        };
        let next = match call {
            Call::Load(b) => Next::Resume(Some(Box::new(self.fx_load(&b)))),
            Call::Start(b) => {
                let started = self.fx_start(&b);
                if started.is_err() {
                    Next::Resume(Some(Box::new(started)))
                } else if self.fx_crash() {
                    // the requests start at once, in the same invocation, unless it dies
                    // right here, between the commit and the requests
                    return self
                        .fx_died(msgs, "died between its attempts' commit and their requests");
                } else {
                    match driver.resume(Some(Box::new(started))) {
                        Resumed::Asks(Call::Post(wave)) => {
                            self.fx_take_off(&wave, &mut flights, &mut landed);
                            Next::Resume(None)
                        }
                        // nothing started: on to the record, at the next action
                        Resumed::Asks(call) => Next::Execute(call),
                        // nothing started, nothing to record
                        Resumed::Done(driven) => return self.fx_done(msgs, driven),
                    }
                }
            }
            Call::Post(wave) => {
                // a later wave, or the mutation that posts before it starts
                self.fx_take_off(&wave, &mut flights, &mut landed);
                Next::Resume(None)
            }
            Call::Record(statements) => Next::Resume(Some(Box::new(self.fx_record(&statements)))),
        };
        self.fx_park(msgs, driver, next, flights, landed)
    }

    /// The driver ended: each message answered as it said.
    fn fx_done(&mut self, msgs: Vec<EMsg>, (replies, failure): Driven) {
        if let Some(why) = failure {
            self.fx.stats.dispatch_d1_failures += 1;
            self.trace(format!("dispatcher: {why}; every message retried"));
        }
        self.fx.busy -= 1;
        self.fx_answer(msgs, replies);
    }

    fn fx_load(&mut self, b: &Bound<'static>) -> Result<Vec<DispatchRow>, String> {
        let fault = self.fx_fault_read();
        let rows = self
            .db
            .run(b, fault)
            .result
            .and_then(|r| r[0].to::<DispatchRow>())?;
        for r in &rows {
            self.label(&r.effect.id);
        }
        self.trace("dispatcher loaded its batch".into());
        Ok(rows)
    }

    /// `START_ATTEMPTS`; what it committed is checked whether or not its caller saw it.
    fn fx_start(&mut self, b: &Bound<'static>) -> Result<Vec<StartedAttempt>, String> {
        let fault = self.fx_fault_batch(1);
        let ex = self.db.run(b, fault);
        let returned = ex.result.and_then(|r| r[0].to::<StartedAttempt>());
        if ex.committed {
            let ids: Vec<String> = returned
                .as_ref()
                .map(|r| r.iter().map(|a| a.effect_id.clone()).collect())
                .unwrap_or_else(|_| self.started_now(b));
            self.check_started(&ids);
        }
        if let Ok(started) = &returned {
            let ids: Vec<String> = started.iter().map(|s| s.effect_id.clone()).collect();
            let names = self.labels(&ids);
            self.trace(format!(
                "dispatcher started {} attempt(s): [{names}]",
                started.len()
            ));
        }
        returned
    }

    /// The outcome batch, checked once it committed.
    fn fx_record(&mut self, statements: &[Bound<'static>]) -> Result<Vec<bool>, String> {
        let fault = self.fx_fault_batch(statements.len());
        let before = self.dead_candidates(statements);
        let ex = self.db.batch(statements, fault);
        if ex.committed {
            self.check_delivered_received("after the outcome batch");
            self.check_dead(&before);
        }
        match ex.result {
            Ok(rows) => {
                self.fx.stats.waited_for_earlier += statements
                    .iter()
                    .filter(|b| std::ptr::eq(b.statement, &st::DEFER_EFFECT))
                    .count();
                self.trace(format!(
                    "dispatcher recorded {} outcome(s)",
                    statements.len()
                ));
                Ok(rows.iter().map(|r| !r.is_empty()).collect())
            }
            Err(e) if ex.committed => Err(format!("{e} (the outcomes committed)")),
            Err(e) => Err(e),
        }
    }

    /// The invocation died: every message it held comes back, after a while.
    fn fx_died(&mut self, msgs: Vec<EMsg>, how: &str) {
        let names: Vec<String> = msgs.iter().map(|m| m.body.clone()).collect();
        let names = self.labels(&names);
        self.trace(format!(
            "dispatcher [{names}] {how}; the messages come back"
        ));
        self.fx.busy -= 1;
        for m in msgs {
            let delay = self.fx.rng.below(30_000) as i64;
            self.fx_retry(m, delay);
        }
    }

    /// The invocation goes on at a later action.
    fn fx_park(
        &mut self,
        msgs: Vec<EMsg>,
        driver: Box<Dispatcher>,
        next: Next,
        flights: Vec<Flight>,
        landed: Vec<Option<Result<(), PostError>>>,
    ) {
        self.fx.actors.push(DActor::Dispatch {
            msgs,
            driver,
            next,
            flights,
            landed,
        });
    }

    /// A wave's requests leave now; each reaches the order system (and its answer the
    /// dispatcher) after its own latency, up to the timeout.
    fn fx_take_off(
        &mut self,
        wave: &[(String, String)],
        flights: &mut Vec<Flight>,
        landed: &mut Vec<Option<Result<(), PostError>>>,
    ) {
        *landed = vec![None; wave.len()];
        for (at, (id, _)) in wave.iter().enumerate() {
            let l = self.label(id);
            self.check_sent(id);
            let latency = self.fx.rng.below(TIMEOUT_MS as u64) as i64;
            self.trace(format!("dispatcher: POST {l} leaves ({latency} ms)"));
            flights.push(Flight {
                id: id.clone(),
                at,
                until: self.now() + latency,
            });
        }
    }

    /// Each message answered as the core said.
    fn fx_answer(&mut self, msgs: Vec<EMsg>, replies: Vec<dispatch::Reply>) {
        let mut msgs: Vec<Option<EMsg>> = msgs.into_iter().map(Some).collect();
        for r in replies {
            let Some(m) = msgs.get_mut(r.message).and_then(Option::take) else {
                continue;
            };
            let l = self.label(&m.body);
            self.trace(format!(
                "dispatcher: {l} {} ({}) → {:?}",
                r.outcome,
                r.detail.as_deref().unwrap_or(""),
                r.answer
            ));
            if r.outcome == "not_started" {
                self.fx.stats.not_started += 1;
            }
            match r.answer {
                Answer::Ack => self.fx_ack(m),
                Answer::Retry(delay) => self.fx_retry(m, i64::from(delay) * 1000),
                Answer::AckAndSendAfter(delay) => {
                    // not sent: the sweeper sends it once the deferral is past
                    self.fx_send_after(&r.effect_id, i64::from(delay) * 1000);
                    self.fx_ack(m);
                }
            }
        }
    }

    /// The effects a START committed when its caller saw an error (`AfterCommit`): those whose
    /// attempt started at this very moment.
    fn started_now(&mut self, b: &paymos_core::statements::Bound<'static>) -> Vec<String> {
        let Arg::Text(ids) = &b.args[0] else {
            return Vec::new();
        };
        let ids: Vec<String> = serde_json::from_str(ids).unwrap_or_default();
        ids.into_iter()
            .filter(|id| {
                self.dispatch_row(id).is_some_and(|r| {
                    r.effect.attempt_started_at.as_deref().and_then(unix_of_iso)
                        == Some(self.now() / 1000)
                })
            })
            .collect()
    }

    // ------------------------------------------------------------------ the order system

    /// The simulated order system takes one POST: 2xx, 5xx (not taken), or taken with the
    /// answer lost (the dispatcher's timeout). Checks (d) and the order of fulfilment and
    /// revocation on what it takes.
    fn order_system(&mut self, id: &str) -> Result<(), PostError> {
        self.fx.stats.posts += 1;
        let l = self.label(id);
        let (resource, kind) = l.split_once(':').unwrap_or(("?", "?"));
        let (resource, kind) = (resource.to_string(), kind.to_string());
        let now = self.now();
        let down = self.fx_chaos() && self.fx.down.is_some_and(|(s, e)| (s..e).contains(&now));
        if down || (self.fx_chaos() && self.fx.rng.chance(self.fx.p_fail)) {
            self.trace(format!("order system: POST {l} → 503"));
            return Err(PostError::Status(503));
        }
        self.taken(id, resource, kind);
        if self.fx_chaos() && self.fx.rng.chance(self.fx.p_timeout) {
            self.trace(format!(
                "order system: POST {l} taken, the answer is lost (timeout)"
            ));
            return Err(PostError::Timeout {
                ms: TIMEOUT_MS as u64,
            });
        }
        self.trace(format!("order system: POST {l} → 200"));
        Ok(())
    }

    /// The order system has effect `id` (a POST it took, or a feed page it pulled), checked
    /// against what it took before.
    pub(super) fn taken(&mut self, id: &str, resource: String, kind: String) {
        // (d) exactly once per effect id at the business level
        if self
            .fx
            .received
            .iter()
            .any(|x| x.resource == resource && x.kind == kind && x.id != id)
        {
            self.violation(format!(
                "(d) the order system received two different effect ids for {resource}'s {kind}"
            ));
        }
        // (e) a fulfilment never reaches the order system after its revocation did: the
        // revocation waits until the fulfilment's last attempt is past its timeout
        if kind == "fulfilment"
            && self
                .fx
                .received
                .iter()
                .any(|x| x.resource == resource && x.kind == "revocation")
        {
            self.violation(format!(
                "(e) the order system received {resource}'s fulfilment after its revocation"
            ));
        }
        if !self.fx.received.iter().any(|x| x.id == id) {
            self.fx.stats.received += 1;
        }
        self.fx.received.push(Received {
            id: id.to_string(),
            kind,
            resource,
        });
    }

    // ------------------------------------------------------------------ invariants

    /// (f) No attempt to send a fulfilment starts after its invoice's refund committed: read
    /// right after the attempts' commit, the invoice is not refunded.
    fn check_started(&mut self, ids: &[String]) {
        for id in ids {
            let l = self.label(id);
            if l.ends_with(":fulfilment") && self.refunded(&l) {
                self.violation(format!(
                    "(f) an attempt to send {l} started after its invoice's refund committed"
                ));
            }
        }
    }

    /// (f), at the request: a fulfilment is sent only under an attempt committed before its
    /// invoice's refund (its `attempt_started_at` is now, in the same invocation).
    fn check_sent(&mut self, id: &str) {
        let l = self.label(id);
        if !l.ends_with(":fulfilment") || !self.refunded(&l) {
            return;
        }
        let started_now = self.dispatch_row(id).is_some_and(|r| {
            r.effect.attempt_started_at.as_deref().and_then(unix_of_iso) == Some(self.now() / 1000)
        });
        if !started_now {
            self.violation(format!(
                "(f) {l} was sent after its invoice's refund committed, under no attempt \
                 committed before it"
            ));
        }
    }

    pub(super) fn refunded(&mut self, label: &str) -> bool {
        let resource = label.split(':').next().unwrap_or_default();
        self.db
            .read(&(st::LOAD_RESOURCE.bind(vec![Arg::text(resource)])).into_owned())
            .text(0, "status")
            .as_deref()
            == Some("refunded")
    }

    /// The effects a record batch may mark dead, with their ladder's first attempt.
    fn dead_candidates(
        &mut self,
        statements: &[paymos_core::statements::Bound<'static>],
    ) -> Vec<(String, Option<String>)> {
        statements
            .iter()
            .filter(|b| std::ptr::eq(b.statement, &st::MARK_EFFECT_DEAD))
            .filter_map(|b| match &b.args[0] {
                Arg::Text(id) => Some(id.to_string()),
                _ => None,
            })
            .map(|id| {
                let first = self
                    .dispatch_row(&id)
                    .and_then(|r| r.effect.first_attempt_at.clone());
                (id, first)
            })
            .collect()
    }

    /// (g) No effect goes dead less than 16 hours (scaled as the ladder) after its first
    /// attempt, however many copies of its message ran; so none goes dead through a D1
    /// outage either, which spends no attempt.
    fn check_dead(&mut self, candidates: &[(String, Option<String>)]) {
        let need = self.fx_settings().min_retry_seconds();
        for (id, first) in candidates {
            let now_dead = self
                .dispatch_row(id)
                .is_some_and(|r| r.effect.dispatch == "dead");
            if !now_dead {
                continue;
            }
            self.fx.stats.dead_by_ladder += 1;
            let l = self.label(id);
            let Some(first) = first.as_deref().and_then(unix_of_iso) else {
                self.violation(format!("(g) {l} went dead without a first attempt"));
                continue;
            };
            let lived = self.now() / 1000 - first;
            if lived < need {
                self.violation(format!(
                    "(g) {l} went dead {lived} s after its first attempt (at least {need} s)"
                ));
            }
        }
    }

    /// (b) an effect recorded `delivered` was received at least once.
    pub(super) fn check_delivered_received(&mut self, when: &str) {
        let rows = self.db.inspect(
            "SELECT effect_id, resource_id, kind FROM effect WHERE dispatch = 'delivered'",
        );
        for i in 0..rows.rows.len() {
            let id = rows.text(i, "effect_id").unwrap_or_default();
            if !self.fx.received.iter().any(|x| x.id == id) {
                self.violation(format!(
                    "(b) {}'s {} is recorded delivered, the order system never received it ({when})",
                    rows.text(i, "resource_id").unwrap_or_default(),
                    rows.text(i, "kind").unwrap_or_default()
                ));
            }
        }
    }

    // ------------------------------------------------------------------ dead letters, sweeper

    /// The effects dead-letter queue (`effects::dead_letter`): the core's verdict, a fresh
    /// message for a pending effect.
    fn fx_dead_letter(&mut self, msg: EMsg, done: bool) {
        let l = self.label(&msg.body);
        if done {
            self.fx.dlq_busy = false;
            self.trace(format!("effects dead-letter: {l} acked"));
            self.fx
                .dlq
                .ack(self.platform(), msg, self.now(), &mut self.fx.rng);
            return;
        }
        let fault = if self.fx_crash() {
            Fault::Before
        } else {
            self.fx_fault_read()
        };
        let b = (st::LOAD_EFFECTS_FOR_DISPATCH.bind(vec![Arg::json_list(&[msg.body.as_str()])]))
            .into_owned();
        let ex = self.db.run(&b, fault);
        match ex.result.and_then(|r| r[0].to::<DispatchRow>()) {
            Ok(rows) => {
                match dispatch::dead_letter(rows.first(), self.now() / 1000) {
                    DeadLetter::Done(why) => {
                        self.trace(format!("effects dead-letter: {l} {why}"));
                    }
                    DeadLetter::Requeue(delay) => {
                        if !self.fx_send_after(&msg.body, i64::from(delay) * 1000) {
                            self.fx_dead_letter_retry(msg, "its fresh message not sent");
                            return;
                        }
                        self.fx.stats.handed_back += 1;
                        self.trace(format!(
                            "effects dead-letter: {l} handed back to the dispatcher in {delay}s"
                        ));
                    }
                }
                self.fx.actors.push(DActor::DeadLetter { msg, done: true });
            }
            Err(e) => self.fx_dead_letter_retry(msg, &e),
        }
    }

    /// `message.retry_in(DEAD_LETTER_RETRY_SECONDS)` on the dead letter (`effects::dead_letter`).
    fn fx_dead_letter_retry(&mut self, msg: EMsg, why: &str) {
        let l = self.label(&msg.body);
        self.fx.dlq_busy = false;
        let delay = dispatch::DEAD_LETTER_RETRY_SECONDS;
        match self.fx.dlq.retry(msg, self.now(), i64::from(delay) * 1000) {
            Err(_) => self.trace(format!("effects dead-letter: {l} dropped after {why}")),
            Ok(()) => self.trace(format!("effects dead-letter: {l} {why}; retry in {delay}s")),
        }
    }

    /// An operator redelivers an effect (a dead one if any, else any): `REDELIVER_EFFECT`,
    /// then enqueue unless it awaits its order_ref.
    fn fx_redeliver(&mut self) {
        let rows = self
            .db
            .inspect("SELECT effect_id FROM effect ORDER BY (dispatch = 'dead') DESC, id");
        if rows.is_empty() {
            return;
        }
        let dead = self
            .db
            .inspect("SELECT count(*) AS n FROM effect WHERE dispatch = 'dead'")
            .int(0, "n")
            .unwrap_or(0) as usize;
        let i = if dead > 0 {
            self.fx.rng.below(dead as u64) as usize
        } else {
            self.fx.rng.below(rows.rows.len() as u64) as usize
        };
        let id = rows.text(i, "effect_id").unwrap_or_default();
        let l = self.label(&id);
        let fault = match self.fx_fault_batch(1) {
            Fault::At(_) => Fault::Before,
            f => f,
        };
        // every other time an operator had dismissed it first (handled), then redelivers it
        // after all: a redelivery ends a dismissal (decided without a draw, so that the
        // lane's schedule is the same as without dismissals)
        if self.fx.stats.redelivered.is_multiple_of(2) {
            let ex = self.db.batch(
                &st::dismiss_effect_batch(&id, "handled by hand"),
                Fault::None,
            );
            if ex
                .result
                .is_ok_and(|r| r.last().is_some_and(|x| !x.is_empty()))
            {
                self.trace(format!("operator: dismiss dead {l}"));
            }
        }
        let ex = self.db.batch(&st::redeliver_batch(&id), fault);
        let ex = paymos_sim_last(ex);
        match ex.result {
            Ok(r) if r[0].is_empty() => {
                // a cancelled fulfilment, or one whose invoice has a revocation: 409
                self.trace(format!("operator: redeliver {l} refused (cancelled)"));
            }
            Ok(r) => {
                self.fx.stats.redelivered += 1;
                let awaiting = r[0].int(0, "awaiting_order_ref") == Some(1);
                self.trace(format!(
                    "operator: redeliver {l}{}",
                    if awaiting {
                        " (awaits its order_ref)"
                    } else {
                        ""
                    }
                ));
                if !awaiting {
                    self.fx_send(&[id], "the operator's redelivery");
                }
            }
            Err(e) => self.trace(format!("operator: redeliver {l} failed ({e})")),
        }
    }

    // ------------------------------------------------------------------ quiescence

    /// After the deliveries' final checks: faults off, the order system healthy; the lane
    /// runs (the sweeper at its cron times) until nothing is queued and the sweeper finds
    /// nothing to claim. Then (b), (c) and (h).
    /// The dispatcher's lane until nothing is queued, in flight or claimable; `false` when it
    /// does not converge (a violation) or a check failed.
    fn push_drain(&mut self) -> bool {
        let mut actions = 0;
        let mut swept_idle = false;
        loop {
            if !self.violations.is_empty() {
                return false;
            }
            if actions > EFFECTS_DRAIN_MAX {
                let pending = self.db.inspect(
                    "SELECT resource_id || ':' || kind || ' ' || dispatch || \
                       CASE WHEN order_ref IS NULL THEN ' (no order_ref)' ELSE '' END AS e \
                     FROM effect WHERE dispatch <> 'delivered' ORDER BY id",
                );
                let pending: Vec<String> = (0..pending.rows.len())
                    .filter_map(|i| pending.text(i, "e"))
                    .collect();
                self.violation(format!(
                    "effects drain: no quiescence after {EFFECTS_DRAIN_MAX} actions ({} queued, \
                     {} dead letters; not delivered: {})",
                    self.fx.queue.len(),
                    self.fx.dlq.len(),
                    pending.join(", ")
                ));
                return false;
            }
            if self.fx_step() {
                actions += 1;
                swept_idle = false;
                clock::set_now_ms(self.now() + self.fx.rng.below(1_500) as i64);
                continue;
            }
            if self.fx.quiet() {
                if swept_idle {
                    break;
                }
                // nothing queued: the next cron's sweeper is what recovers a lost message
                let cron = self.fx.next_cron;
                clock::set_now_ms(cron.max(self.now() + 1));
                self.fx.next_cron += CRON_MS;
                self.fx_sweep();
                actions += 1;
                swept_idle = self.fx.quiet();
                // a claim may only find effects handed over > 300 s ago: one more cron
                if swept_idle && self.claimable_pending() > 0 {
                    swept_idle = false;
                }
                continue;
            }
            let t = self.fx_next_time().unwrap_or(self.now() + 1);
            clock::set_now_ms(t.max(self.now() + 1));
        }
        true
    }

    /// In pull mode after a switch from push: the dispatcher's lane until nothing is queued
    /// or in flight (what is still queued is answered `pending_pull`).
    fn fx_finish(&mut self) -> bool {
        for _ in 0..EFFECTS_DRAIN_MAX {
            if !self.violations.is_empty() {
                return false;
            }
            if self.fx.quiet() {
                return true;
            }
            if !self.fx_step() {
                let t = self.fx_next_time().unwrap_or(self.now() + 1);
                clock::set_now_ms(t.max(self.now() + 1));
            }
        }
        self.violation(format!(
            "effects drain: the dispatcher not idle after {EFFECTS_DRAIN_MAX} actions in pull mode"
        ));
        false
    }

    pub(super) fn effects_drain_and_check(&mut self) {
        self.trace("— effects: drain with the order system healthy —".into());
        let drained = if self.pl.on {
            self.fx_finish() && self.pull_drain()
        } else {
            self.push_drain()
        };
        if !drained {
            return;
        }
        self.check_delivered_received("at quiescence");
        self.check_settled();
        self.check_refunds_reach_the_order_system();
        let count =
            |sim: &mut Self, sql: &str| sim.db.inspect(sql).int(0, "n").unwrap_or(0) as usize;
        self.fx.stats.delivered += count(
            self,
            "SELECT count(*) AS n FROM effect WHERE dispatch = 'delivered'",
        );
        self.fx.stats.effects += count(self, "SELECT count(*) AS n FROM effect");
        self.fx.stats.cancelled += count(
            self,
            "SELECT count(*) AS n FROM effect WHERE dispatch = 'cancelled'",
        );
        self.fx.stats.cancelled_and_revoked += count(
            self,
            "SELECT count(*) AS n FROM effect f JOIN effect r ON r.resource_id = f.resource_id \
               AND r.kind = 'revocation' WHERE f.dispatch = 'cancelled'",
        );
    }

    /// (c) at quiescence every effect is delivered, dead or cancelled (none forgotten pending),
    /// but a fulfilment whose order_ref was never learned (by design it waits for it).
    pub(super) fn check_settled(&mut self) {
        let rows = self.db.inspect(
            "SELECT resource_id, kind, dispatch, order_ref, attempts, last_error FROM effect \
             ORDER BY id",
        );
        for i in 0..rows.rows.len() {
            let dispatch = rows.text(i, "dispatch").unwrap_or_default();
            if ["delivered", "dead", "cancelled"].contains(&dispatch.as_str()) {
                continue;
            }
            let kind = rows.text(i, "kind").unwrap_or_default();
            if kind == "fulfilment" && rows.text(i, "order_ref").is_none() {
                self.fx.stats.awaiting_order_ref_at_end += 1;
                continue;
            }
            self.violation(format!(
                "(c) {}'s {kind} is {dispatch} after the effects drained (attempts {}, last \
                 error {:?}): forgotten",
                rows.text(i, "resource_id").unwrap_or_default(),
                rows.int(i, "attempts").unwrap_or(0),
                rows.text(i, "last_error")
            ));
        }
    }

    /// (h) Every fulfilment the order system took for a refunded invoice is followed by the
    /// revocation it took: a refund always reaches whoever may ship the goods. A revocation
    /// dead by its own ladder (16 hours of failures, checked by (g)) is visible, alerted and
    /// redeliverable: counted, not a violation.
    pub(super) fn check_refunds_reach_the_order_system(&mut self) {
        let refunded = self
            .db
            .inspect("SELECT id FROM resource WHERE kind = 'invoice' AND status = 'refunded'");
        for i in 0..refunded.rows.len() {
            let inv = refunded.text(i, "id").unwrap_or_default();
            let position = |kind: &str, last: bool| {
                let mut it = self
                    .fx
                    .received
                    .iter()
                    .enumerate()
                    .filter(|(_, x)| x.resource == inv && x.kind == kind)
                    .map(|(i, _)| i);
                if last {
                    it.next_back()
                } else {
                    it.next()
                }
            };
            let Some(fulfilled) = position("fulfilment", true) else {
                continue;
            };
            match position("revocation", false) {
                Some(revoked) if revoked > fulfilled => {}
                Some(_) => self.violation(format!(
                    "(h) the order system took {inv}'s fulfilment after its revocation"
                )),
                None => {
                    let dead = self
                        .db
                        .inspect(&format!(
                            "SELECT count(*) AS n FROM effect WHERE resource_id = '{inv}' \
                             AND kind = 'revocation' AND dispatch = 'dead'"
                        ))
                        .int(0, "n")
                        == Some(1);
                    if dead {
                        self.fx.stats.fulfilled_revocation_dead += 1;
                    } else {
                        self.violation(format!(
                            "(h) the order system took {inv}'s fulfilment; the invoice is \
                             refunded and no revocation reached it"
                        ));
                    }
                }
            }
        }
    }

    fn claimable_pending(&self) -> i64 {
        self.db
            .inspect(
                "SELECT count(*) AS n FROM effect WHERE dispatch = 'pending' \
                 AND (kind <> 'fulfilment' OR order_ref IS NOT NULL)",
            )
            .int(0, "n")
            .unwrap_or(0)
    }
}

/// A batch's outcome with only its last statement's rows (the change after its tally).
fn paymos_sim_last(mut ex: crate::db::Exec) -> crate::db::Exec {
    if let Ok(rows) = &mut ex.result {
        let last = rows.pop().unwrap_or_default();
        *rows = vec![last];
    }
    ex
}
