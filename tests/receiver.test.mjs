// POST /webhooks/paymos per interface §1 and §3.1: verify, dedupe on evt_, enqueue, reply.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { request } from "node:http";
import { startWorker, eventually, SECRET_NEW, SECRET_OLD } from "./helpers/worker.mjs";
import { admin, deliver, deliverChunked, envelope, randomId, sign } from "./helpers/paymos.mjs";

let w;
before(async () => {
  w = await startWorker();
});
after(async () => {
  await w?.close();
});

const rowCount = async (eventId) =>
  (await w.db.prepare("SELECT count(*) AS n FROM webhook_delivery WHERE event_id = ?").bind(eventId).first()).n;
const totalRows = async () => (await w.db.prepare("SELECT count(*) AS n FROM webhook_delivery").first()).n;
/** One `consume` log line is written per queue message the consumer receives. */
const consumeLines = (eventId) => w.logs.filter((l) => l.stage === "consume" && l.event_id === eventId);
const processed = (eventId) => w.processed(eventId);
/** Waits past the queue's batch timeout so that any further message would have arrived. */
const settle = () => new Promise((r) => setTimeout(r, 2500));

test("a new delivery: 200 duplicate:false, one row, one queue message", async () => {
  const env = envelope("invoice.paid", randomId("inv_"));
  const res = await deliver(w.url, env);
  assert.equal(res.status, 200);
  assert.deepEqual(res.json, { received: true, duplicate: false });
  assert.equal(await rowCount(env.event_id), 1);
  await processed(env.event_id);
  await settle();
  assert.equal(consumeLines(env.event_id).length, 1);
});

test("the same delivery again: 200 duplicate:true and no second message", async () => {
  const env = envelope("invoice.paid", randomId("inv_"));
  assert.equal((await deliver(w.url, env)).json.duplicate, false);
  await processed(env.event_id);
  const again = await deliver(w.url, env);
  assert.equal(again.status, 200);
  assert.deepEqual(again.json, { received: true, duplicate: true });
  await settle();
  assert.equal(await rowCount(env.event_id), 1);
  assert.equal(consumeLines(env.event_id).length, 1, "a duplicate is not enqueued");
});

test("50 concurrent identical deliveries: exactly one row, one message, one duplicate:false", async () => {
  const env = envelope("invoice.paid", randomId("inv_"));
  const replies = await Promise.all(Array.from({ length: 50 }, () => deliver(w.url, env)));
  assert.ok(replies.every((r) => r.status === 200), JSON.stringify(replies.map((r) => r.status)));
  assert.equal(replies.filter((r) => r.json.duplicate === false).length, 1);
  assert.equal(await rowCount(env.event_id), 1);
  await processed(env.event_id);
  await settle();
  assert.equal(consumeLines(env.event_id).length, 1);
});

test("rotation: a header with two v1 values verifies with the match in either position", async () => {
  const first = envelope("invoice.paid", randomId("inv_"));
  const r1 = await deliver(w.url, first, { secrets: [SECRET_NEW, "whsec_unknown_aaaa"] });
  assert.equal(r1.status, 200, r1.text);
  const second = envelope("invoice.paid", randomId("inv_"));
  const r2 = await deliver(w.url, second, { secrets: ["whsec_unknown_aaaa", SECRET_OLD] });
  assert.equal(r2.status, 200, r2.text);
  // the contract's own example: new and old secret together
  const both = envelope("invoice.paid", randomId("inv_"));
  assert.equal((await deliver(w.url, both, { secrets: [SECRET_NEW, SECRET_OLD] })).status, 200);
});

test("the contract's test vector is accepted byte for byte when its timestamp is in tolerance", async () => {
  // same body as docs/interface.md; v1 recomputed for a current t with node's HMAC (independent of the Rust signer)
  const body =
    '{"event_id":"evt_9Kq2xT4mLp","type":"invoice.paid","created":1764449990,"livemode":false,"data":{"id":"inv_7Hc3pQ","object":"invoice","status":"paid","amount":"49.00","currency":"USDT","order_ref":"order_1042"}}';
  assert.equal(sign(SECRET_NEW, 1764450000, body), "80ba6d2ac4725a807b1570f1407b0c5efde893bb29315d9861967a9c5afe0c86");
  const res = await deliver(w.url, null, { rawBody: body, id: "evt_9Kq2xT4mLp", secrets: [SECRET_NEW, SECRET_OLD] });
  assert.equal(res.status, 200, res.text);
});

const rejected = [
  ["wrong secret", (env) => ({ secrets: ["whsec_wrong_000000"] }), "signature_mismatch"],
  ["tampered body", (env) => ({ rawBody: JSON.stringify(env).replace("49.00", "0.01"), tamper: true }), "signature_mismatch"],
  ["stale timestamp (301 s old)", () => ({ t: Math.floor(Date.now() / 1000) - 301 }), "timestamp_out_of_tolerance"],
  ["future timestamp (301 s ahead)", () => ({ t: Math.floor(Date.now() / 1000) + 301 }), "timestamp_out_of_tolerance"],
  ["missing signature header", () => ({ headers: { "x-webhook-signature": undefined } }), "signature_missing"],
  ["garbled signature header", () => ({ headers: { "x-webhook-signature": "garbage" } }), "signature_malformed"],
  ["header with no v1", () => ({ headers: { "x-webhook-signature": `t=${Math.floor(Date.now() / 1000)}` } }), "signature_malformed"],
  ["two t elements", () => ({ headers: { "x-webhook-signature": "t=1,t=2,v1=" + "a".repeat(64) } }), "signature_malformed"],
];

for (const [name, opts, code] of rejected) {
  test(`401 and no row: ${name}`, async () => {
    const env = envelope("invoice.paid", randomId("inv_"));
    const o = opts(env);
    let res;
    if (o.tamper) {
      // signed over the original bytes, sent with different ones
      const t = Math.floor(Date.now() / 1000);
      const original = JSON.stringify(env);
      res = await fetch(`${w.url}/webhooks/paymos`, {
        method: "POST",
        headers: { "x-webhook-id": env.event_id, "x-webhook-signature": `t=${t},v1=${sign(SECRET_NEW, t, original)}` },
        body: o.rawBody,
      });
      res = { status: res.status, json: await res.json() };
    } else if (o.headers && "x-webhook-signature" in o.headers) {
      const headers = { "content-type": "application/json", "x-webhook-id": env.event_id };
      if (o.headers["x-webhook-signature"] !== undefined) headers["x-webhook-signature"] = o.headers["x-webhook-signature"];
      const r = await fetch(`${w.url}/webhooks/paymos`, { method: "POST", headers, body: JSON.stringify(env) });
      res = { status: r.status, json: await r.json() };
    } else {
      res = await deliver(w.url, env, o);
    }
    assert.equal(res.status, 401);
    assert.deepEqual(res.json, { error: code });
    assert.equal(await rowCount(env.event_id), 0);
  });
}

test("large deliveries (8 KiB and up, MACs from the runtime's WebCrypto) get the same decisions as small ones", async () => {
  // node:crypto signs (tests/helpers/paymos.mjs), independently of both of the Worker's HMACs
  const sized = (bytes) => {
    const env = envelope("invoice.paid", randomId("inv_"), { data: { note: "" } });
    env.data.note = "n".repeat(bytes - JSON.stringify(env).length);
    assert.equal(JSON.stringify(env).length, bytes);
    return env;
  };
  const now = () => Math.floor(Date.now() / 1000);
  // 8 KiB - 1 is the wasm's; 8 KiB and more WebCrypto's; 256 KiB the limit
  for (const bytes of [8 * 1024 - 1, 8 * 1024, 64 * 1024, 256 * 1024]) {
    const accepted = [
      ["the new secret", {}],
      ["the old secret after a wrong one (rotation, second position)", { secrets: ["whsec_wrong_000000", SECRET_OLD] }],
      ["both secrets", { secrets: [SECRET_NEW, SECRET_OLD] }],
      ["t written with a leading zero (the MAC covers the text)", { t: `0${now()}` }],
    ];
    for (const [name, opts] of accepted) {
      const env = sized(bytes);
      const res = await deliver(w.url, env, opts);
      assert.equal(res.status, 200, `${bytes} B, ${name}: ${res.text}`);
      assert.deepEqual(res.json, { received: true, duplicate: false });
      assert.equal(await rowCount(env.event_id), 1);
      const again = await deliver(w.url, env, opts);
      assert.deepEqual(again.json, { received: true, duplicate: true }, `${bytes} B, ${name}, again`);
    }
    const refused = [
      ["a wrong secret", (env) => deliver(w.url, env, { secrets: ["whsec_wrong_000000"] }), "signature_mismatch"],
      ["a stale timestamp", (env) => deliver(w.url, env, { t: now() - 301 }), "timestamp_out_of_tolerance"],
      [
        "one byte changed after signing",
        async (env) => {
          const t = now();
          const original = JSON.stringify(env);
          const sent = original.slice(0, -200) + "m" + original.slice(-199);
          assert.equal(sent.length, original.length);
          assert.notEqual(sent, original);
          const r = await fetch(`${w.url}/webhooks/paymos`, {
            method: "POST",
            headers: { "x-webhook-id": env.event_id, "x-webhook-signature": `t=${t},v1=${sign(SECRET_NEW, t, original)}` },
            body: sent,
          });
          return { status: r.status, json: await r.json() };
        },
        "signature_mismatch",
      ],
    ];
    for (const [name, send, code] of refused) {
      const env = sized(bytes);
      const res = await send(env);
      assert.equal(res.status, 401, `${bytes} B, ${name}`);
      assert.deepEqual(res.json, { error: code }, `${bytes} B, ${name}`);
      assert.equal(await rowCount(env.event_id), 0);
    }
  }
  // WebCrypto answered every time: a failure would have been logged, and the wasm used instead
  assert.deepEqual(w.logs.filter((l) => l.outcome === "webcrypto_error"), []);
});

test("401 replies never echo the secret, the signature or the expected value", async () => {
  const env = envelope("invoice.paid", randomId("inv_"));
  const t = Math.floor(Date.now() / 1000);
  const expected = sign(SECRET_NEW, t, JSON.stringify(env));
  const sent = "0".repeat(64);
  const r = await fetch(`${w.url}/webhooks/paymos`, {
    method: "POST",
    headers: { "x-webhook-id": env.event_id, "x-webhook-signature": `t=${t},v1=${sent}` },
    body: JSON.stringify(env),
  });
  const text = await r.text();
  assert.equal(r.status, 401);
  for (const needle of [expected, sent, SECRET_NEW, SECRET_OLD, "whsec_"]) assert.ok(!text.includes(needle), needle);
});

const invalid = [
  ["non-JSON body", () => ({ rawBody: "not json at all", id: randomId("evt_") }), "invalid_json"],
  [
    "missing event_id",
    () => {
      const e = envelope("invoice.paid", randomId("inv_"));
      const id = e.event_id;
      delete e.event_id;
      return { rawBody: JSON.stringify(e), id };
    },
    "missing_field",
  ],
  ["header and body ids differ", () => ({ env: envelope("invoice.paid", randomId("inv_")), id: randomId("evt_") }), "id_mismatch"],
  ["unknown resource prefix", () => ({ env: envelope("invoice.paid", randomId("cus_")) }), "invalid_resource_id"],
  ["malformed event id", () => ({ env: envelope("invoice.paid", randomId("inv_"), { eventId: "evt_has-dash" }) }), "invalid_event_id"],
  ["created is a string", () => ({ env: { ...envelope("invoice.paid", randomId("inv_")), created: "yesterday" } }), "invalid_field"],
  ["missing X-Webhook-Id", () => ({ env: envelope("invoice.paid", randomId("inv_")), id: "" }), "webhook_id_missing"],
  ["invoice event about a withdrawal", () => ({ env: envelope("invoice.paid", randomId("wdr_")) }), "resource_mismatch"],
];

for (const [name, make, code] of invalid) {
  test(`400 and no row: valid signature but ${name}`, async () => {
    const before = await totalRows();
    const { env, rawBody, id } = make();
    const headers = id === "" ? { "x-webhook-id": undefined } : {};
    let res;
    if (id === "") {
      const body = JSON.stringify(env);
      const t = Math.floor(Date.now() / 1000);
      const r = await fetch(`${w.url}/webhooks/paymos`, {
        method: "POST",
        headers: { "x-webhook-signature": `t=${t},v1=${sign(SECRET_NEW, t, body)}` },
        body,
      });
      res = { status: r.status, json: await r.json() };
    } else {
      res = await deliver(w.url, env ?? null, { rawBody, id, headers });
    }
    assert.equal(res.status, 400, JSON.stringify(res.json));
    // exactly the contract's body (§1 replies): the code and nothing else
    assert.deepEqual(res.json, { error: code });
    assert.equal(await totalRows(), before);
  });
}

test("a body over 256 KiB: 413 payload_too_large, no row", async () => {
  const env = envelope("invoice.paid", randomId("inv_"), { data: { note: "x".repeat(256 * 1024) } });
  const before = await totalRows();
  const res = await deliver(w.url, env);
  assert.equal(res.status, 413);
  assert.deepEqual(res.json, { error: "payload_too_large" });
  assert.equal(await totalRows(), before);
});

test("a body just under the limit is accepted", async () => {
  const env = envelope("invoice.paid", randomId("inv_"), { data: { note: "" } });
  const overhead = JSON.stringify(env).length;
  env.data.note = "y".repeat(256 * 1024 - overhead);
  assert.equal(JSON.stringify(env).length, 256 * 1024);
  const res = await deliver(w.url, env);
  assert.equal(res.status, 200, res.text);
});

test("other methods on the endpoint: 405 with Allow: POST", async () => {
  for (const method of ["GET", "PUT", "DELETE", "PATCH"]) {
    const res = await fetch(`${w.url}/webhooks/paymos`, { method });
    assert.equal(res.status, 405, method);
    assert.equal(res.headers.get("allow"), "POST");
  }
});

test("an unknown event type is stored, acknowledged (200) and recorded as ignored", async () => {
  const env = envelope("invoice.disputed_v2", randomId("inv_"));
  const res = await deliver(w.url, env);
  assert.equal(res.status, 200);
  assert.equal(res.json.duplicate, false);
  const row = await processed(env.event_id);
  assert.equal(row.outcome, "ignored");
  const other = envelope("payout.sent", randomId("wdr_"));
  assert.equal((await deliver(w.url, other)).status, 200);
  assert.equal((await processed(other.event_id)).outcome, "ignored");
  // other shapes a provider may come to send: unknown types all the same, never refused
  for (const type of ["invoice.paid.v2", "customer.subscription.created", "Invoice.Paid", "invoice.payment-failed"]) {
    const odd = envelope(type, randomId("inv_"));
    assert.equal((await deliver(w.url, odd)).status, 200, type);
    const stored = await processed(odd.event_id);
    assert.deepEqual([stored.outcome, stored.reason, stored.event_type], ["ignored", "unknown_event_type", type]);
  }
  // an unknown action of a known category, about another category's resource: still only
  // unknown (a known type there is refused, resource_mismatch, above)
  for (const [type, prefix] of [["invoice.bogus", "wdr_"], ["withdrawal.refunded", "inv_"], ["deposit.paid", "inv_"]]) {
    const odd = envelope(type, randomId(prefix));
    const res = await deliver(w.url, odd);
    assert.deepEqual([res.status, res.json], [200, { received: true, duplicate: false }], type);
    const stored = await processed(odd.event_id);
    assert.deepEqual([stored.outcome, stored.reason, stored.resource_id], ["ignored", "unknown_event_type", odd.data.id]);
  }
  const resource = (await admin(w.url, "GET", `/resources/${env.data.id}`)).status;
  assert.equal(resource, 404, "an unknown type changes no resource");
});

test("unknown fields in the envelope are ignored", async () => {
  const env = { ...envelope("invoice.paid", randomId("inv_")), api_version: "2026-01-01", extra: { nested: [1, 2] } };
  assert.equal((await deliver(w.url, env)).status, 200);
});

test("one structured log line per delivery, never the secret, signature or body", async () => {
  const env = envelope("invoice.paid", randomId("inv_"), { data: { marker: "BODY_MARKER_7f3a" } });
  const t = Math.floor(Date.now() / 1000);
  const v1 = sign(SECRET_NEW, t, JSON.stringify(env));
  await deliver(w.url, env, { t, headers: { "x-webhook-attempt": "1" } });
  await deliver(w.url, env, { t, headers: { "x-webhook-attempt": "2" } });
  const lines = await eventually("two receive lines", () => {
    const l = w.logs.filter((x) => x.stage === "receive" && x.event_id === env.event_id);
    return l.length === 2 ? l : null;
  });
  assert.deepEqual(
    lines.map((l) => [l.outcome, l.attempt]),
    [
      ["accepted", 1],
      ["duplicate", 2],
    ],
  );
  for (const l of lines) {
    assert.equal(l.event_type, "invoice.paid");
    assert.equal(l.resource_id, env.data.id);
    assert.equal(typeof l.duration_ms, "number");
  }
  const all = JSON.stringify(w.logs);
  for (const needle of [SECRET_NEW, SECRET_OLD, v1, "BODY_MARKER_7f3a"]) assert.ok(!all.includes(needle), needle);
});

test("a refused delivery's reply is only its code; its log line says which field", async () => {
  const env = envelope("invoice.paid", randomId("inv_"));
  delete env.data.id;
  const res = await deliver(w.url, env);
  assert.equal(res.status, 400);
  assert.deepEqual(res.json, { error: "missing_field" });
  const line = await eventually("the refusal's log line", () =>
    w.logs.find((x) => x.stage === "receive" && x.event_id === env.event_id && x.status === 400),
  );
  assert.equal(line.outcome, "missing_field");
  assert.equal(line.detail, "missing field `data.id`");
});

test("the database unavailable: 503 so that the sender retries", async () => {
  const broken = await startWorker();
  try {
    await broken.db.exec("DROP TABLE webhook_delivery");
    const res = await deliver(broken.url, envelope("invoice.paid", randomId("inv_")));
    assert.equal(res.status, 503);
    assert.equal(res.json.error, "database_unavailable");
  } finally {
    await broken.close();
  }
});

// §9: refusals are 401/400/413 only, so the 503 is not counted as one; §4: the metrics say why
// every delivery fails
test("no secret configured: 503 (a configuration fault the sender should retry past), nothing stored, not a refusal, said", async () => {
  const unconfigured = await startWorker({ vars: { PAYMOS_WEBHOOK_SECRETS: " " } });
  try {
    const env = envelope("invoice.paid", randomId("inv_"));
    const res = await deliver(unconfigured.url, env);
    assert.equal(res.status, 503);
    assert.equal(res.json.error, "secrets_not_configured");
    const n = (await unconfigured.db.prepare("SELECT count(*) AS n FROM webhook_delivery").first()).n;
    assert.equal(n, 0);
    const metrics = (await admin(unconfigured.url, "GET", "/metrics")).json;
    assert.equal(metrics.refused_last_hour.total, 0, JSON.stringify(metrics.refused_last_hour));
    assert.ok(
      metrics.config.warnings.includes("PAYMOS_WEBHOOK_SECRETS is not set: every delivery is refused (503)"),
      JSON.stringify(metrics.config.warnings),
    );
  } finally {
    await unconfigured.close();
  }
});

test("the queue unavailable after the insert: still 200 (the row is durable), the failure logged", async () => {
  const noQueue = await startWorker({ withoutQueueProducer: true });
  try {
    const env = envelope("invoice.paid", randomId("inv_"));
    const res = await deliver(noQueue.url, env);
    assert.equal(res.status, 200);
    assert.deepEqual(res.json, { received: true, duplicate: false });
    const row = await noQueue.db.prepare("SELECT processed_at FROM webhook_delivery WHERE event_id = ?").bind(env.event_id).first();
    assert.ok(row, "the row is committed");
    assert.equal(row.processed_at, null);
    const line = await eventually("the receive log line", () =>
      noQueue.logs.find((l) => l.stage === "receive" && l.event_id === env.event_id),
    );
    assert.equal(line.outcome, "accepted");
    assert.equal(typeof line.enqueue_error, "string");
  } finally {
    await noQueue.close();
  }
});


test("a chunked body with no Content-Length: over the limit 413 (read no further), under it 200", async () => {
  const big = envelope("invoice.paid", randomId("inv_"), { data: { note: "z".repeat(300 * 1024) } });
  const before = await totalRows();
  const over = await deliverChunked(w.url, big);
  assert.equal(over.status, 413);
  assert.equal(over.json.error, "payload_too_large");
  assert.equal(await totalRows(), before);
  const small = envelope("invoice.paid", randomId("inv_"), { data: { note: "z".repeat(100 * 1024) } });
  const ok = await deliverChunked(w.url, small);
  assert.equal(ok.status, 200);
  assert.equal(await rowCount(small.event_id), 1);
});

test("PAYMOS_MAX_BODY_BYTES above 1 MiB (a D1 row holds 2 MB) is not used: the default 256 KiB is, and it is said", async () => {
  const wide = await startWorker({ vars: { PAYMOS_MAX_BODY_BYTES: String(2 * 1024 * 1024) } });
  try {
    const big = envelope("invoice.paid", randomId("inv_"), { data: { note: "z".repeat(300 * 1024) } });
    const res = await deliver(wide.url, big);
    assert.equal(res.status, 413);
    assert.equal(res.json.error, "payload_too_large");
    // §4: said in a log line by the receive path itself, before any cron runs
    await eventually("the receive path's config line", () =>
      wide.logs.some((l) => l.stage === "config" && l.outcome === "invalid_setting" && /^PAYMOS_MAX_BODY_BYTES is "2097152"/.test(l.detail)),
    );
    const metrics = await fetch(`${wide.url}/admin/api/metrics`, { headers: { authorization: "Bearer test-admin-token-0123456789" } }).then((r) => r.json());
    assert.ok(
      metrics.config.warnings.includes('PAYMOS_MAX_BODY_BYTES is "2097152", outside 1 to 1048576: 262144 is used'),
      JSON.stringify(metrics.config.warnings),
    );
    // 1 MiB itself is taken as given
    const oneMiB = await startWorker({ vars: { PAYMOS_MAX_BODY_BYTES: String(1024 * 1024) } });
    try {
      assert.equal((await deliver(oneMiB.url, big)).status, 200);
    } finally {
      await oneMiB.close();
    }
  } finally {
    await wide.close();
  }
});

test("X-Webhook-Id with spaces or tabs around it, as a raw HTTP client may send it: the id within is read", async () => {
  // fetch strips them before sending; node:http sends the value as written, as a provider's
  // HTTP stack might (RFC 9110 §5.5: whitespace around a field value is not part of it)
  const env = envelope("invoice.created", randomId("inv_"));
  const body = JSON.stringify(env);
  const t = Math.floor(Date.now() / 1000);
  const u = new URL(`${w.url}/webhooks/paymos`);
  const reply = await new Promise((resolve, reject) => {
    const req = request(
      { host: u.hostname, port: u.port, path: u.pathname, method: "POST", agent: false,
        headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body), "x-webhook-id": ` \t${env.event_id}  `, "x-webhook-signature": `t=${t},v1=${sign(SECRET_NEW, t, Buffer.from(body))}` } },
      (res) => {
        let text = "";
        res.on("data", (c) => (text += c));
        res.on("end", () => resolve({ status: res.statusCode, json: JSON.parse(text) }));
      },
    );
    req.on("error", reject);
    req.end(body);
  });
  assert.deepEqual([reply.status, reply.json], [200, { received: true, duplicate: false }]);
  const stored = await w.db.prepare("SELECT body FROM delivery_body WHERE event_id = ?").bind(env.event_id).first();
  assert.equal(stored?.body, body, "stored under the id within, the bytes as sent");
  await eventually("its receive line", () => w.logs.some((l) => l.stage === "receive" && l.event_id === env.event_id && l.outcome === "accepted"));
});

test("refusals that need no body (413, 405, 404, 401, a bad admin id) leave the sender's keep-alive connection usable", async () => {
  // workerd drops a keep-alive connection whose request body a reply left unread, and the
  // client's next request on it fails (ECONNRESET): before the drain, 3-8 % of them did.
  const big = "x".repeat(300 * 1024);
  const token = { authorization: "Bearer test-admin-token-0123456789" };
  const refusals = [
    [413, () => fetch(`${w.url}/webhooks/paymos`, { method: "POST", body: big })],
    [413, async () => {
      const env = envelope("invoice.paid", randomId("inv_"), { data: { note: "z".repeat(300 * 1024) } });
      return { status: (await deliverChunked(w.url, env)).status, text: async () => "" };
    }],
    [405, () => fetch(`${w.url}/webhooks/paymos`, { method: "PUT", body: "{}" })],
    [404, () => fetch(`${w.url}/nowhere`, { method: "POST", body: "{}" })],
    [401, () => fetch(`${w.url}/admin/api/resources/inv_abc/transition`, { method: "POST", body: JSON.stringify({ to: "paid", reason: "r".repeat(4000) }) })],
    [400, () => fetch(`${w.url}/admin/api/resources/cus_1/transition`, { method: "POST", headers: token, body: JSON.stringify({ to: "paid", reason: "x" }) })],
  ];
  const failures = [];
  for (let round = 0; round < 40; round++) {
    for (const [status, refuse] of refusals) {
      const res = await refuse();
      assert.equal(res.status, status);
      await res.text();
      try {
        const next = await fetch(`${w.url}/healthz`);
        assert.equal(next.status, 200);
        await next.text();
      } catch (e) {
        failures.push(`after a ${status}: ${e.cause?.code ?? e.message}`);
      }
    }
  }
  assert.deepEqual(failures, []);
});

// §1 replies, §4: PAYMOS_MAX_BODY_BYTES under 8 KiB, so that the limit is kept by the JS
// driver's path (a body with a Content-Length) and by the general path (a chunked body): a body
// of exactly the limit is taken, one byte more is 413
test("a limit under 8 KiB: exactly PAYMOS_MAX_BODY_BYTES is accepted by either path, one byte more is 413", async () => {
  const LIMIT = 2000;
  const small = await startWorker({ vars: { PAYMOS_MAX_BODY_BYTES: String(LIMIT) } });
  try {
    const sized = (bytes) => {
      const env = envelope("invoice.paid", randomId("inv_"), { data: { note: "" } });
      env.data.note = "s".repeat(bytes - JSON.stringify(env).length);
      return env;
    };
    const chunked = (env) => deliverChunked(small.url, env);
    for (const [way, send] of [["content-length", (env) => deliver(small.url, env)], ["chunked", chunked]]) {
      const at = await send(sized(LIMIT));
      assert.deepEqual([at.status, at.json], [200, { received: true, duplicate: false }], `${way}: exactly the limit`);
      const over = await send(sized(LIMIT + 1));
      assert.deepEqual([over.status, over.json], [413, { error: "payload_too_large" }], `${way}: one byte over`);
    }
  } finally {
    await small.close();
  }
});

// §1 (the header id is unsigned) and the receive log line: an X-Webhook-Id that is not an id is
// never written into the line, so a forged header cannot inject fields or break the JSON
test("a refused delivery whose X-Webhook-Id is not an id: its log line names no id and injects nothing", async () => {
  const env = envelope("invoice.paid", randomId("inv_"));
  const forged = `${env.event_id}","outcome":"accepted`;
  const res = await deliver(w.url, env, { id: forged, secrets: ["whsec_wrong_000000"], headers: { "x-webhook-attempt": "7301" } });
  assert.equal(res.status, 401);
  const line = await eventually("the refusal's line", () => w.logs.find((l) => l.stage === "receive" && l.attempt === 7301));
  assert.deepEqual([line.event_id, line.outcome, line.status], [null, "signature_mismatch", 401]);
});
