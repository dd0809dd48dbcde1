#!/usr/bin/env bash
# npm test: set up, build, run the native crates' tests, then the integration tests against
# the built worker in workerd (each test file starts and stops its own, on a free port).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"
bash scripts/setup.sh
bash scripts/build.sh
say "native tests (core crate)"
cargo test -p paymos-core
say "integration tests (Miniflare/workerd, local D1 and queues)"
node --test --test-concurrency=1 --test-timeout=600000 tests/*.test.mjs
