-- A reconciliation run's findings, read in bounded time however many there are (an audit of
-- reads as data grows, 2026-12-06). A run that found 40,000 missing invoices had the metrics
-- and every 5-minute cron read them all (82,000 rows, a 3.7 MB answer) to count them, and
-- each new finding read all before it for its `seq` (a walk's writes grew with its square).
--
-- - Its findings in report order: `max(seq)` and `ORDER BY seq LIMIT n` read the index's
--   end or its first n entries, not the run's every finding and a sort.
-- - The run counts its findings as they are written (`findings`, kept by the trigger: an
--   insert that DO NOTHING skipped writes no row and counts none), so the metrics and the
--   alerts read a count, and only the first findings of the list.
CREATE INDEX reconciliation_finding_seq ON reconciliation_finding (run_id, seq);

ALTER TABLE reconciliation_run ADD COLUMN findings INTEGER NOT NULL DEFAULT 0;

UPDATE reconciliation_run SET findings =
    (SELECT count(*) FROM reconciliation_finding f WHERE f.run_id = reconciliation_run.id);

CREATE TRIGGER reconciliation_finding_counted AFTER INSERT ON reconciliation_finding
BEGIN
    UPDATE reconciliation_run SET findings = findings + 1 WHERE id = NEW.run_id;
END;
