-- The recently resolved alerts, read by a range (LIST_ALERTS, on every refresh of the admin
-- page's health view): the list's one OR condition read every alert ever raised (an audit of
-- reads as data grows, 2026-12-06: 10,103 rows to answer eleven). Partial: only resolved
-- alerts, written once each, when they resolve.
CREATE INDEX alert_resolved ON alert (resolved_at) WHERE state = 'resolved';
