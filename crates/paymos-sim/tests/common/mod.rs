//! What the simulator's teeth tests share (tests/sim.rs, tests/teeth_checks.rs): the budget a
//! defect must be caught within, the assertion that it is (by the expected check), and the
//! mutations of one edit.

use std::time::Instant;

use paymos_core::statements::Statement;
use paymos_sim::{default_threads, run_many, Edits, Mutations, Options};

/// The default budget: what `cargo test --release -p paymos-sim` covers.
pub const SEEDS: u64 = 2_000;

/// Caught: the first failing seed has a violation containing every string of one of
/// `expect`'s alternatives.
pub fn assert_caught(name: &str, mutations: Mutations, expect: &[&[&str]]) {
    let opts = Options {
        mutations,
        keep_trace: false,
    };
    let started = Instant::now();
    let summary = run_many(0, SEEDS, default_threads(), &opts, true);
    let Some(report) = summary.failures.into_iter().next() else {
        panic!("{name}: the simulator found nothing in {SEEDS} seeds");
    };
    eprintln!(
        "{name}: caught at seed {} in {:.1} s:\n{}",
        report.seed,
        started.elapsed().as_secs_f64(),
        report.failure_text()
    );
    assert!(
        report.violations.iter().any(|v| expect
            .iter()
            .any(|alternative| alternative.iter().all(|e| v.contains(e)))),
        "{name}: caught, but not as expected ({expect:?}): {:?}",
        report.violations
    );
}

/// A statement-text edit alone.
pub fn sql(f: fn(&'static Statement) -> Option<String>) -> Mutations {
    Mutations {
        edits: Edits {
            sql: Some(f),
            ..Edits::default()
        },
        ..Mutations::default()
    }
}

/// A schema edit alone.
pub fn schema(f: fn(String) -> String) -> Mutations {
    Mutations {
        edits: Edits {
            schema: Some(f),
            ..Edits::default()
        },
        ..Mutations::default()
    }
}
