// The receive path's promise chain (src/settle.rs): each continuation waits in a table in the
// wasm under a number, and one function made once per wasm instance resumes it, where a
// wasm-bindgen closure per await cost its creation, two `bind`s and a FinalizationRegistry
// entry (bench/README.md, "One resume function for the receive path's chain").

/** The current wasm instance's resume function, `(id, ok, value) => next`. */
let resume;

export function settleInit(f) {
  resume = f;
}

/**
 * `promise.then`, resuming continuation `id` with its value or its rejection, through the
 * resume function of the instance that chained it: ids are numbered per instance, so a
 * promise that outlives a restart of the wasm must not resume the new instance's `id`
 * (the old function throws instead, as a closure of an old instance always did).
 */
export function settleThen(promise, id) {
  const resumeThis = resume;
  return promise.then(
    (value) => resumeThis(id, true, value),
    (error) => resumeThis(id, false, error),
  );
}
