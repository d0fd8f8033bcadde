import { loadCoreModule } from '#core-module';
import { PostboxError } from '../errors.js';

/** The ABI version this shim speaks (docs/ABI.md). */
export const CORE_ABI_VERSION = 2;

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
  pb_numbers_out?(): number;
  pb_admit_numbers?(now: number, deadlineAt: number, leaseExpiresAt: number, timeoutMs: number, heartbeatMs: number, attempts: number): number;
  pb_pump_numbers?(
    concurrency: number, running: number, buffered: number, settles: number, mayClaim: number, remaining: number,
    slowestRecentMs: number, oldestSettleAgeMs: number, slackMs: number, statementMs: number, maxBatch: number,
    maxJobs: number, claimed: number,
  ): number;
  pb_settle_ok_numbers?(now: number, attempts: number, crashes: number, streak: number, maxAttempts: number): number;
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
  /** A view of the numeric entries' outputs, made again only if the memory's buffer changes. */
  #outView: Float64Array | null = null;

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
    // UTF-8 takes at most 3 bytes per UTF-16 unit: encode straight into the core's buffer
    // (no intermediate copy), then tell the core how many bytes were written.
    const capacity = input.length * 3;
    const ptr = ex.pb_alloc(capacity);
    if (ptr === 0) throw new PostboxError('core_oom', `core could not allocate ${capacity} bytes`);
    try {
      const { written } = encoder.encodeInto(input, new Uint8Array(ex.memory.buffer, ptr, capacity));
      (ex[`pb_${family}`] as (p: number, l: number) => number)(ptr, written);
      const out = new Uint8Array(ex.memory.buffer, ex.pb_result_ptr(), ex.pb_result_len());
      return JSON.parse(decoder.decode(out));
    } finally {
      ex.pb_free(ptr);
    }
  }

  /**
   * pb_claim `admit` through the core's numeric entry (no JSON either way: the drain asks once
   * per started job). Input the entry refuses goes to the JSON op, which throws the typed error.
   */
  admit(input: AdmitInput): AdmitAnswer {
    const ex = this.#exports;
    // `attempts: null` is refused by the JSON op; the numeric entry cannot tell it from absent.
    if (ex.pb_admit_numbers && ex.pb_numbers_out && input.attempts !== null) {
      const rc = ex.pb_admit_numbers(input.now, input.deadlineAt, input.leaseExpiresAt, input.timeoutMs, orAbsent(input.heartbeatMs), orAbsent(input.attempts));
      if (rc === 2) return { start: false, reason: 'released' };
      if (rc === 3) return { start: false, reason: 'claim_late' };
      if (rc === 1) {
        const out = this.#numbersOut(ex);
        const answer: AdmitAnswer = { start: true, deadline: out[0]!, timerMs: out[1]! };
        if (out[2] !== ABSENT) answer.attempt = out[2]!;
        if (out[3] !== ABSENT) {
          answer.stopAt = out[3]!;
          answer.heartbeatAt = out[4] === ABSENT ? null : out[4]!;
        }
        return answer;
      }
    }
    return this.call<AdmitAnswer>('claim', { op: 'admit', ...input });
  }

  /**
   * pb_claim `pump` through the core's numeric entry (the drain asks once per handler that
   * ends). Input the entry refuses goes to the JSON op, which throws the typed error.
   */
  pump(input: PumpInput): PumpAnswer {
    const ex = this.#exports;
    // `maxBatch: null` is refused by the JSON op; the numeric entry cannot tell it from absent.
    // A lane paused by a flow limit asks the JSON op (the numeric entry has no throttle wait).
    if (ex.pb_pump_numbers && ex.pb_numbers_out && input.maxBatch !== null && (input.throttleWaitMs ?? null) === null) {
      const rc = ex.pb_pump_numbers(
        input.concurrency, input.running, input.buffered, input.settles, input.mayClaim ? 1 : 0, orAbsent(input.remaining),
        orAbsent(input.slowestRecentMs), orAbsent(input.oldestSettleAgeMs), orAbsent(input.slackMs), orAbsent(input.statementMs),
        orAbsent(input.maxBatch), orAbsent(input.maxJobs), orAbsent(input.claimed),
      );
      const action = PUMP_ACTIONS[rc];
      if (action) {
        const out = this.#numbersOut(ex);
        return { action, claim: out[0]!, waitMs: out[1] === ABSENT ? null : out[1]! };
      }
    }
    return this.call<PumpAnswer>('claim', { op: 'pump', ...input });
  }

  /**
   * pb_settle for an `ok` outcome through the core's numeric entry (the drain settles every
   * succeeded job). Null when the entry is missing or refuses the input: ask the JSON op then,
   * which decides the same or names the bad field.
   */
  settleOk(input: SettleOkInput): SettleOkAnswer | null {
    const ex = this.#exports;
    if (!ex.pb_settle_ok_numbers || !ex.pb_numbers_out) return null;
    const rc = ex.pb_settle_ok_numbers(input.now, input.attempts, input.crashes, input.streak, orAbsent(input.maxAttempts));
    if (rc !== 1) return null;
    const out = this.#numbersOut(ex);
    const status = JOB_STATUSES[out[0]!];
    if (status === undefined) return null;
    return {
      status, dueAt: out[1] === ABSENT ? null : out[1]!, attempts: out[2]!, crashes: out[3]!, streak: out[4]!,
      finished: out[5] === 1, charged: out[6] === 1, attempt: out[7]!,
    };
  }

  #numbersOut(ex: CoreExports): Float64Array {
    const ptr = ex.pb_numbers_out!();
    if (this.#outView === null || this.#outView.buffer !== ex.memory.buffer || this.#outView.byteOffset !== ptr) {
      this.#outView = new Float64Array(ex.memory.buffer, ptr, NUMBERS_OUT);
    }
    return this.#outView;
  }

  /** Calls one family with a value; returns the result, or throws on an error document. */
  call<T>(family: CoreFamily, input: unknown): T {
    const out = this.callText(family, family === 'policy' ? definitionJson(input) : JSON.stringify(input));
    if (isCoreError(out)) throw new PostboxError(out.error.code, `core ${family}: ${out.error.message}`);
    return out as T;
  }
}

/**
 * A definition as JSON for the core to check. JSON.stringify writes NaN and ±Infinity as null,
 * which the core reads as "not set" (no limit, the default): they go as the strings "NaN",
 * "Infinity" and "-Infinity" instead, so the core refuses them, naming the field.
 */
export function definitionJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => (typeof v === 'number' && !Number.isFinite(v) ? String(v) : v));
}

/** pb_claim `admit`'s input (docs/ABI.md). */
export interface AdmitInput {
  now: number;
  deadlineAt: number;
  leaseExpiresAt: number;
  timeoutMs: number;
  heartbeatMs: number | null;
  attempts?: number;
}

/** pb_claim `admit`'s answer. */
export type AdmitAnswer =
  | { start: true; deadline: number; timerMs: number; attempt?: number; stopAt?: number; heartbeatAt?: number | null }
  | { start: false; reason: 'released' | 'claim_late' };

/** pb_claim `pump`'s input (docs/ABI.md); null where a fact is not known. */
export interface PumpInput {
  concurrency: number;
  running: number;
  buffered: number;
  settles: number;
  mayClaim: boolean;
  remaining: number | null;
  slowestRecentMs: number | null;
  oldestSettleAgeMs: number | null;
  slackMs: number | null;
  statementMs: number | null;
  maxBatch?: number;
  maxJobs?: number | null;
  claimed?: number | null;
  /** Claims paused by a flow limit resume after this long (ms); null: not paused. */
  throttleWaitMs?: number | null;
}

/** pb_claim `pump`'s answer. */
export interface PumpAnswer {
  action: 'claim' | 'settle' | 'wait' | 'done';
  claim: number;
  waitMs: number | null;
}

/** pb_settle's input for an `ok` outcome: the job's counters (maxAttempts null when it has no budget of its own). */
export interface SettleOkInput {
  now: number;
  attempts: number;
  crashes: number;
  streak: number;
  maxAttempts: number | null;
}

/** pb_settle's answer for an `ok` outcome, less what is fixed for it (no code, text or events; attempt outcome ok). */
export interface SettleOkAnswer {
  status: (typeof JOB_STATUSES)[number];
  dueAt: number | null;
  attempts: number;
  crashes: number;
  streak: number;
  finished: boolean;
  charged: boolean;
  attempt: number;
}

/** Job statuses as pb_settle_ok_numbers numbers them (wasm/include/postbox/numbers.h). */
const JOB_STATUSES = ['pending', 'running', 'retrying', 'succeeded', 'dead', 'cancelled', 'waiting'] as const;
/** How many f64 outputs a numeric entry leaves at most. */
const NUMBERS_OUT = 8;
const PUMP_ACTIONS = [undefined, 'claim', 'settle', 'wait', 'done'] as const;
/** Absent, for the numeric entries (whose inputs are otherwise never negative). */
const ABSENT = -1;
const orAbsent = (v: number | null | undefined): number => v ?? ABSENT;

export function isCoreError(value: unknown): value is CoreErrorDoc {
  return typeof value === 'object' && value !== null && 'error' in value;
}

let shared: Core | undefined;

/** The isolate's core instance, created on first use. */
export function getCore(): Core {
  shared ??= new Core(loadCoreModule());
  return shared;
}
