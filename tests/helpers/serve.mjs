// Runs the worker as its own process (for tests that kill it with SIGKILL and restart it on
// the same persisted state). Usage: node serve.mjs <persistDir> <port> [varsJSON]
// Prints "READY <url>" once serving. With CRON_EVERY_MS set, fires the sweeper's cron trigger
// that often (a compressed clock for the */5 minutes cron).
import { startWorker } from "./worker.mjs";

const [persistDir, port, vars = "{}"] = process.argv.slice(2);
const w = await startWorker({ persistDir, port: Number(port), vars: JSON.parse(vars) });
process.stdout.write(`READY ${w.url}\n`);
const every = Number(process.env.CRON_EVERY_MS || 0);
if (every > 0) {
  setInterval(() => {
    w.scheduled("*/5 * * * *").catch(() => {});
  }, every);
}
for (const sig of ["SIGTERM", "SIGINT"]) {
  process.on(sig, async () => {
    await w.close();
    process.exit(0);
  });
}
