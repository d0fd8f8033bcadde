// The simulated world: the outbox's clock, its job kinds and their handlers, the same on every
// store. Every decision a store could make differently from another must come from the store,
// never from this file: handlers decide their outcome from the payload and the attempt number
// alone, and every stored time is placed so that the clock's small moves within one step (a
// millisecond per handler run, which differs between stores) never decide whether a job is due.
//
// Time grid. Each step starts on a whole second (TICK); a drain or sweep moves the clock by
// 1 ms per handler run, so its events fall in [step, step + 500 ms), and the runner then moves
// the clock to the next whole second. Every wait the outbox stores is placed at or past half a
// second after a whole second (retry after n·1000+500 ms, a thrown attempt's clamped 500 ms, a
// crash's jittered 810-900, 1710-1900 or 2610-2900 ms from a step's start, delays n·1000+500,
// retention n·1000+500, the rate window 60,500 ms), or exactly on one: such a time is due at the
// same step on every store. Released children are due at once, where every store runs them.
import { z } from 'zod';
import { defineJob, fail, ok, retry, type JobSpec } from '../../js-shim/src/index.ts';
import type { JobDefinition, ParentOutcomes, PlainOutcome } from '../../js-shim/src/types.ts';

export const T0 = 1_767_225_600_000; // 2026-01-01T00:00:00Z, on the grid
export const TICK = 1_000;
/** The most a step may move the clock: beyond it the grid's half-second margin is gone. */
export const MAX_DRIFT_MS = 499;

export const TENANTS = [null, 'a', 'b'] as const;
export type Tenant = (typeof TENANTS)[number];

/** Retention, past half a second so a job's removal falls on the same sweep everywhere. */
export const RETENTION = { succeededMs: 600_500, deadMs: 1_800_500 } as const;

/** The kinds' limits, also read by the invariant checker (it checks them on the ledger). */
export const LIMITS = {
  capped: { concurrency: 2 },
  tenant: { concurrency: 3, tenantConcurrency: 1 },
  rated: { starts: 2, perMs: 60_500 },
} as const;

export type KindName = 'plain' | 'capped' | 'tenant' | 'rated' | 'bulk' | 'done';
export const kindOf = (name: KindName): string => `sim.${name}`;
export const nameOf = (kind: string): KindName => kind.slice(4) as KindName;
/**
 * Kinds a crash may be injected on: a claim that never settles holds its kind's slots until the
 * lease runs out, and a drain on a clock that stands still polls for such a slot forever.
 */
export const CRASHABLE: readonly KindName[] = ['plain', 'bulk'];

/**
 * A handler's script: one letter per attempt (the last repeats). o: ok, r: retry({ code: r<n> })
 * after the payload's `a` ms, f: fail({ code: 'f' }), t: throw. The rate-limited kind only
 * succeeds or fails: a retry's due time carries the step's drift, and which of its jobs take the
 * rate's slots would then depend on it.
 */
export const payloadSchema = z.object({ s: z.string().regex(/^[orft]{1,6}$/), a: z.number().int().min(1), tag: z.string() });
export type SimPayload = z.infer<typeof payloadSchema>;
export const completionSchema = z.object({ batch: z.string().min(1) });

/** What handlers saw, for the invariant checker: runs since the last step, and any overlap beyond a limit. */
export class Probe {
  readonly runs: { id: string; attempt: number; parents: ParentOutcomes | null }[] = [];
  readonly violations: string[] = [];
  readonly #live = new Map<string, number>();

  enter(key: string, limit: number | undefined, what: string): void {
    const n = (this.#live.get(key) ?? 0) + 1;
    this.#live.set(key, n);
    if (limit !== undefined && n > limit) this.violations.push(`${what}: ${n} handlers of ${key} at once, limit ${limit}`);
  }

  leave(key: string): void {
    this.#live.set(key, (this.#live.get(key) ?? 1) - 1);
  }

  take(): { runs: Probe['runs']; violations: string[] } {
    return { runs: this.runs.splice(0), violations: this.violations.splice(0) };
  }
}

const retryPolicy = {
  maxAttempts: 4,
  // A crash's backoff (no per-code rule applies to it): jittered by at most a tenth, each entry
  // stays within its second and past its half.
  backoff: { scheduleMs: [900, 1_900, 2_900] },
  // A throw (code unexpected) waits exactly half a second: the backoff's jitter would cross the grid.
  perCode: { unexpected: { maxDelayMs: 500 } },
};

/** Lets the drain's other slots start before this handler ends, so overlapping handlers are observed. */
async function yieldTurns(n: number): Promise<void> {
  for (let i = 0; i < n; i++) await Promise.resolve();
}

/** The world's job kinds on `clock`, their handlers reporting to `probe`. */
export function simJobs(clock: { now: number }, probe: Probe): Record<KindName, JobDefinition<any, any, PlainOutcome>> {
  type Limits = Pick<JobSpec<typeof payloadSchema, unknown, PlainOutcome>, 'lane' | 'concurrency' | 'tenantConcurrency' | 'rateLimit'>;
  const scripted = (name: Exclude<KindName, 'done'>, limits: Limits): JobDefinition<SimPayload, unknown, PlainOutcome> =>
    defineJob({
      kind: kindOf(name),
      payload: payloadSchema,
      timeoutMs: 5_000,
      retry: retryPolicy,
      ...limits,
      async handle(p, ctx): Promise<PlainOutcome> {
        // A handler run takes a millisecond of the outbox's clock: attempts get a length, so
        // the ledger shows which ran at once.
        clock.now += 1;
        const tenantKey = `${ctx.kind}|${ctx.tenantKey ?? '-'}`;
        probe.enter(ctx.kind, limits.concurrency, 'concurrency');
        probe.enter(tenantKey, limits.tenantConcurrency, 'tenantConcurrency');
        probe.runs.push({ id: ctx.jobId, attempt: ctx.attempt, parents: ctx.parents });
        await yieldTurns(4);
        probe.leave(ctx.kind);
        probe.leave(tenantKey);
        const step = p.s[Math.min(ctx.attempt, p.s.length) - 1];
        if (step === 'r') return retry({ code: `r${ctx.attempt}`, after: p.a });
        if (step === 'f') return fail({ code: 'f' });
        if (step === 't') throw new Error(`thrown at attempt ${ctx.attempt}`);
        return ok();
      },
    });
  return {
    plain: scripted('plain', {}),
    capped: scripted('capped', { concurrency: LIMITS.capped.concurrency }),
    tenant: scripted('tenant', { concurrency: LIMITS.tenant.concurrency, tenantConcurrency: LIMITS.tenant.tenantConcurrency }),
    rated: scripted('rated', { rateLimit: { starts: LIMITS.rated.starts, perMs: LIMITS.rated.perMs } }),
    bulk: scripted('bulk', { lane: 'bulk' }),
    done: defineJob({
      kind: kindOf('done'),
      payload: completionSchema,
      timeoutMs: 5_000,
      retry: retryPolicy,
      async handle(_p, ctx): Promise<PlainOutcome> {
        clock.now += 1;
        probe.runs.push({ id: ctx.jobId, attempt: ctx.attempt, parents: ctx.parents });
        return ok();
      },
    }),
  };
}

/** Deterministic job ids: the seed, then a counter, so every store sees the same ids in the same order. */
export function idGenerator(seed: number): () => string {
  let n = 0;
  const s = (seed >>> 0).toString(16).padStart(8, '0');
  return () => `${s}-5eed-4000-8000-${(++n).toString(16).padStart(12, '0')}`;
}
