#!/usr/bin/env bash
# npm test: set up, build, run the native crates' tests, then the integration tests against
# the built worker in workerd (each test file starts and stops its own, on a free port).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"
# with Debian's chromium for the admin page's browser test (tests/admin_page.test.mjs)
PAYMOS_SETUP_TESTS=1 bash scripts/setup.sh
# `wrangler deploy --dry-run` builds the worker (scripts/build.sh, through [build]) and checks
# the deploy configuration offline, no account needed: a broken wrangler.toml fails here
say "build + deploy dry run (wrangler deploy --dry-run, offline)"
mkdir -p build
if ! CI=true WRANGLER_SEND_METRICS=false wrangler deploy --dry-run --outdir build/dry-run >build/dry-run.log 2>&1; then
  cat build/dry-run.log; say "wrangler deploy --dry-run failed"; exit 1
fi
grep -E "wasm size|Total Upload" build/dry-run.log || true
# The native release builds (the CLI, the simulator) skip the link-time optimisation that
# Cargo.toml's release profile gives the wasm: on 2 cores it cost 55 s of links, and 2,000 seeds
# ran as fast without it (118 and 120 s). Set on these two commands only: the wasm (the dry run
# above, and cron_trigger's npm start below) keeps it.
CARGO_PROFILE_RELEASE_LTO=false cargo build --release -p paymos-cli
say "native tests (core crate, paymos CLI)"
cargo test -p paymos-core -p paymos-cli
say "simulation (paymos-sim: the shared SQL and plan under an adversarial world, 2,000 seeds)"
CARGO_PROFILE_RELEASE_LTO=false cargo test --release -p paymos-sim --no-fail-fast
# Two files at a time: a file spends most of its time waiting on workerd, its queues and timers,
# so two share the 2 cores (17.4 min one at a time, 10.8 two at a time, 255 of 255 both ways;
# 4 min since each worker's D1 is a copy of one migrated once: tests/helpers/worker.mjs).
# Each file starts its own workerd on free ports with its own state directory. The files that
# run `npm start`, `npm run demo` or `wrangler deploy` build through wrangler ([build] in
# wrangler.toml), which may rewrite build/ and public/admin/machine.json under the other files'
# feet, so they run alone, after them.
say "integration tests (Miniflare/workerd, local D1 and queues; two files at a time)"
ALONE=(tests/cron_trigger.test.mjs tests/docs_commands_npm_start.test.mjs)
TOGETHER=()
for f in tests/*.test.mjs; do [[ " ${ALONE[*]} " == *" $f "* ]] || TOGETHER+=("$f"); done
rc=0
node --test --test-concurrency=2 --test-timeout=600000 "${TOGETHER[@]}" || rc=$?
say "integration tests that build through wrangler (npm start, the demo, deploy), one at a time"
node --test --test-concurrency=1 --test-timeout=900000 "${ALONE[@]}" || rc=$?
say "npm test: done (exit $rc)"
exit "$rc"
