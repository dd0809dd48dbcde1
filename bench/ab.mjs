// Paired A/B throughput: two worker scripts measured in alternating rounds (A B, B A, A B, …),
// each round on a fresh worker (empty D1, idle consumer), so that drift on a shared, noisy
// machine falls on both alike. Prints each round and the median of the per-round ratios B ÷ A.
// For comparing two builds of ours while developing, e.g.
//   cp -r build bench/ab-builds/base   # (bench/ab-builds/ is not committed)
//   node bench/ab.mjs bench/ab-builds/base/index.js build/index.js --mode duplicate --concurrency 16
// or one build under two settings (vars given as NAME=value, several separated by commas):
//   node bench/ab.mjs build/index.js build/index.js --b-vars RECEIVE_LOG=except_duplicates --mode duplicate
// npm run bench uses the same pairing (bench/run.mjs) for ours against the JS receiver.
import { readFile, readdir } from "node:fs/promises";
import path from "node:path";
import { execFile, spawn } from "node:child_process";
import { promisify } from "node:util";
import { eventually, freePort, startWorker, ROOT, SECRET_NEW } from "../tests/helpers/worker.mjs";

const run = promisify(execFile);
// where cargo put it: CARGO_TARGET_DIR when set
export const paymos = process.env.PAYMOS_BIN ?? path.resolve(ROOT, process.env.CARGO_TARGET_DIR || "target", "release/paymos");
/** The core's statements and plans, the JS receiver's STATEMENTS binding. */
export const STATEMENTS = JSON.parse(await readFile(path.join(ROOT, "bench/statements.json"), "utf8"));

/** The Standard Webhooks secret shared with `paymos orders`: whsec_ + base64 of the key bytes. */
const ORDER_SECRET = "whsec_" + Buffer.from("paymos-bench-order-system-key-32").toString("base64");

/**
 * `paymos orders` on a free port, waited on (up to 10 s) until it answers `/healthz` (`up` says
 * whether it did): the worker's vars that send effects to it, the e2e load's arguments for a
 * closed loop of `n` invoices (each waiting for its effect) and an open loop (as fast as the
 * connections go), and `stop()`.
 */
export async function startOrders() {
  const port = await freePort();
  const child = spawn(paymos, ["orders", "--port", String(port), "--secret", ORDER_SECRET, "--quiet"], { stdio: ["ignore", "ignore", "inherit"] });
  const url = `http://127.0.0.1:${port}`;
  const healthy = () => fetch(`${url}/healthz`).then((r) => r.ok, () => false);
  const up = await eventually("paymos orders", healthy, 10000).then(() => true, () => false);
  return {
    url,
    up,
    vars: { ORDER_SYSTEM_URL: `${url}/orders`, ORDER_SYSTEM_SECRET: ORDER_SECRET },
    closedLoop: (n) => ["--requests", String(n), "--orders-url", url],
    openLoop: (n) => ["--requests", String(n), "--orders-url", url, "--open-loop", "--effect-timeout-seconds", "120"],
    stop: () => child.kill(),
  };
}

/**
 * A fresh worker for the benchmark, started as the tests start ours: any entry under the
 * repository (ours, the JS receiver, the floors, one of them behind bench/meter.mjs), the
 * STATEMENTS binding, `vars`; its logs drained unread.
 */
export function startBenchWorker(script, vars = {}, options = {}) {
  return startWorker({ scriptPath: path.join(ROOT, script), vars: { STATEMENTS, ...vars }, collectLogs: false, patch: withoutConsumers, ...options });
}

/**
 * BENCH_NO_CONSUMERS=1 (diagnosis only): the queues keep their producers but lose their
 * consumers, so that a run of new deliveries measures the receive path alone, without the
 * consumer's work sharing the runtime's thread.
 */
const withoutConsumers =
  process.env.BENCH_NO_CONSUMERS === "1"
    ? (options) => {
        options.queueConsumers = {};
      }
    : undefined;

/** `paymos load` against `url` (pre-signed requests over loopback); its JSON report. */
export async function load(url, mode, concurrency, extra = []) {
  const args = ["load", "--to", url, "--mode", mode, "--concurrency", String(concurrency), "--secret", SECRET_NEW, "--json", ...extra];
  const { stdout } = await run(paymos, args, { maxBuffer: 64 << 20 });
  return JSON.parse(stdout);
}

/** Each workerd process this process started: its pid and its `/proc/<pid>/stat` fields. */
export async function workerdChildren() {
  const found = [];
  for (const pid of await readdir("/proc").catch(() => [])) {
    if (!/^\d+$/.test(pid)) continue;
    const stat = await readFile(`/proc/${pid}/stat`, "utf8").catch(() => "");
    const m = /^\d+ \((.*)\) \S (\d+)(?: \S+){9} (\d+) (\d+)/.exec(stat);
    if (m && m[1] === "workerd" && Number(m[2]) === process.pid) found.push({ pid, utime: Number(m[3]), stime: Number(m[4]) });
  }
  return found;
}

/**
 * CPU seconds (user + system, all threads) used so far by this process's workerd children:
 * the runtime's cost, which moves far less with the machine's noise than requests/s does.
 */
export async function workerdCpuSeconds() {
  const tick = 100; // USER_HZ on Linux
  return (await workerdChildren()).reduce((s, c) => s + (c.utime + c.stime) / tick, 0);
}

/**
 * One load run against a fresh worker running `script`, with the runtime's CPU per request.
 * `warmup` seconds of the same load run first, unmeasured: the isolate's code compiled and
 * tiered up (for ours, the whole wasm module; for the JS receiver, its functions), as in an
 * isolate that has served requests before. What a cold isolate costs is measured apart.
 */
export async function measureOnce(script, mode, concurrency, seconds, warmup = 0, vars = {}) {
  const w = await startBenchWorker(script, vars);
  try {
    if (warmup > 0) await load(`${w.url}/webhooks/paymos`, mode, concurrency, ["--duration-seconds", String(warmup)]);
    const cpu0 = await workerdCpuSeconds();
    const r = await load(`${w.url}/webhooks/paymos`, mode, concurrency, ["--duration-seconds", String(seconds)]);
    const cpu = (await workerdCpuSeconds()) - cpu0;
    // includes what the consumer does meanwhile (new deliveries), as the throughput does
    r.runtime_cpu_us_per_request = r.requests ? (cpu * 1e6) / r.requests : null;
    return r;
  } finally {
    await w.close();
  }
}

/**
 * The same CPU in nanoseconds' resolution: the sum over the live threads of this process's
 * workerd children of `/proc/<pid>/task/<tid>/schedstat`'s time on CPU, where `/proc/<pid>/stat`
 * counts 10 ms ticks (too coarse for one request). A thread that exited meanwhile is not
 * counted; workerd's threads (its V8 platform's workers included) live as long as it does.
 */
export async function workerdCpuSecondsFine() {
  return cpuSecondsOf((await workerdChildren()).map((c) => c.pid));
}

/** The same for the given processes only (bench/interleave.mjs: each worker its own). */
export async function cpuSecondsOf(pids) {
  let ns = 0;
  for (const pid of pids) {
    for (const tid of await readdir(`/proc/${pid}/task`).catch(() => [])) {
      const line = await readFile(`/proc/${pid}/task/${tid}/schedstat`, "utf8").catch(() => "");
      ns += Number(line.split(" ")[0]) || 0;
    }
  }
  return ns / 1e9;
}

export const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? (s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2) : null;
};

/**
 * `rounds` paired rounds over `scripts` (an object key → script, or → `{ script, vars }` for a
 * script under its own vars), the order reversed every other round. Returns every run and,
 * per key, the median req/s, p50 and p99.
 */
export async function paired(scripts, { mode, concurrency, seconds, rounds, warmup = 0 }) {
  const keys = Object.keys(scripts);
  const runs = Object.fromEntries(keys.map((k) => [k, []]));
  for (let r = 0; r < rounds; r++) {
    const order = r % 2 ? [...keys].reverse() : keys;
    for (const k of order) {
      const { script, vars } = typeof scripts[k] === "string" ? { script: scripts[k], vars: {} } : scripts[k];
      runs[k].push(await measureOnce(script, mode, concurrency, seconds, warmup, vars));
    }
  }
  const summary = Object.fromEntries(
    keys.map((k) => [
      k,
      {
        throughput_rps: median(runs[k].map((x) => x.throughput_rps)),
        p50: median(runs[k].map((x) => x.latency_ms.p50)),
        p99: median(runs[k].map((x) => x.latency_ms.p99)),
        runtime_cpu_us_per_request: median(runs[k].map((x) => x.runtime_cpu_us_per_request)),
        non_2xx: runs[k].reduce((a, x) => a + x.non_2xx + x.errors, 0),
        rounds: runs[k].map((x) => x.throughput_rps),
      },
    ]),
  );
  return { runs, summary };
}

/** Median over rounds of a ÷ b measured in the same round, with the smallest and largest. */
export function pairedRatio(res, a, b, pick = (x) => x.throughput_rps) {
  const rs = res.runs[a].map((x, i) => pick(x) / pick(res.runs[b][i]));
  return { median: median(rs), min: Math.min(...rs), max: Math.max(...rs), rounds: rs };
}

/**
 * A bench tool's command line: `opt(name, default)` reads `--name value`, `has(name)` a bare
 * `--name` (one of `flags`, which take no value), and `positional` holds the arguments that are
 * neither an option nor an option's value (the scripts).
 */
export function commandLine(flags = []) {
  const argv = process.argv.slice(2);
  const takesValue = (x) => x?.startsWith("--") && !flags.includes(x.slice(2));
  return {
    opt: (name, dflt) => {
      const i = argv.indexOf(`--${name}`);
      return i >= 0 ? argv[i + 1] : dflt;
    },
    has: (name) => argv.includes(`--${name}`),
    positional: argv.filter((x, i) => !x.startsWith("--") && !takesValue(argv[i - 1])),
  };
}

/** `NAME=value,NAME=value` (`--a-vars`, `--b-vars`) as an object (a value may hold `=`, not `,`). */
export function parseVars(text) {
  return Object.fromEntries(
    (text ?? "")
      .split(",")
      .filter(Boolean)
      .map((kv) => {
        const i = kv.indexOf("=");
        if (i <= 0) throw new Error(`not NAME=value: ${kv}`);
        return [kv.slice(0, i), kv.slice(i + 1)];
      }),
  );
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { opt, positional } = commandLine();
  const [a, b] = positional;
  if (!a || !b) {
    console.error("usage: node bench/ab.mjs A.js B.js [--mode new|duplicate] [--concurrency N] [--seconds S] [--rounds R] [--warmup S] [--a-vars NAME=value,...] [--b-vars NAME=value,...]");
    process.exit(2);
  }
  const arms = { A: { script: a, vars: parseVars(opt("a-vars")) }, B: { script: b, vars: parseVars(opt("b-vars")) } };
  const cfg = { mode: opt("mode", "new"), concurrency: Number(opt("concurrency", 16)), seconds: Number(opt("seconds", 4)), rounds: Number(opt("rounds", 4)), warmup: Number(opt("warmup", 0)) };
  const res = await paired(arms, cfg);
  for (const k of ["A", "B"]) console.log(k, arms[k].vars, res.summary[k]);
  const q = pairedRatio(res, "B", "A");
  console.log(`B ÷ A req/s: median ${q.median.toFixed(3)} (rounds ${q.rounds.map((x) => x.toFixed(2)).join(", ")}) ${JSON.stringify(cfg)}`);
  const c = pairedRatio(res, "B", "A", (x) => x.runtime_cpu_us_per_request);
  console.log(`B ÷ A runtime CPU per request: median ${c.median.toFixed(3)} (rounds ${c.rounds.map((x) => x.toFixed(2)).join(", ")})`);
}
