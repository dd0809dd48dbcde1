// The harness's reads of the local D1 when Miniflare's D1 proxy breaks (tests/helpers/worker.mjs,
// `d1Reads`): they come from the D1's SQLite file and answer as the proxy does, for real rows the
// worker wrote; and a real break of the proxy's SynchronousFetcher, made deterministic here, is
// caught and read around, while a write after it still fails as it did.
import { test } from "node:test";
import assert from "node:assert/strict";
import wt from "node:worker_threads";
import { startWorker } from "./helpers/worker.mjs";
import { deliver, envelope, randomId } from "./helpers/paymos.mjs";

// Miniflare's SynchronousFetcher thread, with one hook: once `armed[0]` is set, the next request
// it takes first wakes the main thread's `Atomics.wait` (as a late `Atomics.notify` of the call
// before does), and is answered half a second later, so the main thread finds no reply: what
// broke the proxy in CI, without the timing. Miniflare reads `Worker` off this module object when
// it starts the thread, so the subclass is used; any other thread is started unchanged.
const armed = new Int32Array(new SharedArrayBuffer(8));
const WAKE_FIRST = `{
  const { port, notifyHandle, armed } = require("worker_threads").workerData;
  const add = port.addEventListener.bind(port);
  port.addEventListener = (type, listener) =>
    add(type, (event) => {
      if (Atomics.exchange(armed, 0, 0) === 1) {
        // the main thread waits for this reply from its Atomics.wait; wake it now
        for (let ms = 0; Atomics.notify(notifyHandle, 0) === 0 && ms < 10000; ms++) Atomics.wait(armed, 1, 0, 1);
        // and answer only later: a main thread the machine leaves unscheduled for a while
        // would otherwise find this reply after all (seen once in CI, two files at a time)
        Atomics.wait(armed, 1, 0, 500);
      }
      return listener(event);
    });
}
`;
const Worker = wt.Worker;
wt.Worker = class extends Worker {
  constructor(script, options) {
    if (options?.eval && String(script).includes("receiveMessageOnPort() in host")) {
      super(WAKE_FIRST + script, { ...options, workerData: { ...options.workerData, armed } });
    } else {
      super(script, options);
    }
  }
};

/** An invoice created then paid, both processed: rows in webhook_delivery, resource, effect. */
async function paidInvoice(w) {
  const inv = randomId("inv_");
  const events = [envelope("invoice.created", inv), envelope("invoice.paid", inv)];
  for (const e of events) assert.equal((await deliver(w.url, e)).status, 200);
  for (const e of events) await w.processed(e.event_id);
  return { inv, events };
}

test("reads from the D1 file (the proxy taken as broken) answer as the proxy does: first, first(column), all, raw", async () => {
  const w = await startWorker({ d1ProxyBroken: true });
  try {
    const proxy = await w.mf.getD1Database("DB");
    // w.processed already reads through the file: a wrong answer there would time out
    const { inv, events } = await paidInvoice(w);
    const same = async (sql, binds, method, ...a) => {
      const read = (db) => (binds ? db.prepare(sql).bind(...binds) : db.prepare(sql))[method](...a);
      const [file, viaProxy] = [await read(w.db), await read(proxy)];
      if (method === "all" || method === "run") {
        assert.match(file.meta.served_by, /harness/, "read from the file, not the proxy");
        assert.deepEqual(Object.keys(file.meta).sort(), Object.keys(viaProxy.meta).sort(), `${sql}: meta's fields`);
        assert.deepEqual([file.success, file.results], [viaProxy.success, viaProxy.results], sql);
      } else {
        assert.deepEqual(file, viaProxy, `${sql} ${method}(${a.map((x) => JSON.stringify(x)).join()})`);
      }
      return file;
    };

    assert.equal((await same("SELECT count(*) AS n FROM webhook_delivery", null, "first")).n, 2);
    assert.equal((await same("SELECT * FROM webhook_delivery WHERE event_id = ? AND processed_at IS NOT NULL", [events[1].event_id], "first")).outcome, "applied");
    assert.equal(await same("SELECT count(*) AS n FROM effect WHERE resource_id = ? AND kind = ?", [inv, "fulfilment"], "first", "n"), 1);
    assert.match(await same("SELECT * FROM effect WHERE resource_id = ?", [inv], "first", "license_code"), /\S/);
    assert.equal(await same("SELECT * FROM effect WHERE resource_id = ?", ["inv_none"], "first", "license_code"), null);
    assert.equal(await same("SELECT * FROM webhook_delivery WHERE event_id = ?", ["evt_none"], "first"), null);
    const effects = await same("SELECT * FROM effect WHERE resource_id = ? ORDER BY id", [inv], "all");
    assert.deepEqual(effects.results.map((e) => e.kind), ["fulfilment"]);
    await same("SELECT kind, count(*) AS n FROM effect WHERE resource_id = ? GROUP BY kind", [inv], "all");
    await same("SELECT * FROM webhook_delivery ORDER BY event_id", null, "all");
    await same("SELECT * FROM resource WHERE id = ?", [inv], "run");
    assert.equal((await same("SELECT * FROM webhook_delivery ORDER BY event_id", null, "raw")).length, 2);
    await same("SELECT event_id, outcome FROM webhook_delivery ORDER BY event_id", null, "raw", { columnNames: true });
    await same("SELECT event_id FROM webhook_delivery WHERE 0", null, "raw", { columnNames: true });
    // how values are bound and read: numbers and booleans as REALs, blobs, nulls, a repeated name
    await same("SELECT typeof(?) AS a, typeof(?) AS b, ? AS c, ? AS d, ? AS e, x'00ff' AS f, 1.5 AS g, 1e999 AS h, 1 AS i, 2 AS i, 9007199254740993 AS j", [3, true, 2, "é", null], "first");
    await same("SELECT typeof(?) AS a, 1 AS i, 2 AS i", [1], "raw");
    // the same errors
    for (const [sql, binds, method, ...a] of [
      ["SELECT * FROM effect WHERE resource_id = ?", [inv], "first", "no_such_column"],
      ["SELECT * FROM no_such_table", [], "all"],
    ]) {
      const error = (db) => db.prepare(sql).bind(...binds)[method](...a).then(() => assert.fail(`${sql} answered`), (e) => e.message);
      assert.equal(await error(w.db), await error(proxy), sql);
    }
  } finally {
    await w.close();
  }
});

test("a real break of Miniflare's D1 proxy: that read and later ones come from the D1 file; the proxy stays broken; a write still fails, writing nothing", async () => {
  const w = await startWorker();
  try {
    const proxy = await w.mf.getD1Database("DB");
    const { inv } = await paidInvoice(w);
    const READ = "SELECT * FROM webhook_delivery WHERE resource_id = ? ORDER BY event_id";
    const before = await w.db.prepare(READ).bind(inv).all();
    assert.equal(before.meta.served_by, "miniflare.db", "read through the proxy");
    assert.equal(before.results.length, 2);

    Atomics.store(armed, 0, 1);
    const broken = await w.db.prepare(READ).bind(inv).all();
    assert.equal(Atomics.load(armed, 0), 0, "the proxy's thread took a request after it was armed");
    assert.match(broken.meta.served_by, /harness/, "the read the proxy failed came from the file");
    assert.deepEqual(broken.results, before.results);

    // off by one for good: each call takes the reply to the call before
    for (let i = 0; i < 3; i++) assert.throws(() => proxy.prepare("SELECT 1"), { code: "ERR_ASSERTION" });
    const count = await w.db.prepare("SELECT count(*) AS n FROM webhook_delivery").first("n");
    assert.equal(count, 2);
    const later = await w.db.prepare(READ).bind(inv).all();
    assert.match(later.meta.served_by, /harness/);
    assert.deepEqual(later.results, before.results);

    // a write is not read around: its prepare fails as before, and nothing is deleted
    assert.throws(() => w.db.prepare("DELETE FROM webhook_delivery"), { code: "ERR_ASSERTION" });
    assert.equal(await w.db.prepare("SELECT count(*) AS n FROM webhook_delivery").first("n"), 2);
  } finally {
    await w.close();
  }
});
