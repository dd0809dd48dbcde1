#!/usr/bin/env python3
"""Fills a migrated local D1 (Miniflare's SQLite file, before its worker starts) with a
receiver's history: `deliveries` webhook deliveries at `per_day` a day, of a realistic size
(a Paymos envelope of 0.6 to 1 KB), with the rows a real run leaves beside them in realistic
proportions: resources, their history, their effects, ignored and stale copies, a few dead
ones (dismissed when old), counter buckets, health samples, alerts and reconciliation runs.

The history grows with `deliveries`; the working set does not: the last 24 hours hold
`per_day` deliveries at every size, with the same backlog (unprocessed deliveries, pending
effects) and the same dead ones not dismissed. That is the question the growth benchmark
asks: do the health checks read the history, or only the working set?

Rows are inserted with the columns of the receiver's own statements (INSERT_DELIVERY's
shape, then what the consumer's transition batch writes), in one transaction; the kept counts
(`tally`) and the doubled-effects mark are then set from a full count, as migration 0009 does.

usage: growth_fill.py <sqlite file> <deliveries> <per_day> <history|recent> [seed]
`history` writes what is older than 24 hours (the slow part, as long as the size asks);
`recent` the last 24 hours (the same at every size, from a random stream seeded alike, with no
random event within minutes of the health checks' window edges: the last 24 hours, the last
hour and 15 minutes, so that a few seconds more before the measurement change nothing), then
sets the kept counts. Run `recent` just before the worker starts. Prints a JSON summary.
"""
import json
import random
import sqlite3
import sys
import time
from datetime import datetime, timezone

DB, N, PER_DAY, PHASE = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
SEED = int(sys.argv[5]) if len(sys.argv) > 5 else 1
rng = random.Random(SEED)
NOW = time.time()
SPAN = N / PER_DAY * 86400.0  # seconds of history
ALPHANUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
HEX = "0123456789abcdef"


def iso(t):
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + f"{int((t % 1) * 1000):03d}Z"


def minute(t):
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M")


def token(n, alphabet=ALPHANUM):
    return "".join(rng.choice(alphabet) for _ in range(n))


def body(event_id, event_type, created, resource_id, livemode, extra):
    """A Paymos envelope as the provider sends it (interface §1), 0.6 to 1 KB."""
    obj = event_type.split(".")[0]
    data = {
        "id": resource_id,
        "object": obj,
        "status": event_type.split(".")[1],
        "amount": f"{rng.randint(5, 5000)}.{rng.randint(0, 99):02d}",
        "currency": rng.choice(["USDT", "USDC", "BTC", "ETH"]),
        "network": rng.choice(["TRC20", "ERC20", "BEP20", "bitcoin"]),
        "address": "T" + token(33),
        "tx_hash": token(64, HEX),
        "confirmations": rng.randint(0, 40),
        "created": created - rng.randint(0, 600),
        "metadata": {"customer_id": "cus_" + token(14), "plan": rng.choice(["basic", "pro", "team"]), "campaign": token(rng.randint(4, 40))},
        "customer": {"email": token(rng.randint(6, 14)).lower() + "@example.com", "name": token(rng.randint(5, 20))},
        **extra,
    }
    if obj == "invoice":
        data["order_ref"] = extra.get("order_ref", "order_" + token(10))
        data["expires_at"] = created + 3600
        data["description"] = token(rng.randint(10, 160))
    env = {"event_id": event_id, "type": event_type, "created": created, "livemode": livemode, "data": data}
    return json.dumps(env, separators=(",", ":"))


STORIES = [
    # (share, kind, events, effect on the last applied state)
    (0.55, "inv", ["invoice.created", "invoice.confirming", "invoice.paid"], "fulfilment"),
    (0.10, "inv", ["invoice.created", "invoice.expired"], None),
    (0.03, "inv", ["invoice.created", "invoice.paid", "invoice.refunded"], "refund"),
    (0.16, "wdr", ["withdrawal.created", "withdrawal.processing", "withdrawal.completed"], "settlement"),
    (0.16, "pcd", ["deposit.pending", "deposit.confirmed"], "credit"),
]
STATE = {"created": "created", "confirming": "confirming", "paid": "paid", "expired": "expired", "refunded": "refunded",
         "processing": "processing", "completed": "completed", "pending": "pending", "confirmed": "confirmed"}
KIND = {"inv": "invoice", "wdr": "withdrawal", "pcd": "deposit"}


class Gen:
    """Deliveries with the rows a real run leaves beside them, from one random stream."""

    def __init__(self, rng_):
        self.rng = rng_
        self.deliveries, self.resources, self.history, self.effects = [], [], [], []
        self.rid = 0
        self.eff_seq = 0


def generate(g, cur, count, start, span, working):
    """`count` deliveries received from `start` over `span` seconds, at an even rate. With
    `working`, the working set is made there too: unprocessed ones in the last minutes, dead
    ones not dismissed in the last hours, pending and dead effects (the same at every size)."""
    global rng
    rng = g.rng
    UNPROCESSED, OPEN_DEAD = 5, 3
    pending_effects, open_dead_effects = (4, 2) if working else (0, 0)
    working_unprocessed = working_dead = 0
    n = 0
    while n < count:
        g.rid += 1
        share = rng.random()
        acc = 0.0
        for s_, kind, events, effect in STORIES:
            acc += s_
            if share <= acc:
                break
        rid_s = f"{kind}_{g.rid:012d}{token(6)}"
        t0 = start + span * (n / count) + rng.uniform(0, 60)
        t = t0
        order_ref = "order_" + token(10)
        status = None
        last_t = t
        transitions = 0  # the resource numbers its history (migration 0019)
        live = rng.random() > 0.002  # 0.2 % from the other mode: ignored
        if working and t0 < start + 1800:
            live = True  # none near the 24-hour window's edge
        for event_type in events:
            t = min(t + rng.uniform(5, 300), NOW - 0.5)
            copies = 2 if rng.random() < 0.3 else 1  # a second endpoint's copy
            for c in range(copies):
                if n >= count:
                    break
                n += 1
                eid = "evt_" + token(20)
                received = min(t + c * rng.uniform(0.1, 3), NOW - 0.2)
                b = body(eid, event_type, int(t), rid_s, live, {"order_ref": order_ref} if kind == "inv" else {})
                processed = iso(received + rng.uniform(0.05, 0.15))
                outcome, reason = ("applied", None) if c == 0 else ("stale", None)
                etype = event_type
                if not live:
                    outcome, reason = "ignored", "livemode_mismatch"
                elif rng.random() < 0.01:
                    # an event type this receiver does not know: stored and acknowledged
                    outcome, reason, etype = "ignored", "unknown_event_type", "invoice.note_added"
                attempts = 0
                last_error = None
                dismissed_at = dismiss_reason = None
                if not working and live and outcome == "applied" and rng.random() < 0.0001:
                    # an old dead delivery, handled: dismissed (replayable, out of the counts)
                    outcome, attempts, last_error = "dead", 11, "stored body does not parse"
                    dismissed_at, dismiss_reason = iso(received + 3600), "handled by hand"
                if working and live and working_dead < OPEN_DEAD and NOW - received < 3600 * (OPEN_DEAD - working_dead):
                    outcome, attempts, last_error = "dead", 11, "stored body does not parse"
                    working_dead += 1
                enqueued = iso(received)
                if working and NOW - received < 600 and working_unprocessed < UNPROCESSED:
                    # just enqueued (their messages on their way): the sweeper leaves them
                    working_unprocessed += 1
                    processed, outcome, reason, enqueued = None, None, None, iso(NOW)
                g.deliveries.append((eid, rid_s, etype, b, iso(received), processed, outcome, attempts, last_error,
                                     enqueued, 0, reason, 0, dismissed_at, dismiss_reason))
                if outcome == "applied":
                    to = STATE[event_type.split(".")[1]]
                    transitions += 1
                    g.history.append((transitions, rid_s, status, to, "event", eid, processed))
                    status = to
                    last_t = received
        if status is not None:
            g.resources.append((rid_s, KIND[kind], status, order_ref if kind == "inv" else None, iso(t0), iso(last_t),
                                transitions))
        # the effect of the story's last applied state, delivered (the working set aside)
        if status is not None and effect and status in ("paid", "refunded", "completed", "confirmed"):
            ekind = {"fulfilment": "fulfilment", "refund": "fulfilment", "settlement": "settlement", "credit": "credit"}[effect]
            for k in [ekind] + (["revocation"] if effect == "refund" and status == "refunded" else []):
                g.eff_seq += 1
                dispatch, dead_at, dismissed_at = "delivered", None, None
                if pending_effects > 0 and NOW - last_t < 1800:
                    dispatch, pending_effects = "pending", pending_effects - 1
                elif open_dead_effects > 0 and NOW - last_t < 7200:
                    dispatch, open_dead_effects, dead_at = "dead", open_dead_effects - 1, iso(last_t + 600)
                elif not working and rng.random() < 0.0002:
                    dispatch, dead_at, dismissed_at = "dead", iso(last_t + 600), iso(last_t + 7200)
                created = iso(last_t)
                g.effects.append((rid_s, k, token(32) if k == "fulfilment" else None, order_ref if kind == "inv" else None,
                                  "49.00", "USDT", "evt_" + token(20), created, "eff_" + token(32, HEX), dispatch,
                                  1 if dispatch != "pending" else 0, 1 if dispatch != "pending" else 0,
                                  created if dispatch == "delivered" else None, created, created if dispatch != "pending" else None,
                                  dead_at, dismissed_at, "handled by hand" if dismissed_at else None))
        if len(g.deliveries) >= 20000:
            flush(cur, g.deliveries, g.resources, g.history, g.effects)
    flush(cur, g.deliveries, g.resources, g.history, g.effects)


def main():
    conn = sqlite3.connect(DB)
    conn.execute("PRAGMA synchronous = OFF")
    cur = conn.cursor()
    cur.execute("BEGIN")
    # the history before the last 24 hours (its own random stream, as long as the size asks),
    # then the last 24 hours from a stream seeded alike at every size: the same working set
    recent = min(N, PER_DAY)
    old = Gen(random.Random(SEED))
    new = Gen(random.Random(SEED * 7919 + 1))
    new.rid = 10**11  # ids apart from the history's
    if PHASE == "history":
        generate(old, cur, N - recent, NOW - SPAN, SPAN - 86400, working=False)
    else:
        generate(new, cur, recent, NOW - 86400, 86400, working=True)
    eff_seq = int(N * 0.27)  # about what the stories make
    global rng

    # counters, samples, alerts and runs as a receiver running that long keeps them (pruned
    # after 8 days: the counters and samples cover at most the last 8 days)
    kept = min(SPAN, 8 * 86400)
    rows = []
    day_start = NOW - 86400
    spans = [(NOW - kept, day_start, old.rng)] if PHASE == "history" else [(day_start, NOW, new.rng)]
    for (lo, hi, stream) in spans:
        rng = stream
        t = lo - (lo % 60) + (60 if lo % 60 else 0)
        while t < hi:
            age = NOW - t
            # no counter within minutes of the last hour's and the last 15 minutes' edges
            if PHASE == "recent" and (age < 300 or 3300 < age < 3900 or 600 < age < 1200):
                t += 60
                continue
            if rng.random() < 0.2:
                rows.append((minute(t), "refused", "401 signature_mismatch", rng.randint(1, 5)))
            if rng.random() < 0.05:
                rows.append((minute(t), "refused", "400 invalid_json", 1))
            rows.append((minute(t), "signature_verified", "3f1c9a7e", rng.randint(1, 10)))
            t += 60
    rng = old.rng
    cur.executemany("INSERT OR IGNORE INTO request_count (bucket, name, label, count) VALUES (?, ?, ?, ?)", rows)
    if PHASE == "recent":
        cur.execute("INSERT OR REPLACE INTO request_count (bucket, name, label, count) SELECT 'total', name, label, sum(count) FROM request_count WHERE bucket <> 'total' GROUP BY name, label")
    samples = []
    t = NOW - kept if PHASE == "history" else day_start
    while t < (day_start if PHASE == "history" else NOW - 300):
        rng = new.rng if t >= day_start else old.rng
        samples.append((minute(t), rng.randint(0, 3), None, 0, rng.randint(0, 4), int(eff_seq * (1 - (NOW - t) / SPAN)), 0, None))
        t += 300
    rng = old.rng
    cur.executemany("INSERT OR IGNORE INTO health_sample VALUES (?, ?, ?, ?, ?, ?, ?, ?)", samples)
    alerts = []
    for d in range(int(SPAN / 86400 / 2) if PHASE == "history" else 0):
        at = NOW - SPAN + d * 2 * 86400
        alerts.append(("alt_" + token(24, HEX), rng.choice(["deliveries_backlog", "signature_refusals", "effects_backlog"]), "warning",
                       "resolved long ago", rng.randint(1, 50), "resolved", iso(at), iso(at + 1800), iso(at + 1800)))
    cur.executemany("INSERT INTO alert (id, kind, severity, summary, count, state, first_seen, last_seen, resolved_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", alerts)
    runs = []
    for d in range(max(1, int(SPAN / 86400)) if PHASE == "history" else 0):
        at = NOW - SPAN + d * 86400
        runs.append((0, int(at - 7 * 86400), None, 3, 250, "done", iso(at), iso(at + 20), iso(at + 20)))
    cur.executemany("INSERT INTO reconciliation_run (full_walk, paid_since, cursor, pages, checked, state, started_at, updated_at, finished_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", runs)

    if PHASE == "history":
        conn.commit()
        conn.close()
        print(json.dumps({"phase": "history", "deliveries": N - recent}))
        return
    # the kept counts and the doubled-effects mark from a full count, as migration 0009 sets them
    cur.execute("""UPDATE tally SET
        deliveries_applied = (SELECT count(*) FROM webhook_delivery WHERE outcome = 'applied'),
        deliveries_stale = (SELECT count(*) FROM webhook_delivery WHERE outcome = 'stale'),
        deliveries_ignored = (SELECT count(*) FROM webhook_delivery WHERE outcome = 'ignored'),
        deliveries_dismissed = (SELECT count(*) FROM webhook_delivery WHERE outcome = 'dead' AND dismissed_at IS NOT NULL),
        livemode_mismatches = (SELECT count(*) FROM webhook_delivery WHERE reason = 'livemode_mismatch'),
        effects_delivered = (SELECT count(*) FROM effect WHERE dispatch = 'delivered'),
        effects_cancelled = (SELECT count(*) FROM effect WHERE dispatch = 'cancelled'),
        effects_dismissed = (SELECT count(*) FROM effect WHERE dispatch = 'dead' AND dismissed_at IS NOT NULL),
        effects_checked_through = (SELECT coalesce(max(id), 0) FROM effect)
      WHERE id = 1""")
    conn.commit()
    q = lambda sql: conn.execute(sql).fetchone()[0]
    summary = {
        "deliveries": q("SELECT count(*) FROM webhook_delivery"),
        "by_outcome": dict(conn.execute("SELECT coalesce(outcome, 'unprocessed'), count(*) FROM webhook_delivery GROUP BY 1").fetchall()),
        "dead_dismissed": q("SELECT count(*) FROM webhook_delivery WHERE outcome = 'dead' AND dismissed_at IS NOT NULL"),
        "last_24h": q(f"SELECT count(*) FROM webhook_delivery WHERE received_at >= '{iso(NOW - 86400)}'"),
        "resources": q("SELECT count(*) FROM resource"),
        "history_rows": q("SELECT count(*) FROM resource_transition"),
        "effects": dict(conn.execute("SELECT dispatch, count(*) FROM effect GROUP BY 1").fetchall()),
        "request_count_rows": q("SELECT count(*) FROM request_count"),
        "health_samples": q("SELECT count(*) FROM health_sample"),
        "alerts": q("SELECT count(*) FROM alert"),
        "reconciliation_runs": q("SELECT count(*) FROM reconciliation_run"),
        # a body is in its own row since migration 0013 (the move trigger), or in the delivery's
        "body_bytes_avg": q(
            "SELECT avg(length(coalesce(nullif(d.body, ''), b.body))) FROM webhook_delivery d "
            "LEFT JOIN delivery_body b ON b.received_at = d.received_at AND b.event_id = d.event_id"
        ),
        "days_of_history": round(SPAN / 86400, 1),
    }
    conn.close()
    print(json.dumps(summary))


def flush(cur, deliveries, resources, history, effects):
    cur.executemany(
        "INSERT INTO webhook_delivery (event_id, resource_id, event_type, body, received_at, processed_at, outcome, attempts, "
        "last_error, enqueued_at, replays, reason, generation, dismissed_at, dismiss_reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        deliveries,
    )
    cur.executemany(
        "INSERT INTO resource (id, kind, status, order_ref, created_at, updated_at, transitions) VALUES (?, ?, ?, ?, ?, ?, ?)",
        resources,
    )
    cur.executemany(
        "INSERT INTO resource_transition (id, resource_id, from_status, to_status, cause_kind, cause, at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        history,
    )
    cur.executemany(
        "INSERT INTO effect (resource_id, kind, license_code, order_ref, amount, currency, cause, created_at, effect_id, dispatch, "
        "attempts, rung, delivered_at, enqueued_at, first_attempt_at, dead_at, dismissed_at, dismiss_reason) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        effects,
    )
    deliveries.clear()
    resources.clear()
    history.clear()
    effects.clear()


if __name__ == "__main__":
    main()
