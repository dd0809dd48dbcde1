#!/usr/bin/env bash
# Builds the Rust worker into build/index.js + build/index_bg.wasm with the locally installed
# wasm-bindgen (worker-build's own downloads come from hosts this machine cannot reach).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"
WASM_BINDGEN_BIN="$(command -v wasm-bindgen)"
export WASM_BINDGEN_BIN
# wasm-opt (binaryen, from the npm registry) and esbuild from the npm packages, so worker-build
# downloads nothing
export WASM_OPT_BIN="$ROOT/node_modules/.bin/wasm-opt"
[ -x "$WASM_OPT_BIN" ] || { say "node_modules/.bin/wasm-opt is missing: run scripts/setup.sh"; exit 1; }
if [ -x node_modules/esbuild/bin/esbuild ]; then export ESBUILD_BIN="$ROOT/node_modules/esbuild/bin/esbuild"; fi
export PAYMOS_BUILD_COMMIT="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
# wrangler dev runs this command twice as it starts: for its first bundle, and again when its
# file watcher is ready ("The file src,crates/paymos-core/src changed, restarting build..." with
# nothing changed; wrangler's own behaviour). A build whose inputs are as they were when build/
# was made is skipped: their paths, sizes and times, the commit, the tools and the options.
# PAYMOS_FORCE_BUILD=1 builds anyway.
inputs_stamp() {
  {
    echo "$PAYMOS_BUILD_COMMIT ${PAYMOS_KEEP_WASM_NAMES:-0} $(rustc -V)"
    "$WASM_BINDGEN_BIN" --version; "$WASM_OPT_BIN" --version
    env | grep -E '^(CARGO_PROFILE|CARGO_BUILD|RUSTFLAGS|CARGO_ENCODED_RUSTFLAGS)' | sort || true
    find src crates/paymos-core/src crates/paymos-core/examples crates/paymos-core/Cargo.toml \
      Cargo.toml Cargo.lock build.rs scripts/build.sh scripts/wasm-strip-names.mjs -type f -printf '%p %s %T@\n' | sort
  } | sha256sum | cut -d' ' -f1
}
stamp="$(inputs_stamp)"
if [ "${PAYMOS_FORCE_BUILD:-0}" != 1 ] && [ -f build/index.js ] && [ -f build/index_bg.wasm ] \
  && [ -f public/admin/machine.json ] && [ "$(cat build/.inputs 2>/dev/null)" = "$stamp" ]; then
  say "build/ is up to date (its inputs are as they were when it was built)"
  exit 0
fi
rm -f build/.inputs
# the operators' page (public/, Workers Static Assets) reads the event types and each resource
# kind's states from the core: public/admin/machine.json, generated here, never committed
cargo run -q -p paymos-core --example machine_json -- public/admin/machine.json
worker-build --release
# the entry: worker-build's module with the receive path's JavaScript driver in front
# (src/worker.js); its wasm import stays as worker-build wrote it, beside build/index.js
mv build/index.js build/glue.js
"${ESBUILD_BIN:-$ROOT/node_modules/.bin/esbuild}" src/worker.js --bundle --format=esm --minify --log-level=warning \
  --external:cloudflare:workers --external:./index_bg.wasm --outfile=build/index.js
rm build/glue.js
# worker-build keeps the wasm `name` section (function names: about 115 KB raw, 33 KB gzipped);
# only a debugger or a profiler reads it. PAYMOS_KEEP_WASM_NAMES=1 keeps it, e.g. for
# `twiggy top build/index_bg.wasm`.
if [ "${PAYMOS_KEEP_WASM_NAMES:-0}" != 1 ]; then
  node scripts/wasm-strip-names.mjs build/index_bg.wasm
fi
raw=$(stat -c %s build/index_bg.wasm)
gz=$(gzip -9 -c build/index_bg.wasm | wc -c)
say "wasm size: $raw bytes raw, $gz bytes gzipped (build/index_bg.wasm)"
echo "$stamp" > build/.inputs
