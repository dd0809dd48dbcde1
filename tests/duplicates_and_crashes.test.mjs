// The invariants under stress: volume with duplicates in random order, two endpoints' ids for
// the same changes, and the runtime killed with SIGKILL mid-load while the sender keeps
// retrying on a compressed ladder. Bounded in count and time; loopback only.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { startWorker, eventually, freePort, ROOT } from "./helpers/worker.mjs";
import { deliver, envelope, randomId, pool, shuffle, deliverOnLadder } from "./helpers/paymos.mjs";

const count = async (db, sql, ...args) => (await db.prepare(sql).bind(...args).first()).n;

test("2,000 deliveries, 30% duplicates, random order, 32 connections: each stored once, each paid invoice fulfilled once", async () => {
  const w = await startWorker();
  try {
    const invoices = Array.from({ length: 700 }, () => randomId("inv_"));
    // 1,400 unique deliveries: each invoice's created and paid, which arrive in any order
    const unique = invoices.flatMap((inv) => [envelope("invoice.created", inv), envelope("invoice.paid", inv)]);
    const dups = Array.from({ length: 600 }, () => unique[Math.floor(Math.random() * unique.length)]);
    const all = shuffle([...unique, ...dups]);
    assert.equal(all.length, 2000);
    const replies = await pool(all, 32, (env) => deliver(w.url, env));
    const statuses = new Set(replies.map((r) => r.status));
    assert.deepEqual([...statuses], [200]);
    assert.equal(replies.filter((r) => r.json.duplicate === false).length, 1400, "exactly one first receipt per unique delivery");

    assert.equal(await count(w.db, "SELECT count(*) AS n FROM webhook_delivery"), 1400);
    await eventually(
      "all 1,400 deliveries to be processed",
      async () => (await count(w.db, "SELECT count(*) AS n FROM webhook_delivery WHERE processed_at IS NULL")) === 0,
      180000,
      500,
    );
    assert.equal(await count(w.db, "SELECT count(*) AS n FROM effect WHERE kind = 'fulfilment'"), 700);
    assert.equal(await count(w.db, "SELECT count(DISTINCT resource_id) AS n FROM effect WHERE kind = 'fulfilment'"), 700);
    assert.equal(await count(w.db, "SELECT count(*) AS n FROM resource WHERE status = 'paid'"), 700);
    assert.equal(
      await count(w.db, "SELECT count(*) AS n FROM webhook_delivery WHERE event_type = 'invoice.paid' AND outcome = 'applied'"),
      700,
    );
  } finally {
    await w.close();
  }
});

test("two endpoints' event ids for the same changes, concurrently: one effect each", async () => {
  const w = await startWorker();
  try {
    const changes = [
      ...Array.from({ length: 100 }, () => ["invoice.paid", randomId("inv_"), "fulfilment"]),
      ...Array.from({ length: 50 }, () => ["withdrawal.completed", randomId("wdr_"), "settlement"]),
      ...Array.from({ length: 50 }, () => ["deposit.confirmed", randomId("pcd_"), "credit"]),
    ];
    // endpoint A and endpoint B each get their own evt_ id for every change
    const deliveries = shuffle(changes.flatMap(([type, id]) => [envelope(type, id), envelope(type, id)]));
    const replies = await pool(deliveries, 32, (env) => deliver(w.url, env));
    assert.ok(replies.every((r) => r.status === 200 && r.json.duplicate === false));
    await eventually(
      "all deliveries to be processed",
      async () => (await count(w.db, "SELECT count(*) AS n FROM webhook_delivery WHERE processed_at IS NULL")) === 0,
      120000,
      500,
    );
    for (const [, id, kind] of changes) {
      assert.equal(await count(w.db, "SELECT count(*) AS n FROM effect WHERE resource_id = ? AND kind = ?", id, kind), 1, id);
    }
    assert.equal(await count(w.db, "SELECT count(*) AS n FROM effect"), 200);
    assert.equal(await count(w.db, "SELECT count(*) AS n FROM webhook_delivery WHERE outcome = 'applied'"), 200);
    assert.equal(await count(w.db, "SELECT count(*) AS n FROM webhook_delivery WHERE outcome = 'stale'"), 200);
  } finally {
    await w.close();
  }
});

/** Starts the worker as its own process group, so that SIGKILL takes workerd down with it. */
async function serve(dir, port) {
  const child = spawn(process.execPath, [path.join(ROOT, "tests/helpers/serve.mjs"), dir, String(port), JSON.stringify({ SWEEP_AFTER_SECONDS: "3" })], {
    cwd: ROOT,
    detached: true,
    stdio: ["ignore", "pipe", "inherit"],
    env: { ...process.env, CRON_EVERY_MS: "1000" },
  });
  await new Promise((resolve, reject) => {
    let out = "";
    child.stdout.on("data", (c) => {
      out += c;
      if (out.includes("READY")) resolve();
    });
    child.on("exit", (code) => reject(new Error(`serve exited early (${code})`)));
  });
  return child;
}

test("SIGKILL mid-load, restarted on the same state, sender on a compressed ladder: nothing lost, nothing doubled", async () => {
  const dir = await mkdtemp(path.join(tmpdir(), "paymos-kill-"));
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  let child = await serve(dir, port);
  try {
    const invoices = Array.from({ length: 300 }, () => randomId("inv_"));
    // a fifth of the invoices are also delivered by a second endpoint under another id
    const events = shuffle([...invoices.map((inv) => envelope("invoice.paid", inv)), ...invoices.slice(0, 60).map((inv) => envelope("invoice.paid", inv))]);
    let acknowledged = 0;
    let killed = false;
    const killer = (async () => {
      await eventually("a third of the load to be acknowledged", () => acknowledged >= events.length / 3, 60000, 20);
      process.kill(-child.pid, "SIGKILL");
      killed = true;
      await new Promise((r) => setTimeout(r, 1000));
      child = await serve(dir, port);
    })();
    const results = await pool(events, 24, async (env) => {
      const r = await deliverOnLadder(url, env, { scale: 600 });
      acknowledged++;
      return r;
    });
    await killer;
    assert.ok(killed);
    assert.ok(results.some((r) => r.attempts > 1), "some deliveries needed the ladder");

    // the child owns the D1 files: inspect the state through the operators' API
    const admin = (p) => fetch(`${url}/admin/api${p}`, { headers: { authorization: "Bearer test-admin-token-0123456789" } }).then((r) => r.json());
    const outcomes = await eventually(
      "every delivery to be processed after the restart",
      async () => {
        const list = [];
        let cursor;
        do {
          const page = await admin(`/deliveries?limit=1000${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
          list.push(...page.data);
          cursor = page.next_cursor;
        } while (cursor);
        return list.length === events.length && list.every((d) => d.processed_at) ? list : null;
      },
      120000,
      1000,
    );
    const byId = new Map(outcomes.map((d) => [d.event_id, d]));
    for (const env of events) assert.ok(byId.has(env.event_id), `lost: ${env.event_id}`);
    assert.equal(outcomes.filter((d) => d.outcome === "applied").length, 300);
    assert.equal(outcomes.filter((d) => d.outcome === "stale").length, 60);
    for (const inv of invoices) {
      const r = await admin(`/resources/${inv}`);
      assert.equal(r.status, "paid", inv);
      assert.equal(r.effects.filter((e) => e.kind === "fulfilment").length, 1, inv);
    }
  } finally {
    try {
      process.kill(-child.pid, "SIGKILL");
    } catch {
      /* already gone */
    }
    await rm(dir, { recursive: true, force: true });
  }
});

test("a sweep after 0 seconds sends each unprocessed delivery once per run, however often its claims pick it again", async () => {
  // no consumer: the deliveries stay unprocessed, their messages unread
  const w = await startWorker({ vars: { SWEEP_AFTER_SECONDS: "0" }, patch: (o) => (o.queueConsumers = {}) });
  try {
    const N = 150;
    await pool(
      Array.from({ length: N }, () => envelope("invoice.created", randomId("inv_"))),
      16,
      async (e) => assert.equal((await deliver(w.url, e)).status, 200),
    );
    await w.scheduled("*/5 * * * *");
    const line = await eventually("the sweep's line", () => w.logs.find((l) => l.stage === "sweep" && /^requeued /.test(l.outcome)));
    // a claim moves enqueued_at to now, which a sweep after 0 s takes as old enough at once:
    // before, each page picked the same rows again, 10,000 messages for 150 deliveries
    assert.equal(line.outcome, `requeued ${N}`, JSON.stringify(line));
  } finally {
    await w.close();
  }
});
