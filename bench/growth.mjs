// The growth benchmark (issue #25): do the health checks read the history, or only the
// working set? For each size (10,000 and 1,000,000 deliveries at the same daily rate, so
// that the larger one is the same receiver 100 times older), a local D1 is migrated by
// wrangler, filled with a receiver's history by bench/growth_fill.py (a bulk load of the
// shape of INSERT_DELIVERY and of what the consumer writes, written into Miniflare's SQLite
// file before the worker starts), then the worker runs behind bench/meter.mjs and is asked:
// GET /admin/api/metrics (and ?format=prometheus, and the charts' /metrics/history) and one
// 5-minute cron run (the alert run, with the sweepers before it). Reported per size: the
// bytes per delivery in D1, and for each call the rows read and written as D1's own `meta`
// says (summed by the meter), D1's SQL time and the wall time of the call, median of the
// rounds. Targets: the same rows read at both sizes, under 100 ms here.
//
//   npm run bench -- --only=growth        (scripts/bench.sh: build, then only this)
//   node bench/growth.mjs [--sizes=10000,1000000] [--per-day=5000] [--rounds=5]
//
// Then at each size the archive (interface §10) through POST /admin/api/archive, looping on
// next_cursor: before now - RETENTION_DAYS, then before now; D1's size before and after
// (reported, file, used pages), R2's bytes per archived delivery (`archiveStages`).
//   [--retention-days=30] [--no-archive]
// Writes bench/results/growth.json (`archive` there: the largest size's figures, by_size).
import { execFile } from "node:child_process";
import { mkdtemp, readdir, readFile, rm, writeFile, mkdir } from "node:fs/promises";
import { tmpdir } from "node:os";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { migrate, startWorker, ROOT, ADMIN_TOKEN } from "../tests/helpers/worker.mjs";

const run = promisify(execFile);
const arg = (name, fallback) => process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? fallback;
const SIZES = arg("sizes", "10000,1000000").split(",").map(Number);
const PER_DAY = Number(arg("per-day", "5000"));
const ROUNDS = Number(arg("rounds", "5"));
const KEEP = process.argv.includes("--keep");
// the archive's cutoffs: RETENTION_DAYS as wrangler.toml sets it (what the daily cron uses)
const RETENTION_DAYS = Number(arg("retention-days", "30"));
const NO_ARCHIVE = process.argv.includes("--no-archive");
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.floor((s.length - 1) / 2)] : null;
};

/** The core's statements by name (the meter names each statement with them), written afresh. */
async function statementsJson() {
  const file = path.join(ROOT, "bench/statements.json");
  await run("cargo", ["run", "-q", "-p", "paymos-core", "--example", "statements_json", "--", file], { cwd: ROOT, maxBuffer: 64 << 20 });
  return JSON.parse(await readFile(file, "utf8"));
}

async function sqliteFile(dir) {
  const d1 = path.join(dir, "v3", "d1");
  const found = [];
  const walk = async (p) => {
    for (const e of await readdir(p, { withFileTypes: true })) {
      const q = path.join(p, e.name);
      if (e.isDirectory()) await walk(q);
      else if (e.name.endsWith(".sqlite") && !e.name.startsWith("metadata")) found.push(q);
    }
  };
  await walk(d1);
  if (found.length !== 1) throw new Error(`expected one D1 file under ${d1}: ${found}`);
  return found[0];
}

/**
 * Bytes in D1 by table and index (dbstat), and the file's pages: `bytes` is the used size
 * ((page_count - freelist_count) × page_size), `file_bytes` the file's (page_count ×
 * page_size). With `vacuumCopy` (a path), also what VACUUM would leave, measured on a copy.
 */
async function footprint(file, vacuumCopy) {
  const script = `
import json, sqlite3, sys
c = sqlite3.connect(sys.argv[1])
page = c.execute("PRAGMA page_size").fetchone()[0]
pages = c.execute("PRAGMA page_count").fetchone()[0]
free = c.execute("PRAGMA freelist_count").fetchone()[0]
by = {}
for name, size in c.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name"):
    by[name] = size
out = {"page_size": page, "bytes": page * (pages - free), "file_pages": pages, "freelist_pages": free, "file_bytes": page * pages, "by_object": by}
if len(sys.argv) > 2:
    # what VACUUM would leave: run on a copy (the worker's file is left as it is)
    import shutil
    shutil.copyfile(sys.argv[1], sys.argv[2])
    v = sqlite3.connect(sys.argv[2])
    v.execute("VACUUM")
    out["vacuumed_bytes"] = v.execute("PRAGMA page_size").fetchone()[0] * v.execute("PRAGMA page_count").fetchone()[0]
    v.close()
    import os
    os.remove(sys.argv[2])
print(json.dumps(out))
`;
  const { stdout } = await run("python3", ["-c", script, file, ...(vacuumCopy ? [vacuumCopy] : [])], { maxBuffer: 16 << 20 });
  return JSON.parse(stdout);
}

async function getJson(url, pathname) {
  const t0 = performance.now();
  const res = await fetch(`${url}${pathname}`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  const text = await res.text();
  const ms = performance.now() - t0;
  if (res.status !== 200) throw new Error(`${pathname}: ${res.status} ${text}`);
  return { ms, text };
}

// Once in a while, after a long archive call, the runtime resets the next request's pooled
// connection (ECONNRESET within milliseconds, before it is read): a GET of the meter is
// asked again, a few times at most.
async function again(f) {
  for (let i = 0; ; i++) {
    try {
      return await f();
    } catch (e) {
      if (i >= 3 || e.cause?.code !== "ECONNRESET") throw e;
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}
const meter = (url) => again(async () => (await fetch(`${url}/__bench/meter`)).json());
const resetMeter = (url) => again(async () => (await fetch(`${url}/__bench/meter/reset`)).json());

/** What one kind of invocation cost (the meter's totals for it), per invocation. */
function perCall(totals, kind) {
  const t = totals[kind];
  if (!t) return null;
  const n = t.invocations || 1;
  const byStatement = Object.fromEntries(
    Object.entries(t.by_statement)
      .sort((a, b) => b[1].rows_read - a[1].rows_read)
      .map(([name, s]) => [name, { runs: s.runs / n, rows_read: s.rows_read / n, rows_written: s.rows_written / n, wall_ms: s.wall_ms / n }]),
  );
  return { invocations: t.invocations, d1_calls: t.d1_calls / n, statements: t.statements / n, rows_read: t.rows_read / n, rows_written: t.rows_written / n, sql_ms: t.sql_ms / n, by_statement: byStatement };
}

/** `rounds` calls of `call`, each metered alone: medians of the wall time and of the meter's figures. */
async function measure(w, kind, call, rounds) {
  // two calls first, unmeasured: the pages they read in the runtime's cache, as in a
  // receiver that answers its scrapes every few seconds
  for (let i = 0; i < 2; i++) await call();
  const samples = [];
  for (let i = 0; i < rounds; i++) {
    await resetMeter(w.url);
    const t0 = performance.now();
    await call();
    const ms = performance.now() - t0;
    samples.push({ ms, cost: perCall(await meter(w.url), kind) });
  }
  const last = samples.at(-1).cost;
  return {
    wall_ms_median: Math.round(median(samples.map((s) => s.ms)) * 10) / 10,
    wall_ms: samples.map((s) => Math.round(s.ms * 10) / 10),
    rows_read: median(samples.map((s) => s.cost.rows_read)),
    rows_read_each: samples.map((s) => s.cost.rows_read),
    rows_written: median(samples.map((s) => s.cost.rows_written)),
    d1_calls: last.d1_calls,
    sql_ms_median: Math.round(median(samples.map((s) => s.cost.sql_ms)) * 100) / 100,
    by_statement: last.by_statement,
  };
}

/** POST /admin/api/archive as an operator would: `before`, then each `next_cursor` back until null. */
async function archiveAll(w, before) {
  const calls = [];
  let cursor;
  let failed = null;
  let resets = 0;
  const t0 = performance.now();
  await resetMeter(w.url);
  for (;;) {
    if (calls.length >= 10_000) throw new Error(`archive before ${before}: still a cursor after ${calls.length} calls`);
    const t = performance.now();
    let res, text, error;
    // a connection reset is retried once with the same cursor (a run resumes from it and
    // archives nothing twice), as an operator's client would; each reset is counted
    for (let attempt = 0; attempt < 2 && !res; attempt++) {
      try {
        res = await fetch(`${w.url}/admin/api/archive`, {
          method: "POST",
          headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" },
          body: JSON.stringify(cursor ? { before, cursor } : { before }),
        });
        text = await res.text();
      } catch (e) {
        res = undefined;
        resets += 1;
        error = `call ${calls.length + 1} after ${Math.round(performance.now() - t)} ms: ${e.message}${e.cause ? ` (${e.cause.code ?? e.cause.message})` : ""}`;
      }
    }
    if (!res) {
      // recorded, not hidden: the stage ends here and the results say so
      failed = error;
      break;
    }
    const ms = performance.now() - t;
    if (res.status !== 200) {
      failed = `call ${calls.length + 1}: ${res.status} ${text}`;
      break;
    }
    const r = JSON.parse(text);
    calls.push({ ms: Math.round(ms), archived: r.archived, objects: r.objects, bytes: r.bytes, remaining: r.remaining, state: r.state });
    if (r.next_cursor == null) break;
    cursor = r.next_cursor;
  }
  const cost = failed ? null : perCall(await meter(w.url), "request_200");
  const sum = (k) => calls.reduce((a, c) => a + (c[k] ?? 0), 0);
  return {
    before,
    calls: calls.length,
    seconds: Math.round(performance.now() - t0) / 1000,
    archived: sum("archived"),
    objects: sum("objects"),
    bytes: sum("bytes"),
    failed,
    connection_resets_retried: resets,
    last_state: calls.at(-1)?.state ?? null,
    remaining: calls.at(-1)?.remaining ?? null,
    each: calls,
    // D1's own meta, summed by the meter, per call
    per_call: cost && { d1_calls: cost.d1_calls, rows_read: cost.rows_read, rows_written: cost.rows_written, sql_ms: Math.round(cost.sql_ms) },
  };
}

/** Every object in the local ARCHIVE bucket: count, bytes, and lines (from each object's metadata). */
async function bucketTotals(w) {
  const bucket = await w.mf.getR2Bucket("ARCHIVE");
  let cursor;
  const out = { objects: 0, bytes: 0, lines: 0 };
  for (;;) {
    const page = await bucket.list({ cursor, include: ["customMetadata"] });
    for (const o of page.objects) {
      out.objects += 1;
      out.bytes += o.size;
      out.lines += Number(o.customMetadata?.lines ?? 0);
    }
    if (!page.truncated) break;
    cursor = page.cursor;
  }
  return out;
}

/** Bytes of `webhook_delivery` and its indexes (dbstat), without the bodies' own table. */
function deliveryBytes(fp) {
  return Object.entries(fp.by_object)
    .filter(([name]) => name === "webhook_delivery" || name.startsWith("webhook_delivery_") || name === "sqlite_autoindex_webhook_delivery_1")
    .reduce((a, [, b]) => a + b, 0);
}

/**
 * After the health checks: archive what was received before now − RETENTION_DAYS (what the
 * daily cron would), then everything received before now, each through the admin API, with
 * the worker restarted between stages so that the SQLite file is measured closed. D1's size
 * three ways after each: as D1 reports it (the metrics' `database.bytes`, meta.size_after),
 * the file's pages, the used pages; and what VACUUM would leave (on a copy, small sizes).
 */
async function archiveStages(dir, file, size, statements, reportedBefore, fpBefore) {
  const now = Date.now();
  const stages = [
    { name: `before now - ${RETENTION_DAYS} days (retention)`, before: new Date(now - RETENTION_DAYS * 86_400_000).toISOString() },
    // a second back: the receiver refuses a time to come, and its clock is this machine's
    { name: "before now (everything processed)", before: new Date(now - 1000).toISOString() },
  ];
  const perDelivery = (b) => (b == null ? null : Math.round(b / size));
  const out = {
    d1_before: { reported_bytes: reportedBefore, file_bytes: fpBefore.file_bytes, used_bytes: fpBefore.bytes, vacuumed_bytes: fpBefore.vacuumed_bytes ?? null },
    stages: [],
  };
  out.d1_before.per_delivery = Object.fromEntries(Object.entries(out.d1_before).map(([k, v]) => [k, perDelivery(v)]));
  for (const stage of stages) {
    const w = await startWorker({
      persistDir: dir,
      scriptPath: path.join(ROOT, "bench/metered-ours.mjs"),
      vars: { BENCH_METER: "1", STATEMENTS: statements },
      collectLogs: false,
    });
    let result, reported, bucket, checks;
    try {
      await getJson(w.url, "/admin/api/metrics");
      result = await archiveAll(w, stage.before);
      if (stage === stages[0]) {
        // the health checks again, in the state of a receiver whose daily run keeps up: no
        // body past retention left in D1 (the fill wrote every body, as if never archived)
        await w.scheduled();
        checks = {
          metrics: await measure(w, "request_200", () => getJson(w.url, "/admin/api/metrics"), ROUNDS),
          alert_run: await measure(w, "scheduled", () => w.scheduled(), ROUNDS),
        };
      }
      reported = JSON.parse((await getJson(w.url, "/admin/api/metrics")).text).database?.bytes ?? null;
      bucket = await bucketTotals(w);
    } finally {
      await w.close();
    }
    const fp = await footprint(file, size <= 200_000 ? `${file}.vacuum-copy` : undefined);
    const d1 = { reported_bytes: reported, file_bytes: fp.file_bytes, used_bytes: fp.bytes, freelist_pages: fp.freelist_pages, vacuumed_bytes: fp.vacuumed_bytes ?? null };
    d1.per_delivery = Object.fromEntries(Object.entries(d1).filter(([k]) => k.endsWith("bytes")).map(([k, v]) => [k, perDelivery(v)]));
    out.stages.push({
      name: stage.name,
      ...result,
      r2_bytes_per_archived_delivery: result.archived ? Math.round(result.bytes / result.archived) : null,
      bucket_after: bucket,
      d1_after: d1,
      ...(checks ? { checks_after: checks } : {}),
      webhook_delivery_bytes_after: deliveryBytes(fp),
      delivery_body_bytes_after: fp.by_object.delivery_body ?? 0,
    });
    console.error(`[growth] ${size}: archived ${result.archived} before ${stage.before} in ${result.calls} calls, ${result.seconds} s${result.failed ? `; FAILED ${result.failed}` : ""} (${result.connection_resets_retried} resets retried)`);
  }
  return out;
}

async function one(size, statements) {
  const dir = await mkdtemp(path.join(tmpdir(), "paymos-growth-"));
  try {
    await migrate(dir);
    const file = await sqliteFile(dir);
    const t0 = Date.now();
    const fill = async (phase) =>
      JSON.parse((await run("python3", [path.join(ROOT, "bench/growth_fill.py"), file, String(size), String(PER_DAY), phase], { maxBuffer: 16 << 20 })).stdout);
    // the history first (the slow part), its footprint; then the last 24 hours, just before
    // the worker starts, so that the working set is the same at every size when measured
    await fill("history");
    const filled = await fill("recent");
    const fillSeconds = (Date.now() - t0) / 1000;
    console.error(`[growth] ${size} deliveries: filled in ${fillSeconds.toFixed(0)} s`);
    let closed = false;
    const w = await startWorker({
      persistDir: dir,
      scriptPath: path.join(ROOT, "bench/metered-ours.mjs"),
      vars: { BENCH_METER: "1", STATEMENTS: statements },
      collectLogs: false,
    });
    try {
      // the isolate warm (the wasm compiled), and a first alert run that opens what the
      // working set calls for: the rounds measure the steady state
      await getJson(w.url, "/admin/api/metrics");
      await w.scheduled();
      const metrics = await measure(w, "request_200", () => getJson(w.url, "/admin/api/metrics"), ROUNDS);
      const prometheus = await measure(w, "request_200", () => getJson(w.url, "/admin/api/metrics?format=prometheus"), ROUNDS);
      const alertRun = await measure(w, "scheduled", () => w.scheduled(), ROUNDS);
      const history = await measure(w, "request_200", () => getJson(w.url, "/admin/api/metrics/history?hours=24"), Math.min(3, ROUNDS));
      // one D1 round trip of nothing (SELECT 1 through the same binding): what a D1 call
      // costs here whatever it reads
      const pings = [];
      for (let i = 0; i < ROUNDS + 2; i++) pings.push((await getJson(w.url, "/__bench/ping")).ms);
      const ping = { wall_ms_median: Math.round(median(pings.slice(2)) * 10) / 10, wall_ms: pings.slice(2).map((x) => Math.round(x * 10) / 10) };
      const snapshot = JSON.parse((await getJson(w.url, "/admin/api/metrics")).text);
      await w.close();
      closed = true;
      const fp = await footprint(file, !NO_ARCHIVE && size <= 200_000 ? `${file}.vacuum-copy` : undefined);
      const archive = NO_ARCHIVE ? null : await archiveStages(dir, file, size, statements, snapshot.database?.bytes ?? null, fp);
      return {
        deliveries: size,
        filled,
        fill_seconds: fillSeconds,
        d1_bytes: fp.bytes,
        bytes_per_delivery: Math.round(fp.bytes / size),
        webhook_delivery_bytes_per_delivery: Math.round(deliveryBytes(fp) / size),
        // the bodies' own rows (migration 0013): what archiving deletes
        delivery_body_bytes_per_delivery: Math.round((fp.by_object.delivery_body ?? 0) / size),
        by_object_bytes: fp.by_object,
        metrics,
        metrics_prometheus: prometheus,
        alert_run: alertRun,
        history_24h: history,
        d1_round_trip: { wall_ms_median: ping.wall_ms_median, wall_ms: ping.wall_ms },
        metrics_answer: { deliveries: snapshot.deliveries, effects: snapshot.effects, alerts_open: snapshot.alerts_open },
        archive,
      };
    } finally {
      if (!closed) await w.close();
    }
  } finally {
    if (KEEP) console.error(`[growth] kept ${dir}`);
    else await rm(dir, { recursive: true, force: true });
  }
}

const statements = await statementsJson();
const results = {
  started_at: new Date().toISOString(),
  machine: { cpus: os.cpus().length, model: os.cpus()[0]?.model, node: process.version, load_average_at_start: os.loadavg() },
  per_day: PER_DAY,
  rounds: ROUNDS,
  targets: { same_rows_read_at_every_size: true, wall_ms_under: 100 },
  sizes: [],
  // the archive (interface §10), from the largest size archived: see archiveSummary
  archive: null,
};
for (const size of SIZES) results.sizes.push(await one(size, statements));

/**
 * `archive`: D1 bytes per delivery before and after archiving (after the retention stage and
 * after everything), R2 bytes per archived delivery, the calls and their time, at each size.
 */
function archiveSummary(r) {
  const a = r.archive;
  const [retention, all] = a.stages;
  const last = all ?? retention;
  return {
    deliveries: r.deliveries,
    days_of_history: r.filled.days_of_history,
    body_bytes_avg: Math.round(r.filled.body_bytes_avg),
    bytes_per_delivery_d1_before: a.d1_before.per_delivery,
    bytes_per_delivery_d1_after_retention: retention.d1_after.per_delivery,
    bytes_per_delivery_d1_after: last.d1_after.per_delivery,
    webhook_delivery_bytes_per_delivery_after: Math.round(last.webhook_delivery_bytes_after / r.deliveries),
    delivery_body_bytes_per_delivery_before: r.delivery_body_bytes_per_delivery,
    delivery_body_bytes_per_delivery_after_retention: Math.round(retention.delivery_body_bytes_after / r.deliveries),
    delivery_body_bytes_per_delivery_after: Math.round(last.delivery_body_bytes_after / r.deliveries),
    bytes_per_delivery_r2: a.stages.reduce((x, s) => x + s.bytes, 0) / Math.max(1, a.stages.reduce((x, s) => x + s.archived, 0)),
    r2_listed: last.bucket_after,
    stages: a.stages.map((s) => ({ name: s.name, before: s.before, archived: s.archived, calls: s.calls, seconds: s.seconds, failed: s.failed, connection_resets_retried: s.connection_resets_retried, last_state: s.last_state, objects: s.objects, bytes: s.bytes, r2_bytes_per_archived_delivery: s.r2_bytes_per_archived_delivery })),
  };
}
const archived = results.sizes.filter((r) => r.archive);
if (archived.length) {
  results.archive = { by_size: archived.map(archiveSummary) };
  Object.assign(results.archive, results.archive.by_size.at(-1));
  results.archive.bytes_per_delivery_r2 = Math.round(results.archive.bytes_per_delivery_r2);
  for (const b of results.archive.by_size) b.bytes_per_delivery_r2 = Math.round(b.bytes_per_delivery_r2);
}

const line = (r, k) => `${String(r[k].rows_read).padStart(6)} rows read, ${String(r[k].rows_written).padStart(4)} written, ${String(r[k].wall_ms_median).padStart(6)} ms (D1 ${r[k].sql_ms_median} ms)`;
console.log(`\ngrowth: ${PER_DAY} deliveries a day; medians of ${ROUNDS} rounds`);
for (const r of results.sizes) {
  console.log(`\n${r.deliveries.toLocaleString("en")} deliveries (${r.filled.days_of_history} days), ${(r.d1_bytes / 1e6).toFixed(1)} MB in D1, ${r.bytes_per_delivery} bytes per delivery (${r.webhook_delivery_bytes_per_delivery} in webhook_delivery and its indexes, ${r.delivery_body_bytes_per_delivery} in delivery_body; bodies ${Math.round(r.filled.body_bytes_avg)} B)`);
  console.log(`  GET /admin/api/metrics        ${line(r, "metrics")}`);
  console.log(`  GET /admin/api/metrics (prom) ${line(r, "metrics_prometheus")}`);
  console.log(`  one alert run (the cron)      ${line(r, "alert_run")}`);
  console.log(`  GET /metrics/history?hours=24 ${line(r, "history_24h")}`);
  console.log(`  (one D1 round trip of SELECT 1: ${r.d1_round_trip.wall_ms_median} ms)`);
}
for (const b of results.archive?.by_size ?? []) {
  const pd = (x) => `reported ${x.reported_bytes}, file ${x.file_bytes}, used ${x.used_bytes}${x.vacuumed_bytes != null ? `, vacuumed ${x.vacuumed_bytes}` : ""}`;
  console.log(`\narchive at ${b.deliveries.toLocaleString("en")} deliveries: D1 bytes per delivery before: ${pd(b.bytes_per_delivery_d1_before)}`);
  for (const [i, s] of b.stages.entries()) console.log(`  ${s.name}: ${s.archived} archived in ${s.calls} calls, ${s.seconds} s, ${s.objects} objects, ${s.bytes} B (${s.r2_bytes_per_archived_delivery} B each in R2)`);
  console.log(`  after the retention stage: ${pd(b.bytes_per_delivery_d1_after_retention)}`);
  console.log(`  after: ${pd(b.bytes_per_delivery_d1_after)}; bucket listed: ${JSON.stringify(b.r2_listed)}`);
}
if (results.sizes.length >= 2) {
  const [a, b] = [results.sizes[0], results.sizes.at(-1)];
  for (const k of ["metrics", "metrics_prometheus", "alert_run"]) {
    results[`${k}_same_rows_read`] = a[k].rows_read === b[k].rows_read;
    console.log(`${k}: rows read ${a[k].rows_read} → ${b[k].rows_read} (${a[k].rows_read === b[k].rows_read ? "the same" : "NOT the same"})`);
  }
  // after the daily run (the retention stage): the working set of a receiver whose archive keeps up
  const kept = (r) => r.archive?.stages[0]?.checks_after;
  if (kept(a) && kept(b)) {
    for (const k of ["metrics", "alert_run"]) {
      const [x, y] = [kept(a)[k], kept(b)[k]];
      results[`${k}_same_rows_read_archive_kept_up`] = x.rows_read === y.rows_read;
      console.log(`${k}, the archive kept up: rows read ${x.rows_read} → ${y.rows_read} (${x.rows_read === y.rows_read ? "the same" : "NOT the same"}), ${x.wall_ms_median} → ${y.wall_ms_median} ms`);
    }
  }
}
await mkdir(path.join(ROOT, "bench/results"), { recursive: true });
await writeFile(path.join(ROOT, "bench/results/growth.json"), JSON.stringify(results, null, 2) + "\n");
console.log("\nwritten: bench/results/growth.json");
