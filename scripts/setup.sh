#!/usr/bin/env bash
# Idempotent set-up for a fresh machine: the wasm target, worker-build, a wasm-bindgen-cli
# matching Cargo.lock exactly, the npm packages, .dev.vars, and for the tests (npm test sets
# PAYMOS_SETUP_TESTS=1) the Python virtualenv .venv and Debian's chromium. Skips whatever is
# already there.
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"

WORKER_BUILD_VERSION="0.8.7"

command -v cargo >/dev/null || { say "cargo is missing: install Rust with rustup first"; exit 1; }
command -v node >/dev/null || { say "node is missing: install Node.js 20 or newer first"; exit 1; }

if ! rustup target list --installed 2>/dev/null | grep -qx wasm32-unknown-unknown; then
  say "adding the wasm32-unknown-unknown target"
  rustup target add wasm32-unknown-unknown
fi

# The tools at opt-level 1, not 3: worker-build and wasm-bindgen-cli took 374 s to install
# against 428 s (measured with a shared target directory, which saved wasm-bindgen-cli 8 s of
# 162, so it is left out), and wasm-bindgen ran on the worker's wasm in the same 170 ms.
cargo_install() { # name version: --locked first; a lagging registry index can make it fail, so retry without
  say "installing $1 $2 (first time only; a few minutes on 2 cores)"
  CARGO_PROFILE_RELEASE_OPT_LEVEL=1 cargo install "$1" --version "$2" --locked ||
    CARGO_PROFILE_RELEASE_OPT_LEVEL=1 cargo install "$1" --version "$2"
}

# The Debian, Python and npm installs wait mostly on the network and the disk, cargo's on the
# CPU: on a fresh machine the first run in the background while cargo compiles the two tools
# (they took about 1 min of the 8 min set-up in turn; the two cargo installs side by side took
# 422 s against 428 s one after the other, so they stay in turn). Their output goes to a log,
# printed if they fail.
other_installs() {
  # The Python packages the tests use (requirements-dev.txt, pinned) in a virtualenv under the
  # repository, .venv (git-ignored): made once, installed again whenever requirements-dev.txt
  # differs from what was last installed. Debian's python3 needs python3-venv for `-m venv`.
  # npm start and the builds need no Python: only npm test (PAYMOS_SETUP_TESTS=1) asks for it
  VENV="$ROOT/.venv"
  if [ "${PAYMOS_SETUP_TESTS:-0}" = 1 ]; then
    if [ ! -x "$VENV/bin/python" ]; then
      if ! command -v python3 >/dev/null; then
        say "installing Debian's python3 and python3-venv (first time only; for the tests' PyJWT)"
        apt_install python3 python3-venv
      fi
      say "making the Python virtualenv .venv (first time only)"
      if ! python3 -m venv "$VENV" 2>/dev/null; then
        rm -rf "$VENV"
        say "python3 -m venv needs Debian's python3-venv: installing it"
        apt_install python3-venv
        python3 -m venv "$VENV"
      fi
    fi
    if ! cmp -s requirements-dev.txt "$VENV/.requirements-dev.txt"; then
      say "installing the Python packages of requirements-dev.txt into .venv"
      "$VENV/bin/python" -m pip install --disable-pip-version-check --quiet -r requirements-dev.txt
      cp requirements-dev.txt "$VENV/.requirements-dev.txt"
    fi
  fi

  # npm ci when node_modules is missing or older than the lockfile
  if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    say "installing npm packages (npm ci)"
    npm ci --no-audit --no-fund
  fi
  # Debian's chromium, for the admin page's browser test (tests/admin_page.test.mjs drives
  # /usr/bin/chromium with playwright-core; playwright itself downloads nothing): npm test asks
  # for it with PAYMOS_SETUP_TESTS=1, npm start does not need it
  if [ "${PAYMOS_SETUP_TESTS:-0}" = 1 ] && [ ! -x /usr/bin/chromium ]; then
    say "installing Debian's chromium (first time only; for the admin page's browser test)"
    apt_install chromium
  fi
  # curl and jq, which the docs' commands use and tests/docs_commands*.test.mjs run as typed
  local missing=()
  for tool in curl jq; do command -v "$tool" >/dev/null || missing+=("$tool"); done
  if [ "${PAYMOS_SETUP_TESTS:-0}" = 1 ] && [ ${#missing[@]} -gt 0 ]; then
    say "installing ${missing[*]} (first time only; the docs' commands use them)"
    apt_install "${missing[@]}"
  fi
}
OTHER_LOG="$(mktemp)"
other_installs >"$OTHER_LOG" 2>&1 &
OTHER_PID=$!
# should a cargo install fail, leave only once the others have finished (an apt-get cut short
# would leave dpkg's lock and a half-installed package behind)
trap 'wait "$OTHER_PID" 2>/dev/null || true; rm -f "$OTHER_LOG"' EXIT

if [ "$(worker-build --version 2>/dev/null || true)" != "$WORKER_BUILD_VERSION" ]; then
  cargo_install worker-build "$WORKER_BUILD_VERSION"
fi

WB_VERSION="$(wasm_bindgen_version)"
[ -n "$WB_VERSION" ] || { say "no wasm-bindgen in Cargo.lock"; exit 1; }
if [ "$(wasm-bindgen --version 2>/dev/null | awk '{print $2}')" != "$WB_VERSION" ]; then
  cargo_install wasm-bindgen-cli "$WB_VERSION"
fi

if ! wait "$OTHER_PID"; then
  cat "$OTHER_LOG"
  say "installing the Python, npm or Debian packages failed (above)"; exit 1
fi
grep -F '[paymos' "$OTHER_LOG" >&2 || true

if [ ! -f .dev.vars ]; then
  say "creating .dev.vars from .dev.vars.example (development secrets)"
  cp .dev.vars.example .dev.vars
else
  # a .dev.vars made by an older checkout: add the names it lacks, keep what it has
  while IFS= read -r line; do
    name="${line%%=*}"
    case "$line" in ''|'#'*) continue ;; esac
    if ! grep -q "^$name=" .dev.vars; then
      say "adding $name to .dev.vars (from .dev.vars.example)"
      printf '%s\n' "$line" >> .dev.vars
    fi
  done < .dev.vars.example
fi

