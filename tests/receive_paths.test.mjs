// A delivery takes one of three paths (ARCHITECTURE.md, "The path of a delivery"): the JavaScript
// driver (src/receive.js) for a body with a Content-Length under 8 KiB, the wasm's fast path
// for a larger one (its MACs by WebCrypto), and the wasm's general path for a body with no
// Content-Length. Each path must answer a delivery, log it and count it exactly as the others:
// the same script is sent the three ways and the replies, the log lines (ids and timing set
// aside) and the metrics compared.
import { test } from "node:test";
import assert from "node:assert/strict";
import { startWorker, eventually, SECRET_NEW, SECRET_OLD } from "./helpers/worker.mjs";
import { admin, envelope, randomId, sign } from "./helpers/paymos.mjs";

const WAYS = ["driver", "large", "chunked"];

/**
 * POSTs `bytes` as the provider would, signed for `t` with `secrets` (no signature header when
 * `secrets` is null), with a Content-Length or, `chunked`, as a stream without one.
 */
async function post(url, bytes, { id, secrets = [SECRET_NEW], t = Math.floor(Date.now() / 1000), attempt, chunked, signature }) {
  const headers = { "content-type": "application/json", "x-webhook-id": id };
  if (attempt !== undefined) headers["x-webhook-attempt"] = attempt;
  if (signature !== undefined) headers["x-webhook-signature"] = signature;
  else if (secrets) headers["x-webhook-signature"] = [`t=${t}`, ...secrets.map((s) => `v1=${sign(s, t, bytes)}`)].join(",");
  const body = chunked
    ? new ReadableStream({
        start(c) {
          c.enqueue(bytes);
          c.close();
        },
      })
    : bytes;
  const res = await fetch(`${url}/webhooks/paymos`, { method: "POST", headers, body, ...(chunked ? { duplex: "half" } : {}) });
  return { status: res.status, type: res.headers.get("content-type"), text: await res.text() };
}

/** An envelope as bytes: padded past 8 KiB for the wasm's fast path (`large`). */
function bytesOf(env, way) {
  const padded = way === "large" ? { ...env, data: { ...env.data, note: "x".repeat(9000) } } : env;
  return Buffer.from(JSON.stringify(padded));
}

/** The deliveries of the script, each: a name, its header id, its bytes and how it is sent. */
function script(way) {
  const chunked = way === "chunked";
  const fresh = envelope("invoice.paid", randomId("inv_"));
  const other = envelope("invoice.paid", randomId("inv_"));
  const stale = Math.floor(Date.now() / 1000) - 3600;
  return [
    ["new", fresh.event_id, bytesOf(fresh, way), { attempt: "1" }],
    ["duplicate", fresh.event_id, bytesOf(fresh, way), { attempt: " 2 " }],
    ["old secret", other.event_id, bytesOf(other, way), { secrets: [SECRET_OLD] }],
    ["wrong secret", randomId("evt_"), bytesOf(envelope("invoice.paid", randomId("inv_")), way), { secrets: ["whsec_wrong_000000"] }],
    ["expired", randomId("evt_"), bytesOf(envelope("invoice.paid", randomId("inv_")), way), { t: stale }],
    ["no signature", randomId("evt_"), bytesOf(envelope("invoice.paid", randomId("inv_")), way), { secrets: null }],
    ["malformed signature", randomId("evt_"), bytesOf(envelope("invoice.paid", randomId("inv_")), way), { signature: "v1=zz" }],
    ["id mismatch", randomId("evt_"), bytesOf(envelope("invoice.paid", randomId("inv_")), way), { attempt: "x" }],
    ["not json", randomId("evt_"), Buffer.from(way === "large" ? `not json ${"x".repeat(9000)}` : "not json"), {}],
    // an empty body has no large form: sent with its Content-Length, it is the driver's
    ["empty", randomId("evt_"), Buffer.alloc(0), {}],
  ].map(([name, id, bytes, options]) => ({ name, id, bytes, options: { ...options, chunked } }));
}

/** A log line with what differs from way to way (ids, timing) set aside. */
function shape(line, ids) {
  assert.equal(typeof line.duration_ms, "number", JSON.stringify(line));
  const out = { ...line, duration_ms: "<ms>" };
  for (const [k, v] of Object.entries(out)) if (ids.has(v)) out[k] = ids.get(v);
  return out;
}

test("a delivery is answered, logged and counted alike by the driver and the wasm's two paths", async () => {
  const runs = {};
  for (const way of WAYS) {
    const w = await startWorker();
    try {
      const deliveries = script(way);
      const replies = [];
      for (const d of deliveries) replies.push(await post(w.url, d.bytes, { id: d.id, ...d.options }));
      // the last delivery's line written means every earlier one was (one process, in order)
      const lastId = deliveries.at(-1).id;
      await eventually("the last line", () => w.logs.find((l) => l.stage === "receive" && l.event_id === lastId));
      const ids = new Map();
      // each delivery's line: the k-th of its id's for the id's k-th delivery (the duplicate
      // shares the new delivery's id); as many lines for an id as deliveries under it
      const seen = new Map();
      const lines = deliveries.map((d) => {
        if (!ids.has(d.id)) ids.set(d.id, `<${d.name}>`);
        const env = d.bytes[0] === 0x7b ? JSON.parse(d.bytes) : {};
        if (env.data?.id && !ids.has(env.data.id)) ids.set(env.data.id, `<${d.name} resource>`);
        const k = seen.get(d.id) ?? 0;
        seen.set(d.id, k + 1);
        const of = w.logs.filter((l) => l.stage === "receive" && l.event_id === d.id);
        assert.equal(of.length, deliveries.filter((o) => o.id === d.id).length, `${way}: ${JSON.stringify(of)}`);
        return of[k];
      });
      const metrics = await admin(w.url, "GET", "/metrics");
      assert.equal(metrics.status, 200);
      runs[way] = {
        replies: replies.map((r, i) => ({ name: deliveries[i].name, ...r })),
        lines: lines.map((l) => shape(l, ids)),
        signatures: metrics.json.signatures,
        refused: metrics.json.refused_last_hour,
      };
    } finally {
      await w.close();
    }
  }
  const driver = runs.driver;
  // the script itself: what each delivery must get
  assert.deepEqual(
    driver.replies.map((r) => [r.name, r.status, r.text]),
    [
      ["new", 200, '{"received":true,"duplicate":false}'],
      ["duplicate", 200, '{"received":true,"duplicate":true}'],
      ["old secret", 200, '{"received":true,"duplicate":false}'],
      ["wrong secret", 401, '{"error":"signature_mismatch"}'],
      ["expired", 401, '{"error":"timestamp_out_of_tolerance"}'],
      ["no signature", 401, '{"error":"signature_missing"}'],
      ["malformed signature", 401, '{"error":"signature_malformed"}'],
      ["id mismatch", 400, '{"error":"id_mismatch"}'],
      ["not json", 400, '{"error":"invalid_json"}'],
      ["empty", 400, '{"error":"invalid_json"}'],
    ],
  );
  for (const r of driver.replies) assert.equal(r.type, "application/json", r.name);
  assert.deepEqual(
    driver.lines.map((l) => [l.outcome, l.status, l.attempt]),
    [
      ["accepted", 200, 1],
      ["duplicate", 200, 2],
      ["accepted", 200, null],
      ["signature_mismatch", 401, null],
      ["timestamp_out_of_tolerance", 401, null],
      ["signature_missing", 401, null],
      ["signature_malformed", 401, null],
      ["id_mismatch", 400, null],
      ["invalid_json", 400, null],
      ["invalid_json", 400, null],
    ],
  );
  // and the other two paths exactly alike
  for (const way of ["large", "chunked"]) {
    assert.deepEqual(runs[way].replies, driver.replies, `${way}: replies`);
    assert.deepEqual(runs[way].lines, driver.lines, `${way}: log lines`);
    assert.deepEqual(runs[way].signatures, driver.signatures, `${way}: counts under each secret`);
    assert.deepEqual(runs[way].refused, driver.refused, `${way}: refusals counted`);
  }
});

test("the driver's wasm exports are not methods another Worker can call over RPC", async () => {
  // a Worker bound to ours as a service: worker-build makes every wasm export a method of its
  // entrypoint class, and src/worker.js exports a handler object instead of the class
  const caller = {
    name: "caller",
    modules: true,
    compatibilityDate: "2025-09-23",
    serviceBindings: { RECEIVER: "paymos-receiver" },
    script: `export default {
      async fetch(request, env) {
        const name = new URL(request.url).searchParams.get("method");
        if (name === "fetch") {
          const reply = await env.RECEIVER.fetch("http://receiver/healthz");
          return Response.json({ called: true, value: await reply.json() });
        }
        try {
          const value = await env.RECEIVER[name]({});
          return Response.json({ called: true, value: value ?? null });
        } catch (e) {
          return Response.json({ called: false, error: String(e) });
        }
      },
    };`,
  };
  const w = await startWorker({ otherWorkers: [caller] });
  try {
    const callerWorker = await w.mf.getWorker("caller");
    const call = async (method) => (await callerWorker.fetch(`http://caller/?method=${method}`)).json();
    for (const method of ["receive_setup", "receive_check", "receive_unreadable", "receive_failed", "receive_done"]) {
      const answer = await call(method);
      assert.equal(answer.called, false, `${method}: ${JSON.stringify(answer)}`);
      assert.match(answer.error, /does not (implement|have)|not a function|method/i, method);
    }
    // the binding itself works: ours answers a request through it
    const health = await call("fetch");
    assert.equal(health.value?.status, "ok", JSON.stringify(health));
  } finally {
    await w.close();
  }
});
