#!/usr/bin/env bash
# npm run bench: native micro-benchmarks (criterion), then the worker under load beside the
# two comparison workers, in the same runtime as npm start. Pass --quick for a short run.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"
bash scripts/setup.sh
bash scripts/build.sh
cargo build --release -p paymos-cli
say "native micro-benchmarks: signature verification and envelope parsing, 1 KB and 16 KB"
cargo bench -p paymos-core --bench verify_parse 2>&1 | grep -E "^(verify|parse_envelope)|time:|thrpt:" || true
say "the worker under load (loopback)"
node bench/run.mjs "$@"
