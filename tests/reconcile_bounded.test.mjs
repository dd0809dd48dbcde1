// Reconciliation is bounded and honest (interface §6): a stuck cursor ends the
// run truncated, an invoice is never listed twice, the cursor is URL-encoded, daily runs
// look back 7 days with paid_since, a walk larger than one invocation's budget continues in
// the next cron invocation, a provider failing part-way still reports what was checked, and
// an invoice.paid that was not processed applied or stale (dead, ignored) is missing; a
// provider listing newest first with random ids; a cursor asked twice; one walk at a time.
import { test, before, after, beforeEach } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { startWorker, eventually } from "./helpers/worker.mjs";
import { deliver, envelope, randomId, admin } from "./helpers/paymos.mjs";

const API_KEY = "sk_test_sandbox";
/** The provider: paid invoices in id order, 100 a page, with switchable faults. */
const provider = { invoices: [], mode: "normal", failAfterPages: Infinity, served: 0, requests: [] };
let server;
let providerUrl;

function page(url) {
  const limit = Math.min(Number(url.searchParams.get("limit") ?? 100), 100);
  const after = url.searchParams.get("starting_after");
  const since = url.searchParams.get("paid_since");
  // in id order; "counter": ordered by an unpadded number (inv_9, inv_10, …), as a provider
  // with sequential ids lists them
  const order = provider.mode === "counter" ? (a, b) => Number(a.id.slice(4)) - Number(b.id.slice(4)) : (a, b) => (a.id < b.id ? -1 : 1);
  const sorted = provider.invoices.filter((i) => since === null || i.paid_at >= Number(since)).sort(order);
  let from = after ? sorted.findIndex((i) => i.id !== after && order(i, { id: after }) > 0) : 0;
  if (provider.mode === "stuck") from = 0; // ignores starting_after: the same first page for ever
  if (provider.mode === "overlap" && after) from = sorted.findIndex((i) => i.id >= after); // repeats the cursor's invoice
  if (provider.mode === "newest_first") {
    // by paid_at, newest first; starting_after is a position in that list, not an id order
    const listed = provider.invoices.filter((i) => since === null || i.paid_at >= Number(since)).sort((a, b) => b.paid_at - a.paid_at);
    const start = after ? listed.findIndex((i) => i.id === after) + 1 : 0;
    return { data: listed.slice(start, start + limit), has_more: start + limit < listed.length };
  }
  const data = from < 0 ? [] : sorted.slice(from, from + limit);
  if (provider.mode === "echo" && after) {
    // a broken provider: each page ends with the cursor it was given
    return { data: [...data.slice(0, limit - 1), sorted.find((i) => i.id === after)], has_more: true };
  }
  return { data, has_more: from >= 0 && from + limit < sorted.length };
}

before(async () => {
  server = createServer((req, res) => {
    const url = new URL(req.url, "http://x");
    provider.requests.push({ query: Object.fromEntries(url.searchParams), keys: [...url.searchParams.keys()] });
    if (req.headers.authorization !== `Bearer ${API_KEY}`) return res.writeHead(401).end();
    provider.served += 1;
    if (provider.served > provider.failAfterPages) return res.writeHead(500).end('{"error":"boom"}');
    // its headers and the start of a page, then nothing (the connection stays open)
    if (provider.mode === "stall") return res.writeHead(200, { "content-type": "application/json" }).write('{"data":[');
    // a page of 2 MB
    if (provider.mode === "huge") return res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ data: [], has_more: false, pad: "x".repeat(2 << 20) }));
    let body = page(url);
    if (provider.mode === "junk_cursor" && !url.searchParams.get("starting_after")) {
      // a last id with characters that must be encoded (not an invoice id: not checked)
      body = { data: [...body.data, { id: "inv_a&b=c d", object: "invoice", status: "paid" }], has_more: true };
    }
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(body));
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  providerUrl = `http://127.0.0.1:${server.address().port}`;
});
after(() => server?.close());
beforeEach(() => {
  Object.assign(provider, { invoices: [], mode: "normal", failAfterPages: Infinity, served: 0, requests: [] });
});

const now = () => Math.floor(Date.now() / 1000);
const invoice = (id, paidAt = now() - 3600) => ({ id, object: "invoice", status: "paid", amount: "10.00", currency: "USDT", order_ref: `order_${id.slice(4)}`, paid_at: paidAt });
const ids = (n) => Array.from({ length: n }, () => randomId("inv_"));

async function withWorker(vars, fn) {
  const w = await startWorker({ vars: { PAYMOS_API_BASE: providerUrl, PAYMOS_API_KEY: API_KEY, ...vars } });
  try {
    return await fn(w);
  } finally {
    await w.close();
  }
}

test("a stuck cursor ends the run truncated after one repeated page; no invoice is listed twice", async () => {
  const lost = ids(150);
  provider.invoices = lost.map((id) => invoice(id));
  provider.mode = "stuck";
  await withWorker({}, async (w) => {
    const r = await admin(w.url, "POST", "/reconcile", { full: true });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.equal(r.json.truncated, true);
    assert.equal(r.json.ok, false);
    assert.equal(r.json.continues, false, "a stuck walk is over, not to be continued");
    assert.match(r.json.error, /cursor/);
    assert.equal(provider.served, 2, "the repeated page is noticed at once, not after 1,000 calls");
    assert.equal(r.json.checked, 100);
    const listed = r.json.missing.map((m) => m.id);
    assert.equal(new Set(listed).size, listed.length, "no id twice");
    assert.equal(listed.length, 100);
    for (const m of r.json.missing) assert.deepEqual(Object.keys(m).sort(), ["brought_to_paid", "id", "order_ref", "status"]);
  });
});

test("a provider listing by an unpadded counter (inv_99, then inv_100 …) is walked to the end, not taken for a stuck cursor", async () => {
  const lost = Array.from({ length: 250 }, (_, i) => `inv_${i}`);
  provider.invoices = lost.map((id) => invoice(id));
  provider.mode = "counter";
  await withWorker({}, async (w) => {
    const r = await admin(w.url, "POST", "/reconcile", { full: true });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.equal(r.json.truncated, false, JSON.stringify(r.json.error));
    assert.equal(r.json.checked, 250);
    assert.equal(r.json.pages, 3);
    assert.deepEqual(r.json.missing.map((m) => m.id).sort(), [...lost].sort());
  });
});

test("pages that repeat the cursor's invoice: it is checked and listed once", async () => {
  const lost = ids(250);
  provider.invoices = lost.map((id) => invoice(id));
  provider.mode = "overlap";
  await withWorker({}, async (w) => {
    const r = await admin(w.url, "POST", "/reconcile", { full: true });
    assert.equal(r.status, 200);
    const listed = r.json.missing.map((m) => m.id);
    assert.equal(new Set(listed).size, listed.length, "no id twice");
    assert.deepEqual([...listed].sort(), [...lost].sort());
    assert.equal(r.json.truncated, false);
    assert.equal((await w.db.prepare("SELECT count(*) AS n FROM effect").first()).n, 250, "one fulfilment each");
  });
});

test("starting_after is URL-encoded", async () => {
  provider.invoices = ids(3).map((id) => invoice(id));
  provider.mode = "junk_cursor";
  await withWorker({}, async (w) => {
    await admin(w.url, "POST", "/reconcile", { full: true });
    const second = provider.requests[1];
    assert.equal(second.query.starting_after, "inv_a&b=c d", "decoded back to the id as given");
    assert.deepEqual(second.keys.filter((k) => !["status", "limit", "starting_after"].includes(k)), [], "no parameter smuggled in");
  });
});

test("daily and default runs look back 7 days with paid_since; {full:true} walks everything", async () => {
  const recent = randomId("inv_");
  const old = randomId("inv_");
  provider.invoices = [invoice(recent, now() - 2 * 86400), invoice(old, now() - 30 * 86400)];
  await withWorker({}, async (w) => {
    const r = await admin(w.url, "POST", "/reconcile");
    const since = Number(provider.requests[0].query.paid_since);
    assert.ok(Math.abs(since - (now() - 7 * 86400)) < 120, `paid_since ${since}`);
    assert.deepEqual(r.json.missing.map((m) => m.id), [recent]);
    assert.equal(r.json.full, false);

    provider.requests = [];
    await w.scheduled("17 3 * * *");
    assert.ok(provider.requests[0].query.paid_since, "the daily cron uses paid_since");

    provider.requests = [];
    const full = await admin(w.url, "POST", "/reconcile", { full: true });
    assert.equal(provider.requests[0].query.paid_since, undefined);
    assert.deepEqual(full.json.missing.map((m) => m.id).sort(), [recent, old].sort());
    assert.equal((await admin(w.url, "POST", "/reconcile", { full: "yes" })).status, 400);
    // an array is not the object the OpenAPI document describes, and starts no run
    provider.requests = [];
    for (const body of [[], [true]]) {
      const r = await admin(w.url, "POST", "/reconcile", body);
      assert.deepEqual([r.status, r.json.error], [400, "invalid_json"], JSON.stringify(body));
    }
    assert.equal(provider.requests.length, 0, "no run started");
  });
});

test("a walk larger than one invocation's budget continues in later cron invocations, each within budget", async () => {
  const lost = ids(1000);
  provider.invoices = lost.map((id) => invoice(id));
  // 200 operations per invocation: the cron gives reconciliation 58 (paymos_core::actors::cron),
  // two for each invoice brought to paid (its transition and the send of its fulfilment)
  await withWorker({ INVOCATION_BUDGET: "200" }, async (w) => {
    const first = await admin(w.url, "POST", "/reconcile", { full: true });
    assert.equal(first.status, 200);
    assert.equal(first.json.truncated, true);
    assert.equal(first.json.continues, true);
    assert.equal(first.json.ok, false);
    assert.ok(first.json.checked >= 1 && first.json.checked < 1000, `checked ${first.json.checked}`);
    assert.ok(first.json.missing.length === first.json.checked, "what was checked is reported");
    // one page = one fetch + a lookup + a progress write + a transition and a send per missing
    // invoice: 100 missing invoices a page cannot fit in 200, so pages are split at an invoice
    let invocations = 1;
    const perInvocation = [provider.served];
    for (;;) {
      const before = provider.served;
      await w.scheduled("*/5 * * * *");
      invocations += 1;
      perInvocation.push(provider.served - before);
      const latest = (await admin(w.url, "GET", "/reconcile")).json;
      if (invocations === 2 && latest.state === "running") {
        // truncated so far, not silent (interface §9): the cron that continued it raised the alert
        const alert = (await admin(w.url, "GET", "/alerts")).json.data.find((x) => x.kind === "reconciliation");
        assert.equal(alert?.state, "open", JSON.stringify(alert));
        assert.match(alert.summary, /^reconciliation running: \d+ missing.*continued by the cron/);
      }
      if (latest.state !== "running") break;
      assert.ok(invocations < 400, "the walk ends");
    }
    // the provider calls of each invocation stay within its budget (30 for a cron's share)
    assert.ok(perInvocation.every((n) => n >= 1 && n <= 30), JSON.stringify(perInvocation));
    assert.ok(invocations > 10, "the walk really was split across invocations");
    const done = (await admin(w.url, "GET", "/reconcile")).json;
    assert.equal(done.state, "done");
    assert.equal(done.truncated, false);
    assert.equal(done.checked, 1000);
    // finished, with 1,000 invoices that had been missing: the same alert, now the whole run's
    const alerts = (await admin(w.url, "GET", "/alerts")).json.data.filter((x) => x.kind === "reconciliation");
    assert.equal(alerts.length, 1);
    assert.match(alerts[0].summary, /^reconciliation done: 1000 missing/);
    assert.ok(done.pages >= 10, `pages ${done.pages}: split pages are fetched again from the invoice reached`);
    const listed = done.missing.map((m) => m.id);
    assert.equal(new Set(listed).size, 1000);
    assert.equal(done.missing_count, 1000);
    // the metrics' copy lists the first 100 (in report order) and counts them all
    const m = (await admin(w.url, "GET", "/metrics")).json.reconciliation;
    assert.equal(m.missing_count, 1000);
    assert.deepEqual(m.missing, done.missing.slice(0, 100));
    const text = await (await fetch(`${w.url}/admin/api/metrics?format=prometheus`, { headers: { authorization: "Bearer test-admin-token-0123456789" } })).text();
    assert.match(text, /^paymos_reconciliation_last_missing 1000$/m);
    assert.ok(done.missing.every((m) => m.brought_to_paid));
    assert.equal((await w.db.prepare("SELECT count(*) AS n FROM effect WHERE kind = 'fulfilment'").first()).n, 1000);
  });
});

test("the smallest INVOCATION_BUDGET still moves a walk forward at every cron run", async () => {
  const lost = ids(4);
  provider.invoices = lost.map((id) => invoice(id));
  // 10, the least the setting takes: the cron's share for reconciliation is smaller than a
  // page's fetch, lookup, one transition and record; each run still brings one invoice to paid
  await withWorker({ INVOCATION_BUDGET: "10" }, async (w) => {
    const first = await admin(w.url, "POST", "/reconcile", { full: true });
    assert.equal(first.status, 200);
    assert.equal(first.json.continues, true);
    let crons = 0;
    while ((await admin(w.url, "GET", "/reconcile")).json.state === "running") {
      const before = provider.served;
      await w.scheduled("*/5 * * * *");
      crons += 1;
      assert.equal(provider.served, before + 1, `cron run ${crons} fetched a page`);
      assert.ok(crons < 10, "the walk ends");
    }
    const done = (await admin(w.url, "GET", "/reconcile")).json;
    assert.equal(done.state, "done");
    assert.deepEqual(done.missing.map((m) => m.id).sort(), [...lost].sort());
    assert.ok(done.missing.every((m) => m.brought_to_paid));
  });
});

test("a provider that stalls after its headers, or answers 2 MB, fails the call within the 10 s timeout; the cron goes on", async () => {
  provider.invoices = ids(5).map((id) => invoice(id));
  await withWorker({}, async (w) => {
    provider.mode = "stall";
    const t0 = Date.now();
    const r = await admin(w.url, "POST", "/reconcile", { full: true });
    assert.equal(r.status, 502, JSON.stringify(r.json));
    assert.equal(r.json.error, "provider_api_error");
    assert.match(JSON.stringify(r.json), /did not answer within 10000 ms/);
    assert.ok(Date.now() - t0 < 20000, `${Date.now() - t0} ms`);
    // the lease is let go: the next run is not refused as running; the daily cron reaches
    // the steps after reconciliation (its sweep line)
    provider.mode = "huge";
    const big = await admin(w.url, "POST", "/reconcile", { full: true });
    assert.equal(big.status, 502, JSON.stringify(big.json));
    assert.match(JSON.stringify(big.json), /more than 1048576 bytes/);
    provider.mode = "stall";
    await w.scheduled("17 3 * * *");
    assert.ok(w.logs.some((l) => l.stage === "sweep" && /^requeued/.test(l.outcome)), "the sweeper ran after the stalled page");
  });
  provider.mode = "normal";
});

test("the provider failing part-way: truncated, with what was checked", async () => {
  provider.invoices = ids(250).map((id) => invoice(id));
  provider.failAfterPages = 1;
  await withWorker({}, async (w) => {
    const r = await admin(w.url, "POST", "/reconcile", { full: true });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.equal(r.json.truncated, true);
    assert.equal(r.json.ok, false);
    assert.equal(r.json.checked, 100);
    assert.equal(r.json.pages, 1);
    assert.match(r.json.error, /500/);
  });
});

test("an invoice.paid on record counts only if applied or stale: a dead one and an ignored one are missing, brought to paid", async () => {
  const dead = randomId("inv_");
  const ignored = randomId("inv_");
  const applied = randomId("inv_");
  provider.invoices = [invoice(dead), invoice(ignored), invoice(applied)];
  await withWorker({}, async (w) => {
    const insert = (inv, outcome, reason = null) => {
      const env = envelope("invoice.paid", inv);
      return w.db
        .prepare("INSERT INTO webhook_delivery (event_id, resource_id, event_type, body, processed_at, outcome, reason) VALUES (?, ?, ?, ?, strftime('%Y-%m-%dT%H:%M:%fZ','now'), ?, ?)")
        .bind(env.event_id, inv, env.type, JSON.stringify(env), outcome, reason)
        .run()
        .then(() => env);
    };
    const deadEnv = await insert(dead, "dead");
    await insert(ignored, "ignored", "livemode_mismatch");
    const paid = envelope("invoice.paid", applied);
    await deliver(w.url, paid);
    assert.equal((await w.processed(paid.event_id)).outcome, "applied");
    const r = await admin(w.url, "POST", "/reconcile");
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.deepEqual(
      r.json.missing.map((m) => m.id).sort(),
      [dead, ignored].sort(),
      "the applied one is on record; the dead and the ignored did not bring their invoice to paid",
    );
    assert.ok(r.json.missing.every((m) => m.brought_to_paid === true && m.status === "paid"));
    assert.deepEqual(Object.keys(r.json.missing[0]).sort(), ["brought_to_paid", "id", "order_ref", "status"]);
    assert.equal(r.json.ok, false);
    // the dead delivery replayed later changes nothing twice: stale, one fulfilment
    await admin(w.url, "POST", `/deliveries/${deadEnv.event_id}/replay`);
    assert.equal((await w.processed(deadEnv.event_id)).outcome, "stale");
    const fulfilments = await w.db.prepare("SELECT count(*) AS n FROM effect WHERE resource_id = ? AND kind = 'fulfilment'").bind(dead).first();
    assert.equal(fulfilments.n, 1);
  });
});

test("a provider that lists newest first with random ids over many pages is walked to the end", async () => {
  // the real provider: ids carry no order (inv_7Hc3pQ, …), pages come newest first by paid_at
  const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  const rid = () => "inv_" + Array.from({ length: 6 + Math.floor(Math.random() * 8) }, () => alphabet[Math.floor(Math.random() * alphabet.length)]).join("");
  const t0 = now() - 3 * 86400;
  provider.invoices = Array.from({ length: 430 }, (_, i) => invoice(rid(), t0 + i * 37));
  provider.mode = "newest_first";
  await withWorker({}, async (w) => {
    // a few of them delivered and applied: on record
    const onRecord = provider.invoices.slice(0, 5).map((i) => i.id);
    for (const inv of onRecord) {
      const env = envelope("invoice.paid", inv);
      await deliver(w.url, env);
      await w.processed(env.event_id);
    }
    const r = await admin(w.url, "POST", "/reconcile", { full: true });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.equal(r.json.state, "done", JSON.stringify({ state: r.json.state, error: r.json.error }));
    assert.equal(r.json.truncated, false);
    assert.equal(r.json.checked, 430);
    assert.equal(r.json.pages, 5);
    assert.equal(r.json.missing.length, 425);
    assert.equal(new Set(r.json.missing.map((m) => m.id)).size, 425, "no id twice");
    assert.ok(!r.json.missing.some((m) => onRecord.includes(m.id)));
    // the walk really was newest first: the first page asked for no cursor, then each page's last id
    const cursors = provider.requests.map((q) => q.query.starting_after ?? null);
    assert.equal(cursors[0], null);
    assert.equal(new Set(cursors).size, cursors.length, "no starting_after asked twice");
  });
});

test("a provider whose page ends with the cursor it was given: the same starting_after asked twice ends the run truncated", async () => {
  provider.invoices = ids(250).map((id) => invoice(id));
  provider.mode = "echo";
  await withWorker({}, async (w) => {
    const r = await admin(w.url, "POST", "/reconcile", { full: true });
    assert.equal(r.status, 200, JSON.stringify(r.json));
    assert.equal(r.json.truncated, true);
    assert.equal(r.json.continues, false);
    assert.match(r.json.error, /asked twice/);
    assert.ok(provider.served <= 3, `noticed at once (${provider.served} calls)`);
  });
});

test("one walk at a time: a continuation that finds the lease held does nothing, a daily run waits; a superseded run is never marked done", async () => {
  provider.invoices = ids(150).map((id) => invoice(id));
  await withWorker({ INVOCATION_BUDGET: "30" }, async (w) => {
    const first = await admin(w.url, "POST", "/reconcile", { full: true });
    assert.equal(first.json.continues, true);
    // another invocation holds the lease right now
    await w.db.prepare("UPDATE lease SET holder = 'someone-else', until = strftime('%Y-%m-%dT%H:%M:%fZ','now','+300 seconds') WHERE name = 'reconciliation'").run();
    const served = provider.served;
    await w.scheduled("*/5 * * * *");
    assert.equal(provider.served, served, "the cron's continuation walked nothing");
    assert.ok(w.logs.some((l) => l.stage === "reconcile" && l.outcome === "lease_held"));
    const busy = await admin(w.url, "POST", "/reconcile");
    assert.equal(busy.status, 409);
    assert.equal(busy.json.error, "reconciliation_running");
    // the daily run, fired while the lease is held, waits for that walk: recorded, not dropped
    await w.scheduled("17 3 * * *");
    const waiting = (await w.db.prepare("SELECT full_walk, state, paid_since FROM reconciliation_run ORDER BY id").all()).results;
    assert.deepEqual(
      waiting.map((r) => [r.full_walk, r.state]),
      [
        [1, "running"],
        [0, "running"],
      ],
      "the daily run is recorded to wait; the full walk goes on",
    );
    assert.ok(Math.abs(waiting[1].paid_since - (now() - 7 * 86400)) < 120, "over the last 7 days");
    assert.equal(provider.served, served, "nothing walked while the lease is held");
    // the lease expires; a daily run then waits for the full walk in progress (does not supersede it)
    await w.db.prepare("UPDATE lease SET until = strftime('%Y-%m-%dT%H:%M:%fZ','now','-1 seconds')").run();
    await w.scheduled("17 3 * * *");
    const runs = (await w.db.prepare("SELECT id, full_walk, state FROM reconciliation_run ORDER BY id").all()).results;
    assert.equal(runs[0].full_walk, 1);
    assert.notEqual(runs[0].state, "truncated", "the full walk was not superseded by the daily run");
    // an operator's new run supersedes both; the old ones are never marked done afterwards
    const fresh = await admin(w.url, "POST", "/reconcile");
    assert.equal(fresh.status, 200);
    for (let i = 0; i < 20; i++) await w.scheduled("*/5 * * * *");
    const after = (await w.db.prepare("SELECT id, state, error FROM reconciliation_run ORDER BY id").all()).results;
    for (const run of after.slice(0, -1)) {
      assert.equal(run.state, "truncated", JSON.stringify(run));
      assert.match(run.error, /superseded/);
    }
  });
});
