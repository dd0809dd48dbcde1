// The D1 calls of src/sql/d1.rs, one JS function each: a statement (or a batch of them)
// arrives as one JSON text, `[[id, [args…], sql?], …]`, and its answer leaves as one, so that
// the wasm makes one call and awaits one promise where each `prepare`, `bind`, `batch` and the
// answer's walk were calls of their own (bench/README.md, "One call per D1 query"). Only the
// calling convention is here: every SQL text comes from paymos_core::statements, sent by the
// wasm with a statement's first use in this isolate and named by its id after that
// (bench/README.md, "SQL texts once per isolate"); every row is read in the wasm, and a
// rejection is D1's own error, reported as before.

/** The SQL texts the wasm has sent, at their ids. */
const texts = [];

function prepared(db, text) {
  return JSON.parse(text).map(([id, args, sql]) => {
    if (sql !== undefined) texts[id] = sql;
    // never reached while the wasm counts a text as held only once this call has returned
    if (texts[id] === undefined) throw new Error(`d1.js: no SQL text for statement ${id}`);
    return db.prepare(texts[id]).bind(...args);
  });
}

/** The first row as JSON text, `null` when there is none. */
export function d1First(db, text) {
  return prepared(db, text)[0].first().then((row) => JSON.stringify(row ?? null));
}

/**
 * The answer as JSON text: its `results`, and of its `meta` only `size_after`, the one field the
 * wasm reads (the rest, a dozen fields and their timings, was written and parsed for nothing).
 */
export function d1All(db, text) {
  return prepared(db, text)[0]
    .all()
    .then(({ results, meta }) => JSON.stringify({ results, meta: { size_after: meta?.size_after } }));
}

/** Runs the statement; the answer is not read. */
export function d1Run(db, text) {
  return prepared(db, text)[0].run().then(() => "null");
}

/** How long `d1Probe` waits for D1's answer: the cron's probe (src/sql/d1.rs, `probe`). */
const PROBE_MS = 10_000;

/**
 * `"ok"` when D1 answered the statement, `"error"` when it refused, `"timeout"` when it did
 * not answer within PROBE_MS (its calls hang).
 */
export function d1Probe(db, text) {
  const answered = prepared(db, text)[0]
    .first()
    .then(
      () => "ok",
      () => "error",
    );
  let timer;
  const late = new Promise((resolve) => (timer = setTimeout(() => resolve("timeout"), PROBE_MS)));
  return Promise.race([answered, late]).finally(() => clearTimeout(timer));
}

/** One batch, one transaction: each statement's rows, as a JSON array of arrays. */
export function d1Batch(db, text) {
  return db
    .batch(prepared(db, text))
    .then((answers) => JSON.stringify(answers.map((a) => a.results ?? [])));
}
