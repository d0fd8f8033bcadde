#!/usr/bin/env node
// Differential test: the same generated inputs (mutate.mjs: corpus mutations and random bytes
// from a fixed seed) go to every entry of the three builds; result bytes and return codes must be
// identical. Fails naming the first differing input (hex) and entry, and counts the others.
//
//   node tests/corpus/differential.mjs [--inputs N] [--seed S]     (defaults 100000, 6)
//
// Paths as in run.mjs (POSTBOX_CORPUS_CLI, POSTBOX_WASI_WASM, POSTBOX_EMSCRIPTEN_WASM).
// Last line: `differential: N passed, M failed` (calls per build that agree or differ).
import { spawn } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FAMILIES, decodeBatch, encodeBatch, loadWasm, paths } from './lib.mjs';
import { generateInputs } from './mutate.mjs';

const option = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
};
const count = option('inputs', 100000);
const seed = option('seed', 6);
const CHUNK = 5000; // inputs per native process

const work = mkdtempSync(join(tmpdir(), 'postbox-differential-'));
const children = new Set();
process.on('exit', () => {
  for (const child of children) child.kill();
  rmSync(work, { recursive: true, force: true });
});

// Runs one chunk on the native CLI with files for stdin and stdout, so the child never waits
// on this process's event loop while the wasm builds run here.
function startNative(calls, tag) {
  const inFile = join(work, `in-${tag}`);
  const outFile = join(work, `out-${tag}`);
  writeFileSync(inFile, encodeBatch(calls));
  const stdin = openSync(inFile, 'r');
  const stdout = openSync(outFile, 'w');
  const child = spawn(paths.native, ['--batch'], { stdio: [stdin, stdout, 'pipe'] });
  children.add(child);
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (status, signal) => {
      children.delete(child);
      closeSync(stdin);
      closeSync(stdout);
      if (status !== 0) return reject(new Error(`${paths.native} --batch exited ${status ?? signal}: ${stderr}`));
      const out = readFileSync(outFile);
      rmSync(inFile);
      rmSync(outFile);
      resolve(decodeBatch(out, calls.length));
    });
  });
}

function runWasm(call, calls) {
  return calls.map(([family, bytes]) => {
    try {
      return call(family, bytes);
    } catch (e) {
      return { rc: -1, out: Buffer.from(`<trap: ${e.message}>`) };
    }
  });
}

const show = (r) => `rc ${r.rc}: ${r.out.length > 600 ? `${r.out.subarray(0, 600)}… (${r.out.length} bytes)` : r.out}`;

function report(index, family, bytes, [a, b, c]) {
  console.error(`differential: FAIL input #${index} (seed ${seed}) to pb_${family}: the builds differ`);
  console.error(`  input (${bytes.length} bytes, hex): ${bytes.toString('hex')}`);
  console.error(`  native:     ${show(a)}`);
  console.error(`  wasi:       ${show(b)}`);
  console.error(`  emscripten: ${show(c)}`);
  if (bytes.length <= 256) {
    const escaped = [...bytes].map((x) => `\\x${x.toString(16).padStart(2, '0')}`).join('');
    console.error(`  reproduce:  printf '${escaped}' | ${paths.native} ${family}`);
  }
}

const started = Date.now();
const inputs = generateInputs(count, seed);
const wasi = await loadWasm(paths.wasi);
const emscripten = await loadWasm(paths.emscripten);
const chunkCalls = (k) =>
  inputs.slice(k * CHUNK, (k + 1) * CHUNK).flatMap((bytes) => FAMILIES.map((family) => [family, bytes]));
const chunks = Math.ceil(count / CHUNK);
// Two native chunks in flight: the (Debug) native build is the slowest of the three, and the
// machine has 2 cores.
const native = new Map();
const startChunk = (k) => k < chunks && native.set(k, startNative(chunkCalls(k), k));
startChunk(0);
startChunk(1);
let decisions = 0;
let differing = 0;
for (let k = 0; k < chunks; k++) {
  const calls = chunkCalls(k);
  const fromWasi = runWasm(wasi, calls);
  const fromEmscripten = runWasm(emscripten, calls);
  const fromNative = await native.get(k);
  native.delete(k);
  startChunk(k + 2);
  for (let i = 0; i < calls.length; i++) {
    const results = [fromNative[i], fromWasi[i], fromEmscripten[i]];
    const [a, b, c] = results;
    if (a.rc === b.rc && a.rc === c.rc && a.out.equals(b.out) && a.out.equals(c.out)) {
      if (a.rc === 0) decisions++;
      continue;
    }
    if (differing++ === 0) report(k * CHUNK + Math.floor(i / FAMILIES.length), ...calls[i], results);
  }
}

const calls = count * FAMILIES.length;
const ms = Date.now() - started;
if (differing > 0) {
  console.log(`differential: ${count} inputs x ${FAMILIES.length} entries: the builds differ on ${differing} calls (seed ${seed}, ${ms} ms)`);
} else {
  console.log(`differential: ${count} inputs x ${FAMILIES.length} entries, 3 builds identical ` +
    `(seed ${seed}; ${calls} calls per build: ${decisions} decisions, ${calls - decisions} error documents; ${ms} ms)`);
}
console.log(`differential: ${calls - differing} passed, ${differing} failed`);
process.exit(differing > 0 ? 1 : 0);
