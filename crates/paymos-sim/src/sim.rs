//! One seed: the actors, the scheduler that interleaves them step by step, the faults, and
//! the invariants checked after every step and at quiescence.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use paymos_core::actors::dead_letter;
use paymos_core::actors::transition::{prepare, Change, Prepared};
use paymos_core::envelope::Facts;
use paymos_core::ladder::ATTEMPT_OFFSETS_SECONDS;
use paymos_core::machine::{decide, state_of, Decision};
use paymos_core::rows::DeliveryRow;
use paymos_core::statements::{self as st, Arg, Bound};
use paymos_core::{CauseKind, EffectKind, Existing, Outcome, ResourceKind, State};

use crate::clock;
use crate::coroutine::run_at_once;
use crate::db::{Db, Exec, Fault, Rows};
use crate::queue::{self, Platform, Queue};
use crate::rng::Rng;
use crate::world::{self, World};
use crate::{Options, Report, Stats};

pub mod archive;
mod checks;
mod consume;
pub mod dispatch;
mod pull;
mod reconcile;
mod sweep;

/// wrangler.toml: `max_retries = 10` on the deliveries queue (66 minutes of retries).
pub const MAX_RETRIES: u32 = 10;
/// The dead-letter queue's consumer has no `max_retries` of its own: the platform's default.
pub const DLQ_MAX_RETRIES: u32 = 3;
/// `QUEUE_RETRY_BASE_SECONDS`.
pub const RETRY_BASE_SECONDS: u32 = 10;
/// `SWEEP_AFTER_SECONDS`, and the cron's period.
pub const SWEEP_AFTER_SECONDS: i64 = 300;
pub const CRON_MS: i64 = 300_000;
const TRACE_TAIL: usize = 60;
const CHAOS_MAX_STEPS: usize = 6_000;
const DRAIN_MAX_STEPS: usize = 30_000;

/// The seed's world parameters ("swarm testing": each seed turns each fault up or off).
#[derive(Debug, Clone)]
struct Knobs {
    consumers: usize,
    p_d1: f64,
    p_after_commit: f64,
    outages: Vec<(i64, i64)>,
    /// A window in which `PAYMOS_MODE` is invalid: the consumer refuses to decide (every
    /// message fails and retries, D1 is fine), until an operator fixes it.
    misconfigured: Option<(i64, i64)>,
    p_crash: f64,
    p_send_fail: f64,
    p_dup: f64,
    p_reply_lost: f64,
    ladder_divisor: i64,
    sweep_chunk: i64,
    sweep_max_chunks: u32,
    /// At most how many messages one consumer invocation takes (`max_batch_size`): more
    /// than one are loaded in one query and applied in one transaction, message by message
    /// only when that fails.
    consumer_batch: usize,
    /// The provider API ignores `starting_after` (a stuck cursor) while the chaos lasts.
    provider_stuck: bool,
}

impl Knobs {
    fn draw(rng: &mut Rng, start: i64) -> Knobs {
        let n_outages = rng.below(3);
        let outages = (0..n_outages)
            .map(|_| {
                let s = start + rng.below(900_000) as i64;
                // up to the hour the contract names, and now and then longer
                let len = match rng.below(4) {
                    0 => rng.range(5_000, 60_000),
                    1 => rng.range(60_000, 600_000),
                    2 => rng.range(600_000, 3_600_000),
                    _ => rng.range(3_600_000, 10_800_000),
                } as i64;
                (s, s + len)
            })
            .collect();
        let misconfigured = rng.chance(0.3).then(|| {
            let s = start + rng.below(900_000) as i64;
            // long enough, at times, for the queue's 66 minutes of retries to run out
            (s, s + rng.range(300_000, 7_200_000) as i64)
        });
        Knobs {
            misconfigured,
            consumers: rng.range(1, 4) as usize,
            p_d1: *rng.pick(&[0.0, 0.02, 0.08, 0.2]),
            p_after_commit: *rng.pick(&[0.0, 0.01, 0.05]),
            outages,
            p_crash: *rng.pick(&[0.0, 0.02, 0.08]),
            p_send_fail: *rng.pick(&[0.0, 0.1, 0.3]),
            p_dup: *rng.pick(&[0.0, 0.05, 0.2]),
            p_reply_lost: *rng.pick(&[0.0, 0.1, 0.3]),
            ladder_divisor: *rng.pick(&[15, 60, 240]),
            sweep_chunk: rng.range(1, 4) as i64,
            sweep_max_chunks: rng.range(1, 3) as u32,
            consumer_batch: 1,
            provider_stuck: rng.chance(0.1),
        }
    }
}

/// What a deliveries queue message carries: `{event_id, generation}`.
#[derive(Debug, Clone)]
struct Delivery {
    d: usize,
    generation: Option<i64>,
    /// The receipt's message carries its envelope's facts (`envelope::Facts`, as the Worker's
    /// `DeliveryMessage::received`): the consumer loads nothing for it.
    facts: Option<Facts>,
}

type Msg = queue::Msg<Delivery>;

/// The sender's progress on one delivery (one endpoint's copy of one event).
#[derive(Debug, Clone)]
struct Sender {
    /// Attempts started so far.
    attempts: usize,
    first_at: i64,
    next_at: Option<i64>,
    acked: bool,
    /// Times the provider's operator re-sent it after the 11 attempts failed.
    provider_replays: u32,
}

#[derive(Debug)]
enum Recv {
    Insert,
    Send,
    Reply,
}

#[derive(Debug)]
enum Actor {
    Receive {
        d: usize,
        phase: Recv,
    },
    /// A consumer invocation: the core's driver, and what its last call returned.
    Consume {
        msgs: Vec<Msg>,
        driver: Box<consume::Consumer>,
        returned: Option<crate::coroutine::Returned>,
    },
    DeadLetter {
        msg: Msg,
        marked: bool,
    },
    /// The deliveries sweeper or a bulk replay: the core's driver, and what its last call
    /// returned.
    Chunked {
        run: sweep::Run,
        driver: Box<sweep::Sweeper>,
        returned: Option<crate::coroutine::Returned>,
    },
    Replay {
        d: Option<usize>,
        generation: Option<i64>,
    },
    Manual {
        r: usize,
        to: State,
        order_ref: bool,
    },
    /// A reconciliation walk: the core's driver, and what its last call returned.
    Reconcile {
        driver: Box<reconcile::Reconciler>,
        returned: Option<crate::coroutine::Returned>,
    },
}

#[derive(Debug, Clone, Copy)]
enum Op {
    Replay,
    /// The replay of one delivery an alert named (`delivery_dead`, interface §9).
    ReplayOne(usize),
    /// `POST /admin/api/deliveries/replay {status}`: what an operator does after an incident.
    BulkReplay(&'static str),
    Manual,
    Reconcile,
}

#[derive(Debug, Clone, Copy)]
enum Cand {
    Actor(usize),
    Receive(usize),
    Consume,
    DeadLetter,
    Sweep,
    Op,
}

/// What the checker knows of a delivery row.
#[derive(Debug, Clone, PartialEq)]
struct Snap {
    processed: bool,
    outcome: Option<String>,
    generation: i64,
    replays: i64,
}

#[derive(Debug, Clone, Default)]
struct DModel {
    snap: Option<Snap>,
    /// Generations for which a message exhausted its retries (went to the dead-letter queue).
    exhausted: BTreeSet<i64>,
    /// An operator's replay (its generation) not yet decided.
    pending_replay: Option<i64>,
    /// The generation of each committed transaction whose guarded write won for it.
    applied_gens: Vec<i64>,
    /// Failed consumer attempts per generation that happened while D1 was not in an outage.
    failed_outside_outage: BTreeMap<i64, usize>,
}

#[derive(Debug, Clone, Default)]
struct RModel {
    /// Committed transactions whose guarded write won.
    applied: usize,
    order_ref: Option<String>,
    fulfilment_license: Option<String>,
    touched_by_operator: bool,
    /// Whether the refund's transaction found a fulfilment that may have reached the order
    /// system (delivered or attempted): then, and only then, it records a revocation.
    refund_revokes: Option<bool>,
}

/// Why a delivery row may have changed in this step.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Who {
    Insert,
    Batch {
        outcome: Outcome,
        applied: bool,
    },
    Ignore,
    MarkDead,
    Reset,
    /// A bulk replay's chunk: reset, or untouched.
    MaybeReset,
    Failure,
}

/// The state the checker reads just before a transaction (nothing runs in between).
struct Pre {
    status: Option<State>,
    effects: Vec<Existing>,
    generation: Option<i64>,
    /// The delivery was already decided (processed, and not `dead`) when this copy's
    /// transaction began: another copy of its message got there first.
    decided: bool,
    /// The invoice had an `invoice.refunded` on record, unprocessed (the checker's own
    /// query): an operator's or reconciliation's change into paid or overpaid must not apply.
    refund_on_record: bool,
    /// The delivery is a payment, unprocessed, whose invoice has such a refund received no
    /// later than it (the checker's own queries): it must wait, writing nothing.
    delivery_held: bool,
}

pub struct Sim<'o> {
    opts: &'o Options,
    world: World,
    k: Knobs,
    db: Db,
    rng: Rng,
    frng: Rng,
    /// The consumer batches' own stream (so batching does not shift the schedule's).
    brng: Rng,
    /// The consumers' draws: each consumer's I/O forks its own from it.
    drng: Rng,
    start: i64,
    chaos: bool,
    chaos_end: i64,
    senders: Vec<Sender>,
    in_flight: Vec<usize>,
    queue: Queue<Delivery>,
    dlq: Queue<Delivery>,
    actors: Vec<Actor>,
    consumers_busy: usize,
    dlq_busy: bool,
    sweeper_busy: bool,
    next_cron: i64,
    ops: Vec<(i64, Op)>,
    dm: Vec<DModel>,
    rm: Vec<RModel>,
    by_event: BTreeMap<String, usize>,
    by_resource: BTreeMap<String, usize>,
    touched_r: BTreeSet<usize>,
    touched_d: Vec<(usize, Who)>,
    trace_tail: VecDeque<String>,
    trace_all: Vec<String>,
    hash: u64,
    steps: usize,
    stats: Stats,
    violations: Vec<String>,
    /// The effects outbox's dispatcher and the order system (`dispatch.rs`): its own lane.
    fx: dispatch::Fx,
    /// How the last reconciliation walk ended (`reconcile.rs`).
    last_reconcile: Option<paymos_core::actors::reconcile::Ended>,
    /// The archive's runs and its bucket (`archive.rs`): its own lane.
    ax: archive::Ax,
    /// Pull mode's order system (`pull.rs`), in the effects' lane in place of the dispatcher.
    pl: pull::Puller,
}

/// What the simulated D1 does to a write (a statement, or a batch failing whole), drawn from
/// the stream of the actor that makes it: the faults' schedule is the seed's.
fn write_fault(chaos: bool, outage: bool, k: &Knobs, rng: &mut Rng) -> Fault {
    if !chaos {
        Fault::None
    } else if outage || rng.chance(k.p_d1) {
        Fault::Before
    } else if rng.chance(k.p_after_commit) {
        Fault::AfterCommit
    } else {
        Fault::None
    }
}

fn fnv(mut h: u64, bytes: &[u8]) -> u64 {
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01B3);
    }
    h
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl<'o> Sim<'o> {
    pub fn new(seed: u64, opts: &'o Options) -> Sim<'o> {
        let start = clock::EPOCH_MS;
        clock::set_now_ms(start);
        let mut root = Rng::new(seed);
        let mut wrng = root.fork();
        let mut krng = root.fork();
        let rng = root.fork();
        let frng = root.fork();
        let mut brng = root.fork();
        // the dispatcher's lane: a stream of its own, forked last (the others are unchanged)
        let xrng = root.fork();
        // the consumers' draws (tokens, license codes), forked after every other stream
        let drng = root.fork();
        // the archive's lane, forked after all of them
        let arng = root.fork();
        // pull mode's, after that
        let prng = root.fork();
        // and the world's late refunds
        let mut lrng = root.fork();
        let world = world::generate(&mut wrng, &mut lrng, start);
        let mut k = Knobs::draw(&mut krng, start);
        k.consumer_batch = brng.range(1, 3) as usize;
        let db = Db::open(opts.mutations.edits).expect("schema applies");
        let last_emit = world
            .resources
            .iter()
            .flat_map(|r| r.events.iter().map(|e| e.emit_at))
            .max()
            .unwrap_or(start);
        let ladder_span = ATTEMPT_OFFSETS_SECONDS[ATTEMPT_OFFSETS_SECONDS.len() - 1] as i64 * 1000
            / k.ladder_divisor;
        let outage_end = k
            .outages
            .iter()
            .chain(&k.misconfigured)
            .map(|(_, e)| *e)
            .max()
            .unwrap_or(start);
        let chaos_end = (last_emit + ladder_span).max(outage_end) + 60_000;
        let senders = world
            .deliveries
            .iter()
            .map(|d| {
                let at =
                    world.resources[d.resource].events[d.event].emit_at + krng.below(5_000) as i64;
                Sender {
                    attempts: 0,
                    first_at: at,
                    next_at: Some(at),
                    acked: false,
                    provider_replays: 0,
                }
            })
            .collect();
        // operators and reconciliation at random moments of the chaos
        let mut ops = Vec::new();
        for _ in 0..krng.below(7) {
            let at = start + krng.below((chaos_end - start) as u64) as i64;
            let op = match krng.weighted(&[5, 3, 1]) {
                0 => Op::Replay,
                1 => Op::Manual,
                _ => Op::Reconcile,
            };
            ops.push((at, op));
        }
        // after an outage, operators replay what it left dead (and sometimes what is stuck)
        for (_, end) in &k.outages {
            if krng.chance(0.6) {
                ops.push((end + krng.below(120_000) as i64, Op::BulkReplay("dead")));
            }
            if krng.chance(0.5) {
                ops.push((end + krng.below(30_000) as i64, Op::BulkReplay("received")));
            }
        }
        // once the mode is fixed, the operator replays what went dead meanwhile
        if let Some((_, end)) = k.misconfigured {
            if krng.chance(0.8) {
                ops.push((end + krng.below(300_000) as i64, Op::BulkReplay("dead")));
            }
        }
        ops.sort_by_key(|(t, _)| *t);
        let by_event = world
            .deliveries
            .iter()
            .enumerate()
            .map(|(i, d)| (d.event_id.clone(), i))
            .collect();
        let by_resource = world
            .resources
            .iter()
            .enumerate()
            .map(|(i, r)| (r.id.clone(), i))
            .collect();
        let n_d = world.deliveries.len();
        let n_r = world.resources.len();
        let fx = dispatch::Fx::new(xrng, start, chaos_end);
        let ax = archive::Ax::new(arng, start);
        let pl = pull::Puller::new(prng, start, chaos_end);
        let mut sim = Sim {
            opts,
            world,
            k,
            db,
            rng,
            frng,
            brng,
            drng,
            start,
            chaos: true,
            chaos_end,
            senders,
            in_flight: Vec::new(),
            queue: Queue::new(opts.mutations.deliveries_max_retries.unwrap_or(MAX_RETRIES)),
            dlq: Queue::new(DLQ_MAX_RETRIES),
            actors: Vec::new(),
            consumers_busy: 0,
            dlq_busy: false,
            sweeper_busy: false,
            next_cron: start + CRON_MS,
            ops,
            dm: vec![DModel::default(); n_d],
            rm: vec![RModel::default(); n_r],
            by_event,
            by_resource,
            touched_r: BTreeSet::new(),
            touched_d: Vec::new(),
            trace_tail: VecDeque::new(),
            trace_all: Vec::new(),
            hash: 0xcbf2_9ce4_8422_2325,
            steps: 0,
            stats: Stats::default(),
            violations: Vec::new(),
            fx,
            last_reconcile: None,
            ax,
            pl,
        };
        sim.trace(format!(
            "world: {} resources, {} deliveries over {} endpoint(s); knobs {:?}",
            sim.world.resources.len(),
            n_d,
            sim.world.endpoints,
            sim.k
        ));
        let fx = sim.fx.describe();
        sim.trace(fx);
        let ax = sim.ax.describe();
        sim.trace(ax);
        let pl = sim.pl.describe();
        sim.trace(pl);
        for r in &sim.world.resources.clone() {
            let evs: Vec<String> = r
                .events
                .iter()
                .map(|e| {
                    format!(
                        "{}@+{}s{}",
                        e.event_type,
                        (e.emit_at - start) / 1000,
                        if e.subscribed { "" } else { "(unsubscribed)" }
                    )
                })
                .collect();
            sim.trace(format!(
                "  {} {}: {}",
                r.id,
                if r.live { "live" } else { "test-mode" },
                evs.join(", ")
            ));
        }
        sim
    }

    fn now(&self) -> i64 {
        clock::now_ms()
    }

    /// The effects' lane: the dispatcher and its order system, or in pull mode the order
    /// system that polls the feed, the dispatcher still finishing what a switch from push
    /// left it (`fx_candidates`: no sweeps, no redeliveries).
    fn effects_step(&mut self) -> bool {
        if self.switch_mode() {
            return true;
        }
        if self.pl.on {
            self.pull_step() || self.fx_step()
        } else {
            self.fx_step()
        }
    }

    fn effects_next_time(&self) -> Option<i64> {
        let lane = if self.pl.on {
            self.pull_next_time()
                .into_iter()
                .chain(self.fx_next_time())
                .min()
        } else {
            self.fx_next_time()
        };
        lane.into_iter().chain(self.switch_next_time()).min()
    }

    fn trace(&mut self, line: String) {
        let line = format!(
            "[{:>8.3}s] {line}",
            (self.now() - self.start) as f64 / 1000.0
        );
        self.hash = fnv(self.hash, line.as_bytes());
        self.hash = fnv(self.hash, b"\n");
        if self.opts.keep_trace {
            self.trace_all.push(line.clone());
        }
        if self.trace_tail.len() == TRACE_TAIL {
            self.trace_tail.pop_front();
        }
        self.trace_tail.push_back(line);
    }

    fn violation(&mut self, v: String) {
        self.trace(format!("VIOLATION: {v}"));
        self.violations.push(v);
    }

    fn eid(&self, d: usize) -> &str {
        &self.world.deliveries[d].event_id
    }

    // ------------------------------------------------------------------ faults

    fn in_outage(&self) -> bool {
        let now = self.now();
        self.chaos && self.k.outages.iter().any(|(s, e)| (*s..*e).contains(&now))
    }

    fn misconfigured(&self) -> bool {
        let now = self.now();
        self.chaos
            && self
                .k
                .misconfigured
                .is_some_and(|(s, e)| (s..e).contains(&now))
    }

    fn fault_read(&mut self) -> Fault {
        if !self.chaos {
            return Fault::None;
        }
        if self.in_outage() || self.frng.chance(self.k.p_d1) {
            Fault::Before
        } else {
            Fault::None
        }
    }

    /// One statement on delivery `d`'s row under the chaos plan's fault; if it committed, the
    /// checker is told that `who` may have changed the row.
    fn write_delivery(&mut self, d: usize, who: Who, b: &Bound<'_>) -> Exec {
        let fault = self.fault_write();
        let ex = self.db.run(b, fault);
        if ex.committed {
            self.touched_d.push((d, who));
        }
        ex
    }

    /// One statement's rows under `fault` (a read, or a write whose rows are all it answers).
    fn one(&mut self, b: &Bound<'_>, fault: Fault) -> Result<crate::db::Rows, String> {
        let mut rows = self.db.run(b, fault).result?;
        Ok(rows.pop().unwrap_or_default())
    }

    /// A one-transaction batch on delivery `d`'s row (its tally first, the change last) under
    /// the chaos plan's fault, as [`Sim::write_delivery`]; the change's rows are the last.
    fn write_delivery_batch(&mut self, d: usize, who: Who, bs: &[Bound<'_>]) -> Exec {
        let fault = self.fault_write();
        let mut ex = self.db.batch(bs, fault);
        if ex.committed {
            self.touched_d.push((d, who));
        }
        if let Ok(rows) = &mut ex.result {
            let last = rows.pop().unwrap_or_default();
            *rows = vec![last];
        }
        ex
    }

    fn fault_write(&mut self) -> Fault {
        let outage = self.in_outage();
        write_fault(self.chaos, outage, &self.k, &mut self.frng)
    }

    fn fault_batch(&mut self, n: usize) -> Fault {
        if !self.chaos {
            return Fault::None;
        }
        if self.in_outage() {
            Fault::Before
        } else if self.frng.chance(self.k.p_d1) {
            Fault::At(self.frng.below(n as u64) as usize)
        } else if self.frng.chance(self.k.p_after_commit) {
            Fault::AfterCommit
        } else {
            Fault::None
        }
    }

    fn crash(&mut self) -> bool {
        self.chaos && self.frng.chance(self.k.p_crash)
    }

    /// What the platform does to sends and acks (the same for every lane).
    fn platform(&self) -> Platform {
        Platform {
            chaos: self.chaos,
            p_send_fail: self.k.p_send_fail,
            p_dup: self.k.p_dup,
        }
    }

    /// A send to the deliveries queue: `Ok` (enqueued), or an error, after which the messages
    /// may or may not have been enqueued (the caller cannot tell).
    fn send(&mut self, msgs: Vec<Msg>) -> Result<(), ()> {
        let n = msgs.len();
        let sent = self.queue.send(self.platform(), msgs, &mut self.frng);
        if sent.enqueued {
            self.stats.messages += n;
        }
        if sent.failed {
            Err(())
        } else {
            Ok(())
        }
    }

    fn new_msg(&self, d: usize, generation: Option<i64>) -> Msg {
        let facts = None;
        queue::Msg::new(
            Delivery {
                d,
                generation,
                facts,
            },
            self.now(),
        )
    }

    /// The receipt's message: the envelope's facts from the body, as the Worker reads them.
    fn receipt_msg(&self, d: usize) -> Msg {
        let delivery = &self.world.deliveries[d];
        let envelope =
            paymos_core::parse_envelope(delivery.body.as_bytes(), Some(&delivery.event_id));
        let mut m = self.new_msg(d, Some(0));
        m.body.facts = envelope.ok().and_then(|e| Facts::of(&e));
        m
    }

    /// `message.retry({delaySeconds})`, or a consumer that died holding it: another attempt,
    /// or the dead-letter queue once `max_retries` are spent.
    fn retry(&mut self, msg: Msg, delay_ms: i64) {
        let Err(msg) = self.queue.retry(msg, self.now(), delay_ms) else {
            return;
        };
        let g = msg.generation.unwrap_or(-1);
        self.dm[msg.d].exhausted.insert(g);
        self.stats.dead_lettered += 1;
        self.trace(format!(
            "queue: {} gen {:?} exhausted {} attempts → dead-letter queue",
            self.eid(msg.d),
            msg.generation,
            msg.attempts
        ));
        self.dlq.dead_letter(msg.body, self.now(), &mut self.frng);
    }

    // ------------------------------------------------------------------ scheduler

    fn candidates(&self) -> Vec<Cand> {
        let now = self.now();
        let mut c: Vec<Cand> = (0..self.actors.len()).map(Cand::Actor).collect();
        for (d, s) in self.senders.iter().enumerate() {
            if !s.acked && s.next_at.is_some_and(|t| t <= now) {
                c.push(Cand::Receive(d));
            }
        }
        if self.consumers_busy < self.k.consumers && self.queue.visible(now) > 0 {
            c.push(Cand::Consume);
        }
        if !self.dlq_busy && self.dlq.visible(now) > 0 {
            c.push(Cand::DeadLetter);
        }
        if !self.sweeper_busy && now >= self.next_cron {
            c.push(Cand::Sweep);
        }
        if self.ops.first().is_some_and(|(t, _)| *t <= now) {
            c.push(Cand::Op);
        }
        c
    }

    fn next_time(&self) -> Option<i64> {
        let senders = self
            .senders
            .iter()
            .filter(|s| !s.acked)
            .filter_map(|s| s.next_at);
        let msgs = self.queue.times().chain(self.dlq.times());
        let ops = self.ops.iter().map(|(t, _)| *t);
        senders
            .chain(msgs)
            .chain(ops)
            .chain(std::iter::once(self.next_cron))
            .chain(self.chaos.then_some(self.chaos_end))
            .chain(self.effects_next_time())
            .chain(self.ax_next_time())
            .min()
    }

    fn step(&mut self) -> bool {
        // the dispatcher's lane first: one action if one is due (its own stream, not a step)
        if self.effects_step() {
            self.check_touched();
        }
        // and the archive's
        if self.ax_step() {
            self.check_touched();
        }
        let cands = self.candidates();
        if cands.is_empty() {
            let Some(t) = self.next_time() else {
                return false;
            };
            clock::set_now_ms(t.max(self.now() + 1));
            return true;
        }
        let pick = *self.rng.pick(&cands);
        self.steps += 1;
        match pick {
            Cand::Actor(i) => {
                let actor = self.actors.swap_remove(i);
                self.advance(actor);
            }
            Cand::Receive(d) => self.start_receive(d),
            Cand::Consume => {
                let now = self.now();
                let n = match self.k.consumer_batch.min(self.queue.visible(now)) {
                    0 | 1 => 1,
                    max => self.brng.range(1, max as u64) as usize,
                };
                self.consumers_busy += 1;
                let msgs = if n == 1 {
                    vec![self.queue.take_any(now, &mut self.rng)]
                } else {
                    self.queue.take(n, now, &mut self.brng)
                };
                self.start_consume(msgs);
            }
            Cand::DeadLetter => {
                let msg = self
                    .dlq
                    .take_first(self.now())
                    .expect("a visible dead letter");
                self.dlq_busy = true;
                self.advance(Actor::DeadLetter { msg, marked: false });
            }
            Cand::Sweep => {
                self.next_cron += CRON_MS * ((self.now() - self.next_cron) / CRON_MS + 1);
                self.sweeper_busy = true;
                self.start_sweep();
            }
            Cand::Op => {
                let (_, op) = self.ops.remove(0);
                self.start_op(op);
            }
        }
        self.check_touched();
        let dt = self.rng.below(1_500) as i64;
        clock::set_now_ms(self.now() + dt);
        true
    }

    fn start_receive(&mut self, d: usize) {
        let s = &mut self.senders[d];
        let n = s.attempts;
        s.attempts += 1;
        // the next rung starts whether or not this one answers in time
        s.next_at = ATTEMPT_OFFSETS_SECONDS
            .get(s.attempts)
            .map(|off| s.first_at + *off as i64 * 1000 / self.k.ladder_divisor);
        self.stats.requests += 1;
        self.trace(format!("sender: {} attempt {}", self.eid(d), n + 1));
        self.in_flight.push(d);
        self.advance(Actor::Receive {
            d,
            phase: Recv::Insert,
        });
    }

    fn start_op(&mut self, op: Op) {
        match op {
            Op::Replay => self.advance(Actor::Replay {
                d: None,
                generation: None,
            }),
            Op::ReplayOne(d) => self.replay_reset(d),
            Op::Manual => {
                // operators work on the live resources their dashboard shows
                let live: Vec<usize> = (0..self.world.resources.len())
                    .filter(|r| self.world.resources[*r].live)
                    .collect();
                if live.is_empty() {
                    return;
                }
                let r = *self.rng.pick(&live);
                let kind = self.world.resources[r].kind;
                let to = match kind {
                    ResourceKind::Invoice => *self.rng.pick(&[
                        State::Paid,
                        State::Paid,
                        State::Paid,
                        State::Overpaid,
                        State::Expired,
                        State::Failed,
                        State::Confirming,
                        State::PartiallyPaid,
                    ]),
                    ResourceKind::Withdrawal => {
                        *self
                            .rng
                            .pick(&[State::Completed, State::Failed, State::Processing])
                    }
                    ResourceKind::Deposit => *self.rng.pick(&[State::Confirmed, State::Failed]),
                };
                let order_ref = self.rng.chance(0.5);
                self.advance(Actor::Manual { r, to, order_ref });
            }
            Op::Reconcile => {
                let full = self.rng.chance(0.5);
                self.start_reconcile(full);
            }
            Op::BulkReplay(status) => self.start_bulk_replay(status),
        }
    }

    // ------------------------------------------------------------------ actors

    fn advance(&mut self, actor: Actor) {
        match actor {
            Actor::Receive { d, phase } => self.receive(d, phase),
            Actor::Consume {
                msgs,
                driver,
                returned,
            } => self.consume(msgs, driver, returned),
            Actor::DeadLetter { msg, marked } => self.dead_letter(msg, marked),
            Actor::Chunked {
                run,
                driver,
                returned,
            } => self.chunked(run, driver, returned),
            Actor::Replay { d, generation } => self.replay(d, generation),
            Actor::Manual { r, to, order_ref } => self.manual(r, to, order_ref),
            Actor::Reconcile { driver, returned } => self.reconcile(driver, returned),
        }
    }

    fn end_receive(&mut self, d: usize) {
        if let Some(i) = self.in_flight.iter().position(|x| *x == d) {
            self.in_flight.swap_remove(i);
        }
    }

    /// `POST /webhooks/paymos` (verified): insert-or-nothing, enqueue if new, reply.
    fn receive(&mut self, d: usize, phase: Recv) {
        let id = self.eid(d).to_string();
        match phase {
            Recv::Insert => {
                let w = &self.world.deliveries[d];
                let res = &self.world.resources[w.resource];
                let ev = &res.events[w.event];
                let b = st::INSERT_DELIVERY.bind(vec![
                    Arg::text(&w.event_id),
                    Arg::text(&res.id),
                    Arg::text(&ev.event_type),
                    Arg::text(&w.body),
                ]);
                let b = (b).into_owned();
                let ex = self.write_delivery(d, Who::Insert, &b);
                match ex.result {
                    Ok(rows) => {
                        let new = !rows[0].is_empty();
                        self.trace(format!(
                            "receive: {id} insert → {}",
                            if new { "new" } else { "duplicate" }
                        ));
                        if new && self.crash() {
                            self.trace(format!(
                                "receive: {id} worker died after the insert (no send, no reply)"
                            ));
                            self.end_receive(d);
                            return;
                        }
                        let phase = if new { Recv::Send } else { Recv::Reply };
                        self.actors.push(Actor::Receive { d, phase });
                    }
                    Err(e) => {
                        self.trace(format!("receive: {id} insert failed ({e}) → 503"));
                        self.end_receive(d);
                    }
                }
            }
            Recv::Send => {
                let m = self.receipt_msg(d);
                let sent = self.send(vec![m]);
                self.trace(format!(
                    "receive: {id} enqueue {}",
                    if sent.is_ok() {
                        "ok"
                    } else {
                        "failed (logged; still 200)"
                    }
                ));
                self.actors.push(Actor::Receive {
                    d,
                    phase: Recv::Reply,
                });
            }
            Recv::Reply => {
                self.end_receive(d);
                if self.chaos && self.frng.chance(self.k.p_reply_lost) {
                    self.trace(format!(
                        "receive: {id} 200 lost on the way (sender times out)"
                    ));
                } else {
                    self.senders[d].acked = true;
                    self.senders[d].next_at = None;
                    self.trace(format!("receive: {id} 200 reached the sender"));
                }
            }
        }
    }

    fn dead_letter(&mut self, msg: Msg, marked: bool) {
        let d = msg.d;
        let id = self.eid(d).to_string();
        let failed = |sim: &mut Self, msg: Msg, why: &str| {
            sim.dlq_busy = false;
            let delay = i64::from(RETRY_BASE_SECONDS) * 1000;
            match sim.dlq.retry(msg, sim.now(), delay) {
                Err(_) => sim.trace(format!("dead-letter: {id} message dropped after {why}")),
                Ok(()) => sim.trace(format!("dead-letter: {id} {why}; retry")),
            }
        };
        if self.crash() {
            return failed(self, msg, "consumer died");
        }
        if marked {
            self.dlq_busy = false;
            self.trace(format!("dead-letter: {id} acked"));
            self.dlq
                .ack(self.platform(), msg, self.now(), &mut self.frng);
            return;
        }
        // the core's driver, its calls executed at once (one action)
        let mutation = self.opts.mutations.dead_letter;
        let mut io = DeadLetterIo { sim: self, d };
        let verdict = run_at_once(dead_letter::decide(&mut io, &id, msg.generation, &mutation));
        let verdict = match verdict {
            Ok(verdict) => verdict,
            Err(e) => return failed(self, msg, &e),
        };
        match verdict {
            dead_letter::Verdict::Dead => {
                self.trace(format!(
                    "dead-letter: {id} gen {:?} → marked dead",
                    msg.generation
                ));
            }
            dead_letter::Verdict::Superseded(why) => {
                if why == "replayed" {
                    // the race the generations exist for: this dead letter would have buried
                    // an operator's replay
                    self.stats.dead_letters_after_replay += 1;
                }
                self.trace(format!(
                    "dead-letter: {id} gen {:?} → superseded ({why})",
                    msg.generation
                ));
            }
            dead_letter::Verdict::HandBack { generation } => {
                self.stats.handed_back += 1;
                self.trace(format!(
                    "dead-letter: {id} gen {generation:?} → handed back (its failures were \
                     not recorded)"
                ));
                // the envelope's facts do not change with the generation (as the Worker's)
                let mut m = self.new_msg(d, generation);
                m.body.facts = msg.facts.clone();
                if self.send(vec![m]).is_err() {
                    return failed(self, msg, "send failed");
                }
            }
        }
        self.actors.push(Actor::DeadLetter { msg, marked: true });
    }

    /// An operator's replay: what the archive shows them (dead first, then deliveries that
    /// keep failing, then any).
    fn replay(&mut self, d: Option<usize>, generation: Option<i64>) {
        match (d, generation) {
            (None, _) => {
                let on_record: Vec<usize> = (0..self.dm.len())
                    .filter(|d| self.dm[*d].snap.is_some())
                    .collect();
                if on_record.is_empty() {
                    return;
                }
                let dead: Vec<usize> = on_record
                    .iter()
                    .copied()
                    .filter(|d| {
                        self.dm[*d].snap.as_ref().unwrap().outcome.as_deref() == Some("dead")
                    })
                    .collect();
                let stuck: Vec<usize> = on_record
                    .iter()
                    .copied()
                    .filter(|d| !self.dm[*d].snap.as_ref().unwrap().processed)
                    .collect();
                let d = match self.rng.weighted(&[5, 3, 2]) {
                    0 if !dead.is_empty() => *self.rng.pick(&dead),
                    1 if !stuck.is_empty() => *self.rng.pick(&stuck),
                    _ => *self.rng.pick(&on_record),
                };
                self.replay_reset(d);
            }
            (Some(d), g) => {
                let m = self.new_msg(d, g);
                let sent = self.send(vec![m]);
                self.trace(format!(
                    "operator: replay {} enqueue {}",
                    self.eid(d),
                    if sent.is_ok() {
                        "ok"
                    } else {
                        "failed (202, enqueued:false)"
                    }
                ));
            }
        }
    }

    /// `POST /admin/api/deliveries/{id}/replay`: the reset (then the send, a later step).
    fn replay_reset(&mut self, d: usize) {
        let id = self.eid(d).to_string();
        match self.reset_for_replay(d) {
            Ok(g) => {
                self.trace(format!("operator: replay {id} → generation {g:?}"));
                self.actors.push(Actor::Replay {
                    d: Some(d),
                    generation: g,
                });
            }
            Err(e) => self.trace(format!("operator: replay {id} failed ({e}) → 503")),
        }
    }

    fn manual(&mut self, r: usize, to: State, with_order_ref: bool) {
        let res = self.world.resources[r].clone();
        self.rm[r].touched_by_operator = true;
        let order_ref = if with_order_ref {
            res.order_ref.as_deref()
        } else {
            None
        };
        let reason = format!("人工核对 ops: marked {to} by hand");
        let result = self.transition(
            r,
            Change {
                resource_id: res.id.clone(),
                kind: res.kind,
                to,
                order_ref: order_ref.map(str::to_string),
                amount: None,
                currency: None,
                cause_kind: CauseKind::Manual,
                cause: reason,
                delivery: None,
                pull: self.pl.on,
            },
        );
        self.stats.manual += 1;
        self.trace(format!(
            "operator: transition {} → {to} (order_ref {order_ref:?}): {result:?}",
            res.id
        ));
    }

    // ------------------------------------------------------------------ the transition

    fn pre(&mut self, r: usize, d: Option<usize>) -> Pre {
        let id = self.world.resources[r].id.clone();
        let kind = self.world.resources[r].kind;
        let res = self.db.read(&st::LOAD_RESOURCE.bind(vec![Arg::text(&id)]));
        let status = if res.is_empty() {
            None
        } else {
            state_of(kind, &res.text(0, "status").unwrap_or_default())
        };
        let eff = self.db.read(&st::LOAD_EFFECTS.bind(vec![Arg::text(&id)]));
        let effects = existing_effects(&eff);
        let delivery = d.and_then(|d| {
            let row = self
                .db
                .read(&st::LOAD_DELIVERY.bind(vec![Arg::text(&self.world.deliveries[d].event_id)]));
            (!row.is_empty()).then(|| {
                let decided = row.text(0, "processed_at").is_some()
                    && row.text(0, "outcome").as_deref() != Some("dead");
                (row.int(0, "generation").unwrap_or(-1), decided)
            })
        });
        let refund_on_record = !self
            .db
            .inspect(&format!(
                "SELECT 1 FROM webhook_delivery WHERE resource_id = '{id}' \
                 AND event_type = 'invoice.refunded' AND processed_at IS NULL"
            ))
            .is_empty();
        let delivery_held = d.is_some_and(|d| self.delivery_held(r, d));
        Pre {
            status,
            effects,
            generation: delivery.map(|(g, _)| g),
            decided: delivery.is_some_and(|(_, decided)| decided),
            refund_on_record,
            delivery_held,
        }
    }

    /// Whether delivery `d` is a payment, unprocessed, whose invoice `r` has an
    /// `invoice.refunded` on record, unprocessed and received no later than it: it waits for
    /// that refund (interface §3, "arrives after it" counted at receipt), from the world's
    /// deliveries and the rows on record, not the statements under test.
    fn delivery_held(&self, r: usize, d: usize) -> bool {
        let delivery = &self.world.deliveries[d];
        let resource = &self.world.resources[r];
        let payment = matches!(
            resource.events[delivery.event].to,
            Some(State::Paid | State::Overpaid)
        );
        let own = self.db.inspect(&format!(
            "SELECT received_at FROM webhook_delivery WHERE event_id = '{}' \
             AND processed_at IS NULL",
            delivery.event_id
        ));
        let Some(paid_at) = (!own.is_empty())
            .then(|| own.text(0, "received_at"))
            .flatten()
        else {
            return false;
        };
        let refunds = self.db.inspect(&format!(
            "SELECT 1 FROM webhook_delivery WHERE resource_id = '{}' \
             AND event_type = 'invoice.refunded' AND processed_at IS NULL \
             AND received_at <= '{paid_at}'",
            resource.id
        ));
        payment && !refunds.is_empty()
    }

    /// `transition::apply` for an operator or reconciliation: the core's prepared change, one
    /// batch. Checks what the batch did against what the plan decides from the state just
    /// before it.
    pub(super) fn transition(&mut self, r: usize, change: Change) -> Result<(), String> {
        let rng = &mut self.rng;
        let p = prepare(change, self.opts.mutations.plan, &mut || rng.bytes16())
            .map_err(|e| e.to_string())?;
        let mut statements = p.statements();
        if let Some(edit) = self.opts.mutations.batch {
            statements = edit(statements, p.change.delivery.clone());
        }
        let pre = self.pre(r, None);
        let decision = p.plan.decide(pre.status, &pre.effects);
        let fault = self.fault_batch(statements.len());
        let ex = self.db.batch(&statements, fault);
        if ex.committed {
            let returned = ex.result.as_ref().ok().and_then(|r| r.last().cloned());
            self.after_transition(r, None, &p, &statements, &pre, decision, returned.as_ref());
            if ex.result.is_err() {
                self.trace("  committed, but the caller saw an error".into());
            }
        }
        let rows = ex.result?;
        // `effects::send_released` (an order system is configured)
        let released = released_ids(&statements, &rows);
        self.fx_send(&released, "the transition");
        Ok(())
    }

    /// Checks one transition's statements, right after they ran (inside their transaction
    /// or after its commit): the read-back, the status and the effects against the plan's
    /// decision from `pre`; records what applied.
    #[allow(clippy::too_many_arguments)]
    fn after_transition(
        &mut self,
        r: usize,
        d: Option<usize>,
        p: &Prepared,
        batch: &[Bound<'_>],
        pre: &Pre,
        decision: Decision,
        returned: Option<&Rows>,
    ) {
        let (to, cause_kind) = (p.change.to, p.change.cause_kind);
        let cause = p.change.cause.as_str();
        let license = p.license.clone();
        let res = self.world.resources[r].clone();
        let read_back = self.db.read(batch.last().expect("a read-back"));
        if let Some(returned) = returned {
            if returned != &read_back {
                self.violation(format!(
                    "{}: the batch's read-back differs from the state after it",
                    res.id
                ));
            }
        }
        let applied = read_back.int(0, "applied") == Some(1);
        let status = read_back
            .text(0, "status")
            .and_then(|s| state_of(res.kind, &s));
        // "A second consumer of the same delivery finds processed_at set and changes
        // nothing" (RECORD_OUTCOME): a delivery already decided does not transition again
        // and nothing but a delivery's payment brings an invoice to paid while a refund waits
        // (interface §3); a delivery's payment waits for a refund received before it (its
        // transaction's delivery gate, checker (r) below)
        let held = (cause_kind != CauseKind::Event
            && matches!(to, State::Paid | State::Overpaid)
            && pre.refund_on_record)
            || pre.delivery_held;
        // (r) the transaction holds exactly the payments the deliveries on record say wait: a
        // wrong answer ships goods for money returned, or holds back a payment the refund did
        // not overtake
        let said_held = read_back.int(0, "held") == Some(1);
        if d.is_some() && said_held != pre.delivery_held {
            self.violation(format!(
                "(r) the transaction says held {said_held} for {}, where the deliveries on \
                 record say {}",
                p.change.cause, pre.delivery_held
            ));
        }
        let (want_applied, want_effect, want_cancel, want_to) = match decision {
            Decision::Apply {
                to,
                effect,
                cancels,
            } if !pre.decided && !held => (true, effect, cancels, Some(to)),
            _ => (false, None, None, pre.status),
        };
        let what = format!(
            "{} → {to} by {cause:?} on {} (from {:?}, effects {:?})",
            cause_kind.as_str(),
            res.id,
            pre.status,
            pre.effects
        );
        if applied != want_applied {
            self.violation(format!(
                "SQL applied={applied}, the plan decides {decision:?}{}: {what}",
                if pre.decided {
                    " for a delivery another copy already processed (it must change nothing)"
                } else {
                    ""
                }
            ));
        }
        let expected_status = if applied { want_to } else { pre.status };
        if status != expected_status {
            self.violation(format!(
                "status after the batch is {status:?}, expected {expected_status:?}: {what}"
            ));
        }
        let eff = self
            .db
            .read(&st::LOAD_EFFECTS.bind(vec![Arg::text(&res.id)]));
        let post = existing_effects(&eff);
        let mut new: Vec<EffectKind> = post.iter().map(|e| e.kind).collect();
        for e in &pre.effects {
            if let Some(i) = new.iter().position(|x| *x == e.kind) {
                new.remove(i);
            }
        }
        // cancelled in this transaction: settled now, not before (a refund's fulfilment)
        let cancelled: Vec<EffectKind> = (0..eff.rows.len())
            .filter(|i| eff.text(*i, "dispatch").as_deref() == Some("cancelled"))
            .filter_map(|i| EffectKind::from_str_name(&eff.text(i, "kind").unwrap_or_default()))
            .filter(|k| pre.effects.iter().any(|x| x.kind == *k && !x.settled))
            .collect();
        let want_cancelled: Vec<EffectKind> = want_cancel.into_iter().filter(|_| applied).collect();
        if cancelled != want_cancelled {
            self.violation(format!(
                "the batch cancelled {cancelled:?}, the plan expects {want_cancelled:?}: {what}"
            ));
        }
        let want_new: Vec<EffectKind> = want_effect.into_iter().filter(|_| applied).collect();
        if new != want_new {
            self.violation(format!(
                "the batch recorded effects {new:?}, the plan expects {want_new:?}: {what}"
            ));
        }
        if applied {
            self.rm[r].applied += 1;
            if to == State::Refunded {
                self.rm[r].refund_revokes = Some(want_effect == Some(EffectKind::Revocation));
            }
            if want_effect == Some(EffectKind::Fulfilment) && new.contains(&EffectKind::Fulfilment)
            {
                self.rm[r].fulfilment_license = license;
            }
            if let Some(d) = d {
                let g = pre.generation.unwrap_or(-1);
                if self.dm[d].applied_gens.contains(&g) {
                    self.violation(format!(
                        "{} applied its transition a second time in generation {g} \
                         (a duplicate message re-applied a processed delivery): {what}",
                        self.eid(d)
                    ));
                }
                self.dm[d].applied_gens.push(g);
            }
        }
        self.touched_r.insert(r);
        if let Some(d) = d {
            let outcome = if want_applied {
                Outcome::Applied
            } else {
                Outcome::Stale
            };
            self.touched_d.push((d, Who::Batch { outcome, applied }));
        }
        self.trace(format!(
            "  transaction: {} ({what})",
            if applied {
                "applied"
            } else {
                "refused by the guard"
            }
        ));
        match (cause_kind, applied) {
            (CauseKind::Event, true) => self.stats.applied += 1,
            (CauseKind::Event, false) => self.stats.stale += 1,
            _ => {}
        }
    }

    // ------------------------------------------------------------------ phases

    fn quiet(&self) -> bool {
        self.actors.is_empty()
            && self.queue.is_empty()
            && self.dlq.is_empty()
            && self.senders.iter().all(|s| s.acked)
            && self
                .dm
                .iter()
                .all(|m| m.snap.as_ref().is_none_or(|s| s.processed))
    }

    /// Runs with faults off until nothing is left to do.
    fn drain(&mut self, what: &str) -> bool {
        let started = self.steps;
        loop {
            if !self.violations.is_empty() {
                return false;
            }
            // the provider's operator re-sends events whose 11 attempts all failed
            for d in 0..self.senders.len() {
                let s = &self.senders[d];
                if !s.acked && s.next_at.is_none() && !self.in_flight.contains(&d) {
                    let now = self.now();
                    let s = &mut self.senders[d];
                    s.attempts = 0;
                    s.first_at = now;
                    s.next_at = Some(now);
                    s.provider_replays += 1;
                    self.stats.provider_replays += 1;
                    self.trace(format!("provider: replays failed event {}", self.eid(d)));
                }
            }
            if self.quiet() {
                return true;
            }
            if self.steps - started > DRAIN_MAX_STEPS {
                let stuck: Vec<String> = (0..self.dm.len())
                    .filter(|d| self.dm[*d].snap.as_ref().is_some_and(|s| !s.processed))
                    .map(|d| self.eid(d).to_string())
                    .collect();
                self.violation(format!(
                    "{what}: no quiescence after {DRAIN_MAX_STEPS} steps without faults; \
                     unprocessed: {stuck:?}; {} queued, {} dead letters, {} actors",
                    self.queue.len(),
                    self.dlq.len(),
                    self.actors.len()
                ));
                return false;
            }
            self.step();
        }
    }

    pub fn run(mut self) -> Report {
        // chaos: every fault on, until the world's events and the sender's ladders are over
        while self.violations.is_empty()
            && self.now() < self.chaos_end
            && self.steps < CHAOS_MAX_STEPS
        {
            self.step();
        }
        if self.violations.is_empty() {
            self.chaos = false;
            self.ops.clear();
            self.trace("— faults stop; drain —".into());
            if self.drain("drain") {
                // every dead delivery is replayable: replay each, and it is processed
                let dead: Vec<usize> = (0..self.dm.len())
                    .filter(|d| {
                        self.dm[*d].snap.as_ref().and_then(|s| s.outcome.as_deref()) == Some("dead")
                    })
                    .collect();
                self.stats.dead_at_drain = dead.len();
                // an operator dismisses every other one first (handled: out of the dead
                // counts), then finds they need a replay after all: a replay ends a dismissal
                for (i, d) in dead.iter().enumerate() {
                    if i.is_multiple_of(2) {
                        let id = self.eid(*d).to_string();
                        let ex = self.db.batch(
                            &st::dismiss_delivery_batch(&id, "handled by hand"),
                            Fault::None,
                        );
                        let dismissed = ex
                            .result
                            .is_ok_and(|r| r.last().is_some_and(|x| !x.is_empty()));
                        if !dismissed {
                            self.violation(format!(
                                "{id}: dead, and its dismissal changed nothing"
                            ));
                        }
                        self.trace(format!("operator: dismiss dead {id}"));
                    }
                }
                self.check_tally("after the dismissals");
                for d in dead {
                    self.trace(format!("operator: replay dead {}", self.eid(d)));
                    // faults are off: the reset (and its restore, when archived) commits
                    let g = self.reset_for_replay(d).ok().flatten();
                    self.replay(Some(d), g);
                }
                self.check_touched();
                if self.drain("replaying the dead") && self.final_reconciliation() {
                    self.final_checks();
                    self.effects_drain_and_check();
                }
            }
        }
        self.finish()
    }

    fn finish(mut self) -> Report {
        // the final database is part of the run's fingerprint
        for sql in [
            "SELECT * FROM webhook_delivery ORDER BY event_id",
            "SELECT * FROM resource ORDER BY id",
            "SELECT * FROM resource_transition ORDER BY resource_id, id",
            // not `effect_id`: drawn by SQLite's randomblob, whose generator is shared by
            // every connection of the process (seeds run in parallel)
            "SELECT id, resource_id, kind, license_code, order_ref, amount, currency, cause, \
             created_at FROM effect ORDER BY id",
        ] {
            let rows = self.db.inspect(sql);
            self.hash = fnv(self.hash, format!("{:?}", rows.rows).as_bytes());
        }
        self.stats.steps = self.steps;
        self.stats.effects = self.fx.stats.clone();
        self.stats.sim_seconds = (self.now() - self.start) / 1000;
        Report {
            seed: 0,
            hash: self.hash,
            violations: self.violations,
            trace_tail: self.trace_tail.into_iter().collect(),
            trace: self.trace_all,
            stats: self.stats,
        }
    }
}

/// The deliveries' dead-letter consumer's I/O in the simulated world: each call executed at
/// once, with the platform's faults.
struct DeadLetterIo<'s, 'o> {
    sim: &'s mut Sim<'o>,
    d: usize,
}

impl dead_letter::Io for DeadLetterIo<'_, '_> {
    type Error = String;
    async fn mark(&mut self, b: Bound<'static>) -> Result<bool, String> {
        let ex = self.sim.write_delivery(self.d, Who::MarkDead, &b);
        ex.result.map(|rows| !rows[0].is_empty())
    }
    async fn load(&mut self, event_id: &str) -> Result<Option<DeliveryRow>, String> {
        let fault = self.sim.fault_read();
        let b = st::LOAD_DELIVERY.bind(vec![Arg::text(event_id)]);
        let rows = self.sim.db.run(&b, fault).result;
        Ok(rows
            .and_then(|r| r[0].to::<DeliveryRow>())?
            .into_iter()
            .next())
    }
    async fn count(&mut self, b: Bound<'static>) -> Result<(), String> {
        let ex = self.sim.write_delivery(self.d, Who::Failure, &b);
        ex.result.map(drop)
    }
}

/// The effect ids a committed transition batch released (`read_transition`'s `released`).
/// The effects of `LOAD_EFFECTS` rows as the plan reads them.
fn existing_effects(eff: &Rows) -> Vec<Existing> {
    (0..eff.rows.len())
        .filter_map(|i| {
            let kind = EffectKind::from_str_name(&eff.text(i, "kind").unwrap_or_default())?;
            let dispatch = eff.text(i, "dispatch").unwrap_or_default();
            let attempts = eff.int(i, "attempts").unwrap_or(0);
            Some(Existing {
                kind,
                may_have_reached: dispatch == "delivered" || attempts > 0,
                settled: dispatch == "delivered" || dispatch == "cancelled",
            })
        })
        .collect()
}

fn released_ids(batch: &[Bound<'_>], rows: &[Rows]) -> Vec<String> {
    batch
        .iter()
        .position(|b| std::ptr::eq(b.statement, &st::RELEASE_EFFECTS))
        .and_then(|i| rows.get(i))
        .map(|r| {
            (0..r.rows.len())
                .filter_map(|i| r.text(i, "effect_id"))
                .collect()
        })
        .unwrap_or_default()
}
