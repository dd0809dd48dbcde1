// Starts the built worker (build/index.js + wasm) in Miniflare/workerd with the bindings that
// wrangler.toml declares: a real SQLite-backed D1 with migrations/ applied by wrangler itself,
// real local queues with their dead-letter queue, on a free loopback port.
import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { fileURLToPath } from "node:url";
import { Miniflare, Log, LogLevel } from "miniflare";
import { unstable_getMiniflareWorkerOptions } from "wrangler";

const run = promisify(execFile);
export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
export const SECRET_NEW = "whsec_test_new_6f1d2a9c";
export const SECRET_OLD = "whsec_test_old_03b7e4aa";
export const ADMIN_TOKEN = "test-admin-token-0123456789";

export async function freePort() {
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

/**
 * Applies migrations/ to a local D1 persisted under `dir`, the same way `npm start` does.
 *
 * Asked again when Miniflare's local D1 fails one of its own asserts (`false == true`, seen
 * once in CI, in 0014: most likely the only assert of its D1 object, on the `SELECT
 * total_changes()` it reads around each statement). wrangler runs each migration with its
 * `d1_migrations` row as one batch, one transaction, so the failed one left nothing behind
 * and the next attempt starts from it.
 */
export async function migrate(dir) {
  const simulatorAssert = (e) => /Migration \S+ failed with the following errors[\s\S]*false == true/.test(String(e?.message));
  await retryOn("Miniflare's local D1 failed its own assert during a migration", simulatorAssert, () =>
    run(path.join(ROOT, "node_modules/.bin/wrangler"), ["d1", "migrations", "apply", "DB", "--local", "--persist-to", dir], {
      cwd: ROOT,
      env: { ...process.env, CI: "true", WRANGLER_SEND_METRICS: "false" },
    }),
  );
}

/**
 * Starts the worker. `vars` override wrangler.toml vars and the secrets; `persistDir` reuses
 * state (otherwise a fresh temporary directory is made and removed on close).
 */
export async function startWorker({ vars = {}, persistDir, port: fixedPort, logLevel = LogLevel.WARN, withoutQueueProducer = false, scriptPath, collectLogs = true, patch, inspectorPort, otherWorkers = [] } = {}) {
  const ownDir = !persistDir;
  const dir = persistDir ?? (await mkdtemp(path.join(tmpdir(), "paymos-test-")));
  await migrate(dir);
  const { workerOptions } = unstable_getMiniflareWorkerOptions(path.join(ROOT, "wrangler.toml"));
  // simulates a queue outage: the receiver's send fails after the row is committed
  if (withoutQueueProducer) delete workerOptions.queueProducers;
  // a test's own changes to what wrangler.toml declares (extra producers, consumer settings)
  if (patch) patch(workerOptions);
  // 0: workerd binds a free port itself, so no other process can take it between a probe and
  // the bind (two test files run at once; a probed port was taken so, and the file hung)
  const port = fixedPort ?? 0;
  // The worker's structured log lines (one JSON object per line), for tests to assert on.
  const logs = [];
  const echo = process.env.PAYMOS_TEST_LOGS === "1";
  const collect = (stream) => {
    let buf = "";
    stream.on("data", (chunk) => {
      if (!collectLogs && !echo) return; // drained, not parsed (benchmarks)
      buf += chunk;
      let nl;
      while ((nl = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (echo) process.stderr.write(line + "\n");
        try {
          const v = JSON.parse(line);
          if (v && typeof v === "object") logs.push(v);
        } catch {
          /* not one of ours */
        }
      }
    });
  };
  const mf = new Miniflare({
    handleRuntimeStdio(stdout, stderr) {
      collect(stdout);
      collect(stderr);
    },
    host: "127.0.0.1",
    port,
    cf: false, // offline: no fetch of Request.cf data
    // the DevTools protocol, for a CPU profile (bench/profile.mjs); off unless asked for
    ...(inspectorPort ? { inspectorPort } : {}),
    log: new Log(logLevel),
    defaultPersistRoot: path.join(dir, "v3"),
    d1Persist: path.join(dir, "v3", "d1"),
    workers: [
      {
        ...workerOptions,
        name: "paymos-receiver",
        // another script under the same bindings: the benchmark's comparison workers
        scriptPath: scriptPath ?? path.join(ROOT, "build/index.js"),
        modules: true,
        // .js imports as ES modules: the benchmark's metered entries import the worker
        modulesRoot: ROOT,
        modulesRules: [
          { type: "ESModule", include: ["**/*.js", "**/*.mjs"] },
          { type: "CompiledWasm", include: ["**/*.wasm"], fallthrough: true },
        ],
        compatibilityDate: workerOptions.compatibilityDate ?? "2025-09-23",
        bindings: {
          ...(workerOptions.bindings ?? {}),
          PAYMOS_WEBHOOK_SECRETS: `${SECRET_NEW},${SECRET_OLD}`,
          ADMIN_TOKEN,
          PAYMOS_API_KEY: "sk_test_sandbox",
          QUEUE_RETRY_BASE_SECONDS: "0",
          // as .dev.vars: the tests' deliveries are test-mode (livemode: false)
          PAYMOS_MODE: "test",
          ...vars,
        },
      },
      // workers beside ours (Miniflare worker options), e.g. one bound to ours as a service
      ...otherWorkers,
    ],
  });
  let ready;
  try {
    ready = await mf.ready;
  } catch (e) {
    // a runtime that failed to start is still a process: stop it, or it keeps the test file
    // alive until the runner's timeout
    await mf.dispose().catch(() => {});
    if (ownDir) await rm(dir, { recursive: true, force: true });
    throw e;
  }
  const url = ready.toString().replace(/\/$/, "");
  const db = retryingReads(await mf.getD1Database("DB"));
  return {
    url,
    mf,
    db,
    dir,
    logs,
    /** Waits until the consumer has processed the delivery; resolves with its row. */
    processed(eventId, ms) {
      return eventually(
        `${eventId} to be processed`,
        () => db.prepare("SELECT * FROM webhook_delivery WHERE event_id = ? AND processed_at IS NOT NULL").bind(eventId).first(),
        ms,
      );
    },
    async scheduled(cron = "*/5 * * * *") {
      const worker = await mf.getWorker();
      return worker.scheduled({ cron });
    },
    async close() {
      await mf.dispose();
      if (ownDir) await rm(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Miniflare's D1 proxy makes its synchronous calls (`prepare`, `bind`) through a helper thread;
 * on a loaded machine that call now and then fails on Miniflare's own
 * `assert(message?.id === id)` (no reply was posted), which is the harness, not the receiver.
 * A read is safe to ask again, so a statement that only reads (SELECT, WITH, EXPLAIN, PRAGMA)
 * is prepared, bound and run anew up to three times on that one error. Writes and batches go
 * straight through: asking them twice could write twice.
 */
function retryingReads(db) {
  const READ = /^\s*(SELECT|WITH|EXPLAIN|PRAGMA)\b/i;
  const proxyRace = (e) =>
    e?.code === "ERR_ASSERTION" && (/message\?\.id === id/.test(String(e.message)) || /SynchronousFetcher/.test(String(e.stack)));
  const statement = (sql, args) => {
    const call =
      (method) =>
      (...a) =>
        retryOn("Miniflare's D1 proxy missed a reply", proxyRace, () => {
          const s = db.prepare(sql);
          return (args ? s.bind(...args) : s)[method](...a);
        });
    return { bind: (...b) => statement(sql, b), first: call("first"), all: call("all"), raw: call("raw"), run: call("run") };
  };
  return new Proxy(db, {
    get(target, key) {
      if (key === "prepare") return (sql) => (READ.test(sql) ? statement(sql, null) : target.prepare(sql));
      const value = Reflect.get(target, key);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

/**
 * Runs `fn` again, up to `times` in all, when what it throws is `transient(error)` (saying
 * `what` happened on each retry); any other error, or the last one, is thrown.
 */
export async function retryOn(what, transient, fn, times = 3) {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (e) {
      if (!transient(e) || attempt === times) throw e;
      console.log(`# ${what} (attempt ${attempt}); trying again`);
    }
  }
}

/** Polls `fn` until it returns a truthy value or `ms` pass (then throws with `what`). */
export async function eventually(what, fn, ms = 20000, every = 100) {
  const deadline = Date.now() + ms;
  let last;
  for (;;) {
    last = await fn();
    if (last) return last;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what} (last: ${JSON.stringify(last)})`);
    await new Promise((r) => setTimeout(r, every));
  }
}
