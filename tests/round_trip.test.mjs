// The ground everything stands on: the built worker runs in workerd with a real D1 and queue.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { startWorker } from "./helpers/worker.mjs";
import { deliver, envelope, randomId } from "./helpers/paymos.mjs";

let w;
before(async () => {
  w = await startWorker();
});
after(async () => {
  await w?.close();
});

test("GET /healthz answers 200 with the build's version", async () => {
  const res = await fetch(`${w.url}/healthz`);
  assert.equal(res.status, 200);
  const body = await res.json();
  assert.equal(body.status, "ok");
  assert.match(body.version, /^\d+\.\d+\.\d+$/);
  assert.ok(body.commit.length > 0);
});

test("round trip: POST → row in D1 → queue message consumed → processed", async () => {
  const inv = randomId("inv_");
  const env = envelope("invoice.paid", inv);
  const res = await deliver(w.url, env);
  assert.equal(res.status, 200);
  assert.deepEqual(res.json, { received: true, duplicate: false });

  const row = await w.db.prepare("SELECT * FROM webhook_delivery WHERE event_id = ?").bind(env.event_id).first();
  assert.ok(row, "the delivery row is committed before the reply");
  assert.equal(row.resource_id, inv);
  assert.equal(row.event_type, "invoice.paid");
  // the raw body is stored as received, in its own row (migration 0013), so that archiving
  // can delete it
  const stored = await w.db
    .prepare("SELECT body FROM delivery_body WHERE received_at = ? AND event_id = ?")
    .bind(row.received_at, env.event_id)
    .first();
  assert.equal(stored?.body, JSON.stringify(env), "the raw body is stored as received");
  assert.equal(row.body, "", "not twice");

  // only the queue consumer sets processed_at: seeing it proves the message went through the queue
  const processed = await w.processed(env.event_id);
  assert.equal(processed.outcome, "applied");
  const fulfilments = await w.db.prepare("SELECT count(*) AS n FROM effect WHERE resource_id = ? AND kind = 'fulfilment'").bind(inv).first();
  assert.equal(fulfilments.n, 1);
});

test("unknown paths answer 404 as JSON", async () => {
  const res = await fetch(`${w.url}/nope`);
  assert.equal(res.status, 404);
  assert.deepEqual(await res.json(), { error: "not_found" });
});
