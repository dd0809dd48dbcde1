//! Operations (interface §9): metrics, counters, alerts, bulk replay.

use super::{Arg, Bound, Statement};

/// Unix milliseconds of a stored ISO-8601 time (NULL stays NULL): the alerts' marks.
macro_rules! unix_ms {
    ($x:expr) => {
        concat!(
            "CAST(round((julianday(",
            $x,
            ") - 2440587.5) * 86400000) AS INTEGER)"
        )
    };
}

statement!(
    PROBE,
    [],
    // Whether D1 answers at all, asked first by every cron run with a time limit: a D1 whose
    // calls hang would hold the run at its first statement and never reach the alert that
    // says so (interface §9). Reads no row.
    "SELECT 1 AS ok"
);

statement!(
    METRICS_FACTS,
    [],
    // Every fact reads a bounded number of rows whatever the history (interface §10), decided
    // fact by fact:
    // - kept counts, one row (`tally`, written by the statements that change them): the
    //   processed deliveries by outcome, the livemode mismatches on record, the delivered,
    //   cancelled and dismissed effects and the dismissed deliveries;
    // - partial indexes over the working set, whose size is the backlog, not the history:
    //   unprocessed deliveries (count, oldest), pending effects (count, oldest, awaiting
    //   their order_ref), the dead deliveries and effects not dismissed (count, newest);
    // - a point or a short range of an index: the last delivery (max of the received index),
    //   livemode mismatches of the last 24 hours (and the newest), open alerts.
    // The LEFT JOIN answers a row even without the tally's (all counts 0 then). `INDEXED BY`
    // the dead effects' partial index: the (dispatch, id) index would read the dismissed ones
    // too, which accumulate with history.
    "SELECT coalesce(t.deliveries_applied, 0) AS applied, \
       coalesce(t.deliveries_stale, 0) AS stale, \
       coalesce(t.deliveries_ignored, 0) AS ignored, \
       (SELECT count(*) FROM webhook_delivery WHERE outcome = 'dead' AND dismissed_at IS NULL) AS dead, \
       coalesce(t.deliveries_dismissed, 0) AS dismissed, \
       (SELECT ",
    unix_ms!("max(processed_at)"),
    " FROM webhook_delivery \
          WHERE outcome = 'dead' AND dismissed_at IS NULL) AS dead_mark, \
       (SELECT count(*) FROM webhook_delivery WHERE processed_at IS NULL) AS unprocessed, \
       (SELECT CAST(round((julianday('now') - julianday(min(received_at))) * 86400) AS INTEGER) \
          FROM webhook_delivery WHERE processed_at IS NULL) AS oldest_unprocessed_seconds, \
       (SELECT max(received_at) FROM webhook_delivery) AS last_received_at, \
       coalesce(t.livemode_mismatches, 0) AS livemode_mismatches, \
       (SELECT count(*) FROM webhook_delivery WHERE reason = 'livemode_mismatch' \
          AND received_at >= strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-24 hours')) AS livemode_mismatches_recent, \
       (SELECT ",
    unix_ms!("max(received_at)"),
    " FROM webhook_delivery \
          WHERE reason = 'livemode_mismatch') AS livemode_mark, \
       (SELECT count(*) FROM effect WHERE dispatch = 'pending') AS effects_pending, \
       coalesce(t.effects_delivered, 0) AS effects_delivered, \
       (SELECT count(*) FROM effect INDEXED BY effect_dead_open \
          WHERE dispatch = 'dead' AND dismissed_at IS NULL) AS effects_dead, \
       coalesce(t.effects_dismissed, 0) AS effects_dismissed, \
       coalesce(t.effects_cancelled, 0) AS effects_cancelled, \
       (SELECT ",
    unix_ms!("max(dead_at)"),
    " FROM effect INDEXED BY effect_dead_open \
          WHERE dispatch = 'dead' AND dismissed_at IS NULL) AS effects_dead_mark, \
       (SELECT count(*) FROM effect WHERE dispatch = 'pending' AND kind = 'fulfilment' \
          AND order_ref IS NULL) AS effects_awaiting_order_ref, \
       (SELECT CAST(round((julianday('now') - julianday(min(created_at))) * 86400) AS INTEGER) \
          FROM effect WHERE dispatch = 'pending') AS oldest_pending_effect_seconds, \
       (SELECT count(*) FROM alert WHERE state = 'open') AS alerts_open \
     FROM (SELECT 1) LEFT JOIN tally t ON t.id = 1"
);

statement!(
    TALLY,
    [],
    // the kept counts as they stand (the simulator compares them with a full count)
    "SELECT deliveries_applied, deliveries_stale, deliveries_ignored, deliveries_dismissed, \
       livemode_mismatches, effects_delivered, effects_cancelled, effects_dismissed, \
       effects_checked_through FROM tally WHERE id = 1"
);

statement!(
    METRICS_COUNTERS,
    ["hour_bucket", "burst_bucket"],
    // flushed counters: the last hour, the last 15 minutes, and since the beginning
    // ('total' sorts after every minute bucket, hence the explicit exclusion)
    "SELECT 'hour' AS scope, name, label, sum(count) AS count FROM request_count \
       WHERE bucket <> 'total' AND bucket >= ?1 GROUP BY name, label \
     UNION ALL \
     SELECT 'burst', name, label, sum(count) FROM request_count \
       WHERE bucket <> 'total' AND bucket >= ?2 GROUP BY name, label \
     UNION ALL \
     SELECT 'total', name, label, count FROM request_count WHERE bucket = 'total'"
);

statement!(
    FLUSH_COUNT,
    ["bucket", "name", "label", "count"],
    // an isolate's counts, added: one statement per counter and bucket, at most once a minute
    "INSERT INTO request_count (bucket, name, label, count) VALUES (?1, ?2, ?3, ?4) \
     ON CONFLICT (bucket, name, label) DO UPDATE SET count = count + excluded.count"
);

statement!(
    PRUNE_COUNTS,
    ["before"],
    "DELETE FROM request_count WHERE bucket <> 'total' AND bucket < ?1"
);

statement!(
    KEPT_ALERTS,
    [],
    // the unresolved ones (at most one per kind: the partial unique index's rows)
    // (times are ISO-8601 texts to the millisecond: they compare as texts)
    "SELECT id, kind, state, count, mark, acked_count, acked_mark, \
       CAST(strftime('%s', sent_at) AS INTEGER) AS sent_at_unix, \
       COALESCE(reopened_at > sent_at, 0) AS reopened_unsent \
     FROM alert WHERE state <> 'resolved'"
);

statement!(
    OPEN_ALERT,
    ["id", "kind", "severity", "summary", "count", "mark"],
    // the unique index on unresolved kinds makes a second open alert of a kind impossible
    "INSERT INTO alert (id, kind, severity, summary, count, mark) VALUES (?1, ?2, ?3, ?4, ?5, ?6) \
     ON CONFLICT DO NOTHING"
);

statement!(
    UPDATE_ALERT,
    ["id", "summary", "count", "mark"],
    "UPDATE alert SET summary = ?2, count = ?3, mark = ?4, last_seen = ",
    now!(),
    " WHERE id = ?1 AND state <> 'resolved'"
);

statement!(
    REOPEN_ALERT,
    ["id", "summary", "count", "mark"],
    // a new instance after an acknowledgement (interface §9, amended): open again, and sent
    "UPDATE alert SET state = 'open', summary = ?2, count = ?3, mark = ?4, last_seen = ",
    now!(),
    ", reopened_at = ",
    now!(),
    ", reopens = reopens + 1 WHERE id = ?1 AND state = 'acknowledged'"
);

statement!(
    RESOLVE_ALERT,
    ["id"],
    "UPDATE alert SET state = 'resolved', resolved_at = ",
    now!(),
    " \
     WHERE id = ?1 AND state <> 'resolved'"
);

statement!(
    RECORD_PAST_ALERT,
    [
        "id",
        "kind",
        "severity",
        "summary",
        "count",
        "first_seen",
        "last_seen",
        "sends"
    ],
    // an alert raised while D1 could not be read (`database_unavailable`), put on record
    // once D1 answers again, resolved; its id is derived from its hour, so a copy is nothing
    "INSERT INTO alert (id, kind, severity, summary, count, state, first_seen, last_seen, \
       sends, resolved_at) VALUES (?1, ?2, ?3, ?4, ?5, 'resolved', ?6, ?7, ?8, ",
    now!(),
    ") \
     ON CONFLICT DO NOTHING"
);

statement!(
    ALERT_SENT,
    ["id"],
    "UPDATE alert SET sent_at = ",
    now!(),
    ", sends = sends + 1, last_send_error = NULL WHERE id = ?1"
);

statement!(
    ALERT_SEND_FAILED,
    ["id", "error"],
    // sent_at stays: the next cron run tries again
    "UPDATE alert SET last_send_error = ?2 WHERE id = ?1"
);

statement!(
    ACK_ALERT,
    ["id"],
    // silent until a new instance or its resolution (interface §9, amended): the ack covers
    // what the alert counted, and its newest instance, when it was given
    "UPDATE alert SET state = 'acknowledged', acknowledged_at = ",
    now!(),
    ", acked_count = count, \
       acked_mark = mark WHERE id = ?1 AND state <> 'resolved' RETURNING id, state"
);

statement!(
    LOAD_ALERT,
    ["id"],
    "SELECT ",
    alert_columns!(),
    " FROM alert WHERE id = ?1"
);

statement!(
    LIST_ALERTS,
    ["limit"],
    // open first, then acknowledged, then the recently resolved (a week). Two reads, each
    // along its partial index (alert_unresolved_kind; alert_resolved, migration 0023): one
    // condition with an OR read every alert ever raised, 10,000 after years of them.
    "SELECT * FROM (SELECT ",
    alert_columns!(),
    " FROM alert WHERE state <> 'resolved' \
     UNION ALL SELECT ",
    alert_columns!(),
    " FROM alert INDEXED BY alert_resolved WHERE state = 'resolved' \
       AND resolved_at >= strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-7 days')) \
     ORDER BY CASE state WHEN 'open' THEN 0 WHEN 'acknowledged' THEN 1 ELSE 2 END, last_seen DESC \
     LIMIT ?1"
);

statement!(
    RECORD_SAMPLE,
    [
        "at",
        "unprocessed",
        "oldest_unprocessed_seconds",
        "deliveries_dead",
        "effects_pending",
        "effects_delivered",
        "effects_dead",
        "oldest_pending_effect_seconds"
    ],
    // what the 5-minute cron's alert run saw, at its minute: the health charts' backlog and
    // outbox over time (one row per run, pruned after 8 days)
    "INSERT INTO health_sample (at, unprocessed, oldest_unprocessed_seconds, deliveries_dead, \
       effects_pending, effects_delivered, effects_dead, oldest_pending_effect_seconds) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) \
     ON CONFLICT (at) DO UPDATE SET unprocessed = excluded.unprocessed, \
       oldest_unprocessed_seconds = excluded.oldest_unprocessed_seconds, \
       deliveries_dead = excluded.deliveries_dead, effects_pending = excluded.effects_pending, \
       effects_delivered = excluded.effects_delivered, effects_dead = excluded.effects_dead, \
       oldest_pending_effect_seconds = excluded.oldest_pending_effect_seconds"
);

statement!(
    PRUNE_SAMPLES,
    ["before"],
    "DELETE FROM health_sample WHERE at < ?1"
);

statement!(
    HISTORY_DELIVERIES,
    ["since"],
    // The health charts' deliveries per hour by outcome: those received at or after `since`
    // (an ISO-8601 hour), a range of the received index, so the rows read are the window's
    // deliveries, whatever the history. What each is now: its outcome, `dismissed` for a
    // dead one an operator dismissed, `unprocessed` until processed.
    "SELECT substr(received_at, 1, 13) AS hour, \
       CASE WHEN processed_at IS NULL THEN 'unprocessed' \
            WHEN outcome = 'dead' AND dismissed_at IS NOT NULL THEN 'dismissed' \
            ELSE outcome END AS status, count(*) AS count \
     FROM webhook_delivery WHERE received_at >= ?1 \
     GROUP BY hour, status ORDER BY hour"
);

statement!(
    HISTORY_REFUSALS,
    ["since"],
    // refused requests per hour from the flushed minute buckets at or after `since` (a minute
    // bucket): a range of request_count's key
    "SELECT substr(bucket, 1, 13) AS hour, label, sum(count) AS count FROM request_count \
     WHERE bucket >= ?1 AND bucket <> 'total' AND name = 'refused' \
     GROUP BY hour, label ORDER BY hour"
);

statement!(
    HISTORY_SAMPLES,
    ["since"],
    // the cron's samples at or after `since` (a minute), and the last one before it (what
    // the first hour's deliveries of effects count from): a range of the key
    "SELECT * FROM (SELECT * FROM health_sample WHERE at < ?1 ORDER BY at DESC LIMIT 1) \
     UNION ALL \
     SELECT * FROM (SELECT * FROM health_sample WHERE at >= ?1 ORDER BY at)"
);

statement!(
    COUNT_REPLAY,
    [
        "event_type",
        "resource_id",
        "status",
        "received_after",
        "received_before"
    ],
    // and how many of them have their body in the archive (none: the chunks need not look)
    "SELECT count(*) AS matched, count(archived_at) AS archived FROM webhook_delivery WHERE ",
    replay_filter!()
);

/// The next chunk of a bulk replay after its cursor, oldest first: the event ids
/// REPLAY_CHUNK resets, and its tally reads first.
macro_rules! replay_chunk_ids {
    () => {
        concat!(
            "SELECT event_id FROM webhook_delivery WHERE ",
            replay_filter!(),
            " \
               AND (?6 IS NULL OR received_at > ?6 OR (received_at = ?6 AND event_id > ?7)) \
               ORDER BY received_at, event_id LIMIT ?8"
        )
    };
}

statement!(
    REPLAY_CHUNK,
    [
        "event_type",
        "resource_id",
        "status",
        "received_after",
        "received_before",
        "after_received_at",
        "after_event_id",
        "limit"
    ],
    // the next chunk after the cursor, oldest first, reset for replay as RESET_FOR_REPLAY
    // does (a new generation each, and not while its body is in the archive: the replay
    // restores those first, in the same batch); the caller sends the returned ids
    "UPDATE webhook_delivery SET processed_at = NULL, outcome = NULL, reason = NULL, \
       attempts = 0, last_error = NULL, replays = replays + 1, generation = generation + 1, \
       dismissed_at = NULL, dismiss_reason = NULL, enqueued_at = ",
    now!(),
    " \
     WHERE archived_at IS NULL AND event_id IN (",
    replay_chunk_ids!(),
    ") \
     RETURNING event_id, generation, received_at"
);

statement!(
    TALLY_REPLAY_CHUNK,
    [
        "event_type",
        "resource_id",
        "status",
        "received_after",
        "received_before",
        "after_received_at",
        "after_event_id",
        "limit"
    ],
    // just before REPLAY_CHUNK, on the same chunk (the same deterministic selection in the
    // same transaction, after the restores of its archived bodies, and the same
    // `archived_at IS NULL`): their outcomes leave the kept counts
    "UPDATE tally SET ",
    untally_outcomes!(),
    " FROM (SELECT ",
    outcome_sums!(),
    " FROM webhook_delivery WHERE archived_at IS NULL AND event_id IN (",
    replay_chunk_ids!(),
    ")) AS x \
     WHERE tally.id = 1 AND x.n > 0"
);

/// One bulk-replay chunk, its tally first (one transaction): the same eight arguments, in
/// [`REPLAY_CHUNK`]'s order. The reset rows are the last statement's.
pub fn replay_chunk_batch(args: Vec<Arg<'_>>) -> Vec<Bound<'_>> {
    vec![
        TALLY_REPLAY_CHUNK.bind(args.clone()),
        REPLAY_CHUNK.bind(args),
    ]
}
