// The glue floor without wasm-bindgen (benchmark only; src/lib.rs says why): the JS side of
// `bench/raw-floor`, the same work as `bench/glue-floor.js` with the log line composed in the
// wasm through raw exports and a buffer in its memory. Built by
//   cargo build --release --target wasm32-unknown-unknown --manifest-path bench/raw-floor/Cargo.toml
//   cp bench/raw-floor/target/wasm32-unknown-unknown/release/raw_floor.wasm bench/raw-floor/
import module from "./raw_floor.wasm";

const { memory, buffer, line } = new WebAssembly.Instance(module, {}).exports;
const encoder = new TextEncoder();
const decoder = new TextDecoder();

export default {
  async fetch(request) {
    const id = request.headers.get("x-webhook-id") ?? "";
    await request.arrayBuffer();
    const at = buffer();
    const { written } = encoder.encodeInto(id, new Uint8Array(memory.buffer, at, 256));
    const n = line(written);
    console.log(decoder.decode(new Uint8Array(memory.buffer, at + 512, n)));
    return new Response('{"received":true,"duplicate":true}', { headers: { "content-type": "application/json" } });
  },
};
