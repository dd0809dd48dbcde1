// The receive path's promise chain (src/settle.rs): each continuation waits in a table in the
// wasm under a number, and one function made once per wasm instance resumes it, where a
// wasm-bindgen closure per await cost its creation, two `bind`s and a FinalizationRegistry
// entry (bench/README.md, "One resume function for the receive path's chain").

/**
 * `promise.then`, resuming continuation `id` with its value or its rejection through
 * `resume`, the function of the wasm instance that chained it: ids are numbered per instance,
 * so a promise that outlives a restart of the wasm never resumes the new instance's `id`
 * (the old function throws instead, as a closure of an old instance always did).
 */
export function settleThen(promise, id, resume) {
  return promise.then(
    (value) => resume(id, true, value),
    (error) => resume(id, false, error),
  );
}
