// The bad-input corpus (tests/corpus/bad_requests.json): every hostile or malformed request gets
// its expected status, never a 5xx; no unverified request leaves a row; no rejected one an effect.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { startWorker, eventually, ROOT, SECRET_NEW } from "./helpers/worker.mjs";
import { sign, randomId, deliver, envelope } from "./helpers/paymos.mjs";

const corpus = JSON.parse(await readFile(path.join(ROOT, "tests/corpus/bad_requests.json"), "utf8"));
let w;
before(async () => {
  w = await startWorker();
});
after(async () => {
  await w?.close();
});

function materialise(entry) {
  const evt = randomId("evt_");
  const inv = randomId("inv_");
  const now = Math.floor(Date.now() / 1000);
  const fill = (s) => s.replaceAll("$EVT", evt).replaceAll("$INV", inv).replaceAll("$NOW", String(now));
  let bytes;
  const b = entry.body;
  if ("json" in b) bytes = Buffer.from(fill(JSON.stringify(b.json)));
  else if ("raw" in b) bytes = b.raw === null ? null : Buffer.from(fill(b.raw));
  else if ("base64" in b) bytes = Buffer.from(b.base64, "base64");
  else if (b.utf16) bytes = Buffer.from(fill(JSON.stringify(envelope("invoice.paid", "$INV", { eventId: "$EVT" }))), "utf16le");
  const headers = { "content-type": "application/json" };
  if (entry.id !== null) headers["x-webhook-id"] = fill(entry.id);
  for (const [k, v] of Object.entries(entry.headers)) headers[k.toLowerCase()] = fill(v);
  const signed = (secret, t, over) => `t=${t},v1=${sign(secret, t, over ?? bytes ?? "")}`;
  switch (entry.sign) {
    case "valid":
      headers["x-webhook-signature"] = signed(SECRET_NEW, now);
      break;
    case "wrong":
      headers["x-webhook-signature"] = signed("whsec_not_ours_99", now);
      break;
    case "other_body":
      headers["x-webhook-signature"] = signed(SECRET_NEW, now, Buffer.from("{}"));
      break;
    case "stale":
      headers["x-webhook-signature"] = signed(SECRET_NEW, now - 600);
      break;
    case "future":
      headers["x-webhook-signature"] = signed(SECRET_NEW, now + 600);
      break;
    case "none":
    case "raw":
      break;
    default:
      throw new Error(`unknown sign mode ${entry.sign}`);
  }
  return { evt, inv, bytes, headers };
}

test("the corpus holds at least 40 requests", () => {
  assert.ok(corpus.requests.length >= 40, String(corpus.requests.length));
});

const counts = async () => ({
  rows: (await w.db.prepare("SELECT count(*) AS n FROM webhook_delivery").first()).n,
  effects: (await w.db.prepare("SELECT count(*) AS n FROM effect").first()).n,
  resources: (await w.db.prepare("SELECT count(*) AS n FROM resource").first()).n,
});

for (const entry of corpus.requests) {
  test(`${entry.expect} ${entry.method} ${entry.name}`, async () => {
    const before = await counts();
    const { bytes, headers } = materialise(entry);
    const res = await fetch(`${w.url}${entry.path}`, {
      method: entry.method,
      headers,
      body: ["GET", "HEAD"].includes(entry.method) ? undefined : bytes ?? undefined,
    });
    const text = await res.text();
    assert.ok(res.status < 500, `5xx: ${res.status} ${text}`);
    assert.equal(res.status, entry.expect, text);
    if (res.status >= 400 && text) {
      const body = JSON.parse(text);
      assert.equal(typeof body.error, "string");
      assert.ok(!text.includes(SECRET_NEW) && !text.includes("whsec_"), "no secret echoed");
    }
    // nothing rejected leaves a row, a resource or an effect
    assert.deepEqual(await counts(), before);
  });
}

test("after the whole corpus, the receiver still accepts and processes a good delivery", async () => {
  const env = envelope("invoice.paid", randomId("inv_"));
  const res = await deliver(w.url, env);
  assert.equal(res.status, 200);
  await eventually("processing", () => w.db.prepare("SELECT 1 AS ok FROM effect WHERE resource_id = ?").bind(env.data.id).first());
});
