-- Reconciliation (interface §6, amended): one run walks at a time, under a lease kept here
-- (an invocation that dies lets it go when it expires); a continuation that finds it held
-- does nothing.
CREATE TABLE lease (
    name   TEXT PRIMARY KEY,                     -- 'reconciliation'
    holder TEXT NOT NULL,                        -- the invocation's random token
    until  TEXT NOT NULL                         -- held until then, renewed by every page
);

-- What a run was given: the ids of its pages, and each `starting_after` it asked ('>' +
-- the id). A page whose ids were all given before, or a cursor asked twice, does not move the
-- walk forward: the run ends truncated. Providers list newest first and ids need not sort,
-- so "after" in id order proves nothing. Forgotten when the run finishes.
CREATE TABLE reconciliation_seen (
    run_id INTEGER NOT NULL REFERENCES reconciliation_run (id),
    value  TEXT NOT NULL,
    PRIMARY KEY (run_id, value)
) WITHOUT ROWID;
