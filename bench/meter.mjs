// The cost meter for `npm run bench`: wraps a worker's D1 and queue bindings from the outside
// (the worker's code is not changed) and adds up, per invocation, what it asked of them:
// D1 calls (a batch is one call), statements, rows read and written and the SQL time as D1
// itself reports them in each result's `meta`, messages sent per queue, and R2 operations. Used only by the
// cost scenario, never while throughput is timed. `GET /__bench/meter` answers the totals by
// kind of invocation; `/__bench/meter/reset` zeroes them.
//
// `first()` is answered from `all()` (D1's own `first()` drops `meta`): the same query, the
// same rows, the first one returned. The wrapper classes carry the binding class names that
// workers-rs checks (`D1Database`, `WorkerQueue`).

let records = [];

function fresh(kind, detail = {}) {
  const r = { kind, ...detail, d1_calls: 0, d1_batches: 0, statements: 0, rows_read: 0, rows_written: 0, sql_ms: 0, sent: {}, r2_calls: 0, by_statement: {} };
  records.push(r);
  return r;
}

function account(rec, names, sqlText, meta, wallMs = 0) {
  const name = names.get(sqlText) ?? "(other)";
  const s = (rec.by_statement[name] ??= { runs: 0, rows_read: 0, rows_written: 0, sql_ms: 0, wall_ms: 0 });
  s.runs += 1;
  // the call's time as the worker sees it (from before the call to its answer; a batch's
  // time is its first statement's)
  s.wall_ms += wallMs;
  s.rows_read += meta?.rows_read ?? 0;
  s.rows_written += meta?.rows_written ?? 0;
  s.sql_ms += meta?.duration ?? 0;
  rec.statements += 1;
  rec.rows_read += meta?.rows_read ?? 0;
  rec.rows_written += meta?.rows_written ?? 0;
  rec.sql_ms += meta?.duration ?? 0;
}

class D1PreparedStatement {
  constructor(inner, sqlText, rec, names) {
    this.inner = inner;
    this.sqlText = sqlText;
    this.rec = rec;
    this.names = names;
  }
  bind(...args) {
    return new D1PreparedStatement(this.inner.bind(...args), this.sqlText, this.rec, this.names);
  }
  async all() {
    const t0 = Date.now();
    const r = await this.inner.all();
    this.rec.d1_calls += 1;
    account(this.rec, this.names, this.sqlText, r.meta, Date.now() - t0);
    return r;
  }
  async run() {
    const t0 = Date.now();
    const r = await this.inner.run();
    this.rec.d1_calls += 1;
    account(this.rec, this.names, this.sqlText, r.meta, Date.now() - t0);
    return r;
  }
  async first(column) {
    const r = await this.all();
    const row = r.results?.[0];
    if (row === undefined) return null;
    if (column === undefined) return row;
    if (!(column in row)) throw new Error(`D1_COLUMN_NOTFOUND: Column not found (${column})`);
    return row[column];
  }
  async raw(options) {
    const r = await this.all();
    const rows = (r.results ?? []).map((row) => Object.values(row));
    return options?.columnNames ? [Object.keys(r.results?.[0] ?? {}), ...rows] : rows;
  }
}

class D1Database {
  constructor(inner, rec, names) {
    this.inner = inner;
    this.rec = rec;
    this.names = names;
  }
  prepare(sqlText) {
    return new D1PreparedStatement(this.inner.prepare(sqlText), sqlText, this.rec, this.names);
  }
  async batch(statements) {
    const t0 = Date.now();
    const results = await this.inner.batch(statements.map((s) => s.inner));
    const wall = Date.now() - t0;
    this.rec.d1_calls += 1;
    this.rec.d1_batches += 1;
    results.forEach((r, i) => account(this.rec, this.names, statements[i].sqlText, r.meta, i === 0 ? wall : 0));
    return results;
  }
  async exec(sqlText) {
    const r = await this.inner.exec(sqlText);
    this.rec.d1_calls += 1;
    account(this.rec, this.names, sqlText, { duration: r.duration });
    return r;
  }
}

class WorkerQueue {
  constructor(inner, name, rec) {
    this.inner = inner;
    this.name = name;
    this.rec = rec;
  }
  async send(body, options) {
    await this.inner.send(body, options);
    const s = (this.rec.sent[this.name] ??= { calls: 0, messages: 0 });
    s.calls += 1;
    s.messages += 1;
  }
  async sendBatch(messages, options) {
    await this.inner.sendBatch(messages, options);
    const s = (this.rec.sent[this.name] ??= { calls: 0, messages: 0 });
    s.calls += 1;
    s.messages += messages.length;
  }
}

// R2 operations, counted (each is a subrequest)
class R2Bucket {
  constructor(inner, rec) {
    this.inner = inner;
    this.rec = rec;
  }
}
for (const op of ["put", "get", "head", "list", "delete", "createMultipartUpload"]) {
  R2Bucket.prototype[op] = function (...args) {
    this.rec.r2_calls += 1;
    return this.inner[op](...args);
  };
}

let names;
function meteredEnv(env, rec) {
  names ??= new Map(Object.entries(env.STATEMENTS?.statements ?? {}).map(([name, s]) => [s.sql, name]));
  const wrapped = {};
  return new Proxy(env, {
    get(target, prop, receiver) {
      const v = Reflect.get(target, prop, receiver);
      if (prop === "DB" && v) return (wrapped.DB ??= new D1Database(v, rec, names));
      if ((prop === "DELIVERIES" || prop === "EFFECTS") && v) return (wrapped[prop] ??= new WorkerQueue(v, prop, rec));
      if (prop === "ARCHIVE" && v) return (wrapped.ARCHIVE ??= new R2Bucket(v, rec));
      return v;
    },
  });
}

const ZERO = () => ({ invocations: 0, messages: 0, d1_calls: 0, d1_batches: 0, statements: 0, rows_read: 0, rows_written: 0, sql_ms: 0, sent: {}, by_statement: {} });

function totals() {
  const out = {};
  for (const r of records) {
    const t = (out[r.kind] ??= ZERO());
    t.invocations += 1;
    t.messages += r.messages ?? 0;
    for (const k of ["d1_calls", "d1_batches", "statements", "rows_read", "rows_written", "sql_ms"]) t[k] += r[k];
    for (const [q, s] of Object.entries(r.sent)) {
      const x = (t.sent[q] ??= { calls: 0, messages: 0 });
      x.calls += s.calls;
      x.messages += s.messages;
    }
    for (const [n, s] of Object.entries(r.by_statement)) {
      const x = (t.by_statement[n] ??= { runs: 0, rows_read: 0, rows_written: 0, sql_ms: 0, wall_ms: 0 });
      for (const k of Object.keys(x)) x[k] += s[k];
    }
  }
  return out;
}

/**
 * A worker entry (a module worker's default export object, or a WorkerEntrypoint class such
 * as workers-rs generates) with its bindings metered when the BENCH_METER binding is "1".
 * Either way `GET /__bench/backlog` counts the deliveries not yet processed, through the
 * worker's own (unmetered) D1 binding: a probe that takes its turn with the load's requests
 * (Miniflare's D1 proxy from Node stalls while the runtime is saturated).
 */
export function metered(inner) {
  const call = (method, arg, env, ctx) =>
    typeof inner === "function" ? new inner(ctx, env)[method](arg) : inner[method](arg, env, ctx);
  const on = (env) => env.BENCH_METER === "1";
  return {
    async fetch(request, env, ctx) {
      const url = new URL(request.url);
      if (url.pathname === "/__bench/backlog") {
        const r = await env.DB.prepare("SELECT count(*) AS n, sum(processed_at IS NULL) AS unprocessed FROM webhook_delivery").first();
        return Response.json({ at_ms: Date.now(), deliveries: r.n, unprocessed: r.unprocessed ?? 0 });
      }
      if (url.pathname === "/__bench/meter") return Response.json(totals());
      // each invocation's own counts, in order (tests/invocation_budget.test.mjs)
      if (url.pathname === "/__bench/meter/invocations") return Response.json(records);
      // one D1 round trip that reads nothing: the price of a call, whatever the database holds
      if (url.pathname === "/__bench/ping") {
        // ?table=1: a one-row table's row instead (a read of the database file)
        const sql = url.searchParams.get("table") ? "SELECT id AS one FROM tally WHERE id = 1" : "SELECT 1 AS one";
        const r = await env.DB.prepare(sql).all();
        return Response.json({ one: r.results[0].one, d1_ms: r.meta?.duration ?? null });
      }
      if (url.pathname === "/__bench/meter/reset") {
        records = [];
        return Response.json({ reset: true });
      }
      if (!on(env)) return call("fetch", request, env, ctx);
      const rec = fresh("request");
      const res = await call("fetch", request, meteredEnv(env, rec), ctx);
      // what the reply was: a webhook's new delivery or duplicate, or anything else
      if (url.pathname === "/webhooks/paymos" && res.status === 200) {
        try {
          rec.kind = (await res.clone().json()).duplicate ? "receive_duplicate" : "receive_new";
        } catch {
          /* not JSON */
        }
      } else rec.kind = `request_${res.status}`;
      return res;
    },
    async queue(batch, env, ctx) {
      if (!on(env)) return call("queue", batch, env, ctx);
      const rec = fresh(`queue:${batch.queue}`, { messages: batch.messages.length });
      return call("queue", batch, meteredEnv(env, rec), ctx);
    },
    async scheduled(event, env, ctx) {
      if (!on(env)) return call("scheduled", event, env, ctx);
      const rec = fresh("scheduled");
      return call("scheduled", event, meteredEnv(env, rec), ctx);
    },
  };
}
