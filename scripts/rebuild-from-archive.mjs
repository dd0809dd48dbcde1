#!/usr/bin/env node
// Rebuilds a lost day of deliveries from the archive (docs/recovery.md): reads the objects
// deliveries/YYYY/MM/DD/*.ndjson.gz, checks each (it gunzips; its SHA-256 is the one its
// metadata records, when the metadata is at hand; every line parses and was received that
// day) and writes SQL that re-inserts one row per line, to run with
// `wrangler d1 execute DB --file …`. Each statement is INSERT … ON CONFLICT (event_id) DO
// NOTHING: a delivery still on record is left as it is, so running it twice, or on a day only
// partly lost, changes nothing that is there.
//
// The rows come back as they were once archived (slim): body '' with archived_at and
// archive_key naming their object, so the dedupe answers for them again and a replay reads
// their body back from R2, as before the loss. --with-bodies puts the bodies back in D1
// instead (unarchived; the next daily run archives them again).
//
// What the archive does not hold comes back empty: attempts, last_error, replays and
// generation start at 0, and `reason` (livemode_mismatch, unknown_event_type) is not kept.
// The last statement counts the deliveries' kept counts again (RECOUNT, below).
//
// Where the objects come from:
//   --local [--persist-to DIR]  the local bucket of `npm start` / wrangler dev (Miniflare's
//                               state, default .wrangler/state), metadata checked
//   --from-dir DIR              files downloaded from the deployed bucket, named as in it
//                               (<HHMMSSmmm>-<hash>.ndjson.gz); their keys are
//                               deliveries/YYYY/MM/DD/<file name>
//
//   node scripts/rebuild-from-archive.mjs --day 2026-01-01 --local --out rebuild.sql
//   npx wrangler d1 execute DB --local --file rebuild.sql
import { readFile, readdir, writeFile } from "node:fs/promises";
import { createHash } from "node:crypto";
import { gunzipSync } from "node:zlib";
import path from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

function usage(why) {
  if (why) console.error(`rebuild-from-archive: ${why}`);
  console.error(
    "usage: node scripts/rebuild-from-archive.mjs --day YYYY-MM-DD (--local [--persist-to DIR] | --from-dir DIR) [--out FILE] [--with-bodies]",
  );
  process.exit(2);
}

function parseArgs(argv) {
  const o = { withBodies: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => argv[++i] ?? usage(`${a} needs a value`);
    if (a === "--day") o.day = value();
    else if (a === "--local") o.local = true;
    else if (a === "--persist-to") o.persistTo = value();
    else if (a === "--from-dir") o.fromDir = value();
    else if (a === "--out") o.out = value();
    else if (a === "--with-bodies") o.withBodies = true;
    else if (a === "--help" || a === "-h") usage();
    else usage(`unknown argument ${a}`);
  }
  if (!/^\d{4}-\d{2}-\d{2}$/.test(o.day ?? "")) usage("--day YYYY-MM-DD is required");
  if (!!o.local === !!o.fromDir) usage("one of --local or --from-dir");
  return o;
}

/** The day's objects from the local bucket: [{key, bytes, sha256 (recorded) }]. */
async function localObjects(prefix, persistTo) {
  const { Miniflare } = await import("miniflare");
  const { unstable_getMiniflareWorkerOptions } = await import("wrangler");
  const { workerOptions } = unstable_getMiniflareWorkerOptions(path.join(ROOT, "wrangler.toml"));
  const bucketId = workerOptions.r2Buckets?.ARCHIVE?.id ?? workerOptions.r2Buckets?.ARCHIVE;
  if (!bucketId) throw new Error("wrangler.toml binds no ARCHIVE bucket");
  const state = path.resolve(persistTo ?? path.join(ROOT, ".wrangler/state"));
  const mf = new Miniflare({
    modules: true,
    script: "export default {}",
    r2Buckets: { ARCHIVE: bucketId },
    r2Persist: path.join(state, "v3", "r2"),
  });
  try {
    const bucket = await mf.getR2Bucket("ARCHIVE");
    const out = [];
    let cursor;
    for (;;) {
      const page = await bucket.list({ prefix, cursor, include: ["customMetadata"] });
      for (const o of page.objects) {
        const got = await bucket.get(o.key);
        out.push({ key: o.key, bytes: Buffer.from(await got.arrayBuffer()), sha256: got.customMetadata?.sha256 ?? null });
      }
      if (!page.truncated) break;
      cursor = page.cursor;
    }
    return out;
  } finally {
    await mf.dispose();
  }
}

async function dirObjects(prefix, dir) {
  const names = (await readdir(dir)).filter((n) => n.endsWith(".ndjson.gz")).sort();
  return Promise.all(names.map(async (n) => ({ key: prefix + n, bytes: await readFile(path.join(dir, n)), sha256: null })));
}

const sql = (v) => (v === null || v === undefined ? "NULL" : `'${String(v).replaceAll("'", "''")}'`);

const FIELDS = ["body", "event_id", "event_type", "outcome", "processed_at", "received_at", "resource_id"];

/** The object's lines, checked; throws saying what is wrong. */
function linesOf(o, day) {
  if (o.sha256 !== null) {
    const sha = createHash("sha256").update(o.bytes).digest("hex");
    if (sha !== o.sha256) throw new Error(`${o.key}: SHA-256 ${sha}, its metadata records ${o.sha256}`);
  }
  const text = gunzipSync(o.bytes).toString("utf8");
  return text
    .split("\n")
    .filter((l) => l.trim())
    .map((l, i) => {
      const line = JSON.parse(l);
      const keys = Object.keys(line).sort().join(",");
      if (keys !== FIELDS.join(",")) throw new Error(`${o.key} line ${i + 1}: fields ${keys}`);
      if (!/^evt_[A-Za-z0-9]{1,64}$/.test(line.event_id)) throw new Error(`${o.key} line ${i + 1}: event_id ${line.event_id}`);
      if (line.received_at.slice(0, 10) !== day) throw new Error(`${o.key} line ${i + 1}: received ${line.received_at}, not on ${day}`);
      return line;
    });
}

function insert(line, key, withBodies) {
  const archived = withBodies
    ? `${sql(line.body)}, NULL, NULL`
    : `'', strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), ${sql(key)}`;
  return (
    "INSERT INTO webhook_delivery (event_id, resource_id, event_type, received_at, processed_at, outcome, body, archived_at, archive_key) " +
    `VALUES (${sql(line.event_id)}, ${sql(line.resource_id)}, ${sql(line.event_type)}, ${sql(line.received_at)}, ${sql(line.processed_at)}, ${sql(line.outcome)}, ${archived}) ` +
    "ON CONFLICT (event_id) DO NOTHING;"
  );
}

// Last, the kept counts of deliveries (`tally`, migration 0009; the metrics read them) are
// counted again from the rows. Whether the lost rows had left the counts (a restore to before
// them) or not (a mistaken DELETE, which no count follows), the rows on record after the
// rebuild are what the counts must say: a full count, once, at recovery time.
const RECOUNT =
  "UPDATE tally SET " +
  "deliveries_applied = (SELECT count(*) FROM webhook_delivery WHERE outcome = 'applied'), " +
  "deliveries_stale = (SELECT count(*) FROM webhook_delivery WHERE outcome = 'stale'), " +
  "deliveries_ignored = (SELECT count(*) FROM webhook_delivery WHERE outcome = 'ignored'), " +
  "deliveries_dismissed = (SELECT count(*) FROM webhook_delivery WHERE outcome = 'dead' AND dismissed_at IS NOT NULL), " +
  "livemode_mismatches = (SELECT count(*) FROM webhook_delivery WHERE reason = 'livemode_mismatch') " +
  "WHERE id = 1;";

async function main() {
  const o = parseArgs(process.argv.slice(2));
  const [y, m, d] = o.day.split("-");
  const prefix = `deliveries/${y}/${m}/${d}/`;
  const objects = o.local ? await localObjects(prefix, o.persistTo) : await dirObjects(prefix, o.fromDir);
  // a delivery in two objects (archived, replayed, archived again): its latest processing
  const latest = new Map();
  let lines = 0;
  for (const obj of objects) {
    for (const line of linesOf(obj, o.day)) {
      lines += 1;
      const kept = latest.get(line.event_id);
      if (!kept || (line.processed_at ?? "") > (kept.line.processed_at ?? "")) latest.set(line.event_id, { line, key: obj.key });
    }
  }
  const statements = [...latest.values()].map(({ line, key }) => ({ id: line.event_id, text: insert(line, key, o.withBodies) }));
  const text = [...statements.map((s) => s.text), RECOUNT].join("\n") + "\n";
  if (o.out) await writeFile(o.out, text);
  else process.stdout.write(text);
  console.error(
    `rebuild-from-archive: ${objects.length} objects, ${lines} lines, ${statements.length} deliveries of ${o.day}` +
      (o.out ? ` -> ${o.out}` : "") +
      (o.withBodies ? " (with their bodies)" : " (slim, pointing to their objects)"),
  );
}

main().catch((e) => {
  console.error(`rebuild-from-archive: ${e.message}`);
  process.exit(1);
});
