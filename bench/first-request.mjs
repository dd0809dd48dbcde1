// Where a fresh isolate's first request spends workerd's CPU: `perf record` (call graphs, 25
// kHz) on the Miniflare/workerd processes around that request alone, then each sample's stack
// read from `perf script`: how many fall under V8's lazy compile of wasm functions
// (`wasm::CompileLazy`: Liftoff's own work, then publishing the code and logging it), for
// each script over fresh isolates. perf's clock samples only running threads, but the window
// (about 0.6 s) also holds what Miniflare's own services do meanwhile: compare scripts, do not
// read the totals as the request's CPU (bench/cold.mjs measures that). Needs `perf` (Debian:
// linux-perf) and the right to trace the children (root, or perf_event_paranoid ≤ 1). A
// development tool, like profile.mjs: not part of npm test or npm run bench.
//   node bench/first-request.mjs bench/js-receiver.js build/index.js [--rounds 5]
import { spawn, execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { commandLine, load, median, startBenchWorker, workerdChildren } from "./ab.mjs";

const { opt, positional } = commandLine();
const scripts = positional.length ? positional : ["bench/js-receiver.js", "build/index.js"];
const rounds = Number(opt("rounds", "5"));
const HZ = 25000;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const dir = await mkdtemp(path.join(tmpdir(), "first-request-"));

/** One fresh isolate's first request under perf: its samples, by what their stacks hold. */
async function once(script, file) {
  const w = await startBenchWorker(script, {}, { patch: (o) => (o.queueConsumers = {}) });
  try {
    const pids = (await workerdChildren()).map((c) => c.pid).join(",");
    const perf = spawn("perf", ["record", "-q", "-F", String(HZ), "-g", "-o", file, "-p", pids], { stdio: "ignore" });
    const exited = new Promise((r) => perf.once("exit", r));
    await sleep(500); // perf attached
    const first = await load(`${w.url}/webhooks/paymos`, "new", 1, ["--requests", "1"]);
    if (first.non_2xx) throw new Error(`${script}: the first request was refused`);
    await sleep(100);
    perf.kill("SIGINT");
    await exited;
  } finally {
    await w.close();
  }
  const { stdout } = await promisify(execFile)("perf", ["script", "-i", file], { maxBuffer: 1 << 30 });
  const count = { all: 0, compile: 0, liftoff: 0, publish: 0, logging: 0 };
  for (const sample of stdout.split(/\n\s*\n/)) {
    if (!sample.trim()) continue;
    count.all++;
    if (!/wasm::CompileLazy/.test(sample)) continue;
    count.compile++;
    // the frames above CompileLazy (callees come first in perf script's stacks)
    const above = sample.slice(0, sample.search(/wasm::CompileLazy/));
    if (/ExecuteLiftoffCompilation|LiftoffCompiler|WasmFullDecoder/.test(above)) count.liftoff++;
    else if (/CodeEvent|jitCodeEvent|LogCode/.test(above)) count.logging++;
    else if (/AddCompiledCode|PublishCode|NativeModule/.test(above)) count.publish++;
  }
  return count;
}

const ms = (samples) => (samples * 1000) / HZ;
const results = Object.fromEntries(scripts.map((s) => [s, []]));
try {
  for (let r = 0; r < rounds; r++) {
    for (const s of r % 2 ? [...scripts].reverse() : scripts) results[s].push(await once(s, path.join(dir, `${r}.data`)));
  }
} finally {
  await rm(dir, { recursive: true, force: true });
}
console.log(`the first request of ${rounds} fresh isolates each, perf samples at ${HZ} Hz as ms (median of the isolates)`);
console.log("| script | all samples | under wasm::CompileLazy | of which Liftoff | publishing the code | logging it |");
console.log("|---|---|---|---|---|---|");
for (const s of scripts) {
  const m = (k) => ms(median(results[s].map((c) => c[k]))).toFixed(1);
  console.log(`| ${s} | ${m("all")} | ${m("compile")} | ${m("liftoff")} | ${m("publish")} | ${m("logging")} |`);
}
console.log(JSON.stringify({ rounds, hz: HZ, results }));
