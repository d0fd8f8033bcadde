// Shared by generate.mjs and run.mjs: reading the corpus, and calling the three builds of the core
// (the native postbox-corpus-cli in batch mode, the wasi and the Emscripten wasm in this process).
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

export const here = dirname(fileURLToPath(import.meta.url));
export const root = resolve(here, '../..');
// The families as the core lists them (wasm/include/postbox/family_list.h, its one list).
export const FAMILIES = [...readFileSync(new URL('../../wasm/include/postbox/family_list.h', import.meta.url), 'utf8')
  .match(/#define POSTBOX_FAMILIES\(X\)(.*)/)[1].matchAll(/X\((\w+)\)/g)].map((m) => m[1]);

export const paths = {
  native: process.env.POSTBOX_CORPUS_CLI ?? join(root, 'build/native/postbox-corpus-cli'),
  wasi: process.env.POSTBOX_WASI_WASM ?? join(root, 'js-shim/core/postbox-core.wasm'),
  emscripten: process.env.POSTBOX_EMSCRIPTEN_WASM ?? join(root, 'js-shim/core/postbox-core.emscripten.wasm'),
};

// The input bytes of a case: `input` (text), `inputBase64` (raw bytes), or `inputFill`
// ({head, fill, count, tail}: head + fill repeated count times + tail, for multi-MiB inputs
// that would bloat the corpus files).
export function inputBytes(c) {
  if (c.inputBase64 !== undefined) return Buffer.from(c.inputBase64, 'base64');
  if (c.inputFill !== undefined) {
    const { head = '', fill, count, tail = '' } = c.inputFill;
    return Buffer.from(head + fill.repeat(count) + tail, 'utf8');
  }
  return Buffer.from(c.input, 'utf8');
}

export function corpusFile(family) {
  return join(here, `${family}.jsonl`);
}

export function readCorpus() {
  const cases = [];
  for (const file of readdirSync(here).filter((f) => f.endsWith('.jsonl')).sort()) {
    const lines = readFileSync(join(here, file), 'utf8').split('\n');
    lines.forEach((line, i) => {
      if (line.trim() === '') return;
      const c = JSON.parse(line);
      if (!FAMILIES.includes(c.family)) throw new Error(`${file}:${i + 1}: unknown family ${c.family}`);
      cases.push({ ...c, file, line: i + 1 });
    });
  }
  return cases;
}

const u32 = (n) => {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(n >>> 0);
  return b;
};

// The `postbox-corpus-cli --batch` records for [family, bytes] calls.
export function encodeBatch(calls) {
  const parts = [];
  for (const [family, bytes] of calls) {
    const name = Buffer.from(family, 'utf8');
    parts.push(u32(name.length), name, u32(bytes.length), bytes);
  }
  return Buffer.concat(parts);
}

// Its output: `count` results [{rc, out: Buffer}].
export function decodeBatch(out, count, cli = paths.native) {
  const results = [];
  let at = 0;
  for (let i = 0; i < count; i++) {
    if (at + 8 > out.length) throw new Error(`${cli} --batch: output ends after ${i} of ${count} results`);
    const rc = out.readInt32LE(at);
    const len = out.readUInt32LE(at + 4);
    results.push({ rc, out: out.subarray(at + 8, at + 8 + len) });
    at += 8 + len;
  }
  return results;
}

// Runs every [family, bytes] call through one `postbox-corpus-cli --batch` process.
// Returns [{rc, out: Buffer}].
export function runNative(calls, cli = paths.native) {
  if (!existsSync(cli)) {
    throw new Error(`${cli} not found: build it with \`cmake --preset native && cmake --build --preset native --target postbox-corpus-cli\``);
  }
  const r = spawnSync(cli, ['--batch'], { input: encodeBatch(calls), maxBuffer: 1 << 30 });
  if (r.error) throw r.error;
  if (r.status !== 0) throw new Error(`${cli} --batch exited ${r.status}${r.signal ? ` (${r.signal})` : ''}: ${r.stderr}`);
  return decodeBatch(r.stdout, calls.length, cli);
}

// A minimal WASI preview1 (and Emscripten `env`) import object: the core does no I/O, so every
// function is a stub; fd_write still reports what it was given, to stderr.
function stubImports(module, getMemory) {
  const imports = {};
  const ENOSYS = 52;
  const impl = {
    fd_write(fd, iovs, iovsLen, nwrittenPtr) {
      const view = new DataView(getMemory().buffer);
      let total = 0;
      for (let i = 0; i < iovsLen; i++) {
        const ptr = view.getUint32(iovs + i * 8, true);
        const len = view.getUint32(iovs + i * 8 + 4, true);
        process.stderr.write(Buffer.from(getMemory().buffer, ptr, len));
        total += len;
      }
      view.setUint32(nwrittenPtr, total, true);
      return 0;
    },
    fd_close: () => 0,
    fd_seek: () => ENOSYS,
    proc_exit(code) {
      throw new Error(`wasm called proc_exit(${code})`);
    },
    environ_sizes_get(countPtr, sizePtr) {
      const view = new DataView(getMemory().buffer);
      view.setUint32(countPtr, 0, true);
      view.setUint32(sizePtr, 0, true);
      return 0;
    },
    args_sizes_get(countPtr, sizePtr) {
      const view = new DataView(getMemory().buffer);
      view.setUint32(countPtr, 0, true);
      view.setUint32(sizePtr, 0, true);
      return 0;
    },
    emscripten_notify_memory_growth: () => {},
  };
  for (const imp of WebAssembly.Module.imports(module)) {
    if (imp.kind !== 'function') throw new Error(`unexpected ${imp.kind} import ${imp.module}.${imp.name}`);
    imports[imp.module] ??= {};
    imports[imp.module][imp.name] =
      impl[imp.name] ??
      (() => {
        throw new Error(`wasm called unstubbed import ${imp.module}.${imp.name}`);
      });
  }
  return imports;
}

// Instantiates one wasm build; returns call(family, bytes) -> {rc, out: Buffer}.
export async function loadWasm(file) {
  if (!existsSync(file)) throw new Error(`${file} not found: run \`bash scripts/build-core.sh wasi emscripten\``);
  const module = await WebAssembly.compile(readFileSync(file));
  let memory;
  const instance = await WebAssembly.instantiate(
    module,
    stubImports(module, () => memory),
  );
  const x = instance.exports;
  memory = x.memory;
  if (typeof x._initialize === 'function') x._initialize();
  if (x.pb_abi_version() !== 2) throw new Error(`${file}: pb_abi_version() is ${x.pb_abi_version()}, expected 2`);
  return (family, bytes) => {
    const entry = x[`pb_${family}`];
    if (typeof entry !== 'function') throw new Error(`${file}: no export pb_${family}`);
    const ptr = x.pb_alloc(bytes.length);
    if (ptr === 0) throw new Error(`${file}: pb_alloc(${bytes.length}) returned 0`);
    new Uint8Array(memory.buffer, ptr, bytes.length).set(bytes);
    const rc = entry(ptr, bytes.length);
    const at = x.pb_result_ptr() >>> 0;
    const len = x.pb_result_len();
    const out = Buffer.from(new Uint8Array(memory.buffer, at, len)); // a copy: the next call reuses it
    x.pb_free(ptr);
    return { rc, out };
  };
}
