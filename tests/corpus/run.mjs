#!/usr/bin/env node
// Runs the decision corpus (tests/corpus/*.jsonl) on the three builds of the core and fails on
// any byte difference from `expected`:
//   native      build/native/postbox-corpus-cli --batch   (one process for all cases)
//   wasi        js-shim/core/postbox-core.wasm             (instantiated here, stub WASI imports)
//   emscripten  js-shim/core/postbox-core.emscripten.wasm  (same)
// Override the paths with POSTBOX_CORPUS_CLI, POSTBOX_WASI_WASM, POSTBOX_EMSCRIPTEN_WASM;
// pick builds with `--builds native,wasi`. Node 20, no dependencies.
// Last line: `corpus: N passed, M failed` (N + M = cases x builds); exit 1 on any failure.
import { FAMILIES, inputBytes, loadWasm, paths, readCorpus, runNative } from './lib.mjs';

const arg = process.argv.find((a) => a.startsWith('--builds='))?.slice('--builds='.length) ??
  (process.argv.includes('--builds') ? process.argv[process.argv.indexOf('--builds') + 1] : undefined);
const builds = (arg ?? 'native,wasi,emscripten').split(',').filter(Boolean);
for (const b of builds) if (!(b in paths)) throw new Error(`unknown build ${b} (native, wasi, emscripten)`);

const cases = readCorpus();
const inputs = cases.map((c) => inputBytes(c));
const show = (buf) => {
  const text = buf.toString('utf8');
  return text.length > 800 ? `${text.slice(0, 800)}… (${buf.length} bytes)` : text;
};

let passed = 0;
let failed = 0;
const failedBy = {};
const started = Date.now();
for (const build of builds) {
  let results;
  try {
    if (build === 'native') {
      results = runNative(cases.map((c, i) => [c.family, inputs[i]]));
    } else {
      const call = await loadWasm(paths[build]);
      results = cases.map((c, i) => {
        try {
          return call(c.family, inputs[i]);
        } catch (e) {
          return { rc: -1, out: Buffer.from(`<trap: ${e.message}>`) };
        }
      });
    }
  } catch (e) {
    console.error(`FAIL ${build}: could not run the build: ${e.message}`);
    failed += cases.length;
    failedBy[build] = cases.length;
    continue;
  }
  let buildFailed = 0;
  cases.forEach((c, i) => {
    const expected = Buffer.from(c.expected, 'utf8');
    const { rc, out } = results[i];
    const expectedRc = c.expected.startsWith('{"error":') ? 1 : 0;
    if (out.equals(expected) && rc === expectedRc) {
      passed++;
      return;
    }
    failed++;
    buildFailed++;
    console.error(`FAIL [${build}] ${c.family}/${c.name} (${c.file}:${c.line})`);
    if (rc !== expectedRc) console.error(`  return code: expected ${expectedRc}, got ${rc}`);
    console.error(`  expected: ${show(expected)}`);
    console.error(`  actual:   ${show(out)}`);
  });
  if (buildFailed) failedBy[build] = buildFailed;
}

const perFamily = FAMILIES.map((f) => `${f} ${cases.filter((c) => c.family === f).length}`).join(', ');
console.log(`corpus: ${cases.length} cases (${perFamily}) x ${builds.length} builds (${builds.join(', ')}) in ${Date.now() - started} ms`);
if (failed) console.log(`corpus: failures by build: ${JSON.stringify(failedBy)}`);
console.log(`corpus: ${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
