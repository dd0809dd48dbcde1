// Starts one worker for the benchmark the way tests/helpers/worker.mjs does (Miniflare/workerd,
// the bindings wrangler.toml declares, a local D1 migrated by wrangler, real local queues, a
// fresh temporary directory), with what the benchmark needs besides: any entry module (ours,
// the JavaScript receiver, the no-op floor, or one of them behind bench/meter.mjs, whose
// imports are ES modules ending in .js), extra bindings (STATEMENTS, ORDER_SYSTEM_URL), and
// its logs drained unread.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Miniflare, Log, LogLevel } from "miniflare";
import { unstable_getMiniflareWorkerOptions } from "wrangler";
import { ROOT, SECRET_NEW, SECRET_OLD, ADMIN_TOKEN, freePort, migrate } from "../tests/helpers/worker.mjs";

export { ROOT, SECRET_NEW, SECRET_OLD, ADMIN_TOKEN };

export async function startBenchWorker({ script = "build/index.js", vars = {} } = {}) {
  const dir = await mkdtemp(path.join(tmpdir(), "paymos-bench-"));
  await migrate(dir);
  const { workerOptions } = unstable_getMiniflareWorkerOptions(path.join(ROOT, "wrangler.toml"));
  const port = await freePort();
  const drain = (stream) => stream.on("data", () => {});
  const mf = new Miniflare({
    handleRuntimeStdio(stdout, stderr) {
      drain(stdout);
      drain(stderr);
    },
    host: "127.0.0.1",
    port,
    cf: false,
    log: new Log(LogLevel.WARN),
    defaultPersistRoot: path.join(dir, "v3"),
    d1Persist: path.join(dir, "v3", "d1"),
    workers: [
      {
        ...workerOptions,
        name: "paymos-receiver",
        scriptPath: path.join(ROOT, script),
        modules: true,
        modulesRoot: ROOT,
        modulesRules: [
          { type: "ESModule", include: ["**/*.js", "**/*.mjs"] },
          { type: "CompiledWasm", include: ["**/*.wasm"] },
        ],
        compatibilityDate: workerOptions.compatibilityDate ?? "2025-09-23",
        bindings: {
          ...(workerOptions.bindings ?? {}),
          PAYMOS_WEBHOOK_SECRETS: `${SECRET_NEW},${SECRET_OLD}`,
          ADMIN_TOKEN,
          PAYMOS_API_KEY: "sk_test_sandbox",
          QUEUE_RETRY_BASE_SECONDS: "0",
          PAYMOS_MODE: "test",
          ...vars,
        },
      },
    ],
  });
  const url = (await mf.ready).toString().replace(/\/$/, "");
  const db = await mf.getD1Database("DB");
  return {
    url,
    db,
    async close() {
      await mf.dispose();
      await rm(dir, { recursive: true, force: true });
    },
  };
}
