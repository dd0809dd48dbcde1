// The queue consumer and the operators' API, per interface §3 and §5: guarded transitions in
// one transaction, exactly-once effects, retries, dead-letter queue, sweeper.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startWorker, eventually, ADMIN_TOKEN } from "./helpers/worker.mjs";
import { deliver, deliverChunked, envelope, randomId, admin } from "./helpers/paymos.mjs";

let w;
before(async () => {
  w = await startWorker();
});
after(async () => {
  await w?.close();
});

const processed = (eventId, ms) => w.processed(eventId, ms);
const effects = async (resourceId, kind) =>
  (await w.db.prepare("SELECT * FROM effect WHERE resource_id = ? AND kind = ? ORDER BY id").bind(resourceId, kind).all()).results;
const resource = async (id) => (await admin(w.url, "GET", `/resources/${id}`)).json;
/** An order system pulls the feed (no ORDER_SYSTEM_URL here): what it is served it may hold. */
const pull = async () => assert.equal((await admin(w.url, "GET", "/effects?dispatch=pending&limit=1000")).status, 200);
/** Delivers and waits for the consumer; returns the delivery's outcome. */
async function send(type, resourceId, opts = {}) {
  const env = envelope(type, resourceId, opts);
  const res = await deliver(w.url, env);
  assert.equal(res.status, 200, res.text);
  return (await processed(env.event_id)).outcome;
}

test("one invoice.paid delivered twice under the same id: one fulfilment", async () => {
  const inv = randomId("inv_");
  const env = envelope("invoice.paid", inv);
  await deliver(w.url, env);
  await processed(env.event_id);
  assert.equal((await deliver(w.url, env)).json.duplicate, true);
  const f = await effects(inv, "fulfilment");
  assert.equal(f.length, 1);
  assert.match(f[0].license_code, /^[0-9A-HJKMNP-TV-Z]{5}(-[0-9A-HJKMNP-TV-Z]{5}){4}-[0-9A-HJKMNP-TV-Z]$/);
  assert.equal(f[0].order_ref, env.data.order_ref);
});

test("the same paid change under two event ids (two endpoints): one fulfilment, the second is stale", async () => {
  const inv = randomId("inv_");
  assert.equal(await send("invoice.paid", inv), "applied");
  assert.equal(await send("invoice.paid", inv), "stale");
  assert.equal((await effects(inv, "fulfilment")).length, 1);
});

test("the same paid change under 10 event ids at once: one fulfilment", async () => {
  const inv = randomId("inv_");
  const envs = Array.from({ length: 10 }, () => envelope("invoice.paid", inv));
  await Promise.all(envs.map((e) => deliver(w.url, e)));
  const outcomes = [];
  for (const e of envs) outcomes.push((await processed(e.event_id)).outcome);
  assert.equal(outcomes.filter((o) => o === "applied").length, 1, JSON.stringify(outcomes));
  assert.equal(outcomes.filter((o) => o === "stale").length, 9);
  assert.equal((await effects(inv, "fulfilment")).length, 1);
  const r = await resource(inv);
  assert.equal(r.history.length, 1);
});

test("invoice.confirming after invoice.paid: stays paid, the late event is stale", async () => {
  const inv = randomId("inv_");
  assert.equal(await send("invoice.paid", inv), "applied");
  assert.equal(await send("invoice.confirming", inv), "stale");
  const r = await resource(inv);
  assert.equal(r.status, "paid");
  assert.deepEqual(
    r.history.map((h) => h.state),
    ["paid"],
  );
});

test("a normal life: created → confirming → paid → refunded; history names each cause", async () => {
  const inv = randomId("inv_");
  const ids = [];
  for (const type of ["invoice.created", "invoice.confirming", "invoice.paid", "invoice.refunded"]) {
    const env = envelope(type, inv);
    ids.push(env.event_id);
    // the fulfilment pulled before the refund: it is revoked
    if (type === "invoice.refunded") await pull();
    await deliver(w.url, env);
    assert.equal((await processed(env.event_id)).outcome, "applied", type);
  }
  const r = await resource(inv);
  assert.equal(r.kind, "invoice");
  assert.equal(r.status, "refunded");
  assert.deepEqual(
    r.history.map((h) => [h.from, h.state, h.cause_kind, h.cause]),
    [
      [null, "created", "event", ids[0]],
      ["created", "confirming", "event", ids[1]],
      ["confirming", "paid", "event", ids[2]],
      ["paid", "refunded", "event", ids[3]],
    ],
  );
  assert.deepEqual(
    r.effects.map((e) => e.kind),
    ["fulfilment", "revocation"],
  );
  const fulfilment = r.effects[0];
  assert.ok(fulfilment.license_code && fulfilment.order_ref && fulfilment.created_at);
});

test("a later event whose order_ref disagrees with the one on record: the first is kept, the disagreement logged", async () => {
  const inv = randomId("inv_");
  const first = envelope("invoice.paid", inv, { data: { order_ref: "order_first_1" } });
  await deliver(w.url, first);
  assert.equal((await processed(first.event_id)).outcome, "applied");
  const other = envelope("invoice.paid", inv, { data: { order_ref: "order_other_2" } });
  await deliver(w.url, other);
  assert.equal((await processed(other.event_id)).outcome, "stale");
  assert.equal((await resource(inv)).order_ref, "order_first_1", "a known order_ref is never overwritten");
  const said = await eventually("the disagreement's log line", () => w.logs.find((l) => l.stage === "consume" && l.event_id === other.event_id && l.outcome === "order_ref_mismatch"));
  assert.match(said.detail, /"order_other_2".*"order_first_1".*kept/);
});

// a receipt's facts over 2 KB stay out of its queue message: the consumer loads the body
test("a delivery whose facts are too long to travel is loaded and applied as any other", async () => {
  const inv = randomId("inv_");
  const orderRef = "order_" + "o".repeat(2100);
  assert.equal(await send("invoice.paid", inv, { data: { order_ref: orderRef } }), "applied");
  assert.equal((await resource(inv)).order_ref, orderRef);
  const [fulfilment] = await effects(inv, "fulfilment");
  assert.equal(fulfilment.order_ref, orderRef);
});

test("refund after fulfilment, delivered twice under two ids: revoked once", async () => {
  const inv = randomId("inv_");
  await send("invoice.paid", inv);
  await pull();
  assert.equal(await send("invoice.refunded", inv), "applied");
  assert.equal(await send("invoice.refunded", inv), "stale");
  assert.equal((await effects(inv, "revocation")).length, 1);
  assert.equal((await effects(inv, "fulfilment")).length, 1);
});

test("a refund for an invoice never seen: refunded, nothing to revoke", async () => {
  const inv = randomId("inv_");
  assert.equal(await send("invoice.refunded", inv), "applied");
  assert.equal((await effects(inv, "revocation")).length, 0);
});

test("late payment: expired → paid fulfils; paid → expired is refused", async () => {
  const inv = randomId("inv_");
  await send("invoice.created", inv);
  assert.equal(await send("invoice.expired", inv), "applied");
  assert.equal(await send("invoice.paid", inv), "applied");
  assert.equal(await send("invoice.expired", inv), "stale");
  assert.equal((await effects(inv, "fulfilment")).length, 1);
  assert.equal((await resource(inv)).status, "paid");
});

test("marked paid by an operator, then invoice.paid replayed: still one fulfilment", async () => {
  const inv = randomId("inv_");
  await send("invoice.created", inv);
  const manual = await admin(w.url, "POST", `/resources/${inv}/transition`, { to: "paid", reason: "customer sent proof of payment" });
  assert.equal(manual.status, 200);
  assert.deepEqual(manual.json, { applied: true, status: "paid" });
  const [fulfilment] = await effects(inv, "fulfilment");
  assert.ok(fulfilment.order_ref, "the fulfilment carries the order_ref known from invoice.created");

  const env = envelope("invoice.paid", inv);
  await deliver(w.url, env);
  assert.equal((await processed(env.event_id)).outcome, "stale");
  // an operator's replay of the same delivery changes nothing either
  const replay = await admin(w.url, "POST", `/deliveries/${env.event_id}/replay`);
  assert.equal(replay.status, 202);
  await eventually("the replay to be processed", async () => (await admin(w.url, "GET", `/deliveries/${env.event_id}`)).json.replays === 1);
  assert.equal((await processed(env.event_id)).outcome, "stale");
  const f = await effects(inv, "fulfilment");
  assert.equal(f.length, 1);
  assert.equal(f[0].license_code, fulfilment.license_code);
  const r = await resource(inv);
  assert.deepEqual(
    r.history.map((h) => [h.state, h.cause_kind, h.cause]),
    [
      ["created", "event", r.history[0].cause],
      ["paid", "manual", "customer sent proof of payment"],
    ],
  );
  // a second manual attempt goes through the same guard, and the refusal is recorded (§3:
  // "anything else is a recorded no-op"): a log line for each manual transition
  const again = await admin(w.url, "POST", `/resources/${inv}/transition`, { to: "paid", reason: "double click" });
  assert.deepEqual(again.json, { applied: false, status: "paid" });
  const recorded = await eventually("the manual transitions' lines", () => {
    const lines = w.logs.filter((l) => l.stage === "manual_transition" && l.detail?.startsWith(`${inv} to paid`));
    return lines.length === 2 && lines;
  });
  assert.deepEqual(recorded.map((l) => l.outcome), ["applied", "stale"]);
  assert.equal(recorded[1].detail, `${inv} to paid: now paid; reason: double click`);
});

test("withdrawal completed twice: one settlement; deposit confirmed twice: one credit", async () => {
  const wdr = randomId("wdr_");
  await send("withdrawal.created", wdr);
  await send("withdrawal.processing", wdr);
  assert.equal(await send("withdrawal.completed", wdr), "applied");
  assert.equal(await send("withdrawal.completed", wdr), "stale");
  assert.equal(await send("withdrawal.failed", wdr), "stale");
  assert.equal((await effects(wdr, "settlement")).length, 1);

  const pcd = randomId("pcd_");
  await send("deposit.pending", pcd);
  assert.equal(await send("deposit.confirmed", pcd), "applied");
  assert.equal(await send("deposit.confirmed", pcd), "stale");
  assert.equal((await effects(pcd, "credit")).length, 1);
  const r = await resource(pcd);
  assert.equal(r.kind, "deposit");
  assert.equal(r.status, "confirmed");
  assert.deepEqual(
    r.effects.map((e) => e.kind),
    ["credit"],
  );
});

test("a second fulfilment is impossible even by hand: the database refuses it", async () => {
  const inv = randomId("inv_");
  await send("invoice.paid", inv);
  await assert.rejects(
    w.db.prepare("INSERT INTO effect (resource_id, kind, license_code, cause) VALUES (?, 'fulfilment', 'X', 'manual sql')").bind(inv).run(),
    /UNIQUE constraint failed/,
  );
});

test("a lost enqueue (row, no message): processed after the sweeper runs", async () => {
  const inv = randomId("inv_");
  const env = envelope("invoice.paid", inv);
  // the row as the receiver commits it, but the queue never heard of it
  await w.db
    .prepare(
      "INSERT INTO webhook_delivery (event_id, resource_id, event_type, body, received_at, enqueued_at) VALUES (?, ?, ?, ?, strftime('%Y-%m-%dT%H:%M:%fZ','now','-10 minutes'), strftime('%Y-%m-%dT%H:%M:%fZ','now','-10 minutes'))",
    )
    .bind(env.event_id, inv, env.type, JSON.stringify(env))
    .run();
  await new Promise((r) => setTimeout(r, 1500));
  const still = await w.db.prepare("SELECT processed_at FROM webhook_delivery WHERE event_id = ?").bind(env.event_id).first();
  assert.equal(still.processed_at, null, "nothing processes it before the sweeper");
  await w.scheduled("*/5 * * * *");
  assert.equal((await processed(env.event_id)).outcome, "applied");
  assert.equal((await effects(inv, "fulfilment")).length, 1);
});

test("the sweeper leaves recent unprocessed rows alone (threshold)", async () => {
  const env = envelope("invoice.paid", randomId("inv_"));
  await w.db
    .prepare(
      "INSERT INTO webhook_delivery (event_id, resource_id, event_type, body, enqueued_at) VALUES (?, ?, ?, ?, strftime('%Y-%m-%dT%H:%M:%fZ','now'))",
    )
    .bind(env.event_id, env.data.id, env.type, JSON.stringify(env))
    .run();
  await w.scheduled("*/5 * * * *");
  await new Promise((r) => setTimeout(r, 2500));
  const row = await w.db.prepare("SELECT processed_at FROM webhook_delivery WHERE event_id = ?").bind(env.event_id).first();
  assert.equal(row.processed_at, null);
});

/** A delivery on record whose stored body the consumer cannot process (valid JSON, no longer a valid envelope). */
async function unprocessable() {
  const inv = randomId("inv_");
  const env = envelope("invoice.paid", inv);
  const broken = JSON.stringify({ event_id: env.event_id, type: "invoice.paid" });
  await w.db
    .prepare("INSERT INTO webhook_delivery (event_id, resource_id, event_type, body) VALUES (?, ?, ?, ?)")
    .bind(env.event_id, inv, env.type, broken)
    .run();
  return { inv, env };
}

test("a delivery whose processing fails every time: retried, dead-lettered, marked dead, replayable once fixed", async () => {
  const { inv, env } = await unprocessable();
  const replay = await admin(w.url, "POST", `/deliveries/${env.event_id}/replay`);
  assert.equal(replay.status, 202);
  assert.equal(replay.json.enqueued, true);
  const dead = await processed(env.event_id, 60000);
  assert.equal(dead.outcome, "dead");
  assert.equal(dead.attempts, 11, "the first try and max_retries = 10 retries, each failure recorded");
  assert.match(dead.last_error, /stored body does not parse/);
  const listed = await admin(w.url, "GET", `/deliveries?status=dead&resource_id=${inv}`);
  assert.deepEqual(
    listed.json.data.map((d) => [d.event_id, d.status]),
    [[env.event_id, "dead"]],
  );
  // retries grew: each retry line names its delay (base 0 in tests, so all 0 here; the ladder itself is unit-tested)
  assert.equal(w.logs.filter((l) => l.stage === "consume" && l.event_id === env.event_id && l.outcome === "retry").length, 11);
  assert.equal((await effects(inv, "fulfilment")).length, 0);

  // fixed (the body restored), then replayed by an operator
  await w.db.prepare("UPDATE webhook_delivery SET body = ? WHERE event_id = ?").bind(JSON.stringify(env), env.event_id).run();
  assert.equal((await admin(w.url, "POST", `/deliveries/${env.event_id}/replay`)).status, 202);
  const fixed = await processed(env.event_id);
  assert.equal(fixed.outcome, "applied");
  assert.equal(fixed.last_error, null);
  assert.equal((await effects(inv, "fulfilment")).length, 1);
});

test("a delivery received by POST that keeps failing goes dead by its own message (generation 0), with no sweeper", async () => {
  // PAYMOS_MODE that is neither live nor test: the consumer refuses to decide, every attempt
  // fails and is recorded; the dead-letter consumer marks dead the generation the receive
  // path's message names, which must be the row's own
  const bad = await startWorker({ vars: { PAYMOS_MODE: "staging" } });
  try {
    const env = envelope("invoice.paid", randomId("inv_"));
    assert.equal((await deliver(bad.url, env)).status, 200);
    const dead = await bad.processed(env.event_id, 60000);
    assert.deepEqual([dead.outcome, dead.generation, dead.attempts], ["dead", 0, 11]);
    assert.ok(bad.logs.some((l) => l.stage === "dead_letter" && l.event_id === env.event_id && l.outcome === "dead"));
  } finally {
    await bad.close();
  }
});

// §5/§3: a bulk replay resets each delivery to a new generation and enqueues it for that
// generation, as a single replay does: one that keeps failing has each failure recorded and
// goes dead, rather than being retried under a generation that is no longer the row's
test("a bulk-replayed delivery that keeps failing: its failures recorded, marked dead", async () => {
  const { inv, env } = await unprocessable();
  const bulk = await admin(w.url, "POST", "/deliveries/replay", { resource_id: inv });
  assert.equal(bulk.status, 200, JSON.stringify(bulk.json));
  assert.deepEqual([bulk.json.matched, bulk.json.enqueued], [1, 1]);
  const dead = await processed(env.event_id, 60000);
  assert.deepEqual([dead.outcome, dead.attempts], ["dead", 11]);
  assert.match(dead.last_error, /stored body does not parse/);
});

// ---------------------------------------------------------------- operators' API

test("admin: no token or a wrong one is 401; every answer is no-store", async () => {
  for (const token of ["", "wrong-token", ADMIN_TOKEN + "x", ADMIN_TOKEN.slice(0, -1)]) {
    const r = await admin(w.url, "GET", "/deliveries", undefined, token);
    assert.equal(r.status, 401, token);
    assert.deepEqual(r.json, { error: "unauthorized" });
  }
  const ok = await admin(w.url, "GET", "/deliveries");
  assert.equal(ok.status, 200);
  assert.equal(ok.headers.get("cache-control"), "no-store");
  const raw = await fetch(`${w.url}/admin/api/deliveries`, { headers: { authorization: `Basic ${ADMIN_TOKEN}` } });
  assert.equal(raw.status, 401);
  // the scheme's name is case-insensitive, the token is not
  for (const [auth, status] of [[`bearer ${ADMIN_TOKEN}`, 200], [`BEARER ${ADMIN_TOKEN}`, 200], [`Bearer ${ADMIN_TOKEN.toUpperCase()}`, 401], [`Bearer  ${ADMIN_TOKEN}`, 401]]) {
    const res = await fetch(`${w.url}/admin/api/deliveries?limit=1`, { headers: { authorization: auth } });
    assert.equal(res.status, status, auth);
    await res.arrayBuffer();
  }
});

test("admin: cross-site writes are refused even with the token", async () => {
  const inv = randomId("inv_");
  const res = await fetch(`${w.url}/admin/api/resources/${inv}/transition`, {
    method: "POST",
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "sec-fetch-site": "cross-site", "content-type": "application/json" },
    body: JSON.stringify({ to: "paid", reason: "csrf" }),
  });
  assert.equal(res.status, 403);
  assert.equal((await admin(w.url, "GET", `/resources/${inv}`)).status, 404);
});

test("admin: unknown delivery or resource is 404; bad transition input is 400", async () => {
  assert.equal((await admin(w.url, "GET", `/deliveries/${randomId("evt_")}`)).status, 404);
  assert.equal((await admin(w.url, "GET", `/resources/${randomId("inv_")}`)).status, 404);
  assert.equal((await admin(w.url, "POST", `/deliveries/${randomId("evt_")}/replay`)).status, 404);
  const inv = randomId("inv_");
  const badState = await admin(w.url, "POST", `/resources/${inv}/transition`, { to: "shipped", reason: "x" });
  assert.equal(badState.status, 400);
  assert.equal(badState.json.error, "invalid_state");
  const noReason = await admin(w.url, "POST", `/resources/${inv}/transition`, { to: "paid", reason: " " });
  assert.equal(noReason.json.error, "invalid_reason");
  const badId = await admin(w.url, "POST", `/resources/cus_123/transition`, { to: "paid", reason: "x" });
  assert.equal(badId.json.error, "invalid_resource_id");
  const notJson = await fetch(`${w.url}/admin/api/resources/${inv}/transition`, {
    method: "POST",
    headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
    body: "{",
  });
  assert.equal(notJson.status, 400);
  assert.equal((await admin(w.url, "GET", `/resources/${inv}`)).status, 404, "nothing was created");
  assert.equal((await admin(w.url, "DELETE", `/deliveries`)).status, 405);
});

test("admin: a delivery's detail has the contract's fields and its body", async () => {
  const inv = randomId("inv_");
  const env = envelope("invoice.paid", inv);
  await deliver(w.url, env);
  await processed(env.event_id);
  const d = (await admin(w.url, "GET", `/deliveries/${env.event_id}`)).json;
  assert.equal(d.event_id, env.event_id);
  assert.equal(d.resource_id, inv);
  assert.equal(d.event_type, "invoice.paid");
  assert.ok(d.received_at && d.processed_at);
  assert.equal(d.outcome, "applied");
  assert.equal(d.status, "processed");
  assert.deepEqual(d.body, env);
});

test("admin: newest first, cursor paging past 100 rows, filters", async () => {
  const inv = randomId("inv_");
  // 150 rows with distinct received_at, inserted directly (fast), newest = i = 149
  const stmts = [];
  for (let i = 0; i < 150; i++) {
    const e = envelope(i % 3 === 0 ? "invoice.confirming" : "invoice.partially_paid", inv);
    stmts.push(
      w.db
        .prepare(
          "INSERT INTO webhook_delivery (event_id, resource_id, event_type, body, received_at, processed_at, outcome) VALUES (?, ?, ?, ?, ?, ?, 'stale')",
        )
        .bind(e.event_id, inv, e.type, JSON.stringify(e), new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString(), new Date().toISOString()),
    );
  }
  await w.db.batch(stmts);
  const seen = [];
  let cursor;
  let pages = 0;
  do {
    const q = new URLSearchParams({ resource_id: inv, limit: "40", ...(cursor ? { cursor } : {}) });
    const page = (await admin(w.url, "GET", `/deliveries?${q}`)).json;
    seen.push(...page.data);
    cursor = page.next_cursor;
    assert.equal(page.has_more, Boolean(cursor));
    pages++;
  } while (cursor);
  assert.equal(pages, 4);
  assert.equal(seen.length, 150);
  assert.equal(new Set(seen.map((d) => d.event_id)).size, 150);
  const times = seen.map((d) => d.received_at);
  assert.deepEqual(times, [...times].sort().reverse(), "newest first");

  const big = (await admin(w.url, "GET", `/deliveries?resource_id=${inv}&limit=150`)).json;
  assert.equal(big.data.length, 150, "a page may hold more than 100 rows");
  assert.equal(big.has_more, false);

  const confirming = (await admin(w.url, "GET", `/deliveries?resource_id=${inv}&type=invoice.confirming&limit=1000`)).json;
  assert.equal(confirming.data.length, 50);
  assert.ok(confirming.data.every((d) => d.event_type === "invoice.confirming"));
  const stale = (await admin(w.url, "GET", `/deliveries?resource_id=${inv}&status=stale&limit=1000`)).json;
  assert.equal(stale.data.length, 150);
  const dead = (await admin(w.url, "GET", `/deliveries?resource_id=${inv}&status=dead`)).json;
  assert.equal(dead.data.length, 0);
  // not processed yet, in any of its three words: one delivery of this resource left so
  await w.db.prepare("UPDATE webhook_delivery SET processed_at = NULL, outcome = NULL WHERE event_id = ?").bind(stale.data[0].event_id).run();
  for (const word of ["received", "unprocessed", "pending"]) {
    const waiting = (await admin(w.url, "GET", `/deliveries?resource_id=${inv}&status=${word}`)).json;
    assert.deepEqual(waiting.data.map((d) => d.event_id), [stale.data[0].event_id], word);
  }

  // a cursor this API did not give out is refused, not read as the top of the list
  for (const bad of ["status=nope", "limit=0", "limit=5000", "limit=", "cursor=garbage", "cursor=zzz~evt_a", `cursor=2026-02-30T00:00:00.000Z~evt_a`]) {
    const r = await admin(w.url, "GET", `/deliveries?${bad}`);
    assert.equal(r.status, 400, bad);
    if (bad.startsWith("cursor")) assert.equal(r.json.error, "invalid_cursor", bad);
    if (bad.startsWith("limit")) assert.equal(r.json.error, "invalid_limit", bad);
  }
  // an empty filter filters nothing; an empty limit is no number (the OpenAPI document's integer)
  assert.equal((await admin(w.url, "GET", `/deliveries?resource_id=${inv}&status=&type=`)).status, 200);
});

test("admin off when ADMIN_TOKEN is unset: 404 everywhere under /admin", async () => {
  const off = await startWorker({ vars: { ADMIN_TOKEN: "" } });
  try {
    for (const token of [ADMIN_TOKEN, ""]) {
      const r = await admin(off.url, "GET", "/deliveries", undefined, token);
      assert.equal(r.status, 404);
    }
  } finally {
    await off.close();
  }
});

test("a queue message that is not ours is dropped without holding back the batch", async () => {
  const queue = await w.mf.getQueueProducer("DELIVERIES");
  const env = envelope("invoice.paid", randomId("inv_"));
  await w.db
    .prepare("INSERT INTO webhook_delivery (event_id, resource_id, event_type, body) VALUES (?, ?, ?, ?)")
    .bind(env.event_id, env.data.id, env.type, JSON.stringify(env))
    .run();
  const before = w.logs.filter((l) => l.outcome === "unreadable_message").length;
  await queue.sendBatch([{ body: { garbage: true } }, { body: { event_id: "evt_../x" } }, { body: "text" }, { body: { event_id: env.event_id } }]);
  assert.equal((await processed(env.event_id)).outcome, "applied");
  await eventually("the three unreadable messages to be logged", () => w.logs.filter((l) => l.outcome === "unreadable_message").length - before === 3);
  // acknowledged, not retried: retrying cannot make them readable (a retry is seen again in 1 s)
  await new Promise((r) => setTimeout(r, 3000));
  assert.equal(w.logs.filter((l) => l.outcome === "unreadable_message").length - before, 3, "each unreadable message seen once");
});

// §3.1 and §5: what goes on the deliveries queue is `{event_id, generation}` whichever path
// sent it (the JS driver, the wasm's fast path for a large body, its general path for a chunked
// one), and a receipt's also carries its envelope's facts (what the consumer decides from, so
// that it loads nothing before its transaction), unless they are too long to travel (over 2 KB:
// the consumer then loads the body). A replay's message carries its new generation, so that an
// old generation's dead letter never marks the replayed delivery dead, and no facts. Read by a
// probe consuming in our consumer's place.
test("every path sends {event_id, generation} and the receipt's facts on the queue; a replay sends its new generation", async () => {
  const probe = {
    name: "probe",
    modules: true,
    compatibilityDate: "2025-09-23",
    queueConsumers: { "paymos-deliveries": { maxBatchTimeout: 0 } },
    script: `export default {
      async queue(batch) {
        for (const m of batch.messages) console.log(JSON.stringify({ stage: "probe", body: m.body }));
        batch.ackAll();
      },
    };`,
  };
  const p = await startWorker({ patch: (o) => delete o.queueConsumers["paymos-deliveries"], otherWorkers: [probe] });
  try {
    const small = envelope("invoice.paid", randomId("inv_"));
    const large = envelope("invoice.paid", randomId("inv_"), { data: { note: "x".repeat(9000) } });
    const chunked = envelope("invoice.paid", randomId("inv_"));
    // blank facts are none given; an unknown type and a live one travel as they are (the
    // consumer ignores them)
    const blank = envelope("invoice.created", randomId("inv_"), { data: { order_ref: " ", amount: 49, currency: null } });
    const unknown = envelope("invoice.sent", randomId("inv_"), { data: { order_ref: "o\n\"é" } });
    const live = { ...envelope("invoice.paid", randomId("inv_")), livemode: true };
    const tooLong = envelope("invoice.paid", randomId("inv_"), { data: { order_ref: "o".repeat(2100) } });
    for (const env of [small, large, blank, unknown, live, tooLong]) assert.equal((await deliver(p.url, env)).status, 200);
    assert.equal((await deliverChunked(p.url, chunked)).status, 200);
    const sent = (id) => p.logs.filter((l) => l.stage === "probe" && l.body?.event_id === id).map((l) => l.body);
    const facts = (env, given) => ({ type: env.type, resource_id: env.data.id, livemode: false, ...given });
    const invoice = (env) => facts(env, { order_ref: env.data.order_ref, amount: "49.00", currency: "USDT" });
    for (const [env, expected] of [
      [small, invoice(small)],
      [large, invoice(large)],
      [chunked, invoice(chunked)],
      [blank, facts(blank, {})],
      [unknown, facts(unknown, { order_ref: "o\n\"é", amount: "49.00", currency: "USDT" })],
      [live, { ...invoice(live), livemode: true }],
      [tooLong, undefined],
    ]) {
      const bodies = await eventually(`${env.event_id}'s message`, () => (sent(env.event_id).length ? sent(env.event_id) : null));
      const message = { event_id: env.event_id, generation: 0, ...(expected ? { facts: expected } : {}) };
      assert.deepEqual(bodies, [message], env.type);
    }
    const replay = await admin(p.url, "POST", `/deliveries/${small.event_id}/replay`);
    assert.equal(replay.status, 202, JSON.stringify(replay.json));
    await eventually("the replay's message", () => sent(small.event_id).length === 2);
    assert.deepEqual(sent(small.event_id)[1], { event_id: small.event_id, generation: replay.json.generation });
  } finally {
    await p.close();
  }
});
