# Shared helpers for the project's scripts. Sourced, not run.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PATH="$HOME/.cargo/bin:$ROOT/node_modules/.bin:$PATH"
# In CI each line carries the time of day, so that a run's log shows where its minutes went.
say() { printf '\033[1m[paymos%s]\033[0m %s\n' "${CI:+ $(date -u +%H:%M:%S)}" "$*" >&2; }
# The wasm-bindgen version the worker links against, read from Cargo.lock.
wasm_bindgen_version() {
  awk '/^name = "wasm-bindgen"$/ { getline; gsub(/version = |"/, ""); print; exit }' "$ROOT/Cargo.lock"
}
# Installs Debian packages: apt-get as root, or through sudo without a password; otherwise says
# what to run and fails.
apt_install() {
  if [ "$(id -u)" -eq 0 ]; then
    apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y "$@"
  elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
    sudo apt-get update && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y "$@"
  else
    say "not root and no sudo: install them with 'apt-get install -y $*' as root"
    return 1
  fi
}
