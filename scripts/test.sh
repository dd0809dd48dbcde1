#!/usr/bin/env bash
# npm test: set up, build, run the native crates' tests, then the integration tests against
# the built worker in workerd (each test file starts and stops its own, on a free port).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"
bash scripts/setup.sh
# Debian's chromium, for the admin page's browser test (tests/admin_page.test.mjs drives
# /usr/bin/chromium with playwright-core; nothing is downloaded by playwright itself)
if [ ! -x /usr/bin/chromium ]; then
  say "installing Debian's chromium (first time only; for the admin page's browser test)"
  if [ "$(id -u)" -eq 0 ]; then
    apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium
  elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    sudo apt-get update && sudo apt-get install -y chromium
  else
    say "not root and no sudo: install it with 'apt-get install -y chromium' as root"
    exit 1
  fi
fi
# `wrangler deploy --dry-run` builds the worker (scripts/build.sh, through [build]) and checks
# the deploy configuration offline, no account needed: a broken wrangler.toml fails here
say "build + deploy dry run (wrangler deploy --dry-run, offline)"
mkdir -p build
if ! CI=true WRANGLER_SEND_METRICS=false wrangler deploy --dry-run --outdir build/dry-run >build/dry-run.log 2>&1; then
  cat build/dry-run.log; say "wrangler deploy --dry-run failed"; exit 1
fi
grep -E "wasm size|Total Upload" build/dry-run.log || true
cargo build --release -p paymos-cli
say "native tests (core crate, paymos CLI)"
cargo test -p paymos-core -p paymos-cli
say "simulation (paymos-sim: the shared SQL and plan under an adversarial world, 2,000 seeds)"
cargo test --release -p paymos-sim --no-fail-fast
say "integration tests (Miniflare/workerd, local D1 and queues)"
node --test --test-concurrency=1 --test-timeout=600000 tests/*.test.mjs
