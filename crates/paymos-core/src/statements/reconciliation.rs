//! Reconciliation (CONTRACT §6): runs, their pages, their findings.

use super::Statement;

statement!(
    OPEN_RECONCILIATION,
    [],
    // the unfinished run to continue, if any (the newest; older ones were superseded)
    "UPDATE reconciliation_run SET invocations = invocations + 1, updated_at = ",
    now!(),
    " \
     WHERE id = (SELECT max(id) FROM reconciliation_run WHERE state = 'running') \
     RETURNING ",
    run_columns!()
);

statement!(
    SUPERSEDE_RECONCILIATIONS,
    [],
    "UPDATE reconciliation_run SET state = 'truncated', error = 'superseded by a newer run', \
       finished_at = ",
    now!(),
    ", updated_at = ",
    now!(),
    " \
     WHERE state = 'running'"
);

statement!(
    START_RECONCILIATION,
    ["full_walk", "paid_since"],
    "INSERT INTO reconciliation_run (full_walk, paid_since, invocations) VALUES (?1, ?2, 1) \
     RETURNING ",
    run_columns!()
);

statement!(
    FINISH_RECONCILIATION,
    ["id", "state", "error"],
    "UPDATE reconciliation_run SET state = ?2, error = ?3, finished_at = ",
    now!(),
    ", \
       updated_at = ",
    now!(),
    " WHERE id = ?1"
);

statement!(
    LATEST_RECONCILIATION,
    [],
    "SELECT ",
    run_columns!(),
    ", state, error, started_at, finished_at FROM reconciliation_run \
     ORDER BY id DESC LIMIT 1"
);

statement!(
    PAID_ON_RECORD,
    ["invoice_ids", "stuck_after"],
    // For each of a page's paid invoices: whether an invoice.paid delivery is on record, the
    // local status, and an invoice.paid that shipped nothing (dead, or unprocessed for longer
    // than `stuck_after`, an SQLite modifier) while the invoice is not paid here.
    "SELECT x.id, x.on_record, x.status, x.stuck_event_id, d.outcome AS stuck_outcome FROM ( \
       SELECT j.value AS id, \
         EXISTS (SELECT 1 FROM webhook_delivery w \
                 WHERE w.resource_id = j.value AND w.event_type = 'invoice.paid') AS on_record, \
         (SELECT status FROM resource WHERE id = j.value) AS status, \
         (SELECT w.event_id FROM webhook_delivery w \
          WHERE w.resource_id = j.value AND w.event_type = 'invoice.paid' \
            AND (w.outcome = 'dead' OR (w.processed_at IS NULL \
                 AND w.received_at <= strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?2))) \
            AND NOT EXISTS (SELECT 1 FROM resource r WHERE r.id = j.value \
                            AND r.status IN ('paid', 'overpaid', 'refunded')) \
          ORDER BY w.received_at LIMIT 1) AS stuck_event_id \
       FROM json_each(?1) j) x \
     LEFT JOIN webhook_delivery d ON d.event_id = x.stuck_event_id"
);

statement!(
    INSERT_FINDING,
    [
        "run_id",
        "finding",
        "invoice_id",
        "order_ref",
        "brought_to_paid",
        "status",
        "event_id",
        "outcome"
    ],
    // the primary key (run, finding, invoice) keeps an invoice from being listed twice
    "INSERT INTO reconciliation_finding \
       (run_id, finding, invoice_id, order_ref, brought_to_paid, status, event_id, outcome, seq) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, \
       (SELECT coalesce(max(seq), 0) + 1 FROM reconciliation_finding WHERE run_id = ?1)) \
     ON CONFLICT (run_id, finding, invoice_id) DO NOTHING"
);

statement!(
    RECORD_RECONCILIATION_PAGE,
    ["id", "cursor", "pages", "checked"],
    "UPDATE reconciliation_run SET cursor = ?2, pages = pages + ?3, checked = checked + ?4, \
       updated_at = ",
    now!(),
    " WHERE id = ?1"
);

statement!(
    RECONCILIATION_TOTALS,
    ["id"],
    "SELECT checked, pages FROM reconciliation_run WHERE id = ?1"
);

statement!(
    RECONCILIATION_FINDINGS,
    ["run_id"],
    "SELECT finding, invoice_id, order_ref, brought_to_paid, status, event_id, outcome \
     FROM reconciliation_finding WHERE run_id = ?1 ORDER BY seq"
);

statement!(
    DOUBLED_EFFECTS,
    [],
    // empty by construction (UNIQUE (resource_id, kind)); reconciliation asks anyway
    "SELECT resource_id, kind, count(*) AS count FROM effect \
     GROUP BY resource_id, kind HAVING count(*) > 1"
);
