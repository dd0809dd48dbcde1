// RECEIVE_LOG (issue #27): which deliveries write their `receive` log line. With the default
// every delivery writes one; with `except_duplicates` a duplicate writes none, while a new
// delivery and a refusal still write theirs with the same fields, and the duplicate is still
// counted under its secret in the metrics. An unknown value keeps every line and is said.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { startWorker, eventually, SECRET_NEW } from "./helpers/worker.mjs";
import { admin, deliver, deliverChunked, envelope, randomId } from "./helpers/paymos.mjs";

const secretId = (s) => createHash("sha256").update(s).digest("hex").slice(0, 8);


/**
 * The same script against `w`: a new delivery (attempt 1), its duplicate twice (attempt 2 with
 * a Content-Length, attempt 3 chunked), a refused signature, and last a second refusal (a
 * body that is not JSON) whose line marks the end: workerd writes the lines of one process
 * in order, so once the last one is read every earlier line written is read too. Returns
 * the `receive` lines of each delivery, and the metrics.
 */
async function script(w) {
  const fresh = envelope("invoice.paid", randomId("inv_"));
  const r1 = await deliver(w.url, fresh, { headers: { "x-webhook-attempt": "1" } });
  assert.deepEqual(r1.json, { received: true, duplicate: false });
  const r2 = await deliver(w.url, fresh, { headers: { "x-webhook-attempt": "2" } });
  assert.deepEqual(r2.json, { received: true, duplicate: true });
  // a duplicate sent with no Content-Length: the general path (`receive`), not the fast one
  const r3 = await deliverChunked(w.url, fresh, { headers: { "x-webhook-attempt": "3" } });
  assert.deepEqual(r3.json, { received: true, duplicate: true });
  const forged = envelope("invoice.paid", randomId("inv_"));
  const r4 = await deliver(w.url, forged, { secrets: ["whsec_wrong_000000"], headers: { "x-webhook-attempt": "1" } });
  assert.equal(r4.status, 401);
  const lastId = randomId("evt_");
  const r5 = await deliver(w.url, null, { rawBody: "not json", id: lastId });
  assert.equal(r5.status, 400);
  await eventually("the last refusal's line", () => w.logs.find((l) => l.stage === "receive" && l.event_id === lastId));
  const lines = (id) => w.logs.filter((l) => l.stage === "receive" && l.event_id === id);
  const metrics = await admin(w.url, "GET", "/metrics");
  assert.equal(metrics.status, 200);
  return { fresh, forged, of: { fresh: lines(fresh.event_id), forged: lines(forged.event_id), last: lines(lastId) }, metrics: metrics.json };
}

/** A line with what differs from run to run (ids, timing) replaced, for comparing two runs. */
function shape(line, ids) {
  assert.equal(typeof line.duration_ms, "number", JSON.stringify(line));
  const out = { ...line, duration_ms: "<ms>" };
  for (const [k, v] of Object.entries(out)) if (ids[v]) out[k] = ids[v];
  return out;
}

const verifiedBy = (metrics, secret) => metrics.signatures.find((s) => s.secret === secretId(secret))?.verified;

test("RECEIVE_LOG: the default logs a duplicate; except_duplicates does not, and logs the rest alike", async () => {
  const runs = {};
  for (const [mode, vars] of [
    ["default", {}],
    ["except_duplicates", { RECEIVE_LOG: "except_duplicates" }],
  ]) {
    const w = await startWorker({ vars });
    try {
      runs[mode] = await script(w);
    } finally {
      await w.close();
    }
  }
  const { default: all, except_duplicates: quiet } = runs;

  // the default: the new delivery and both duplicates, each with its attempt
  assert.deepEqual(
    all.of.fresh.map((l) => [l.outcome, l.status, l.attempt]),
    [
      ["accepted", 200, 1],
      ["duplicate", 200, 2],
      ["duplicate", 200, 3],
    ],
  );
  // except_duplicates: the new delivery's line only
  assert.deepEqual(
    quiet.of.fresh.map((l) => [l.outcome, l.status, l.attempt]),
    [["accepted", 200, 1]],
  );
  // the refusals: one line each under either setting
  for (const run of [all, quiet]) {
    assert.deepEqual(
      run.of.forged.map((l) => [l.outcome, l.status]),
      [["signature_mismatch", 401]],
    );
    assert.deepEqual(
      run.of.last.map((l) => [l.outcome, l.status]),
      [["invalid_json", 400]],
    );
  }

  // the same fields, field for field, once ids and timing are set aside
  const ids = (run) => ({
    [run.fresh.event_id]: "<fresh>",
    [run.fresh.data.id]: "<inv>",
    [run.forged.event_id]: "<forged>",
    [run.of.last[0].event_id]: "<last>",
  });
  for (const which of ["fresh", "forged", "last"]) {
    const a = shape(all.of[which][0], ids(all));
    const q = shape(quiet.of[which][0], ids(quiet));
    assert.deepEqual(q, a, which);
  }
  assert.deepEqual(Object.keys(quiet.of.fresh[0]).sort(), ["attempt", "duration_ms", "event_id", "event_type", "outcome", "resource_id", "stage", "status"]);
  assert.equal(quiet.of.fresh[0].resource_id, quiet.fresh.data.id);
  assert.deepEqual(
    [quiet.of.forged[0].event_type, quiet.of.forged[0].resource_id, quiet.of.forged[0].attempt],
    [null, null, 1],
    "a refusal's line: the unsigned id and attempt, nothing from the unverified body",
  );

  // counted alike: the duplicates as verified signatures, the refusals by reason
  for (const run of [all, quiet]) {
    // the body that is not JSON was verified before it was parsed
    assert.equal(verifiedBy(run.metrics, SECRET_NEW), 4, "the new delivery, its two duplicates, the last refusal");
    assert.equal(run.metrics.refused_last_hour["401"], 1);
    assert.equal(run.metrics.refused_last_hour["400"], 1);
    assert.ok(!run.metrics.config.warnings.some((x) => x.includes("RECEIVE_LOG")), JSON.stringify(run.metrics.config.warnings));
  }
});

test("RECEIVE_LOG with an unknown value: receiving goes on, every line is written, and it is said", async () => {
  const w = await startWorker({ vars: { RECEIVE_LOG: "changes" } });
  try {
    const run = await script(w);
    assert.deepEqual(
      run.of.fresh.map((l) => l.outcome),
      ["accepted", "duplicate", "duplicate"],
    );
    const said = 'RECEIVE_LOG is "changes", which is not one of all, except_duplicates: the default all is used';
    assert.ok(run.metrics.config.warnings.includes(said), JSON.stringify(run.metrics.config.warnings));
    // once per isolate, when the receive path first reads its settings
    const lines = w.logs.filter((l) => l.stage === "config" && l.outcome === "invalid_setting" && l.detail === said);
    assert.equal(lines.length, 1, JSON.stringify(lines));
    assert.equal(verifiedBy(run.metrics, SECRET_NEW), 4);
  } finally {
    await w.close();
  }
});
