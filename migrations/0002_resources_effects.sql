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
);

-- Every applied transition: the state entered and what caused it.
CREATE TABLE resource_transition (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    resource_id TEXT NOT NULL REFERENCES resource (id),
    from_status TEXT,
    to_status   TEXT NOT NULL,
    cause_kind  TEXT NOT NULL CHECK (cause_kind IN ('event', 'manual', 'reconciliation')),
    cause       TEXT NOT NULL,                     -- evt_… id, or the operator's reason
    at          TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE INDEX resource_transition_resource ON resource_transition (resource_id, id);

-- Effects that must happen exactly once per resource. The UNIQUE constraint, not the
-- application, is what makes a second fulfilment impossible.
CREATE TABLE effect (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    resource_id  TEXT NOT NULL REFERENCES resource (id),
    kind         TEXT NOT NULL CHECK (kind IN ('fulfilment', 'revocation', 'settlement', 'credit')),
    license_code TEXT,
    order_ref    TEXT,
    amount       TEXT,
    currency     TEXT,
    cause        TEXT NOT NULL,
    created_at   TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
    UNIQUE (resource_id, kind),
    CHECK (kind <> 'fulfilment' OR license_code IS NOT NULL)
);
