// Interleaved A/B: two worker scripts started once, side by side (each its own workerd), then
// loaded in turn in short slices (A B, B A, A B, …), so that the machine's drift, which here
// moves a run's CPU per request by ±30 % over minutes, falls on both within seconds of each
// other. `ab.mjs` starts a fresh worker for each 6 s round, so A and B are measured 10-15 s
// apart and every round's ratio carries the drift between them.
//
// CPU is each worker's own workerd process (all threads, schedstat's nanoseconds). What a
// worker does after its slice ends (its consumer finishing the last deliveries) is counted to
// that slice: at each slice's end both processes are read, and the idle one's CPU meanwhile
// goes to its own latest slice. Each pair of slices gives a ratio; the median over the pairs,
// its quartiles and range are printed, and the pooled ratio (all CPU ÷ all requests).
//   node bench/interleave.mjs A.js B.js [--mode new|duplicate] [--concurrency 1] [--slice 2]
//     [--pairs 60] [--legs 2] [--warmup 4] [--a-vars NAME=value,...] [--b-vars ...]
// The pairs are split over `legs` legs, each on two fresh workers started in the other order
// than the leg before.
// Both workers grow their D1 at the same pace (each takes half the slices). No test asserts
// a time.
import { commandLine, cpuSecondsOf, load, median, parseVars, startBenchWorker, workerdChildren } from "./ab.mjs";

/** A worker started, with the workerd pids that came with it. */
async function start(script, vars) {
  const before = new Set((await workerdChildren()).map((c) => c.pid));
  const w = await startBenchWorker(script, vars);
  const pids = (await workerdChildren()).map((c) => c.pid).filter((p) => !before.has(p));
  if (pids.length === 0) throw new Error(`${script}: no workerd process of its own found`);
  return { ...w, pids, url: `${w.url}/webhooks/paymos` };
}

/** The q-quantile of xs (nearest rank). */
function quantile(xs, q) {
  const s = [...xs].sort((x, y) => x - y);
  return s[Math.min(s.length - 1, Math.max(0, Math.round(q * (s.length - 1))))];
}

/**
 * `pairs` pairs of slices of `slice` seconds over workers `a` and `b`; each slice's requests
 * and CPU (with its spill, as above).
 */
export async function interleave(a, b, { mode, concurrency, slice, pairs }) {
  const workers = [a, b];
  const slices = [];
  const latest = [null, null];
  let before = [await cpuSecondsOf(a.pids), await cpuSecondsOf(b.pids)];
  for (let p = 0; p < pairs; p++) {
    for (const k of p % 2 ? [1, 0] : [0, 1]) {
      const r = await load(workers[k].url, mode, concurrency, ["--duration-seconds", String(slice)]);
      if (r.non_2xx || r.errors) throw new Error(`slice ${p}: ${r.non_2xx} non-2xx, ${r.errors} errors`);
      const after = [await cpuSecondsOf(a.pids), await cpuSecondsOf(b.pids)];
      const s = { worker: k, pair: p, requests: r.requests, cpu: after[k] - before[k] };
      slices.push(s);
      const idle = 1 - k;
      // the idle worker's CPU meanwhile: its latest slice's tail (before its first, warm-up's)
      if (latest[idle]) latest[idle].cpu += after[idle] - before[idle];
      latest[k] = s;
      before = after;
    }
  }
  return slices;
}

/** Per pair, B's CPU per request ÷ A's; and pooled over all slices. */
export function ratios(slices) {
  const per = (s) => s.cpu / s.requests;
  const byPair = new Map();
  for (const s of slices) {
    const pair = byPair.get(s.pair) ?? [];
    pair[s.worker] = s;
    byPair.set(s.pair, pair);
  }
  const rs = [...byPair.values()].map(([sa, sb]) => per(sb) / per(sa));
  const total = (k, f) => slices.filter((s) => s.worker === k).reduce((t, s) => t + f(s), 0);
  const pooled = [0, 1].map((k) => total(k, (s) => s.cpu) / total(k, (s) => s.requests));
  return {
    median: median(rs),
    q1: quantile(rs, 0.25),
    q3: quantile(rs, 0.75),
    min: Math.min(...rs),
    max: Math.max(...rs),
    pooled: pooled[1] / pooled[0],
    cpu_us: pooled.map((x) => x * 1e6),
    requests: [0, 1].map((k) => total(k, (s) => s.requests)),
  };
}

/**
 * Scripts `sa` and `sb` (each with its vars) interleaved: `pairs` pairs of slices over `legs`
 * legs, each leg on two fresh workers started in the other order than the leg before (runs
 * of one build against itself found a per cent or two between the worker started first and
 * the one started second). `ratios` of all the slices, with the pairs' count.
 */
export async function interleaved([sa, varsA], [sb, varsB], { mode, concurrency, slice, pairs, legs, warmup }) {
  const all = [];
  for (let leg = 0; leg < legs; leg++) {
    const started = [];
    try {
      // every worker started is closed, the first too when the second fails to start
      for (const [script, vars] of leg % 2 ? [[sb, varsB], [sa, varsA]] : [[sa, varsA], [sb, varsB]]) started.push(await start(script, vars));
      const [a, b] = leg % 2 ? [started[1], started[0]] : started;
      for (const w of [a, b]) await load(w.url, mode, concurrency, ["--duration-seconds", String(warmup)]);
      const slices = await interleave(a, b, { mode, concurrency, slice, pairs: Math.ceil(pairs / legs) });
      all.push(...slices.map((s) => ({ ...s, pair: `${leg}.${s.pair}` })));
    } finally {
      for (const w of started) await w.close();
    }
  }
  return { ...ratios(all), pairs: all.length / 2 };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { opt, positional } = commandLine();
  const [sa, sb] = positional;
  if (!sa || !sb) {
    console.error("usage: node bench/interleave.mjs A.js B.js [--mode new|duplicate] [--concurrency N] [--slice S] [--pairs P] [--legs L] [--warmup S] [--a-vars NAME=value,...] [--b-vars ...]");
    process.exit(2);
  }
  const cfg = { mode: opt("mode", "new"), concurrency: Number(opt("concurrency", 1)), slice: Number(opt("slice", 2)), pairs: Number(opt("pairs", 60)), legs: Number(opt("legs", 2)), warmup: Number(opt("warmup", 4)) };
  const r = await interleaved([sa, parseVars(opt("a-vars"))], [sb, parseVars(opt("b-vars"))], cfg);
  console.log(`B = ${sb}, A = ${sa}, ${JSON.stringify({ ...cfg, pairs: r.pairs })}`);
  console.log(`CPU per request: A ${r.cpu_us[0].toFixed(0)} µs, B ${r.cpu_us[1].toFixed(0)} µs (${r.requests[0]} and ${r.requests[1]} requests)`);
  console.log(`B ÷ A, CPU per request: median of ${r.pairs} pairs ${r.median.toFixed(3)} [quartiles ${r.q1.toFixed(3)}–${r.q3.toFixed(3)}; range ${r.min.toFixed(2)}–${r.max.toFixed(2)}]; pooled ${r.pooled.toFixed(3)}`);
}
