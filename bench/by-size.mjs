// Latency by body size, one delivery at a time: the same signed delivery sent `--repeat` times
// to each worker (the first ones unmeasured; after the first it is a duplicate), in rounds that
// alternate the workers' order, the median per worker and size. With --bad-signature each
// request is refused for its signature (every configured secret's MAC computed), nothing stored.
// A development tool, like bench/ab.mjs:
//   node bench/by-size.mjs bench/ab-builds/base/index.js build/index.js bench/js-receiver.js \
//     [--sizes 1000,4000,8192,16000,64000,250000] [--rounds 6] [--repeat 60] [--bad-signature]
import { commandLine, median, startBenchWorker } from "./ab.mjs";
import { envelope, randomId, sign } from "../tests/helpers/paymos.mjs";
import { SECRET_NEW } from "../tests/helpers/worker.mjs";

const { opt, has, positional: scripts } = commandLine(["bad-signature"]);
const badSignature = has("bad-signature");
if (scripts.length === 0) {
  console.error("usage: node bench/by-size.mjs SCRIPT.js [SCRIPT.js …] [--sizes N,N,…] [--rounds R] [--repeat N] [--bad-signature]");
  process.exit(2);
}
const sizes = opt("sizes", "1000,4000,8192,16000,64000,250000").split(",").map(Number);
const rounds = Number(opt("rounds", 6));
const repeat = Number(opt("repeat", 60));
const unmeasured = Math.min(10, repeat - 1);

const workers = [];
try {
  for (const s of scripts) workers.push(await startBenchWorker(s));
  console.log(`| body (bytes) | ${scripts.join(" | ")} |`);
  console.log(`|---|${scripts.map(() => "---").join("|")}|`);
  for (const size of sizes) {
    const env = envelope("invoice.paid", randomId("inv_"), { data: { note: "" } });
    env.data.note = "n".repeat(Math.max(0, size - JSON.stringify(env).length));
    const body = JSON.stringify(env);
    const ms = scripts.map(() => []);
    for (let round = 0; round < rounds; round++) {
      for (let k = 0; k < workers.length; k++) {
        const i = round % 2 ? workers.length - 1 - k : k;
        const t = Math.floor(Date.now() / 1000);
        const v1 = badSignature ? "ab".repeat(32) : sign(SECRET_NEW, t, Buffer.from(body));
        const headers = { "content-type": "application/json", "x-webhook-id": env.event_id, "x-webhook-signature": `t=${t},v1=${v1}` };
        for (let j = 0; j < repeat; j++) {
          const started = performance.now();
          const res = await fetch(`${workers[i].url}/webhooks/paymos`, { method: "POST", body, headers });
          await res.arrayBuffer();
          const expected = badSignature ? 401 : 200;
          if (res.status !== expected) throw new Error(`${scripts[i]}: ${res.status} for ${body.length} bytes, expected ${expected}`);
          if (j >= unmeasured) ms[i].push(performance.now() - started);
        }
      }
    }
    console.log(`| ${body.length} | ${ms.map((m) => median(m).toFixed(2)).join(" | ")} |`);
  }
} finally {
  for (const w of workers) await w.close();
}
