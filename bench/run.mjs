// npm run bench: our worker and two comparison workers (bench/noop-worker.js, the platform
// floor; bench/js-receiver.js, the same work written by hand in JavaScript, from the same SQL)
// run in the same runtime (Miniflare/workerd, as `npm start`), driven one after the other by
// `paymos load` over loopback. Then, for ours and the JS receiver: what one delivery costs in
// D1 and queue operations (bench/meter.mjs, from D1's own result meta), whether the consumer
// keeps up at the maximum rate, and (ours) the way to the order system. Prints the tables and
// writes bench/results/latest.json (bench/results/partial.json for a run of some parts, --only=).
// No assertion on time anywhere: these machines are shared and noisy, ratios from one run are what counts.
import { readFile, writeFile, mkdir, stat } from "node:fs/promises";
import { gzipSync } from "node:zlib";
import os from "node:os";
import path from "node:path";
import { paired, pairedRatio, load, startBenchWorker, startOrders } from "./ab.mjs";
import { interleaved } from "./interleave.mjs";
import { cold } from "./cold.mjs";
import { ROOT } from "../tests/helpers/worker.mjs";

const quick = process.argv.includes("--quick");
// --only=throughput,cpu,cold,cost,keep_up,e2e runs some parts (while developing); the default is all
const only = process.argv.find((a) => a.startsWith("--only="))?.slice("--only=".length).split(",");
const part = (name) => !only || only.includes(name);
const DURATION = quick ? 3 : 6;
const SWEEP_DURATION = quick ? 2 : 4;
const WARMUP = quick ? 2 : 4;
const CONNECTIONS = [1, 4, 16, 64];
// At the maximum rate, Miniflare's local queue broker delivers little until the load stops
// (its timers wait behind the requests) and refuses sends once 10,000 messages wait
// (QuotaExceededError: one timer per message): the maximum's run stops at MAX_RATE_REQUESTS.
const MAX_RATE_SECONDS = quick ? 5 : 10;
const MAX_RATE_REQUESTS = 9000;
// The highest rate that keeps up for PACED_SECONDS is bisected in PROBES paced runs of that
// length, between a quarter of the larger of the two workers' maximums and all of it. 20 s
// probes were tried: a rate that kept up for 20 s fell behind in the minute that followed.
const PACED_SECONDS = quick ? 10 : 60;
const PROBES = quick ? 2 : 3;
// "keeps up": what is left unprocessed when the load stops fits in one consumer batch
const BATCH = Number(/\[\[queues\.consumers\]\]\s*queue = "paymos-deliveries"\s*max_batch_size = (\d+)/.exec(await readFile(path.join(ROOT, "wrangler.toml"), "utf8"))?.[1] ?? 50);
const COST_NEW = quick ? 400 : 2000;
const COST_DUPLICATES = quick ? 200 : 1000;
const E2E_INVOICES = quick ? 50 : 200;
const E2E_OPEN_LOOP = quick ? 200 : 1000;
// the top of the sustained end-to-end bisection when the keep-up part has not found a rate
// (`--only=e2e`), or found none that kept up
const E2E_SUSTAINED_TOP = quick ? 200 : 400;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const workers = {
  rust: { label: "ours (Rust → wasm)", script: "build/index.js", metered: "bench/metered-ours.mjs" },
  js: { label: "JS receiver (same work)", script: "bench/js-receiver.js", metered: "bench/metered-js.mjs" },
  noop: { label: "no-op worker (floor)", script: "bench/noop-worker.js" },
};

const results = {
  started_at: new Date().toISOString(),
  machine: { cpus: os.cpus().length, model: os.cpus()[0]?.model, node: process.version, load_average_at_start: os.loadavg() },
  quick,
  scenarios: {},
};

async function withWorker(script, vars, fn) {
  const w = await startBenchWorker(script, vars);
  try {
    return await fn(w);
  } finally {
    await w.close();
  }
}

const count = async (db, sqlText) => (await db.prepare(sqlText).first()).n;
const UNPROCESSED = "SELECT count(*) AS n FROM webhook_delivery WHERE processed_at IS NULL";

/** Waits until no delivery is left unprocessed (or `ms` pass); how long that took. */
async function drain(db, ms) {
  const t0 = Date.now();
  while (Date.now() - t0 < ms) {
    if ((await count(db, UNPROCESSED)) === 0) return Date.now() - t0;
    await sleep(100);
  }
  return null;
}

/** POST → fulfilment, from D1's own clock: the delivery row's insert to its effect row's. */
async function fulfilmentLatency(db) {
  const { results: rows } = await db
    .prepare(
      "SELECT (julianday(e.created_at) - julianday(d.received_at)) * 86400000.0 AS ms FROM effect e JOIN webhook_delivery d ON d.event_id = e.cause WHERE e.kind = 'fulfilment' ORDER BY ms",
    )
    .all();
  const q = (p) => (rows.length ? rows[Math.min(rows.length - 1, Math.floor(p * rows.length))].ms : null);
  return { count: rows.length, p50: q(0.5), p90: q(0.9), p99: q(0.99), max: rows.length ? rows[rows.length - 1].ms : null };
}

const k2 = (n) => (n === undefined || n === null ? "-" : String(n));
const fmt = (n, d = 1) => (n === undefined || n === null ? "-" : Number(n).toFixed(d));
const ratio = (a, b) => (a && b ? (a / b).toFixed(2) + "×" : "-");

console.error(`[bench] ${quick ? "quick" : "full"} run`);

// ---------------------------------------------------------------- throughput and latency
// Paired rounds (bench/ab.mjs): each scenario runs ROUNDS times, the three workers one after
// the other on fresh workers, the order reversed every other round, so that the machine's
// drift falls on all of them alike. Each figure is the median over the rounds; "ours ÷ JS" is
// the median of the per-round ratios (ours and the JS receiver measured next to each other),
// with their range. The runtime's CPU per request (workerd's user + system time over the
// requests; for new deliveries it includes the consumer's work meanwhile) moves far less with
// the machine's noise than requests/s do.
const ROUNDS = quick ? 2 : 3;
if (part("throughput")) {
  const scripts = Object.fromEntries(Object.entries(workers).map(([k, w]) => [k, w.script]));
  const scenario = async (name, mode, concurrency, seconds, warmup = 0) => {
    console.error(`[bench] ${name}: ${ROUNDS} paired rounds of ${seconds} s at ${concurrency} connections${warmup ? ` after ${warmup} s of warm-up` : ""}`);
    const res = await paired(scripts, { mode, concurrency, seconds, rounds: ROUNDS, warmup });
    results.scenarios[name] = {
      ...Object.fromEntries(Object.keys(workers).map((k) => [k, { ...res.summary[k], concurrency, mode, duration_s: seconds, warmup_s: warmup }])),
      ours_over_js: pairedRatio(res, "rust", "js"),
      ours_over_js_cpu: pairedRatio(res, "rust", "js", (x) => x.runtime_cpu_us_per_request),
      ours_over_js_p50: pairedRatio(res, "rust", "js", (x) => x.latency_ms.p50),
      ours_over_js_p99: pairedRatio(res, "rust", "js", (x) => x.latency_ms.p99),
      runs: res.runs,
    };
  };
  // the glue floor: the smallest Rust worker against its JavaScript twin (crates/glue-floor,
  // bench/glue-floor.js): what crossing into wasm and back costs by itself
  console.error(`[bench] glue floor: ${ROUNDS} paired rounds of ${DURATION} s at 16 connections`);
  const floor = await paired({ rust: "crates/glue-floor/build/index.js", js: "bench/glue-floor.js" }, { mode: "duplicate", concurrency: 16, seconds: DURATION, rounds: ROUNDS });
  results.glue_floor = {
    ...floor.summary,
    rust_over_js: pairedRatio(floor, "rust", "js"),
    rust_over_js_cpu: pairedRatio(floor, "rust", "js", (x) => x.runtime_cpu_us_per_request),
  };
  await scenario("new_deliveries", "new", 16, DURATION);
  await scenario("duplicates", "duplicate", 16, DURATION);
  for (const c of CONNECTIONS) await scenario(`new_deliveries_c${c}`, "new", c, SWEEP_DURATION);
  // The same load on a warm isolate: WARMUP seconds of it first, unmeasured, so that the wasm
  // (compiled when the isolate starts, tiered up while it runs) and the JS receiver's JIT
  // both reach their steady state; the rounds above include each isolate's first seconds.
  await scenario("new_deliveries_warm", "new", 16, DURATION, WARMUP);
  await scenario("duplicates_warm", "duplicate", 16, DURATION, WARMUP);
}

// ---------------------------------------------------------------- CPU per request, interleaved
// #27's CPU goals, ours ÷ JS, measured as bench/interleave.mjs measures: both workers started
// once and loaded in turn in 2 s slices, so that the machine's drift over minutes falls on
// both alike (the rounds above start fresh workers 10-15 s apart); the pairs split over two
// legs that start the two in either order.
const CPU_PAIRS = quick ? 4 : 30;
const CPU_SCENARIOS = [
  ["new_c1", "new", 1],
  ["new_c16", "new", 16],
  ["duplicates_c1", "duplicate", 1],
];
if (part("cpu")) {
  results.cpu = {};
  for (const [name, mode, concurrency] of CPU_SCENARIOS) {
    console.error(`[bench] CPU, ${name}: ${CPU_PAIRS} interleaved pairs of 2 s slices`);
    const cfg = { mode, concurrency, slice: 2, pairs: CPU_PAIRS, legs: 2, warmup: WARMUP };
    results.cpu[name] = { ...cfg, ...(await interleaved([workers.js.script, {}], [workers.rust.script, {}], cfg)) };
  }
}

// ---------------------------------------------------------------- cold start
// A fresh isolate's first request and first 100 (bench/cold.mjs), ours against the JS
// receiver, the order reversed every other round.
const COLD_ROUNDS = quick ? 3 : 15;
if (part("cold")) {
  console.error(`[bench] cold start: ${COLD_ROUNDS} fresh isolates each`);
  const { runs, ...summary } = await cold(workers.js.script, workers.rust.script, COLD_ROUNDS);
  results.cold = { ...summary, runs };
}

// ---------------------------------------------------------------- cost per delivery
// The metered entries (bench/meter.mjs) wrap the same worker's D1 and queue bindings: every D1
// call, statement, rows read/written and SQL time as D1 reports them, every message sent.
results.cost = {};
/** Runs `fn` against the metered worker, waits until every consumer is done, sums the meter. */
async function metered(key, vars, fn) {
  return withWorker(workers[key].metered, { BENCH_METER: "1", ...vars }, async (w) => {
    await fn(w);
    const drained = await drain(w.db, 120_000);
    // the effects queue's consumer runs after the deliveries': wait until the meter is still
    let last = "";
    for (let i = 0; i < 60; i++) {
      await sleep(1000);
      const now = await (await fetch(`${w.url}/__bench/meter`)).text();
      if (now === last) break;
      last = now;
    }
    const totals = JSON.parse(last);
    return { drained_ms: drained, totals, summary: costSummary(totals) };
  });
}
for (const key of part("cost") ? ["rust", "js"] : []) {
  console.error(`[bench] cost per delivery: ${workers[key].label}`);
  results.cost[key] = await metered(key, {}, async (w) => {
    await load(w.url, "new", 16, ["--requests", String(COST_NEW)]);
    await load(w.url, "duplicate", 16, ["--requests", String(COST_DUPLICATES)]);
  });
}

/** Per new delivery (receive + every consumer, amortised) and per duplicate. */
function costSummary(t) {
  const zero = { invocations: 0, messages: 0, d1_calls: 0, d1_batches: 0, statements: 0, rows_read: 0, rows_written: 0, sql_ms: 0, sent: {} };
  const rn = t.receive_new ?? zero;
  const rd = t.receive_duplicate ?? zero;
  const consumers = Object.entries(t).filter(([k]) => k.startsWith("queue:")).map(([, v]) => v);
  const others = Object.entries(t).filter(([k]) => !k.startsWith("queue:") && k !== "receive_new" && k !== "receive_duplicate");
  const sum = (k, list) => list.reduce((a, v) => a + (v[k] ?? 0), 0);
  const sent = (list) => list.reduce((a, v) => a + Object.values(v.sent ?? {}).reduce((b, s) => b + s.messages, 0), 0);
  const n = rn.invocations || 1;
  const all = [rn, ...consumers];
  const per = (k) => sum(k, all) / n;
  return {
    new_deliveries: rn.invocations,
    duplicates: rd.invocations,
    per_new: {
      d1_calls: per("d1_calls"),
      statements: per("statements"),
      rows_read: per("rows_read"),
      rows_written: per("rows_written"),
      sql_ms: per("sql_ms"),
      messages_sent: sent(all) / n,
      messages_consumed: sum("messages", consumers) / n,
      consumer_invocations: sum("invocations", consumers) / n,
      receive_only: { d1_calls: rn.d1_calls / n, rows_read: rn.rows_read / n, rows_written: rn.rows_written / n },
    },
    per_duplicate: rd.invocations
      ? { d1_calls: rd.d1_calls / rd.invocations, statements: rd.statements / rd.invocations, rows_read: rd.rows_read / rd.invocations, rows_written: rd.rows_written / rd.invocations, sql_ms: rd.sql_ms / rd.invocations, messages_sent: sent([rd]) / rd.invocations }
      : null,
    other_invocations: Object.fromEntries(others.map(([k, v]) => [k, { invocations: v.invocations, d1_calls: v.d1_calls }])),
  };
}

// ---------------------------------------------------------------- keeping up
// New deliveries for a while, the backlog (deliveries not yet processed) sampled every second
// through the worker's own D1 binding (GET /__bench/backlog, bench/meter.mjs, metering off);
// then how long what is left takes to drain, and POST → fulfilment from D1's own timestamps.
// First at the maximum rate (16 connections, where throughput saturates) for MAX_RATE_SECONDS
// or MAX_RATE_REQUESTS, then paced at the rates bisected below, PACED_SECONDS each.
async function keepUp(key, seconds, rate, requests) {
  return withWorker(workers[key].metered, {}, async (w) => {
    const extra = ["--duration-seconds", String(seconds), ...(rate ? ["--rate", String(rate)] : []), ...(requests ? ["--requests", String(requests)] : [])];
    let done = false;
    const running = load(w.url, "new", 16, extra).finally(() => (done = true));
    const samples = [];
    const t0 = Date.now();
    while (!done) {
      await sleep(1000);
      try {
        const b = await (await fetch(`${w.url}/__bench/backlog`)).json();
        samples.push({ s: (Date.now() - t0) / 1000, ...b });
      } catch {
        /* a probe lost to the load: the next one counts */
      }
    }
    const r = await running;
    const backlog = await count(w.db, UNPROCESSED);
    const drainedMs = await drain(w.db, 120_000);
    const during = samples.map((x) => x.unprocessed).sort((a, b) => a - b);
    return {
      load: r,
      rate,
      backlog_at_end: backlog,
      backlog_during: { samples: during.length, p50: during[Math.floor(during.length / 2)] ?? null, max: during[during.length - 1] ?? null },
      drain_ms: drainedMs,
      drain_rate: drainedMs ? Math.round((backlog / drainedMs) * 1000) : null,
      fulfilment_ms: await fulfilmentLatency(w.db),
      samples,
    };
  });
}
/** Whether a paced run kept up: it reached the rate asked for, and what it left fits one batch. */
const keptUp = (k) => k.backlog_at_end <= BATCH && k.load.throughput_rps >= 0.97 * k.rate;
// Locally the receiver, its consumer, D1 and the queue broker share one workerd thread, so the
// receivers' maximum leaves nothing for the consumer (and the broker's timers wait behind the
// requests): the highest rate the whole sustains for PACED_SECONDS is found by bisection. Both
// workers bisect the same range, so their rates are comparable.
results.keep_up = {};
const keepUpKeys = part("keep_up") ? ["rust", "js"] : [];
for (const key of keepUpKeys) {
  console.error(`[bench] keeping up, maximum rate for ${MAX_RATE_SECONDS} s: ${workers[key].label}`);
  results.keep_up[key] = { max: await keepUp(key, MAX_RATE_SECONDS, undefined, MAX_RATE_REQUESTS), probes: [] };
}
const ceiling = Math.max(0, ...keepUpKeys.map((key) => results.keep_up[key].max.load.throughput_rps));
const bottom = ceiling / 4;
for (const key of keepUpKeys) {
  const probe = async (rate) => {
    console.error(`[bench] keeping up, ${rate} req/s for ${PACED_SECONDS} s: ${workers[key].label}`);
    const k = { ...(await keepUp(key, PACED_SECONDS, rate)), rate };
    return { ...k, kept_up: keptUp(k) };
  };
  const { best, probes } = await highestKeptUp(bottom, ceiling, probe);
  results.keep_up[key].probes = probes.map((k) => ({ rate: k.rate, kept_up: k.kept_up, backlog_at_end: k.backlog_at_end, backlog_during: k.backlog_during, achieved_rps: k.load.throughput_rps, fulfilment_ms: k.fulfilment_ms }));
  // the highest rate that kept up, or (none did) the lowest tried, with its figures
  results.keep_up[key].paced = best ?? (await probe(Math.round(bottom)));
}

/**
 * The highest rate between `lo` and `hi` at which `probe(rate)` says it kept up (`kept_up`),
 * bisected in PROBES runs: the best run (null if none kept up) and every run, in order.
 */
async function highestKeptUp(lo, hi, probe) {
  let best = null;
  const probes = [];
  for (let i = 0; i < PROBES; i++) {
    const r = await probe(Math.round((lo + hi) / 2));
    probes.push(r);
    if (r.kept_up) [lo, best] = [r.rate, r];
    else hi = r.rate;
  }
  return { best, probes };
}

// ---------------------------------------------------------------- to the order system (ours)
// The same figure under sustained load, as in the keep-up scenario but with the dispatcher's
// work and the order system's POSTs on top: paid invoices paced for PACED_SECONDS, at the
// highest rate whose effects keep up, bisected in PROBES runs between a quarter of the rate
// ours kept up with there (receive + consume) and all of it. Kept up: no effect timed out,
// and they were delivered at the rate sent (open loop: effects ÷ seconds from the first POST
// to the last effect).
async function sustainedEndToEnd(vars, orders) {
  const paced = results.keep_up.rust?.paced;
  const top = paced?.kept_up ? paced.rate : E2E_SUSTAINED_TOP;
  const run = async (rate) => {
    console.error(`[bench] end to end, ${rate} paid invoices/s for ${PACED_SECONDS} s`);
    const extra = [...orders.openLoop(Math.round(rate * PACED_SECONDS)), "--rate", String(rate)];
    const r = await withWorker(workers.rust.script, vars, (w) => load(w.url, "e2e", 16, extra));
    return { rate, kept_up: r.effects_timed_out === 0 && (r.effects_per_second ?? 0) >= 0.97 * rate, ...r };
  };
  const { best, probes } = await highestKeptUp(top / 4, top, run);
  const summary = probes.map((r) => ({ rate: r.rate, kept_up: r.kept_up, effects_per_second: r.effects_per_second, effect_latency_ms: r.effect_latency_ms }));
  return { top, probes: summary, ...(best ?? (await run(Math.round(top / 4)))) };
}

results.e2e = {};
if (part("e2e")) {
  console.error("[bench] end to end: POST → the order system's 2xx (paymos orders)");
  // carries on if it never answers: the loads then report every effect timed out
  const orders = await startOrders();
  try {
    const vars = orders.vars;
    results.e2e.closed_loop = await withWorker(workers.rust.script, vars, (w) => load(w.url, "e2e", 16, orders.closedLoop(E2E_INVOICES)));
    results.e2e.open_loop = await withWorker(workers.rust.script, vars, (w) => load(w.url, "e2e", 16, orders.openLoop(E2E_OPEN_LOOP)));
    results.e2e.sustained = await sustainedEndToEnd(vars, orders);
    // what a paid invoice costs in D1 when its fulfilment is pushed to the order system:
    // receive, consume and the dispatcher (load, POST, record), amortised
    if (part("cost")) {
      console.error("[bench] cost per delivery with an order system: ours");
      results.e2e.cost = await metered("rust", vars, (w) => load(w.url, "e2e", 16, orders.openLoop(E2E_OPEN_LOOP)));
    }
  } finally {
    orders.stop();
  }
}

// ---------------------------------------------------------------- sizes
const wasm = await readFile(path.join(ROOT, "build/index_bg.wasm"));
const js = await readFile(path.join(ROOT, "bench/js-receiver.js"));
results.size = {
  wasm_bytes: wasm.length,
  wasm_gzip_bytes: gzipSync(wasm, { level: 9 }).length,
  glue_js_bytes: (await stat(path.join(ROOT, "build/index.js"))).size,
  js_receiver_bytes: js.length,
  js_receiver_gzip_bytes: gzipSync(js, { level: 9 }).length,
  statements_json_bytes: (await stat(path.join(ROOT, "bench/statements.json"))).size,
};
// the whole deploy bundle, as wrangler deploy --dry-run counts it (measured by scripts/bench.sh)
results.size.deploy = process.env.PAYMOS_BENCH_DEPLOY_SIZE || null;
results.finished_at = new Date().toISOString();
results.machine.load_average_at_end = os.loadavg();

// ---------------------------------------------------------------- report
const lines = [];
const say = (s = "") => lines.push(s);
say(`Benchmark ${results.finished_at} (${results.machine.cpus} cores, ${results.machine.model}); loopback; each figure from one run of \`npm run bench${quick ? " -- --quick" : ""}\``);
// the throughput table, when its part ran
if (Object.keys(results.scenarios).length > 0) {
  say();
  say(`Throughput: ${ROUNDS} paired rounds per scenario (fresh workers, the order reversed every other round); each figure the median over the rounds; ours ÷ JS the median of the per-round ratios [smallest–largest]; CPU µs/req is workerd's user + system time per request.`);
  say();
  say("| scenario | worker | req/s | p50 ms | p99 ms | CPU µs/req | non-2xx | ours ÷ JS (req/s) | ours ÷ floor (req/s) | CPU ours ÷ JS | p50 ours ÷ JS | p99 ours ÷ JS |");
  say("|---|---|---|---|---|---|---|---|---|---|---|---|");
}
const range = (q) => (q ? `${q.median.toFixed(2)}× [${q.min.toFixed(2)}–${q.max.toFixed(2)}]` : "-");
for (const [name, row] of Object.entries(results.scenarios)) {
  for (const key of Object.keys(workers)) {
    const r = row[key];
    if (!r) continue;
    const rel =
      key === "rust"
        ? [range(row.ours_over_js), ratio(r.throughput_rps, row.noop.throughput_rps), range(row.ours_over_js_cpu), range(row.ours_over_js_p50), range(row.ours_over_js_p99)]
        : ["", "", "", "", ""];
    say(`| ${name} | ${workers[key].label} | ${fmt(r.throughput_rps)} | ${fmt(r.p50, 2)} | ${fmt(r.p99, 2)} | ${fmt(r.runtime_cpu_us_per_request, 0)} | ${r.non_2xx} | ${rel.join(" | ")} |`);
  }
}
if (results.glue_floor) {
  const g = results.glue_floor;
  say();
  say(`Glue floor (crates/glue-floor against bench/glue-floor.js: one header, the body awaited, the log line, the fixed receipt; duplicates mode, 16 connections): Rust ${fmt(g.rust.throughput_rps)} req/s, ${fmt(g.rust.runtime_cpu_us_per_request, 0)} CPU µs/req, ${g.rust.non_2xx} failed; JS ${fmt(g.js.throughput_rps)} req/s, ${fmt(g.js.runtime_cpu_us_per_request, 0)} CPU µs/req, ${g.js.non_2xx} failed; Rust ÷ JS req/s ${range(g.rust_over_js)}, CPU ${range(g.rust_over_js_cpu)}.`);
}
if (results.cpu) {
  say();
  say(`CPU per request, interleaved (bench/interleave.mjs): ours and the JS receiver started once each, loaded in turn in 2 s slices, ${CPU_PAIRS} pairs over two legs (started in either order); workerd's CPU of each worker's own process, a slice's tail (its consumer finishing) counted to it; ours ÷ JS the median of the pairs' ratios [quartiles; range] and pooled (all CPU ÷ all requests):`);
  say();
  say("| scenario | ours CPU µs/req | JS CPU µs/req | ours ÷ JS, median of the pairs [quartiles; range] | pooled |");
  say("|---|---|---|---|---|");
  for (const [name, r] of Object.entries(results.cpu)) {
    say(`| ${name} (${r.mode}, ${r.concurrency} connection${r.concurrency > 1 ? "s" : ""}) | ${fmt(r.cpu_us[1], 0)} | ${fmt(r.cpu_us[0], 0)} | ${r.median.toFixed(3)}× [${r.q1.toFixed(3)}–${r.q3.toFixed(3)}; ${r.min.toFixed(2)}–${r.max.toFixed(2)}] | ${r.pooled.toFixed(3)}× |`);
  }
}
if (results.cold) {
  say();
  say(`Cold start (bench/cold.mjs): ${results.cold.rounds} fresh isolates each, new deliveries at 1 connection, consumers out; medians, and ours ÷ JS the median of the per-round ratios [range]:`);
  say();
  say("| measure | ours | JS receiver | ours ÷ JS |");
  say("|---|---|---|---|");
  for (const [k, m] of Object.entries(results.cold.measures)) say(`| ${k} | ${fmt(m.b)} | ${fmt(m.a)} | ${m.median.toFixed(2)}× [${m.min.toFixed(2)}–${m.max.toFixed(2)}] |`);
}
if (part("cost")) {
  say();
  say(`Cost per delivery, from D1's own result meta (bench/meter.mjs; ${COST_NEW} new deliveries then ${COST_DUPLICATES} duplicates at 16 connections, every consumer drained; a D1 call is one round trip, a batch counting once):`);
  say();
  say("| worker | per | D1 calls | statements | rows read | rows written | SQL ms | queue messages sent | deliveries/s per D1 database (1,000 calls/s ÷ calls) |");
  say("|---|---|---|---|---|---|---|---|---|");
  for (const key of ["rust", "js"]) {
    const s = results.cost[key].summary;
    const pn = s.per_new;
    say(`| ${workers[key].label} | new delivery (receive + consume + dispatch, amortised) | ${fmt(pn.d1_calls, 3)} | ${fmt(pn.statements, 2)} | ${fmt(pn.rows_read, 1)} | ${fmt(pn.rows_written, 1)} | ${fmt(pn.sql_ms, 3)} | ${fmt(pn.messages_sent, 2)} | ${fmt(1000 / pn.d1_calls, 0)} |`);
    const pd = s.per_duplicate;
    if (pd) say(`| ${workers[key].label} | duplicate | ${fmt(pd.d1_calls, 3)} | ${fmt(pd.statements, 2)} | ${fmt(pd.rows_read, 1)} | ${fmt(pd.rows_written, 1)} | ${fmt(pd.sql_ms, 3)} | ${fmt(pd.messages_sent, 2)} | ${fmt(1000 / pd.d1_calls, 0)} |`);
  }
}
if (part("keep_up")) {
  say();
  say(`Keeping up: new deliveries at 16 connections, as fast as they go for ${MAX_RATE_SECONDS} s (at most ${MAX_RATE_REQUESTS} requests, below the local broker's 10,000 waiting messages); then the highest paced rate that keeps up (the backlog when the load stops at most one consumer batch, ${BATCH}, and the rate reached), bisected in ${PROBES} runs of ${PACED_SECONDS} s each between a quarter of the larger of the two maximums and all of it (${fmt(bottom, 0)} to ${fmt(ceiling, 0)} req/s, the same rates for both, to ${fmt((ceiling - bottom) / 2 ** PROBES, 0)} req/s); the table shows the highest rate that kept up. The backlog (deliveries not yet processed) sampled every second and when the load stops, the time to drain what is left, and POST → fulfilment recorded (D1's timestamps: the delivery row's insert to its effect row's):`);
  say();
  say("| worker | load | req/s | deliveries | backlog p50 / max during | backlog at the end | drained in (rate) | fulfilment p50 ms | p99 ms |");
  say("|---|---|---|---|---|---|---|---|---|");
  for (const key of ["rust", "js"]) {
    for (const [label, k] of [[`max, ${MAX_RATE_SECONDS} s`, results.keep_up[key].max], [`${k2(results.keep_up[key].paced.rate)} req/s, ${PACED_SECONDS} s`, results.keep_up[key].paced]]) {
      const drained = k.drain_ms === null ? "> 120 s" : `${fmt(k.drain_ms / 1000, 1)} s${k.drain_rate && k.backlog_at_end >= 500 ? ` (${k.drain_rate}/s)` : ""}`;
      say(`| ${workers[key].label} | ${label} | ${fmt(k.load.throughput_rps)} | ${k.load.duplicate_false} | ${k.backlog_during.p50 ?? "-"} / ${k.backlog_during.max ?? "-"} | ${k.backlog_at_end}${k.kept_up === undefined ? "" : k.kept_up ? " (kept up)" : " (did not keep up)"} | ${drained} | ${fmt(k.fulfilment_ms.p50)} | ${fmt(k.fulfilment_ms.p99)} |`);
    }
  }
  say();
  for (const key of ["rust", "js"]) {
    const probes = results.keep_up[key].probes.map((p) => `${p.rate} req/s ${p.kept_up ? "kept up" : "did not"} (backlog p50 ${p.backlog_during.p50 ?? "-"}, max ${p.backlog_during.max ?? "-"}, ${p.backlog_at_end} left; fulfilment p50 ${fmt(p.fulfilment_ms.p50, 0)} ms; ${fmt(p.achieved_rps)} req/s reached)`);
    say(`Probes, ${workers[key].label}: ${probes.join("; ")}.`);
  }
  const sustained = (key) => (results.keep_up[key].paced.kept_up ? results.keep_up[key].paced.load.throughput_rps : null);
  say(`Sustained (receive + consume on one local thread, ${PACED_SECONDS} s kept up): ours ${fmt(sustained("rust"))} req/s, the JS receiver ${fmt(sustained("js"))} req/s, ours ÷ JS ${ratio(sustained("rust"), sustained("js"))} (one bisection each, to ${fmt((ceiling - bottom) / 2 ** PROBES, 0)} req/s).`);
}
if (results.e2e.cost) {
  const pn = results.e2e.cost.summary.per_new;
  say();
  say(`With an order system (ours, ${E2E_OPEN_LOOP} paid invoices, each fulfilment pushed to \`paymos orders\`): ${fmt(pn.d1_calls, 3)} D1 calls per new delivery (receive + consume + dispatch, amortised), ${fmt(pn.rows_read, 1)} rows read, ${fmt(pn.rows_written, 1)} rows written, ${fmt(pn.messages_sent, 2)} queue messages sent: ${fmt(1000 / pn.d1_calls, 0)} deliveries/s per D1 database.`);
}
const c = results.e2e.closed_loop;
const o = results.e2e.open_loop;
if (c && o) {
  say();
  say(`To the order system (ours, \`paymos orders\` as ORDER_SYSTEM_URL, polled every 10 ms): POST → the order system's 2xx for ${E2E_INVOICES} invoices at 16 connections, each waiting for its effect: p50 ${fmt(c.effect_latency_ms?.p50)} ms, p99 ${fmt(c.effect_latency_ms?.p99)} ms (${c.effects_seen} delivered, ${c.effects_timed_out} timed out); ${E2E_OPEN_LOOP} invoices sent as fast as 16 connections go: ${fmt(o.effects_per_second)} effects delivered per second (${o.effects_seen} delivered, ${o.effects_timed_out} timed out; POST → 2xx p50 ${fmt(o.effect_latency_ms?.p50)} ms, p99 ${fmt(o.effect_latency_ms?.p99)} ms)`);
}
const z = results.e2e.sustained;
if (z) {
  const from = results.keep_up.rust?.paced?.kept_up ? "the rate ours kept up with in the keep-up scenario, without the dispatcher" : "a fixed top: the keep-up scenario found no rate";
  const probes = z.probes.map((p) => `${p.rate} req/s ${p.kept_up ? "kept up" : "did not"} (${fmt(p.effects_per_second)} effects/s, p50 ${fmt(p.effect_latency_ms?.p50, 0)} ms, p99 ${fmt(p.effect_latency_ms?.p99, 0)} ms)`);
  say(`Under sustained load (ours; the consumer and the dispatcher at work, each fulfilment pushed to \`paymos orders\`): paid invoices paced for ${PACED_SECONDS} s, the highest rate whose effects kept up bisected in ${PROBES} runs between a quarter of ${z.top} req/s (${from}) and all of it: at ${z.rate} req/s${z.kept_up ? "" : " (none kept up: the lowest rate)"}, POST → the order system's 2xx p50 ${fmt(z.effect_latency_ms?.p50)} ms, p99 ${fmt(z.effect_latency_ms?.p99)} ms (${z.effects_seen} delivered, ${z.effects_timed_out} timed out; ${fmt(z.effects_per_second)} effects delivered per second). Probes: ${probes.join("; ")}.`);
}
say(`Size: wasm ${results.size.wasm_bytes} bytes raw, ${results.size.wasm_gzip_bytes} gzipped (+ ${results.size.glue_js_bytes} bytes of JS glue); deploy bundle (wrangler deploy --dry-run) ${results.size.deploy ?? "not measured"}; the JS receiver ${results.size.js_receiver_bytes} bytes (${results.size.js_receiver_gzip_bytes} gzipped) + its statements.json ${results.size.statements_json_bytes} bytes`);
say(`Load average (1, 5, 15 min) at start ${results.machine.load_average_at_start.map((x) => x.toFixed(2)).join(", ")}, at end ${results.machine.load_average_at_end.map((x) => x.toFixed(2)).join(", ")}`);
const report = lines.join("\n");
console.log(report);
await mkdir(path.join(ROOT, "bench/results"), { recursive: true });
results.summary_markdown = report;
// a run of some parts (--only=) must not replace the last full run, which the READMEs quote
const out = only ? "bench/results/partial.json" : "bench/results/latest.json";
await writeFile(path.join(ROOT, out), JSON.stringify(results, null, 2) + "\n");
console.error(`[bench] wrote ${out}`);
