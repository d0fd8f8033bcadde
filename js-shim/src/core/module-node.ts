import { readFileSync } from 'node:fs';

let cached: WebAssembly.Module | undefined;

/** Node: compile the core from the file shipped beside the package, once per process. */
export function loadCoreModule(): WebAssembly.Module {
  cached ??= new WebAssembly.Module(readFileSync(new URL('../../core/postbox-core.wasm', import.meta.url)));
  return cached;
}
