//! `paymos-sim --seeds N [--from S] [--threads T]` / `paymos-sim --seed S --trace`

use std::io::Write;
use std::process::ExitCode;

/// `println!` that does not panic when the reader went away (`… | head`).
macro_rules! out {
    ($($t:tt)*) => {{
        let _ = writeln!(std::io::stdout().lock(), $($t)*);
    }};
}

use paymos_sim::{default_threads, run_many, run_seed, Options};

const USAGE: &str =
    "usage: paymos-sim [--seeds N] [--from S] [--threads T] [--keep-going]\n       \
                     paymos-sim --seed S [--trace]";

fn main() -> ExitCode {
    let mut seeds: u64 = 1000;
    let mut from: u64 = 0;
    let mut one: Option<u64> = None;
    let mut trace = false;
    let mut threads = default_threads();
    let mut keep_going = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut num = |name: &str| -> Option<u64> {
            let v = args.next().and_then(|v| v.replace('_', "").parse().ok());
            if v.is_none() {
                eprintln!("{name} needs a number\n{USAGE}");
            }
            v
        };
        match a.as_str() {
            "--seeds" => match num("--seeds") {
                Some(v) => seeds = v,
                None => return ExitCode::from(2),
            },
            "--from" => match num("--from") {
                Some(v) => from = v,
                None => return ExitCode::from(2),
            },
            "--seed" => match num("--seed") {
                Some(v) => one = Some(v),
                None => return ExitCode::from(2),
            },
            "--threads" => match num("--threads") {
                Some(v) => threads = v.max(1) as usize,
                None => return ExitCode::from(2),
            },
            "--trace" => trace = true,
            "--keep-going" => keep_going = true,
            "-h" | "--help" => {
                out!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            other => {
                eprintln!("unknown argument {other}\n{USAGE}");
                return ExitCode::from(2);
            }
        }
    }
    let opts = Options {
        keep_trace: trace,
        ..Options::default()
    };
    if let Some(seed) = one {
        let started = std::time::Instant::now();
        let report = run_seed(seed, &opts);
        if trace {
            for line in &report.trace {
                out!("{line}");
            }
        }
        let s = &report.stats;
        out!(
            "seed {seed}: {} steps, {} deliveries, {} simulated s, hash {:016x}, {:.1} ms",
            s.steps,
            s.deliveries,
            s.sim_seconds,
            report.hash,
            started.elapsed().as_secs_f64() * 1000.0
        );
        if report.ok() {
            out!("ok");
            return ExitCode::SUCCESS;
        }
        eprint!("{}", report.failure_text());
        return ExitCode::FAILURE;
    }
    let summary = run_many(from, seeds, threads, &opts, !keep_going);
    let s = &summary.stats;
    let secs = summary.elapsed.as_secs_f64();
    out!(
        "{} seeds ({}..{}) on {threads} thread(s) in {secs:.1} s ({:.0} seeds/s): {} steps, \
         {} deliveries, {} requests, {} messages, {} applied, {} stale, {} dead-lettered, \
         {} marked dead, {} dead letters after a replay, {} replays, {} manual, {} reconciled, \
         {} crashes, {} simulated hours; {} refunds overtaken by their payment (refunded, nothing \
         shipped), {} dead letters handed back (their failures not recorded)",
        summary.seeds,
        from,
        from + summary.seeds,
        summary.seeds as f64 / secs.max(1e-9),
        s.steps,
        s.deliveries,
        s.requests,
        s.messages,
        s.applied,
        s.stale,
        s.dead_lettered,
        s.marked_dead,
        s.dead_letters_after_replay,
        s.replays,
        s.manual,
        s.reconciled,
        s.crashes,
        s.sim_seconds / 3600,
        s.refund_overtaken,
        s.handed_back
    );
    let e = &s.effects;
    out!(
        "effects: {} effects, {} queue messages, {} POSTs, {} received, {} delivered, \
         {} waits for an earlier effect, {} starts that returned nothing, {} dispatcher D1 \
         failures, {} claimed by the sweeper, {} redelivered, {} dead by the ladder, {} dead \
         letters handed back, {} fulfilments cancelled by their refund ({} of them also revoked: \
         attempted), {} fulfilments taken whose revocation is dead by its ladder, {} \
         fulfilments awaiting their order_ref at the end; pull mode: {} polls of the feed, {} \
         acks",
        e.effects,
        e.effect_messages,
        e.posts,
        e.received,
        e.delivered,
        e.waited_for_earlier,
        e.not_started,
        e.dispatch_d1_failures,
        e.claimed,
        e.redelivered,
        e.dead_by_ladder,
        e.handed_back,
        e.cancelled,
        e.cancelled_and_revoked,
        e.fulfilled_revocation_dead,
        e.awaiting_order_ref_at_end,
        e.pull_polls,
        e.pull_acks
    );
    let a = &s.archive;
    out!(
        "archive: {} runs ({} failed), {} objects, {} bodies archived, {} restored by replays; \
         {} operators' runs answered what remains",
        a.runs,
        a.failed_runs,
        a.objects,
        a.archived,
        a.restored,
        a.remaining_answered
    );
    if summary.failures.is_empty() {
        out!("ok: no invariant violated");
        return ExitCode::SUCCESS;
    }
    for f in &summary.failures {
        eprint!("{}", f.failure_text());
    }
    eprintln!(
        "FAILED seeds: {:?}",
        summary.failures.iter().map(|r| r.seed).collect::<Vec<_>>()
    );
    ExitCode::FAILURE
}
