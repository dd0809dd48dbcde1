-- Retention and the archive (interface §10): the bodies of processed deliveries past
-- RETENTION_DAYS move to gzip NDJSON objects in R2 (`ARCHIVE`); the row stays, slim, for the
-- dedupe, the listing, the history and reconciliation.

-- When the body left D1, and the object that holds it (deliveries/YYYY/MM/DD/<name>.ndjson.gz).
ALTER TABLE webhook_delivery ADD COLUMN archived_at TEXT;
ALTER TABLE webhook_delivery ADD COLUMN archive_key TEXT;

-- An archived row's body. `body` is NOT NULL since 0001, and SQLite cannot drop a NOT NULL
-- in place: ALTER TABLE cannot, and `PRAGMA writable_schema` (SQLite's documented way to drop
-- one without touching the rows) is refused by D1 and by Miniflare (SQLITE_AUTH, tried). The
-- one other way is a table rebuild: a copy of every row and of its eight indexes in one
-- migration, on exactly the databases that need an archive, those close to D1's 10 GB cap,
-- where the copy may not even fit, and would hold the writer for as long as it runs.
--
-- So an archived row keeps `body = ''`, and the empty text means "archived" and nothing else:
-- - no delivery has an empty body: the receiver stores only a body that parsed as a JSON
--   envelope (an object with event_id, type, created and data), never zero bytes;
-- - the two triggers below make it a rule of the database, not of the code: `body` is ''
--   exactly when `archived_at` and `archive_key` are both set, on every insert and update,
--   whoever writes (a statement, a script, `wrangler d1 execute`). So '' cannot be a body
--   taken for archived, nor an archived row's body taken for ''.
-- - the statements that read a body answer NULL for an archived row
--   (`CASE WHEN archived_at IS NULL THEN body END`), so no reader sees the ''.
-- The check runs only when one of the three columns is written (UPDATE OF), and on an insert
-- it compares two values: nothing measurable on the receive path.
CREATE TRIGGER webhook_delivery_archived_insert BEFORE INSERT ON webhook_delivery
WHEN (NEW.archived_at IS NULL) <> (NEW.archive_key IS NULL)
  OR (NEW.archived_at IS NULL) <> (NEW.body <> '')
BEGIN
    SELECT RAISE(ABORT, 'webhook_delivery: body is empty exactly when archived_at and archive_key are set');
END;
CREATE TRIGGER webhook_delivery_archived_update
BEFORE UPDATE OF body, archived_at, archive_key ON webhook_delivery
WHEN (NEW.archived_at IS NULL) <> (NEW.archive_key IS NULL)
  OR (NEW.archived_at IS NULL) <> (NEW.body <> '')
BEGIN
    SELECT RAISE(ABORT, 'webhook_delivery: body is empty exactly when archived_at and archive_key are set');
END;

-- What an archiving run selects: processed deliveries still holding their body, oldest
-- first. Partial, so it holds only the working set (processed, not yet archived): an
-- archived row leaves it, and the run never walks the history it already archived. It also
-- answers "bodies past retention still in D1" for the metrics without reading the table.
CREATE INDEX webhook_delivery_archivable ON webhook_delivery (received_at, event_id)
    WHERE processed_at IS NOT NULL AND archived_at IS NULL;

-- Archiving runs. The daily one (now − RETENTION_DAYS) may not finish within one invocation's
-- budget: it keeps its cursor here and the 5-minute cron continues it. An operator's
-- `POST /admin/api/archive` is one run per call, continued by posting its cursor back.
CREATE TABLE archive_run (
    id                 INTEGER PRIMARY KEY AUTOINCREMENT,
    started_by         TEXT NOT NULL CHECK (started_by IN ('daily', 'admin')),
    before             TEXT NOT NULL,              -- archives deliveries received before this
    cursor_received_at TEXT,                       -- the last delivery archived (or passed)
    cursor_event_id    TEXT,
    state              TEXT NOT NULL DEFAULT 'running'
                       CHECK (state IN ('running', 'done', 'partial', 'failed', 'superseded')),
    archived           INTEGER NOT NULL DEFAULT 0, -- bodies removed from D1
    objects            INTEGER NOT NULL DEFAULT 0, -- objects written and verified
    bytes              INTEGER NOT NULL DEFAULT 0, -- their compressed size
    invocations        INTEGER NOT NULL DEFAULT 0,
    error              TEXT,                       -- why it failed
    started_at         TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    updated_at         TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    finished_at        TEXT
);
CREATE INDEX archive_run_open ON archive_run (id) WHERE state = 'running';
