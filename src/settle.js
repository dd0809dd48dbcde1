// The receive path's promise chain (src/settle.rs): each continuation waits in a
// table in the wasm under a number, and one function made once per instance resumes it, where
// a wasm-bindgen closure per await cost its creation, two `bind`s and a FinalizationRegistry
// entry (bench/README.md, "One resume function for the receive path's chain").

/** The wasm's resume function, `(id, ok, value) => next`, set once per instance. */
let resume;

export function settleInit(f) {
  resume = f;
}

/** `promise.then`, resuming continuation `id` with its value or its rejection. */
export function settleThen(promise, id) {
  return promise.then(
    (value) => resume(id, true, value),
    (error) => resume(id, false, error),
  );
}
