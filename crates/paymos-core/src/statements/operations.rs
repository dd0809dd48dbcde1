//! Operations (CONTRACT §9): metrics, counters, alerts, bulk replay.

use super::Statement;

statement!(
    METRICS_FACTS,
    [],
    // every count reads an index (outcome, the unprocessed and pending partial indexes,
    // dispatch, reason), never the table
    "SELECT \
       (SELECT count(*) FROM webhook_delivery WHERE outcome = 'applied') AS applied, \
       (SELECT count(*) FROM webhook_delivery WHERE outcome = 'stale') AS stale, \
       (SELECT count(*) FROM webhook_delivery WHERE outcome = 'ignored') AS ignored, \
       (SELECT count(*) FROM webhook_delivery WHERE outcome = 'dead') AS dead, \
       (SELECT count(*) FROM webhook_delivery WHERE processed_at IS NULL) AS unprocessed, \
       (SELECT CAST(round((julianday('now') - julianday(min(received_at))) * 86400) AS INTEGER) \
          FROM webhook_delivery WHERE processed_at IS NULL) AS oldest_unprocessed_seconds, \
       (SELECT max(received_at) FROM webhook_delivery) AS last_received_at, \
       (SELECT count(*) FROM webhook_delivery WHERE reason = 'livemode_mismatch') AS livemode_mismatches, \
       (SELECT count(*) FROM webhook_delivery WHERE reason = 'livemode_mismatch' \
          AND received_at >= strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-24 hours')) AS livemode_mismatches_recent, \
       (SELECT count(*) FROM effect WHERE dispatch = 'pending') AS effects_pending, \
       (SELECT count(*) FROM effect WHERE dispatch = 'delivered') AS effects_delivered, \
       (SELECT count(*) FROM effect WHERE dispatch = 'dead') AS effects_dead, \
       (SELECT count(*) FROM effect WHERE dispatch = 'pending' AND kind = 'fulfilment' \
          AND order_ref IS NULL) AS effects_awaiting_order_ref, \
       (SELECT CAST(round((julianday('now') - julianday(min(created_at))) * 86400) AS INTEGER) \
          FROM effect WHERE dispatch = 'pending') AS oldest_pending_effect_seconds, \
       (SELECT count(*) FROM alert WHERE state = 'open') AS alerts_open"
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
    "SELECT id, kind, state, count, \
       CAST(strftime('%s', sent_at) AS INTEGER) AS sent_at_unix \
     FROM alert WHERE state <> 'resolved'"
);

statement!(
    OPEN_ALERT,
    ["id", "kind", "severity", "summary", "count"],
    // the unique index on unresolved kinds makes a second open alert of a kind impossible
    "INSERT INTO alert (id, kind, severity, summary, count) VALUES (?1, ?2, ?3, ?4, ?5) \
     ON CONFLICT DO NOTHING"
);

statement!(
    UPDATE_ALERT,
    ["id", "summary", "count"],
    "UPDATE alert SET summary = ?2, count = ?3, last_seen = ",
    now!(),
    " WHERE id = ?1 AND state <> 'resolved'"
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
    // silent until resolved (CONTRACT §9); acked_count keeps the count the operator saw
    "UPDATE alert SET state = 'acknowledged', acknowledged_at = ",
    now!(),
    ", acked_count = count \
     WHERE id = ?1 AND state <> 'resolved' RETURNING id, state"
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
    // open first, then acknowledged, then the recently resolved (a week)
    "SELECT ",
    alert_columns!(),
    " FROM alert \
     WHERE state <> 'resolved' OR resolved_at >= strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-7 days') \
     ORDER BY CASE state WHEN 'open' THEN 0 WHEN 'acknowledged' THEN 1 ELSE 2 END, last_seen DESC \
     LIMIT ?1"
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
       enqueued_at = ",
    now!(),
    " \
     WHERE archived_at IS NULL AND event_id IN (SELECT event_id FROM webhook_delivery WHERE ",
    replay_filter!(),
    " \
       AND (?6 IS NULL OR received_at > ?6 OR (received_at = ?6 AND event_id > ?7)) \
       ORDER BY received_at, event_id LIMIT ?8) \
     RETURNING event_id, generation, received_at"
);
