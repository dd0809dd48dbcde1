// A CPU profile of one worker under `paymos load`, taken inside workerd through the DevTools
// protocol (Miniflare's inspector), printed as time per place (the wasm, the script's JS, the
// runtime's JS, builtins) and self time per function: where the receive path spends its time,
// for ours (build with PAYMOS_KEEP_WASM_NAMES=1 for wasm function names) and for the JS
// receiver alike. Each sample stands for the time until the next one, which includes moments
// the thread spends in other isolates (D1, the queue broker): compare two workers profiled the
// same way, do not read it as CPU. A development tool, not part of npm test or npm run bench.
//   PAYMOS_KEEP_WASM_NAMES=1 bash scripts/build.sh
//   node bench/profile.mjs build/index.js --mode new --concurrency 16 --seconds 5 [--top 40] [--out F.cpuprofile] [--cold]
// --cold profiles a fresh isolate's first seconds (wasm and JS not yet tiered up) instead of
// a warmed one.
import { writeFile } from "node:fs/promises";
import path from "node:path";
import WebSocket from "ws"; // Miniflare's own dependency (node 20 has no global WebSocket)
import { freePort } from "../tests/helpers/worker.mjs";
import { commandLine, load, startBenchWorker } from "./ab.mjs";

const { opt, has, positional } = commandLine(["cold"]);
const [script] = positional;
if (!script) {
  console.error("usage: node bench/profile.mjs SCRIPT.js [--mode new|duplicate] [--concurrency N] [--seconds S] [--top N] [--out F] [--cold]");
  process.exit(2);
}
const mode = opt("mode", "new");
const concurrency = Number(opt("concurrency", 16));
const seconds = Number(opt("seconds", 5));
const top = Number(opt("top", 40));

const inspectorPort = await freePort();
const w = await startBenchWorker(script, {}, { inspectorPort });
try {
  const targets = await (await fetch(`http://127.0.0.1:${inspectorPort}/json`)).json();
  const target = targets.find((t) => /paymos-receiver/.test(t.title ?? "") || /paymos-receiver/.test(t.webSocketDebuggerUrl ?? "")) ?? targets[0];
  const ws = new WebSocket(target.webSocketDebuggerUrl.replace("localhost", "127.0.0.1"));
  await new Promise((resolve, reject) => ws.once("open", resolve).once("error", reject));
  let next = 1;
  const waiting = new Map();
  ws.on("message", (data) => {
    const m = JSON.parse(data);
    if (m.id && waiting.has(m.id)) {
      const { resolve, reject } = waiting.get(m.id);
      waiting.delete(m.id);
      m.error ? reject(new Error(JSON.stringify(m.error))) : resolve(m.result);
    }
  });
  const send = (method, params = {}) =>
    new Promise((resolve, reject) => {
      const id = next++;
      waiting.set(id, { resolve, reject });
      ws.send(JSON.stringify({ id, method, params }));
    });
  // warm the isolate (wasm compiled, statements cached) before profiling, unless --cold
  if (!has("cold")) await load(`${w.url}/webhooks/paymos`, mode, concurrency, ["--duration-seconds", "1"]);
  await send("Profiler.enable");
  await send("Profiler.setSamplingInterval", { interval: 50 });
  await send("Profiler.start");
  const r = await load(`${w.url}/webhooks/paymos`, mode, concurrency, ["--duration-seconds", String(seconds)]);
  const { profile } = await send("Profiler.stop");
  ws.close();
  if (opt("out")) await writeFile(opt("out"), JSON.stringify(profile));

  // self time per function: samples × the mean interval
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  // time per node: each sample stands for the time until the next one (timeDeltas, µs)
  const hits = new Map();
  profile.samples.forEach((id, i) => {
    const dt = profile.timeDeltas[i + 1] ?? 0;
    hits.set(id, (hits.get(id) ?? 0) + dt);
  });
  const self = new Map();
  for (const [id, n] of hits) {
    const f = byId.get(id).callFrame;
    const name = `${f.functionName || "(anonymous)"} ${f.url ? path.basename(f.url) : ""}`.trim();
    self.set(name, (self.get(name) ?? 0) + n);
  }
  const total = [...hits.values()].reduce((a, b) => a + b, 0);
  const idle = [...self].filter(([k]) => /^\((idle|program|garbage collector)\)/.test(k)).reduce((a, [, v]) => a + v, 0);
  console.log(`${script}: ${r.requests} requests, ${r.throughput_rps.toFixed(0)} req/s; ${profile.samples.length} samples over ${(total / 1e6).toFixed(2)} s, ${(((total - idle) / total) * 100).toFixed(1)}% not idle`);
  console.log(`µs per request (not idle): ${((total - idle) / r.requests).toFixed(1)}`);
  // self time by where the code lives: the wasm, the script's JS, the runtime's own JS, builtins
  const where = new Map();
  for (const [id, n] of hits) {
    const f = byId.get(id).callFrame;
    const k = /^\((idle|program|garbage collector)\)/.test(f.functionName)
      ? f.functionName
      : /\.wasm/.test(f.url) || /^js-to-wasm|^wasm-to-js/.test(f.functionName)
        ? "wasm (and its crossings)"
        : /^cloudflare-internal|^node-internal/.test(f.url)
          ? "runtime JS (" + f.url.split(":")[1] + ")"
          : f.url
            ? "script " + path.basename(f.url)
            : "builtins";
    where.set(k, (where.get(k) ?? 0) + n);
  }
  for (const [k, v] of [...where].sort((a, b) => b[1] - a[1])) console.log(`  ${(v / r.requests).toFixed(1).padStart(7)} µs/req  ${k}`);
  for (const [k, v] of [...self].sort((a, b) => b[1] - a[1]).slice(0, top)) {
    console.log(`${((v / total) * 100).toFixed(2).padStart(6)}%  ${(v / r.requests).toFixed(1).padStart(7)} µs/req  ${k.slice(0, 140)}`);
  }
} finally {
  await w.close();
}
