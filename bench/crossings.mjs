// Calls from the wasm into JS, counted per import, for one build of ours: per new delivery
// (its receive and its consumer, at 1 connection, as the CPU rounds run it) and per duplicate
// (the receive path alone). A copy of the build (under bench/ab-builds/, not committed) gets
// every import of its wasm instance wrapped with a counter; an entry around it answers the
// counts at GET /__crossings. A development tool, like profile.mjs: not part of npm test.
//   node bench/crossings.mjs [build/index.js] [--requests N] [--top K]
import { cp, readFile, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { parseArgs } from "node:util";
import { ROOT } from "../tests/helpers/worker.mjs";
import { load, startBenchWorker } from "./ab.mjs";

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { requests: { type: "string", default: "1000" }, top: { type: "string", default: "30" } },
});
const entry = path.resolve(positionals[0] ?? "build/index.js");
const N = Number(values.requests);
const copy = path.join(ROOT, "bench/ab-builds/.crossings");

// the copy, its instance's imports counted: wasm-bindgen's glue passes them to
// `new WebAssembly.Instance(module, imports())`, once at start and again after a reset (a
// JS module's own namespace among them has only getters: its calls are counted through the
// glue's functions that call it)
await rm(copy, { recursive: true, force: true });
await cp(path.dirname(entry), copy, { recursive: true });
const glue = path.join(copy, path.basename(entry));
let js = await readFile(glue, "utf8");
const site = /new WebAssembly\.Instance\((\w+),(\w+)\(\)\)/.exec(js);
if (!site) throw new Error(`${entry}: no "new WebAssembly.Instance(module, imports())" to count`);
js = js.split(site[0]).join(`new WebAssembly.Instance(${site[1]},__counted(${site[2]}()))`);
const counter = `globalThis.__crossings={};function __counted(imports){for(const o of Object.values(imports))for(const [k,f] of Object.entries(o)){if(typeof f!=="function"||!Object.getOwnPropertyDescriptor(o,k).writable)continue;const name=k.replace(/_[0-9a-f]{16}$/,"");o[k]=function(...a){globalThis.__crossings[name]=(globalThis.__crossings[name]||0)+1;return f.apply(this,a)}}return imports}\n`;
// first in the module: its imports are hoisted anyway, and esbuild's output may begin with a
// statement of its own (its helper for a bundled module's exports)
js = counter + js;
await writeFile(glue, js);
await writeFile(
  path.join(copy, "counted.mjs"),
  `import Inner from "./${path.basename(entry)}";
export default {
  async fetch(request, env, ctx) {
    const url = new URL(request.url);
    if (url.pathname === "/__crossings") return Response.json(globalThis.__crossings);
    if (url.pathname === "/__crossings/reset") { globalThis.__crossings = Object.fromEntries(Object.keys(globalThis.__crossings).map((k) => [k, 0])); return new Response("ok"); }
    return new Inner(ctx, env).fetch(request);
  },
  async queue(batch, env, ctx) { return new Inner(ctx, env).queue(batch); },
};
`,
);

const w = await startBenchWorker(path.relative(ROOT, path.join(copy, "counted.mjs")));
const counts = async () => (await fetch(`${w.url}/__crossings`)).json();
const reset = () => fetch(`${w.url}/__crossings/reset`);
const settle = () => new Promise((r) => setTimeout(r, 4000));
try {
  // warm: each path once (first-time set-up, per-isolate configuration)
  await load(`${w.url}/webhooks/paymos`, "new", 1, ["--requests", "100"]);
  await settle();
  await reset();
  await load(`${w.url}/webhooks/paymos`, "new", 1, ["--requests", String(N)]);
  await settle(); // the consumer's last batches
  const fresh = await counts();
  await reset();
  await load(`${w.url}/webhooks/paymos`, "duplicate", 1, ["--requests", String(N)]);
  await settle();
  const dup = await counts();
  const total = (o) => Object.values(o).reduce((a, b) => a + b, 0) / N;
  console.log(`${path.relative(ROOT, entry)}: calls into JS per new delivery (receive + consumer, 1 connection) ${total(fresh).toFixed(1)}; per duplicate ${total(dup).toFixed(1)}`);
  console.log(`${"new".padStart(8)} ${"dup".padStart(8)}  import`);
  const rows = Object.keys(fresh).map((k) => [k, fresh[k] / N, (dup[k] ?? 0) / N]).filter(([, a, b]) => a + b > 0);
  for (const [k, a, b] of rows.sort((x, y) => y[1] - x[1]).slice(0, Number(values.top))) console.log(`${a.toFixed(2).padStart(8)} ${b.toFixed(2).padStart(8)}  ${k}`);
} finally {
  await w.close();
}
