// A client-side Paymos sender for the tests: signs with node:crypto, independently of the
// Rust signer under test.
import { createHmac, randomBytes } from "node:crypto";
import { SECRET_NEW, ADMIN_TOKEN } from "./worker.mjs";

export function sign(secret, t, body) {
  return createHmac("sha256", Buffer.from(secret, "utf8")).update(`${t}.`).update(body).digest("hex");
}

export function randomId(prefix) {
  return prefix + randomBytes(9).toString("hex");
}

export function envelope(type, resourceId, { eventId = randomId("evt_"), data = {}, created } = {}) {
  const object = type.split(".")[0];
  return {
    event_id: eventId,
    type,
    created: created ?? Math.floor(Date.now() / 1000),
    livemode: false,
    data: { id: resourceId, object, ...(object === "invoice" ? { amount: "49.00", currency: "USDT", order_ref: "order_" + resourceId.slice(4) } : {}), ...data },
  };
}

/** The reply's text and, when it is JSON, its value. */
async function readReply(res) {
  const text = await res.text();
  try {
    return { text, json: JSON.parse(text) };
  } catch {
    return { text, json: undefined };
  }
}

/** POSTs a delivery. `secrets` sign it (several = rotation header); `t` defaults to now. */
export async function deliver(url, env, { secrets = [SECRET_NEW], t, headers = {}, rawBody, id } = {}) {
  const body = rawBody ?? JSON.stringify(env);
  const ts = t ?? Math.floor(Date.now() / 1000);
  const sig = [`t=${ts}`, ...secrets.map((s) => `v1=${sign(s, ts, Buffer.from(body))}`)].join(",");
  const res = await fetch(`${url}/webhooks/paymos`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "x-webhook-id": id ?? env?.event_id ?? "",
      "x-webhook-signature": sig,
      ...headers,
    },
    body,
  });
  const { text, json } = await readReply(res);
  return { status: res.status, json, text };
}

/**
 * POSTs a delivery with no Content-Length (Transfer-Encoding: chunked), signed with
 * SECRET_NEW: `body` (the envelope's JSON unless given) in chunks of `chunkSize` bytes.
 */
export async function deliverChunked(url, env, { body = JSON.stringify(env), chunkSize = 16 * 1024, headers = {} } = {}) {
  const t = Math.floor(Date.now() / 1000);
  const bytes = Buffer.from(body);
  const stream = new ReadableStream({
    start(c) {
      for (let i = 0; i < bytes.length; i += chunkSize) c.enqueue(bytes.subarray(i, i + chunkSize));
      c.close();
    },
  });
  const res = await fetch(`${url}/webhooks/paymos`, {
    method: "POST",
    headers: { "x-webhook-id": env.event_id, "x-webhook-signature": `t=${t},v1=${sign(SECRET_NEW, t, bytes)}`, ...headers },
    body: stream,
    duplex: "half",
  });
  return { status: res.status, json: await res.json() };
}

export async function admin(url, method, path, body, token = ADMIN_TOKEN) {
  const res = await fetch(`${url}/admin/api${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body ? { "content-type": "application/json" } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const { text, json } = await readReply(res);
  return { status: res.status, json, headers: res.headers };
}

/** The provider's ladder (interface §2): offsets of the 11 attempts, in seconds. */
export const LADDER_OFFSETS = [0, 60, 180, 420, 900, 1800, 3600, 7200, 14400, 28800, 57600];

/**
 * Delivers like the provider does, on a clock compressed `scale` times: re-signed at each
 * attempt, same id and bytes, per-attempt timeout 10 s / scale (at least 1 s). Resolves with
 * the number of attempts it took, or throws after the 11th failure.
 */
export async function deliverOnLadder(url, env, { scale = 600, secrets } = {}) {
  const started = Date.now();
  const timeout = Math.max(1000, 10000 / scale);
  let last;
  for (let i = 0; i < LADDER_OFFSETS.length; i++) {
    const due = started + (LADDER_OFFSETS[i] * 1000) / scale;
    const wait = due - Date.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    try {
      const res = await Promise.race([
        deliver(url, env, { secrets, headers: { "x-webhook-attempt": String(i + 1) } }),
        new Promise((_, reject) => setTimeout(() => reject(new Error("timeout")), timeout)),
      ]);
      if (res.status >= 200 && res.status < 300) return { attempts: i + 1, reply: res.json };
      last = `status ${res.status}`;
    } catch (e) {
      last = e.message;
    }
  }
  throw new Error(`${env.event_id} failed after 11 attempts (last: ${last})`);
}

/** Runs `fn` over `items` with at most `limit` in flight. */
export async function pool(items, limit, fn) {
  const results = new Array(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) {
        const i = next++;
        results[i] = await fn(items[i], i);
      }
    }),
  );
  return results;
}

export function shuffle(a) {
  for (let i = a.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [a[i], a[j]] = [a[j], a[i]];
  }
  return a;
}
