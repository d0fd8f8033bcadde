#!/usr/bin/env bash
# The whole test suite (`npm test`). Runs scripts/setup.sh first (idempotent: a no-op on a
# machine that has everything; POSTBOX_SKIP_SETUP=1 skips it).
#
#   0. programs: scripts/check-programs.mjs (every program the project runs comes from a Debian
#      package scripts/setup.sh installs) and its tests
#   a. core: scripts/build-core.sh (native + ASan doctests through ctest, wasi + Emscripten builds)
#   b. corpus: tests/corpus/run.mjs (identical decisions from the three builds; natively also with
#      SIMDJSON_FORCE_IMPLEMENTATION set), then tests/corpus/differential.mjs (100,000 generated
#      inputs to every entry of the three builds, byte for byte)
#   c. shim: scripts/gen-sql.mjs, the `postbox` package build (tsc), typecheck of the reference Worker,
#      examples, chaos run and simulation (tests/sim), scripts/check-package.mjs, and
#      scripts/check-readme.mjs (every ts block of README.md typechecks against the built package)
#      with its test
#   d. integration: tests/shim/*.test.ts in workerd (Miniflare) against PostgreSQL 17; then the
#      SQL-surface files (sql_surface_tests below) and the planner- and connection-sensitive ones
#      (server_tests) against Debian's 15, and the SQL-surface files against 14
#   e. end to end: tests/e2e/*.test.ts, then tests/chaos/*.test.ts (workers killed mid-drain, a
#      database restart: no job lost, no stale settle applied)
#   f. fuzz: scripts/fuzz.sh (only when CI=true)
#
# The first failing stage stops the run (set -e). POSTBOX_TEST_ONLY=d (or "c d") runs only
# the named stages.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

if [ "${POSTBOX_SKIP_SETUP:-}" != "1" ]; then
  bash scripts/setup.sh
fi

only="${POSTBOX_TEST_ONLY:-}"
started=$SECONDS
stage_started=$SECONDS
current=""

wanted() { [ -z "$only" ] || [[ " $only " == *" $1 "* ]]; }
stage() {
  current="$1: $2"
  stage_started=$SECONDS
  printf '\n==================== stage %s ====================\n' "$current"
}
done_stage() { printf -- '---- stage %s: ok (%ss)\n' "$current" $((SECONDS - stage_started)); }
skip() { printf -- '---- stage %s: skipped (%s)\n' "$current" "$1"; }
on_exit() {
  local rc=$?
  if [ $rc -ne 0 ] && [ -n "$current" ]; then
    printf '\n!!!! stage %s FAILED (exit %s) after %ss\n' "$current" "$rc" $((SECONDS - stage_started)) >&2
  fi
}
trap on_exit EXIT

# node's test runner; its summary (# tests / # pass / # fail) is what CI reads.
# A hung run fails after POSTBOX_TEST_TIMEOUT seconds (default 1200) instead of blocking CI.
node_tests() {
  timeout --kill-after=30 "${POSTBOX_TEST_TIMEOUT:-1200}" node --import tsx --test --test-concurrency=1 "$@"
}

shopt -s nullglob

# 0. ------------------------------------------------------------------------------------------
# Before any build: a program that only a hand-installed package provides fails here, by name.
if wanted 0; then
  stage 0 "programs (scripts/check-programs.mjs)"
  # check-readme's test needs the built package: stage c runs it.
  program_tests=()
  for t in tests/scripts/*.test.mjs; do [[ "$t" == */check-readme.test.mjs ]] || program_tests+=("$t"); done
  node_tests "${program_tests[@]}"
  node scripts/check-programs.mjs
  done_stage
fi

# a. ------------------------------------------------------------------------------------------
if wanted a; then
  stage a "core (scripts/build-core.sh)"
  bash scripts/build-core.sh native asan wasi emscripten
  done_stage
fi

# b. ------------------------------------------------------------------------------------------
if wanted b; then
  stage b "decision corpus and differential (tests/corpus)"
  node tests/corpus/run.mjs
  # The core pins simdjson's kernel at build time, so this variable must change nothing.
  for forced in "" bogus; do
    echo "corpus: native build with SIMDJSON_FORCE_IMPLEMENTATION='$forced'"
    SIMDJSON_FORCE_IMPLEMENTATION="$forced" node tests/corpus/run.mjs --builds native
  done
  node tests/corpus/differential.mjs
  done_stage
fi

# c. ------------------------------------------------------------------------------------------
if wanted c; then
  stage c "shim build + typecheck"
  node scripts/gen-sql.mjs
  npm run -w postbox build
  npx --no-install tsc -p worker/tsconfig.json --noEmit
  npx --no-install tsc -p tests/types/tsconfig.json
  npx --no-install tsc -p tests/chaos/tsconfig.json
  npx --no-install tsc -p tests/sim/tsconfig.json
  npx --no-install tsc -p examples/tsconfig.json
  node scripts/check-package.mjs
  node_tests tests/scripts/check-readme.test.mjs
  node scripts/check-readme.mjs
  node scripts/state-diagram.mjs --check
  echo "typecheck: js-shim, worker, examples, type tests, chaos run, simulation and README blocks ok; the README's state diagram is the core's"
  done_stage
else
  # Later stages import js-shim/src/generated/; keep it current whatever ran.
  node scripts/gen-sql.mjs >/dev/null
fi

# d. ------------------------------------------------------------------------------------------
shim_tests=(tests/shim/*.test.ts)
sql_surface_tests=(tests/shim/{migrate,outbox,store-conformance,pg-writes,pg-arrays,roles,operate,inspect,poison,sweep-steps,drizzle,enqueue-many,schedules,named,flow-limits}.test.ts)
for t in "${sql_surface_tests[@]}"; do [ -f "$t" ] || { echo "scripts/test.sh: $t is listed in sql_surface_tests but does not exist" >&2; exit 1; }; done
# The files whose outcome depends on the server build as well as its SQL: plans and their costs
# (Debian's builds compile plans over jit_above_cost), sessions killed mid-statement, handler sessions.
server_tests=(tests/shim/{consumer,faults,handler-db}.test.ts)
for t in "${server_tests[@]}"; do [ -f "$t" ] || { echo "scripts/test.sh: $t is listed in server_tests but does not exist" >&2; exit 1; }; done
if wanted d; then
  if [ ${#shim_tests[@]} -eq 0 ]; then echo "no tests/shim/*.test.ts" >&2; exit 1; fi
  stage d "integration on PostgreSQL 17 (embedded-postgres)"
  POSTBOX_PG=embedded node_tests "${shim_tests[@]}"
  done_stage
  # The other servers run the files whose SQL is the store's whole surface (schema, migrations,
  # every statement, grants, drizzle's view of the schema), and 15 also those that depend on the
  # server's build; the rest of the suite exercises the same statements through workerd.
  # POSTBOX_FULL_MATRIX=1 runs the whole suite on 15 as well.
  if [ "${POSTBOX_FULL_MATRIX:-}" = "1" ]; then pg15_tests=("${shim_tests[@]}"); else pg15_tests=("${sql_surface_tests[@]}" "${server_tests[@]}"); fi
  stage d "integration on PostgreSQL 15 (Debian): ${#pg15_tests[@]} files"
  POSTBOX_PG=debian15 node_tests "${pg15_tests[@]}"
  done_stage
  stage d "integration on PostgreSQL 14 (embedded-postgres, the oldest supported): the SQL surface"
  POSTBOX_PG=embedded14 node_tests "${sql_surface_tests[@]}"
  done_stage
fi

# e. ------------------------------------------------------------------------------------------
e2e_tests=(tests/e2e/*.test.ts tests/chaos/*.test.ts)
if wanted e; then
  stage e "end to end (tests/e2e, tests/chaos)"
  if [ ${#e2e_tests[@]} -gt 0 ]; then
    node_tests "${e2e_tests[@]}"
    done_stage
  else
    skip "no tests/e2e/*.test.ts"
  fi
fi

# f. ------------------------------------------------------------------------------------------
if wanted f; then
  stage f "fuzz (scripts/fuzz.sh)"
  if [ "${CI:-}" != "true" ]; then
    skip "CI is not true"
  else
    bash scripts/fuzz.sh
    done_stage
  fi
fi

current=""
printf '\n==================== all stages passed (%ss) ====================\n' $((SECONDS - started))
