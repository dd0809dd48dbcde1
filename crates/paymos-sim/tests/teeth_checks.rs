//! Teeth for the simulator's invariant checks, one site at a time: for each check below, a
//! plausible defect of the shared statements, the schema, the plan or a transition's batch
//! (through `paymos_sim::Mutations`, as tests/sim.rs) that this check, by its own message,
//! catches within the default budget. A check no test has seen fire is unproven; these prove
//! them: each test was also run with its check disabled, and then failed (the defect found by
//! another check only, or by none in the budget).

use std::sync::OnceLock;

use std::time::Instant;

use paymos_core::machine::Guard;
use paymos_core::statements::{Bound, Statement};
use paymos_core::{plan, ResourceKind, State, TransitionPlan};
mod common;
use common::{assert_caught, schema, sql, SEEDS};
use paymos_sim::{default_threads, run_many, Edits, Mutations, Options};

/// `s`'s text with `from` replaced by `to` (once), asserting it is there.
fn edit(s: &'static Statement, from: &str, to: &str) -> String {
    assert!(
        s.sql.contains(from),
        "{} changed: update this mutation ({from:?})",
        s.name
    );
    s.sql.replacen(from, to, 1)
}

// ---------------------------------------------------------------- the transition's batch

/// The guard gone from the guarded write (every plan's guard accepts a first-seen resource,
/// so GUARDED_UPSERT is the one that runs): a transition applies from any state.
fn upsert_without_guard(s: &'static Statement) -> Option<String> {
    (s.name == "GUARDED_UPSERT").then(|| {
        edit(
            s,
            "WHERE resource.status IN (SELECT value FROM json_each(?8))",
            "WHERE json_valid(?8)",
        )
    })
}

/// sim.rs `after_transition`: "SQL applied=…, the plan decides …".
#[test]
fn teeth_a_guard_that_does_not_guard() {
    assert_caught(
        "the guarded write without its guard",
        sql(upsert_without_guard),
        &[&["SQL applied=true, the plan decides"]],
    );
}

/// The guarded write's update keeps a known status as it keeps a known order_ref (`coalesce`
/// copied once too often): the write wins, the status does not move.
fn status_kept(s: &'static Statement) -> Option<String> {
    (s.name == "GUARDED_UPSERT").then(|| {
        edit(
            s,
            "status = excluded.status,",
            "status = coalesce(resource.status, excluded.status),",
        )
    })
}

/// sim.rs `after_transition`: "status after the batch is …".
#[test]
fn teeth_a_write_that_wins_without_moving_the_status() {
    assert_caught(
        "the update keeping the status",
        sql(status_kept),
        &[&["status after the batch is", "expected"]],
    );
}

/// A refund does not cancel a dead fulfilment (only a pending one): an operator may redeliver
/// it after the money went back. The tally follows the same condition.
fn cancel_pending_only(s: &'static Statement) -> Option<String> {
    matches!(s.name, "CANCEL_EFFECT" | "TALLY_CANCEL")
        .then(|| edit(s, "dispatch IN ('pending', 'dead')", "dispatch = 'pending'"))
}

/// sim.rs `after_transition`: "the batch cancelled …, the plan expects …".
#[test]
fn teeth_a_refund_that_leaves_a_dead_fulfilment_redeliverable() {
    assert_caught(
        "the cancel of pending fulfilments only",
        sql(cancel_pending_only),
        &[&["the batch cancelled [], the plan expects [Fulfilment]"]],
    );
}

/// The effect written whether or not this transaction's write won: a copy refused by the
/// guard still records the effect its plan would have.
fn effect_without_token(s: &'static Statement) -> Option<String> {
    (s.name == "INSERT_EFFECT").then(|| {
        edit(
            s,
            "WHERE r.id = ?1 AND r.transition_token = ?2",
            "WHERE r.id = ?1 AND ?2 IS NOT NULL",
        )
    })
}

/// sim.rs `after_transition`: "the batch recorded effects …, the plan expects …".
#[test]
fn teeth_an_effect_recorded_by_a_refused_transition() {
    assert_caught(
        "the effect without its token",
        sql(effect_without_token),
        &[&["the batch recorded effects [", "the plan expects []"]],
    );
}

/// The kept counts' row missing (a migration that rebuilds `tally` without copying its row).
fn without_the_tally_row(schema: String) -> String {
    schema + "\nDELETE FROM tally;"
}

/// checks.rs `check_tally`: "the tally row is missing".
#[test]
fn teeth_kept_counts_without_their_row() {
    assert_caught(
        "the tally row missing",
        schema(without_the_tally_row),
        &[&["the tally row is missing"]],
    );
}

// ---------------------------------------------------------------- a delivery's row

/// The transaction's read-back joins only an unprocessed delivery (all that its `held` needs,
/// it would seem): a copy whose delivery another copy processed then reads as a delivery gone.
fn read_back_of_open_deliveries(s: &'static Statement) -> Option<String> {
    (s.name == "READ_BACK").then(|| {
        edit(
            s,
            "webhook_delivery.event_id = ?3",
            "webhook_delivery.event_id = ?3 AND webhook_delivery.processed_at IS NULL",
        )
    })
}

/// sim/consume.rs `answer`: "… which the consumer answered missing".
#[test]
fn teeth_a_delivery_on_record_answered_missing() {
    assert_caught(
        "the read-back of unprocessed deliveries only",
        sql(read_back_of_open_deliveries),
        &[&["which the consumer answered missing"]],
    );
}

/// RECORD_OUTCOME records `applied` whatever the guard decided.
fn always_applied(s: &'static Statement) -> Option<String> {
    (s.name == "RECORD_OUTCOME").then(|| {
        edit(
            s,
            "outcome = CASE WHEN EXISTS (SELECT 1 FROM resource WHERE id = ?2 AND transition_token = ?3) THEN 'applied' ELSE 'stale' END",
            "outcome = 'applied'",
        )
    })
}

/// checks.rs `check_delivery`: "recorded …, the guard decided …".
#[test]
fn teeth_an_outcome_recorded_as_applied_whatever_happened() {
    assert_caught(
        "the outcome always applied",
        sql(always_applied),
        &[&["recorded applied, the guard decided stale"]],
    );
}

/// MARK_IGNORED forgets to write its outcome.
fn ignored_without_outcome(s: &'static Statement) -> Option<String> {
    (s.name == "MARK_IGNORED").then(|| edit(s, ", outcome = 'ignored'", ""))
}

/// checks.rs `check_delivery`: "ignored as …".
#[test]
fn teeth_an_ignored_delivery_without_its_outcome() {
    assert_caught(
        "the ignore without its outcome",
        sql(ignored_without_outcome),
        &[&["ignored as "]],
    );
}

/// MARK_DEAD forgets to write its outcome.
fn dead_without_outcome(s: &'static Statement) -> Option<String> {
    (s.name == "MARK_DEAD").then(|| edit(s, "SET outcome = 'dead', ", "SET "))
}

/// checks.rs `check_delivery`: "marked dead as …".
#[test]
fn teeth_a_dead_delivery_without_its_outcome() {
    assert_caught(
        "the dead mark without its outcome",
        sql(dead_without_outcome),
        &[&["marked dead as "]],
    );
}

/// MARK_DEAD forgets `processed_at`: dead, yet unprocessed.
fn dead_but_unprocessed(s: &'static Statement) -> Option<String> {
    (s.name == "MARK_DEAD").then(|| {
        edit(
            s,
            "SET outcome = 'dead', processed_at = ",
            "SET outcome = 'dead', enqueued_at = ",
        )
    })
}

/// checks.rs `check_delivery`: "unprocessed with an outcome".
#[test]
fn teeth_a_dead_delivery_left_unprocessed() {
    assert_caught(
        "the dead mark without processed_at",
        sql(dead_but_unprocessed),
        &[&["unprocessed with an outcome"]],
    );
}

/// A failure recorded as the end of the delivery: processed, no outcome.
fn failure_processes(s: &'static Statement) -> Option<String> {
    (s.name == "RECORD_FAILURE").then(|| {
        edit(
            s,
            "SET attempts = attempts + 1,",
            "SET attempts = attempts + 1, processed_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'),",
        )
    })
}

/// checks.rs `check_delivery`: "processed (…) by Failure".
#[test]
fn teeth_a_failure_that_processes_the_delivery() {
    assert_caught(
        "the failure marking processed",
        sql(failure_processes),
        &[&["processed () by Failure"]],
    );
}

/// MARK_DEAD without its `processed_at IS NULL`: a dead letter of a message whose copy
/// applied meanwhile buries the applied outcome.
fn dead_over_processed(s: &'static Statement) -> Option<String> {
    (s.name == "MARK_DEAD").then(|| {
        edit(
            s,
            " AND processed_at IS NULL AND (?2 IS NULL",
            " AND (?2 IS NULL",
        )
    })
}

/// checks.rs `check_delivery`: "a processed outcome changed by …".
#[test]
fn teeth_a_dead_letter_over_a_processed_delivery() {
    assert_caught(
        "the dead mark over processed",
        sql(dead_over_processed),
        &[&["a processed outcome changed by MarkDead"]],
    );
}

/// The sweeper's claim makes the re-sent message a new generation.
fn claim_moves_generation(s: &'static Statement) -> Option<String> {
    (s.name == "CLAIM_UNPROCESSED").then(|| {
        edit(
            s,
            "UPDATE webhook_delivery SET enqueued_at = ",
            "UPDATE webhook_delivery SET generation = generation + 1, enqueued_at = ",
        )
    })
}

/// checks.rs `check_delivery`: "generation moved by …".
#[test]
fn teeth_a_claim_that_moves_the_generation() {
    assert_caught(
        "the claim moving the generation",
        sql(claim_moves_generation),
        &[&["generation moved by"]],
    );
}

/// A bulk replay's chunk that clears the outcome but starts no new generation (nor counts
/// the replay).
fn chunk_without_generation(s: &'static Statement) -> Option<String> {
    (s.name == "REPLAY_CHUNK").then(|| {
        edit(
            s,
            " replays = replays + 1, generation = generation + 1,",
            "",
        )
    })
}

/// checks.rs `check_delivery`: "unprocessed again by …".
#[test]
fn teeth_a_bulk_replay_without_a_new_generation() {
    assert_caught(
        "the bulk replay without a new generation",
        sql(chunk_without_generation),
        &[&["unprocessed again by MaybeReset"]],
    );
}

/// The receiving view's trigger writes the arrival into `processed_at` (its column list
/// shifted): a new delivery arrives processed, and is never consumed.
fn arrives_processed(schema: String) -> String {
    let from = "INSERT INTO webhook_delivery (event_id, resource_id, event_type, body, received_at,\n            enqueued_at)";
    assert!(schema.contains(from), "0016 changed: update this mutation");
    schema.replace(
        from,
        "INSERT INTO webhook_delivery (event_id, resource_id, event_type, body, received_at,\n            processed_at)",
    )
}

/// checks.rs `check_delivery`: "appeared as …".
#[test]
fn teeth_a_delivery_that_arrives_processed() {
    assert_caught(
        "the insert writing processed_at",
        schema(arrives_processed),
        &[&["appeared as"]],
    );
}

/// The receiving view's dedupe on the resource, not the event: a second event of a resource
/// is taken for a duplicate (2xx, nothing written).
fn dedupe_by_resource(schema: String) -> String {
    let from = "WHERE EXISTS (SELECT 1 FROM webhook_delivery WHERE event_id = NEW.event_id);";
    assert!(schema.contains(from), "0016 changed: update this mutation");
    schema.replace(
        from,
        "WHERE EXISTS (SELECT 1 FROM webhook_delivery WHERE resource_id = NEW.resource_id);",
    )
}

/// checks.rs `final_checks`: "sent by the provider until 2xx, never on record".
#[test]
fn teeth_a_dedupe_on_the_wrong_key_loses_deliveries() {
    assert_caught(
        "the dedupe by resource",
        schema(dedupe_by_resource),
        &[&["never on record"]],
    );
}

// ---------------------------------------------------------------- a resource's history

/// INSERT_HISTORY reads the resource's `kind` where its `status` goes.
fn history_of_the_kind(s: &'static Statement) -> Option<String> {
    (s.name == "INSERT_HISTORY").then(|| {
        edit(
            s,
            "SELECT transitions, id, previous_status, status, ?3, ?4, ?5",
            "SELECT transitions, id, previous_status, kind, ?3, ?4, ?5",
        )
    })
}

/// checks.rs `check_resource`: "history row … names unknown states".
#[test]
fn teeth_a_history_row_naming_no_state() {
    assert_caught(
        "the history's state read from the kind",
        sql(history_of_the_kind),
        &[&["names unknown states"]],
    );
}

/// INSERT_HISTORY's columns out of order: the cause kind where the state goes, which the
/// table's CHECK refuses. Every transition's batch fails, every delivery goes dead, and stays
/// dead after its replay.
fn history_columns_swapped(s: &'static Statement) -> Option<String> {
    (s.name == "INSERT_HISTORY").then(|| {
        edit(
            s,
            "SELECT transitions, id, previous_status, status, ?3, ?4, ?5",
            "SELECT transitions, id, previous_status, ?3, status, ?4, ?5",
        )
    })
}

/// checks.rs `final_checks`: "… ends … at quiescence".
#[test]
fn teeth_a_transition_that_always_fails_ends_dead() {
    assert_caught(
        "the history's columns swapped",
        sql(history_columns_swapped),
        &[&["outcome: Some(\"dead\")", "at quiescence"]],
    );
}

/// checks.rs `final_checks`: "… outcome … disagrees with what happened" (the same defect).
#[test]
fn teeth_a_transition_that_always_fails_disagrees() {
    assert_caught(
        "the history's columns swapped",
        sql(history_columns_swapped),
        &[&["outcome dead disagrees with what happened"]],
    );
}

/// INSERT_HISTORY records the new status as the previous one.
fn history_from_the_new_status(s: &'static Statement) -> Option<String> {
    (s.name == "INSERT_HISTORY").then(|| {
        edit(
            s,
            "SELECT transitions, id, previous_status, status,",
            "SELECT transitions, id, status, status,",
        )
    })
}

/// checks.rs `check_resource`: "history row … starts from …, the previous row entered …".
#[test]
fn teeth_a_history_that_does_not_chain() {
    assert_caught(
        "the history from the new status",
        sql(history_from_the_new_status),
        &[&["starts from", "the previous row entered"]],
    );
}

/// INSERT_HISTORY's cause kind fixed to `event`.
fn history_always_an_event(s: &'static Statement) -> Option<String> {
    (s.name == "INSERT_HISTORY").then(|| {
        edit(
            s,
            "SELECT transitions, id, previous_status, status, ?3, ?4, ?5",
            "SELECT transitions, id, previous_status, status, 'event', ?4, ?5",
        )
    })
}

/// checks.rs `check_resource`: "history names unknown event …".
#[test]
fn teeth_a_history_calling_every_cause_an_event() {
    assert_caught(
        "the history's cause kind always event",
        sql(history_always_an_event),
        &[&["history names unknown event"]],
    );
}

/// The plan's `invoice → paid` enters `overpaid` (a row of the table copied).
fn paid_enters_overpaid(kind: ResourceKind, to: State) -> Option<TransitionPlan> {
    if (kind, to) == (ResourceKind::Invoice, State::Paid) {
        return plan(kind, State::Overpaid);
    }
    plan(kind, to)
}

/// checks.rs `check_resource`: "history row … (…) names evt_…, a … of …".
#[test]
fn teeth_a_transition_into_another_state_than_its_event() {
    assert_caught(
        "paid entering overpaid",
        Mutations {
            plan: Some(paid_enters_overpaid),
            ..Mutations::default()
        },
        &[&["(overpaid) names evt_", "a invoice.paid of"]],
    );
}

/// The history written only for deliveries' transitions: an operator's or reconciliation's
/// leaves none.
fn history_for_deliveries_only(
    batch: Vec<Bound<'static>>,
    delivery: Option<String>,
) -> Vec<Bound<'static>> {
    if delivery.is_some() {
        return batch;
    }
    batch
        .into_iter()
        .filter(|b| b.statement.name != "INSERT_HISTORY")
        .collect()
}

/// checks.rs `check_resource`: "… history rows for … applied transitions".
#[test]
fn teeth_transitions_without_their_history() {
    assert_caught(
        "history for deliveries only",
        Mutations {
            batch: Some(history_for_deliveries_only),
            ..Mutations::default()
        },
        &[&["history rows for", "applied transitions"]],
    );
}

/// checks.rs `check_resource`: "status …, the history ends in …" (the same defect).
#[test]
fn teeth_a_status_the_history_does_not_end_in() {
    assert_caught(
        "history for deliveries only",
        Mutations {
            batch: Some(history_for_deliveries_only),
            ..Mutations::default()
        },
        &[&["the history ends in"]],
    );
}

// ---------------------------------------------------------------- effects, order_ref, license

/// INSERT_EFFECT's cause from the wrong parameter (the resource's id).
fn effect_cause_is_the_resource(s: &'static Statement) -> Option<String> {
    (s.name == "INSERT_EFFECT").then(|| {
        edit(
            s,
            "SELECT r.id, ?3, ?4, r.order_ref, r.amount, r.currency, ?5,",
            "SELECT r.id, ?3, ?4, r.order_ref, r.amount, r.currency, coalesce(?1, ?5),",
        )
    })
}

/// checks.rs `check_resource`: "effects …, the history calls for …".
#[test]
fn teeth_an_effect_naming_the_wrong_cause() {
    assert_caught(
        "the effect's cause from ?1",
        sql(effect_cause_is_the_resource),
        &[&["effects [", "the history calls for"]],
    );
}

/// INSERT_EFFECT's license from the wrong parameter (the cause).
fn license_is_the_cause(s: &'static Statement) -> Option<String> {
    (s.name == "INSERT_EFFECT").then(|| {
        edit(
            s,
            "SELECT r.id, ?3, ?4, r.order_ref,",
            "SELECT r.id, ?3, CASE WHEN ?4 IS NULL THEN NULL ELSE ?5 END, r.order_ref,",
        )
    })
}

/// checks.rs `check_resource`: "fulfilment license …, the transaction drew …".
#[test]
fn teeth_a_license_that_is_not_the_one_drawn() {
    assert_caught(
        "the license from ?5",
        sql(license_is_the_cause),
        &[&["fulfilment license", "the transaction drew"]],
    );
}

/// A later transition's order_ref replaces the known one (no `coalesce`): one without an
/// order_ref erases it.
fn order_ref_overwritten(s: &'static Statement) -> Option<String> {
    match s.name {
        "GUARDED_UPSERT" => Some(edit(
            s,
            "order_ref = coalesce(resource.order_ref, excluded.order_ref)",
            "order_ref = excluded.order_ref",
        )),
        _ => None,
    }
}

/// checks.rs `check_resource`: "order_ref … overwritten by …".
#[test]
fn teeth_an_order_ref_overwritten() {
    assert_caught(
        "the order_ref without its coalesce",
        sql(order_ref_overwritten),
        &[&["overwritten by"]],
    );
}

/// The upsert's order_ref from the wrong parameter (the currency).
fn order_ref_is_the_currency(s: &'static Statement) -> Option<String> {
    (s.name == "GUARDED_UPSERT").then(|| {
        edit(
            s,
            "SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, 1",
            "SELECT ?1, ?2, ?3, coalesce(?6, ?4), ?5, ?6, ?7, 1",
        )
    })
}

/// checks.rs `check_resource`: "order_ref …, the provider's is …".
#[test]
fn teeth_an_order_ref_that_is_not_the_providers() {
    assert_caught(
        "the order_ref from ?6",
        sql(order_ref_is_the_currency),
        &[&["the provider's is"]],
    );
}

/// The upsert writes every new resource as an invoice.
fn always_an_invoice(s: &'static Statement) -> Option<String> {
    (s.name == "GUARDED_UPSERT").then(|| {
        edit(
            s,
            "SELECT ?1, ?2, ?3,",
            "SELECT ?1, coalesce('invoice', ?2), ?3,",
        )
    })
}

/// checks.rs `check_resource`: "kind …".
#[test]
fn teeth_a_resource_of_the_wrong_kind() {
    assert_caught(
        "the kind always invoice",
        sql(always_an_invoice),
        &[&[": kind Some(\"invoice\")"]],
    );
}

// ---------------------------------------------------------------- the provider's world

/// `from` without `drop`, computed once into `cell` (a plan is a `fn`, it captures nothing).
fn without(
    from: &'static [State],
    drop: State,
    cell: &'static OnceLock<Vec<State>>,
) -> &'static [State] {
    cell.get_or_init(|| from.iter().copied().filter(|s| *s != drop).collect())
}

/// The plan's `invoice → refunded` guard forgets `overpaid`: the refund of an overpaid
/// invoice is refused as stale.
fn refund_not_from_overpaid(kind: ResourceKind, to: State) -> Option<TransitionPlan> {
    static FROM: OnceLock<Vec<State>> = OnceLock::new();
    let p = plan(kind, to)?;
    if (kind, to) != (ResourceKind::Invoice, State::Refunded) {
        return Some(p);
    }
    Some(TransitionPlan {
        guard: Guard {
            from: without(p.guard.from, State::Overpaid, &FROM),
        },
        ..p
    })
}

/// checks.rs `final_checks`: "refunded at the provider, … here".
#[test]
fn teeth_a_refund_refused() {
    assert_caught(
        "refunded not from overpaid",
        Mutations {
            plan: Some(refund_not_from_overpaid),
            ..Mutations::default()
        },
        &[&["refunded at the provider"]],
    );
}

/// The plan's `invoice → paid` guard forgets `confirming`.
fn paid_not_from_confirming(kind: ResourceKind, to: State) -> Option<TransitionPlan> {
    static FROM: OnceLock<Vec<State>> = OnceLock::new();
    let p = plan(kind, to)?;
    if (kind, to) != (ResourceKind::Invoice, State::Paid) {
        return Some(p);
    }
    Some(TransitionPlan {
        guard: Guard {
            from: without(p.guard.from, State::Confirming, &FROM),
        },
        ..p
    })
}

/// checks.rs `final_checks`: "paid at the provider, … here".
#[test]
fn teeth_a_payment_refused() {
    assert_caught(
        "paid not from confirming",
        Mutations {
            plan: Some(paid_not_from_confirming),
            ..Mutations::default()
        },
        &[&["paid at the provider"]],
    );
}

/// The plan's `withdrawal → completed` guard forgets every state but one.
fn completed_only_from_first(kind: ResourceKind, to: State) -> Option<TransitionPlan> {
    static FROM: OnceLock<Vec<State>> = OnceLock::new();
    let p = plan(kind, to)?;
    if (kind, to) != (ResourceKind::Withdrawal, State::Completed) {
        return Some(p);
    }
    let first = p.guard.from[0];
    Some(TransitionPlan {
        guard: Guard {
            from: FROM.get_or_init(|| vec![first]),
        },
        ..p
    })
}

/// checks.rs `final_checks`: "the provider's last state is …, … here".
#[test]
fn teeth_a_withdrawal_that_never_completes() {
    assert_caught(
        "completed only from one state",
        Mutations {
            plan: Some(completed_only_from_first),
            ..Mutations::default()
        },
        &[&["the provider's last state is"]],
    );
}

/// The bounded doubled-effects check counts every effect as doubled (`>= 1`).
fn doubled_off_by_one(s: &'static Statement) -> Option<String> {
    (s.name == "CHECK_DOUBLED_EFFECTS").then(|| edit(s, "WHERE n > 1", "WHERE n >= 1"))
}

/// checks.rs `final_checks`: "the bounded doubled-effects check found …, a full count …".
#[test]
fn teeth_a_doubled_effects_check_that_sees_doubles_everywhere() {
    assert_caught(
        "the doubled check off by one",
        sql(doubled_off_by_one),
        &[&["the bounded doubled-effects check found"]],
    );
}

/// The doubled-effects check's table missing (a migration that never created it in
/// production): the check fails.
fn without_doubled_effect(schema: String) -> String {
    schema + "\nDROP TABLE doubled_effect;"
}

/// checks.rs `final_checks`: "the doubled-effects check failed".
#[test]
fn teeth_a_doubled_effects_check_that_fails() {
    assert_caught(
        "the doubled-effects table missing",
        schema(without_doubled_effect),
        &[&["the doubled-effects check failed"]],
    );
}

// ---------------------------------------------------------------- the refund hold

/// The delivery gate holds only `invoice.paid` for a refund on record, not
/// `invoice.overpaid`: an overpayment overtaken by its refund ships goods.
fn overpaid_not_held(s: &'static Statement) -> Option<String> {
    let from = "webhook_delivery.event_type IN ('invoice.paid', 'invoice.overpaid')";
    s.sql
        .contains(from)
        .then(|| edit(s, from, "webhook_delivery.event_type = 'invoice.paid'"))
}

/// sim.rs `after_transition`: "(r) the transaction says held false …".
#[test]
fn teeth_an_overpayment_not_held_for_its_refund() {
    assert_caught(
        "overpaid not held",
        sql(overpaid_not_held),
        &[&["(r) the transaction says held false"]],
    );
}

/// The delivery gate holds a payment for any refund on record, even one received after it.
fn held_by_any_refund(s: &'static Statement) -> Option<String> {
    let by = " AND +refund.received_at <= webhook_delivery.received_at";
    s.sql.contains(by).then(|| edit(s, by, ""))
}

/// sim.rs `after_transition`: "(r) the transaction says held true …".
#[test]
fn teeth_a_payment_held_by_a_later_refund() {
    assert_caught(
        "held by any refund",
        sql(held_by_any_refund),
        &[&["(r) the transaction says held true"]],
    );
}

// ---------------------------------------------------------------- the effects

/// An operator's redelivery draws a new effect id for its fresh ladder.
fn redelivery_with_a_new_id(s: &'static Statement) -> Option<String> {
    (s.name == "REDELIVER_EFFECT").then(|| {
        edit(
            s,
            "UPDATE effect SET dispatch = 'pending',",
            "UPDATE effect SET effect_id = 'eff_' || lower(hex(randomblob(16))), dispatch = 'pending',",
        )
    })
}

/// dispatch.rs `taken`: "(d) the order system received two different effect ids".
#[test]
fn teeth_a_redelivery_under_a_new_id() {
    assert_caught(
        "the redelivery with a new id",
        sql(redelivery_with_a_new_id),
        &[&["(d) the order system received two different effect ids"]],
    );
}

/// An attempt starts from any row, not only a pending one: a fulfilment the refund cancelled
/// is sent anyway.
fn attempt_from_any_row(s: &'static Statement) -> Option<String> {
    (s.name == "START_ATTEMPTS").then(|| edit(s, " AND +dispatch = 'pending'", ""))
}

/// dispatch.rs `check_started`: "(f) an attempt to send … started after its invoice's refund
/// committed".
#[test]
fn teeth_an_attempt_on_a_cancelled_fulfilment() {
    assert_caught(
        "the attempt from any row",
        sql(attempt_from_any_row),
        &[&[
            "(f) an attempt to send",
            "started after its invoice's refund committed",
        ]],
    );
}

/// The pull feed serves what is not delivered, whatever the order system asked for.
fn feed_serves_undelivered(s: &'static Statement) -> Option<String> {
    matches!(s.name, "LIST_EFFECTS_BY_DISPATCH").then(|| {
        edit(
            s,
            "e.dispatch = ?2 AND",
            "e.dispatch <> 'delivered' AND ?2 IS NOT NULL AND",
        )
    })
}

/// pull.rs: "(f) … was served by the feed after its invoice's refund committed".
#[test]
fn teeth_a_feed_that_serves_cancelled_fulfilments() {
    assert_caught(
        "the feed serving the undelivered",
        sql(feed_serves_undelivered),
        &[&["was served by the feed after its invoice's refund committed"]],
    );
}

/// The sweeper's claim of effects only takes those handed over recently (`>=`).
fn effects_claim_reversed(s: &'static Statement) -> Option<String> {
    (s.name == "CLAIM_EFFECTS").then(|| {
        edit(
            s,
            "OR enqueued_at <= strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?1)",
            "OR enqueued_at >= strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?1)",
        )
    })
}

/// dispatch.rs `push_drain`: "effects drain: no quiescence …".
#[test]
fn teeth_an_effects_claim_that_never_recovers() {
    assert_caught(
        "the effects claim reversed",
        sql(effects_claim_reversed),
        &[&["effects drain: no quiescence"]],
    );
}

/// The sweeper's claim of deliveries only takes those handed over recently (`>=`).
fn deliveries_claim_reversed(s: &'static Statement) -> Option<String> {
    (s.name == "CLAIM_UNPROCESSED").then(|| {
        edit(
            s,
            "coalesce(enqueued_at, received_at) <= strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?1)",
            "coalesce(enqueued_at, received_at) >= strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?1)",
        )
    })
}

/// sim.rs `drain`: "no quiescence after … steps without faults".
#[test]
fn teeth_a_deliveries_claim_that_never_recovers() {
    assert_caught(
        "the deliveries claim reversed",
        sql(deliveries_claim_reversed),
        &[&["no quiescence after"]],
    );
}

/// A dismissal that takes only what is already dismissed (its `IS NULL` inverted).
fn dismissal_inverted(s: &'static Statement) -> Option<String> {
    matches!(s.name, "DISMISS_DELIVERY" | "TALLY_DISMISS_DELIVERY").then(|| {
        edit(
            s,
            "outcome = 'dead' AND dismissed_at IS NULL",
            "outcome = 'dead' AND dismissed_at IS NOT NULL",
        )
    })
}

/// sim.rs `run`: "dead, and its dismissal changed nothing".
#[test]
fn teeth_a_dismissal_that_dismisses_nothing() {
    assert_caught(
        "the dismissal inverted",
        sql(dismissal_inverted),
        &[&["dead, and its dismissal changed nothing"]],
    );
}

// ---------------------------------------------------------------- the archive

/// 0013's trigger on the delivery's update lost (a later migration that drops it to change
/// it, and does not create it again): what the database refused, the archive's check must
/// find.
fn without_the_archived_trigger(schema: String) -> String {
    schema + "\nDROP TRIGGER webhook_delivery_archived_update;"
}

/// The removal forgets the archive key.
fn archived_without_key(s: &'static Statement) -> Option<String> {
    (s.name == "REMOVE_ARCHIVED_BODIES").then(|| {
        edit(
            s,
            ", archive_key = ?2 WHERE",
            ", archive_key = CASE WHEN ?2 IS NULL THEN ?2 END WHERE",
        )
    })
}

/// archive.rs `check_archive`: "archived, with no archive key" (the database's trigger
/// refuses it first; without the trigger, the check).
#[test]
fn teeth_an_archived_delivery_without_its_key() {
    assert_caught(
        "the removal without the key, without the trigger",
        Mutations {
            edits: Edits {
                schema: Some(without_the_archived_trigger),
                sql: Some(archived_without_key),
            },
            ..Mutations::default()
        },
        &[&["archived, with no archive key"]],
    );
}

/// The body rows' deletion with its key's columns swapped: it deletes nothing.
fn body_rows_kept(s: &'static Statement) -> Option<String> {
    (s.name == "DROP_BODY_ROWS").then(|| {
        edit(
            s,
            "WHERE (received_at, event_id) IN (",
            "WHERE (event_id, received_at) IN (",
        )
    })
}

/// archive.rs `check_archive`: "archived, and its body is still in D1" (the database's
/// trigger refuses it first; without the trigger, the check).
#[test]
fn teeth_an_archived_delivery_whose_body_stays() {
    assert_caught(
        "the body rows kept, without the trigger",
        Mutations {
            edits: Edits {
                schema: Some(without_the_archived_trigger),
                sql: Some(body_rows_kept),
            },
            ..Mutations::default()
        },
        &[&["archived, and its body is still in D1"]],
    );
}

/// The removal records another key than the object's (its prefix doubled).
fn archived_under_another_key(s: &'static Statement) -> Option<String> {
    (s.name == "REMOVE_ARCHIVED_BODIES").then(|| {
        edit(
            s,
            ", archive_key = ?2 WHERE",
            ", archive_key = 'archive/' || ?2 WHERE",
        )
    })
}

/// archive.rs `check_archive`: "archived, its body cannot be read back".
#[test]
fn teeth_an_archived_delivery_under_another_key() {
    assert_caught(
        "the removal with another key",
        sql(archived_under_another_key),
        &[&["archived, its body cannot be read back"]],
    );
}

/// The archive's read of a chunk's bodies from the delivery's row alone, as before 0013
/// (since 0016 the row holds '', the body is in delivery_body).
fn bodies_from_the_row(s: &'static Statement) -> Option<String> {
    (s.name == "ARCHIVE_BODIES").then(|| {
        let body = s.sql.find("CASE WHEN").expect("ARCHIVE_BODIES changed");
        let end = s.sql.find(" AS body").expect("ARCHIVE_BODIES changed");
        format!("{}webhook_delivery.body{}", &s.sql[..body], &s.sql[end..])
    })
}

/// archive.rs `check_archive`: "… holds another body than received".
#[test]
fn teeth_an_archive_of_another_body() {
    assert_caught(
        "the bodies from the row",
        sql(bodies_from_the_row),
        &[&["holds another body than received"]],
    );
}

// ---------------------------------------------------------------- reconciliation, the feed

/// The lease is taken only while it is still held (its expiry test reversed): once a walk's
/// lease expires, no walk takes it again.
fn lease_test_reversed(s: &'static Statement) -> Option<String> {
    (s.name == "ACQUIRE_LEASE").then(|| edit(s, "WHERE lease.until <= ", "WHERE lease.until >= "))
}

/// reconcile.rs `final_reconciliation`: "the final reconciliation never got the lease".
#[test]
fn teeth_a_lease_never_taken_again() {
    assert_caught(
        "the lease's test reversed",
        sql(lease_test_reversed),
        &[&["the final reconciliation never got the lease"]],
    );
}

/// A walk's progress checks its lease against the wrong parameter (the run's id, not the
/// holder): the walk finds itself superseded after its first page.
fn progress_checks_the_run_id(s: &'static Statement) -> Option<String> {
    (s.name == "RECORD_RECONCILIATION_PAGE")
        .then(|| edit(s, "AND holder = ?2)", "AND holder = ?1)"))
}

/// reconcile.rs `final_reconciliation`: "the final reconciliation (no faults) did not
/// finish".
#[test]
fn teeth_a_walk_that_loses_itself() {
    assert_caught(
        "the progress checking the run id",
        sql(progress_checks_the_run_id),
        &[&["the final reconciliation (no faults) did not finish"]],
    );
}

/// What a pull-mode acknowledgement takes, its condition negated wrongly (De Morgan): only a
/// fulfilment with its order_ref, never a revocation, settlement or credit. Shared by the ack
/// and its tally, as the macro is.
fn ack_fulfilments_only(s: &'static Statement) -> Option<String> {
    matches!(s.name, "ACK_EFFECT" | "TALLY_ACK").then(|| {
        edit(
            s,
            "(kind <> 'fulfilment' OR order_ref IS NOT NULL)",
            "(kind = 'fulfilment' AND order_ref IS NOT NULL)",
        )
    })
}

/// dispatch.rs `check_settled`: "(c) …'s … is pending after the effects drained: forgotten".
#[test]
fn teeth_acknowledgements_refused_leave_effects_forgotten() {
    assert_caught(
        "the ack of fulfilments only",
        sql(ack_fulfilments_only),
        &[&["(c)", "after the effects drained", "forgotten"]],
    );
}

// ---------------------------------------------------------------- (f) at the request

/// The first seed (in chunks of 100, up to the default budget) with a violation containing
/// every string of `expect`, whatever the other failing seeds report: for a check that a
/// defect reaches more rarely than another check catches the same defect.
fn assert_some_seed_caught(name: &str, mutations: Mutations, expect: &[&str]) {
    let opts = Options {
        mutations,
        keep_trace: false,
    };
    let started = Instant::now();
    for from in (0..SEEDS).step_by(100) {
        let summary = run_many(from, 100, default_threads(), &opts, false);
        if let Some(report) = summary.failures.iter().find(|r| {
            r.violations
                .iter()
                .any(|v| expect.iter().all(|e| v.contains(e)))
        }) {
            eprintln!(
                "{name}: caught at seed {} in {:.1} s:\n{}",
                report.seed,
                started.elapsed().as_secs_f64(),
                report.failure_text()
            );
            return;
        }
    }
    panic!("{name}: no seed of {SEEDS} reports {expect:?}");
}

/// The attempt recorded after its request (tests/sim.rs's money edge (4)), whose first
/// failing seed (h) catches: at the request, (f) catches it too.
#[test]
fn teeth_a_fulfilment_sent_under_no_attempt() {
    assert_some_seed_caught(
        "the attempt recorded after its request",
        Mutations {
            dispatch: paymos_core::actors::dispatch::Mutation {
                attempt_after_request: true,
                ..paymos_core::actors::dispatch::Mutation::default()
            },
            ..Mutations::default()
        },
        &["(f)", "under no attempt committed before it"],
    );
}
