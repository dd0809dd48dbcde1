//! Deterministic simulation of the receiver's exactly-once protocol.
//!
//! Each seed builds a small world (a few resources, the provider's events for them fanned
//! out to several endpoints), runs the Worker's protocol against an in-process SQLite with
//! the repository's migrations, executing only the core's shared statements
//! (`paymos_core::statements`) and the core's plan (`paymos_core::machine::plan`), and
//! interleaves every actor (sender, receiver, queue, consumers, dead-letter consumer,
//! sweeper, operators, reconciliation) step by step from the seed while D1, the queue and the
//! consumers fail as the platform allows. Invariants are checked after every step and at
//! quiescence. See README.md.

/// A struct of counters that add up across seeds (`+=` field by field, so none is left out
/// of the sum).
macro_rules! counters {
    ($(#[$m:meta])* pub struct $name:ident { $($(#[$fm:meta])* pub $f:ident: $t:ty,)* }) => {
        $(#[$m])*
        pub struct $name {
            $($(#[$fm])* pub $f: $t,)*
        }

        impl std::ops::AddAssign<&$name> for $name {
            fn add_assign(&mut self, o: &$name) {
                $(self.$f += &o.$f;)*
            }
        }
    };
}

pub mod clock;
pub mod coroutine;
pub mod db;
pub mod queue;
pub mod rng;
pub mod sim;
pub mod world;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use paymos_core::statements::Bound;
use paymos_core::{ResourceKind, State, TransitionPlan};

pub use db::{Db, Edits, Fault};
pub use sim::archive::ArchiveStats;
pub use sim::dispatch::EffectStats;

/// See [`Mutations::batch`].
pub type BatchEdit = fn(Vec<Bound<'static>>, Option<String>) -> Vec<Bound<'static>>;

/// Deliberate defects, for the tests that prove the simulator has teeth. Production
/// behaviour is `Mutations::default()`: no hook set.
#[derive(Clone, Copy, Default)]
pub struct Mutations {
    /// Schema and statement-text edits.
    pub edits: Edits,
    /// Replaces `paymos_core::machine::plan`.
    pub plan: Option<fn(ResourceKind, State) -> Option<TransitionPlan>>,
    /// Rewrites a transition's batch (given the delivery it is for, if any): to try a
    /// proposed fix of the shared statements before it is made.
    pub batch: Option<BatchEdit>,
    /// The deliveries' dead-letter consumer's own (`paymos_core::actors::dead_letter`).
    pub dead_letter: paymos_core::actors::dead_letter::Mutation,
    /// The effects dispatcher's own (`paymos_core::actors::dispatch`).
    pub dispatch: paymos_core::actors::dispatch::Mutation,
    /// The deliveries queue's `max_retries`, if not wrangler.toml's.
    pub deliveries_max_retries: Option<u32>,
}

#[derive(Clone, Copy, Default)]
pub struct Options {
    pub mutations: Mutations,
    /// Keep every trace line (`--trace`), not only the last ones.
    pub keep_trace: bool,
}

counters! {
#[derive(Debug, Clone, Default)]
pub struct Stats {
    pub steps: usize,
    pub deliveries: usize,
    pub requests: usize,
    pub messages: usize,
    pub applied: usize,
    pub stale: usize,
    pub dead_lettered: usize,
    pub marked_dead: usize,
    pub dead_letters_after_replay: usize,
    pub dead_at_drain: usize,
    pub replays: usize,
    pub provider_replays: usize,
    pub manual: usize,
    pub reconciled: usize,
    pub swept: usize,
    pub crashes: usize,
    pub refund_overtaken: usize,
    /// Dead letters handed back to the consumer (their failures were not recorded).
    pub handed_back: usize,
    pub sim_seconds: i64,
    /// The effects outbox's dispatcher and the order system.
    pub effects: EffectStats,
    /// The archive's runs and restores.
    pub archive: ArchiveStats,
}
}

/// One seed's run.
#[derive(Debug, Clone)]
pub struct Report {
    pub seed: u64,
    /// Fingerprint of the whole run: every trace line and the final database.
    pub hash: u64,
    pub violations: Vec<String>,
    /// The last actions before the end (or the violation).
    pub trace_tail: Vec<String>,
    /// Every action, with `Options::keep_trace`.
    pub trace: Vec<String>,
    pub stats: Stats,
}

impl Report {
    pub fn ok(&self) -> bool {
        self.violations.is_empty()
    }

    /// What a failure prints: the seed, the violations, the last actions, how to replay it.
    pub fn failure_text(&self) -> String {
        let mut s = format!("seed {} FAILED:\n", self.seed);
        for v in &self.violations {
            s += &format!("  violation: {v}\n");
        }
        s += &format!("last {} actions:\n", self.trace_tail.len());
        for l in &self.trace_tail {
            s += &format!("  {l}\n");
        }
        s += &format!(
            "replay: cargo run --release -p paymos-sim -- --seed {} --trace\n",
            self.seed
        );
        s
    }
}

/// Runs one seed.
pub fn run_seed(seed: u64, opts: &Options) -> Report {
    let mut report = sim::Sim::new(seed, opts).run();
    report.seed = seed;
    report
}

/// Many seeds.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    pub seeds: u64,
    pub stats: Stats,
    /// The failing seeds found (the lowest first), with their reports.
    pub failures: Vec<Report>,
    pub elapsed: Duration,
}

/// Runs seeds `from..from + n` on `threads` threads. With `stop_at_first`, stops handing out
/// seeds once one fails (the seeds already running finish).
pub fn run_many(from: u64, n: u64, threads: usize, opts: &Options, stop_at_first: bool) -> Summary {
    let started = Instant::now();
    let next = AtomicU64::new(from);
    let stop = AtomicBool::new(false);
    let out = Mutex::new(Summary::default());
    let end = from.saturating_add(n);
    std::thread::scope(|s| {
        for _ in 0..threads.max(1) {
            s.spawn(|| {
                let mut local = Summary::default();
                loop {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let seed = next.fetch_add(1, Ordering::Relaxed);
                    if seed >= end {
                        break;
                    }
                    let report = run_seed(seed, opts);
                    local.seeds += 1;
                    local.stats += &report.stats;
                    if !report.ok() {
                        if stop_at_first {
                            stop.store(true, Ordering::Relaxed);
                        }
                        local.failures.push(report);
                    }
                }
                let mut o = out.lock().expect("summary lock");
                o.seeds += local.seeds;
                o.stats += &local.stats;
                o.failures.extend(local.failures);
            });
        }
    });
    let mut summary = out.into_inner().expect("summary lock");
    summary.failures.sort_by_key(|r| r.seed);
    summary.elapsed = started.elapsed();
    summary
}

/// Threads to use by default: the machine's cores.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}
