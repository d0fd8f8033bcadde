#!/usr/bin/env bash
# Fuzzes every entry of the core with libFuzzer + ASan + UBSan (preset `fuzz`, tests/fuzz/fuzz_entries.cpp).
#   FUZZ_SECONDS (default 60)  how long to run
#   FUZZ_JOBS    (default 1)   parallel fuzzing processes (-fork)
# The seed corpus is built from tests/corpus/*.jsonl (one file per case: family byte + input).
# New inputs found go to build/fuzz/corpus; crashes to build/fuzz/artifacts/. Any crash, leak,
# sanitizer report or broken invariant fails the script.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

seconds="${FUZZ_SECONDS:-60}"
jobs="${FUZZ_JOBS:-1}"

cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "$(nproc 2>/dev/null || echo 2)"

seeds=build/fuzz/seeds
work=build/fuzz/corpus
artifacts=build/fuzz/artifacts
rm -rf "$seeds"
mkdir -p "$seeds" "$work" "$artifacts"

# Family byte = index in fuzz_entries.cpp's table (policy settle claim sweep enqueue cron nudge backlog operate webhook).
node --input-type=module - "$seeds" <<'NODE'
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { FAMILIES, inputBytes, readCorpus } from './tests/corpus/lib.mjs';
const dir = process.argv[2];
let n = 0;
for (const c of readCorpus()) {
  if (c.inputFill !== undefined) continue; // multi-MiB size-limit cases
  const input = inputBytes(c);
  if (input.length > 64 * 1024) continue; // keep the seeds small
  const family = Buffer.from([FAMILIES.indexOf(c.family)]);
  writeFileSync(join(dir, `seed-${String(n++).padStart(4, '0')}`), Buffer.concat([family, input]));
}
console.log(`fuzz: ${n} seeds from tests/corpus`);
NODE

echo "fuzz: running build/fuzz/postbox-fuzz-entries for ${seconds}s"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
args=(-max_total_time="$seconds" -max_len=8192 -timeout=10 -rss_limit_mb=4096 -print_final_stats=1
      -artifact_prefix="$artifacts/" -dict=tests/fuzz/postbox.dict)
if [ "$jobs" -gt 1 ]; then args+=(-fork="$jobs"); fi
set +e
build/fuzz/postbox-fuzz-entries "${args[@]}" "$work" "$seeds"
rc=$?
set -e
if [ $rc -ne 0 ]; then
  echo "fuzz: FAILED (exit $rc); reproduce with: build/fuzz/postbox-fuzz-entries $artifacts/<crash-file>" >&2
  exit $rc
fi
echo "fuzz: ok (${seconds}s, no crash)"
