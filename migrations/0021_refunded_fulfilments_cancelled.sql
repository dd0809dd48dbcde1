-- A fulfilment whose invoice was refunded before this receiver cancelled fulfilments is
-- cancelled now (interface §3: a fulfilment not yet delivered is cancelled by the refund and
-- never sent again). Before 0006 a refund recorded its revocation and left the fulfilment
-- `pending`; before 0004 both became `pending` at the upgrade. Neither migration cancelled
-- it, so a database from those releases shipped the goods after the upgrade, and then
-- revoked them. Since 0006 a refund cancels the fulfilment in its own transaction
-- (CANCEL_EFFECT), so on a database written since, no fulfilment beside a revocation is
-- pending or dead, and this changes nothing. The tally follows as TALLY_CANCEL's does.
UPDATE tally SET effects_cancelled = effects_cancelled + x.n,
    effects_dismissed = effects_dismissed - x.dismissed
FROM (SELECT count(*) AS n,
        coalesce(sum(dispatch = 'dead' AND dismissed_at IS NOT NULL), 0) AS dismissed
    FROM effect f
    WHERE f.kind = 'fulfilment' AND f.dispatch IN ('pending', 'dead')
        AND EXISTS (SELECT 1 FROM effect v WHERE v.resource_id = f.resource_id AND v.kind = 'revocation')) AS x
WHERE tally.id = 1 AND x.n > 0;

UPDATE effect SET dispatch = 'cancelled', cancelled_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'),
    next_attempt_at = NULL
WHERE kind = 'fulfilment' AND dispatch IN ('pending', 'dead')
    AND EXISTS (SELECT 1 FROM effect v WHERE v.resource_id = effect.resource_id AND v.kind = 'revocation');
