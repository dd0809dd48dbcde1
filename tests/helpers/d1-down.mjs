// The worker (build/index.js) with a DB binding that answers nothing: every D1 call rejects
// as D1 does when it cannot be reached, or, with TEST_D1_HANGS_URL set, never answers (it
// waits on a request to that address, which a test serves and never answers). For the tests
// that the 5-minute cron still sends `database_unavailable` when it cannot read D1 at all
// (interface §9). The class is named as the runtime's (workers-rs checks a binding's class
// name); nothing else is changed.
import { call } from "./ours.mjs";

let hangsOn;
// D1's own errors carry their cause (the runtime's message); workers-rs reads it from there
const down = () =>
  hangsOn
    ? fetch(hangsOn).then(() => new Promise(() => {}))
    : Promise.reject(new Error("D1_ERROR: Network connection lost.", { cause: new Error("Network connection lost.") }));

class D1PreparedStatement {
  bind() {
    return this;
  }
  all() {
    return down();
  }
  run() {
    return down();
  }
  first() {
    return down();
  }
  raw() {
    return down();
  }
}

class D1Database {
  prepare() {
    return new D1PreparedStatement();
  }
  batch() {
    return down();
  }
  exec() {
    return down();
  }
  dump() {
    return down();
  }
}

function withoutD1(env) {
  hangsOn = env.TEST_D1_HANGS_URL;
  const db = new D1Database();
  return new Proxy(env, { get: (target, prop, receiver) => (prop === "DB" ? db : Reflect.get(target, prop, receiver)) });
}

export default {
  fetch: (request, env, ctx) => call("fetch", request, withoutD1(env), ctx),
  queue: (batch, env, ctx) => call("queue", batch, withoutD1(env), ctx),
  scheduled: (event, env, ctx) => call("scheduled", event, withoutD1(env), ctx),
};
