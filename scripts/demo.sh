#!/usr/bin/env bash
# npm run demo: the receiver under `wrangler dev` (local D1 and queues), `paymos sandbox` as the
# provider API, and the `paymos` CLI driving both: a delivery, its duplicate, the retry ladder,
# the five-step idempotency check (with reconciliation) and a short load run.
#   PORT (8787) and SANDBOX_PORT (8790) choose the ports; DEMO_LOAD_SECONDS (5) the load run.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"

PORT="${PORT:-8787}"
SANDBOX_PORT="${SANDBOX_PORT:-8790}"
ORDERS_PORT="${ORDERS_PORT:-8791}"
DEMO_LOAD_SECONDS="${DEMO_LOAD_SECONDS:-5}"
URL="http://127.0.0.1:$PORT"
SANDBOX="http://127.0.0.1:$SANDBOX_PORT"
ORDERS="http://127.0.0.1:$ORDERS_PORT"
PAYMOS="${CARGO_TARGET_DIR:-$ROOT/target}/release/paymos"

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for p in "$PORT" "$SANDBOX_PORT" "$ORDERS_PORT"; do
  if port_busy "$p"; then say "port $p is in use (another npm start?): set PORT / SANDBOX_PORT"; exit 2; fi
done

bash scripts/setup.sh
say "building the CLI (cargo build -p paymos-cli --release)"
cargo build -p paymos-cli --release

# the development secrets the receiver runs with (.dev.vars, created by setup.sh)
dev_var() { sed -n "s/^$1=\"\{0,1\}\([^\"]*\)\"\{0,1\}\$/\1/p" .dev.vars | head -1; }
ADMIN_TOKEN="$(dev_var ADMIN_TOKEN)"
API_KEY="$(dev_var PAYMOS_API_KEY)"
SECRET="$(dev_var PAYMOS_WEBHOOK_SECRETS | cut -d, -f1)"
ORDER_SECRET="$(dev_var ORDER_SYSTEM_SECRET)"
export PAYMOS_WEBHOOK_SECRET="$SECRET"

LOGDIR="$(mktemp -d)"
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

say "starting the provider sandbox on $SANDBOX (log: $LOGDIR/sandbox.log)"
"$PAYMOS" sandbox --port "$SANDBOX_PORT" --api-key "$API_KEY" >"$LOGDIR/sandbox.log" 2>&1 &
PIDS+=($!)

say "starting the reference order system on $ORDERS (log: $LOGDIR/orders.log)"
"$PAYMOS" orders --port "$ORDERS_PORT" --secret "$ORDER_SECRET" >"$LOGDIR/orders.log" 2>&1 &
PIDS+=($!)

say "applying migrations to the local D1"
wrangler d1 migrations apply DB --local >"$LOGDIR/migrate.log" 2>&1
say "starting the receiver on $URL (wrangler dev builds it first; log: $LOGDIR/worker.log)"
wrangler dev --ip 127.0.0.1 --port "$PORT" --var "PAYMOS_API_BASE:$SANDBOX" --var "ORDER_SYSTEM_URL:$ORDERS" \
  --show-interactive-dev-session=false >"$LOGDIR/worker.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 300); do
  curl -fsS "$URL/healthz" >/dev/null 2>&1 && break
  sleep 1
done
curl -fsS "$URL/healthz" >/dev/null || { say "the receiver did not come up; see $LOGDIR/worker.log"; tail -20 "$LOGDIR/worker.log"; exit 1; }

step() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }

EVT="evt_demo$(date +%s)"
INV="inv_demo$(date +%s)"
step paymos send invoice.paid --to "$URL" --event-id "$EVT" --resource "$INV" --sandbox "$SANDBOX"
"$PAYMOS" send invoice.paid --to "$URL" --event-id "$EVT" --resource "$INV" --sandbox "$SANDBOX"
step paymos send invoice.paid --to "$URL" --event-id "$EVT" --resource "$INV" "  # the same delivery again"
"$PAYMOS" send invoice.paid --to "$URL" --event-id "$EVT" --resource "$INV"

step "the order system received the fulfilment (paymos orders, $ORDERS/received)"
for _ in $(seq 1 30); do
  grep -q "$INV" "$LOGDIR/orders.log" 2>/dev/null && break
  sleep 1
done
grep "$INV" "$LOGDIR/orders.log" || say "not shipped yet; see $LOGDIR/orders.log"

FREE=$((SANDBOX_PORT + 1)); while port_busy "$FREE"; do FREE=$((FREE + 1)); done
step paymos deliver invoice.paid --to "http://127.0.0.1:$FREE" --ladder --time-scale 3600 "  # nobody listens: 11 attempts in 16 s"
"$PAYMOS" deliver invoice.paid --to "http://127.0.0.1:$FREE" --ladder --time-scale 3600 || true
step paymos deliver invoice.paid --to "$URL" --ladder --time-scale 3600
"$PAYMOS" deliver invoice.paid --to "$URL" --ladder --time-scale 3600

step paymos check --to "$URL" --admin-token "…" --sandbox "$SANDBOX" --orders "$ORDERS"
"$PAYMOS" check --to "$URL" --admin-token "$ADMIN_TOKEN" --sandbox "$SANDBOX" --orders "$ORDERS"

step paymos load --to "$URL" --mode new --concurrency 4 --duration-seconds "$DEMO_LOAD_SECONDS"
"$PAYMOS" load --to "$URL" --mode new --concurrency 4 --duration-seconds "$DEMO_LOAD_SECONDS"
step paymos load --to "$URL" --mode duplicate --concurrency 4 --duration-seconds "$DEMO_LOAD_SECONDS"
"$PAYMOS" load --to "$URL" --mode duplicate --concurrency 4 --duration-seconds "$DEMO_LOAD_SECONDS"

say "done: the receiver's operator page is $URL/admin (token: ADMIN_TOKEN in .dev.vars)"
