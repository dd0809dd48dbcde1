// Cold start: the first requests of a fresh isolate, ours against the JS receiver (or any two
// builds), over enough fresh isolates to give a median. Each round starts a fresh worker per
// script (the order reversed every other round), then sends new deliveries one at a time:
// the first request's latency (as `paymos load` measures it) and workerd's CPU for it, then
// the first 100's wall time and CPU. The consumers are left out (BENCH_NO_CONSUMERS's way),
// so the CPU is the receive path's and not a batch consumed meanwhile. CPU is workerd's, all
// threads, from each thread's schedstat (nanoseconds; `/proc/<pid>/stat`'s 10 ms ticks made a
// first request's 20-30 ms read as 2 or 3 ticks); `startup_cpu_ms` is workerd's CPU until
// the worker is ready, where the script's own start (the wasm's compile) also falls. No test
// asserts a time.
//   node bench/cold.mjs [A.js B.js] [--rounds 7]
import { commandLine, load, median, startBenchWorker, workerdCpuSecondsFine } from "./ab.mjs";

const noConsumers = { patch: (o) => (o.queueConsumers = {}) };

async function once(script) {
  const w = await startBenchWorker(script, {}, noConsumers);
  try {
    const url = `${w.url}/webhooks/paymos`;
    const c0 = await workerdCpuSecondsFine();
    const first = await load(url, "new", 1, ["--requests", "1"]);
    const c1 = await workerdCpuSecondsFine();
    const t0 = Date.now();
    const rest = await load(url, "new", 1, ["--requests", "99"]);
    const ms = Date.now() - t0;
    const c2 = await workerdCpuSecondsFine();
    if (first.non_2xx || rest.non_2xx) throw new Error(`${script}: non-2xx answers`);
    return {
      // workerd's CPU from its start until the worker is ready (Miniflare's own services and
      // the script's start alike): work moved out of the first request into the isolate's
      // start shows here
      startup_cpu_ms: c0 * 1000,
      first_ms: first.latency_ms.p50,
      first_cpu_ms: (c1 - c0) * 1000,
      // the first 100: the first request's latency plus the next 99's wall time
      first100_ms: first.latency_ms.p50 + ms,
      first100_cpu_ms: (c2 - c0) * 1000,
    };
  } finally {
    await w.close();
  }
}

const KEYS = ["startup_cpu_ms", "first_ms", "first_cpu_ms", "first100_ms", "first100_cpu_ms"];

/**
 * `rounds` fresh isolates of each script, the order reversed every other round: per measure,
 * each script's median and the median of the per-round ratios b ÷ a with their range.
 */
export async function cold(a, b, rounds) {
  const runs = { [a]: [], [b]: [] };
  for (let r = 0; r < rounds; r++) {
    for (const s of r % 2 ? [b, a] : [a, b]) runs[s].push(await once(s));
  }
  const measures = Object.fromEntries(
    KEYS.map((k) => {
      const q = runs[b].map((x, i) => x[k] / runs[a][i][k]);
      return [k, { a: median(runs[a].map((x) => x[k])), b: median(runs[b].map((x) => x[k])), median: median(q), min: Math.min(...q), max: Math.max(...q) }];
    }),
  );
  return { rounds, measures, runs };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { opt, positional } = commandLine();
  const [a, b] = positional.length >= 2 ? positional : ["bench/js-receiver.js", "build/index.js"];
  const res = await cold(a, b, Number(opt("rounds", "7")));
  console.log(`cold start, ${res.rounds} fresh isolates each (new deliveries at 1 connection, consumers out); medians; ratio ${b} ÷ ${a}, median of the per-round ratios [range]`);
  console.log(`| measure | ${a} | ${b} | ratio |`);
  console.log("|---|---|---|---|");
  for (const [k, m] of Object.entries(res.measures)) {
    console.log(`| ${k} | ${m.a.toFixed(1)} | ${m.b.toFixed(1)} | ${m.median.toFixed(2)}× [${m.min.toFixed(2)}–${m.max.toFixed(2)}] |`);
  }
  console.log(JSON.stringify({ rounds: res.rounds, runs: res.runs }));
}
