// The `paymos` CLI (crates/paymos-cli) against the built worker in workerd: its `check`
// runs the seed's five-step idempotency proof, with `paymos sandbox` standing in for the
// provider API that reconciliation calls. Needs `cargo build -p paymos-cli --release` first.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import { startWorker, freePort, ROOT, ADMIN_TOKEN, SECRET_OLD } from "./helpers/worker.mjs";
import { randomId } from "./helpers/paymos.mjs";

const BIN = path.join(ROOT, "target/release/paymos");
const children = new Set();
let w;
let sandboxUrl;

/** Runs the CLI to completion; never rejects on a non-zero exit. */
function paymos(args, { timeoutMs = 120000 } = {}) {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    // the defaults, not whatever the developer's shell exports
    const env = { ...process.env };
    delete env.PAYMOS_WEBHOOK_SECRET;
    delete env.PAYMOS_ADMIN_TOKEN;
    const child = spawn(BIN, args, { stdio: ["ignore", "pipe", "pipe"], env });
    children.add(child);
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`paymos ${args.join(" ")} ran longer than ${timeoutMs} ms\n${stdout}\n${stderr}`));
    }, timeoutMs);
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      children.delete(child);
      let json;
      try {
        json = JSON.parse(stdout);
      } catch {
        json = undefined;
      }
      resolve({ code, stdout, stderr, json, ms: Date.now() - started });
    });
  });
}

/** Starts `paymos sandbox` on a free port and waits for its "listening on" line. */
async function startSandbox() {
  const port = await freePort();
  const child = spawn(BIN, ["sandbox", "--port", String(port), "--quiet"], { stdio: ["ignore", "pipe", "pipe"] });
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

before(async () => {
  assert.ok(existsSync(BIN), `${BIN} is missing: run \`cargo build -p paymos-cli --release\` first`);
  sandboxUrl = await startSandbox();
  w = await startWorker({ vars: { PAYMOS_API_BASE: sandboxUrl } });
});

after(async () => {
  for (const c of children) c.kill("SIGKILL");
  await w?.close();
});

test("paymos check: all five idempotency steps pass against the worker, reconciliation included", async () => {
  const r = await paymos(["check", "--to", w.url, "--admin-token", ADMIN_TOKEN, "--sandbox", sandboxUrl, "--json"]);
  assert.ok(r.json, `not JSON: ${r.stdout}\n${r.stderr}`);
  const failed = r.json.steps.filter((s) => !s.pass);
  assert.deepEqual(failed, [], JSON.stringify(failed, null, 2));
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.json.pass, true);
  assert.deepEqual(r.json.steps.map((s) => s.step), [1, 2, 3, 4, 5]);
  const [s1, s2, s3, s4, s5] = r.json.steps;
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
});

test("paymos check: a wrong admin token is refused with exit 2 and a clear message", async () => {
  const r = await paymos(["check", "--to", w.url, "--admin-token", "not-the-token"]);
  assert.equal(r.code, 2);
  assert.match(r.stderr, /the admin token was refused \(401\)/);
});

test("paymos send: the same --event-id twice is new, then a duplicate", async () => {
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
  const rotated = await paymos(["send", "invoice.created", "--to", w.url, "--secret", "whsec_not_held_by_the_receiver", "--rotate-with", SECRET_OLD, "--json"]);
  assert.equal(rotated.code, 0, rotated.stdout + rotated.stderr);
  assert.equal(rotated.json.status, 200);
  const wrong = await paymos(["send", "invoice.paid", "--to", `${w.url}/webhooks/paymos`, "--secret", "whsec_not_held_by_the_receiver", "--json"]);
  assert.equal(wrong.code, 1);
  assert.equal(wrong.json.status, 401);
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

test("paymos deliver --ladder against the worker: delivered on attempt 1", async () => {
  const r = await paymos(["deliver", "invoice.paid", "--to", w.url, "--ladder", "--time-scale", "3600", "--json"]);
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.json.result, "delivered");
  assert.equal(r.json.delivered_on_attempt, 1);
  assert.equal(r.json.attempts.length, 1);
  assert.equal(r.json.attempts[0].status, 200);
});

test("paymos sandbox: the invoice API needs the bearer key", async () => {
  const res = await fetch(`${sandboxUrl}/v1/invoices?status=paid&limit=100`);
  assert.equal(res.status, 401);
  const ok = await fetch(`${sandboxUrl}/v1/invoices?status=paid&limit=100`, { headers: { authorization: "Bearer sk_test_sandbox" } });
  assert.equal(ok.status, 200);
  const page = await ok.json();
  assert.ok(Array.isArray(page.data));
  assert.equal(typeof page.has_more, "boolean");
});

test("paymos load: a short duplicate run reports counts and percentiles; non-loopback targets are refused", async () => {
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
