//! Reconciliation (interface §6): runs, their pages, their findings.

use super::{Bound, Statement};

statement!(
    ACQUIRE_LEASE,
    ["name", "holder", "for"],
    // One walk at a time (interface §6): the lease is taken only when free (never taken, or
    // expired: an invocation that died lets it go after `for`, '+300 seconds'); a row comes
    // back only to the one that took it.
    "INSERT INTO lease (name, holder, until) VALUES (?1, ?2, strftime('%Y-%m-%dT%H:%M:%fZ', \
       'now', ?3)) \
     ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, until = excluded.until \
       WHERE lease.until <= ",
    now!(),
    " RETURNING holder"
);

statement!(
    RELEASE_LEASE,
    ["name", "holder"],
    "UPDATE lease SET until = ",
    now!(),
    " WHERE name = ?1 AND holder = ?2"
);

/// The run a walk holding the lease may write to: still running, the lease still its own.
macro_rules! walk_holds {
    () => {
        "state = 'running' AND EXISTS (SELECT 1 FROM lease WHERE name = 'reconciliation' \
           AND holder = ?2)"
    };
}

statement!(
    SUPERSEDE_RECONCILIATIONS,
    ["windowed_only"],
    // A new run supersedes the unfinished ones, but a daily run (`windowed_only` = 1) leaves
    // a full walk in progress alone: it waits for it. Superseded, a run is never marked done
    // afterwards (its writes require it to be running).
    "UPDATE reconciliation_run SET state = 'truncated', error = 'superseded by a newer run', \
       finished_at = ",
    now!(),
    ", updated_at = ",
    now!(),
    " \
     WHERE state = 'running' AND (?1 = 0 OR full_walk = 0)"
);

statement!(
    START_RECONCILIATION,
    ["full_walk", "paid_since"],
    "INSERT INTO reconciliation_run (full_walk, paid_since, invocations) VALUES (?1, ?2, 0) \
     RETURNING ",
    run_columns!()
);

statement!(
    OPEN_RECONCILIATION,
    [],
    // The run to walk now: a full walk in progress first (the oldest; a daily run waits for
    // it), else the newest windowed one (older ones were superseded).
    "UPDATE reconciliation_run SET invocations = invocations + 1, updated_at = ",
    now!(),
    " \
     WHERE id = (SELECT id FROM reconciliation_run WHERE state = 'running' \
       ORDER BY full_walk DESC, CASE WHEN full_walk = 1 THEN id ELSE -id END LIMIT 1) \
     RETURNING ",
    run_columns!()
);

statement!(
    FINISH_RECONCILIATION,
    ["id", "holder", "state", "error"],
    "UPDATE reconciliation_run SET state = ?3, error = ?4, finished_at = ",
    now!(),
    ", \
       updated_at = ",
    now!(),
    " WHERE id = ?1 AND ",
    walk_holds!(),
    " RETURNING id"
);

statement!(
    FORGET_SEEN,
    ["run_id"],
    // what a finished run was given is needed no more
    "DELETE FROM reconciliation_seen WHERE run_id = ?1"
);

statement!(
    LATEST_RECONCILIATION,
    [],
    "SELECT ",
    run_columns!(),
    // (the newest by its key: one row read, however many runs there were)
    ", state, error, started_at, finished_at FROM reconciliation_run \
     WHERE id = (SELECT max(id) FROM reconciliation_run)"
);

statement!(
    UNSEEN_IDS,
    ["run_id", "ids"],
    // The page's ids this run was not given (and handled) before. A page none of whose ids
    // is new does not move the walk forward: providers list newest first and ids need not
    // sort, so "after" in id order proves nothing (interface §6).
    "SELECT j.value AS id FROM json_each(?2) j \
     WHERE NOT EXISTS (SELECT 1 FROM reconciliation_seen s \
                       WHERE s.run_id = ?1 AND s.value = j.value)"
);

statement!(
    MARK_SEEN,
    ["run_id", "ids"],
    // the ids of a page this walk handled (a page split by the budget is marked as far as it
    // was handled: its rest comes again on the next page)
    "INSERT INTO reconciliation_seen (run_id, value) SELECT ?1, value FROM json_each(?2) \
     WHERE true ON CONFLICT (run_id, value) DO NOTHING"
);

statement!(
    CLAIM_CURSOR,
    ["run_id", "starting_after"],
    // The next page's `starting_after`, asked once per run: a row comes back only the first
    // time ('>' + the id, which no invoice id starts with).
    "INSERT INTO reconciliation_seen (run_id, value) VALUES (?1, '>' || ?2) \
     ON CONFLICT (run_id, value) DO NOTHING RETURNING value"
);

statement!(
    PAID_ON_RECORD,
    ["invoice_ids"],
    // For each of a page's paid invoices: whether an invoice.paid delivery is on record that
    // was processed `applied` or `stale` (one `ignored`, a livemode mismatch, or `dead`, or
    // not processed, did not bring the invoice to paid: interface §6), and the local status
    // and facts (an invoice on record may still lack the order_ref the provider knows:
    // interface §7, learned by reconciliation).
    "SELECT j.value AS id, \
       EXISTS (SELECT 1 FROM webhook_delivery w \
               WHERE w.resource_id = j.value AND w.event_type = 'invoice.paid' \
                 AND w.outcome IN ('applied', 'stale')) AS on_record, \
       r.status AS status, r.order_ref AS order_ref, r.amount AS amount, \
       r.currency AS currency, ",
    // a refund on record, not yet processed: the invoice is neither brought to paid nor
    // given facts that would release its fulfilment (interface §3)
    refund_waiting!("j.value"),
    " AS refund_waiting \
     FROM json_each(?1) j LEFT JOIN resource r ON r.id = j.value"
);

statement!(
    INSERT_FINDING,
    [
        "run_id",
        "holder",
        "invoice_id",
        "order_ref",
        "brought_to_paid",
        "status"
    ],
    // the primary key (run, finding, invoice) keeps an invoice from being listed twice
    "INSERT INTO reconciliation_finding \
       (run_id, finding, invoice_id, order_ref, brought_to_paid, status, seq) \
     SELECT ?1, 'missing', ?3, ?4, ?5, ?6, \
       (SELECT coalesce(max(seq), 0) + 1 FROM reconciliation_finding WHERE run_id = ?1) \
     WHERE EXISTS (SELECT 1 FROM reconciliation_run WHERE id = ?1 AND ",
    walk_holds!(),
    ") ON CONFLICT (run_id, finding, invoice_id) DO NOTHING"
);

statement!(
    RECORD_RECONCILIATION_PAGE,
    ["id", "holder", "cursor", "pages", "checked"],
    // progress, only while this walk holds its run (a superseded run stops here), and the
    // lease renewed for the next page
    "UPDATE reconciliation_run SET cursor = ?3, pages = pages + ?4, checked = checked + ?5, \
       updated_at = ",
    now!(),
    " WHERE id = ?1 AND ",
    walk_holds!(),
    " RETURNING id"
);

statement!(
    RENEW_LEASE,
    ["name", "holder", "for"],
    "UPDATE lease SET until = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?3) \
     WHERE name = ?1 AND holder = ?2"
);

statement!(
    RECONCILIATION_TOTALS,
    ["id"],
    "SELECT checked, pages, findings FROM reconciliation_run WHERE id = ?1"
);

statement!(
    RECONCILIATION_FINDINGS,
    ["run_id", "limit"],
    // the first `limit` in report order (-1: all), read along reconciliation_finding_seq
    "SELECT finding, invoice_id, order_ref, brought_to_paid, status, event_id, outcome \
     FROM reconciliation_finding WHERE run_id = ?1 ORDER BY seq LIMIT ?2"
);

statement!(
    CHECK_DOUBLED_EFFECTS,
    [],
    // Bounded: more than one effect of a kind for a resource is impossible by construction
    // (UNIQUE (resource_id, kind)), and reconciliation asks anyway, over the effects written
    // since it last asked (`tally.effects_checked_through`, a range of the rowid), each
    // counted in the UNIQUE index. What it finds stays in `doubled_effect` (a doubled pair
    // does not undouble), so a report reads that table, never the whole effect table. Then
    // MARK_DOUBLED_CHECKED, in the same transaction.
    "INSERT INTO doubled_effect (resource_id, kind, count) \
     SELECT resource_id, kind, n FROM (SELECT e.resource_id, e.kind, \
       (SELECT count(*) FROM effect x WHERE x.resource_id = e.resource_id AND x.kind = e.kind) AS n \
       FROM effect e WHERE e.id > (SELECT effects_checked_through FROM tally WHERE id = 1)) \
     WHERE n > 1 \
     ON CONFLICT (resource_id, kind) DO UPDATE SET count = excluded.count"
);

statement!(
    MARK_DOUBLED_CHECKED,
    [],
    "UPDATE tally SET effects_checked_through = (SELECT coalesce(max(id), 0) FROM effect) \
     WHERE id = 1 AND effects_checked_through < (SELECT coalesce(max(id), 0) FROM effect)"
);

statement!(
    DOUBLED_EFFECTS,
    [],
    // what the checks found (empty by construction): a report's `doubled`
    "SELECT resource_id, kind, count FROM doubled_effect ORDER BY resource_id, kind"
);

/// The bounded doubled-effects check and its result, in one transaction: the effects since
/// the last check looked up, the mark moved, then what every check found (the last
/// statement's rows).
pub fn check_doubled_batch() -> Vec<Bound<'static>> {
    vec![
        CHECK_DOUBLED_EFFECTS.bind(vec![]),
        MARK_DOUBLED_CHECKED.bind(vec![]),
        DOUBLED_EFFECTS.bind(vec![]),
    ]
}
