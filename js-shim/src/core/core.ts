import { loadCoreModule } from '#core-module';
import { PostboxError } from '../errors.js';

/** The ABI version this shim speaks (docs/ABI.md). */
export const CORE_ABI_VERSION = 1;

/** A decision family of the core: one exported entry each. */
export type CoreFamily =
  | 'policy'
  | 'settle'
  | 'claim'
  | 'sweep'
  | 'enqueue'
  | 'cron'
  | 'nudge'
  | 'backlog'
  | 'operate'
  | 'webhook';

/** An error document returned by the core. */
export interface CoreErrorDoc {
  error: { code: string; message: string };
}

interface CoreExports {
  memory: WebAssembly.Memory;
  pb_abi_version(): number;
  pb_alloc(len: number): number;
  pb_free(ptr: number): void;
  pb_result_ptr(): number;
  pb_result_len(): number;
  [entry: `pb_${string}`]: unknown;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * The core's WASI imports are never used for I/O (the core does none); they exist only
 * because libc links them. Each answers "nothing done".
 */
function wasiStubs(): WebAssembly.ModuleImports {
  const zero = () => 0;
  return new Proxy({} as WebAssembly.ModuleImports, {
    get: (_target, name) => (name === 'proc_exit' ? () => { throw new PostboxError('core_trap', 'core called proc_exit'); } : zero),
  });
}

/**
 * One instance of the decision core. Created once per isolate (workerd) or process (Node)
 * by {@link getCore}; every call is synchronous and does no I/O.
 */
export class Core {
  readonly #exports: CoreExports;

  constructor(module: WebAssembly.Module) {
    const imports: WebAssembly.Imports = {};
    for (const entry of WebAssembly.Module.imports(module)) {
      if (entry.kind !== 'function') continue;
      imports[entry.module] ??= wasiStubs();
    }
    const instance = new WebAssembly.Instance(module, imports);
    this.#exports = instance.exports as unknown as CoreExports;
    const init = (this.#exports as unknown as Record<string, unknown>)['_initialize'];
    if (typeof init === 'function') (init as () => void)();
    const version = this.#exports.pb_abi_version();
    if (version !== CORE_ABI_VERSION) {
      throw new PostboxError('core_mismatch', `core ABI ${version}, shim expects ${CORE_ABI_VERSION}`);
    }
  }

  /** Calls one family with a JSON text; returns the parsed result or error document. */
  callText(family: CoreFamily, input: string): unknown {
    const ex = this.#exports;
    const bytes = encoder.encode(input);
    const ptr = ex.pb_alloc(bytes.length);
    if (ptr === 0) throw new PostboxError('core_oom', `core could not allocate ${bytes.length} bytes`);
    try {
      new Uint8Array(ex.memory.buffer, ptr, bytes.length).set(bytes);
      (ex[`pb_${family}`] as (p: number, l: number) => number)(ptr, bytes.length);
      const out = new Uint8Array(ex.memory.buffer, ex.pb_result_ptr(), ex.pb_result_len());
      return JSON.parse(decoder.decode(out));
    } finally {
      ex.pb_free(ptr);
    }
  }

  /** Calls one family with a value; returns the result, or throws on an error document. */
  call<T>(family: CoreFamily, input: unknown): T {
    const out = this.callText(family, JSON.stringify(input));
    if (isCoreError(out)) throw new PostboxError(out.error.code, `core ${family}: ${out.error.message}`);
    return out as T;
  }
}

export function isCoreError(value: unknown): value is CoreErrorDoc {
  return typeof value === 'object' && value !== null && 'error' in value;
}

let shared: Core | undefined;

/** The isolate's core instance, created on first use. */
export function getCore(): Core {
  shared ??= new Core(loadCoreModule());
  return shared;
}
