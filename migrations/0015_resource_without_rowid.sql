-- resource as a WITHOUT ROWID table (issue 27: rows per new delivery).
--
-- `resource` is keyed by its provider id (`id TEXT PRIMARY KEY`, 0002). In a rowid table
-- that key is a second B-tree, its automatic index: each new resource writes two rows (the
-- row and its key), and each of the many lookups by id per delivery (the guarded write,
-- the history, the effects, the outcome: "each statement finding the resource again")
-- goes through the index to the row. WITHOUT ROWID makes the key the table's one B-tree:
-- one row written per new resource, one seek per lookup. Every statement reads and writes
-- a resource by its id (paymos_core::statements); none names its rowid, none relies on the
-- rowid's order, and nothing indexes it otherwise. A row is small (ten short columns), the
-- case WITHOUT ROWID is for. What SQLite enforces changes in one point: a WITHOUT ROWID key
-- is NOT NULL, where a rowid table's TEXT PRIMARY KEY let a NULL id in; every id the
-- receiver writes is a delivery's NOT NULL resource_id.
--
-- How: resource_transition and effect reference resource (id), so the table keeps its name
-- throughout: its rows are copied aside, the table dropped and created again WITHOUT ROWID
-- (the same columns in the same order, the same CHECK), and the rows copied back. The drop
-- deletes every row the children reference; with their foreign keys deferred to the
-- migration's commit (D1 runs a migration in one transaction, foreign keys enforced), each
-- row copied back settles the references to it, and at the commit none is left dangling.
-- (Renaming a rebuilt table onto the name, as 0014 did, would leave them counted: SQLite
-- settles a deferred reference only when a row is inserted into the table it names.)
-- crates/paymos-sim/tests/rowids.rs applies it over a filled database and compares the
-- table, its rows and what it refuses.
PRAGMA defer_foreign_keys = on;

CREATE TABLE resource_before_0015 AS SELECT * FROM resource;
DROP TABLE resource;

-- Business state per resource (invoice, withdrawal, deposit), changed only through the guard.
CREATE TABLE resource (
    id               TEXT PRIMARY KEY,             -- inv_… / wdr_… / pcd_…
    kind             TEXT NOT NULL CHECK (kind IN ('invoice', 'withdrawal', 'deposit')),
    status           TEXT NOT NULL,
    previous_status  TEXT,                         -- status before the last applied transition
    order_ref        TEXT,
    amount           TEXT,
    currency         TEXT,
    -- random token of the transaction whose guarded write last won: lets the later
    -- statements of the same batch tell, in SQL, whether the guard let it through
    transition_token TEXT,
    created_at       TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    updated_at       TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
) WITHOUT ROWID;
INSERT INTO resource (id, kind, status, previous_status, order_ref, amount, currency,
        transition_token, created_at, updated_at)
    SELECT id, kind, status, previous_status, order_ref, amount, currency, transition_token,
        created_at, updated_at
    FROM resource_before_0015;
DROP TABLE resource_before_0015;
