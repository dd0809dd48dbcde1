#!/usr/bin/env bash
# npm start: set up, migrate the local D1, build and serve on http://127.0.0.1:8787
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"
bash scripts/setup.sh
say "applying migrations to the local D1"
wrangler d1 migrations apply DB --local
PORT="${PORT:-8787}"
say "serving on http://127.0.0.1:$PORT (cron triggers: curl 'http://127.0.0.1:$PORT/cdn-cgi/handler/scheduled?cron=*/5+*+*+*+*')"
# wrangler dev runs scripts/build.sh itself ([build] in wrangler.toml); --test-scheduled exposes the cron trigger locally
exec wrangler dev --ip 127.0.0.1 --port "$PORT" --test-scheduled "$@"
