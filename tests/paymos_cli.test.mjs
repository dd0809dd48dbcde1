// The `paymos` CLI (crates/paymos-cli). Two groups:
// - against the built worker in workerd: `check` runs the seed's five-step idempotency proof,
//   with `paymos sandbox` standing in for the provider API that reconciliation calls (needs
//   build/ from scripts/build.sh; the worker starts on the first test that needs it);
// - without the worker: `check` against a deliberately broken receiver (a negative control),
//   and `paymos orders`, the reference order system.
// Needs `cargo build -p paymos-cli --release` first (or PAYMOS_BIN=/path/to/paymos).
import { test, describe, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import { existsSync } from "node:fs";
import { createServer } from "node:http";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { finished } from "./helpers/shell.mjs";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
// where cargo put it: CARGO_TARGET_DIR when set (relative to the repository, as cargo reads it)
const BIN = process.env.PAYMOS_BIN || path.resolve(ROOT, process.env.CARGO_TARGET_DIR || "target", "release/paymos");
const DEV_SECRET = "whsec_test_new_6f1d2a9c";
const children = new Set();

function randomId(prefix) {
  return prefix + randomBytes(9).toString("hex");
}

async function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

function needBin() {
  assert.ok(existsSync(BIN), `${BIN} is missing: run \`cargo build -p paymos-cli --release\` first (or set PAYMOS_BIN)`);
}

// The worker and a sandbox, started once, on first use (tests that need neither never pay
// for them, and never fail because build/ is missing).
let workerEnv;
function worker() {
  workerEnv ??= (async () => {
    needBin();
    const { startWorker, ADMIN_TOKEN, SECRET_OLD } = await import("./helpers/worker.mjs");
    const sandboxUrl = await startSandbox();
    const w = await startWorker({ vars: { PAYMOS_API_BASE: sandboxUrl } });
    return { w, sandboxUrl, ADMIN_TOKEN, SECRET_OLD };
  })();
  return workerEnv;
}

after(async () => {
  for (const c of children) c.kill("SIGKILL");
  if (workerEnv) await (await workerEnv.catch(() => undefined))?.w?.close();
});

/** Runs the CLI to completion; never rejects on a non-zero exit. */
function paymos(args, { timeoutMs = 120000 } = {}) {
  needBin();
  const started = Date.now();
  // the defaults, not whatever the developer's shell exports
  const env = { ...process.env };
  delete env.PAYMOS_WEBHOOK_SECRET;
  delete env.PAYMOS_ADMIN_TOKEN;
  const child = spawn(BIN, args, { stdio: ["ignore", "pipe", "pipe"], env });
  children.add(child);
  return finished(child, `paymos ${args.join(" ")}`, timeoutMs)
    .then((r) => ({ ...r, ms: Date.now() - started }))
    .finally(() => children.delete(child));
}

/** Starts `paymos sandbox` on a free port and waits for its "listening on" line. */
async function startSandbox(extraArgs = []) {
  needBin();
  const port = await freePort();
  const child = spawn(BIN, ["sandbox", "--port", String(port), "--quiet", ...extraArgs], { stdio: ["ignore", "pipe", "pipe"] });
  children.add(child);
  const url = await new Promise((resolve, reject) => {
    let out = "";
    const timer = setTimeout(() => reject(new Error(`the sandbox did not start: ${out}`)), 10000);
    child.stdout.on("data", (d) => {
      out += d;
      const m = out.match(/listening on (http:\/\/127\.0\.0\.1:\d+)/);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    child.on("exit", (code) => reject(new Error(`the sandbox exited with ${code}: ${out}`)));
  });
  return url;
}

/**
 * A receiver that implements just enough of the contract for `paymos check` (the webhook with
 * HMAC verification, GET /admin/api/deliveries[?resource_id=…], GET /admin/api/deliveries/{id},
 * GET /admin/api/resources/{id}, POST /admin/api/resources/{id}/transition,
 * POST /admin/api/reconcile), processing synchronously, with its state guard intact but its
 * door dedupe deliberately broken: every copy of a delivery is stored as a new row and
 * answered {"received":true,"duplicate":false}. With `dedupe: true` the door works (the
 * control for the control: then check must pass). With `orders: {url, secret}` each
 * fulfilment is sent there as a Standard Webhooks effect once its order_ref is known; with
 * `orders.newIdPerAttempt` every effect is sent twice under two fresh ids (a broken outbox).
 * `faults` breaks one more contract rule each, so that every step of check has a receiver it
 * must fail: `storeRefused` (a refused delivery is recorded), `firstV1Only` (v1 read as one
 * field), `mismatchStatus` (the status for a header/body id mismatch), `duplicateStatus` (the
 * status of a duplicate's reply), `storeDuplicates` (a duplicate is answered duplicate:true but
 * stored as a row), `appliedLabel` (the outcome recorded for an applied delivery),
 * `doubleFulfilment` (two fulfilments on entering paid), `paidToPaid` (paid → paid applied
 * again, no new fulfilment), `fulfilAfterRefund` (a stale paid after a refund still makes a
 * fulfilment), `refundKeepsFulfilment` (a refund after payment neither cancels nor revokes),
 * `refundDropsFulfilment` (a refund after payment deletes the fulfilment, as if never made),
 * `storeUnderHeaderId` (a refused id mismatch recorded under the header's id),
 * `doubled` (reconciliation reports a doubled invoice).
 */
async function startBrokenReceiver({ secret = DEV_SECRET, token = "broken-admin-token", dedupe = false, orders, oldRefundTable = false, faults = {} } = {}) {
  const deliveries = []; // no unique key on event_id: the broken part
  const resources = new Map();
  const seen = { webhook: 0, admin: [] };
  const now = () => new Date().toISOString();
  const reply = (res, status, body) => {
    res.writeHead(status, { "content-type": "application/json" });
    res.end(body === undefined ? "" : JSON.stringify(body));
  };
  const verify = (header, body) => {
    const parts = String(header ?? "").split(",").map((p) => p.trim().split("="));
    const t = parts.find(([k]) => k === "t")?.[1];
    const v1s = parts.filter(([k]) => k === "v1").map(([, v]) => v).slice(0, faults.firstV1Only ? 1 : undefined);
    if (!t || v1s.length === 0 || Math.abs(Date.now() / 1000 - Number(t)) > 300) return false;
    const want = createHmac("sha256", Buffer.from(secret, "utf8")).update(`${t}.`).update(body).digest();
    return v1s.some((v) => {
      const got = Buffer.from(v, "hex");
      return got.length === want.length && timingSafeEqual(got, want);
    });
  };
  const dispatch = async (r, f) => {
    if (!orders || f.order_ref == null) return;
    for (let copy = 0; copy < (orders.newIdPerAttempt ? 2 : 1); copy++) {
      const id = orders.newIdPerAttempt ? randomId("eff_") : f.id;
      const body = JSON.stringify({ id, kind: f.kind, resource_id: r.id, order_ref: f.order_ref, license_code: f.license_code, amount: "49.00", currency: "USDT", cause: f.cause, created_at: f.created_at });
      const ts = Math.floor(Date.now() / 1000);
      await fetch(orders.url, {
        method: "POST",
        headers: { "content-type": "application/json", "webhook-id": id, "webhook-timestamp": String(ts), "webhook-signature": standardWebhooksSign(orders.secret, id, ts, body), "idempotency-key": id },
        body,
      });
    }
  };
  // the guarded transition (intact): paid only once, one fulfilment on first entry
  const transition = async (id, to, cause, orderRef) => {
    let r = resources.get(id);
    if (!r) resources.set(id, (r = { id, kind: "invoice", status: "created", effects: [], history: [] }));
    if (to === "paid" && r.status === "paid" && faults.paidToPaid) {
      r.history.push({ state: "paid", cause, at: now() });
      return true;
    }
    if (to === "paid" && r.status === "refunded" && faults.fulfilAfterRefund) {
      r.effects.push({ id: randomId("eff_"), kind: "fulfilment", created_at: now(), order_ref: orderRef ?? null, license_code: randomBytes(16).toString("hex"), cause });
      return false;
    }
    if (to === "paid" && r.status !== "paid" && r.status !== "refunded") {
      r.status = "paid";
      r.history.push({ state: "paid", cause, at: now() });
      const f = { id: randomId("eff_"), kind: "fulfilment", created_at: now(), order_ref: orderRef ?? null, license_code: randomBytes(16).toString("hex"), cause };
      r.effects.push(f);
      if (faults.doubleFulfilment) r.effects.push({ ...f, id: randomId("eff_"), license_code: randomBytes(16).toString("hex") });
      await dispatch(r, f);
      return true;
    }
    // a later event brings the order_ref a fulfilment made by hand was waiting for (§7)
    const waiting = r.effects.find((e) => e.kind === "fulfilment" && e.order_ref == null);
    if (waiting && orderRef) {
      waiting.order_ref = orderRef;
      await dispatch(r, waiting);
    }
    return false;
  };
  const server = createServer(async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const body = Buffer.concat(chunks);
    const url = new URL(req.url, "http://x");
    if (url.pathname === "/webhooks/paymos") {
      if (req.method !== "POST") return reply(res, 405);
      seen.webhook++;
      // (storeRefused / storeDuplicates: a row written for a request that must leave none)
      // (storeUnderHeaderId: under the header's id rather than the body's)
      const stray = (eventId) => {
        const e = JSON.parse(body.toString("utf8"));
        deliveries.push({ event_id: eventId ?? e.event_id, resource_id: e.data.id, event_type: e.type, received_at: now(), processed_at: null, outcome: null });
      };
      if (!verify(req.headers["x-webhook-signature"], body)) {
        if (faults.storeRefused) stray();
        return reply(res, 401, { error: "signature_mismatch" });
      }
      const env = JSON.parse(body.toString("utf8"));
      if (req.headers["x-webhook-id"] !== env.event_id) {
        if (faults.storeRefused) stray();
        if (faults.storeUnderHeaderId) stray(req.headers["x-webhook-id"]);
        return reply(res, faults.mismatchStatus ?? 400, { error: "id_mismatch" });
      }
      if (dedupe && deliveries.some((d) => d.event_id === env.event_id)) {
        if (faults.storeDuplicates) stray();
        return reply(res, faults.duplicateStatus ?? 200, { received: true, duplicate: true });
      }
      const resourceId = env.data.id;
      // the row first, synchronously (the dedupe check above and this insert are one step)
      const row = { event_id: env.event_id, resource_id: resourceId, event_type: env.type, received_at: now(), processed_at: null, outcome: null };
      deliveries.push(row);
      const before = resources.get(resourceId);
      const existed = before?.status === "paid";
      let applied = false;
      if (env.type === "invoice.paid") applied = await transition(resourceId, "paid", env.event_id, env.data.order_ref);
      else if (env.type === "invoice.created" && !before) {
        resources.set(resourceId, { id: resourceId, kind: "invoice", status: "created", effects: [], history: [{ state: "created", cause: env.event_id, at: now() }] });
        applied = true;
      } else if (env.type === "invoice.refunded" && before?.status !== "refunded" && !(oldRefundTable && before?.status !== "paid")) {
        // (oldRefundTable: the table before its amendment, refunded only from paid)
        // a refund is entered from every state but refunded; a paid after it is stale
        const r = before ?? { id: resourceId, kind: "invoice", status: "created", effects: [], history: [] };
        resources.set(resourceId, r);
        r.status = "refunded";
        r.history.push({ state: "refunded", cause: env.event_id, at: now() });
        applied = true;
        // a fulfilment made is taken back: a revocation, sent after it
        const f = r.effects.find((e) => e.kind === "fulfilment");
        if (f && faults.refundKeepsFulfilment) f.dispatch = "pending";
        else if (f && faults.refundDropsFulfilment) r.effects.splice(r.effects.indexOf(f), 1);
        else if (f) {
          const revocation = { id: randomId("eff_"), kind: "revocation", created_at: now(), order_ref: f.order_ref, license_code: null, cause: env.event_id };
          r.effects.push(revocation);
          await dispatch(r, revocation);
        }
      }
      row.outcome = applied ? (faults.appliedLabel ?? "applied") : existed || before ? "stale" : "ignored";
      row.processed_at = now();
      return reply(res, 200, { received: true, duplicate: false });
    }
    if (!url.pathname.startsWith("/admin/api/")) return reply(res, 404, { error: "not_found" });
    if (req.headers.authorization !== `Bearer ${token}`) return reply(res, 401, { error: "unauthorized" });
    const p = url.pathname.slice("/admin/api".length);
    seen.admin.push(`${req.method} ${p}`);
    let m;
    if (req.method === "GET" && p === "/deliveries") {
      const rid = url.searchParams.get("resource_id");
      return reply(res, 200, { data: deliveries.filter((d) => !rid || d.resource_id === rid).reverse(), next_cursor: null });
    }
    if (req.method === "GET" && (m = p.match(/^\/deliveries\/([^/]+)$/))) {
      const d = deliveries.find((x) => x.event_id === m[1]);
      return d ? reply(res, 200, d) : reply(res, 404, { error: "not_found" });
    }
    if (req.method === "GET" && (m = p.match(/^\/resources\/([^/]+)$/))) {
      const r = resources.get(m[1]);
      return r ? reply(res, 200, r) : reply(res, 404, { error: "not_found" });
    }
    if (req.method === "POST" && (m = p.match(/^\/resources\/([^/]+)\/transition$/))) {
      const b = JSON.parse(body.toString("utf8"));
      const applied = await transition(m[1], b.to, b.reason, b.order_ref);
      return reply(res, 200, { applied, status: resources.get(m[1]).status });
    }
    if (req.method === "POST" && p === "/reconcile") {
      const doubled = faults.doubled ? [{ id: "inv_doubled1", fulfilments: 2 }] : [];
      return reply(res, 200, { checked: 0, pages: 1, missing: [], doubled, truncated: false, ok: !faults.doubled });
    }
    return reply(res, 404, { error: "not_found" });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    token,
    deliveries,
    resources,
    seen,
    close: () => new Promise((resolve) => server.close(resolve)),
  };
}

/**
 * A Standard Webhooks signer written here from the specification (node:crypto only),
 * independent of the Rust one under test: v1,<base64 HMAC-SHA256(key, "<id>.<ts>.<body>")>
 * where the key is the base64 after "whsec_".
 */
function standardWebhooksSign(secret, id, ts, body) {
  const key = Buffer.from(secret.slice("whsec_".length), "base64");
  return "v1," + createHmac("sha256", key).update(`${id}.${ts}.`).update(body).digest("base64");
}

/** Starts `paymos orders` on a free port; resolves with its URL and its stdout so far. */
async function startOrders(args) {
  needBin();
  const port = await freePort();
  const child = spawn(BIN, ["orders", "--port", String(port), "--quiet", ...args], { stdio: ["ignore", "pipe", "pipe"] });
  children.add(child);
  const out = { text: "" };
  child.stdout.on("data", (d) => (out.text += d));
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`paymos orders did not start: ${out.text}`)), 10000);
    const onData = () => {
      const m = out.text.match(/listening on (http:\/\/127\.0\.0\.1:\d+)/);
      if (m) {
        clearTimeout(timer);
        child.stdout.off("data", onData);
        resolve(m[1]);
      }
    };
    child.stdout.on("data", onData);
    child.on("exit", (code) => reject(new Error(`paymos orders exited with ${code}: ${out.text}`)));
  });
  return { url, out, child };
}

describe("against the worker", () => {
  test("paymos check: all eight idempotency steps pass against the worker, reconciliation included", async () => {
    const { w, sandboxUrl, ADMIN_TOKEN } = await worker();
    const r = await paymos(["check", "--to", w.url, "--admin-token", ADMIN_TOKEN, "--sandbox", sandboxUrl, "--json"]);
    assert.ok(r.json, `not JSON: ${r.stdout}\n${r.stderr}`);
    const failed = r.json.steps.filter((s) => !s.pass);
    assert.deepEqual(failed, [], JSON.stringify(failed, null, 2));
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.json.pass, true);
    assert.deepEqual(r.json.steps.map((s) => s.step), [1, 2, 3, 4, 5, 6, 7, 8]);
    const [s1, s2, s3, s4, s5, s6, s7, s8] = r.json.steps;
    assert.equal(s1.evidence.fulfilments, 1);
    assert.match(s1.evidence.license_code, /\S/);
    assert.equal(s2.evidence.license_code, s1.evidence.license_code);
    assert.equal(s3.evidence.duplicate_false, 1);
    assert.equal(s3.evidence.duplicate_true, 19);
    assert.equal(s3.evidence.delivery_rows_for_event, 1);
    assert.equal(s4.evidence.wrong_secret_status, 401);
    assert.equal(s4.evidence.outcome, "stale");
    assert.equal(s5.evidence.partial, false);
    assert.deepEqual(s5.evidence.missing.map((m) => m.id), [s5.evidence.extra_invoice]);
    assert.deepEqual(s5.evidence.doubled, []);
    assert.equal(s5.evidence.extra_fulfilments, 1);
    assert.equal(s5.evidence.ok, false, "an invoice was missing");
    // two endpoints at once: one applied, three stale; the late events stale; one fulfilment
    assert.deepEqual([...s6.evidence.outcomes].sort(), ["applied", "stale", "stale", "stale"]);
    assert.equal(s6.evidence.fulfilments, 1);
    // the door: a rotated header and a re-spaced body accepted, the rest refused
    assert.equal(s7.evidence["a delivery with no signature"], 401);
    assert.equal(s7.evidence["a delivery signed an hour ago"], 401);
    assert.equal(s7.evidence["a header id that is not the body's"], 400);
    // refunds: pull mode here, so the fulfilment refunded after its payment is cancelled
    assert.deepEqual(s8.evidence.outcomes.map((o) => o[1]), ["applied", "applied", "stale"]);
    assert.ok(s8.evidence.effects_after_refund.some((e) => e.kind === "fulfilment" && e.dispatch === "cancelled"));
  });

  test("paymos check --orders against the worker: every fulfilment reaches a real `paymos orders` once, also after it failed for a while", async (t) => {
    needBin();
    const { startWorker, ADMIN_TOKEN } = await import("./helpers/worker.mjs");
    const orderSecret = "whsec_" + Buffer.from("check-orders-test-secret-0123456").toString("base64");
    // the order system refuses its first 4 requests: nothing may be lost, nothing doubled
    const orders = await startOrders(["--secret", orderSecret, "--fail-first", "4"]);
    const sandboxUrl = await startSandbox();
    const w = await startWorker({
      vars: { PAYMOS_API_BASE: sandboxUrl, ORDER_SYSTEM_URL: orders.url, ORDER_SYSTEM_SECRET: orderSecret, EFFECT_RETRY_SCALE: "0.0001" },
    });
    t.after(() => w.close());
    const r = await paymos(["check", "--to", w.url, "--admin-token", ADMIN_TOKEN, "--sandbox", sandboxUrl, "--orders", orders.url, "--json"]);
    assert.ok(r.json, `not JSON: ${r.stdout}\n${r.stderr}`);
    const failed = r.json.steps.filter((s) => !s.pass);
    assert.deepEqual(failed, [], JSON.stringify(failed, null, 2));
    assert.deepEqual(r.json.steps.map((s) => s.step), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    assert.equal(r.code, 0, r.stderr);
    const received = await (await fetch(`${orders.url}/received`)).json();
    const ids = received.shipped.map((x) => x.id);
    assert.equal(new Set(ids).size, ids.length, "each effect shipped once");
    assert.ok(received.requests > ids.length, "the failing stretch was retried through");
  });

  test("paymos check: a wrong admin token is refused with exit 2 and a clear message", async () => {
    const { w } = await worker();
    const r = await paymos(["check", "--to", w.url, "--admin-token", "not-the-token"]);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /the admin token was refused \(401\)/);
  });

  test("paymos check with a secret the receiver does not hold: stops after step 1, exit 2, nothing paid by hand", async () => {
    const { w, ADMIN_TOKEN } = await worker();
    const before = (await (await fetch(`${w.url}/admin/api/audit?limit=1000`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).json()).data.length;
    const r = await paymos(["check", "--to", w.url, "--admin-token", ADMIN_TOKEN, "--secret", "whsec_not_held_by_the_receiver", "--timeout-seconds", "3"]);
    assert.equal(r.code, 2, r.stdout + r.stderr);
    assert.match(r.stdout, /\[FAIL\] step 1:/);
    assert.doesNotMatch(r.stdout, /step 2:/);
    assert.match(r.stderr, /refused the check's signed delivery \(401\): give it the receiver's secret with --secret or PAYMOS_WEBHOOK_SECRET; the check stopped after step 1 and changed nothing by hand/);
    // no manual transition was written: the audit log holds nothing new
    const after = (await (await fetch(`${w.url}/admin/api/audit?limit=1000`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).json()).data.length;
    assert.equal(after, before);
  });

  test("paymos send: the same --event-id twice is new, then a duplicate", async () => {
    const { w } = await worker();
    const evt = randomId("evt_");
    const inv = randomId("inv_");
    const first = await paymos(["send", "invoice.paid", "--to", w.url, "--event-id", evt, "--resource", inv, "--json"]);
    assert.equal(first.code, 0, first.stderr);
    assert.equal(first.json.status, 200);
    assert.deepEqual(first.json.reply, { received: true, duplicate: false });
    assert.equal(first.json.event_id, evt);
    assert.equal(first.json.resource_id, inv);
    const second = await paymos(["send", "invoice.paid", "--to", w.url, "--event-id", evt, "--resource", inv, "--json"]);
    assert.equal(second.code, 0, second.stderr);
    assert.deepEqual(second.json.reply, { received: true, duplicate: true });
    const row = await w.db.prepare("SELECT count(*) AS n FROM webhook_delivery WHERE event_id = ?").bind(evt).first();
    assert.equal(row.n, 1);
  });

  test("paymos send: a rotation header (new + old) is accepted; an unknown secret gets 401 and exit 1", async () => {
    const { w, SECRET_OLD } = await worker();
    const rotated = await paymos(["send", "invoice.created", "--to", w.url, "--secret", "whsec_not_held_by_the_receiver", "--rotate-with", SECRET_OLD, "--json"]);
    assert.equal(rotated.code, 0, rotated.stdout + rotated.stderr);
    assert.equal(rotated.json.status, 200);
    const wrong = await paymos(["send", "invoice.paid", "--to", `${w.url}/webhooks/paymos`, "--secret", "whsec_not_held_by_the_receiver", "--json"]);
    assert.equal(wrong.code, 1);
    assert.equal(wrong.json.status, 401);
  });

  test("paymos deliver --ladder against the worker: delivered on attempt 1", async () => {
    const { w } = await worker();
    const r = await paymos(["deliver", "invoice.paid", "--to", w.url, "--ladder", "--time-scale", "3600", "--json"]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.json.result, "delivered");
    assert.equal(r.json.delivered_on_attempt, 1);
    assert.equal(r.json.attempts.length, 1);
    assert.equal(r.json.attempts[0].status, 200);
  });

  test("paymos load --mode e2e --orders-url: two runs against one order system each follow their own invoices to it", async (t) => {
    needBin();
    const { startWorker } = await import("./helpers/worker.mjs");
    const orderSecret = "whsec_" + Buffer.from("load-e2e-orders-test-secret-0123").toString("base64");
    const orders = await startOrders(["--secret", orderSecret]);
    const w = await startWorker({ vars: { ORDER_SYSTEM_URL: orders.url, ORDER_SYSTEM_SECRET: orderSecret } });
    t.after(() => w.close());
    const run = () => paymos(["load", "--to", w.url, "--mode", "e2e", "--concurrency", "2", "--requests", "6", "--orders-url", orders.url, "--open-loop", "--effect-timeout-seconds", "60", "--json"]);
    for (const round of [1, 2]) {
      const r = await run();
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.json.duplicate_false, 6, `round ${round}`);
      assert.equal(r.json.effects_seen, 6, `round ${round}: ${JSON.stringify(r.json)}`);
      assert.equal(r.json.effects_timed_out, 0, `round ${round}`);
      // each latency measured from its own invoice's POST to its shipment
      assert.ok(r.json.effect_latency_ms.p50 > 0, JSON.stringify(r.json.effect_latency_ms));
    }
    const received = await (await fetch(`${orders.url}/received`)).json();
    assert.equal(received.shipped_total, 12);
    assert.equal(received.shipped.length, 12);
    // a URL that is not `paymos orders` (here the receiver itself) is refused before any load
    const wrong = await paymos(["load", "--to", w.url, "--mode", "e2e", "--requests", "1", "--orders-url", w.url, "--open-loop", "--json"]);
    assert.equal(wrong.code, 2, wrong.stdout + wrong.stderr);
    assert.match(wrong.stderr, /cannot reach .*\/received: .*(shipped_total|JSON|404)/);
  });

  test("paymos load: a short duplicate run reports counts and percentiles; non-loopback targets are refused", async () => {
    const { w } = await worker();
    const r = await paymos(["load", "--to", w.url, "--mode", "duplicate", "--concurrency", "2", "--requests", "40", "--json"]);
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.json.requests, 40);
    assert.equal(r.json.errors, 0);
    assert.equal(r.json.non_2xx, 0);
    assert.equal(r.json.duplicate_true, 40);
    assert.ok(r.json.throughput_rps > 0);
    for (const k of ["p50", "p90", "p99", "max"]) assert.equal(typeof r.json.latency_ms[k], "number");
    const far = await paymos(["load", "--to", "http://192.0.2.1:8787", "--mode", "new", "--concurrency", "1", "--duration-seconds", "1"]);
    assert.equal(far.code, 2);
    assert.match(far.stderr, /only targets loopback/);
  });
});

describe("without the worker", () => {
  test("paymos check --orders: step 9 passes when each fulfilment reaches `paymos orders` once, fails when an outbox mints a new id per attempt", async (t) => {
    const ordersSecret = "whsec_" + randomBytes(32).toString("base64");
    const good = await startOrders(["--secret", ordersSecret]);
    const rx = await startBrokenReceiver({ dedupe: true, orders: { url: good.url, secret: ordersSecret } });
    t.after(() => rx.close());
    const r = await paymos(["check", "--to", rx.url, "--admin-token", rx.token, "--orders", good.url, "--timeout-seconds", "5", "--json"]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.deepEqual(r.json.steps.map((s) => [s.step, s.pass]), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].map((n) => [n, true]));
    const s9 = r.json.steps[8];
    assert.equal(s9.evidence.invoices.length, 3);
    assert.deepEqual(Object.values(s9.evidence.shipped_per_invoice), [1, 1, 1]);
    // step 4's fulfilment was made by hand without an order_ref and shipped only once it was known
    const received = await (await fetch(`${good.url}/received`)).json();
    assert.ok(received.shipped.every((x) => /^order_check_/.test(x.order_ref)));
    // step 10: the fulfilment refunded after its payment was followed by its revocation
    assert.deepEqual(r.json.steps[9].evidence.sent_for_refund_after_payment, ["fulfilment", "revocation"]);

    const other = await startOrders(["--secret", ordersSecret]);
    const broken = await startBrokenReceiver({ dedupe: true, orders: { url: other.url, secret: ordersSecret, newIdPerAttempt: true } });
    t.after(() => broken.close());
    const b = await paymos(["check", "--to", broken.url, "--admin-token", broken.token, "--orders", other.url, "--timeout-seconds", "5"]);
    assert.equal(b.code, 1, b.stdout + b.stderr);
    assert.match(b.stdout, /^\[FAIL\] step 9: the order system received each fulfilment exactly once/m);
    assert.match(b.stdout, /why: inv_\w+ was shipped 2 times \(effect ids eff_\w+, eff_\w+\)/);
    // and its refund sent two revocations under two ids
    assert.match(b.stdout, /why: 2 revocations were sent for inv_\w+/);
    assert.match(b.stdout, /^FAIL: 2 of 10 steps failed \(step 9, 10\)$/m);

    // the invoice table before its amendment (refunded only from paid): the refund that
    // overtakes its payment is stale, the paid after it ships goods for money returned
    const third = await startOrders(["--secret", ordersSecret]);
    const old = await startBrokenReceiver({ dedupe: true, orders: { url: third.url, secret: ordersSecret }, oldRefundTable: true });
    t.after(() => old.close());
    const o = await paymos(["check", "--to", old.url, "--admin-token", old.token, "--orders", third.url, "--timeout-seconds", "5"]);
    assert.equal(o.code, 1, o.stdout + o.stderr);
    assert.match(o.stdout, /^\[FAIL\] step 8: refunds: one that overtakes its payment ships nothing/m);
    assert.match(o.stdout, /why: invoice\.refunded was "stale", expected applied/);
    assert.match(o.stdout, /^\[FAIL\] step 10: the order system was sent nothing for the refund that overtook its payment/m);
    assert.match(o.stdout, /^FAIL: 2 of 10 steps failed \(step 8, 10\)$/m);
  });

  test("paymos orders: a Standard-Webhooks-signed effect ships once, a copy is dropped, a bad signature is 401", async () => {
    const secret = "whsec_" + randomBytes(32).toString("base64");
    const { url, out } = await startOrders(["--secret", secret]);
    const id = randomId("eff_");
    const effect = {
      id,
      kind: "fulfilment",
      resource_id: randomId("inv_"),
      order_ref: "order_1042",
      license_code: "LC-" + randomBytes(16).toString("hex"),
      amount: "49.00",
      currency: "USDT",
      cause: randomId("evt_"),
      created_at: new Date().toISOString(),
    };
    const body = JSON.stringify(effect);
    const post = async (sig, { key = id, ts = Math.floor(Date.now() / 1000) } = {}) => {
      const res = await fetch(`${url}/`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "webhook-id": id,
          "webhook-timestamp": String(ts),
          "webhook-signature": sig ?? standardWebhooksSign(secret, id, ts, body),
          "idempotency-key": key,
        },
        body,
      });
      return { status: res.status, json: await res.json() };
    };
    const first = await post();
    assert.deepEqual(first, { status: 200, json: { received: true, duplicate: false } });
    // a retry (signed afresh) is answered 200 but not shipped again
    const copy = await post();
    assert.deepEqual(copy, { status: 200, json: { received: true, duplicate: true } });
    // a rotation list whose matching entry is second
    const ts = Math.floor(Date.now() / 1000);
    const rotated = await post(`${standardWebhooksSign("whsec_" + randomBytes(32).toString("base64"), id, ts, body)} ${standardWebhooksSign(secret, id, ts, body)}`, { ts });
    assert.deepEqual(rotated, { status: 200, json: { received: true, duplicate: true } });
    // wrong secret, tampered signature, stale timestamp: 401
    const wrong = await post(standardWebhooksSign("whsec_" + randomBytes(32).toString("base64"), id, ts, body), { ts });
    assert.equal(wrong.status, 401);
    assert.equal(wrong.json.error, "signature_mismatch");
    const stale = await post(undefined, { ts: ts - 3600 });
    assert.equal(stale.status, 401);
    const res = await fetch(`${url}/`, { method: "POST", headers: { "content-type": "application/json" }, body });
    assert.equal(res.status, 401);

    const received = await (await fetch(`${url}/received`)).json();
    assert.equal(received.shipped.length, 1);
    assert.deepEqual(
      (({ id, kind, resource_id, order_ref, license_code }) => ({ id, kind, resource_id, order_ref, license_code }))(received.shipped[0]),
      (({ id, kind, resource_id, order_ref, license_code }) => ({ id, kind, resource_id, order_ref, license_code }))(effect),
    );
    assert.equal(received.requests, 6);
    assert.equal(received.duplicates, 2);
    assert.equal(received.rejected, 3);
    // one line printed per shipped effect
    const lines = out.text.split("\n").filter((l) => l.startsWith("shipped "));
    assert.deepEqual(lines, [`shipped ${id} kind=fulfilment resource_id=${effect.resource_id} order_ref=order_1042 license_code=${effect.license_code}`]);
  });

  test("paymos orders: --fail-first, then /control to hang (the client times out) and to recover", async () => {
    const secret = "whsec_" + randomBytes(24).toString("base64");
    const { url } = await startOrders(["--secret", secret, "--fail-first", "2", "--seed", "1"]);
    const id = randomId("eff_");
    const body = JSON.stringify({ id, kind: "credit", resource_id: randomId("pcd_"), order_ref: null, license_code: null });
    const post = async (timeoutMs = 5000) => {
      const ts = Math.floor(Date.now() / 1000);
      const res = await fetch(url, {
        method: "POST",
        headers: { "webhook-id": id, "webhook-timestamp": String(ts), "webhook-signature": standardWebhooksSign(secret, id, ts, body), "idempotency-key": id },
        body,
        signal: AbortSignal.timeout(timeoutMs),
      });
      return res.status;
    };
    assert.equal(await post(), 500);
    assert.equal(await post(), 500);
    assert.equal(await post(), 200);
    const control = async (c) => (await fetch(`${url}/control`, { method: "POST", body: JSON.stringify(c) })).json();
    assert.deepEqual((await control({ hang: true })).mode, { fail_first: 0, fail_rate: 0, hang: true });
    await assert.rejects(post(500), (e) => e.name === "TimeoutError");
    assert.equal((await control({ hang: false })).mode.hang, false);
    assert.equal(await post(), 200);
    const received = await (await fetch(`${url}/received`)).json();
    assert.equal(received.shipped.length, 1);
    assert.equal(received.failed, 2);
    assert.equal(received.hung, 1);
    assert.equal(received.duplicates, 1);
  });

  test("paymos check (negative control): a receiver whose door dedupe is broken fails step 2 and exits 1", async (t) => {
    const rx = await startBrokenReceiver();
    t.after(() => rx.close());
    const r = await paymos(["check", "--to", rx.url, "--admin-token", rx.token, "--timeout-seconds", "5", "--json"]);
    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.ok(r.json, `not JSON: ${r.stdout}\n${r.stderr}`);
    assert.equal(r.json.pass, false);
    const byStep = Object.fromEntries(r.json.steps.map((s) => [s.step, s]));
    // step 1 passes: the fake is good enough to reach the dedupe step (a check that failed
    // earlier, e.g. on an admin call the fake lacks, would prove nothing about dedupe)
    assert.equal(byStep[1].pass, true, JSON.stringify(byStep[1]));
    assert.equal(byStep[1].evidence.outcome, "applied");
    assert.equal(byStep[1].evidence.fulfilments, 1);
    // and fails where the dedupe is: the repeat is not recognised, nor are the 19 concurrent copies
    assert.equal(byStep[2].pass, false);
    assert.equal(byStep[2].reason, "the repeated delivery was not answered duplicate:true");
    assert.deepEqual(byStep[2].evidence.reply, { received: true, duplicate: false });
    assert.equal(byStep[3].pass, false);
    assert.equal(byStep[3].evidence.duplicate_false, 20);
    assert.match(byStep[3].reason, /20 copies were answered duplicate:false, expected exactly 1/);
    // the state guard is intact, so step 4 passes: the failure is the door's alone
    assert.equal(byStep[4].pass, true, JSON.stringify(byStep[4]));
    // without --sandbox step 5 passes only what it could check, and says what it did not prove
    assert.equal(byStep[5].partial, true);
    assert.match(byStep[5].not_proved, /^this proved nothing about missing invoices/);
    assert.deepEqual(r.json.partial_steps, [5]);
    // what check actually called on the fake
    assert.ok(rx.seen.webhook >= 1 + 1 + 20 + 2, `${rx.seen.webhook} webhook requests`);
    assert.ok(rx.seen.admin.includes("POST /reconcile"));

    // the text report names the failing steps and why
    const text = await paymos(["check", "--to", rx.url, "--admin-token", rx.token, "--timeout-seconds", "5"]);
    assert.equal(text.code, 1, text.stdout + text.stderr);
    assert.match(text.stdout, /^\[pass\] step 1: /m);
    assert.match(text.stdout, /^\[FAIL\] step 2: the same delivery again is a duplicate and changes nothing$/m);
    assert.match(text.stdout, /^ +why: the repeated delivery was not answered duplicate:true$/m);
    assert.match(text.stdout, /^\[FAIL\] step 3: 20 concurrent identical copies/m);
    assert.match(text.stdout, /^\[PART\] step 5: .*missing invoices not checked, no --sandbox/m);
    assert.match(text.stdout, /^ +NOT PROVED: this proved nothing about missing invoices/m);
    assert.match(text.stdout, /^FAIL: 2 of 8 steps failed \(step 2, 3\)$/m);
  });

  test("paymos check (control for the negative control): the same fake with its door dedupe fixed passes, step 5 partial", async (t) => {
    const rx = await startBrokenReceiver({ dedupe: true });
    t.after(() => rx.close());
    const r = await paymos(["check", "--to", rx.url, "--admin-token", rx.token, "--timeout-seconds", "5"]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    for (const n of [1, 2, 3, 4, 6, 7, 8]) assert.match(r.stdout, new RegExp(`^\\[pass\\] step ${n}: `, "m"));
    assert.match(r.stdout, /^\[PART\] step 5: /m);
    assert.match(r.stdout, /^pass: all 8 steps passed\nbut step 5 was PARTIAL: this proved nothing about missing invoices/m);
    assert.ok([...rx.resources.values()].every((x) => x.effects.filter((e) => e.kind === "fulfilment").length <= 1));
  });

  // Negative controls for the steps past the door dedupe: each fake breaks one rule per step
  // (faults of one step in separate runs: a step stops at its first failure), and check must
  // fail exactly there, for that reason, with exit 1.
  async function checkFake(t, faults) {
    const rx = await startBrokenReceiver({ dedupe: true, faults });
    t.after(() => rx.close());
    const r = await paymos(["check", "--to", rx.url, "--admin-token", rx.token, "--timeout-seconds", "3", "--json"]);
    assert.equal(r.code, 1, r.stdout + r.stderr);
    assert.ok(r.json, `not JSON: ${r.stdout}\n${r.stderr}`);
    return Object.fromEntries(r.json.steps.map((s) => [s.step, s]));
  }
  const failsWith = (step, re) => {
    assert.equal(step.pass, false, JSON.stringify(step));
    assert.match(step.reason, re);
  };

  test("paymos check (negative controls): refused requests left on record, a doubled reconcile report", async (t) => {
    const s = await checkFake(t, { storeRefused: true, doubled: true });
    failsWith(s[4], /the refused delivery is on record/); // step 4: 404 required after a 401
    failsWith(s[5], /doubled is not empty/); // step 5 (partial): a doubled invoice fails it
    failsWith(s[7], /a delivery with no signature was refused, yet evt_\w+ is on record/);
  });

  test("paymos check (negative controls): v1 read as one field, a duplicate stored as a row, a refund that leaves the fulfilment", async (t) => {
    const s = await checkFake(t, { firstV1Only: true, storeDuplicates: true, refundKeepsFulfilment: true });
    failsWith(s[3], /lists 20 rows for evt_\w+, expected 1/); // step 3: one row per event
    // step 7: the rotation header's matching v1 is the second one
    failsWith(s[7], /a header whose second v1 matches \(rotation\) was answered 401/);
    failsWith(s[8], /neither cancelled nor revoked/); // a pending fulfilment is not cancelled
  });

  test("paymos check (negative controls): an id mismatch answered 401, a fulfilment made for a refunded invoice", async (t) => {
    const s = await checkFake(t, { mismatchStatus: 401, fulfilAfterRefund: true });
    failsWith(s[7], /a header id that is not the body's was answered 401, expected 400/);
    failsWith(s[8], /a fulfilment was made for money that went back/);
  });

  test("paymos check (negative controls): a refund after payment that deletes the fulfilment, a mismatch kept under the header's id", async (t) => {
    // no fulfilment left is not "all cancelled": the order system may have shipped it
    const s = await checkFake(t, { refundDropsFulfilment: true, storeUnderHeaderId: true });
    failsWith(s[7], /a header id that is not the body's was refused, yet evt_\w+ is on record/);
    failsWith(s[8], /0 fulfilments on record, expected the 1 made at payment/);
  });

  test("paymos check (negative controls): two fulfilments per payment, a guard that re-applies paid", async (t) => {
    const s = await checkFake(t, { doubleFulfilment: true, paidToPaid: true });
    failsWith(s[1], /^2 fulfilments, expected exactly 1$/); // step 1: exactly one, not at least one
    failsWith(s[4], /outcome is "applied", expected "stale"/); // paid by hand, then delivered
    failsWith(s[6], /expected one applied and the others stale/); // 4 endpoints, one payment
  });

  test("paymos check (negative controls): an applied delivery recorded under another outcome, duplicates answered 409", async (t) => {
    const s = await checkFake(t, { appliedLabel: "processed", duplicateStatus: 409 });
    failsWith(s[1], /outcome is "processed", expected "applied"/);
    failsWith(s[3], /^1 of 20 copies were answered 2xx$/); // every copy must be 2xx, not just one
  });

  test("paymos send: an unreachable URL says so and exits 2", async () => {
    const port = await freePort();
    const r = await paymos(["send", "invoice.paid", "--to", `http://127.0.0.1:${port}`]);
    assert.equal(r.code, 2);
    assert.match(r.stderr, new RegExp(`cannot reach http://127\\.0\\.0\\.1:${port}/webhooks/paymos: connection refused`));
  });

  test("paymos deliver --ladder: a refusing endpoint gets all 11 attempts, then failed (time-scaled)", async () => {
    const port = await freePort();
    const r = await paymos(["deliver", "invoice.paid", "--to", `http://127.0.0.1:${port}`, "--ladder", "--time-scale", "3600", "--json"], { timeoutMs: 60000 });
    assert.equal(r.code, 1, r.stderr);
    assert.equal(r.json.result, "failed");
    assert.equal(r.json.attempts.length, 11);
    assert.deepEqual(r.json.attempts.map((a) => a.attempt), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
    for (const a of r.json.attempts) assert.match(a.error, /connection refused/);
    // each attempt waits for its rung: offset / 3600 (the 11th: 16 h / 3600 = 16 s after the first);
    // only lower bounds, since a loaded machine may run late but never early
    const offsets = [0, 60, 180, 420, 900, 1800, 3600, 7200, 14400, 28800, 57600];
    r.json.attempts.forEach((a, i) => assert.ok(a.at_ms >= (offsets[i] * 1000) / 3600 - 100, JSON.stringify(a)));
    const at = r.json.attempts.map((a) => a.at_ms);
    assert.deepEqual(at, [...at].sort((x, y) => x - y), "attempts in order");
  });

  test("paymos deliver --ladder: each retry is signed afresh (same id and bytes) and numbered in X-Webhook-Attempt", async (t) => {
    // §1: every retry is signed with the current time (a signature made once would fall out
    // of the 300 s tolerance on the real ladder); X-Webhook-Attempt counts from 1
    const seen = [];
    const srv = createServer(async (req, res) => {
      const chunks = [];
      for await (const c of req) chunks.push(c);
      const body = Buffer.concat(chunks);
      const sig = String(req.headers["x-webhook-signature"]);
      const ts = sig.match(/t=(\d+)/)[1];
      const want = createHmac("sha256", DEV_SECRET).update(`${ts}.`).update(body).digest("hex");
      seen.push({ id: req.headers["x-webhook-id"], attempt: req.headers["x-webhook-attempt"], t: Number(ts), valid: sig.includes(`v1=${want}`), body: body.toString() });
      res.writeHead(seen.length < 8 ? 500 : 200, { "content-type": "application/json" });
      res.end(JSON.stringify({ received: true, duplicate: false }));
    });
    await new Promise((resolve) => srv.listen(0, "127.0.0.1", resolve));
    t.after(() => srv.close());
    // attempts 1 to 8 at 0 … 2 s (time scale 3600): delivered on the 8th
    const r = await paymos(["deliver", "invoice.paid", "--to", `http://127.0.0.1:${srv.address().port}`, "--ladder", "--time-scale", "3600", "--json"], { timeoutMs: 60000 });
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.equal(r.json.delivered_on_attempt, 8);
    assert.deepEqual(seen.map((x) => x.attempt), ["1", "2", "3", "4", "5", "6", "7", "8"]);
    assert.ok(seen.every((x) => x.valid && x.id === r.json.event_id && x.body === seen[0].body), JSON.stringify(seen));
    assert.ok(seen[7].t > seen[0].t, `the 8th attempt (2 s later) carries t=${seen[7].t}, the 1st t=${seen[0].t}`);
  });

  test("paymos sandbox: the invoice API needs the bearer key", async () => {
    const sandboxUrl = await startSandbox();
    const res = await fetch(`${sandboxUrl}/v1/invoices?status=paid&limit=100`);
    assert.equal(res.status, 401);
    const ok = await fetch(`${sandboxUrl}/v1/invoices?status=paid&limit=100`, { headers: { authorization: "Bearer sk_test_sandbox" } });
    assert.equal(ok.status, 200);
    const page = await ok.json();
    assert.ok(Array.isArray(page.data));
    assert.equal(typeof page.has_more, "boolean");
  });

  test("paymos sandbox: paid_since, cursor paging, and the stuck-cursor / fail-after-pages faults", async () => {
    const sandboxUrl = await startSandbox(["--fail-after-pages", "3"]);
    const auth = { authorization: "Bearer sk_test_sandbox" };
    const seed = await fetch(`${sandboxUrl}/sandbox/invoices`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify([
        { id: "inv_a1", paid_at: 1000 },
        { id: "inv_a2", paid_at: 2000 },
        { id: "inv_a3", paid_at: 3000 },
        { id: "inv_a4", paid_at: 4000, order_ref: "order_a4" },
      ]),
    });
    assert.equal(seed.status, 200);
    const list = async (q) => {
      const res = await fetch(`${sandboxUrl}/v1/invoices?status=paid&${q}`, { headers: auth });
      return { status: res.status, body: await res.json() };
    };
    let r = await list("limit=1&paid_since=2000");
    assert.deepEqual([r.body.data.map((i) => i.id), r.body.has_more], [["inv_a2"], true]);
    r = await list("limit=2&paid_since=2000&starting_after=inv%5Fa2"); // URL-encoded cursor
    assert.deepEqual([r.body.data.map((i) => i.id), r.body.has_more], [["inv_a3", "inv_a4"], false]);
    assert.equal(r.body.data[1].order_ref, "order_a4");
    assert.equal(r.body.data[1].paid_at, 4000);
    r = await list("limit=100");
    assert.equal(r.body.data.length, 4);
    r = await list("limit=1"); // the 4th page: --fail-after-pages 3
    assert.equal(r.status, 500);
    assert.equal(r.body.error.code, "sandbox_fault");
    // the control endpoint: stuck cursor (and the page count reset)
    const c = await fetch(`${sandboxUrl}/sandbox/control`, { method: "POST", body: JSON.stringify({ stuck_cursor: true }) });
    assert.deepEqual(await c.json(), { stuck_cursor: true, fail_after_pages: null, pages_served: 0 });
    r = await list("limit=2&starting_after=inv_a2");
    assert.deepEqual([r.body.data.map((i) => i.id), r.body.has_more], [["inv_a1", "inv_a2"], true]);
  });
});

test("output piped into head ends quietly: no panic, no backtrace (SIGPIPE as other tools)", async () => {
  needBin();
  // a ladder of attempts to a closed port: a line per attempt, head takes the first
  const child = spawn("bash", ["-c", `'${BIN}' deliver invoice.paid --to http://127.0.0.1:1 --ladder --time-scale 3600 | head -1; echo "status \${PIPESTATUS[0]}" >&2`], { stdio: ["ignore", "pipe", "pipe"] });
  const r = await finished(child, "paymos … | head -1", 60000);
  assert.equal(r.stdout.trim(), "POST http://127.0.0.1:1/webhooks/paymos");
  assert.doesNotMatch(r.stderr, /panicked|backtrace|Broken pipe/);
  // killed by SIGPIPE (128 + 13), as `yes | head` is
  assert.match(r.stderr, /^status 141$/m);
});
