// Operators are told, not surprised (interface §9): metrics in JSON and in the
// Prometheus text format, refusals counted without a D1 write each, alerts opened, sent
// (signed, verified here by Python's hmac), not re-sent within 6 hours, acknowledged and
// resolved, and the bulk replay.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { createServer as createNetServer } from "node:net";
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import path from "node:path";
import { startWorker, eventually, ROOT, ADMIN_TOKEN, SECRET_NEW, SECRET_OLD } from "./helpers/worker.mjs";
import { deliver, envelope, randomId, admin } from "./helpers/paymos.mjs";

/**
 * A strict reader of the Prometheus text exposition format (0.0.4), with the checks
 * `promtool check metrics` makes: HELP and TYPE once per family and before its samples,
 * metric and label names, label syntax and escaping, float values, counters named _total,
 * no series twice. Returns { families: { name: { type, help, samples: [{labels, value}] } } }.
 */
function parsePrometheus(text) {
  const families = {};
  const seen = new Set();
  const name = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
  assert.ok(text.endsWith("\n"), "ends with a newline");
  for (const line of text.split("\n").slice(0, -1)) {
    let m;
    if ((m = /^# HELP (\S+) (.*)$/.exec(line))) {
      assert.match(m[1], name);
      families[m[1]] ??= { samples: [] };
      assert.equal(families[m[1]].help, undefined, `HELP twice for ${m[1]}`);
      families[m[1]].help = m[2];
    } else if ((m = /^# TYPE (\S+) (counter|gauge|histogram|summary|untyped)$/.exec(line))) {
      families[m[1]] ??= { samples: [] };
      assert.equal(families[m[1]].type, undefined, `TYPE twice for ${m[1]}`);
      assert.equal(families[m[1]].samples.length, 0, `TYPE after samples for ${m[1]}`);
      families[m[1]].type = m[2];
      if (m[2] === "counter") assert.match(m[1], /_total$/, `counter ${m[1]} is named _total`);
    } else if (line.startsWith("#")) {
      assert.fail(`unexpected comment: ${line}`);
    } else {
      m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$/.exec(line);
      assert.ok(m, `not a sample line: ${line}`);
      const [, metric, , labelText = "", value] = m;
      const family = families[metric];
      assert.ok(family?.type && family.help !== undefined, `${metric} has HELP and TYPE before its samples`);
      const labels = {};
      let rest = labelText;
      while (rest.length) {
        const l = /^([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"(,|$)/.exec(rest);
        assert.ok(l, `bad labels in ${line}`);
        assert.equal(labels[l[1]], undefined, `label ${l[1]} twice`);
        labels[l[1]] = l[2].replace(/\\n/g, "\n").replace(/\\"/g, '"').replace(/\\\\/g, "\\");
        rest = rest.slice(l[0].length);
      }
      assert.ok(/^(NaN|[+-]Inf|[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?)$/.test(value), `bad value ${value}`);
      const key = `${metric}${JSON.stringify(Object.entries(labels).sort())}`;
      assert.ok(!seen.has(key), `series twice: ${line}`);
      seen.add(key);
      family.samples.push({ labels, value: Number(value) });
    }
  }
  return families;
}

/**
 * The same text as the Prometheus project's own Python client parses it (PyPI
 * `prometheus-client`, in .venv; an implementation no one here wrote): every sample as
 * `[metric, labels, value]`, sorted, and each family's type.
 */
function referenceParse(text) {
  const script = `
import json, sys
from prometheus_client.parser import text_string_to_metric_families
samples, types = [], {}
for f in text_string_to_metric_families(sys.stdin.read()):
    types[f.name] = f.type
    samples += [[s.name, s.labels, s.value] for s in f.samples]
print(json.dumps({"samples": sorted(samples, key=json.dumps), "types": types}))
`;
  const python = path.join(ROOT, ".venv/bin/python");
  return JSON.parse(execFileSync(python, ["-c", script], { input: text }).toString());
}

/** A configured secret's public name in the metrics: the first 8 hex of its SHA-256. */
const secretId = (secret) => createHash("sha256").update(secret).digest("hex").slice(0, 8);

/** The all-time count of 401 signature_mismatch refusals written to D1 (undefined before any). */
const signatureRefusalsWritten = async (db) => (await db.prepare("SELECT count FROM request_count WHERE bucket = 'total' AND name = 'refused' AND label = '401 signature_mismatch'").first())?.count;

const value = (families, metric, labels = {}) => {
  const f = families[metric];
  assert.ok(f, `${metric} is exported`);
  const s = f.samples.find((x) => Object.entries(labels).every(([k, v]) => x.labels[k] === v));
  assert.ok(s, `${metric}${JSON.stringify(labels)} has a sample`);
  return s.value;
};

/** Every row of every table and the counters' sum: what a write would change. */
async function dbFootprint(db) {
  const tables = (await db.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT LIKE '_cf_%' AND name <> 'd1_migrations' ORDER BY name").all()).results.map((r) => r.name);
  const out = {};
  for (const t of tables) out[t] = (await db.prepare(`SELECT count(*) AS n FROM ${t}`).first()).n;
  out.request_count_sum = (await db.prepare("SELECT coalesce(sum(count), 0) AS n FROM request_count").first()).n;
  return out;
}

/** The statement that records `env` as a delivery gone dead (processed now, outcome `dead`). */
const deadRow = (db, env) =>
  db
    .prepare("INSERT INTO webhook_delivery (event_id, resource_id, event_type, body, processed_at, outcome) VALUES (?, ?, ?, ?, strftime('%Y-%m-%dT%H:%M:%fZ','now'), 'dead')")
    .bind(env.event_id, env.data.id, env.type, JSON.stringify(env));

const badSignature = (url, env) =>
  fetch(`${url}/webhooks/paymos`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-webhook-id": env.event_id, "x-webhook-signature": `t=${Math.floor(Date.now() / 1000)},v1=${"0".repeat(64)}` },
    body: JSON.stringify(env),
  });

test("metrics: the Prometheus text parses and every contract name matches the D1 facts after a scripted scenario", async () => {
  const w = await startWorker();
  try {
    // 3 new, 1 duplicate, 1 dead, 2 refused signatures
    const envs = [envelope("invoice.paid", randomId("inv_")), envelope("invoice.created", randomId("inv_")), envelope("deposit.confirmed", randomId("pcd_"))];
    for (const e of envs) assert.equal((await deliver(w.url, e)).status, 200);
    assert.equal((await deliver(w.url, envs[0])).json.duplicate, true);
    for (const e of envs) await w.processed(e.event_id);
    const deadEnv = envelope("invoice.paid", randomId("inv_"));
    await deadRow(w.db, deadEnv).run();
    for (let i = 0; i < 2; i++) assert.equal((await badSignature(w.url, envelope("invoice.paid", randomId("inv_")))).status, 401);
    const oldSecret = envelope("invoice.paid", randomId("inv_"));
    assert.equal((await deliver(w.url, oldSecret, { secrets: [SECRET_OLD] })).status, 200);
    // processed before the facts are read: how many effects wait must not depend on the race
    // between this read and the consumer (the queue hands a message over at once)
    await w.processed(oldSecret.event_id);

    const res = await fetch(`${w.url}/admin/api/metrics?format=prometheus`, { headers: { authorization: `Bearer ${(await import("./helpers/worker.mjs")).ADMIN_TOKEN}` } });
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-type"), /^text\/plain; version=0\.0\.4/);
    const text = await res.text();
    const families = parsePrometheus(text);
    // the Prometheus client's own parser reads the same samples, labels, values and types
    const reference = referenceParse(text);
    const ours = Object.entries(families).flatMap(([metric, f]) => f.samples.map((x) => [metric, x.labels, x.value]));
    assert.deepEqual(reference.samples, ours.sort((a, b) => (JSON.stringify(a) < JSON.stringify(b) ? -1 : 1)));
    for (const [metric, f] of Object.entries(families)) {
      assert.equal(reference.types[metric.replace(/_total$/, "")], f.type, metric);
    }
    const facts = await w.db.prepare(
      `SELECT (SELECT count(*) FROM webhook_delivery WHERE processed_at IS NULL) AS unprocessed,
              (SELECT count(*) FROM webhook_delivery WHERE outcome = 'dead') AS dead,
              (SELECT count(*) FROM webhook_delivery WHERE outcome = 'applied') AS applied,
              (SELECT count(*) FROM effect WHERE dispatch = 'pending') AS pending,
              (SELECT count(*) FROM effect WHERE dispatch = 'dead') AS effects_dead`,
    ).first();
    for (const name of ["paymos_deliveries_unprocessed", "paymos_deliveries_oldest_unprocessed_seconds", "paymos_deliveries_dead", "paymos_effects_pending", "paymos_effects_dead", "paymos_requests_refused_total", "paymos_signatures_verified_total"]) {
      assert.ok(families[name], `${name} is exported`);
    }
    assert.equal(value(families, "paymos_deliveries_unprocessed"), facts.unprocessed);
    assert.equal(value(families, "paymos_deliveries_dead"), 1);
    assert.equal(value(families, "paymos_deliveries_dead"), facts.dead);
    assert.equal(value(families, "paymos_deliveries", { outcome: "applied" }), facts.applied);
    assert.equal(value(families, "paymos_effects_pending"), facts.pending);
    assert.equal(facts.pending, 3, "two fulfilments and a credit wait in the outbox (no order system)");
    assert.equal(value(families, "paymos_effects_dead"), facts.effects_dead);
    assert.equal(value(families, "paymos_requests_refused_total", { status: "401", reason: "signature_mismatch" }), 2);
    assert.equal(value(families, "paymos_signatures_verified_total", { secret: secretId(SECRET_NEW) }), 4, "3 new and the duplicate");
    assert.equal(value(families, "paymos_signatures_verified_total", { secret: secretId(SECRET_OLD) }), 1);
    assert.equal(families.paymos_requests_refused_total.type, "counter");
    // no reconciliation has run: its gauges have no sample (a 0 would read as a failed run)
    assert.equal(families.paymos_reconciliation_last_ok.samples.length, 0);
    assert.equal(families.paymos_reconciliation_last_missing.samples.length, 0);

    const json = (await admin(w.url, "GET", "/metrics")).json;
    assert.equal(json.deliveries.dead, 1);
    assert.equal(json.deliveries.unprocessed, facts.unprocessed);
    assert.equal(json.refused_last_hour["401"], 2);
    assert.equal(json.refused_last_hour.by_reason["401 signature_mismatch"], 2);
    assert.equal(json.effects.by_dispatch.pending, facts.pending);
    assert.ok(json.deliveries.last_received_at);
    assert.ok(Array.isArray(json.config.warnings) && json.config.warnings.some((w) => /ORDER_SYSTEM_URL/.test(w)));
  } finally {
    await w.close();
  }
});

test("1,000 bad-signature requests cause zero D1 writes and still show in the metrics", async () => {
  const w = await startWorker();
  try {
    const before = await dbFootprint(w.db);
    const env = envelope("invoice.paid", randomId("inv_"));
    for (let i = 0; i < 1000; i += 50) {
      const replies = await Promise.all(Array.from({ length: 50 }, () => badSignature(w.url, env)));
      assert.ok(replies.every((r) => r.status === 401));
    }
    const afterFlood = await dbFootprint(w.db);
    assert.deepEqual(afterFlood, before, "no row added, no counter written");
    const json = (await admin(w.url, "GET", "/metrics")).json;
    assert.equal(json.refused_last_hour.by_reason["401 signature_mismatch"], 1000);
    // the cron flushes the isolate's counts: one small batch, whatever the volume
    await w.scheduled();
    const flushed = (await w.db.prepare("SELECT count FROM request_count WHERE bucket = 'total' AND name = 'refused' AND label = '401 signature_mismatch'").first()).count;
    assert.equal(flushed, 1000);
    assert.ok((await w.db.prepare("SELECT count(*) AS n FROM request_count").first()).n <= 6, "a few counter rows, not one per request");
    assert.equal((await admin(w.url, "GET", "/metrics")).json.refused_last_hour.by_reason["401 signature_mismatch"], 1000, "counted once, flushed or not");
  } finally {
    await w.close();
  }
});

test("refusals of each status are counted by reason (401, 400, 413), and a configured secret that verified nothing is listed with 0", async () => {
  // a third secret configured and never used: an operator who rotated sees it at 0, safe to remove
  const UNUSED = "whsec_test_unused_5e0c1b2d";
  const w = await startWorker({ vars: { PAYMOS_WEBHOOK_SECRETS: `${SECRET_NEW},${SECRET_OLD},${UNUSED}` } });
  try {
    const env = envelope("invoice.paid", randomId("inv_"));
    assert.equal((await badSignature(w.url, env)).status, 401);
    // signed, and not an envelope: a type is missing
    const notEnvelope = { event_id: randomId("evt_"), created: 1764449990, livemode: false, data: { id: randomId("inv_") } };
    assert.equal((await deliver(w.url, notEnvelope)).status, 400);
    // signed, and larger than PAYMOS_MAX_BODY_BYTES (256 KiB by default)
    const big = envelope("invoice.paid", randomId("inv_"), { data: { note: "x".repeat(300 * 1024) } });
    assert.equal((await deliver(w.url, big)).status, 413);
    assert.equal((await deliver(w.url, envelope("invoice.paid", randomId("inv_")))).status, 200);
    const json = (await admin(w.url, "GET", "/metrics")).json;
    const refused = json.refused_last_hour;
    assert.deepEqual([refused.total, refused["401"], refused["400"], refused["413"]], [3, 1, 1, 1], JSON.stringify(refused));
    assert.equal(refused.by_reason["401 signature_mismatch"], 1);
    assert.equal(refused.by_reason["413 payload_too_large"], 1);
    assert.equal(Object.keys(refused.by_reason).filter((k) => k.startsWith("400 ")).length, 1, JSON.stringify(refused.by_reason));
    const verified = Object.fromEntries(json.signatures.map((s) => [s.secret, s.verified]));
    // the 400 and the 413 were signed too: a refusal after the signature check still verified it
    assert.deepEqual(verified, { [secretId(SECRET_NEW)]: verified[secretId(SECRET_NEW)], [secretId(SECRET_OLD)]: 0, [secretId(UNUSED)]: 0 });
    assert.ok(verified[secretId(SECRET_NEW)] >= 1);
    const prometheus = await fetch(`${w.url}/admin/api/metrics?format=prometheus`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    const families = parsePrometheus(await prometheus.text());
    for (const [status, reason] of [["401", "signature_mismatch"], ["413", "payload_too_large"]]) {
      assert.equal(value(families, "paymos_requests_refused_total", { status, reason }), 1, `${status} ${reason}`);
    }
    assert.equal(families.paymos_requests_refused_total.samples.filter((x) => x.labels.status === "400").length, 1);
    assert.equal(value(families, "paymos_signatures_verified_total", { secret: secretId(UNUSED) }), 0);
    assert.equal(value(families, "paymos_signatures_verified_total", { secret: secretId(SECRET_OLD) }), 0);
  } finally {
    await w.close();
  }
});

test("the counts of a burst that ends are written without another request or the cron, in one batch", async () => {
  const w = await startWorker({ vars: { COUNTERS_FLUSH_SECONDS: "2" } });
  try {
    const env = envelope("invoice.paid", randomId("inv_"));
    const replies = await Promise.all(Array.from({ length: 40 }, () => badSignature(w.url, env)));
    assert.ok(replies.every((r) => r.status === 401));
    // nothing else reaches the isolate: the write scheduled by the burst's first reply
    const count = await eventually("the burst's counts in D1", () => signatureRefusalsWritten(w.db), 10000, 200);
    assert.equal(count, 40);
    assert.ok((await w.db.prepare("SELECT count(*) AS n FROM request_count").first()).n <= 4, "one small batch, not a row per request");
    assert.equal((await admin(w.url, "GET", "/metrics")).json.refused_last_hour.by_reason["401 signature_mismatch"], 40, "counted once");
  } finally {
    await w.close();
  }
});

// ---------------------------------------------------------------- alerts

const ALERT_KEY = Buffer.from("alert-webhook-test-key-0123456789");
const ALERT_SECRET = `whsec_${ALERT_KEY.toString("base64")}`;

/** Python's hmac, base64 and hashlib: an implementation independent of ours and of node's. */
function pythonVerifies(requests) {
  const script = `
import base64, hashlib, hmac, json, sys
key = base64.b64decode(${JSON.stringify(ALERT_SECRET.slice(6))})
ok = []
for r in json.load(sys.stdin):
    msg = (r["id"] + "." + r["ts"] + ".").encode() + r["body"].encode()
    want = base64.b64encode(hmac.new(key, msg, hashlib.sha256).digest()).decode()
    ok.append(any(p.split(",", 1) == ["v1", want] for p in r["sig"].split(" ")))
print(json.dumps(ok))
`;
  return JSON.parse(execFileSync("python3", ["-c", script], { input: JSON.stringify(requests) }).toString());
}

test("alerts: each kind opens, is sent once (Python verifies it), is not re-sent within 6 hours, can be acknowledged, resolves; an unreachable webhook loses none", async () => {
  const hook = { requests: [], failing: false };
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      if (hook.failing) return res.writeHead(503).end();
      hook.requests.push({ id: req.headers["webhook-id"], key: req.headers["idempotency-key"], ts: req.headers["webhook-timestamp"], sig: req.headers["webhook-signature"], body, json: JSON.parse(body) });
      res.writeHead(200).end();
    });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const w = await startWorker({
    vars: { ALERT_WEBHOOK_URL: `http://127.0.0.1:${server.address().port}/alerts`, ALERT_WEBHOOK_SECRET: ALERT_SECRET, ALERT_SIGNATURE_REFUSALS: "5" },
  });
  try {
    const now = "strftime('%Y-%m-%dT%H:%M:%fZ','now')";
    const ago = (m) => `strftime('%Y-%m-%dT%H:%M:%fZ','now','-${m} minutes')`;
    const insert = (env, cols, vals) =>
      w.db.prepare(`INSERT INTO webhook_delivery (event_id, resource_id, event_type, body${cols}) VALUES (?, ?, ?, ?${vals})`).bind(env.event_id, env.data.id, env.type, JSON.stringify(env)).run();
    // delivery_dead
    const deadEnv = envelope("invoice.paid", randomId("inv_"));
    await insert(deadEnv, ", processed_at, outcome", `, ${now}, 'dead'`);
    // deliveries_backlog: unprocessed for 20 minutes (recently enqueued: the sweeper leaves it)
    const stuck = envelope("invoice.created", randomId("inv_"));
    await insert(stuck, ", received_at, enqueued_at", `, ${ago(20)}, ${now}`);
    // livemode_mismatch
    const other = envelope("invoice.paid", randomId("inv_"));
    await insert(other, ", processed_at, outcome, reason", `, ${now}, 'ignored', 'livemode_mismatch'`);
    // effect_dead and effects_backlog
    const a = randomId("inv_");
    const b = randomId("inv_");
    await admin(w.url, "POST", `/resources/${a}/transition`, { to: "paid", reason: "x", order_ref: "o1" });
    await admin(w.url, "POST", `/resources/${b}/transition`, { to: "paid", reason: "x" });
    await w.db.prepare("UPDATE effect SET dispatch = 'dead' WHERE resource_id = ?").bind(a).run();
    await w.db.prepare(`UPDATE effect SET created_at = ${ago(20)} WHERE resource_id = ?`).bind(b).run();
    // reconciliation: the provider was unreachable
    await w.db.prepare("INSERT INTO reconciliation_run (state, error, finished_at) VALUES ('failed', 'the provider API could not be reached', strftime('%Y-%m-%dT%H:%M:%fZ','now'))").run();
    // signature_refusals: a burst of refused signatures
    for (let i = 0; i < 6; i++) assert.equal((await badSignature(w.url, envelope("invoice.paid", randomId("inv_")))).status, 401);

    await w.scheduled();
    const kinds = ["delivery_dead", "effect_dead", "deliveries_backlog", "effects_backlog", "reconciliation", "livemode_mismatch", "signature_refusals"];
    let alerts = (await admin(w.url, "GET", "/alerts")).json.data;
    assert.deepEqual(alerts.map((x) => x.kind).sort(), [...kinds].sort());
    assert.ok(alerts.every((x) => x.state === "open" && /^alt_/.test(x.id) && x.count >= 1 && x.first_seen && x.summary));
    assert.deepEqual(hook.requests.map((r) => r.json.kind).sort(), [...kinds].sort(), "each sent once");
    assert.deepEqual(pythonVerifies(hook.requests), hook.requests.map(() => true), "every signature verified by Python's hmac");
    for (const r of hook.requests) {
      assert.equal(r.id, r.json.id);
      // exactly the contract's body (§9), nothing else
      assert.deepEqual(Object.keys(r.json).sort(), ["count", "first_seen", "id", "kind", "last_seen", "severity", "summary"]);
    }

    // not re-sent within 6 hours
    await w.scheduled();
    assert.equal(hook.requests.length, 7);
    // six hours later (simulated: the last send moved back 7 hours), still open: sent again
    const backlog = alerts.find((x) => x.kind === "deliveries_backlog");
    await w.db.prepare(`UPDATE alert SET sent_at = ${ago(7 * 60)} WHERE id = ?`).bind(backlog.id).run();
    await w.scheduled();
    assert.deepEqual(hook.requests.slice(7).map((r) => r.json.id), [backlog.id]);
    // the reminder is a new message: its own webhook-id and Idempotency-Key (a receiver that
    // drops copies by id keeps it), the same alert id in the body, signed as the first
    const reminder = hook.requests[7];
    const first = hook.requests.find((r) => r.json.id === backlog.id);
    assert.equal(first.id, backlog.id);
    assert.equal(first.key, backlog.id);
    assert.equal(reminder.id, `${backlog.id}_1`);
    assert.equal(reminder.key, reminder.id);
    assert.deepEqual(pythonVerifies([reminder]), [true], "the reminder's signature verified by Python's hmac");

    // acknowledged: silent, even after 6 hours, while nothing new comes (interface §9: sent
    // "until it resolves or an operator acknowledges it"); the acknowledgement covers what the
    // alert counted when it was given (amended): another delivery gone dead reopens it, and it
    // is sent again (the tests below make them dead through the dead-letter queue, for real)
    const dead = alerts.find((x) => x.kind === "delivery_dead");
    const ack = await admin(w.url, "POST", `/alerts/${dead.id}/ack`);
    assert.deepEqual(ack.json, { id: dead.id, state: "acknowledged" });
    await w.db.prepare(`UPDATE alert SET sent_at = ${ago(7 * 60)} WHERE id = ?`).bind(dead.id).run();
    await w.scheduled();
    assert.equal(hook.requests.filter((r) => r.json.id === dead.id).length, 1);
    const deadToo = envelope("invoice.paid", randomId("inv_"));
    await insert(deadToo, ", processed_at, outcome", `, ${now}, 'dead'`);
    await w.scheduled();
    const grown = (await admin(w.url, "GET", "/alerts")).json.data.find((x) => x.id === dead.id);
    assert.equal(grown.state, "open", "a new instance reopens it");
    assert.equal(grown.count, 2);
    assert.equal(grown.reopens, 1);
    const resent = hook.requests.filter((r) => r.json.id === dead.id);
    assert.equal(resent.length, 2, "acknowledged, then another dead: sent again");
    assert.equal(resent[1].id, `${dead.id}_1`, "a new message: its own webhook-id");
    assert.equal(resent[1].json.count, 2);
    assert.equal((await admin(w.url, "POST", "/alerts/alt_nosuch/ack")).status, 404);

    // a new burst reopens an acknowledged signature_refusals alert: a burst's worth of refusals
    // (5 here) past what the acknowledgement covered (6), not one more
    const burst = alerts.find((x) => x.kind === "signature_refusals");
    assert.equal((await admin(w.url, "POST", `/alerts/${burst.id}/ack`)).status, 200);
    const refuse = async (n) => {
      for (let i = 0; i < n; i++) assert.equal((await badSignature(w.url, envelope("invoice.paid", randomId("inv_")))).status, 401);
    };
    await refuse(4);
    await w.scheduled();
    const calm = (await admin(w.url, "GET", "/alerts")).json.data.find((x) => x.id === burst.id);
    assert.equal(calm.state, "acknowledged", "4 more refusals: not a new burst");
    assert.equal(calm.count, 10);
    assert.equal(hook.requests.filter((r) => r.json.id === burst.id).length, 1);
    await refuse(1);
    await w.scheduled();
    const again = (await admin(w.url, "GET", "/alerts")).json.data.find((x) => x.id === burst.id);
    assert.equal(again.state, "open", "a burst's worth past the acknowledgement reopens it");
    assert.equal(again.reopens, 1);
    const burstSends = hook.requests.filter((r) => r.json.id === burst.id);
    assert.equal(burstSends.length, 2, "and sends it again");
    assert.equal(burstSends[1].json.count, 11);

    // an acknowledged backlog is told again once it has grown past the next power of two
    // (1 → 2 here): not for every delivery that joins it, never silent for ever
    assert.equal((await admin(w.url, "POST", `/alerts/${backlog.id}/ack`)).status, 200);
    await w.scheduled();
    assert.equal((await admin(w.url, "GET", "/alerts")).json.data.find((x) => x.id === backlog.id).state, "acknowledged");
    const backlogSends = hook.requests.filter((r) => r.json.id === backlog.id).length;
    const stuckToo = envelope("invoice.created", randomId("inv_"));
    await insert(stuckToo, ", received_at, enqueued_at", `, ${ago(20)}, ${now}`);
    await w.scheduled();
    const grownBacklog = (await admin(w.url, "GET", "/alerts")).json.data.find((x) => x.id === backlog.id);
    assert.deepEqual([grownBacklog.state, grownBacklog.count, grownBacklog.reopens], ["open", 2, 1]);
    assert.equal(hook.requests.filter((r) => r.json.id === backlog.id).length, backlogSends + 1, "sent again");

    // resolved when the condition no longer holds
    await w.db.prepare("DELETE FROM webhook_delivery WHERE event_id IN (?, ?)").bind(deadEnv.event_id, deadToo.event_id).run();
    await w.scheduled();
    alerts = (await admin(w.url, "GET", "/alerts")).json.data;
    assert.equal(alerts.find((x) => x.id === dead.id).state, "resolved");
    assert.equal(alerts[0].state, "open", "open alerts first");
    assert.equal((await admin(w.url, "POST", `/alerts/${dead.id}/ack`)).status, 409);

    // an unreachable webhook loses no alert: kept, retried at the next run
    hook.failing = true;
    const dead2 = envelope("invoice.paid", randomId("inv_"));
    await insert(dead2, ", processed_at, outcome", `, ${now}, 'dead'`);
    await w.scheduled();
    const reopened = (await admin(w.url, "GET", "/alerts")).json.data.find((x) => x.kind === "delivery_dead" && x.state === "open");
    assert.ok(reopened, "a new delivery_dead alert is open");
    assert.equal(reopened.sends, 0);
    assert.match(reopened.last_send_error, /503/);
    hook.failing = false;
    await w.scheduled();
    assert.equal(hook.requests.filter((r) => r.json.id === reopened.id).length, 1, "sent once it could be");
    // nor a reopening whose send failed: the new instance goes out at the next run, not six
    // hours after the instance before it was sent
    assert.equal((await admin(w.url, "POST", `/alerts/${reopened.id}/ack`)).status, 200);
    hook.failing = true;
    const dead3 = envelope("invoice.paid", randomId("inv_"));
    await insert(dead3, ", processed_at, outcome", `, ${now}, 'dead'`);
    await w.scheduled();
    const unsent = (await admin(w.url, "GET", "/alerts")).json.data.find((x) => x.id === reopened.id);
    assert.deepEqual([unsent.state, unsent.reopens, unsent.sends], ["open", 1, 1]);
    assert.match(unsent.last_send_error, /503/);
    hook.failing = false;
    await w.scheduled();
    const told = hook.requests.filter((r) => r.json.id === reopened.id);
    assert.deepEqual(
      told.map((r) => [r.id, r.json.count]),
      [
        [reopened.id, 1],
        [`${reopened.id}_1`, 2],
      ],
      "the reopened alert sent at the next run",
    );
    assert.ok((await admin(w.url, "GET", "/metrics")).json.alerts_open >= 1);
  } finally {
    await w.close();
    server.close();
  }
});

test("a URL that cannot carry credentials, or none for alerts, is said in log lines as well as the metrics (interface §4)", async () => {
  const w = await startWorker({
    vars: { ORDER_SYSTEM_URL: "http://orders.example.com/hook", ORDER_SYSTEM_SECRET: ALERT_SECRET, ALERT_WEBHOOK_URL: "" },
  });
  try {
    const lines = (stage, outcome) => w.logs.filter((l) => l.stage === stage && l.outcome === outcome);
    // a paid invoice releases its fulfilment: kept pending, and said
    const paid = envelope("invoice.paid", randomId("inv_"));
    assert.equal((await deliver(w.url, paid)).status, 200);
    await w.processed(paid.event_id);
    await eventually("the effects' not_configured line", () => lines("effects", "not_configured").length > 0);
    assert.match(lines("effects", "not_configured")[0].detail, /^1 effects kept pending: ORDER_SYSTEM_URL is not an https URL/);
    const effect = await w.db.prepare("SELECT dispatch FROM effect WHERE resource_id = ?").bind(paid.data.id).first();
    assert.equal(effect.dispatch, "pending");
    // a dead delivery opens an alert that has nowhere to go: said at the cron, as the effects'
    // sweeper says why it hands nothing over
    const dead = envelope("invoice.paid", randomId("inv_"));
    await deadRow(w.db, dead).run();
    await w.scheduled();
    await eventually("the cron's lines", () => lines("alert", "not_sent").length > 0 && lines("sweep_effects", "not_configured").length > 0);
    assert.match(lines("sweep_effects", "not_configured")[0].detail, /ORDER_SYSTEM_URL is not an https URL/);
    const notSent = lines("alert", "not_sent")[0];
    assert.match(notSent.event_id, /^alt_/);
    assert.match(notSent.detail, /ALERT_WEBHOOK_URL is not set/);
    assert.ok(lines("effects", "not_configured").concat(lines("sweep_effects", "not_configured")).every((l) => !/whsec_/.test(l.detail)), "never the secret");
    const warnings = (await admin(w.url, "GET", "/metrics")).json.config.warnings;
    assert.ok(warnings.some((x) => /ORDER_SYSTEM_URL/.test(x)) && warnings.some((x) => /ALERT_WEBHOOK_URL/.test(x)), JSON.stringify(warnings));
  } finally {
    await w.close();
  }
});

test("an https URL fetch cannot use (a port past 65535, no host), a base with a query, a token with blanks around it: said, nothing lost", async () => {
  const w = await startWorker({
    vars: {
      ORDER_SYSTEM_URL: "https://orders.example.com:99999/x",
      ORDER_SYSTEM_SECRET: ALERT_SECRET,
      ALERT_WEBHOOK_URL: "https://[zz]/hook",
      PAYMOS_API_BASE: "https://api.example.com/api?k=1",
      ADMIN_TOKEN: ` ${(await import("./helpers/worker.mjs")).ADMIN_TOKEN}\n`,
    },
  });
  try {
    // the token as any client sends it (a header's value has no blanks around it)
    const m = await admin(w.url, "GET", "/metrics");
    assert.equal(m.status, 200, "the token set with blanks around it admits");
    const warnings = m.json.config.warnings;
    for (const expected of [
      "effects cannot be delivered: ORDER_SYSTEM_URL is not a URL that can be fetched: it has a port that is not 1 to 65535",
      "alerts cannot be sent: ALERT_WEBHOOK_URL is not a URL that can be fetched: it has a host that is neither a name nor an address",
      "reconciliation cannot run: PAYMOS_API_BASE is not a URL that can be fetched: it has a query or fragment, which the API's paths would follow",
    ]) {
      assert.ok(warnings.includes(expected), `${expected} in ${JSON.stringify(warnings)}`);
    }
    // a paid invoice's fulfilment waits, pending, rather than spending its ladder on a URL
    // that cannot be fetched
    const paid = envelope("invoice.paid", randomId("inv_"));
    assert.equal((await deliver(w.url, paid)).status, 200);
    await w.processed(paid.event_id);
    await eventually("the effects' not_configured line", () => w.logs.some((l) => l.stage === "effects" && l.outcome === "not_configured" && /ORDER_SYSTEM_URL is not a URL that can be fetched/.test(l.detail)));
    const effect = await w.db.prepare("SELECT dispatch, attempts FROM effect WHERE resource_id = ?").bind(paid.data.id).first();
    assert.deepEqual({ ...effect }, { dispatch: "pending", attempts: 0 });
    const r = await admin(w.url, "POST", "/reconcile", {});
    assert.equal(r.status, 503);
    assert.equal(r.json.error, "reconciliation_not_configured");
    assert.match(r.json.message, /PAYMOS_API_BASE is not a URL that can be fetched/);
  } finally {
    await w.close();
  }
});

test("loopback http URLs work as development values and are said to be ones: a deployed worker needs https", async () => {
  const w = await startWorker({
    vars: { PAYMOS_API_BASE: "http://127.0.0.1:9", ORDER_SYSTEM_URL: "http://localhost:9/orders", ALERT_WEBHOOK_URL: "https://alerts.example/hook" },
  });
  try {
    const warnings = (await admin(w.url, "GET", "/metrics")).json.config.warnings;
    for (const expected of [
      "PAYMOS_API_BASE is http://127.0.0.1:9, a loopback development value: a deployed worker needs https://",
      "ORDER_SYSTEM_URL is http://localhost:9/orders, a loopback development value: a deployed worker needs https://",
    ]) {
      assert.ok(warnings.includes(expected), `${expected} in ${JSON.stringify(warnings)}`);
    }
    assert.ok(!warnings.some((x) => /ALERT_WEBHOOK_URL is https/.test(x)), "an https URL is no development value");
    assert.ok(!warnings.some((x) => /effects cannot be delivered|reconciliation cannot run/.test(x)), "still used here");
  } finally {
    await w.close();
  }
});

test("a numeric setting that is not a number, or out of its range, is not used as given: the default (or the nearest bound) is, and it is said", async () => {
  const w = await startWorker({
    vars: { PAYMOS_SIGNATURE_TOLERANCE_SECONDS: "-5", INVOCATION_BUDGET: "5", EFFECT_RETRY_SCALE: "abc" },
  });
  try {
    const now = Math.floor(Date.now() / 1000);
    // a tolerance of -5 taken as given would refuse both; the default 300 takes the first
    assert.equal((await deliver(w.url, envelope("invoice.created", randomId("inv_")), { t: now - 100 })).status, 200);
    const late = await deliver(w.url, envelope("invoice.created", randomId("inv_")), { t: now - 400 });
    assert.equal(late.status, 401);
    assert.equal(late.json.error, "timestamp_out_of_tolerance");
    const said = () => w.logs.filter((l) => l.stage === "config" && l.outcome === "invalid_setting").map((l) => l.detail);
    await eventually("the receive path's line", () => said().length > 0);
    assert.deepEqual(said(), ['PAYMOS_SIGNATURE_TOLERANCE_SECONDS is "-5", outside 1 to 9223372036854775807: 300 is used'], "once per isolate, not per request");
    const warnings = (await admin(w.url, "GET", "/metrics")).json.config.warnings;
    for (const expected of [
      'PAYMOS_SIGNATURE_TOLERANCE_SECONDS is "-5", outside 1 to 9223372036854775807: 300 is used',
      'INVOCATION_BUDGET is "5", outside 10 to 1000: 10 is used',
      'EFFECT_RETRY_SCALE is "abc", which cannot be read as a number: the default 1 is used',
    ]) {
      assert.ok(warnings.includes(expected), `${expected} in ${JSON.stringify(warnings)}`);
    }
    await w.scheduled();
    await eventually("the cron's lines", () => said().length === 4);
    assert.ok(said().some((d) => /^INVOCATION_BUDGET/.test(d)) && said().some((d) => /^EFFECT_RETRY_SCALE/.test(d)));
  } finally {
    await w.close();
  }
});

test("a tolerance as wide as asked is taken as given: the contract's vector with its own t and v1 is accepted", async () => {
  const w = await startWorker({ vars: { PAYMOS_SIGNATURE_TOLERANCE_SECONDS: "99999999999" } });
  try {
    const body =
      '{"event_id":"evt_9Kq2xT4mLp","type":"invoice.paid","created":1764449990,"livemode":false,"data":{"id":"inv_7Hc3pQ","object":"invoice","status":"paid","amount":"49.00","currency":"USDT","order_ref":"order_1042"}}';
    const res = await fetch(`${w.url}/webhooks/paymos`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "x-webhook-id": "evt_9Kq2xT4mLp",
        "x-webhook-signature": "t=1764450000,v1=80ba6d2ac4725a807b1570f1407b0c5efde893bb29315d9861967a9c5afe0c86,v1=bc9cc7d8599f46563d7c9bed1f394b9aa7100e35121ccb50ed69aadc3002733b",
      },
      body,
    });
    assert.equal(res.status, 200, await res.text());
    const warnings = (await admin(w.url, "GET", "/metrics")).json.config.warnings;
    assert.ok(!warnings.some((x) => /TOLERANCE/.test(x)), JSON.stringify(warnings));
  } finally {
    await w.close();
  }
});

// ---------------------------------------------------------------- bulk replay

test("bulk replay: a filter is required, a dry run counts, the real run enqueues 2,500 in chunks, repeating it doubles nothing", async () => {
  const w = await startWorker();
  try {
    assert.equal((await admin(w.url, "POST", "/deliveries/replay", {})).json.error, "filter_required");
    assert.equal((await admin(w.url, "POST", "/deliveries/replay", { status: "lost" })).status, 400);
    assert.equal((await admin(w.url, "POST", "/deliveries/replay", { received_after: "yesterday" })).json.error, "invalid_time");
    // a day the month does not have is refused, not read by SQLite as one in the next month
    assert.equal((await admin(w.url, "POST", "/deliveries/replay", { received_after: "2026-02-30" })).json.error, "invalid_time");
    assert.equal((await admin(w.url, "POST", "/deliveries/replay", { status: "dead", colour: "red" })).status, 400);
    // 2,500 dead invoice.paid deliveries for 50 invoices (two endpoints' worth of copies and more)
    const invoices = Array.from({ length: 50 }, () => randomId("inv_"));
    const stmts = [];
    for (let i = 0; i < 2500; i++) {
      const env = envelope("invoice.paid", invoices[i % 50]);
      stmts.push(deadRow(w.db, env));
    }
    for (let i = 0; i < stmts.length; i += 250) await w.db.batch(stmts.slice(i, i + 250));
    const dry = await admin(w.url, "POST", "/deliveries/replay", { status: "dead", type: "invoice.paid", dry_run: true });
    assert.deepEqual([dry.json.matched, dry.json.enqueued], [2500, 0]);
    assert.equal((await w.db.prepare("SELECT count(*) AS n FROM webhook_delivery WHERE outcome = 'dead'").first()).n, 2500, "a dry run changes nothing");

    const run = await admin(w.url, "POST", "/deliveries/replay", { status: "dead", type: "invoice.paid" });
    assert.equal(run.status, 200, JSON.stringify(run.json));
    assert.deepEqual([run.json.matched, run.json.enqueued, run.json.next_cursor], [2500, 2500, null]);
    assert.ok(w.logs.some((l) => l.stage === "bulk_replay" && /enqueued 2500/.test(l.outcome)));
    await eventually("all 2,500 processed", async () => (await w.db.prepare("SELECT count(*) AS n FROM webhook_delivery WHERE processed_at IS NULL").first()).n === 0, 180000, 500);
    const outcomes = (await w.db.prepare("SELECT outcome, count(*) AS n FROM webhook_delivery GROUP BY outcome").all()).results;
    assert.deepEqual(Object.fromEntries(outcomes.map((r) => [r.outcome, r.n])), { applied: 50, stale: 2450 });
    assert.equal((await w.db.prepare("SELECT count(*) AS n FROM effect").first()).n, 50, "one fulfilment per invoice");

    // the same replay again (by type this time): the guard decides again, nothing doubles
    const again = await admin(w.url, "POST", "/deliveries/replay", { type: "invoice.paid" });
    assert.equal(again.json.enqueued, 2500);
    await eventually("reprocessed", async () => (await w.db.prepare("SELECT count(*) AS n FROM webhook_delivery WHERE processed_at IS NULL").first()).n === 0, 180000, 500);
    assert.equal((await w.db.prepare("SELECT count(*) AS n FROM effect").first()).n, 50);
    assert.equal((await w.db.prepare("SELECT count(*) AS n FROM resource_transition").first()).n, 50);
  } finally {
    await w.close();
  }
});

test("bulk replay larger than one invocation's budget continues with next_cursor", async () => {
  const w = await startWorker({ vars: { INVOCATION_BUDGET: "10" } });
  try {
    const stmts = [];
    for (let i = 0; i < 450; i++) {
      const env = envelope("invoice.created", randomId("inv_"));
      stmts.push(deadRow(w.db, env));
    }
    await w.db.batch(stmts);
    const body = { status: "dead", received_after: "2020-01-01T00:00:00Z" };
    let r = await admin(w.url, "POST", "/deliveries/replay", body);
    assert.equal(r.json.matched, 450);
    assert.equal(r.json.enqueued, 300, "three chunks of 100 within a budget of 10");
    assert.ok(r.json.next_cursor);
    let total = r.json.enqueued;
    for (let i = 0; r.json.next_cursor && i < 10; i++) {
      r = await admin(w.url, "POST", "/deliveries/replay", { ...body, cursor: r.json.next_cursor });
      total += r.json.enqueued;
    }
    assert.equal(total, 450, "every match replayed once");
    assert.equal((await w.db.prepare("SELECT count(*) AS n FROM webhook_delivery WHERE replays <> 1").first()).n, 0);
  } finally {
    await w.close();
  }
});

// ---------------------------------------------------------------- alerts that an ack cannot silence for good, dismiss

/** An alert webhook that records what it receives (and can refuse). */
async function alertHook() {
  const hook = { requests: [], failing: false };
  hook.server = createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      if (hook.failing) return res.writeHead(503).end();
      hook.requests.push({ id: req.headers["webhook-id"], key: req.headers["idempotency-key"], ts: req.headers["webhook-timestamp"], sig: req.headers["webhook-signature"], body, json: JSON.parse(body) });
      res.writeHead(200).end();
    });
  });
  await new Promise((r) => hook.server.listen(0, "127.0.0.1", r));
  hook.url = `http://127.0.0.1:${hook.server.address().port}/alerts`;
  hook.of = (kind) => hook.requests.filter((r) => r.json.kind === kind);
  return hook;
}

/**
 * A delivery that goes dead for real: its stored body no longer parses, so every consumer
 * attempt fails (each failure recorded), the queue's retries run out, and the dead-letter
 * consumer marks it dead (MARK_DEAD). Resolves with its event id.
 */
async function deadDelivery(w) {
  const inv = randomId("inv_");
  const env = envelope("invoice.paid", inv);
  const broken = JSON.stringify({ event_id: env.event_id, type: "invoice.paid" });
  await w.db.prepare("INSERT INTO webhook_delivery (event_id, resource_id, event_type, body) VALUES (?, ?, ?, ?)").bind(env.event_id, inv, env.type, broken).run();
  assert.equal((await admin(w.url, "POST", `/deliveries/${env.event_id}/replay`)).status, 202);
  await eventually(
    `${env.event_id} to go dead`,
    async () => (await w.db.prepare("SELECT outcome FROM webhook_delivery WHERE event_id = ?").bind(env.event_id).first())?.outcome === "dead",
    120000,
    250,
  );
  return env.event_id;
}

/** An effect that goes dead for real: the order system refuses every attempt of the (compressed) ladder. */
async function deadEffect(w) {
  const inv = randomId("inv_");
  assert.equal((await deliver(w.url, envelope("invoice.paid", inv))).status, 200);
  const row = await eventually(
    `${inv}'s fulfilment to go dead`,
    () => w.db.prepare("SELECT effect_id, dispatch FROM effect WHERE resource_id = ? AND dispatch = 'dead'").bind(inv).first(),
    120000,
    250,
  );
  return row.effect_id;
}

test("alerts: acknowledged, then another delivery or effect gone dead reopens the alert and sends it again; dismissed, they leave the counts and the alert resolves", async () => {
  const hook = await alertHook();
  // an order system that refuses everything: effects go dead after the (compressed) ladder
  const refusing = createServer((req, res) => req.on("data", () => {}).on("end", () => res.writeHead(503).end()));
  await new Promise((r) => refusing.listen(0, "127.0.0.1", r));
  const w = await startWorker({
    vars: {
      ALERT_WEBHOOK_URL: hook.url,
      ALERT_WEBHOOK_SECRET: ALERT_SECRET,
      ORDER_SYSTEM_URL: `http://127.0.0.1:${refusing.address().port}/orders`,
      ORDER_SYSTEM_SECRET: ALERT_SECRET,
      ORDER_SYSTEM_TIMEOUT_MS: "500",
      EFFECT_RETRY_SCALE: "0.0001",
    },
  });
  try {
    const alertOf = async (kind) => (await admin(w.url, "GET", "/alerts")).json.data.find((a) => a.kind === kind && a.state !== "resolved");
    const metrics = async () => (await admin(w.url, "GET", "/metrics")).json;

    // one dead delivery, one dead effect: each alert opens and is sent once
    const [d1, e1] = await Promise.all([deadDelivery(w), deadEffect(w)]);
    await w.scheduled();
    const deadAlert = await alertOf("delivery_dead");
    const effectAlert = await alertOf("effect_dead");
    assert.equal(deadAlert.count, 1);
    assert.equal(effectAlert.count, 1);
    assert.equal(hook.of("delivery_dead").length, 1);
    assert.equal(hook.of("effect_dead").length, 1);

    // acknowledged: silent while nothing new comes, even past the 6-hour reminder
    for (const a of [deadAlert, effectAlert]) assert.equal((await admin(w.url, "POST", `/alerts/${a.id}/ack`)).json.state, "acknowledged");
    await w.db.prepare("UPDATE alert SET sent_at = strftime('%Y-%m-%dT%H:%M:%fZ','now','-7 hours')").run();
    await w.scheduled();
    assert.equal(hook.of("delivery_dead").length, 1);
    assert.equal(hook.of("effect_dead").length, 1);
    assert.equal((await alertOf("delivery_dead")).state, "acknowledged");

    // another of each goes dead: a new instance reopens each alert, and it is sent again
    const [d2, e2] = await Promise.all([deadDelivery(w), deadEffect(w)]);
    await w.scheduled();
    for (const [kind, first] of [
      ["delivery_dead", deadAlert],
      ["effect_dead", effectAlert],
    ]) {
      const a = await alertOf(kind);
      assert.equal(a.id, first.id, `${kind}: the same alert, reopened`);
      assert.equal(a.state, "open");
      assert.equal(a.count, 2);
      assert.equal(a.reopens, 1);
      const sent = hook.of(kind);
      assert.equal(sent.length, 2, `${kind} sent again`);
      assert.equal(sent[1].id, `${first.id}_1`, "a new message: its own webhook-id");
      assert.equal(sent[1].json.count, 2);
    }
    assert.deepEqual(pythonVerifies(hook.requests), hook.requests.map(() => true), "every signature verified by Python's hmac");
    // and not again at the next run
    await w.scheduled();
    assert.equal(hook.requests.length, 4);

    // dismiss: bad input refused, nothing changed
    assert.equal((await admin(w.url, "POST", `/deliveries/${d1}/dismiss`, {})).json.error, "invalid_json");
    assert.equal((await admin(w.url, "POST", `/deliveries/${d1}/dismiss`, { reason: "   " })).json.error, "invalid_reason");
    assert.equal((await admin(w.url, "POST", `/deliveries/${d1}/dismiss`, { reason: "x".repeat(501) })).json.error, "invalid_reason");
    assert.equal((await admin(w.url, "POST", "/deliveries/evt_nosuch/dismiss", { reason: "gone" })).status, 404);
    assert.equal((await admin(w.url, "POST", "/effects/eff_nosuch/dismiss", { reason: "gone" })).status, 404);
    assert.equal((await metrics()).deliveries.dead, 2);
    // a delivery that is not dead: 409 not_dead
    const fine = envelope("invoice.created", randomId("inv_"));
    assert.equal((await deliver(w.url, fine)).status, 200);
    await w.processed(fine.event_id);
    const notDead = await admin(w.url, "POST", `/deliveries/${fine.event_id}/dismiss`, { reason: "nothing to do" });
    assert.equal(notDead.status, 409);
    assert.equal(notDead.json.error, "not_dead");

    // the first of each dismissed: out of the dead counts, on record with its reason
    const reason = "test event sent by the provider's support; nothing to ship";
    const dd = await admin(w.url, "POST", `/deliveries/${d1}/dismiss`, { reason });
    assert.equal(dd.status, 200, JSON.stringify(dd.json));
    assert.deepEqual([dd.json.event_id, dd.json.dismissed, dd.json.reason, dd.json.already], [d1, true, reason, false]);
    const de = await admin(w.url, "POST", `/effects/${e1}/dismiss`, { reason: "shipped by hand, order 1042" });
    assert.equal(de.status, 200, JSON.stringify(de.json));
    // repeating it is 200, with the first reason
    const again = await admin(w.url, "POST", `/deliveries/${d1}/dismiss`, { reason: "another reason" });
    assert.deepEqual([again.status, again.json.already, again.json.reason], [200, true, reason]);
    const shown = (await admin(w.url, "GET", `/deliveries/${d1}`)).json;
    assert.equal(shown.outcome, "dead", "still dead, on record");
    assert.equal(shown.dismiss_reason, reason);
    assert.ok(shown.dismissed_at);
    let m = await metrics();
    assert.equal(m.deliveries.dead, 1);
    assert.equal(m.deliveries.by_outcome.dismissed, 1);
    assert.equal(m.effects.by_dispatch.dead, 1);
    assert.equal(m.effects.by_dispatch.dismissed, 1);
    // dismissing is not a new instance: the alerts, acknowledged again, stay silent
    for (const kind of ["delivery_dead", "effect_dead"]) await admin(w.url, "POST", `/alerts/${(await alertOf(kind)).id}/ack`);
    await w.scheduled();
    assert.equal(hook.requests.length, 4);
    assert.equal((await alertOf("delivery_dead")).count, 1);

    // the rest dismissed: the alerts resolve
    assert.equal((await admin(w.url, "POST", `/deliveries/${d2}/dismiss`, { reason: "replayed by hand elsewhere" })).status, 200);
    assert.equal((await admin(w.url, "POST", `/effects/${e2}/dismiss`, { reason: "shipped by hand" })).status, 200);
    await w.scheduled();
    assert.equal(await alertOf("delivery_dead"), undefined, "resolved");
    assert.equal(await alertOf("effect_dead"), undefined, "resolved");
    m = await metrics();
    assert.deepEqual([m.deliveries.dead, m.deliveries.dismissed, m.effects.by_dispatch.dead, m.effects.by_dispatch.dismissed], [0, 2, 0, 2]);
    const prom = parsePrometheus(await (await fetch(`${w.url}/admin/api/metrics?format=prometheus`, { headers: { authorization: `Bearer ${(await import("./helpers/worker.mjs")).ADMIN_TOKEN}` } })).text());
    assert.equal(value(prom, "paymos_deliveries_dead"), 0);
    assert.equal(value(prom, "paymos_deliveries", { outcome: "dismissed" }), 2);
    assert.equal(value(prom, "paymos_effects", { dispatch: "dismissed" }), 2);
    assert.ok(w.logs.some((l) => l.stage === "dismiss" && l.event_id === d1 && l.detail === reason), "the dismissal is logged with its reason");

    // dismissed deliveries and effects stay in the archive, replayable and redeliverable; a
    // replay ends the dismissal
    const listed = (await admin(w.url, "GET", "/deliveries?status=dead")).json.data.map((d) => d.event_id);
    assert.ok(listed.includes(d1) && listed.includes(d2));
    assert.equal((await admin(w.url, "POST", `/deliveries/${d1}/replay`)).status, 202);
    const replayed = (await admin(w.url, "GET", `/deliveries/${d1}`)).json;
    assert.equal(replayed.dismissed_at, null);
    assert.equal((await metrics()).deliveries.dismissed, 1);
    assert.equal((await admin(w.url, "POST", `/effects/${e1}/redeliver`)).status, 202);
    assert.equal((await metrics()).effects.by_dispatch.dismissed, 1);
  } finally {
    await w.close();
    hook.server.close();
    refusing.closeAllConnections?.();
    refusing.close();
  }
});

// ---------------------------------------------------------------- pull mode

test("pull mode: an order system reads the feed to the end and acknowledges each effect; effects_backlog then resolves", async () => {
  const hook = await alertHook();
  const w = await startWorker({ vars: { ALERT_WEBHOOK_URL: hook.url, ALERT_WEBHOOK_SECRET: ALERT_SECRET } });
  try {
    // no ORDER_SYSTEM_URL: every effect waits in the feed
    const paid = Array.from({ length: 5 }, () => randomId("inv_"));
    const deposit = randomId("pcd_");
    const refunded = randomId("inv_");
    const envs = [...paid.map((i) => envelope("invoice.paid", i)), envelope("deposit.confirmed", deposit), envelope("invoice.paid", refunded)];
    for (const e of envs) assert.equal((await deliver(w.url, e)).status, 200);
    for (const e of envs) await w.processed(e.event_id);
    // the order system reads the feed: what it was served, it may hold
    const served = (await admin(w.url, "GET", "/effects?dispatch=pending")).json.data;
    assert.equal(served.length, 7);
    assert.ok(served.every((e) => e.attempts === 1), "serving is the first attempt");
    const effectsOf = async (inv) => (await admin(w.url, "GET", `/resources/${inv}`)).json.effects.map((e) => e.kind).sort();
    // the refund of one: its fulfilment (served by the feed) is cancelled and revoked
    const refund = envelope("invoice.refunded", refunded);
    assert.equal((await deliver(w.url, refund)).status, 200);
    await w.processed(refund.event_id);
    assert.deepEqual(await effectsOf(refunded), ["fulfilment", "revocation"]);
    // paid and refunded before the feed served it: cancelled, with nothing to revoke
    const unseen = randomId("inv_");
    for (const e of [envelope("invoice.paid", unseen), envelope("invoice.refunded", unseen)]) {
      assert.equal((await deliver(w.url, e)).status, 200);
      await w.processed(e.event_id);
    }
    assert.deepEqual(await effectsOf(unseen), ["fulfilment"]);
    // marked paid by hand without its order_ref: a fulfilment awaiting it
    const byHand = randomId("inv_");
    assert.equal((await admin(w.url, "POST", `/resources/${byHand}/transition`, { to: "paid", reason: "paid by bank transfer" })).json.applied, true);
    // the outbox has waited for 20 minutes
    await w.db.prepare("UPDATE effect SET created_at = strftime('%Y-%m-%dT%H:%M:%fZ','now','-20 minutes')").run();
    await w.scheduled();
    const backlog = (await admin(w.url, "GET", "/alerts")).json.data.find((a) => a.kind === "effects_backlog");
    assert.equal(backlog?.state, "open");
    assert.equal(backlog.count, 8, "5 fulfilments, a credit, the refund's revocation, the fulfilment awaiting its order_ref");

    // the cancelled fulfilment is never acknowledged into delivered
    const cancelled = (await admin(w.url, "GET", "/effects?dispatch=cancelled")).json.data;
    assert.deepEqual(cancelled.map((e) => e.resource_id).sort(), [refunded, unseen].sort());
    const refusedAck = await admin(w.url, "POST", `/effects/${cancelled[0].id}/ack`);
    assert.deepEqual([refusedAck.status, refusedAck.json.error], [409, "cancelled"]);
    assert.equal((await admin(w.url, "POST", "/effects/eff_nosuch/ack")).status, 404);

    // the order system pulls page by page, oldest first, and acknowledges what it took
    const acked = [];
    let awaiting = [];
    let cursor = null;
    for (let page = 0; page < 20; page++) {
      const r = await admin(w.url, "GET", `/effects?dispatch=pending&limit=2${cursor ? `&cursor=${cursor}` : ""}`);
      assert.equal(r.status, 200);
      for (const e of r.json.data) {
        const a = await admin(w.url, "POST", `/effects/${e.id}/ack`);
        if (e.awaiting_order_ref) {
          assert.deepEqual([a.status, a.json.error], [409, "awaiting_order_ref"], "useless without its order_ref");
          awaiting.push(e.id);
        } else {
          assert.deepEqual([a.status, a.json.dispatch, a.json.already], [200, "delivered", false], JSON.stringify(a.json));
          acked.push(e.id);
        }
      }
      cursor = r.json.next_cursor;
      if (!cursor) break;
    }
    assert.equal(cursor, null, "the feed was read to its end");
    assert.equal(acked.length, 7);
    assert.equal(awaiting.length, 1);
    // repeating an acknowledgement is 200 and changes nothing
    const again = await admin(w.url, "POST", `/effects/${acked[0]}/ack`);
    assert.deepEqual([again.status, again.json.already], [200, true]);
    // the order_ref learned: the fulfilment is offered with it, and acknowledged
    assert.equal((await admin(w.url, "POST", `/resources/${byHand}/transition`, { to: "paid", reason: "order_ref from the bank", order_ref: "order_77" })).status, 200);
    const late = (await admin(w.url, "GET", "/effects?dispatch=pending")).json.data;
    assert.deepEqual(late.map((e) => [e.id, e.order_ref, e.awaiting_order_ref]), [[awaiting[0], "order_77", false]]);
    assert.equal((await admin(w.url, "POST", `/effects/${awaiting[0]}/ack`)).status, 200);

    // nothing pending: the backlog alert resolves, and the counts say so
    assert.deepEqual((await admin(w.url, "GET", "/effects?dispatch=pending")).json.data, []);
    const m = (await admin(w.url, "GET", "/metrics")).json;
    assert.deepEqual([m.effects.by_dispatch.pending, m.effects.by_dispatch.delivered, m.effects.by_dispatch.cancelled], [0, 8, 2]);
    await w.scheduled();
    const after = (await admin(w.url, "GET", "/alerts")).json.data.find((a) => a.id === backlog.id);
    assert.equal(after.state, "resolved");
    const rows = (await w.db.prepare("SELECT dispatch, acknowledged_at, delivered_at FROM effect WHERE dispatch = 'delivered'").all()).results;
    assert.ok(rows.length === 8 && rows.every((r) => r.acknowledged_at && r.delivered_at), "each acknowledged, on record");
  } finally {
    await w.close();
    hook.server.close();
  }
});

// ---------------------------------------------------------------- D1 unavailable

test("database_unavailable: when the cron cannot read D1 (a table gone, a binding that answers nothing, or one whose calls hang), it still sends the alert, signed, once per hour's id, and logs it", async () => {
  const hook = await alertHook();
  const vars = { ALERT_WEBHOOK_URL: hook.url, ALERT_WEBHOOK_SECRET: ALERT_SECRET };
  const hourId = () => `alt_dbdown_${new Date().toISOString().slice(0, 13).replace(/[-T]/g, "")}`;
  // 1. D1 answers, but what the cron reads is gone (the outage test's rename)
  const w = await startWorker({ vars });
  try {
    await w.db.prepare("ALTER TABLE webhook_delivery RENAME TO webhook_delivery_away").run();
    await w.scheduled();
    await w.scheduled();
    const sent = hook.of("database_unavailable");
    assert.equal(sent.length, 2, "every run sends it");
    const id = hourId();
    assert.deepEqual(
      sent.map((r) => [r.id, r.key, r.json.id]),
      [
        [id, id, id],
        [id, id, id],
      ],
      "one id per hour: the copies collapse at a receiver that drops copies by id",
    );
    assert.equal(sent[0].json.severity, "critical");
    assert.match(sent[0].json.summary, /could not read D1/);
    assert.deepEqual(Object.keys(sent[0].json).sort(), ["count", "first_seen", "id", "kind", "last_seen", "severity", "summary"]);
    assert.equal(sent[1].json.count, 2);
    assert.equal(sent[1].json.first_seen, sent[0].json.first_seen);
    assert.deepEqual(pythonVerifies(sent), [true, true], "signed as the other alerts, verified by Python's hmac");
    assert.ok(w.logs.some((l) => l.stage === "alert" && l.event_id === id && l.outcome === "database_unavailable" && /no such table/.test(l.detail)), "logged, with why");
    // D1 back: the outage is put on record (resolved), and nothing more is sent for it
    await w.db.prepare("ALTER TABLE webhook_delivery_away RENAME TO webhook_delivery").run();
    await w.scheduled();
    assert.equal(hook.of("database_unavailable").length, 2);
    const recorded = (await admin(w.url, "GET", "/alerts")).json.data.find((a) => a.id === id);
    assert.equal(recorded?.kind, "database_unavailable");
    assert.equal(recorded.state, "resolved");
    assert.equal(recorded.sends, 2);
  } finally {
    await w.close();
  }
  // 2. D1 cannot be read at all: every call rejects, as an unreachable D1's do
  const down = await startWorker({ vars, scriptPath: new URL("./helpers/d1-down.mjs", import.meta.url).pathname });
  try {
    const before = hook.requests.length;
    await down.scheduled();
    const sent = hook.requests.slice(before);
    assert.deepEqual(
      sent.map((r) => [r.json.kind, r.id]),
      [["database_unavailable", hourId()]],
    );
    assert.match(sent[0].json.summary, /Network connection lost/);
    assert.deepEqual(pythonVerifies(sent), [true]);
    // and the receiver answers deliveries 503, so that the sender retries
    assert.equal((await deliver(down.url, envelope("invoice.paid", randomId("inv_")))).status, 503);
  } finally {
    await down.close();
  }
  // 3. D1's calls hang: the cron's probe gives up after 10 s and says so, instead of the run
  // waiting at its first statement for ever
  const silent = createNetServer((socket) => socket.on("data", () => {})); // accepts, never answers
  await new Promise((r) => silent.listen(0, "127.0.0.1", r));
  const hangs = await startWorker({
    vars: { ...vars, TEST_D1_HANGS_URL: `http://127.0.0.1:${silent.address().port}/` },
    scriptPath: new URL("./helpers/d1-down.mjs", import.meta.url).pathname,
  });
  try {
    const before = hook.requests.length;
    await hangs.scheduled();
    const sent = hook.requests.slice(before);
    assert.deepEqual(
      sent.map((r) => [r.json.kind, r.id]),
      [["database_unavailable", hourId()]],
    );
    assert.match(sent[0].json.summary, /did not answer/);
    assert.ok(hangs.logs.some((l) => l.stage === "alert" && l.outcome === "database_unavailable" && /did not answer/.test(l.detail)), "logged, with why");
  } finally {
    await hangs.close();
    silent.close();
    hook.server.close();
  }
});

// ---------------------------------------------------------------- kept counts

test("the kept counts equal a full count after a scripted scenario: outcomes, duplicates, replays, a refund, acks, dismissals", async () => {
  const w = await startWorker();
  try {
    const paid = randomId("inv_");
    const envs = [
      envelope("invoice.paid", paid),
      envelope("invoice.paid", paid), // a second endpoint's copy: stale
      envelope("invoice.created", randomId("inv_")),
      envelope("withdrawal.completed", randomId("wdr_")),
      envelope("invoice.gifted", randomId("inv_")), // unknown type: ignored
      { ...envelope("invoice.paid", randomId("inv_")), livemode: true }, // the other mode: ignored
    ];
    for (const e of envs) assert.equal((await deliver(w.url, e)).status, 200);
    for (const e of envs) await w.processed(e.event_id);
    assert.equal((await deliver(w.url, envs[0])).json.duplicate, true);
    // a refund of the paid invoice (its fulfilment cancelled, and revoked: the order system
    // has read the feed, pull mode), a replay of an applied delivery and a bulk replay of the
    // stale ones, a dead delivery dismissed, acks
    assert.equal((await admin(w.url, "GET", "/effects?dispatch=pending")).status, 200);
    const refund = envelope("invoice.refunded", paid);
    await deliver(w.url, refund);
    await w.processed(refund.event_id);
    assert.equal((await admin(w.url, "POST", `/deliveries/${envs[2].event_id}/replay`)).status, 202);
    await w.processed(envs[2].event_id);
    assert.equal((await admin(w.url, "POST", "/deliveries/replay", { status: "stale" })).status, 200);
    await eventually("replays processed", async () => (await w.db.prepare("SELECT count(*) AS n FROM webhook_delivery WHERE processed_at IS NULL").first()).n === 0);
    const dead = await deadDelivery(w);
    assert.equal((await admin(w.url, "POST", `/deliveries/${dead}/dismiss`, { reason: "handled" })).status, 200);
    for (const e of (await admin(w.url, "GET", "/effects?dispatch=pending")).json.data.slice(0, 2)) {
      assert.equal((await admin(w.url, "POST", `/effects/${e.id}/ack`)).status, 200);
    }
    const kept = await w.db.prepare("SELECT * FROM tally").first();
    const full = await w.db
      .prepare(
        `SELECT (SELECT count(*) FROM webhook_delivery WHERE outcome = 'applied') AS deliveries_applied,
                (SELECT count(*) FROM webhook_delivery WHERE outcome = 'stale') AS deliveries_stale,
                (SELECT count(*) FROM webhook_delivery WHERE outcome = 'ignored') AS deliveries_ignored,
                (SELECT count(*) FROM webhook_delivery WHERE outcome = 'dead' AND dismissed_at IS NOT NULL) AS deliveries_dismissed,
                (SELECT count(*) FROM webhook_delivery WHERE reason = 'livemode_mismatch') AS livemode_mismatches,
                (SELECT count(*) FROM effect WHERE dispatch = 'delivered') AS effects_delivered,
                (SELECT count(*) FROM effect WHERE dispatch = 'cancelled') AS effects_cancelled,
                (SELECT count(*) FROM effect WHERE dispatch = 'dead' AND dismissed_at IS NOT NULL) AS effects_dismissed`,
      )
      .first();
    for (const [k, v] of Object.entries(full)) assert.equal(kept[k], v, `kept ${k}`);
    // the scenario reached every count it claims to
    assert.ok(full.deliveries_applied >= 3 && full.deliveries_stale >= 2 && full.deliveries_ignored === 2, JSON.stringify(full));
    assert.deepEqual([full.livemode_mismatches, full.deliveries_dismissed, full.effects_cancelled, full.effects_delivered], [1, 1, 1, 2]);
    // and the metrics are those counts
    const m = (await admin(w.url, "GET", "/metrics")).json;
    assert.deepEqual(m.deliveries.by_outcome, { applied: full.deliveries_applied, stale: full.deliveries_stale, ignored: full.deliveries_ignored, dead: 0, dismissed: 1 });
    assert.equal(m.deliveries.livemode_mismatches, 1);
    assert.equal(m.effects.by_dispatch.delivered, 2);
    // the history's hour holds the same deliveries, by what each is now
    const h = (await admin(w.url, "GET", "/metrics/history?hours=2")).json;
    assert.equal(h.buckets.length, 2);
    const total = (await w.db.prepare("SELECT count(*) AS n FROM webhook_delivery").first()).n;
    assert.equal(h.buckets.reduce((a, b) => a + b.deliveries.total, 0), total);
    assert.equal(h.buckets.reduce((a, b) => a + b.deliveries.dismissed, 0), 1);
    assert.equal(h.buckets.at(-1).effects.pending, m.effects.by_dispatch.pending, "the current hour ends with the facts now");
    assert.equal((await admin(w.url, "GET", "/metrics/history?hours=0")).json.error, "invalid_hours");
    assert.equal((await admin(w.url, "GET", "/metrics/history?hours=")).json.error, "invalid_hours", "an empty value is no number");
  } finally {
    await w.close();
  }
});

// ---------------------------------------------------------------- further guards (§9)

/** A delivery recorded as ignored for a livemode mismatch, processed now. */
const mismatchRow = (db, env) =>
  db
    .prepare("INSERT INTO webhook_delivery (event_id, resource_id, event_type, body, processed_at, outcome, reason) VALUES (?, ?, ?, ?, strftime('%Y-%m-%dT%H:%M:%fZ','now'), 'ignored', 'livemode_mismatch')")
    .bind(env.event_id, env.data.id, env.type, JSON.stringify(env));

// §9 (amended): an acknowledgement covers what the alert counted when it was given; another
// mismatch reopens livemode_mismatch and it is sent again (an ack never silences it for ever),
// the message's last_seen being the alert's own
test("an acknowledged livemode_mismatch alert reopens on another mismatch and is sent again", async () => {
  const hook = await alertHook();
  const w = await startWorker({ vars: { ALERT_WEBHOOK_URL: hook.url, ALERT_WEBHOOK_SECRET: ALERT_SECRET } });
  try {
    const alertOf = async () => (await admin(w.url, "GET", "/alerts")).json.data.find((a) => a.kind === "livemode_mismatch");
    await mismatchRow(w.db, envelope("invoice.paid", randomId("inv_"))).run();
    await w.scheduled();
    const first = await alertOf();
    assert.equal(first?.state, "open", JSON.stringify(first));
    assert.equal(hook.of("livemode_mismatch").length, 1);
    assert.equal((await admin(w.url, "POST", `/alerts/${first.id}/ack`)).status, 200);
    await w.scheduled();
    assert.equal(hook.of("livemode_mismatch").length, 1, "acknowledged: silent while nothing new comes");
    await mismatchRow(w.db, envelope("invoice.paid", randomId("inv_"))).run();
    await w.scheduled();
    const again = await alertOf();
    assert.deepEqual([again.id, again.state, again.reopens], [first.id, "open", 1], JSON.stringify(again));
    const sent = hook.of("livemode_mismatch");
    assert.equal(sent.length, 2, "a new mismatch: sent again");
    assert.equal(sent[1].json.last_seen, again.last_seen, "the body's last_seen is the alert's");
    assert.ok(sent[1].json.last_seen > sent[1].json.first_seen, JSON.stringify(sent[1].json));
  } finally {
    await w.close();
    hook.server.close();
  }
});

// §9: sent "again at most every 6 hours while it stays open": the reminder tells what the
// alert counts at that run, not what it counted when last sent
test("a 6-hour reminder carries the alert's count as of its run", async () => {
  const hook = await alertHook();
  const w = await startWorker({ vars: { ALERT_WEBHOOK_URL: hook.url, ALERT_WEBHOOK_SECRET: ALERT_SECRET } });
  try {
    await deadRow(w.db, envelope("invoice.paid", randomId("inv_"))).run();
    await w.scheduled();
    const alert = (await admin(w.url, "GET", "/alerts")).json.data.find((a) => a.kind === "delivery_dead");
    assert.equal(hook.of("delivery_dead").length, 1);
    assert.equal(hook.of("delivery_dead")[0].json.count, 1);
    // another gone dead, and the reminder due in the same run
    await deadRow(w.db, envelope("invoice.paid", randomId("inv_"))).run();
    await w.db.prepare("UPDATE alert SET sent_at = strftime('%Y-%m-%dT%H:%M:%fZ','now','-7 hours') WHERE id = ?").bind(alert.id).run();
    await w.scheduled();
    const sent = hook.of("delivery_dead");
    assert.equal(sent.length, 2, "the reminder");
    assert.equal(sent[1].id, `${alert.id}_1`);
    assert.equal(sent[1].json.count, 2, "the count now");
  } finally {
    await w.close();
    hook.server.close();
  }
});

// §9: signature_refusals is a burst of refused signatures (a secret rotated on one side):
// signed bodies refused as not envelopes (400) are not one
test("a burst of 400 refusals raises no signature_refusals alert; a burst of 401s does", async () => {
  const w = await startWorker({ vars: { ALERT_SIGNATURE_REFUSALS: "5" } });
  try {
    for (let i = 0; i < 8; i++) {
      const notEnvelope = { event_id: randomId("evt_"), created: 1764449990, livemode: false, data: { id: randomId("inv_") } };
      assert.equal((await deliver(w.url, notEnvelope)).status, 400);
    }
    await w.scheduled();
    const kinds = async () => (await admin(w.url, "GET", "/alerts")).json.data.map((a) => a.kind);
    assert.ok(!(await kinds()).includes("signature_refusals"), JSON.stringify(await kinds()));
    for (let i = 0; i < 6; i++) assert.equal((await badSignature(w.url, envelope("invoice.paid", randomId("inv_")))).status, 401);
    await w.scheduled();
    assert.ok((await kinds()).includes("signature_refusals"));
  } finally {
    await w.close();
  }
});

// §9: refusals "over the last hour": paymos_requests_refused_last_hour holds only those (as the
// JSON's refused_last_hour does); older ones are counted in paymos_requests_refused_total alone
test("refusals older than an hour are in paymos_requests_refused_total, not in paymos_requests_refused_last_hour", async () => {
  const w = await startWorker();
  try {
    const old = new Date(Date.now() - 2 * 3600_000).toISOString().slice(0, 16);
    await w.db.batch([
      w.db.prepare("INSERT INTO request_count (bucket, name, label, count) VALUES (?, 'refused', '401 signature_mismatch', 7)").bind(old),
      w.db.prepare("INSERT INTO request_count (bucket, name, label, count) VALUES ('total', 'refused', '401 signature_mismatch', 7)"),
    ]);
    const json = (await admin(w.url, "GET", "/metrics")).json;
    assert.equal(json.refused_last_hour["401"], 0, JSON.stringify(json.refused_last_hour));
    const text = await (await fetch(`${w.url}/admin/api/metrics?format=prometheus`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).text();
    const families = parsePrometheus(text);
    assert.equal(value(families, "paymos_requests_refused_total", { status: "401", reason: "signature_mismatch" }), 7);
    const lastHour = families.paymos_requests_refused_last_hour.samples.filter((x) => x.labels.status === "401");
    assert.ok(lastHour.every((x) => x.value === 0), JSON.stringify(lastHour));
  } finally {
    await w.close();
  }
});

// §9: the isolate's counts are written once per COUNTERS_FLUSH_SECONDS, again and again: the
// reply after a write schedules the next one (a later burst is not left in the isolate alone)
test("after one write of the counts, the next refusals schedule the next write", async () => {
  const w = await startWorker({ vars: { COUNTERS_FLUSH_SECONDS: "1" } });
  try {
    const env = envelope("invoice.paid", randomId("inv_"));
    const written = () => signatureRefusalsWritten(w.db);
    for (let i = 0; i < 3; i++) assert.equal((await badSignature(w.url, env)).status, 401);
    await eventually("the first burst written", async () => (await written()) === 3, 10000, 200);
    for (let i = 0; i < 2; i++) assert.equal((await badSignature(w.url, env)).status, 401);
    await eventually("the second burst written", async () => (await written()) === 5, 10000, 200);
  } finally {
    await w.close();
  }
});

// §4: every numeric setting's range, default and warning: a value outside its range (or not a
// number) is not used as given, and the metrics say which value is used instead
test("each numeric setting out of its range is said with the value used instead", async () => {
  const w = await startWorker({
    vars: {
      SWEEP_AFTER_SECONDS: "-1",
      QUEUE_RETRY_BASE_SECONDS: "1000",
      COUNTERS_FLUSH_SECONDS: "26",
      ORDER_SYSTEM_TIMEOUT_MS: "99",
      ALERT_SIGNATURE_REFUSALS: "0",
      DATABASE_SIZE_LIMIT_BYTES: "lots",
    },
  });
  try {
    const warnings = (await admin(w.url, "GET", "/metrics")).json.config.warnings;
    for (const expected of [
      'SWEEP_AFTER_SECONDS is "-1", outside 0 to 1000000000: 300 is used',
      'QUEUE_RETRY_BASE_SECONDS is "1000", outside 0 to 900: 900 is used',
      'COUNTERS_FLUSH_SECONDS is "26", outside 1 to 25: 25 is used',
      'ORDER_SYSTEM_TIMEOUT_MS is "99", outside 100 to 60000: 100 is used',
      'ALERT_SIGNATURE_REFUSALS is "0", outside 1 to 1000000000: ',
      'DATABASE_SIZE_LIMIT_BYTES is "lots", which cannot be read as a number: the default 10000000000 is used',
    ]) {
      assert.ok(warnings.some((x) => x.startsWith(expected)), `${expected} in ${JSON.stringify(warnings)}`);
    }
  } finally {
    await w.close();
  }
});

// §9: accepted signatures are counted under the secret that verified them, so that an operator
// who rotated sees when the old one stops being used: the old secret's delivery is the old one's
test("a delivery signed with the old secret only is counted under the old secret, not the first one", async () => {
  const w = await startWorker();
  try {
    assert.equal((await deliver(w.url, envelope("invoice.paid", randomId("inv_")), { secrets: [SECRET_OLD] })).status, 200);
    assert.equal((await deliver(w.url, envelope("invoice.paid", randomId("inv_")), { secrets: ["whsec_wrong_000000", SECRET_OLD] })).status, 200);
    const verified = Object.fromEntries((await admin(w.url, "GET", "/metrics")).json.signatures.map((x) => [x.secret, x.verified]));
    assert.deepEqual([verified[secretId(SECRET_NEW)], verified[secretId(SECRET_OLD)]], [0, 2], JSON.stringify(verified));
  } finally {
    await w.close();
  }
});
