#!/usr/bin/env bash
# npm run bench: native micro-benchmarks (criterion), then the worker under load beside the
# two comparison workers, in the same runtime as npm start; the cost per delivery; keeping up;
# the way to the order system; the deploy bundle's size. Pass --quick for a short run.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"
bash scripts/setup.sh
bash scripts/build.sh
# --only=growth (alone): the growth benchmark only (bench/growth.mjs: health checks at 10,000
# and 1,000,000 deliveries), without the load benchmarks and their builds
only="$(printf '%s\n' "$@" | sed -n 's/^--only=//p' | tail -n 1)"
if [ "$only" = "growth" ]; then
  say "the growth benchmark: health checks at 10,000 and 1,000,000 deliveries"
  exec node bench/growth.mjs
fi
# the glue floor (crates/glue-floor), built as the worker is, with the same local tools
(
  export WASM_BINDGEN_BIN="$(command -v wasm-bindgen)" WASM_OPT_BIN="$ROOT/node_modules/.bin/wasm-opt"
  if [ -x node_modules/esbuild/bin/esbuild ]; then export ESBUILD_BIN="$ROOT/node_modules/esbuild/bin/esbuild"; fi
  cd crates/glue-floor && worker-build --release > /dev/null
)
cargo build --release -p paymos-cli
# the JavaScript receiver runs the core's own statements and plans (bench/js-receiver.js)
cargo run -q -p paymos-core --example statements_json -- bench/statements.json
say "deploy bundle (wrangler deploy --dry-run)"
dry="$(mktemp -d)"
trap 'rm -rf "$dry"' EXIT
CI=true WRANGLER_SEND_METRICS=false npx wrangler deploy --dry-run --outdir "$dry/out" > "$dry/log" 2>&1 \
  || { cat "$dry/log"; exit 1; }
grep "Total Upload" "$dry/log" >&2
export PAYMOS_BENCH_DEPLOY_SIZE="$(grep -o "Total Upload: .*" "$dry/log")"
say "native micro-benchmarks: signature verification and envelope parsing, 1 KB and 16 KB"
cargo bench -p paymos-core --bench verify_parse 2>&1 | grep -E "^(verify|parse_envelope)|time:|thrpt:" || true
say "the worker under load (loopback)"
node bench/run.mjs "$@"
# the growth benchmark with the full run, or when --only names it among others
if [ -z "$only" ] || printf '%s' ",$only," | grep -q ",growth,"; then
  say "the growth benchmark: health checks at 10,000 and 1,000,000 deliveries"
  node bench/growth.mjs
fi
