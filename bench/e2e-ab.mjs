// POST → the order system's 2xx for two builds side by side, against one `paymos orders`: each
// round runs each script (the order reversed every other round) on a fresh worker per load,
// the e2e load twice: closed loop (200 paid invoices at 16 connections, each waiting for its
// effect, as `npm run bench`'s e2e part) and open loop (1,000 sent as fast as 16 connections
// go). Prints each run's effect latency p50 / p99. A development tool, not part of npm test.
//   node bench/e2e-ab.mjs A.js B.js [--rounds 2]
import { commandLine, load, startBenchWorker, startOrders } from "./ab.mjs";

const { opt, positional } = commandLine();
const [a, b] = positional;
if (!a || !b) {
  console.error("usage: node bench/e2e-ab.mjs A.js B.js [--rounds 2]");
  process.exit(2);
}
const rounds = Number(opt("rounds", 2));
const orders = await startOrders();
const LOOPS = { closed: orders.closedLoop(200), open: orders.openLoop(1000) };
try {
  if (!orders.up) throw new Error(`paymos orders did not come up at ${orders.url}`);
  for (let r = 0; r < rounds; r++) {
    for (const script of r % 2 ? [b, a] : [a, b]) {
      for (const [loop, extra] of Object.entries(LOOPS)) {
        const w = await startBenchWorker(script, orders.vars);
        try {
          const { effect_latency_ms: e, effects_timed_out } = await load(`${w.url}/webhooks/paymos`, "e2e", 16, extra);
          console.log(`round ${r + 1} ${script} ${loop} loop: p50 ${e?.p50} ms, p99 ${e?.p99} ms, timed out ${effects_timed_out ?? 0}`);
        } finally {
          await w.close();
        }
      }
    }
  }
} finally {
  orders.stop();
}
