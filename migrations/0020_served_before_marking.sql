-- Pending effects an order system may already hold count as attempted (issue: a refund in pull
-- mode revokes what the feed served).
--
-- Until this release, a refund in pull mode (no ORDER_SYSTEM_URL) revoked any pending
-- fulfilment with its order_ref, since the feed offered it. From this release the feed marks
-- what it serves (`attempts = 1`, MARK_SERVED) and a refund revokes only what is marked,
-- delivered or attempted. The effects the feed served before this release carry no mark, and
-- an order system that pages by cursor never reads them again: marked here, they keep the
-- revocation they had. In push mode the same rows are effects not yet attempted; marking them
-- can only add a revocation, which an order system answers 2xx and ships nothing for (§3).
UPDATE effect SET attempts = 1
 WHERE dispatch = 'pending' AND attempts = 0
   AND (kind <> 'fulfilment' OR order_ref IS NOT NULL);
