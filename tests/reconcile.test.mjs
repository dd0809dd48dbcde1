// Reconciliation (interface §6) against a stub of the provider's invoice API on loopback:
// paging, a paid invoice with no invoice.paid on record brought to paid through the guard,
// the daily cron, and the provider failing.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { startWorker } from "./helpers/worker.mjs";
import { deliver, envelope, randomId, admin } from "./helpers/paymos.mjs";

const API_KEY = "sk_test_sandbox";
/** The provider's paid invoices, served 100 at a time in id order, as §6 describes. */
const paid = [];
const requests = [];
let provider;
let providerUrl;
let w;

before(async () => {
  provider = createServer((req, res) => {
    const url = new URL(req.url, "http://x");
    requests.push({ path: url.pathname, query: Object.fromEntries(url.searchParams), auth: req.headers.authorization });
    // a base that moved: a redirect to the real page (not followed by the receiver)
    if (url.pathname.startsWith("/moved/")) {
      res.writeHead(302, { location: `${url.pathname.slice("/moved".length)}${url.search}` }).end();
      return;
    }
    if (req.headers.authorization !== `Bearer ${API_KEY}`) {
      res.writeHead(401, { "content-type": "application/json" }).end('{"error":"unauthorized"}');
      return;
    }
    if (url.pathname !== "/v1/invoices" || url.searchParams.get("status") !== "paid") {
      res.writeHead(404).end();
      return;
    }
    const limit = Number(url.searchParams.get("limit") ?? 100);
    const after = url.searchParams.get("starting_after");
    const sorted = [...paid].sort((a, b) => (a.id < b.id ? -1 : 1));
    const from = after ? sorted.findIndex((i) => i.id > after) : 0;
    const page = from < 0 ? [] : sorted.slice(from, from + limit);
    res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ data: page, has_more: from >= 0 && from + limit < sorted.length }));
  });
  await new Promise((r) => provider.listen(0, "127.0.0.1", r));
  providerUrl = `http://127.0.0.1:${provider.address().port}`;
  w = await startWorker({ vars: { PAYMOS_API_BASE: providerUrl, PAYMOS_API_KEY: API_KEY } });
});
after(async () => {
  await w?.close();
  provider?.close();
});

const invoice = (id) => ({ id, object: "invoice", status: "paid", amount: "49.00", currency: "USDT", order_ref: `order_${id.slice(4)}`, paid_at: 1764449990 });

test("250 paid invoices over 3 pages: only those with no invoice.paid on record are missing, and they are brought to paid once", async () => {
  const delivered = Array.from({ length: 245 }, () => randomId("inv_"));
  const lost = Array.from({ length: 5 }, () => randomId("inv_"));
  for (const id of [...delivered, ...lost]) paid.push(invoice(id));
  // the deliveries we did receive (inserted directly: 245 round trips through the queue add nothing here)
  await w.db.batch(
    delivered.map((id) => {
      const e = envelope("invoice.paid", id);
      return w.db
        .prepare("INSERT INTO webhook_delivery (event_id, resource_id, event_type, body, processed_at, outcome) VALUES (?, ?, ?, ?, strftime('%Y-%m-%dT%H:%M:%fZ','now'), 'applied')")
        .bind(e.event_id, id, e.type, JSON.stringify(e));
    }),
  );
  requests.length = 0;
  const report = await admin(w.url, "POST", "/reconcile");
  assert.equal(report.status, 200, JSON.stringify(report.json));
  assert.equal(report.json.checked, 250);
  assert.equal(report.json.pages, 3);
  assert.deepEqual(
    requests.map((r) => [r.query.limit, r.query.starting_after ?? null, r.auth]),
    [
      ["100", null, `Bearer ${API_KEY}`],
      ["100", [...paid].sort((a, b) => (a.id < b.id ? -1 : 1))[99].id, `Bearer ${API_KEY}`],
      ["100", [...paid].sort((a, b) => (a.id < b.id ? -1 : 1))[199].id, `Bearer ${API_KEY}`],
    ],
  );
  assert.deepEqual(report.json.missing.map((m) => m.id).sort(), [...lost].sort());
  assert.ok(report.json.missing.every((m) => m.brought_to_paid === true && m.status === "paid"));
  assert.deepEqual(report.json.doubled, []);
  assert.equal(report.json.ok, false, "something was missing");

  for (const id of lost) {
    const r = (await admin(w.url, "GET", `/resources/${id}`)).json;
    assert.equal(r.status, "paid");
    assert.deepEqual(
      r.history.map((h) => [h.state, h.cause_kind]),
      [["paid", "reconciliation"]],
    );
    const f = r.effects.filter((e) => e.kind === "fulfilment");
    assert.equal(f.length, 1);
    assert.equal(f[0].order_ref, `order_${id.slice(4)}`, "the order_ref comes from the provider's invoice");
  }

  // the late invoice.paid for one of them, after reconciliation found it: ships nothing twice
  const late = envelope("invoice.paid", lost[0]);
  assert.equal((await deliver(w.url, late)).status, 200);
  assert.equal((await w.processed(late.event_id)).outcome, "stale");
  const r = (await admin(w.url, "GET", `/resources/${lost[0]}`)).json;
  assert.equal(r.effects.filter((e) => e.kind === "fulfilment").length, 1);

  // a second run reports the rest still missing (no invoice.paid arrived for them) but changes nothing
  const again = await admin(w.url, "POST", "/reconcile");
  assert.deepEqual(again.json.missing.map((m) => m.id).sort(), lost.slice(1).sort());
  assert.ok(again.json.missing.every((m) => m.brought_to_paid === false && m.status === "paid"));
  const fulfilments = (await w.db.prepare("SELECT count(*) AS n FROM effect WHERE kind = 'fulfilment'").first()).n;
  assert.equal(fulfilments, 5);
});

test("the daily cron runs reconciliation", async () => {
  const id = randomId("inv_");
  paid.push(invoice(id));
  await w.scheduled("17 3 * * *");
  const r = await admin(w.url, "GET", `/resources/${id}`);
  assert.equal(r.status, 200);
  assert.equal(r.json.status, "paid");
  assert.equal(r.json.history[0].cause_kind, "reconciliation");
  assert.ok(w.logs.some((l) => l.stage === "reconcile"));
});

test("the sweeper's cron does not reconcile", async () => {
  const id = randomId("inv_");
  paid.push(invoice(id));
  await w.scheduled("*/5 * * * *");
  assert.equal((await admin(w.url, "GET", `/resources/${id}`)).status, 404);
});

test("the provider failing: 502 provider_api_error, nothing changed", async () => {
  const wrongKey = await startWorker({ vars: { PAYMOS_API_BASE: providerUrl, PAYMOS_API_KEY: "sk_wrong" } });
  const unreachable = await startWorker({ vars: { PAYMOS_API_BASE: "http://127.0.0.1:9", PAYMOS_API_KEY: API_KEY } });
  const unconfigured = await startWorker({ vars: { PAYMOS_API_KEY: "" } });
  try {
    const a = await admin(wrongKey.url, "POST", "/reconcile");
    assert.equal(a.status, 502);
    assert.equal(a.json.error, "provider_api_error");
    assert.match(a.json.message, /401/);
    assert.ok(!JSON.stringify(a.json).includes("sk_wrong"), "the key is not echoed");
    const b = await admin(unreachable.url, "POST", "/reconcile");
    assert.equal(b.status, 502);
    assert.equal(b.json.error, "provider_api_error");
    // a redirect is not followed: the key goes to PAYMOS_API_BASE alone
    const moved = await startWorker({ vars: { PAYMOS_API_BASE: `${providerUrl}/moved`, PAYMOS_API_KEY: API_KEY } });
    try {
      const before = requests.length;
      const m = await admin(moved.url, "POST", "/reconcile");
      assert.equal(m.status, 502);
      assert.equal(m.json.error, "provider_api_error");
      assert.match(m.json.message, /302/);
      assert.deepEqual(requests.slice(before).map((r) => r.path), ["/moved/v1/invoices"], "the Location was not asked");
    } finally {
      await moved.close();
    }
    const c = await admin(unconfigured.url, "POST", "/reconcile");
    assert.equal(c.status, 503);
    assert.equal(c.json.error, "reconciliation_not_configured");
    for (const x of [wrongKey, unreachable]) {
      assert.equal((await x.db.prepare("SELECT count(*) AS n FROM resource").first()).n, 0);
    }
  } finally {
    await Promise.all([wrongKey.close(), unreachable.close(), unconfigured.close()]);
  }
});
