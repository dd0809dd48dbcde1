//! The effects outbox's dispatcher (CONTRACT §7) as part of the simulated world: the effects
//! queue (at least once), the dispatcher per batch (`effects::consume`: one
//! `LOAD_EFFECTS_FOR_DISPATCH`, the POSTs, one D1 batch of outcomes, then ack or retry each
//! message), its dead-letter queue (`MARK_EFFECT_DEAD`), the effects sweeper
//! (`CLAIM_EFFECTS` at cron times), an operator's `REDELIVER_EFFECT`, and a simulated order
//! system that records every POST it receives.
//!
//! It runs in its own lane: every step of the scheduler first gives it one action, drawn from
//! its own random stream, and the clock stops at its times when nothing else is due. It never
//! draws from the other streams nor counts as a step, so the rest of a seed's schedule (and
//! every seed the other tests pin) is exactly what it was without it.

use std::collections::BTreeMap;

use paymos_core::ladder::{effect_retry_delay, wait_for_earlier_delay};
use paymos_core::statements::{self as st, Arg, Bound};
use paymos_core::time::unix_of_iso;

use super::{own, Sim, CRON_MS, SWEEP_AFTER_SECONDS};
use crate::clock;
use crate::db::{Fault, Rows};
use crate::rng::Rng;

/// SQL: effect `e` is held back behind an earlier effect of its resource that will not go out
/// by itself: a dead one (until an operator redelivers it) or a fulfilment still lacking its
/// order_ref. Such an effect stays pending by design; the drain and (c) allow for it.
macro_rules! held_back {
    () => {
        "EXISTS (SELECT 1 FROM effect p WHERE p.resource_id = e.resource_id AND p.id < e.id \
           AND (p.dispatch = 'dead' \
                OR (p.dispatch = 'pending' AND p.kind = 'fulfilment' AND p.order_ref IS NULL)))"
    };
}

/// wrangler.toml: `max_retries = 20` on the effects queue.
pub const EFFECTS_MAX_RETRIES: u32 = 20;
/// The effects dead-letter queue's consumer: the platform's default.
const EFFECTS_DLQ_MAX_RETRIES: u32 = 3;
/// `effects::sweep`'s claim size.
const CLAIM_LIMIT: i64 = 100;
/// At most this many lane actions in the final effects drain.
const EFFECTS_DRAIN_MAX: usize = 20_000;

/// A message of the effects queue: `{effect_id}` and what the platform keeps about it.
#[derive(Debug, Clone)]
struct EMsg {
    id: String,
    attempts: u32,
    visible_at: i64,
}

/// What the simulated order system received (a 2xx, or a POST whose answer was lost).
#[derive(Debug, Clone)]
struct Received {
    id: String,
    kind: String,
    resource: String,
}

/// What one effect of a batch does, decided before any POST (`before_post`) or after it.
#[derive(Debug, Clone)]
enum EStep {
    Ack(&'static str),
    Retry(u32, &'static str),
    /// waiting for an earlier effect of the resource: deferred (`DEFER_EFFECT`) and, when this
    /// message holds the wait, sent again as a fresh message after this many seconds
    Wait(u32),
}

/// One distinct effect of a dispatcher batch.
#[derive(Debug, Clone)]
struct Item {
    id: String,
    step: Option<EStep>,
    /// To post: (kind, resource_id, attempts so far), and the POST's result once made.
    post: Option<(String, String, i64)>,
    result: Option<Result<(), String>>,
}

#[derive(Debug)]
enum DPhase {
    Load,
    /// POST the next item that has one to make (one POST per action: they interleave).
    Post(Vec<Item>),
    Record(Vec<Item>),
    Ack(Vec<Item>),
}

#[derive(Debug)]
enum DActor {
    Dispatch { msgs: Vec<EMsg>, phase: DPhase },
    DeadLetter { msg: EMsg, marked: bool },
}

#[derive(Debug, Clone, Copy)]
enum LCand {
    Actor(usize),
    Dispatch,
    DeadLetter,
    Sweep,
    Redeliver,
}

#[derive(Debug, Clone, Default)]
pub struct EffectStats {
    pub effects: usize,
    pub effect_messages: usize,
    pub posts: usize,
    pub received: usize,
    pub delivered: usize,
    pub waited_for_earlier: usize,
    pub dispatch_d1_failures: usize,
    pub claimed: usize,
    pub redelivered: usize,
    pub dead_by_ladder: usize,
    pub dead_by_dlq: usize,
    /// Revocations the dead-letter queue killed while they waited for their fulfilment.
    pub revocations_dead_waiting: usize,
    /// Effects still pending at the end because an earlier effect of their resource is dead.
    pub parked_at_end: usize,
    /// Revocations sent although the order system never received the fulfilment, because
    /// that fulfilment is dead (a finding: see README).
    pub revocations_after_dead_fulfilment: usize,
    /// At the end: a fulfilment the order system has (delivered) whose revocation is dead
    /// (the refund never reaches the order system; a finding: see README).
    pub fulfilled_revocation_dead: usize,
    /// Fulfilments left pending at the end because their order_ref was never learned.
    pub awaiting_order_ref_at_end: usize,
}

impl EffectStats {
    pub fn add(&mut self, o: &EffectStats) {
        self.effects += o.effects;
        self.effect_messages += o.effect_messages;
        self.posts += o.posts;
        self.received += o.received;
        self.delivered += o.delivered;
        self.waited_for_earlier += o.waited_for_earlier;
        self.dispatch_d1_failures += o.dispatch_d1_failures;
        self.claimed += o.claimed;
        self.redelivered += o.redelivered;
        self.dead_by_ladder += o.dead_by_ladder;
        self.dead_by_dlq += o.dead_by_dlq;
        self.revocations_dead_waiting += o.revocations_dead_waiting;
        self.parked_at_end += o.parked_at_end;
        self.revocations_after_dead_fulfilment += o.revocations_after_dead_fulfilment;
        self.fulfilled_revocation_dead += o.fulfilled_revocation_dead;
        self.awaiting_order_ref_at_end += o.awaiting_order_ref_at_end;
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
    queue: Vec<EMsg>,
    dlq: Vec<EMsg>,
    actors: Vec<DActor>,
    busy: usize,
    dlq_busy: bool,
    next_cron: i64,
    /// Times an operator redelivers an effect (`POST /admin/api/effects/{id}/redeliver`).
    redeliveries: Vec<i64>,
    received: Vec<Received>,
    labels: BTreeMap<String, String>,
    pub stats: EffectStats,
}

impl Fx {
    pub(super) fn new(mut rng: Rng, start: i64, chaos_end: i64) -> Fx {
        let scale = *rng.pick(&[1.0, 1.0 / 15.0, 1.0 / 60.0]);
        let down = rng.chance(0.3).then(|| {
            let s = start + rng.below((chaos_end - start).max(1) as u64) as i64;
            (s, s + rng.range(60_000, 1_800_000) as i64)
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
            queue: Vec::new(),
            dlq: Vec::new(),
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

    fn fx_fault_batch(&mut self, n: usize) -> Fault {
        if !self.fx_chaos() {
            return Fault::None;
        }
        if self.in_outage() {
            Fault::Before
        } else if self.fx.rng.chance(self.k.p_d1) {
            Fault::At(self.fx.rng.below(n as u64) as usize)
        } else if self.fx.rng.chance(self.k.p_after_commit) {
            Fault::AfterCommit
        } else {
            Fault::None
        }
    }

    fn fx_crash(&mut self) -> bool {
        self.fx_chaos() && self.fx.rng.chance(self.k.p_crash)
    }

    /// A stable name for an effect in the trace (`effect_id` is random: never traced, never
    /// ordered by).
    fn label(&mut self, id: &str) -> String {
        if let Some(l) = self.fx.labels.get(id) {
            return l.clone();
        }
        let rows = self.db.read(&own(
            st::LOAD_EFFECTS_FOR_DISPATCH.bind(vec![Arg::json_list(&[id])])
        ));
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

    // ------------------------------------------------------------------ the queue

    /// `queue::enqueue_effects`: `Ok`, or an error after which the messages may or may not be
    /// on the queue.
    pub(super) fn fx_send(&mut self, ids: &[String], who: &str) {
        if ids.is_empty() {
            return;
        }
        let fails = self.fx_chaos() && self.fx.rng.chance(self.k.p_send_fail);
        let enqueued = !fails || self.fx.rng.chance(0.5);
        let names = self.labels(ids);
        if enqueued {
            for id in ids {
                let m = EMsg {
                    id: id.clone(),
                    attempts: 1,
                    visible_at: self.now(),
                };
                self.fx.stats.effect_messages += 1;
                if self.fx_chaos() && self.fx.rng.chance(self.k.p_dup) {
                    let mut copy = m.clone();
                    copy.visible_at += self.fx.rng.below(20_000) as i64;
                    self.fx.queue.push(copy);
                }
                self.fx.queue.push(m);
            }
        }
        self.trace(format!(
            "effects: {who} enqueues [{names}] {}",
            match (fails, enqueued) {
                (false, _) => "ok",
                (true, true) => "failed (enqueued anyway)",
                (true, false) => "failed (left to the sweeper)",
            }
        ));
    }

    /// `queue::enqueue_effect_after`: one fresh message (its own attempts), visible after
    /// `delay_ms`; a failed send leaves the effect to the sweeper (its deferral ages).
    fn fx_send_after(&mut self, id: &str, delay_ms: i64) {
        let l = self.label(id);
        if self.fx_chaos() && self.fx.rng.chance(self.k.p_send_fail) {
            self.trace(format!(
                "effects: wait for {l} not re-sent (left to the sweeper)"
            ));
            return;
        }
        self.fx.stats.effect_messages += 1;
        self.fx.queue.push(EMsg {
            id: id.to_string(),
            attempts: 1,
            visible_at: self.now() + delay_ms,
        });
    }

    /// `message.retry_in(delay)` (or an invocation that died): another attempt, or the
    /// dead-letter queue once `max_retries` are spent.
    fn fx_retry(&mut self, mut msg: EMsg, delay_ms: i64) {
        if msg.attempts > EFFECTS_MAX_RETRIES {
            let l = self.label(&msg.id);
            self.trace(format!(
                "effects queue: {l} exhausted {} attempts → dead-letter queue",
                msg.attempts
            ));
            let dl = EMsg {
                id: msg.id,
                attempts: 1,
                visible_at: self.now() + self.fx.rng.below(60_000) as i64,
            };
            self.fx.dlq.push(dl);
        } else {
            msg.attempts += 1;
            msg.visible_at = self.now() + delay_ms;
            self.fx.queue.push(msg);
        }
    }

    fn fx_ack(&mut self, mut msg: EMsg) {
        if self.fx_chaos() && self.fx.rng.chance(self.k.p_dup) {
            msg.attempts += 1;
            msg.visible_at = self.now() + self.fx.rng.below(30_000) as i64;
            self.fx.queue.push(msg);
        }
    }

    // ------------------------------------------------------------------ the lane

    fn fx_candidates(&self) -> Vec<LCand> {
        let now = self.now();
        let mut c: Vec<LCand> = (0..self.fx.actors.len()).map(LCand::Actor).collect();
        if self.fx.busy < self.fx.dispatchers && self.fx.queue.iter().any(|m| m.visible_at <= now) {
            c.push(LCand::Dispatch);
        }
        if !self.fx.dlq_busy && self.fx.dlq.iter().any(|m| m.visible_at <= now) {
            c.push(LCand::DeadLetter);
        }
        if now >= self.fx.next_cron {
            c.push(LCand::Sweep);
        }
        if self.fx_chaos() && self.fx.redeliveries.first().is_some_and(|t| *t <= now) {
            c.push(LCand::Redeliver);
        }
        c
    }

    /// When the lane next has something to do (the clock stops there).
    pub(super) fn fx_next_time(&self) -> Option<i64> {
        if !self.fx.actors.is_empty() {
            return Some(self.now());
        }
        let q = self
            .fx
            .queue
            .iter()
            .chain(&self.fx.dlq)
            .map(|m| m.visible_at)
            .min();
        let ops = self
            .fx_chaos()
            .then(|| self.fx.redeliveries.first().copied())
            .flatten();
        q.into_iter().chain(ops).min()
    }

    /// One action of the dispatcher's lane, if one is due. `true` if it did something.
    pub(super) fn fx_step(&mut self) -> bool {
        let cands = self.fx_candidates();
        if cands.is_empty() {
            return false;
        }
        let pick = *self.fx.rng.pick(&cands);
        match pick {
            LCand::Actor(i) => {
                let a = self.fx.actors.swap_remove(i);
                match a {
                    DActor::Dispatch { msgs, phase } => self.dispatch(msgs, phase),
                    DActor::DeadLetter { msg, marked } => self.fx_dead_letter(msg, marked),
                }
            }
            LCand::Dispatch => {
                let now = self.now();
                let mut visible: Vec<usize> = (0..self.fx.queue.len())
                    .filter(|i| self.fx.queue[*i].visible_at <= now)
                    .collect();
                let n = self
                    .fx
                    .rng
                    .range(1, self.fx.batch.min(visible.len()) as u64)
                    as usize;
                let mut taken = Vec::with_capacity(n);
                for _ in 0..n {
                    let j = self.fx.rng.below(visible.len() as u64) as usize;
                    taken.push(visible.swap_remove(j));
                }
                let mut order: Vec<(usize, usize)> = taken
                    .iter()
                    .copied()
                    .enumerate()
                    .map(|(k, i)| (i, k))
                    .collect();
                order.sort_unstable_by_key(|a| std::cmp::Reverse(a.0));
                let mut msgs: Vec<(usize, EMsg)> = order
                    .into_iter()
                    .map(|(i, k)| (k, self.fx.queue.remove(i)))
                    .collect();
                msgs.sort_by_key(|(k, _)| *k);
                self.fx.busy += 1;
                self.dispatch(msgs.into_iter().map(|(_, m)| m).collect(), DPhase::Load);
            }
            LCand::DeadLetter => {
                let now = self.now();
                let i = (0..self.fx.dlq.len())
                    .find(|i| self.fx.dlq[*i].visible_at <= now)
                    .expect("a visible dead letter");
                let msg = self.fx.dlq.remove(i);
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

    // ------------------------------------------------------------------ the dispatcher

    /// The whole batch back on the ladder (`retry_all`: a D1 call failed).
    fn retry_all(&mut self, msgs: Vec<EMsg>, why: &str) {
        let names: Vec<String> = msgs.iter().map(|m| m.id.clone()).collect();
        let names = self.labels(&names);
        self.trace(format!(
            "dispatcher [{names}]: {why}; every message retried"
        ));
        self.fx.stats.dispatch_d1_failures += 1;
        self.fx.busy -= 1;
        for m in msgs {
            let delay = effect_retry_delay(m.attempts, self.fx.scale).unwrap_or(60);
            self.fx_retry(m, i64::from(delay) * 1000);
        }
    }

    fn dispatch(&mut self, msgs: Vec<EMsg>, phase: DPhase) {
        if self.fx_crash() {
            let names: Vec<String> = msgs.iter().map(|m| m.id.clone()).collect();
            let names = self.labels(&names);
            self.trace(format!("dispatcher [{names}] died; the messages come back"));
            self.fx.busy -= 1;
            for m in msgs {
                let delay = self.fx.rng.below(30_000) as i64;
                self.fx_retry(m, delay);
            }
            return;
        }
        match phase {
            DPhase::Load => {
                let mut ids: Vec<String> = Vec::new();
                for m in &msgs {
                    if !ids.contains(&m.id) {
                        ids.push(m.id.clone());
                    }
                }
                let fault = self.fx_fault_read();
                let b = own(st::LOAD_EFFECTS_FOR_DISPATCH.bind(vec![Arg::json_list(&ids)]));
                let ex = self.db.run(&b, fault);
                let rows = match ex.result {
                    Ok(mut r) => r.remove(0),
                    Err(e) => return self.retry_all(msgs, &e),
                };
                let mut items = Vec::with_capacity(ids.len());
                for id in ids {
                    items.push(self.before_post(&rows, id));
                }
                let names: Vec<String> = items
                    .iter()
                    .map(|it| {
                        let l = self.fx.labels.get(&it.id).cloned().unwrap_or_default();
                        match (&it.step, &it.post) {
                            (Some(s), _) => format!("{l} {s:?}"),
                            (None, Some((_, _, a))) => format!("{l} post (attempts {a})"),
                            _ => l,
                        }
                    })
                    .collect();
                self.trace(format!("dispatcher loaded: {}", names.join(", ")));
                self.fx.actors.push(DActor::Dispatch {
                    msgs,
                    phase: DPhase::Post(items),
                });
            }
            DPhase::Post(mut items) => {
                let Some(i) = items
                    .iter()
                    .position(|it| it.post.is_some() && it.result.is_none())
                else {
                    self.fx.actors.push(DActor::Dispatch {
                        msgs,
                        phase: DPhase::Record(items),
                    });
                    return;
                };
                let result = self.order_system(&items[i]);
                items[i].result = Some(result);
                self.fx.actors.push(DActor::Dispatch {
                    msgs,
                    phase: DPhase::Post(items),
                });
            }
            DPhase::Record(mut items) => {
                let mut outcomes: Vec<Bound<'static>> = Vec::new();
                let mut dead = Vec::new();
                for it in items.iter_mut() {
                    let (Some((_, _, attempts)), Some(result)) = (&it.post, &it.result) else {
                        continue;
                    };
                    let (b, step) = match result {
                        Ok(()) => (
                            st::MARK_EFFECT_DELIVERED.bind(vec![Arg::text(&it.id)]),
                            EStep::Ack("delivered"),
                        ),
                        Err(error) => {
                            let failed = u32::try_from(attempts + 1).unwrap_or(u32::MAX);
                            match effect_retry_delay(failed, self.fx.scale) {
                                Some(delay) => (
                                    st::RECORD_EFFECT_FAILURE.bind(vec![
                                        Arg::text(&it.id),
                                        Arg::text(error),
                                        Arg::Text(format!("+{delay} seconds").into()),
                                    ]),
                                    EStep::Retry(delay, "retry"),
                                ),
                                None => {
                                    dead.push(it.id.clone());
                                    (
                                        st::MARK_EFFECT_DEAD.bind(vec![
                                            Arg::text(&it.id),
                                            Arg::text(error),
                                            Arg::Int(1),
                                        ]),
                                        EStep::Ack("dead"),
                                    )
                                }
                            }
                        }
                    };
                    outcomes.push(own(b));
                    it.step = Some(step);
                }
                // the waits, deferred in the same batch (effects::consume)
                let posted = outcomes.len();
                let waits: Vec<(usize, u32)> = items
                    .iter()
                    .enumerate()
                    .filter_map(|(i, it)| match it.step {
                        Some(EStep::Wait(d)) => Some((i, d)),
                        _ => None,
                    })
                    .collect();
                for (i, d) in &waits {
                    outcomes.push(own(st::DEFER_EFFECT.bind(vec![
                        Arg::text(&items[*i].id),
                        Arg::Text(format!("+{d} seconds").into()),
                    ])));
                }
                if !outcomes.is_empty() {
                    let fault = self.fx_fault_batch(outcomes.len());
                    let ex = self.db.batch(&outcomes, fault);
                    if ex.committed {
                        self.fx.stats.dead_by_ladder += dead.len();
                        self.check_delivered_received("after the outcome batch");
                    }
                    if let Err(e) = ex.result {
                        let e = if ex.committed {
                            format!("{e} (the outcomes committed)")
                        } else {
                            e
                        };
                        return self.retry_all(msgs, &e);
                    }
                    // a wait whose DEFER_EFFECT returned nothing is held by another message
                    if let Ok(results) = &ex.result {
                        for (k, (i, _)) in waits.iter().enumerate() {
                            if results.get(posted + k).map_or(true, |r| r.rows.is_empty()) {
                                items[*i].step = Some(EStep::Ack("another message holds the wait"));
                            }
                        }
                    }
                    self.trace(format!("dispatcher recorded {} outcome(s)", outcomes.len()));
                }
                self.fx.actors.push(DActor::Dispatch {
                    msgs,
                    phase: DPhase::Ack(items),
                });
            }
            DPhase::Ack(items) => {
                self.fx.busy -= 1;
                let mut answered: Vec<String> = Vec::new();
                for m in msgs {
                    if answered.contains(&m.id) {
                        self.fx_ack(m);
                        continue;
                    }
                    answered.push(m.id.clone());
                    let step = items
                        .iter()
                        .find(|it| it.id == m.id)
                        .and_then(|it| it.step.clone());
                    let l = self.label(&m.id);
                    match step {
                        Some(EStep::Retry(delay, why)) => {
                            self.trace(format!(
                                "dispatcher: {l} {why}, attempt {} → retry in {delay}s",
                                m.attempts
                            ));
                            self.fx_retry(m, i64::from(delay) * 1000);
                        }
                        Some(EStep::Ack(why)) => {
                            self.trace(format!("dispatcher: {l} {why}, acked"));
                            self.fx_ack(m);
                        }
                        Some(EStep::Wait(delay)) => {
                            self.trace(format!(
                                "dispatcher: {l} waiting_for_earlier, acked; looked at again in \
                                 {delay}s"
                            ));
                            self.fx_send_after(&m.id, i64::from(delay) * 1000);
                            self.fx_ack(m);
                        }
                        None => self.fx_ack(m),
                    }
                }
            }
        }
    }

    /// `effects::before_post` for one id of the batch (the order system is configured).
    fn before_post(&mut self, rows: &Rows, id: String) -> Item {
        let _ = self.label(&id);
        let mut item = Item {
            id,
            step: None,
            post: None,
            result: None,
        };
        let Some(r) =
            (0..rows.rows.len()).find(|r| rows.text(*r, "id").as_deref() == Some(&item.id))
        else {
            item.step = Some(EStep::Ack("missing"));
            return item;
        };
        if rows.text(r, "dispatch").as_deref() != Some("pending") {
            item.step = Some(EStep::Ack("already_dispatched"));
            return item;
        }
        if rows.int(r, "awaiting_order_ref") == Some(1) {
            item.step = Some(EStep::Ack("awaiting_order_ref"));
            return item;
        }
        let earlier = rows.int(r, "earlier_undelivered").unwrap_or(0);
        let earlier = match self.opts.mutations.earlier_undelivered {
            Some(f) => f(earlier),
            None => earlier,
        };
        if earlier > 0 {
            let now = self.now() / 1000;
            let waited = rows
                .text(r, "created_at")
                .and_then(|c| unix_of_iso(&c))
                .map_or(0, |created| now - created);
            let wait = wait_for_earlier_delay(waited, self.fx.scale).max(1);
            self.fx.stats.waited_for_earlier += 1;
            item.step = Some(EStep::Wait(wait));
            return item;
        }
        item.post = Some((
            rows.text(r, "kind").unwrap_or_default(),
            rows.text(r, "resource_id").unwrap_or_default(),
            rows.int(r, "attempts").unwrap_or(0),
        ));
        item
    }

    /// One POST to the simulated order system: 2xx, 5xx (not taken), or taken with the
    /// answer lost (the dispatcher's timeout). Checks invariants (a) and (d) on what it takes.
    fn order_system(&mut self, it: &Item) -> Result<(), String> {
        let (kind, resource, _) = it.post.clone().expect("an item to post");
        self.fx.stats.posts += 1;
        let l = self.label(&it.id);
        let now = self.now();
        let down = self.fx_chaos() && self.fx.down.is_some_and(|(s, e)| (s..e).contains(&now));
        if down || (self.fx_chaos() && self.fx.rng.chance(self.fx.p_fail)) {
            self.trace(format!("order system: POST {l} → 503"));
            return Err("the order system answered 503".into());
        }
        // (d) exactly once per effect id at the business level
        if let Some(other) = self
            .fx
            .received
            .iter()
            .find(|x| x.resource == resource && x.kind == kind && x.id != it.id)
        {
            let _ = other;
            self.violation(format!(
                "(d) the order system received two different effect ids for {resource}'s {kind}"
            ));
        }
        // (a) a revocation never before the fulfilment it revokes
        if kind == "revocation"
            && !self
                .fx
                .received
                .iter()
                .any(|x| x.resource == resource && x.kind == "fulfilment")
        {
            let fulfilment = self
                .db
                .read(&own(st::LOAD_EFFECTS.bind(vec![Arg::text(&resource)])));
            let f = (0..fulfilment.rows.len())
                .find(|i| fulfilment.text(*i, "kind").as_deref() == Some("fulfilment"));
            let dead = f.is_some_and(|i| fulfilment.text(i, "dispatch").as_deref() == Some("dead"));
            let f = f.map(|i| {
                format!(
                    "{} after {} attempt(s), {:?}",
                    fulfilment.text(i, "dispatch").unwrap_or_default(),
                    fulfilment.int(i, "attempts").unwrap_or(0),
                    fulfilment.text(i, "last_error")
                )
            });
            let f = f.unwrap_or_else(|| "missing".into());
            // a dead fulfilment holds its revocation back too (a finding of this simulator,
            // fixed: `earlier_undelivered` counts pending and dead effects)
            if dead {
                self.fx.stats.revocations_after_dead_fulfilment += 1;
            }
            self.violation(format!(
                "(a) the order system received {resource}'s revocation before its \
                 fulfilment (the fulfilment is {f})"
            ));
        }
        if !self.fx.received.iter().any(|x| x.id == it.id) {
            self.fx.stats.received += 1;
        }
        self.fx.received.push(Received {
            id: it.id.clone(),
            kind,
            resource,
        });
        if self.fx_chaos() && self.fx.rng.chance(self.fx.p_timeout) {
            self.trace(format!(
                "order system: POST {l} taken, the answer is lost (timeout)"
            ));
            return Err("the order system did not answer within 10000 ms".into());
        }
        self.trace(format!("order system: POST {l} → 200"));
        Ok(())
    }

    /// (b) an effect recorded `delivered` was received at least once.
    fn check_delivered_received(&mut self, when: &str) {
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

    /// The effects dead-letter queue: `MARK_EFFECT_DEAD(id, "dispatch retries exhausted", 0)`.
    fn fx_dead_letter(&mut self, mut msg: EMsg, marked: bool) {
        let l = self.label(&msg.id);
        if marked {
            self.fx.dlq_busy = false;
            self.trace(format!("effects dead-letter: {l} acked"));
            if self.fx_chaos() && self.fx.rng.chance(self.k.p_dup) {
                msg.attempts += 1;
                msg.visible_at = self.now() + self.fx.rng.below(30_000) as i64;
                self.fx.dlq.push(msg);
            }
            return;
        }
        let fault = if self.fx_crash() {
            Fault::Before
        } else {
            self.fx_fault_batch(1)
        };
        let fault = if fault == Fault::At(0) {
            Fault::Before
        } else {
            fault
        };
        // state before, for the statistics
        let before = self.db.read(&own(
            st::LOAD_EFFECTS_FOR_DISPATCH.bind(vec![Arg::json_list(&[msg.id.as_str()])])
        ));
        let b = own(st::MARK_EFFECT_DEAD.bind(vec![
            Arg::text(&msg.id),
            Arg::text("dispatch retries exhausted"),
            Arg::Int(0),
        ]));
        let ex = self.db.run(&b, fault);
        if ex.committed && ex.result.as_ref().map_or(true, |r| !r[0].is_empty()) {
            // marked (or possibly: AfterCommit hides it; count by the row)
            let after =
                self.db
                    .read(&own(st::LOAD_EFFECTS_FOR_DISPATCH
                        .bind(vec![Arg::json_list(&[msg.id.as_str()])])));
            let was_pending = before.text(0, "dispatch").as_deref() == Some("pending");
            if was_pending && after.text(0, "dispatch").as_deref() == Some("dead") {
                self.fx.stats.dead_by_dlq += 1;
                if before.text(0, "kind").as_deref() == Some("revocation")
                    && before.int(0, "earlier_undelivered").unwrap_or(0) > 0
                {
                    self.fx.stats.revocations_dead_waiting += 1;
                    self.trace(format!(
                        "effects dead-letter: {l} killed while it waited for its fulfilment \
                         (attempts {}, last error {:?})",
                        before.int(0, "attempts").unwrap_or(0),
                        before.text(0, "last_error")
                    ));
                }
            }
        }
        match ex.result {
            Ok(rows) => {
                self.trace(format!(
                    "effects dead-letter: {l} → {}",
                    if rows[0].is_empty() {
                        "not pending (left)"
                    } else {
                        "marked dead"
                    }
                ));
                self.fx
                    .actors
                    .push(DActor::DeadLetter { msg, marked: true });
            }
            Err(e) => {
                self.fx.dlq_busy = false;
                if msg.attempts > EFFECTS_DLQ_MAX_RETRIES {
                    self.trace(format!("effects dead-letter: {l} dropped after {e}"));
                } else {
                    msg.attempts += 1;
                    msg.visible_at = self.now() + 60_000;
                    self.trace(format!("effects dead-letter: {l} {e}; retry in 60s"));
                    self.fx.dlq.push(msg);
                }
            }
        }
    }

    /// `effects::sweep`: `CLAIM_EFFECTS('-300 seconds', 100)`, send, loop while full.
    fn fx_sweep(&mut self) {
        for _ in 0..3 {
            let fault = self.fx_fault_batch(1);
            let fault = if fault == Fault::At(0) {
                Fault::Before
            } else {
                fault
            };
            let b = own(st::CLAIM_EFFECTS.bind(vec![
                Arg::Text(st::seconds_ago(SWEEP_AFTER_SECONDS).into()),
                Arg::Int(CLAIM_LIMIT),
            ]));
            let ex = self.db.run(&b, fault);
            let ids: Vec<String> = match ex.result {
                Ok(r) => (0..r[0].rows.len())
                    .filter_map(|i| r[0].text(i, "effect_id"))
                    .collect(),
                Err(e) => {
                    self.trace(format!("effects sweeper: claim failed ({e})"));
                    return;
                }
            };
            self.fx.stats.claimed += ids.len();
            if ids.is_empty() {
                return;
            }
            let n = ids.len() as i64;
            self.fx_send(&ids, "the sweeper");
            if n < CLAIM_LIMIT {
                return;
            }
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
        let fault = self.fx_fault_batch(1);
        let fault = if fault == Fault::At(0) {
            Fault::Before
        } else {
            fault
        };
        let ex = self
            .db
            .run(&own(st::REDELIVER_EFFECT.bind(vec![Arg::text(&id)])), fault);
        match ex.result {
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
                    self.fx_send(&[id], "the redelivery");
                }
            }
            Err(e) => self.trace(format!("operator: redeliver {l} failed ({e})")),
        }
    }

    // ------------------------------------------------------------------ quiescence

    /// After the deliveries' final checks: faults off, the order system healthy; the lane
    /// runs (the sweeper at its cron times) until nothing is queued and the sweeper finds
    /// nothing to claim. Then (b) and (c).
    pub(super) fn effects_drain_and_check(&mut self) {
        self.trace("— effects: drain with the order system healthy —".into());
        let mut actions = 0;
        let mut swept_idle = false;
        loop {
            if !self.violations.is_empty() {
                return;
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
                return;
            }
            // only waits on dead effects left, nothing else to send: they stay pending until an
            // operator redelivers the dead one (looked at again at most hourly meanwhile)
            if self.fx_only_parked() && self.claimable_pending() == 0 {
                break;
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
                // idle once the claim found nothing and nothing was queued
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
        self.check_delivered_received("at quiescence");
        // (c) every effect delivered or dead, but a fulfilment whose order_ref was never learned
        let rows = self.db.inspect(concat!(
            "SELECT e.resource_id, e.kind, e.dispatch, e.order_ref, e.attempts, \
                   e.last_error, ",
            held_back!(),
            " AS parked FROM effect e ORDER BY e.id"
        ));
        for i in 0..rows.rows.len() {
            let dispatch = rows.text(i, "dispatch").unwrap_or_default();
            if dispatch == "delivered" || dispatch == "dead" {
                continue;
            }
            let kind = rows.text(i, "kind").unwrap_or_default();
            if kind == "fulfilment" && rows.text(i, "order_ref").is_none() {
                self.fx.stats.awaiting_order_ref_at_end += 1;
                continue;
            }
            if rows.int(i, "parked") == Some(1) {
                // waits for an earlier effect of its resource that is dead, or a fulfilment that
                // still lacks its order_ref: held back, by design, until an operator redelivers
                // the dead one or the order_ref is learned
                self.fx.stats.parked_at_end += 1;
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
        let lost = self.db.inspect(
            "SELECT r.resource_id, r.last_error FROM effect r JOIN effect f \
               ON f.resource_id = r.resource_id AND f.kind = 'fulfilment' \
             WHERE r.kind = 'revocation' AND r.dispatch = 'dead' AND f.dispatch = 'delivered' \
             ORDER BY r.id",
        );
        for i in 0..lost.rows.len() {
            self.fx.stats.fulfilled_revocation_dead += 1;
            self.trace(format!(
                "note: {}'s fulfilment is delivered, its revocation dead ({:?}): visible and \
                 redeliverable, as any dead effect",
                lost.text(i, "resource_id").unwrap_or_default(),
                lost.text(i, "last_error")
            ));
        }
        let delivered = self
            .db
            .inspect("SELECT count(*) AS n FROM effect WHERE dispatch = 'delivered'")
            .int(0, "n")
            .unwrap_or(0);
        self.fx.stats.delivered += delivered as usize;
        self.fx.stats.effects += self
            .db
            .inspect("SELECT count(*) AS n FROM effect")
            .int(0, "n")
            .unwrap_or(0) as usize;
    }

    /// Nothing left but waits on a dead earlier effect (each looked at again, at most hourly,
    /// until an operator redelivers the dead one): the drain is over.
    fn fx_only_parked(&self) -> bool {
        if !self.fx.dlq.is_empty() || !self.fx.actors.is_empty() || self.fx.queue.is_empty() {
            return false;
        }
        let parked = self.db.inspect(concat!(
            "SELECT e.effect_id FROM effect e WHERE e.dispatch = 'pending' AND ",
            held_back!()
        ));
        let parked: Vec<String> = (0..parked.rows.len())
            .filter_map(|i| parked.text(i, "effect_id"))
            .collect();
        self.fx.queue.iter().all(|m| parked.contains(&m.id))
    }

    fn claimable_pending(&self) -> i64 {
        self.db
            .inspect(concat!(
                "SELECT count(*) AS n FROM effect e WHERE dispatch = 'pending' \
                     AND (kind <> 'fulfilment' OR order_ref IS NOT NULL) AND NOT ",
                held_back!()
            ))
            .int(0, "n")
            .unwrap_or(0)
    }
}
