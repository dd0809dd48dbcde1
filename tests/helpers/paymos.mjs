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
  const text = await res.text();
  let json;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, json, text };
}

export async function admin(url, method, path, body, token = ADMIN_TOKEN) {
  const res = await fetch(`${url}/admin/api${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body ? { "content-type": "application/json" } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  let json;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, json, headers: res.headers };
}
