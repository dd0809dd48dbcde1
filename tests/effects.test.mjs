// Effects reach the order system (interface §7): the outbox written with the
// transition, delivered at least once after the commit, Standard-Webhooks signed (checked
// here with node:crypto, independently of the Rust signer), with a stable id; retried,
// dead, redelivered; recovered after a crash; pullable from the feed.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { createHmac, timingSafeEqual } from "node:crypto";
import { execFileSync, spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { startWorker, eventually, freePort, ROOT } from "./helpers/worker.mjs";
import { deliver, envelope, randomId, admin } from "./helpers/paymos.mjs";

const KEY = Buffer.from("order-system-test-key-0123456789");
const SECRET = `whsec_${KEY.toString("base64")}`;

/** A verifying order system: Standard Webhooks rules, written here from the spec. */
function orderSystem() {
  const state = { received: [], shipped: new Map(), bad: [], mode: "ok", failNext: 0, hang: false, redirect: 0, elsewhere: [] };
  const server = createServer((req, res) => {
    // where a redirect points: it takes anything, and ships nothing
    if (req.url.startsWith("/elsewhere")) {
      state.elsewhere.push({ method: req.method, id: req.headers["webhook-id"] });
      req.resume();
      return res.writeHead(200).end('{"ok":true}');
    }
    let chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      const id = req.headers["webhook-id"];
      const ts = req.headers["webhook-timestamp"];
      const sigs = String(req.headers["webhook-signature"] ?? "").split(" ");
      const expected = createHmac("sha256", KEY).update(`${id}.${ts}.${body}`).digest();
      const valid = sigs.some((s) => {
        const [v, b64] = s.split(",");
        const got = Buffer.from(b64 ?? "", "base64");
        return v === "v1" && got.length === expected.length && timingSafeEqual(got, expected);
      });
      const fresh = Math.abs(Date.now() / 1000 - Number(ts)) <= 300;
      const headers = Object.fromEntries(["webhook-id", "webhook-timestamp", "webhook-signature"].map((h) => [h, req.headers[h] ?? ""]));
      const entry = { id, idempotencyKey: req.headers["idempotency-key"], body: JSON.parse(body || "null"), raw: { body, headers }, valid, fresh, at: Date.now() };
      state.received.push(entry);
      if (!valid || !fresh) {
        state.bad.push(entry);
        return res.writeHead(401).end();
      }
      if (state.hang) return res.on("close", () => (entry.closedAt = Date.now())); // never answers
      if (state.redirect > 0) {
        state.redirect -= 1;
        return res.writeHead(state.redirect % 2 ? 302 : 307, { location: "/elsewhere" }).end();
      }
      if (state.failNext > 0) {
        state.failNext -= 1;
        if (state.failNext % 2 === 0) return req.socket.destroy(); // refused mid-way
        return res.writeHead(500).end();
      }
      if (!state.shipped.has(entry.idempotencyKey)) state.shipped.set(entry.idempotencyKey, entry);
      res.writeHead(200, { "content-type": "application/json" }).end('{"ok":true}');
    });
  });
  return { state, server };
}

/**
 * Each request as the Standard Webhooks reference library (PyPI `standardwebhooks`, in
 * .venv) verifies it: `true`, or the library's error.
 */
function referenceVerifies(entries) {
  const script = `
import json, sys
from standardwebhooks.webhooks import Webhook
webhook = Webhook(${JSON.stringify(SECRET)})
out = []
for r in json.load(sys.stdin):
    try:
        webhook.verify(r["body"], r["headers"])
        out.append(True)
    except Exception as e:
        out.append(repr(e))
print(json.dumps(out))
`;
  const python = path.join(ROOT, ".venv/bin/python");
  return JSON.parse(execFileSync(python, ["-c", script], { input: JSON.stringify(entries.map((e) => e.raw)) }).toString());
}

let os;
let osUrl;
before(async () => {
  os = orderSystem();
  await new Promise((r) => os.server.listen(0, "127.0.0.1", r));
  osUrl = `http://127.0.0.1:${os.server.address().port}/orders`;
});
after(() => {
  os.server.closeAllConnections?.();
  os.server.close();
});

const VARS = () => ({ ORDER_SYSTEM_URL: osUrl, ORDER_SYSTEM_SECRET: SECRET, ORDER_SYSTEM_TIMEOUT_MS: "500", EFFECT_RETRY_SCALE: "0.0001" });
const shippedFor = (resourceId) => [...os.state.shipped.values()].filter((e) => e.body.resource_id === resourceId);
const effectRows = async (w, resourceId) => (await w.db.prepare("SELECT * FROM effect WHERE resource_id = ? ORDER BY id").bind(resourceId).all()).results;

test("a paid invoice's fulfilment reaches the order system, signed, with order_ref and license_code, under a stable eff_ id", async () => {
  const w = await startWorker({ vars: VARS() });
  try {
    const inv = randomId("inv_");
    const env = envelope("invoice.paid", inv, { data: { order_ref: "order_5501" } });
    assert.equal((await deliver(w.url, env)).status, 200);
    const [shipped] = await eventually("the fulfilment to be shipped", () => shippedFor(inv).length === 1 && shippedFor(inv));
    assert.match(shipped.id, /^eff_[A-Za-z0-9]{1,64}$/);
    assert.equal(shipped.idempotencyKey, shipped.id);
    assert.equal(shipped.valid, true);
    assert.deepEqual(referenceVerifies([shipped]), [true], "verified by the Standard Webhooks library");
    assert.deepEqual(Object.keys(shipped.body).sort(), ["amount", "cause", "created_at", "currency", "id", "kind", "license_code", "order_ref", "resource_id"]);
    assert.equal(shipped.body.id, shipped.id);
    assert.equal(shipped.body.kind, "fulfilment");
    assert.equal(shipped.body.order_ref, "order_5501");
    assert.equal(shipped.body.cause, env.event_id);
    const [row] = await effectRows(w, inv);
    assert.equal(shipped.body.license_code, row.license_code);
    assert.equal(row.effect_id, shipped.id);
    await eventually("delivered on record", async () => (await effectRows(w, inv))[0].dispatch === "delivered");
    const r = (await admin(w.url, "GET", `/resources/${inv}`)).json;
    assert.equal(r.effects[0].id, shipped.id);
    assert.equal(r.effects[0].dispatch, "delivered");
    assert.equal(r.effects[0].attempts, 1);
    assert.equal(os.state.bad.length, 0, "every request verified");
  } finally {
    await w.close();
  }
});

test("two endpoints' ids for one invoice: one effect id at the order system", async () => {
  const w = await startWorker({ vars: VARS() });
  try {
    const inv = randomId("inv_");
    const a = envelope("invoice.paid", inv);
    const b = envelope("invoice.paid", inv);
    await Promise.all([deliver(w.url, a), deliver(w.url, b)]);
    await w.processed(a.event_id);
    await w.processed(b.event_id);
    await eventually("shipped", () => shippedFor(inv).length >= 1);
    await new Promise((r) => setTimeout(r, 1500));
    const requests = os.state.received.filter((e) => e.body?.resource_id === inv);
    assert.equal(new Set(requests.map((e) => e.id)).size, 1, "one effect id");
    assert.equal(shippedFor(inv).length, 1);
  } finally {
    await w.close();
  }
});

test("the order system refusing, failing and hanging for a while, then back: delivered, nothing lost", async () => {
  const w = await startWorker({ vars: VARS() });
  try {
    os.state.failNext = 6; // alternately a dropped connection and a 500
    const invoices = Array.from({ length: 3 }, () => randomId("inv_"));
    for (const inv of invoices) await deliver(w.url, envelope("invoice.paid", inv));
    // and a stretch of hanging past the timeout
    await eventually("the failures to be used up", () => os.state.failNext === 0, 30000);
    os.state.hang = true;
    await new Promise((r) => setTimeout(r, 1200));
    os.state.hang = false;
    for (const inv of invoices) {
      await eventually(`${inv} shipped`, () => shippedFor(inv).length === 1, 60000);
      await eventually(`${inv} delivered`, async () => (await effectRows(w, inv))[0].dispatch === "delivered", 30000);
    }
    const rows = (await Promise.all(invoices.map((inv) => effectRows(w, inv)))).flat();
    assert.ok(rows.some((r) => r.attempts > 1), "retried");
    assert.ok(w.logs.some((l) => l.stage === "dispatch" && l.outcome === "retry" && /did not answer within 500 ms|answered 500|could not be reached/.test(l.detail)));
  } finally {
    os.state.hang = false;
    os.state.failNext = 0;
    await w.close();
  }
});

test("an order system hanging on a fulfilment holds up no delivery: the next ones are processed while its request is still open", async () => {
  // the longest timeout there is (a minute, so that a slow machine cannot make the test pass or
  // fail by the clock): the consumer must not be the one waiting it out (interface §7, "slow
  // or hanging third-party calls belong behind a queue")
  const w = await startWorker({ vars: { ...VARS(), ORDER_SYSTEM_TIMEOUT_MS: "60000" } });
  try {
    os.state.hang = true;
    const first = randomId("inv_");
    await deliver(w.url, envelope("invoice.paid", first));
    const held = await eventually("the fulfilment's request to be held open", () => os.state.received.find((e) => e.body?.resource_id === first));
    const next = [envelope("invoice.paid", randomId("inv_")), envelope("invoice.created", randomId("inv_"))];
    for (const env of next) {
      assert.equal((await deliver(w.url, env)).status, 200);
      await w.processed(env.event_id);
    }
    assert.equal(held.closedAt, undefined, "both processed while the first fulfilment's request was still open");
    const [row] = await effectRows(w, first);
    assert.equal(row.attempts, 1, "its attempt on record before its request");
  } finally {
    os.state.hang = false;
    await w.close();
  }
});

test("an order system that answers with a redirect has not taken the effect: not followed, retried, then delivered", async () => {
  const w = await startWorker({ vars: VARS() });
  try {
    os.state.redirect = 4; // 307, 302, 307, 302
    const inv = randomId("inv_");
    await deliver(w.url, envelope("invoice.paid", inv));
    await eventually("the redirects to be used up", () => os.state.redirect === 0, 30000);
    await eventually(`${inv} shipped`, () => shippedFor(inv).length === 1, 60000);
    await eventually(`${inv} delivered`, async () => (await effectRows(w, inv))[0].dispatch === "delivered", 30000);
    assert.deepEqual(os.state.elsewhere, [], "no Location followed: the signed effect went nowhere else");
    const [row] = await effectRows(w, inv);
    const requests = os.state.received.filter((r) => r.id === row.effect_id);
    assert.ok(requests.length >= 5, "four redirects, each a failed attempt, then the 2xx");
    assert.equal(row.attempts, requests.length, "every request counted as an attempt");
    assert.ok(w.logs.some((l) => l.stage === "dispatch" && l.outcome === "retry" && /answered 30[27]/.test(l.detail)));
  } finally {
    os.state.redirect = 0;
    await w.close();
  }
});

test("never back: dead after the ladder, visible in the feed, then redelivered by hand under the same id", async () => {
  const w = await startWorker({ vars: VARS() });
  try {
    const inv = randomId("inv_");
    os.state.failNext = 1000;
    await deliver(w.url, envelope("invoice.paid", inv));
    const dead = await eventually("the effect to go dead", async () => (await effectRows(w, inv)).find((e) => e.dispatch === "dead"), 90000, 250);
    // the ladder spent (the first attempt and its 12 retries) and 16 hours, compressed here to
    // 5.76 s, since the first attempt: a ladder that ends early under this compression gets one
    // more retry for the hours left (interface §7), so 13 attempts or a few more
    assert.ok(dead.attempts >= 13, `${dead.attempts} attempts: the first and the 12 retries of the ladder`);
    const span = (Date.parse(dead.dead_at) - Date.parse(dead.first_attempt_at)) / 1000;
    assert.ok(span >= 5, `dead ${span} s after the first attempt: the 16 hours at this scale are 5.76 s (whole seconds)`);
    assert.ok(dead.last_error);
    const feed = (await admin(w.url, "GET", "/effects?dispatch=dead")).json;
    assert.ok(feed.data.some((e) => e.id === dead.effect_id && e.dispatch === "dead"));
    os.state.failNext = 0;
    const again = await admin(w.url, "POST", `/effects/${dead.effect_id}/redeliver`);
    assert.equal(again.status, 202);
    assert.equal(again.json.enqueued, true);
    await eventually("redelivered", () => shippedFor(inv).length === 1, 30000);
    assert.equal(shippedFor(inv)[0].id, dead.effect_id, "the same id");
    await eventually("delivered on record", async () => (await effectRows(w, inv))[0].dispatch === "delivered");
    assert.equal((await admin(w.url, "POST", "/effects/eff_nosuchthing/redeliver")).status, 404);
  } finally {
    os.state.failNext = 0;
    await w.close();
  }
});

test("the ladder's delays between attempts (interface §7): at a scale of 1/100, at least 3 s, 6 s, then 12 s", async () => {
  // EFFECT_RETRY_DELAYS_SECONDS scaled by 0.01: 0, 0, 1, 1, 3, 6, 12, … seconds after each failure
  const w = await startWorker({ vars: { ...VARS(), EFFECT_RETRY_SCALE: "0.01" } });
  try {
    const inv = randomId("inv_");
    os.state.failNext = 1000;
    await deliver(w.url, envelope("invoice.paid", inv));
    const posts = () => os.state.received.filter((e) => e.body?.resource_id === inv);
    await eventually("8 attempts", () => posts().length >= 8, 90000, 100);
    const at = posts().map((e) => e.at);
    const gap = (k) => (at[k] - at[k - 1]) / 1000; // between attempt k and k + 1 (0-based k)
    // lower bounds only: a queue delivers a delayed message no earlier than asked, and a busy
    // machine only adds to each gap
    assert.ok(gap(5) >= 2.5 && gap(6) >= 5 && gap(7) >= 10, `gaps ${[5, 6, 7].map(gap)} s: the ladder's 3, 6 and 12`);
  } finally {
    os.state.failNext = 0;
    await w.close();
  }
});

test("a refund after a delivered fulfilment: one revocation, after it; the fulfilment can no longer be redelivered", async () => {
  const w = await startWorker({ vars: VARS() });
  try {
    const inv = randomId("inv_");
    const paid = envelope("invoice.paid", inv);
    await deliver(w.url, paid);
    await eventually("the fulfilment delivered", async () => (await effectRows(w, inv))[0]?.dispatch === "delivered");
    const refund = envelope("invoice.refunded", inv);
    await deliver(w.url, refund);
    await eventually("both shipped", () => shippedFor(inv).length === 2, 60000);
    const [first, second] = shippedFor(inv).sort((a, b) => a.at - b.at);
    assert.equal(first.body.kind, "fulfilment");
    assert.equal(second.body.kind, "revocation");
    assert.equal(second.body.cause, refund.event_id);
    assert.deepEqual(referenceVerifies([first, second]), [true, true], "verified by the Standard Webhooks library");
    const fulfilment = (await effectRows(w, inv)).find((e) => e.kind === "fulfilment");
    assert.equal(fulfilment.dispatch, "delivered", "delivered stays delivered: nothing to cancel");
    // a redelivery would ship goods for money returned (interface §5)
    const again = await admin(w.url, "POST", `/effects/${fulfilment.effect_id}/redeliver`);
    assert.equal(again.status, 409);
    assert.deepEqual(again.json, { error: "cancelled" }, "the body interface §5 gives");
    const revocation = (await effectRows(w, inv)).find((e) => e.kind === "revocation");
    assert.equal((await admin(w.url, "POST", `/effects/${revocation.effect_id}/redeliver`)).status, 202, "the revocation itself may be sent again");
  } finally {
    await w.close();
  }
});

test("paid while the order system refuses, then refunded, then it recovers: the fulfilment is cancelled and revoked, never sent after the refund", async () => {
  const w = await startWorker({ vars: VARS() });
  try {
    const inv = randomId("inv_");
    os.state.failNext = 1000;
    const paid = envelope("invoice.paid", inv);
    await deliver(w.url, paid);
    await w.processed(paid.event_id);
    // at least one attempt made (and refused): the order system may hold it, as far as we know
    await eventually("an attempt", async () => (await effectRows(w, inv))[0]?.attempts >= 2, 30000);
    const refund = envelope("invoice.refunded", inv);
    await deliver(w.url, refund);
    const refunded = await w.processed(refund.event_id);
    assert.equal(refunded.outcome, "applied");
    const rows = await effectRows(w, inv);
    const fulfilment = rows.find((e) => e.kind === "fulfilment");
    assert.equal(fulfilment.dispatch, "cancelled", "cancelled in the refund's own transaction");
    assert.ok(rows.some((e) => e.kind === "revocation"), "revoked: an attempt may have reached the order system");
    const refundedAt = Date.now();
    os.state.failNext = 0;
    await eventually("the revocation shipped", () => shippedFor(inv).some((e) => e.body.kind === "revocation"), 60000);
    await new Promise((r) => setTimeout(r, 1500));
    assert.deepEqual(shippedFor(inv).map((e) => e.body.kind), ["revocation"], "the fulfilment was never accepted, the revocation was");
    // no attempt at the fulfilment started after the refund committed (an attempt in flight
    // at that moment ends within the 500 ms timeout)
    const late = os.state.received.filter((e) => e.body?.resource_id === inv && e.body.kind === "fulfilment" && e.at > refundedAt + 1000);
    assert.deepEqual(late, []);
    assert.equal((await effectRows(w, inv)).find((e) => e.kind === "fulfilment").dispatch, "cancelled");
    const redeliver = await admin(w.url, "POST", `/effects/${fulfilment.effect_id}/redeliver`);
    assert.equal(redeliver.status, 409);
    assert.deepEqual(redeliver.json, { error: "cancelled" });
    const feed = await admin(w.url, "GET", "/effects?dispatch=cancelled&limit=1000");
    assert.ok(feed.json.data.some((e) => e.id === fulfilment.effect_id), "the feed lists it as cancelled");
  } finally {
    os.state.failNext = 0;
    await w.close();
  }
});

/** The invoice ends refunded with no effect, and the order system is sent nothing for it. */
async function refundedWithNothingShipped(w, inv) {
  const r = (await admin(w.url, "GET", `/resources/${inv}`)).json;
  assert.equal(r.status, "refunded");
  assert.deepEqual(r.effects, [], "no fulfilment for money that went back");
  await new Promise((res) => setTimeout(res, 1500));
  assert.equal(os.state.received.filter((e) => e.body?.resource_id === inv).length, 0, "the order system is sent nothing");
}

test("created, refunded, then paid: the refund overtook its payment, nothing is fulfilled or sent", async () => {
  const w = await startWorker({ vars: VARS() });
  try {
    const inv = randomId("inv_");
    for (const type of ["invoice.created", "invoice.refunded", "invoice.paid"]) {
      const e = envelope(type, inv, { data: { order_ref: "order_overtaken" } });
      await deliver(w.url, e);
      const done = await w.processed(e.event_id);
      assert.equal(done.outcome, type === "invoice.paid" ? "stale" : "applied", type);
    }
    await refundedWithNothingShipped(w, inv);
  } finally {
    await w.close();
  }
});

/**
 * Received and committed (200) by a worker whose queue producer is missing, in this order:
 * their messages are lost, for the sweeper to send. Then `then(dir)` on the same database;
 * the directory is removed after.
 */
async function receivedWithMessagesLost(name, envelopes, then) {
  const dir = await mkdtemp(path.join(tmpdir(), `paymos-${name}-`));
  try {
    const lost = await startWorker({ persistDir: dir, withoutQueueProducer: true, vars: VARS() });
    try {
      for (const [i, e] of envelopes.entries()) {
        if (i > 0) await new Promise((r) => setTimeout(r, 20)); // a later receipt, whatever the clock's grain
        assert.equal((await deliver(lost.url, e)).status, 200);
      }
    } finally {
      await lost.close();
    }
    await then(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** The sweeper sends the lost refund: it applies, the payment that waited for it is stale. */
async function refundSweptPaymentStale(w, refund, paid) {
  await w.scheduled("*/5 * * * *");
  assert.equal((await w.processed(refund.event_id)).outcome, "applied");
  assert.equal((await w.processed(paid.event_id)).outcome, "stale", "the refund came first: the payment ships nothing");
  await refundedWithNothingShipped(w, paid.data.id);
}

test("a refund received first but processed late (its send failed): the payment received after it waits for it, nothing is fulfilled or sent", async () => {
  const inv = randomId("inv_");
  const refund = envelope("invoice.refunded", inv, { data: { order_ref: "order_late_refund" } });
  await receivedWithMessagesLost("late-refund", [refund], async (dir) => {
    const w = await startWorker({ persistDir: dir, vars: { ...VARS(), QUEUE_RETRY_BASE_SECONDS: "1", SWEEP_AFTER_SECONDS: "0" } });
    try {
      const paid = envelope("invoice.paid", inv, { data: { order_ref: "order_late_refund" } });
      assert.equal((await deliver(w.url, paid)).status, 200);
      const waits = () => w.logs.filter((l) => l.stage === "consume" && l.event_id === paid.event_id && l.outcome === "waiting_for_refund");
      await eventually("the payment to wait for the refund on record", () => waits().length >= 2);
      assert.equal((await admin(w.url, "GET", `/deliveries/${paid.event_id}`)).json.outcome, null, "unprocessed while it waits");
      assert.equal(os.state.received.filter((e) => e.body?.resource_id === inv).length, 0, "nothing sent meanwhile");
      // nor may an operator mark it paid meanwhile: the refund on record refuses it, audited
      const byHand = await admin(w.url, "POST", `/resources/${inv}/transition`, { to: "paid", reason: "customer says paid", order_ref: "order_late_refund" });
      assert.equal(byHand.status, 409, JSON.stringify(byHand.json));
      assert.equal(byHand.json.error, "refund_pending");
      const audited = (await admin(w.url, "GET", "/audit?action=transition")).json.data;
      assert.ok(audited.some((a) => a.target === inv && a.outcome === "conflict"), JSON.stringify(audited));
      await refundSweptPaymentStale(w, refund, paid);
    } finally {
      await w.close();
    }
  });
});

test("a payment waiting for its refund at QUEUE_RETRY_BASE_SECONDS=0: its dead letters hand it back uncounted, never dead", async () => {
  const inv = randomId("inv_");
  const refund = envelope("invoice.refunded", inv, { data: { order_ref: "order_wait_fast" } });
  await receivedWithMessagesLost("wait-fast", [refund], async (dir) => {
    // retries at once: the payment's queue retries are spent in moments, waiting
    const w = await startWorker({ persistDir: dir, vars: { ...VARS(), QUEUE_RETRY_BASE_SECONDS: "0", SWEEP_AFTER_SECONDS: "0" } });
    try {
      const paid = envelope("invoice.paid", inv, { data: { order_ref: "order_wait_fast" } });
      assert.equal((await deliver(w.url, paid)).status, 200);
      const handedBack = () => w.logs.filter((l) => l.stage === "dead_letter" && l.event_id === paid.event_id && l.outcome === "handed_back");
      // more hand-backs than the three that bury a delivery whose failures go unrecorded
      await eventually("four dead letters handed back", () => handedBack().length >= 4, 120000);
      const waiting = (await admin(w.url, "GET", `/deliveries/${paid.event_id}`)).json;
      assert.equal(waiting.outcome, null, JSON.stringify(waiting));
      assert.equal(waiting.attempts, 0, "a wait is not a failure");
      await refundSweptPaymentStale(w, refund, paid);
    } finally {
      await w.close();
    }
  });
});

test("a payment received before its refund, both processed late (their sends failed): the payment applies, the refund cancels its fulfilment", async () => {
  const inv = randomId("inv_");
  const paid = envelope("invoice.paid", inv, { data: { order_ref: "order_paid_first" } });
  const refund = envelope("invoice.refunded", inv, { data: { order_ref: "order_paid_first" } });
  await receivedWithMessagesLost("paid-first", [paid, refund], async (dir) => {
    const w = await startWorker({ persistDir: dir, vars: { ...VARS(), QUEUE_RETRY_BASE_SECONDS: "1", SWEEP_AFTER_SECONDS: "0" } });
    try {
      await w.scheduled("*/5 * * * *"); // the sweeper sends both
      // "the paid that arrives after it is stale" (§3): this one arrived before it
      assert.equal((await w.processed(paid.event_id)).outcome, "applied", "received first: no refund overtook it");
      assert.equal((await w.processed(refund.event_id)).outcome, "applied");
      const r = (await admin(w.url, "GET", `/resources/${inv}`)).json;
      assert.equal(r.status, "refunded");
      assert.deepEqual(r.history.map((h) => h.state), ["paid", "refunded"]);
      const [fulfilment, ...others] = r.effects.filter((e) => e.kind === "fulfilment");
      assert.deepEqual(others, [], "exactly one fulfilment");
      assert.ok(["cancelled", "delivered"].includes(fulfilment.dispatch), JSON.stringify(fulfilment));
      // whatever left for the order system is followed by its revocation
      const kinds = () => os.state.received.filter((e) => e.body?.resource_id === inv).map((e) => e.body.kind);
      if (kinds().includes("fulfilment")) await eventually("the revocation", () => kinds().includes("revocation"), 60000);
    } finally {
      await w.close();
    }
  });
});

test("marked paid by hand without order_ref, then refunded: the waiting fulfilment is cancelled, nothing is sent", async () => {
  const w = await startWorker({ vars: VARS() });
  try {
    const inv = randomId("inv_");
    await admin(w.url, "POST", `/resources/${inv}/transition`, { to: "paid", reason: "paid, proof by email" });
    const [waiting] = (await admin(w.url, "GET", `/resources/${inv}`)).json.effects;
    assert.equal(waiting.awaiting_order_ref, true);
    const refund = envelope("invoice.refunded", inv);
    await deliver(w.url, refund);
    assert.equal((await w.processed(refund.event_id)).outcome, "applied");
    // the real invoice.paid arrives with its order_ref: stale, and the cancelled fulfilment
    // is not released by it
    const late = envelope("invoice.paid", inv, { data: { order_ref: "order_late_9" } });
    await deliver(w.url, late);
    assert.equal((await w.processed(late.event_id)).outcome, "stale");
    const r = (await admin(w.url, "GET", `/resources/${inv}`)).json;
    assert.deepEqual(r.effects.map((e) => [e.kind, e.dispatch]), [["fulfilment", "cancelled"]], "cancelled, and no revocation: it never left");
    await new Promise((res) => setTimeout(res, 1500));
    assert.equal(os.state.received.filter((e) => e.body?.resource_id === inv).length, 0);
  } finally {
    await w.close();
  }
});

test("an invoice.paid on record without its order_ref: reconciliation learns it, and the waiting fulfilment goes out with it", async () => {
  const inv = randomId("inv_");
  const listed = { id: inv, object: "invoice", status: "paid", amount: "49.00", currency: "USDT", order_ref: "order_from_provider", paid_at: 1764449990 };
  const provider = createServer((req, res) => {
    const ok = req.headers.authorization === "Bearer sk_test_reconcile" && req.url.startsWith("/v1/invoices?");
    res.writeHead(ok ? 200 : 401, { "content-type": "application/json" }).end(JSON.stringify(ok ? { data: [listed], has_more: false } : { error: "unauthorized" }));
  });
  await new Promise((r) => provider.listen(0, "127.0.0.1", r));
  const api = { PAYMOS_API_BASE: `http://127.0.0.1:${provider.address().port}`, PAYMOS_API_KEY: "sk_test_reconcile" };
  const w = await startWorker({ vars: { ...VARS(), ...api } });
  try {
    // the provider's invoice.paid came without the order_ref: applied, its fulfilment waits
    const paid = envelope("invoice.paid", inv, { data: { order_ref: undefined } });
    await deliver(w.url, paid);
    assert.equal((await w.processed(paid.event_id)).outcome, "applied");
    const [waiting] = (await admin(w.url, "GET", `/resources/${inv}`)).json.effects;
    assert.deepEqual([waiting.kind, waiting.awaiting_order_ref, waiting.order_ref], ["fulfilment", true, null]);
    const report = await admin(w.url, "POST", "/reconcile", { full: true });
    assert.equal(report.status, 200, JSON.stringify(report.json));
    assert.deepEqual([report.json.checked, report.json.missing, report.json.ok], [1, [], true], "on record: no finding");
    const [shipped] = await eventually("shipped with the provider's order_ref", () => shippedFor(inv).length === 1 && shippedFor(inv));
    assert.equal(shipped.id, waiting.id, "under its same id");
    assert.equal(shipped.body.order_ref, "order_from_provider");
    const r = (await admin(w.url, "GET", `/resources/${inv}`)).json;
    assert.deepEqual([r.status, r.order_ref ?? null, r.effects.length], ["paid", "order_from_provider", 1]);
    assert.equal(r.history.length, 1, "the guard refused the second paid: no history entry");
  } finally {
    await w.close();
    provider.close();
  }
});

test("a fulfilment made before its order_ref is known waits, then goes out with it under the same id", async () => {
  const w = await startWorker({ vars: VARS() });
  try {
    const inv = randomId("inv_");
    await admin(w.url, "POST", `/resources/${inv}/transition`, { to: "paid", reason: "marked paid during the outage" });
    const [waiting] = (await admin(w.url, "GET", `/resources/${inv}`)).json.effects;
    assert.equal(waiting.dispatch, "pending");
    assert.equal(waiting.awaiting_order_ref, true);
    await new Promise((r) => setTimeout(r, 1500));
    assert.equal(shippedFor(inv).length, 0, "not sent without its order_ref");
    const real = envelope("invoice.paid", inv, { data: { order_ref: "order_late_1" } });
    await deliver(w.url, real);
    assert.equal((await w.processed(real.event_id)).outcome, "stale");
    const [shipped] = await eventually("shipped with its order_ref", () => shippedFor(inv).length === 1 && shippedFor(inv));
    assert.equal(shipped.id, waiting.id);
    assert.equal(shipped.body.order_ref, "order_late_1");
  } finally {
    await w.close();
  }
});

test("an invoice.paid whose order_ref is blank: its fulfilment waits, then goes out with the real one", async () => {
  const w = await startWorker({ vars: VARS() });
  try {
    const inv = randomId("inv_");
    // the first endpoint's copy carries a blank order_ref; a fulfilment sent with it would
    // ship to no order, and a known order_ref is never overwritten
    const blank = envelope("invoice.paid", inv, { data: { order_ref: "  " } });
    await deliver(w.url, blank);
    assert.equal((await w.processed(blank.event_id)).outcome, "applied");
    const [waiting] = (await admin(w.url, "GET", `/resources/${inv}`)).json.effects;
    assert.deepEqual([waiting.kind, waiting.dispatch, waiting.awaiting_order_ref, waiting.order_ref], ["fulfilment", "pending", true, null]);
    await new Promise((r) => setTimeout(r, 1500));
    assert.equal(shippedFor(inv).length, 0, "not sent with a blank order_ref");
    // the second endpoint's copy of the same payment, with the order_ref
    const real = envelope("invoice.paid", inv, { data: { order_ref: "order_1042" } });
    await deliver(w.url, real);
    assert.equal((await w.processed(real.event_id)).outcome, "stale");
    const [shipped] = await eventually("shipped with its order_ref", () => shippedFor(inv).length === 1 && shippedFor(inv));
    assert.deepEqual([shipped.id, shipped.body.order_ref], [waiting.id, "order_1042"]);
  } finally {
    await w.close();
  }
});

test("one effect's id three times in one queue batch: posted once, the copies answered as duplicates", async () => {
  // pending in pull mode first, so that nothing has sent it yet
  const dir = await mkdtemp(path.join(tmpdir(), "paymos-dup-batch-"));
  try {
    const pull = await startWorker({ persistDir: dir, vars: { ORDER_SYSTEM_URL: "" } });
    const inv = randomId("inv_");
    const env = envelope("invoice.paid", inv, { data: { order_ref: "order_dup_1" } });
    try {
      await deliver(pull.url, env);
      await pull.processed(env.event_id);
    } finally {
      await pull.close();
    }
    const w = await startWorker({ persistDir: dir, vars: VARS() });
    try {
      const [effect] = (await admin(w.url, "GET", `/resources/${inv}`)).json.effects;
      assert.equal(effect.dispatch, "pending");
      const effects = await w.mf.getQueueProducer("EFFECTS");
      await effects.sendBatch([1, 2, 3].map(() => ({ body: { effect_id: effect.id } })));
      await eventually("the fulfilment to be shipped", () => shippedFor(inv).length === 1);
      const lines = () => w.logs.filter((l) => l.stage === "dispatch" && l.event_id === effect.id).map((l) => l.outcome);
      await eventually("all three messages answered", () => lines().length === 3);
      assert.deepEqual(lines().sort(), ["delivered", "duplicate_message", "duplicate_message"]);
      assert.equal(os.state.received.filter((e) => e.id === effect.id).length, 1, "one POST");
      assert.equal((await admin(w.url, "GET", `/resources/${inv}`)).json.effects[0].dispatch, "delivered");
    } finally {
      await w.close();
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test("no ORDER_SYSTEM_URL: effects stay pending in the feed, oldest first, cursor-paged, filtered", async () => {
  const w = await startWorker({ vars: { ORDER_SYSTEM_URL: "" } });
  try {
    const invoices = Array.from({ length: 5 }, () => randomId("inv_"));
    for (const inv of invoices) {
      const e = envelope("invoice.paid", inv);
      await deliver(w.url, e);
      await w.processed(e.event_id);
    }
    const wdr = randomId("wdr_");
    const s = envelope("withdrawal.completed", wdr);
    await deliver(w.url, s);
    await w.processed(s.event_id);
    const seen = [];
    let cursor;
    for (let i = 0; i < 10; i++) {
      const page = (await admin(w.url, "GET", `/effects?limit=2${cursor ? `&cursor=${cursor}` : ""}`)).json;
      seen.push(...page.data);
      if (!page.has_more) break;
      cursor = page.next_cursor;
    }
    assert.deepEqual(seen.map((e) => e.resource_id), [...invoices, wdr], "oldest first, every one once");
    assert.ok(seen.every((e) => e.dispatch === "pending" && /^eff_/.test(e.id)));
    const settlements = (await admin(w.url, "GET", "/effects?kind=settlement")).json.data;
    assert.deepEqual(settlements.map((e) => e.resource_id), [wdr]);
    assert.equal((await admin(w.url, "GET", "/effects?dispatch=delivered")).json.data.length, 0);
    assert.equal((await admin(w.url, "GET", "/effects?dispatch=sent")).status, 400);
    assert.equal((await admin(w.url, "GET", "/effects?kind=refund")).status, 400);
    assert.equal((await admin(w.url, "GET", "/effects?cursor=abc")).status, 400);
  } finally {
    await w.close();
  }
});

test("SIGKILL of the runtime while the dispatcher is mid-request: the effect is delivered after restart", async () => {
  const dir = await mkdtemp(path.join(tmpdir(), "paymos-effects-kill-"));
  const port = await freePort();
  const vars = JSON.stringify({ ...VARS(), SWEEP_AFTER_SECONDS: "1" });
  const serve = () =>
    new Promise((resolve, reject) => {
      const p = spawn(process.execPath, [path.join(ROOT, "tests/helpers/serve.mjs"), dir, String(port), vars], {
        env: { ...process.env, CRON_EVERY_MS: "1000" },
        stdio: ["ignore", "pipe", "inherit"],
        detached: true, // its own process group: SIGKILL takes workerd down with it
      });
      let out = "";
      p.stdout.on("data", (c) => {
        out += c;
        if (out.includes("READY ")) resolve({ p, url: /READY (\S+)/.exec(out)[1] });
      });
      p.once("exit", (code) => reject(new Error(`serve exited ${code}`)));
    });
  let proc;
  try {
    os.state.hang = true;
    const first = await serve();
    proc = first.p;
    const inv = randomId("inv_");
    await deliver(first.url, envelope("invoice.paid", inv));
    await eventually("the dispatcher's request to arrive", () => os.state.received.some((e) => e.body?.resource_id === inv), 30000);
    const exited = new Promise((r) => proc.once("exit", r));
    process.kill(-proc.pid, "SIGKILL");
    await exited;
    proc = undefined;
    os.state.hang = false;
    const second = await serve();
    proc = second.p;
    await eventually("delivered after the restart", () => shippedFor(inv).length === 1, 60000);
  } finally {
    os.state.hang = false;
    if (proc) {
      const exited = new Promise((r) => proc.once("exit", r));
      process.kill(-proc.pid, "SIGTERM");
      await exited;
    }
    await rm(dir, { recursive: true, force: true });
  }
});
