//! The simulator's own tests: the statements prepare natively against the migrated schema,
//! a seed replays exactly, thousands of seeds hold every invariant, and deliberate defects
//! (the mutations below, which exist only here) are caught within the same budget.

use paymos_core::actors::{dead_letter, dispatch};
use paymos_core::machine::Guard;
use paymos_core::statements::{self as st, Arg, Statement};
use paymos_core::{plan, ResourceKind, State, TransitionPlan};
mod common;
use common::{assert_caught, schema, sql, SEEDS};
use paymos_sim::{
    clock, default_threads, run_many, run_seed, Db, Edits, Mutations, Options, Report,
};

#[test]
fn every_statement_prepares_against_the_migrated_schema() {
    let mut db = Db::open(Edits::default()).expect("the migrations apply to a fresh SQLite");
    let mut errors = Vec::new();
    for s in st::ALL {
        if let Err(e) = db.prepare_check(s) {
            errors.push(e);
        }
    }
    assert!(errors.is_empty(), "{errors:#?}");
    assert!(st::ALL.len() >= 20);
}

#[test]
fn sqlite_reads_the_simulated_clock() {
    let mut db = Db::open(Edits::default()).unwrap();
    clock::set_now_ms(clock::EPOCH_MS + 1_234);
    db.run(
        &st::INSERT_DELIVERY.bind(vec![
            Arg::text("evt_clock"),
            Arg::text("inv_clock"),
            Arg::text("invoice.paid"),
            Arg::text("{}"),
        ]),
        paymos_sim::Fault::None,
    )
    .result
    .unwrap();
    let row = db.read(&st::LOAD_DELIVERY.bind(vec![Arg::text("evt_clock")]));
    assert_eq!(
        row.text(0, "received_at").as_deref(),
        Some("2025-12-01T00:00:01.234Z")
    );
}

#[test]
fn a_seed_replays_exactly() {
    let opts = Options {
        keep_trace: true,
        ..Options::default()
    };
    for seed in [0, 1, 2, 3, 42, 1_000, 15_340] {
        let a = run_seed(seed, &opts);
        let b = run_seed(seed, &opts);
        assert_eq!(a.trace, b.trace, "seed {seed}: traces differ");
        assert_eq!(a.hash, b.hash, "seed {seed}: fingerprints differ");
        assert!(a.trace.len() > 5);
    }
    // and on other threads, interleaved with other seeds, the same
    let alone = run_seed(7, &Options::default());
    let summary = run_many(0, 16, 2, &Options::default(), false);
    assert_eq!(summary.seeds, 16);
    let again = run_seed(7, &Options::default());
    assert_eq!(alone.hash, again.hash);
    assert_ne!(run_seed(8, &Options::default()).hash, alone.hash);
}

#[test]
fn thousands_of_seeds_hold_every_invariant() {
    let summary = run_many(0, SEEDS, default_threads(), &Options::default(), false);
    let s = &summary.stats;
    eprintln!(
        "{} seeds in {:.1} s: {} steps, {} deliveries, {} requests, {} messages, {} applied, \
         {} stale, {} dead-lettered, {} replays, {} manual, {} reconciled, {} crashes",
        summary.seeds,
        summary.elapsed.as_secs_f64(),
        s.steps,
        s.deliveries,
        s.requests,
        s.messages,
        s.applied,
        s.stale,
        s.dead_lettered,
        s.replays,
        s.manual,
        s.reconciled,
        s.crashes
    );
    let e = &s.effects;
    eprintln!("effects: {e:?}");
    let failures: Vec<String> = summary.failures.iter().map(Report::failure_text).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(summary.seeds, SEEDS);
    // the dispatcher's world means something too: retries, waits, D1 failures, the sweeper
    assert!(e.effects > 1_000 && e.delivered > e.effects / 2, "{e:?}");
    assert!(e.posts > e.received && e.waited_for_earlier > 30, "{e:?}");
    // refunds cancel what was not delivered, and revoke what may have reached the order system
    assert!(e.cancelled > 100 && e.cancelled_and_revoked > 50, "{e:?}");
    assert!(
        s.refund_overtaken > 100,
        "refunds that overtook their payment"
    );
    assert!(
        e.dispatch_d1_failures > 100 && e.claimed > 50 && e.redelivered > 50,
        "{e:?}"
    );
    // pull mode's order system polls, takes and acknowledges
    assert!(e.pull_polls > 1_000 && e.pull_acks > 300, "{e:?}");
    // the archive archives, fails, and gives bodies back to replays
    let a = &s.archive;
    eprintln!("archive: {a:?}");
    assert!(
        a.archived > 1_000 && a.failed_runs > 100 && a.restored > 50,
        "{a:?}"
    );
    // the world the seeds built is adversarial enough to mean something
    assert!(s.deliveries > 10 * SEEDS as usize);
    assert!(s.dead_lettered > 100, "dead letters: {}", s.dead_lettered);
    assert!(s.replays > 100 && s.manual > 100 && s.reconciled > 0 && s.crashes > 100);
    assert!(
        s.stale > s.applied / 2,
        "fan-out and retries must hit the guard"
    );
}

// ---------------------------------------------------------------- teeth

/// (1) The dead-letter/replay race re-introduced: the dead-letter consumer ignores
/// generations (binds NULL as MARK_DEAD's generation). A dead letter of an older generation
/// then buries an operator's replay: the delivery ends `dead` although no message of its
/// current generation exhausted its retries, and the replay's own message finds it
/// "already processed".
#[test]
fn teeth_dead_letter_ignoring_generations_loses_a_replay() {
    fn any_generation(_: Option<i64>) -> Option<i64> {
        None
    }
    assert_caught(
        "MARK_DEAD with NULL generation",
        Mutations {
            dead_letter: dead_letter::Mutation {
                generation: Some(any_generation),
                ..dead_letter::Mutation::default()
            },
            ..Mutations::default()
        },
        &[&[
            "marked dead in generation",
            "no message of that generation exhausted",
        ]],
    );
}

const PAID_FROM_PAID: &[State] = &[
    State::Created,
    State::Confirming,
    State::PartiallyPaid,
    State::Expired,
    State::Failed,
    State::Paid,
];

/// A plan for `invoice → paid` whose guard also allows `paid` (built by hand); every other
/// plan is the core's.
fn paid_from_paid(kind: ResourceKind, to: State) -> Option<TransitionPlan> {
    let p = plan(kind, to)?;
    if (kind, to) != (ResourceKind::Invoice, State::Paid) {
        return Some(p);
    }
    Some(TransitionPlan {
        guard: Guard {
            from: PAID_FROM_PAID,
        },
        ..p
    })
}

/// (2) A mutated guard: `paid` also from `paid`. A second `invoice.paid` (another endpoint's
/// copy, an operator, reconciliation) is applied again: a self-transition the contract's
/// table does not have.
#[test]
fn teeth_guard_allowing_paid_from_paid_is_caught() {
    assert_caught(
        "paid from paid",
        Mutations {
            plan: Some(paid_from_paid),
            ..Mutations::default()
        },
        &[&["Some(Paid) → paid is not allowed by the contract's table"]],
    );
}

const OVERPAID_FROM_PAID: &[State] = &[
    State::Created,
    State::Confirming,
    State::PartiallyPaid,
    State::Expired,
    State::Failed,
    State::Paid,
];

/// A plausible-looking product change: a top-up moves a paid invoice to overpaid.
fn overpaid_from_paid(kind: ResourceKind, to: State) -> Option<TransitionPlan> {
    let p = plan(kind, to)?;
    if (kind, to) != (ResourceKind::Invoice, State::Overpaid) {
        return Some(p);
    }
    Some(TransitionPlan {
        guard: Guard {
            from: OVERPAID_FROM_PAID,
        },
        ..p
    })
}

fn without_unique(schema: String) -> String {
    let unique = "UNIQUE (resource_id, kind),";
    assert!(
        schema.contains(unique),
        "the effect table's UNIQUE moved: update this mutation"
    );
    schema.replace(unique, "")
}

fn without_on_conflict(s: &'static Statement) -> Option<String> {
    // with the UNIQUE gone, `ON CONFLICT (resource_id, kind)` no longer names a constraint
    // and SQLite refuses the statement: drop the clause too
    let clause = " ON CONFLICT (resource_id, kind) DO NOTHING";
    (s.name == "INSERT_EFFECT").then(|| {
        assert!(
            s.sql.contains(clause),
            "INSERT_EFFECT changed: update this mutation"
        );
        s.sql.replace(clause, "")
    })
}

/// (3) What `UNIQUE (resource_id, kind)` protects against. The token makes the effect follow
/// only this transaction's own guarded write, and the guard keeps `paid`/`overpaid` from being
/// entered twice, so with the contract's tables the UNIQUE is never the last line. It is the
/// last line against a guard that lets a resource enter a fulfilling state a second time: here
/// `overpaid` from `paid` (a "top-up", a plausible change). The plan's effect for `overpaid`
/// triggers from every state, `paid` included (the fulfilment is for the *first* entry, which
/// only the UNIQUE expresses in the SQL), so without the UNIQUE the second entry ships a
/// second fulfilment with a second license code.
#[test]
fn teeth_without_the_unique_effect_a_widened_guard_ships_twice() {
    assert_caught(
        "no UNIQUE (resource_id, kind), overpaid from paid",
        Mutations {
            edits: Edits {
                schema: Some(without_unique),
                sql: Some(without_on_conflict),
            },
            plan: Some(overpaid_from_paid),
            ..Mutations::default()
        },
        &[&["2 fulfilment effects (at most one)"]],
    );
}

/// The control for (3): the same widened guard with the UNIQUE in place is still caught (the
/// table is violated), but ships once: never two fulfilments.
#[test]
fn with_the_unique_the_same_guard_bug_ships_once() {
    let opts = Options {
        mutations: Mutations {
            plan: Some(overpaid_from_paid),
            ..Mutations::default()
        },
        keep_trace: false,
    };
    let summary = run_many(0, SEEDS, default_threads(), &opts, false);
    assert!(!summary.failures.is_empty(), "the widened guard is caught");
    for f in &summary.failures {
        for v in &f.violations {
            assert!(!v.contains("2 fulfilment effects"), "seed {}: {v}", f.seed);
        }
    }
}

/// The mutations of the money edges' fixes (issue #23), each reverting one of them in the
/// shared code (`paymos_core::actors`), with what catching it looks like.
fn money_edges() -> Vec<(&'static str, Mutations, &'static [&'static [&'static str]])> {
    vec![
        (
            "the attempt recorded after its request",
            Mutations {
                dispatch: dispatch::Mutation {
                    attempt_after_request: true,
                    ..dispatch::Mutation::default()
                },
                ..Mutations::default()
            },
            &[
                &["(f)", "after its invoice's refund committed"],
                &["(h)", "no revocation"],
            ],
        ),
        (
            "a revocation not waiting for its fulfilment's last attempt",
            Mutations {
                dispatch: dispatch::Mutation {
                    ignore_earlier_in_flight: true,
                    ..dispatch::Mutation::default()
                },
                ..Mutations::default()
            },
            &[
                &["(e)", "fulfilment after its revocation"],
                &["(h)", "after its revocation"],
            ],
        ),
        (
            "copies of a message spending the ladder",
            Mutations {
                dispatch: dispatch::Mutation {
                    ignore_schedule: true,
                    ..dispatch::Mutation::default()
                },
                ..Mutations::default()
            },
            &[&["(g)", "went dead", "after its first attempt"]],
        ),
        (
            "dead letters marking dead whatever was recorded, 5 retries",
            Mutations {
                dead_letter: dead_letter::Mutation {
                    ignore_recorded_failures: true,
                    ..dead_letter::Mutation::default()
                },
                deliveries_max_retries: Some(5),
                ..Mutations::default()
            },
            &[&["marked dead in generation", "was in a D1 outage"]],
        ),
    ]
}

/// (4)–(7) The money edges: a refund that overtakes or follows its payment, an attempt in
/// flight, copies of a message, a D1 outage. Each fix reverted is caught.
#[test]
fn teeth_money_edges_reverted_are_caught() {
    for (name, mutations, expect) in money_edges() {
        assert_caught(name, mutations, expect);
    }
}

/// The simulator's queue settings are wrangler.toml's: a change there must change the model.
#[test]
fn the_queue_settings_are_wrangler_tomls() {
    let toml = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../wrangler.toml"))
        .expect("wrangler.toml");
    let retries = |queue: &str| -> u32 {
        let at = toml
            .find(&format!("[[queues.consumers]]\nqueue = \"{queue}\""))
            .unwrap_or_else(|| panic!("no consumer for {queue}"));
        let block = &toml[at..];
        let end = block[1..].find("[[").map_or(block.len(), |i| i + 1);
        let line = block[..end]
            .lines()
            .find(|l| l.starts_with("max_retries"))
            .unwrap_or_else(|| panic!("{queue}: no max_retries"));
        line.split('=').nth(1).unwrap().trim().parse().unwrap()
    };
    assert_eq!(retries("paymos-deliveries"), paymos_sim::sim::MAX_RETRIES);
    assert_eq!(
        retries("paymos-effects"),
        paymos_sim::sim::dispatch::EFFECTS_MAX_RETRIES
    );
}

/// How often each mutation is caught (for the README): `cargo test --release -p paymos-sim
/// -- --ignored --nocapture teeth_rates`.
#[test]
#[ignore]
fn teeth_rates() {
    fn any_generation(_: Option<i64>) -> Option<i64> {
        None
    }
    let mut cases: Vec<(&str, Mutations)> = vec![
        (
            "MARK_DEAD with NULL generation",
            Mutations {
                dead_letter: dead_letter::Mutation {
                    generation: Some(any_generation),
                    ..dead_letter::Mutation::default()
                },
                ..Mutations::default()
            },
        ),
        (
            "paid from paid",
            Mutations {
                plan: Some(paid_from_paid),
                ..Mutations::default()
            },
        ),
        (
            "no UNIQUE + overpaid from paid",
            Mutations {
                edits: Edits {
                    schema: Some(without_unique),
                    sql: Some(without_on_conflict),
                },
                plan: Some(overpaid_from_paid),
                ..Mutations::default()
            },
        ),
    ];
    cases.extend(money_edges().into_iter().map(|(n, m, _)| (n, m)));
    for (name, mutations) in cases {
        let opts = Options {
            mutations,
            keep_trace: false,
        };
        let s = run_many(0, SEEDS, default_threads(), &opts, false);
        eprintln!(
            "{name}: {} of {} seeds fail, the first at seed {:?}",
            s.failures.len(),
            s.seeds,
            s.failures.first().map(|r| r.seed)
        );
    }
}

// ---------------------------------------------------------------- kept counts, bounded reads

/// (8) The kept counts (`tally`) are checked against a full count after every step: a
/// recorded outcome that is not counted is caught, and so is one counted twice (the trigger
/// of migration 0018 counting a replay its statement already took away). An effect made
/// before its order_ref was known and never given it is caught too.
#[test]
fn teeth_kept_counts_that_drift_are_caught() {
    fn without_the_trigger(schema: String) -> String {
        schema + "\nDROP TRIGGER delivery_outcome_counted;"
    }
    assert_caught(
        "an outcome recorded without its count",
        schema(without_the_trigger),
        &[&["the kept count deliveries_", "a full count says"]],
    );
    fn on_every_outcome(schema: String) -> String {
        let when = "WHEN (NEW.outcome = 'applied' OR NEW.outcome = 'stale' OR NEW.outcome = 'ignored')\n    AND OLD.outcome";
        assert!(schema.contains(when));
        schema.replace(when, "WHEN OLD.outcome")
    }
    assert_caught(
        "a trigger that also counts what a replay's statement counts",
        schema(on_every_outcome),
        &[&["the kept count deliveries_", "a full count says"]],
    );
    fn facts_stay_on_the_resource(schema: String) -> String {
        schema + "\nDROP TRIGGER resource_facts_to_effects;"
    }
    assert_caught(
        "an order_ref learned late that never reaches the effects",
        schema(facts_stay_on_the_resource),
        &[&["carries order_ref None, the invoice's is Some"]],
    );
}

/// Every kind the core raises is one the alert table admits (interface §9, §10: the CHECK
/// lists them; a new kind needs its migration), and nothing else is.
#[test]
fn the_alert_table_admits_every_kind_and_only_those() {
    let db = Db::open(Edits::default()).unwrap();
    let insert = |kind: &str| {
        db.execute_raw(&format!(
            "INSERT INTO alert (id, kind, severity, summary, count) \
             VALUES ('alt_{kind}', '{kind}', 'critical', 's', 1)"
        ))
    };
    // (the archive's database_size and archive among them, interface §10)
    for k in paymos_core::alerts::AlertKind::ALL {
        assert_eq!(insert(k.as_str()), Ok(()), "{}", k.as_str());
    }
    assert!(insert("delivery_deadd").is_err(), "a kind no one defined");
}

/// What the metrics and the alert run read, planned by SQLite on the migrated schema: every
/// table is searched through an index (a point, a range) or scanned only through a partial
/// index over the working set (unprocessed, pending, dead not dismissed, unresolved), never
/// scanned whole. (`tally` is one row; `doubled_effect` holds only what the checks found,
/// empty by construction: both are read whole.) `growth` in bench/ measures the rows read at 10,000 and 1,000,000
/// deliveries.
#[test]
fn health_checks_read_no_table_whole() {
    let db = Db::open(Edits::default()).unwrap();
    const WORKING_SET: [&str; 8] = [
        "webhook_delivery_unprocessed",
        "webhook_delivery_unprocessed_received",
        "webhook_delivery_dead_open",
        "effect_pending",
        "effect_pending_created",
        "effect_dead_open",
        "alert_unresolved_kind",
        "alert_resolved",
    ];
    for s in [
        &st::METRICS_FACTS,
        &st::METRICS_COUNTERS,
        &st::KEPT_ALERTS,
        &st::LIST_ALERTS,
        &st::LATEST_RECONCILIATION,
        &st::RECONCILIATION_TOTALS,
        &st::RECONCILIATION_FINDINGS,
        &st::DOUBLED_EFFECTS,
        &st::CHECK_DOUBLED_EFFECTS,
        &st::MARK_DOUBLED_CHECKED,
        &st::HISTORY_DELIVERIES,
        &st::HISTORY_REFUSALS,
        &st::HISTORY_SAMPLES,
        &st::LIST_EFFECTS_BY_DISPATCH,
        &st::TALLY_DELIVERED,
    ] {
        let plan = db.plan(s);
        // a scan of a subquery's rows is not of a table
        let subqueries: Vec<&str> = plan
            .iter()
            .filter(|l| l.starts_with("MATERIALIZE ") || l.starts_with("CO-ROUTINE "))
            .filter_map(|l| l.split_whitespace().nth(1))
            .collect();
        let whole: Vec<&String> = plan
            .iter()
            .filter(|line| line.starts_with("SCAN "))
            .filter(|line| {
                let table = line.split_whitespace().nth(1).unwrap_or("");
                if subqueries.contains(&table) {
                    return false;
                }
                let tables = [
                    "webhook_delivery",
                    "effect",
                    "alert",
                    "request_count",
                    "resource",
                    "resource_transition",
                    "reconciliation_run",
                    "reconciliation_finding",
                    "health_sample",
                    "e",
                    "x",
                ];
                tables.contains(&table)
                    && !WORKING_SET
                        .iter()
                        .any(|i| line.contains(&format!("INDEX {i}")))
            })
            .collect();
        if std::env::var("PAYMOS_PRINT_PLANS").is_ok() {
            eprintln!("{}: {plan:#?}", s.name);
        }
        assert!(whole.is_empty(), "{}: {whole:?} in {plan:#?}", s.name);
    }
}

// ---------------------------------------------------------------- the archive

/// The archive's removal without its `processed_at` condition: a delivery replayed between
/// its chunk's load and the removal loses its body to an object its row no longer matches.
fn removal_ignoring_replays(s: &'static Statement) -> Option<String> {
    let condition = " \
         AND processed_at = json_extract(?1, '$.\"' || event_id || '\"')";
    matches!(s.name, "DROP_BODY_ROWS" | "REMOVE_ARCHIVED_BODIES").then(|| {
        assert!(
            s.sql.contains(condition),
            "{} changed: update this mutation",
            s.name
        );
        s.sql.replace(condition, "")
    })
}

/// A replay's restore that puts nothing back.
fn restore_doing_nothing(s: &'static Statement) -> Option<String> {
    (s.name == "RESTORE_BODY").then(|| format!("{} AND 0", s.sql))
}

/// What remains to archive, counting unprocessed deliveries' bodies too (which no run moves).
fn remaining_with_unprocessed(s: &'static Statement) -> Option<String> {
    (s.name == "ARCHIVE_BACKLOG").then(|| {
        assert!(s.sql.contains("AND d.processed_at IS NOT NULL"));
        s.sql.replacen("AND d.processed_at IS NOT NULL", "", 1)
    })
}

/// (9) The archive (interface §10): a body leaves D1 only for a verified object, only while
/// its delivery is processed as its line says, and a replay gets it back.
#[test]
fn teeth_archive_mutations_are_caught() {
    assert_caught(
        "the removal ignoring replays",
        sql(removal_ignoring_replays),
        &[
            &["archived while unprocessed"],
            &["stored body does not parse"],
        ],
    );
    assert_caught(
        "a restore that restores nothing",
        sql(restore_doing_nothing),
        &[&["replay left"], &["at quiescence"]],
    );
    assert_caught(
        "an operator's run answering a remaining count of unprocessed bodies",
        sql(remaining_with_unprocessed),
        &[&["(j)", "answered remaining"]],
    );
}

/// Pull mode's feed serving without marking what it served: a refund then takes a fulfilment
/// the order system already pulled for one never sent, and cancels it without a revocation.
fn serving_unmarked(s: &'static Statement) -> Option<String> {
    matches!(s.name, "MARK_SERVED" | "MARK_SERVED_BY_DISPATCH").then(|| {
        "UPDATE effect SET attempts = attempts WHERE 0 AND coalesce(?1, ?2, ?3, ?4, ?5)".into()
    })
}

/// (10) Pull mode (interface §7): what the feed serves, the order system may hold, so a refund
/// after it revokes.
#[test]
fn teeth_pull_mode_serving_unmarked_is_caught() {
    assert_caught(
        "the feed serving without its mark",
        sql(serving_unmarked),
        &[&["(h)", "no revocation reached it"]],
    );
}
