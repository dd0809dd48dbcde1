// Every invocation stays within INVOCATION_BUDGET (interface §6; docs/decisions.md,
// "Invocation budget"): at the free plan's 50, a cron run with every backlog at once, an
// operator's full reconciliation, and a consumer batch that splits. Counted from outside the
// worker: its D1 calls (a batch is one), queue sends and R2 operations per invocation
// (bench/meter.mjs wraps the bindings), plus the requests its fetches made to this file's own
// provider and alert receiver (one invocation runs at a time here).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { startWorker, ROOT, eventually } from "./helpers/worker.mjs";
import { deliver, envelope, randomId, admin } from "./helpers/paymos.mjs";

const BUDGET = 50;
const API_KEY = "sk_test_sandbox";
const now = () => Math.floor(Date.now() / 1000);
let invoices = [];
let served = 0;
const servers = [];

/** A server on loopback answering `answer(url)`; counts what it served in `served`. */
async function stub(answer) {
  const s = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      served += 1;
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(answer(new URL(req.url, "http://x"))));
    });
  });
  await new Promise((r) => s.listen(0, "127.0.0.1", r));
  servers.push(s);
  return `http://127.0.0.1:${s.address().port}`;
}

let vars;
before(async () => {
  const provider = await stub((url) => {
    const after = url.searchParams.get("starting_after");
    const from = after ? invoices.findIndex((i) => i.id === after) + 1 : 0;
    return { data: invoices.slice(from, from + 100), has_more: from + 100 < invoices.length };
  });
  const alerts = await stub(() => ({}));
  vars = {
    INVOCATION_BUDGET: String(BUDGET),
    BENCH_METER: "1",
    PAYMOS_API_BASE: provider,
    PAYMOS_API_KEY: API_KEY,
    ALERT_WEBHOOK_URL: alerts,
    ALERT_WEBHOOK_SECRET: `whsec_${Buffer.from("a".repeat(32)).toString("base64")}`,
    ORDER_SYSTEM_URL: "http://127.0.0.1:9/orders",
    ORDER_SYSTEM_SECRET: `whsec_${Buffer.from("o".repeat(32)).toString("base64")}`,
    SWEEP_AFTER_SECONDS: "0",
  };
});
after(() => servers.forEach((s) => s.close()));

const metered = (extra = {}) => ({ scriptPath: path.join(ROOT, "bench/metered-ours.mjs"), ...extra });
const invocations = async (w) => (await fetch(`${w.url}/__bench/meter/invocations`)).json();
const reset = (w) => fetch(`${w.url}/__bench/meter/reset`);
/** What one invocation spent: D1 calls, queue sends, R2 operations, and `fetches`. */
const spent = (r, fetches) => r.d1_calls + Object.values(r.sent).reduce((n, s) => n + s.calls, 0) + r.r2_calls + fetches;
const paid = (n) => Array.from({ length: n }, () => ({ id: randomId("inv_"), object: "invoice", status: "paid", amount: "10.00", currency: "USDT", order_ref: "order_1", paid_at: now() - 3600 }));

/** Runs `fn` on the only invocation it starts; answers what that invocation spent. */
async function one(w, fn) {
  await reset(w);
  const before = served;
  const out = await fn();
  const list = await invocations(w);
  assert.equal(list.length, 1, JSON.stringify(list.map((r) => r.kind)));
  return { spent: spent(list[0], served - before), record: list[0], out };
}

test("a cron run with every backlog at once stays within the free plan's 50", async () => {
  const dir = await mkdtemp(path.join(tmpdir(), "paymos-budget-"));
  try {
    invoices = paid(300);
    // fulfilments left pending (no effects consumer), then deliveries left unprocessed
    let w = await startWorker({ vars, persistDir: dir, patch: (o) => delete o.queueConsumers["paymos-effects"] });
    try {
      for (let i = 0; i < 120; i++) assert.equal((await deliver(w.url, envelope("invoice.paid", randomId("inv_")))).status, 200);
      await eventually("the fulfilments", async () => (await w.db.prepare("SELECT count(*) AS n FROM effect").first()).n === 120, 60000);
    } finally {
      await w.close();
    }
    w = await startWorker({ vars, persistDir: dir, patch: (o) => (o.queueConsumers = {}), ...metered() });
    try {
      for (let i = 0; i < 120; i++) assert.equal((await deliver(w.url, envelope("invoice.created", randomId("inv_")))).status, 200);
      // bodies past retention for the archive; dead deliveries and effects for the alerts
      const old = new Date(Date.now() - 40 * 86400e3).toISOString();
      const rows = Array.from({ length: 60 }, (_, i) => envelope("invoice.created", randomId("inv_"), { created: now() - 40 * 86400 + i }));
      await w.db.batch(
        rows.map((e, i) =>
          w.db
            .prepare("INSERT INTO webhook_delivery (event_id, resource_id, event_type, body, received_at, processed_at, outcome) VALUES (?, ?, ?, ?, ?, ?, ?)")
            .bind(e.event_id, e.data.id, e.type, JSON.stringify(e), old, old, i % 3 ? "applied" : "dead"),
        ),
      );
      await w.db.prepare("UPDATE effect SET dispatch = 'dead', dead_at = ? WHERE id = (SELECT min(id) FROM effect)").bind(now()).run();

      const runs = [];
      for (const cron of ["17 3 * * *", "*/5 * * * *", "*/5 * * * *"]) runs.push(await one(w, () => w.scheduled(cron)));
      for (const r of runs) assert.ok(r.spent <= BUDGET, `spent ${r.spent}: ${JSON.stringify(r.record)}`);
      // and each step did its part
      const count = async (sql) => (await w.db.prepare(sql).first()).n;
      assert.ok(w.logs.some((l) => l.stage === "sweep" && /^requeued [1-9]/.test(l.outcome)), "deliveries swept");
      assert.ok(w.logs.some((l) => l.stage === "sweep_effects" && /^requeued [1-9]/.test(l.outcome)), "effects swept");
      assert.ok((await count("SELECT count(*) AS n FROM resource WHERE id IN (SELECT value FROM json_each(?))".replace("?", `'${JSON.stringify(invoices.map((i) => i.id))}'`))) > 0, "invoices brought to paid");
      assert.ok((await count("SELECT count(*) AS n FROM webhook_delivery WHERE archived_at IS NOT NULL")) > 0, "bodies archived");
      const sent = (await admin(w.url, "GET", "/alerts")).json.data.filter((a) => a.sends > 0 || a.sent_at);
      assert.ok(sent.length >= 1, "an alert sent");
      assert.ok(w.logs.some((l) => l.stage === "alert" && l.outcome === "deferred"), "the rest deferred to the next run");
    } finally {
      await w.close();
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test("an operator's full reconciliation stays within it, with the audit row", async () => {
  invoices = paid(300);
  const w = await startWorker({ vars, patch: (o) => (o.queueConsumers = {}), ...metered() });
  try {
    const r = await one(w, () => admin(w.url, "POST", "/reconcile", { full: true }));
    assert.equal(r.out.status, 200);
    assert.ok(r.out.json.missing.length >= 10, `${r.out.json.missing.length} brought to paid`);
    assert.equal(r.out.json.continues, true);
    assert.ok(r.spent <= BUDGET, `spent ${r.spent}: ${JSON.stringify(r.record)}`);
  } finally {
    await w.close();
  }
});

/**
 * 50 deliveries stored in `dir` and not yet processed (their messages never sent: the cron's
 * sweeper sends them), the 25th's body valid JSON but no longer an envelope. Returns their ids.
 */
async function fiftyStored(dir) {
  const w = await startWorker({ vars, persistDir: dir, patch: (o) => (o.queueConsumers = {}) });
  const ids = [];
  try {
    const stmts = [];
    for (let i = 0; i < 50; i++) {
      const e = envelope("invoice.created", randomId("inv_"));
      ids.push(e.event_id);
      const body = i === 24 ? JSON.stringify({ event_id: e.event_id }) : JSON.stringify(e);
      stmts.push(w.db.prepare("INSERT INTO incoming_delivery (event_id, resource_id, event_type, body) VALUES (?, ?, ?, ?)").bind(e.event_id, e.data.id, e.type, body));
    }
    await w.db.batch(stmts);
  } finally {
    await w.close();
  }
  return ids;
}

const processedAmong = async (w, ids) =>
  (await w.db.prepare("SELECT count(*) AS n FROM webhook_delivery WHERE processed_at IS NOT NULL AND event_id IN (SELECT value FROM json_each(?))").bind(JSON.stringify(ids)).first()).n;

test("a batch of 50 that splits over a stored body that does not parse stays within it; the rest are retried", async () => {
  const dir = await mkdtemp(path.join(tmpdir(), "paymos-budget-"));
  try {
    const ids = await fiftyStored(dir);
    // the deliveries consumer only, its retries far off (they would be invocations of their own)
    const w = await startWorker({
      vars: { ...vars, QUEUE_RETRY_BASE_SECONDS: "600" },
      persistDir: dir,
      patch: (o) => (o.queueConsumers = { "paymos-deliveries": o.queueConsumers["paymos-deliveries"] }),
      ...metered(),
    });
    try {
      await w.scheduled("*/5 * * * *");
      await eventually("the batch's end", () => w.logs.some((l) => l.stage === "consume" && l.outcome === "budget_spent"), 30000);
      const r = (await invocations(w)).find((x) => x.kind === "queue:paymos-deliveries");
      assert.equal(r.messages, 50, JSON.stringify(r));
      assert.ok(spent(r, 0) <= BUDGET, `spent ${spent(r, 0)}: ${JSON.stringify(r)}`);
      const done = await processedAmong(w, ids);
      assert.ok(done >= 10 && done < 50, `${done} processed in the first invocation, the rest retried`);
      assert.ok(w.logs.some((l) => l.stage === "consume" && l.outcome === "budget_spent" && /^\d+ messages retried$/.test(l.detail)));
    } finally {
      await w.close();
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test("the messages a spent budget leaves are retried by the queue, not dropped: every good delivery is processed without another cron", async () => {
  const dir = await mkdtemp(path.join(tmpdir(), "paymos-budget-"));
  try {
    const ids = await fiftyStored(dir);
    const good = ids.filter((_, i) => i !== 24);
    const w = await startWorker({
      vars: { ...vars, QUEUE_RETRY_BASE_SECONDS: "1" },
      persistDir: dir,
      patch: (o) => (o.queueConsumers = { "paymos-deliveries": o.queueConsumers["paymos-deliveries"] }),
    });
    try {
      // the one cron that sends them; after it, only the queue's retries can reach the rest
      await w.scheduled("*/5 * * * *");
      await eventually("a budget spent", () => w.logs.some((l) => l.stage === "consume" && l.outcome === "budget_spent"), 30000);
      await eventually("every good delivery processed", async () => (await processedAmong(w, good)) === good.length, 120000, 500);
    } finally {
      await w.close();
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test("with 1 MiB bodies allowed, one load reads at most 16 deliveries' bodies", async () => {
  const dir = await mkdtemp(path.join(tmpdir(), "paymos-budget-"));
  try {
    let w = await startWorker({ vars, persistDir: dir, patch: (o) => (o.queueConsumers = {}) });
    try {
      const e = Array.from({ length: 20 }, () => envelope("invoice.created", randomId("inv_")));
      await w.db.batch(e.map((x) => w.db.prepare("INSERT INTO incoming_delivery (event_id, resource_id, event_type, body) VALUES (?, ?, ?, ?)").bind(x.event_id, x.data.id, x.type, JSON.stringify(x))));
    } finally {
      await w.close();
    }
    const big = { ...vars, PAYMOS_MAX_BODY_BYTES: String(1024 * 1024) };
    w = await startWorker({ vars: big, persistDir: dir, patch: (o) => (o.queueConsumers = { "paymos-deliveries": o.queueConsumers["paymos-deliveries"] }), ...metered() });
    try {
      await w.scheduled("*/5 * * * *");
      await eventually("all processed", async () => (await w.db.prepare("SELECT count(*) AS n FROM webhook_delivery WHERE processed_at IS NULL").first()).n === 0, 30000);
      const r = (await invocations(w)).find((x) => x.kind === "queue:paymos-deliveries");
      // one batch of 20, read 16 and 4 at a time: a load and a transaction each
      assert.equal(r.messages, 20, JSON.stringify(r));
      assert.equal(r.d1_calls, 4, JSON.stringify(r));
    } finally {
      await w.close();
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
