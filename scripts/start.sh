#!/usr/bin/env bash
# npm start: set up, migrate the local D1, build and serve on http://127.0.0.1:8787
#   PORT (8787) chooses the port; STATE_DIR, when set, is where the local D1 and R2 bucket persist
#   (wrangler's --persist-to; default .wrangler/state), e.g. a scratch copy next to your own.
#   Further arguments go to wrangler dev (e.g. --inspector-port 9230 beside another instance).
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"
bash scripts/setup.sh
PERSIST=()
if [ -n "${STATE_DIR:-}" ]; then PERSIST=(--persist-to "$STATE_DIR"); fi
say "applying migrations to the local D1${STATE_DIR:+ (state: $STATE_DIR)}"
wrangler d1 migrations apply DB --local ${PERSIST[@]+"${PERSIST[@]}"}
PORT="${PORT:-8787}"
# The cron trigger is wrangler's /__scheduled (the --test-scheduled middleware, inside the
# Worker's own fetch). The path wrangler itself suggests, /cdn-cgi/handler/scheduled, answers
# 500 `exception` for a Worker with [assets] in wrangler 4.86: Miniflare sends it to the assets
# RPC proxy, which has no scheduled handler (workers-sdk#9882, fixed in 4.99, which needs
# Node.js 22). README "Two commands" says more; tests/cron_trigger.test.mjs fires this line.
say "serving on http://127.0.0.1:$PORT (cron triggers: curl 'http://127.0.0.1:$PORT/__scheduled?cron=*/5+*+*+*+*')"
# wrangler dev runs scripts/build.sh itself ([build] in wrangler.toml)
exec wrangler dev --ip 127.0.0.1 --port "$PORT" --test-scheduled ${PERSIST[@]+"${PERSIST[@]}"} "$@"
