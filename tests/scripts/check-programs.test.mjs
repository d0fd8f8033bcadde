// The program check (scripts/check-programs.mjs) on small made-up repositories: it must find
// what a build invokes and refuse a program whose package setup.sh does not install.
import assert from 'node:assert/strict';
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { check, cmakePrograms, invokedPrograms, readSetupPackages, shellCommands, spawnedPrograms } from '../../scripts/check-programs.mjs';

function repo(files) {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'postbox-programs-'));
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(dir, name)), { recursive: true });
    writeFileSync(path.join(dir, name), text);
  }
  return dir;
}

test('shell scripts: command words, not arguments, strings, heredocs, case patterns or arrays', () => {
  const found = shellCommands(`#!/usr/bin/env bash
set -euo pipefail
packages=(
  clang-19 lld-19
)
jobs="$(nproc 2>/dev/null || echo 2)"   # nproc runs; echo is a builtin
f() { wasm-opt -O2 "$1" -o out; }
case "$x" in
  native|asan)
    cmake --preset "$x" && ctest --preset "$x"
    ;;
esac
node --input-type=module - <<'NODE'
console.log(notACommand)
NODE
echo 'quoted-word here' | grep -q quoted
"\${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y x
timeout --kill-after=30 600 node --test
`);
  assert.deepEqual([...found].sort(), ['apt-get', 'cmake', 'ctest', 'env', 'grep', 'node', 'nproc', 'timeout', 'wasm-opt']);
});

test('cmake toolchains and presets: compilers, archivers and find_program names', () => {
  assert.deepEqual([...cmakePrograms('set(CMAKE_C_COMPILER clang-19)\nset(CMAKE_AR llvm-ar-19 CACHE FILEPATH "a")\nfind_program(X em++ REQUIRED)')].sort(),
    ['clang-19', 'em++', 'llvm-ar-19']);
  assert.deepEqual([...cmakePrograms('{"CMAKE_CXX_COMPILER": "clang++-19"}')], ['clang++-19']);
});

test('node scripts: spawned names and binaries joined to a *_BIN directory; comments ignored', () => {
  // Built from pieces, so this file's own scan does not see a program here.
  const found = spawnedPrograms(`// ${'spawn'}('notme')
${'execFileSync'}('wat2wasm', [a]);
const pgCtl = path.join(DEBIAN15_BIN, 'pg_ctl');
spawnSync('sh', ['-c', 'command -v clang++-19 em++'])`);
  assert.deepEqual([...found].sort(), ['clang++-19', 'em++', 'pg_ctl', 'sh', 'wat2wasm']);
});

test("setup.sh's packages list is read word by word", () => {
  assert.deepEqual([...readSetupPackages('x\npackages=(\n  a b # c\n  d\n)\n')], ['a', 'b', 'd']);
});

test('a program the build calls whose package setup.sh does not install fails the check, naming the package', (t) => {
  // The fault this check exists for: the wasi toolchain calls llvm-ar-19 (Debian package llvm-19).
  const dir = repo({
    'cmake/wasi.cmake': 'set(CMAKE_AR llvm-ar-19 CACHE FILEPATH "archiver")\n',
    'scripts/setup.sh': 'packages=(\n  clang-19\n)\n',
    'scripts/programs.txt': 'llvm-ar-19 llvm-19 cmake/wasi.cmake\n',
  });
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const { problems } = check(dir);
  assert.ok(problems.some((p) => p.includes('Debian package llvm-19, which scripts/setup.sh does not install')), problems.join('\n'));
});

test('a program the build calls that programs.txt does not list fails the check', (t) => {
  const dir = repo({
    'scripts/build.sh': 'wasm-opt -O2 a.wasm -o b.wasm\n',
    'scripts/setup.sh': 'packages=(\n  binaryen\n)\n',
    'scripts/programs.txt': '',
  });
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  assert.deepEqual([...invokedPrograms(dir).keys()], ['wasm-opt']);
  assert.match(check(dir).problems.join('\n'), /wasm-opt \(run by scripts\/build.sh\) is not in scripts\/programs.txt/);
});

test('a listed package that does not own the program is caught', (t) => {
  const dir = repo({
    'scripts/build.sh': 'bash -c true\n',
    'scripts/setup.sh': 'packages=(\n  wabt\n)\n',
    'scripts/programs.txt': 'bash wabt lie\n',
  });
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  assert.match(check(dir).problems.join('\n'), /bash \(.*\) is owned by bash, not wabt/);
});

test("this repository passes: every program comes from setup.sh's packages", () => {
  const { problems } = check(path.resolve(import.meta.dirname, '../..'));
  assert.deepEqual(problems, []);
});
