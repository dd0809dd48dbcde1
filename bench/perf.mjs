// Where two workers' requests spend workerd's CPU, from Linux `perf` (workerd's npm binary
// ships its symbols): each worker runs under `paymos load` on a fresh worker, in alternating
// rounds, while `perf record` samples workerd; the samples are then counted per 1,000 requests
// by place (workerd/kj, V8, its builtins, the wasm tier-up builtins, JIT code, SQLite, malloc,
// the kernel) and per function, A against B. A development tool, not part of npm test or
// npm run bench; it needs `perf` and permission to attach to our own processes.
//   node bench/perf.mjs bench/js-receiver.js build/index.js --mode new --concurrency 16 [--seconds 5] [--rounds 2] [--warmup 3] [--top 30]
// JIT code (the script's JS and the wasm alike) has no names here: V8 writes them only with
// `--perf-basic-prof`, a V8 flag that workerd takes in its config (`v8Flags`) but Miniflare
// does not expose. BENCH_NO_CONSUMERS=1 leaves the queue consumers out, as for bench/ab.mjs.
import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { commandLine, load, startBenchWorker, workerdChildren } from "./ab.mjs";

const run = promisify(execFile);
const { opt, positional } = commandLine();
const [a, b] = positional;
if (!a || !b) {
  console.error("usage: node bench/perf.mjs A.js B.js [--mode new|duplicate] [--concurrency N] [--seconds S] [--rounds R] [--warmup S] [--top N]");
  process.exit(2);
}
const mode = opt("mode", "new");
const concurrency = Number(opt("concurrency", 16));
const seconds = Number(opt("seconds", 5));
const rounds = Number(opt("rounds", 2));
const warmup = Number(opt("warmup", 3));
const top = Number(opt("top", 30));

/** The place a leaf frame belongs to. */
function place(sym, dso, thread) {
  const bg = thread.startsWith("workerd") ? "" : "[other thread] ";
  let p;
  if (sym.startsWith("[unknown]") && !dso.includes("workerd") && !dso.includes("kernel")) p = "JIT code (JS and wasm)";
  else if (/^Builtins_Wasm|Liftoff/.test(sym)) p = "V8 wasm builtins (Liftoff frames, wrappers)";
  else if (sym.startsWith("Builtins_")) p = "V8 builtins";
  else if (/Scaveng|Heap::|Mark|Sweep|cppgc|GlobalHandles/.test(sym)) p = "V8 GC and handles";
  else if (/Json/.test(sym)) p = "V8 JSON";
  else if (sym.startsWith("v8::")) p = "V8 other";
  else if (/sqlite|^pager|^btree|^wal/i.test(sym)) p = "SQLite";
  else if (/tcmalloc|TCMalloc/.test(sym)) p = "malloc";
  else if (/^(workerd|kj|capnp)::|^_ZN(7workerd|2kj)/.test(sym)) p = "workerd/kj";
  else if (dso.includes("workerd")) p = "workerd other";
  else if (dso.includes("kernel") || dso.includes("vmlinux")) p = "kernel";
  else p = `other (${path.basename(dso)})`;
  return bg + p;
}

/** Leaf samples of a `perf record` file, by place and by function. */
async function samples(file) {
  const { stdout } = await run("perf", ["script", "-i", file, "-F", "comm,tid,ip,sym,dso"], { maxBuffer: 1 << 30 });
  const byPlace = new Map();
  const bySym = new Map();
  const add = (m, k) => m.set(k, (m.get(k) ?? 0) + 1);
  let thread = "";
  let leaf = true;
  for (const line of stdout.split("\n")) {
    if (!line.startsWith("\t")) {
      thread = line.trim();
      leaf = true;
      continue;
    }
    if (!leaf) continue;
    leaf = false;
    const m = /^\s*[0-9a-f]+\s+(.*)\s+\((.*)\)\s*$/.exec(line);
    if (!m) continue;
    const sym = m[1].replace(/\+0x[0-9a-f]+$/, "");
    add(byPlace, place(sym, m[2], thread));
    add(bySym, sym.startsWith("[unknown]") ? "[JIT code]" : sym.slice(0, 110));
  }
  return { byPlace, bySym };
}

const dir = await mkdtemp(path.join(tmpdir(), "paymos-perf-"));
const total = { A: { requests: 0, byPlace: new Map(), bySym: new Map() }, B: { requests: 0, byPlace: new Map(), bySym: new Map() } };
try {
  for (let r = 0; r < rounds; r++) {
    for (const key of r % 2 ? ["B", "A"] : ["A", "B"]) {
      const script = key === "A" ? a : b;
      const w = await startBenchWorker(script);
      try {
        const url = `${w.url}/webhooks/paymos`;
        if (warmup > 0) await load(url, mode, concurrency, ["--duration-seconds", String(warmup)]);
        // the load runs a second longer on each side than perf records
        const loading = load(url, mode, concurrency, ["--duration-seconds", String(seconds + 2)]);
        await new Promise((res) => setTimeout(res, 1000));
        const file = path.join(dir, `${key}-${r}.data`);
        await run("perf", ["record", "-q", "-F", "2000", "-g", "-o", file, "-p", (await workerdChildren()).map((c) => c.pid).join(","), "--", "sleep", String(seconds)], { maxBuffer: 1 << 26 });
        const report = await loading;
        const t = total[key];
        t.requests += report.throughput_rps * seconds;
        const s = await samples(file);
        for (const [k, n] of s.byPlace) t.byPlace.set(k, (t.byPlace.get(k) ?? 0) + n);
        for (const [k, n] of s.bySym) t.bySym.set(k, (t.bySym.get(k) ?? 0) + n);
        console.error(`[perf] round ${r + 1} ${key}: ${report.throughput_rps} req/s`);
      } finally {
        await w.close();
      }
    }
  }
} finally {
  await rm(dir, { recursive: true, force: true });
}

const per1000 = (key, m, k) => ((m.get(k) ?? 0) / total[key].requests) * 1000;
const table = (title, field, limit) => {
  const keys = [...new Set([...total.A[field].keys(), ...total.B[field].keys()])];
  const rows = keys.map((k) => ({ k, a: per1000("A", total.A[field], k), b: per1000("B", total.B[field], k) }));
  rows.sort((x, y) => Math.abs(y.b - y.a) - Math.abs(x.b - x.a));
  console.log(`\n${title} (samples per 1,000 requests, 1 sample = 0.5 ms of one thread)`);
  console.log("|     A |     B | B − A | where |\n|---|---|---|---|");
  for (const { k, a: x, b: y } of rows.slice(0, limit)) console.log(`| ${x.toFixed(1)} | ${y.toFixed(1)} | ${(y - x >= 0 ? "+" : "") + (y - x).toFixed(1)} | ${k} |`);
};
const sum = (m) => [...m.values()].reduce((s, n) => s + n, 0);
console.log(`A = ${a}, B = ${b}; ${mode}, ${concurrency} connections, ${rounds} rounds of ${seconds} s after ${warmup} s`);
console.log(`all samples per 1,000 requests: A ${((sum(total.A.byPlace) / total.A.requests) * 1000).toFixed(1)}, B ${((sum(total.B.byPlace) / total.B.requests) * 1000).toFixed(1)}`);
table("By place", "byPlace", 20);
table("By function (largest differences)", "bySym", top);
