// Money-safe in production: live/test mode, order_ref never lost, the
// dead-letter/replay races, backoff that follows the queue's own attempt count, a sweeper
// that keeps up, the signature's `t` text, reason length in characters, production config.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { startWorker, eventually, ROOT, SECRET_NEW } from "./helpers/worker.mjs";
import { deliver, envelope, randomId, admin, sign } from "./helpers/paymos.mjs";

/** The test-mode worker most tests share (PAYMOS_MODE=test, as .dev.vars). */
let w;
before(async () => {
  w = await startWorker({
    // extra producers for the test to play the queue's part; a slow deliveries consumer
    // (5 s batches) so that a dead-letter message can be made to overtake a replay
    patch(o) {
      o.queueProducers = { ...o.queueProducers, TEST_DLQ: { queueName: "paymos-deliveries-dlq" }, TEST_DELIVERIES: { queueName: "paymos-deliveries" } };
    },
  });
});
after(async () => {
  await w?.close();
});

const effects = async (db, resourceId) => (await db.prepare("SELECT * FROM effect WHERE resource_id = ? ORDER BY id").bind(resourceId).all()).results;
const row = async (db, eventId) => db.prepare("SELECT * FROM webhook_delivery WHERE event_id = ?").bind(eventId).first();

// ---------------------------------------------------------------- 1. live and test mode

test("live mode: a test-mode invoice.paid is stored, acknowledged, ignored as livemode_mismatch, and changes nothing", async () => {
  const live = await startWorker({ vars: { PAYMOS_MODE: "live" } });
  try {
    const inv = randomId("inv_");
    const testEvent = envelope("invoice.paid", inv); // livemode: false
    const res = await deliver(live.url, testEvent);
    assert.equal(res.status, 200);
    assert.deepEqual(res.json, { received: true, duplicate: false });
    const done = await live.processed(testEvent.event_id);
    assert.equal(done.outcome, "ignored");
    assert.equal(done.reason, "livemode_mismatch");
    const detail = await admin(live.url, "GET", `/deliveries/${testEvent.event_id}`);
    assert.equal(detail.json.outcome, "ignored");
    assert.equal(detail.json.reason, "livemode_mismatch");
    assert.equal((await admin(live.url, "GET", `/resources/${inv}`)).status, 404, "no resource was created");
    assert.equal((await effects(live.db, inv)).length, 0, "nothing fulfilled");

    // an envelope without livemode cannot be shown to be live: it changes nothing either
    const bare = envelope("invoice.paid", inv);
    delete bare.livemode;
    await deliver(live.url, bare);
    assert.equal((await live.processed(bare.event_id)).reason, "livemode_mismatch");

    // the live event fulfils
    const liveEvent = envelope("invoice.paid", inv);
    liveEvent.livemode = true;
    await deliver(live.url, liveEvent);
    assert.equal((await live.processed(liveEvent.event_id)).outcome, "applied");
    assert.equal((await effects(live.db, inv)).length, 1);
    assert.equal((await (await fetch(`${live.url}/healthz`)).json()).mode, "live");
  } finally {
    await live.close();
  }
});

test("test mode: a live-mode event is ignored as livemode_mismatch", async () => {
  const inv = randomId("inv_");
  const liveEvent = envelope("invoice.paid", inv);
  liveEvent.livemode = true;
  assert.equal((await deliver(w.url, liveEvent)).status, 200);
  const done = await w.processed(liveEvent.event_id);
  assert.equal(done.outcome, "ignored");
  assert.equal(done.reason, "livemode_mismatch");
  assert.equal((await admin(w.url, "GET", `/resources/${inv}`)).status, 404);
});

test("wrangler.toml deploys live mode and ships no development URL; .dev.vars.example says test", async () => {
  const toml = await readFile(path.join(ROOT, "wrangler.toml"), "utf8");
  const vars = toml.split(/^\[vars\]$/m)[1].split(/^\[/m)[0];
  assert.match(vars, /^PAYMOS_MODE = "live"$/m);
  assert.doesNotMatch(vars, /^[A-Z_]+ = "http:/m, "no plain-http URL in the deployed [vars]");
  assert.doesNotMatch(vars, /127\.0\.0\.1|localhost/);
  const example = await readFile(path.join(ROOT, ".dev.vars.example"), "utf8");
  assert.match(example, /^PAYMOS_MODE="test"$/m);
  assert.match(example, /^PAYMOS_API_BASE="http:\/\/127\.0\.0\.1:\d+"$/m);
});

// ---------------------------------------------------------------- 2. order_ref is never lost

test("marked paid by hand without order_ref, then the real invoice.paid (stale) fills the invoice and its fulfilment", async () => {
  const inv = randomId("inv_");
  const manual = await admin(w.url, "POST", `/resources/${inv}/transition`, { to: "paid", reason: "paid during the outage, proof by email" });
  assert.deepEqual(manual.json, { applied: true, status: "paid" });
  let r = (await admin(w.url, "GET", `/resources/${inv}`)).json;
  assert.equal(r.order_ref, null);
  assert.equal(r.effects.length, 1);
  assert.equal(r.effects[0].order_ref, null, "no order_ref yet");

  const real = envelope("invoice.paid", inv, { data: { order_ref: "order_7781", amount: "120.00", currency: "USDT" } });
  await deliver(w.url, real);
  assert.equal((await w.processed(real.event_id)).outcome, "stale");
  r = (await admin(w.url, "GET", `/resources/${inv}`)).json;
  assert.equal(r.order_ref, "order_7781");
  assert.equal(r.amount, "120.00");
  assert.equal(r.effects.length, 1, "still one fulfilment");
  assert.equal(r.effects[0].kind, "fulfilment");
  assert.equal(r.effects[0].order_ref, "order_7781");
  assert.equal(r.effects[0].amount, "120.00");
  assert.equal(r.history.length, 1, "the stale event is not a transition");

  // a known order_ref is never overwritten, by an event or by an operator
  const other = envelope("invoice.paid", inv, { data: { order_ref: "order_WRONG" } });
  await deliver(w.url, other);
  await w.processed(other.event_id);
  const again = await admin(w.url, "POST", `/resources/${inv}/transition`, { to: "paid", reason: "again", order_ref: "order_WRONG2" });
  assert.deepEqual(again.json, { applied: false, status: "paid" });
  r = (await admin(w.url, "GET", `/resources/${inv}`)).json;
  assert.equal(r.order_ref, "order_7781");
  assert.equal(r.effects[0].order_ref, "order_7781");
});

test("a known amount and currency are never overwritten: an invoice created with them, then paid by hand with others", async () => {
  const inv = randomId("inv_");
  const created = envelope("invoice.created", inv, { data: { order_ref: "order_77", amount: "49.00", currency: "USDT" } });
  await deliver(w.url, created);
  assert.equal((await w.processed(created.event_id)).outcome, "applied");
  const res = await admin(w.url, "POST", `/resources/${inv}/transition`, { to: "paid", reason: "paid at the counter", order_ref: "order_typo", amount: "12.50", currency: "EUR" });
  assert.deepEqual(res.json, { applied: true, status: "paid" });
  const r = (await admin(w.url, "GET", `/resources/${inv}`)).json;
  assert.deepEqual([r.order_ref, r.amount, r.currency], ["order_77", "49.00", "USDT"]);
  assert.deepEqual([r.effects[0].order_ref, r.effects[0].amount, r.effects[0].currency], ["order_77", "49.00", "USDT"]);
});

test("a manual transition accepts order_ref, amount and currency; the fulfilment carries them", async () => {
  const inv = randomId("inv_");
  const res = await admin(w.url, "POST", `/resources/${inv}/transition`, { to: "paid", reason: "manual", order_ref: "order_42", amount: "9.99", currency: "USDT" });
  assert.deepEqual(res.json, { applied: true, status: "paid" });
  const r = (await admin(w.url, "GET", `/resources/${inv}`)).json;
  assert.equal(r.order_ref, "order_42");
  assert.deepEqual([r.effects[0].order_ref, r.effects[0].amount, r.effects[0].currency], ["order_42", "9.99", "USDT"]);
  // and fills a stale resource's missing order_ref too
  const inv2 = randomId("inv_");
  await admin(w.url, "POST", `/resources/${inv2}/transition`, { to: "paid", reason: "first, without" });
  const fill = await admin(w.url, "POST", `/resources/${inv2}/transition`, { to: "paid", reason: "the order_ref, learned later", order_ref: "order_43" });
  assert.equal(fill.json.applied, false);
  const r2 = (await admin(w.url, "GET", `/resources/${inv2}`)).json;
  assert.equal(r2.order_ref, "order_43");
  assert.equal(r2.effects[0].order_ref, "order_43");
  // a bad field is a clear 400
  const bad = await admin(w.url, "POST", `/resources/${inv2}/transition`, { to: "paid", reason: "x", order_ref: "a".repeat(201) });
  assert.equal(bad.status, 400);
  assert.equal(bad.json.error, "invalid_field");
});

// ---------------------------------------------------------------- 8. reason length

test("a manual reason is counted in Unicode characters, not bytes", async () => {
  const chinese200 = "客户通过邮件发送了付款证明".repeat(20).slice(0, 200);
  assert.equal([...chinese200].length, 200);
  assert.ok(Buffer.byteLength(chinese200) > 500);
  const ok = await admin(w.url, "POST", `/resources/${randomId("inv_")}/transition`, { to: "paid", reason: chinese200 });
  assert.equal(ok.status, 200, JSON.stringify(ok.json));
  const ok500 = await admin(w.url, "POST", `/resources/${randomId("inv_")}/transition`, { to: "paid", reason: "款".repeat(500) });
  assert.equal(ok500.status, 200);
  const tooLong = await admin(w.url, "POST", `/resources/${randomId("inv_")}/transition`, { to: "paid", reason: "款".repeat(501) });
  assert.equal(tooLong.status, 400);
  assert.equal(tooLong.json.error, "invalid_reason");
  // counted as sent: blanks around it count too; blanks alone are no reason
  for (const reason of [` ${"x".repeat(499)} `, `x${" ".repeat(600)}`, "   "]) {
    const r = await admin(w.url, "POST", `/resources/${randomId("inv_")}/transition`, { to: "paid", reason });
    assert.equal(r.json.error, "invalid_reason", JSON.stringify(reason.length));
  }
  const history = (await admin(w.url, "GET", `/resources/${(await w.db.prepare("SELECT resource_id FROM resource_transition WHERE cause = ?").bind(chinese200).first()).resource_id}`)).json.history;
  assert.equal(history[0].cause, chinese200, "the reason is kept whole");
});

// ---------------------------------------------------------------- 7. the signature's t text

test("the MAC covers t as sent: t=0<seconds> signed over \"0<seconds>.\" verifies", async () => {
  const env = envelope("invoice.created", randomId("inv_"));
  const body = JSON.stringify(env);
  const t = `0${Math.floor(Date.now() / 1000)}`;
  const res = await fetch(`${w.url}/webhooks/paymos`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-webhook-id": env.event_id, "x-webhook-signature": `t=${t},v1=${sign(SECRET_NEW, t, Buffer.from(body))}` },
    body,
  });
  assert.equal(res.status, 200, await res.text());
  // the MAC of the re-formatted number does not verify under the zero-padded text
  const env2 = envelope("invoice.created", randomId("inv_"));
  const body2 = JSON.stringify(env2);
  const res2 = await fetch(`${w.url}/webhooks/paymos`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-webhook-id": env2.event_id, "x-webhook-signature": `t=${t},v1=${sign(SECRET_NEW, t.slice(1), Buffer.from(body2))}` },
    body: body2,
  });
  assert.equal(res2.status, 401);
});

// ---------------------------------------------------------------- 4. dead letter against replay

/** Inserts a delivery row as if it had been received and its message were still in flight. */
/** An unprocessed delivery; `failures` failed attempts recorded on it (a poison message has some). */
async function insertUnprocessed(db, env, failures = 0) {
  await db
    .prepare("INSERT INTO webhook_delivery (event_id, resource_id, event_type, body, enqueued_at, attempts, last_error) VALUES (?, ?, ?, ?, strftime('%Y-%m-%dT%H:%M:%fZ','now'), ?, ?)")
    .bind(env.event_id, env.data.id, env.type, JSON.stringify(env), failures, failures ? "internal_error: it keeps failing" : null)
    .run();
}

test("dead-letter message arriving after an operator's replay does not bury the replay", async () => {
  const slow = await startWorker({
    patch(o) {
      o.queueProducers = { ...o.queueProducers, TEST_DLQ: { queueName: "paymos-deliveries-dlq" } };
      // the replay's message waits up to 5 s in its batch; the dead-letter consumer runs within 1 s
      o.queueConsumers["paymos-deliveries"] = { ...o.queueConsumers["paymos-deliveries"], maxBatchTimeout: 5 };
    },
  });
  try {
    const inv = randomId("inv_");
    const env = envelope("invoice.paid", inv);
    // its first message exhausted its retries (generation 0) and is on its way to the DLQ
    await insertUnprocessed(slow.db, env);
    // the operator replays before the dead-letter consumer ran
    const replay = await admin(slow.url, "POST", `/deliveries/${env.event_id}/replay`);
    assert.equal(replay.status, 202);
    assert.equal(replay.json.generation, 1);
    assert.equal(replay.json.enqueued, true);
    // now the dead-letter message of generation 0 arrives
    await (await slow.mf.getQueueProducer("TEST_DLQ")).send({ event_id: env.event_id, generation: 0 });
    await eventually("the dead-letter consumer to run", () => slow.logs.find((l) => l.stage === "dead_letter" && l.event_id === env.event_id));
    const afterDlq = await row(slow.db, env.event_id);
    assert.equal(afterDlq.outcome, null, "the old generation's verdict does not mark the replayed delivery dead");
    assert.equal(slow.logs.find((l) => l.stage === "dead_letter" && l.event_id === env.event_id).outcome, "dead_letter_superseded");
    // and the replay runs
    const done = await slow.processed(env.event_id, 20000);
    assert.equal(done.outcome, "applied");
    assert.equal((await effects(slow.db, inv)).length, 1);
    const consumed = slow.logs.filter((l) => l.stage === "consume" && l.event_id === env.event_id).map((l) => l.outcome);
    assert.deepEqual(consumed, ["applied"], "the replay was processed, not acknowledged as already_processed");

    // the dead-letter message of the current generation still marks it dead (when unprocessed
    // and its failures were recorded: a poison message)
    const env2 = envelope("invoice.paid", randomId("inv_"));
    await insertUnprocessed(slow.db, env2, 3);
    await (await slow.mf.getQueueProducer("TEST_DLQ")).send({ event_id: env2.event_id, generation: 0 });
    assert.equal((await slow.processed(env2.event_id)).outcome, "dead");
    // one whose retries were spent with nothing recorded (D1 was down) is handed back instead
    const env3 = envelope("invoice.paid", randomId("inv_"));
    await insertUnprocessed(slow.db, env3, 0);
    await (await slow.mf.getQueueProducer("TEST_DLQ")).send({ event_id: env3.event_id, generation: 0 });
    assert.equal((await slow.processed(env3.event_id)).outcome, "applied");
    assert.ok(slow.logs.some((l) => l.stage === "dead_letter" && l.event_id === env3.event_id && l.outcome === "handed_back"));
  } finally {
    await slow.close();
  }
});

test("a delivery whose consumer dies every time, recording nothing, still goes dead", async () => {
  const doomed = envelope("invoice.paid", randomId("inv_"));
  const dying = await startWorker({
    vars: { TEST_CONSUMER_DIES_ON: doomed.event_id },
    scriptPath: new URL("./helpers/consumer-dies.mjs", import.meta.url).pathname,
    // three deliveries of a message before its dead letter, so that the cycles are short
    patch: (o) => (o.queueConsumers["paymos-deliveries"] = { ...o.queueConsumers["paymos-deliveries"], maxRetries: 2 }),
  });
  try {
    assert.equal((await deliver(dying.url, doomed)).status, 200);
    const dead = await dying.processed(doomed.event_id, 120000);
    assert.equal(dead.outcome, "dead");
    const r = await row(dying.db, doomed.event_id);
    assert.equal(r.attempts, 3, "each hand-back counted one failure");
    assert.match(r.last_error, /no failure recorded .*handed back/);
    const verdicts = dying.logs.filter((l) => l.stage === "dead_letter" && l.event_id === doomed.event_id).map((l) => l.outcome);
    assert.deepEqual(verdicts, ["handed_back", "handed_back", "handed_back", "dead"]);
    // a delivery of the same worker whose consumer lives is processed as ever
    const fine = envelope("invoice.paid", randomId("inv_"));
    await deliver(dying.url, fine);
    assert.equal((await dying.processed(fine.event_id)).outcome, "applied");
  } finally {
    await dying.close();
  }
});

test("copies racing the dead-letter consumer: a delivery never says dead of a transition it applied", async () => {
  // Each delivery gets a queue copy and a dead-letter message at the same moment, the
  // timeline of a sweeper copy in flight when the dead-letter consumer runs. Whichever wins,
  // the archive must agree with the resource: dead ⇒ its transition did not apply;
  // the transition applied (history names it) ⇒ the outcome says applied.
  const deliveries = await w.mf.getQueueProducer("TEST_DELIVERIES");
  const dlq = await w.mf.getQueueProducer("TEST_DLQ");
  const envs = Array.from({ length: 40 }, () => envelope("invoice.paid", randomId("inv_")));
  // failing deliveries (their failures recorded), so that the dead-letter consumer may mark them
  for (const env of envs) await insertUnprocessed(w.db, env, 3);
  await Promise.all(envs.flatMap((env) => [deliveries.send({ event_id: env.event_id, generation: 0 }), dlq.send({ event_id: env.event_id, generation: 0 })]));
  for (const env of envs) {
    const done = await w.processed(env.event_id, 30000);
    const history = (await w.db.prepare("SELECT * FROM resource_transition WHERE cause = ?").bind(env.event_id).all()).results;
    if (history.length > 0) assert.equal(done.outcome, "applied", `${env.event_id} applied its transition but says ${done.outcome}`);
    if (done.outcome === "dead") assert.equal(history.length, 0);
    assert.ok(["applied", "dead"].includes(done.outcome), done.outcome);
  }
});

// ---------------------------------------------------------------- 5. backoff during a D1 outage

test("while D1 fails, the retry delay still grows: it follows the queue's own attempt count", async () => {
  const outage = await startWorker({
    vars: { QUEUE_RETRY_BASE_SECONDS: "1" },
    patch(o) {
      o.queueProducers = { ...o.queueProducers, TEST_DELIVERIES: { queueName: "paymos-deliveries" } };
      o.queueConsumers["paymos-deliveries"] = { ...o.queueConsumers["paymos-deliveries"], maxRetries: 3 };
    },
  });
  try {
    // the delivery table is gone: loading fails, and so would a failure counter kept in D1
    await outage.db.prepare("ALTER TABLE webhook_delivery RENAME TO webhook_delivery_away").run();
    const eventId = randomId("evt_");
    await (await outage.mf.getQueueProducer("TEST_DELIVERIES")).send({ event_id: eventId, generation: 0 });
    const retries = await eventually(
      "three retries",
      () => {
        const lines = outage.logs.filter((l) => l.stage === "consume" && l.event_id === eventId && l.outcome === "retry");
        return lines.length >= 3 && lines;
      },
      30000,
    );
    const delays = retries.map((l) => Number(/retry in (\d+)s/.exec(l.detail)[1]));
    assert.deepEqual(delays.slice(0, 3), [1, 2, 4], retries.map((l) => l.detail).join(" | "));
    assert.match(retries[0].detail, /database_unavailable/);
  } finally {
    await outage.close();
  }
});

test("a D1 outage longer than the queue's retries (time compressed) makes no delivery dead: processed once D1 is back, no operator", async () => {
  // A 20-minute outage with the ladder compressed: a retry base of 1 s and 3 retries (not 10 at
  // up to 15 minutes), so every message spends its retries, and its dead letter too, while D1
  // is down; nothing recorded a failure, so nothing is marked dead.
  const down = await startWorker({
    vars: { QUEUE_RETRY_BASE_SECONDS: "1", SWEEP_AFTER_SECONDS: "0" },
    patch(o) {
      o.queueProducers = { ...o.queueProducers, TEST_DELIVERIES: { queueName: "paymos-deliveries" } };
      o.queueConsumers["paymos-deliveries"] = { ...o.queueConsumers["paymos-deliveries"], maxRetries: 3 };
    },
  });
  try {
    const envs = Array.from({ length: 5 }, () => envelope("invoice.paid", randomId("inv_"), { data: { order_ref: `order_${randomId("o")}` } }));
    for (const env of envs) await insertUnprocessed(down.db, env);
    // the outage: the delivery table is gone for the consumer, its dead letters, RECORD_FAILURE
    await down.db.prepare("ALTER TABLE webhook_delivery RENAME TO webhook_delivery_away").run();
    const producer = await down.mf.getQueueProducer("TEST_DELIVERIES");
    for (const env of envs) await producer.send({ event_id: env.event_id, generation: 0 });
    const lines = (stage, id) => down.logs.filter((l) => l.stage === stage && l.event_id === id);
    await eventually(
      "every message's retries and its dead letter spent during the outage",
      () => envs.every((e) => lines("consume", e.event_id).filter((l) => l.outcome === "retry").length >= 4 && lines("dead_letter", e.event_id).length >= 1),
      60000,
    );
    // D1 is back
    await down.db.prepare("ALTER TABLE webhook_delivery_away RENAME TO webhook_delivery").run();
    // whatever the dead-letter queue still holds is handed back; what it dropped, the cron's
    // sweeper re-enqueues (nothing needs an operator)
    await eventually(
      "every delivery processed",
      async () => {
        await down.scheduled();
        const rows = await Promise.all(envs.map((e) => row(down.db, e.event_id)));
        return rows.every((r) => r.processed_at) && rows;
      },
      60000,
      1000,
    );
    for (const env of envs) {
      const r = await row(down.db, env.event_id);
      assert.equal(r.outcome, "applied", `${env.event_id}: ${r.outcome}`);
      assert.equal((await effects(down.db, env.data.id)).filter((e) => e.kind === "fulfilment").length, 1);
    }
    assert.equal(down.logs.filter((l) => l.stage === "dead_letter" && l.outcome === "dead").length, 0, "nothing marked dead");
  } finally {
    await down.close();
  }
});

// ---------------------------------------------------------------- 6. the sweeper keeps up

test("one sweep re-enqueues a backlog far beyond 500 rows, in batches of 100", async () => {
  const n = 1250;
  const stmts = [];
  for (let i = 0; i < n; i++) {
    const env = envelope("invoice.created", randomId("inv_"));
    stmts.push(
      w.db
        .prepare("INSERT INTO webhook_delivery (event_id, resource_id, event_type, body, received_at, enqueued_at) VALUES (?, ?, ?, ?, '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z')")
        .bind(env.event_id, env.data.id, env.type, JSON.stringify(env)),
    );
  }
  for (let i = 0; i < stmts.length; i += 250) await w.db.batch(stmts.slice(i, i + 250));
  await w.scheduled("*/5 * * * *");
  const left = await w.db.prepare("SELECT count(*) AS n FROM webhook_delivery WHERE processed_at IS NULL AND enqueued_at = '2026-01-01T00:00:00.000Z'").first();
  assert.equal(left.n, 0, "every old row was claimed and re-enqueued by one sweep");
  const line = w.logs.filter((l) => l.stage === "sweep").at(-1);
  assert.match(line.outcome, /^requeued (\d+)$/);
  assert.ok(Number(/\d+/.exec(line.outcome)[0]) >= n, line.outcome);
  await eventually(
    "the backlog to be processed",
    async () => (await w.db.prepare("SELECT count(*) AS n FROM webhook_delivery WHERE received_at = '2026-01-01T00:00:00.000Z' AND processed_at IS NULL").first()).n === 0,
    120000,
    500,
  );
});

// ---------------------------------------------------------------- 9. production configuration

test("a non-https PAYMOS_API_BASE is refused with a clear reason, in the reply and the log, and the key is not sent", async () => {
  const insecure = await startWorker({ vars: { PAYMOS_API_BASE: "http://paymos-api.example" } });
  try {
    const res = await admin(insecure.url, "POST", "/reconcile");
    assert.equal(res.status, 503);
    assert.equal(res.json.error, "reconciliation_not_configured");
    assert.match(res.json.message, /https/);
    assert.ok(insecure.logs.some((l) => l.stage === "reconcile" && l.outcome === "not_configured" && /https/.test(l.detail)));
  } finally {
    await insecure.close();
  }
  const unset = await startWorker({ vars: { PAYMOS_API_BASE: "" } });
  try {
    const res = await admin(unset.url, "POST", "/reconcile");
    assert.equal(res.status, 503);
    assert.match(res.json.message, /PAYMOS_API_BASE is not set/);
  } finally {
    await unset.close();
  }
});
