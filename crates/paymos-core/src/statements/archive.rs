//! The archive (interface §10): archiving runs, the chunks they select, the bodies they
//! remove once their object is verified, the archive's state, and the restore a replay makes.
//!
//! "Processed" is `processed_at IS NOT NULL`: every statement that sets it sets the outcome in
//! the same write (applied, stale, ignored, dead). A body still in D1 is in one of two places
//! (migration 0013): its own `delivery_body` row, keyed in the archive's order, or its
//! delivery's row, listed by the partial index `webhook_delivery_archivable` (0017). The
//! selections read both.

use super::Statement;

/// A run's columns, as `actors::archive::RunRow` reads them.
macro_rules! archive_run_columns {
    () => {
        "id, started_by, before, cursor_received_at, cursor_event_id, archived, objects"
    };
}

statement!(
    OPEN_ARCHIVE_RUN,
    [],
    // the daily run to continue, if one is unfinished (an operator's run is one call, never
    // continued by the cron)
    "UPDATE archive_run SET invocations = invocations + 1, updated_at = ",
    now!(),
    " \
     WHERE id = (SELECT max(id) FROM archive_run WHERE state = 'running' AND started_by = 'daily') \
     RETURNING ",
    archive_run_columns!()
);

statement!(
    SUPERSEDE_ARCHIVE_RUNS,
    [],
    // a new daily run covers what an unfinished one would have (its cutoff is later); an
    // operator's run still `running` here is one whose invocation died before its end
    "UPDATE archive_run SET state = 'superseded', finished_at = ",
    now!(),
    ", updated_at = ",
    now!(),
    " WHERE state = 'running'"
);

statement!(
    START_ARCHIVE_RUN,
    [
        "started_by",
        "before",
        "cursor_received_at",
        "cursor_event_id"
    ],
    // `before` normalised by SQLite to the stored form, so it compares with received_at
    "INSERT INTO archive_run (started_by, before, cursor_received_at, cursor_event_id, \
       invocations) \
     VALUES (?1, strftime('%Y-%m-%dT%H:%M:%fZ', ?2), ?3, ?4, 1) \
     RETURNING ",
    archive_run_columns!()
);

/// Processed, not yet archived deliveries whose body is in `delivery_body`, with that row as
/// `b` and the delivery as `d`: `delivery_body`'s key, joined to the delivery by its primary
/// key (migration 0017). Its unprocessed rows are skipped, not indexed.
macro_rules! archivable_body_rows {
    () => {
        "delivery_body b JOIN webhook_delivery d ON d.event_id = b.event_id \
         AND d.processed_at IS NOT NULL AND d.archived_at IS NULL"
    };
}

/// Processed, not yet archived deliveries whose body is in their own row (received before
/// 0013, or restored by a replay): the partial index `webhook_delivery_archivable` (0017),
/// whose condition this repeats so that SQLite reads it.
macro_rules! archivable_in_row {
    () => {
        "processed_at IS NOT NULL AND archived_at IS NULL AND body <> ''"
    };
}

statement!(
    ARCHIVE_CANDIDATES,
    ["before", "after_received_at", "after_event_id", "limit"],
    // The next deliveries to archive after the cursor, oldest first, with their body's size
    // in bytes (octet_length reads the record header, not the body), so that a chunk is cut
    // before its bodies are loaded. From both places a body can be (migration 0017), merged
    // in (received_at, event_id) order: each arm walks its key from the cursor (the row value
    // comparison seeks it), and the LIMIT stops both.
    "SELECT b.event_id AS event_id, b.received_at AS received_at, \
       octet_length(b.body) AS bytes FROM ",
    archivable_body_rows!(),
    " WHERE b.received_at < ?1 \
       AND (b.received_at, b.event_id) > (coalesce(?2, ''), coalesce(?3, '')) \
     UNION ALL \
     SELECT event_id, received_at, octet_length(body) FROM webhook_delivery \
     WHERE ",
    archivable_in_row!(),
    " AND received_at < ?1 \
       AND (received_at, event_id) > (coalesce(?2, ''), coalesce(?3, '')) \
     ORDER BY received_at, event_id LIMIT ?4"
);

statement!(
    ARCHIVE_BODIES,
    ["event_ids"],
    // a chunk's lines (a JSON array of ids), still processed and still holding their body
    "SELECT event_id, resource_id, event_type, received_at, processed_at, outcome, ",
    body_column!(),
    " FROM webhook_delivery \
     WHERE event_id IN (SELECT value FROM json_each(?1)) \
       AND processed_at IS NOT NULL AND archived_at IS NULL \
     ORDER BY received_at, event_id"
);

/// The deliveries a chunk's removal takes, from `?1` (each line's event id → the processed_at
/// written in its line): still unarchived, and processed exactly as their line says, so a
/// delivery replayed (or replayed and processed again) since it was loaded keeps its body.
/// One text for DROP_BODY_ROWS and REMOVE_ARCHIVED_BODIES, which must take the same rows
/// (0013's triggers refuse to archive a delivery whose body row is left).
macro_rules! removed_by_chunk {
    () => {
        "event_id IN (SELECT key FROM json_each(?1)) AND archived_at IS NULL \
         AND processed_at = json_extract(?1, '$.\"' || event_id || '\"')"
    };
}

statement!(
    DROP_BODY_ROWS,
    ["processed_at_by_event_id"],
    // First in the batch of REMOVE_ARCHIVED_BODIES, with its `?1` and its conditions, so the
    // same deliveries: their rows in delivery_body (migration 0013). Deleting them is what
    // frees the space; a delivery replayed since it was loaded keeps its body. Before the
    // removal, since the database refuses to mark archived a delivery whose body row is
    // still there (0013's triggers).
    "DELETE FROM delivery_body WHERE (received_at, event_id) IN ( \
       SELECT received_at, event_id FROM webhook_delivery WHERE ",
    removed_by_chunk!(),
    ")"
);

statement!(
    REMOVE_ARCHIVED_BODIES,
    ["processed_at_by_event_id", "archive_key"],
    // Only once the object is written and read back, the rows `removed_by_chunk!` names: a
    // delivery replayed since it was loaded keeps its body, and its line in the object is
    // simply not pointed to.
    "UPDATE webhook_delivery SET body = '', archived_at = ",
    now!(),
    ", archive_key = ?2 WHERE ",
    removed_by_chunk!(),
    " RETURNING event_id"
);

statement!(
    RECORD_ARCHIVE_CHUNK,
    [
        "id",
        "cursor_received_at",
        "cursor_event_id",
        "event_ids",
        "archive_key",
        "bytes"
    ],
    // in the batch of REMOVE_ARCHIVED_BODIES: the cursor and the totals move with the removal
    "UPDATE archive_run SET cursor_received_at = ?2, cursor_event_id = ?3, \
       archived = archived + (SELECT count(*) FROM webhook_delivery \
         WHERE event_id IN (SELECT value FROM json_each(?4)) AND archive_key = ?5), \
       objects = objects + 1, bytes = bytes + ?6, updated_at = ",
    now!(),
    " WHERE id = ?1"
);

statement!(
    FINISH_ARCHIVE_RUN,
    ["id", "state", "error"],
    // the end of an invocation's share: still `running` (the cron continues it), or over;
    // a run superseded meanwhile keeps its state
    "UPDATE archive_run SET state = ?2, error = ?3, updated_at = ",
    now!(),
    ", \
       finished_at = CASE WHEN ?2 = 'running' THEN NULL ELSE ",
    now!(),
    " END \
     WHERE id = ?1 AND state = 'running'"
);

statement!(
    ARCHIVE_BACKLOG,
    ["before", "cap"],
    // Bodies of processed deliveries received before `before` still in D1, counted up to
    // `cap` (bounded reads of both places' keys, whatever the history), and the oldest body
    // of a processed delivery still in D1: the first of each place in key order (a `min()`
    // over the join would read every body row).
    "SELECT (SELECT count(*) FROM (\
         SELECT 1 FROM ",
    archivable_body_rows!(),
    " WHERE b.received_at < strftime('%Y-%m-%dT%H:%M:%fZ', ?1) \
         UNION ALL \
         SELECT 1 FROM webhook_delivery WHERE ",
    archivable_in_row!(),
    " AND received_at < strftime('%Y-%m-%dT%H:%M:%fZ', ?1) \
         LIMIT ?2)) AS bodies, \
     (SELECT min(received_at) FROM (\
         SELECT * FROM (SELECT b.received_at FROM ",
    archivable_body_rows!(),
    " ORDER BY b.received_at LIMIT 1) \
         UNION ALL \
         SELECT * FROM (SELECT received_at FROM webhook_delivery WHERE ",
    archivable_in_row!(),
    " ORDER BY received_at LIMIT 1))) AS oldest_received_at"
);

statement!(
    LATEST_ARCHIVE_RUN,
    [],
    "SELECT ",
    archive_run_columns!(),
    ", state, bytes, invocations, error, started_at, updated_at, finished_at \
     FROM archive_run ORDER BY id DESC LIMIT 1"
);

statement!(
    ARCHIVED_AMONG,
    ["event_ids"],
    // which of these deliveries (a JSON array of ids) have their body in the archive
    "SELECT event_id, archive_key FROM webhook_delivery \
     WHERE event_id IN (SELECT value FROM json_each(?1)) AND archived_at IS NOT NULL"
);

statement!(
    ARCHIVED_IN_REPLAY_CHUNK,
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
    // the archived rows of the chunk REPLAY_CHUNK would reset with the same arguments, with
    // their position in it (1-based, oldest first)
    "SELECT event_id, archive_key, pos FROM ( \
       SELECT event_id, archive_key, row_number() OVER (ORDER BY received_at, event_id) AS pos \
       FROM (SELECT event_id, received_at, archive_key FROM webhook_delivery WHERE ",
    replay_filter!(),
    " \
         AND (?6 IS NULL OR received_at > ?6 OR (received_at = ?6 AND event_id > ?7)) \
         ORDER BY received_at, event_id LIMIT ?8)) \
     WHERE archive_key IS NOT NULL ORDER BY pos"
);

statement!(
    RESTORE_BODY,
    ["event_id", "archive_key", "body"],
    // a replay's body back from its object, in the batch of the replay's reset: unarchived,
    // it is archived again by a later run once processed and past retention. Into its
    // delivery row (`body_column!` reads either place): a replay of an archived delivery is
    // rare, and a second statement per body would not pay for the little space.
    "UPDATE webhook_delivery SET body = ?3, archived_at = NULL, archive_key = NULL \
     WHERE event_id = ?1 AND archive_key = ?2"
);
