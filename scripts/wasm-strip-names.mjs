// Drops the wasm `name` custom section (function names, read only by debuggers and profilers
// such as twiggy) and nothing else: every other section is copied byte for byte.
// worker-build keeps that section on purpose (it runs wasm-opt with --debuginfo); it is about
// a fifth of the module. scripts/build.sh runs this unless PAYMOS_KEEP_WASM_NAMES=1.
//
//     node scripts/wasm-strip-names.mjs build/index_bg.wasm
import { readFileSync, writeFileSync } from "node:fs";

const file = process.argv[2];
const b = readFileSync(file);
if (b.readUInt32LE(0) !== 0x6d736100) throw new Error(`${file} is not a wasm module`);
const kept = [b.subarray(0, 8)];
let p = 8;
const leb = () => {
  let r = 0;
  let shift = 0;
  let byte;
  do {
    byte = b[p++];
    r += (byte & 0x7f) * 2 ** shift;
    shift += 7;
  } while (byte & 0x80);
  return r;
};
let dropped = 0;
while (p < b.length) {
  const at = p;
  const id = b[p++];
  const size = leb();
  const body = p;
  let isName = false;
  if (id === 0) {
    const n = leb();
    isName = b.subarray(p, p + n).toString() === "name";
  }
  if (isName) dropped += body + size - at;
  else kept.push(b.subarray(at, body + size));
  p = body + size;
}
if (dropped) writeFileSync(file, Buffer.concat(kept));
