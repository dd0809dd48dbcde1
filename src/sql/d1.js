// The D1 calls of src/sql/d1.rs, one JS function each: a statement (or a batch of them)
// arrives as one JSON text, `[[sql, [args…]], …]`, and its answer leaves as one, so that the
// wasm makes one call and awaits one promise where each `prepare`, `bind`, `batch` and the
// answer's walk were calls of their own (bench/README.md, "One call per D1 query"). Only the
// calling convention is here: every SQL text comes from paymos_core::statements, every row is
// read in the wasm, and a rejection is D1's own error, reported as before.

function prepared(db, text) {
  return JSON.parse(text).map(([sql, args]) => db.prepare(sql).bind(...args));
}

/** The first row as JSON text, `null` when there is none. */
export function d1First(db, text) {
  return prepared(db, text)[0].first().then((row) => JSON.stringify(row ?? null));
}

/** The answer (`results` and `meta`, with `size_after`) as JSON text. */
export function d1All(db, text) {
  return prepared(db, text)[0].all().then((answer) => JSON.stringify(answer));
}

/** Runs the statement; the answer is not read. */
export function d1Run(db, text) {
  return prepared(db, text)[0].run().then(() => "null");
}

/** One batch, one transaction: each statement's rows, as a JSON array of arrays. */
export function d1Batch(db, text) {
  return db
    .batch(prepared(db, text))
    .then((answers) => JSON.stringify(answers.map((a) => a.results ?? [])));
}
