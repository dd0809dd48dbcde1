// npm run bench: our worker and two comparison workers (bench/noop-worker.js, the platform
// floor; bench/js-receiver.js, the same hot path in JavaScript) run in the same runtime
// (Miniflare/workerd, as `npm start`), driven one after the other by `paymos load` over
// loopback. Prints a table with our figures as ratios to theirs and writes bench/results/latest.json.
// No assertion on time anywhere: these machines are shared and noisy, ratios from one run are what counts.
import { execFile } from "node:child_process";
import { readFile, writeFile, mkdir, stat } from "node:fs/promises";
import { gzipSync } from "node:zlib";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { startWorker, ROOT, ADMIN_TOKEN, SECRET_NEW } from "../tests/helpers/worker.mjs";

const run = promisify(execFile);
const quick = process.argv.includes("--quick");
const DURATION = quick ? 3 : 8;
const SWEEP_DURATION = quick ? 2 : 5;
const CONNECTIONS = [1, 4, 16, 64];
const E2E_INVOICES = quick ? 50 : 200;
const paymos = path.join(ROOT, "target/release/paymos");

async function load(url, mode, concurrency, extra = []) {
  const args = ["load", "--to", url, "--mode", mode, "--concurrency", String(concurrency), "--secret", SECRET_NEW, "--json", ...extra];
  const { stdout } = await run(paymos, args, { maxBuffer: 64 << 20 });
  return JSON.parse(stdout);
}

const workers = {
  rust: { label: "ours (Rust → wasm)", script: undefined },
  js: { label: "minimal JS receiver", script: path.join(ROOT, "bench/js-receiver.js") },
  noop: { label: "no-op worker (floor)", script: path.join(ROOT, "bench/noop-worker.js") },
};

const results = { started_at: new Date().toISOString(), machine: { cpus: os.cpus().length, model: os.cpus()[0]?.model, node: process.version }, quick, scenarios: {} };

async function measure(name, fn) {
  const row = {};
  for (const [key, def] of Object.entries(workers)) {
    const w = await startWorker({ scriptPath: def.script, collectLogs: false });
    try {
      row[key] = await fn(w, key);
    } finally {
      await w.close();
    }
  }
  results.scenarios[name] = row;
  return row;
}

const fmt = (n, d = 1) => (n === undefined || n === null ? "-" : Number(n).toFixed(d));
const ratio = (a, b) => (a && b ? (a / b).toFixed(2) + "×" : "-");

console.error(`[bench] ${quick ? "quick" : "full"} run; each scenario measures the three workers one after the other`);
await measure("new_deliveries", (w) => load(w.url, "new", 16, ["--duration-seconds", String(DURATION)]));
await measure("duplicates", (w) => load(w.url, "duplicate", 16, ["--duration-seconds", String(DURATION)]));
for (const c of CONNECTIONS) {
  await measure(`new_deliveries_c${c}`, (w) => load(w.url, "new", c, ["--duration-seconds", String(SWEEP_DURATION)]));
}
// end to end needs the business logic: ours only
{
  const w = await startWorker({ collectLogs: false });
  try {
    results.scenarios.e2e = { rust: await load(w.url, "e2e", 16, ["--requests", String(E2E_INVOICES), "--admin-token", ADMIN_TOKEN]) };
  } finally {
    await w.close();
  }
}
const wasm = await readFile(path.join(ROOT, "build/index_bg.wasm"));
const js = await readFile(path.join(ROOT, "bench/js-receiver.js"));
results.size = {
  wasm_bytes: wasm.length,
  wasm_gzip_bytes: gzipSync(wasm, { level: 9 }).length,
  glue_js_bytes: (await stat(path.join(ROOT, "build/index.js"))).size,
  js_receiver_bytes: js.length,
  js_receiver_gzip_bytes: gzipSync(js, { level: 9 }).length,
};
results.finished_at = new Date().toISOString();

// ---------------------------------------------------------------- report
const lines = [];
const say = (s = "") => lines.push(s);
say(`Benchmark ${results.finished_at} (${results.machine.cpus} cores, ${results.machine.model}); loopback; each figure from one run of \`npm run bench${quick ? " -- --quick" : ""}\``);
say();
say("| scenario | worker | req/s | p50 ms | p99 ms | non-2xx | ours ÷ JS (req/s) | ours ÷ floor (req/s) | p50 ours ÷ JS |");
say("|---|---|---|---|---|---|---|---|---|");
for (const [name, row] of Object.entries(results.scenarios)) {
  for (const [key, r] of Object.entries(row)) {
    const ours = row.rust;
    const rel = key === "rust" && row.js ? [ratio(ours.throughput_rps, row.js.throughput_rps), ratio(ours.throughput_rps, row.noop.throughput_rps), ratio(ours.latency_ms?.p50, row.js.latency_ms?.p50)] : ["", "", ""];
    say(`| ${name} | ${workers[key].label} | ${fmt(r.throughput_rps)} | ${fmt(r.latency_ms?.p50, 2)} | ${fmt(r.latency_ms?.p99, 2)} | ${r.non_2xx + r.errors} | ${rel.join(" | ")} |`);
  }
}
const e2e = results.scenarios.e2e.rust;
say();
say(`End to end (POST → fulfilment recorded), ${E2E_INVOICES} invoices at 16 connections: effect latency p50 ${fmt(e2e.effect_latency_ms?.p50)} ms, p99 ${fmt(e2e.effect_latency_ms?.p99)} ms; effects seen ${e2e.effects_seen}, timed out ${e2e.effects_timed_out}`);
say(`Size: wasm ${results.size.wasm_bytes} bytes raw, ${results.size.wasm_gzip_bytes} gzipped (+ ${results.size.glue_js_bytes} bytes of JS glue); the JS receiver ${results.size.js_receiver_bytes} bytes (${results.size.js_receiver_gzip_bytes} gzipped)`);
const report = lines.join("\n");
console.log(report);
await mkdir(path.join(ROOT, "bench/results"), { recursive: true });
results.summary_markdown = report;
await writeFile(path.join(ROOT, "bench/results/latest.json"), JSON.stringify(results, null, 2) + "\n");
console.error("[bench] wrote bench/results/latest.json");
