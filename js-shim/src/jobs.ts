import type { StandardSchemaV1 } from '@standard-schema/spec';
import { getCore } from './core/core.js';
import { PostboxError } from './errors.js';
import type { CancelOutcome, Classify, CommitOutcome, CorePolicy, DeferOutcome, FailOutcome, HandlerOutcome, JobContext, JobDefinition, OkOutcome, Queryable, RetryOutcome, RetryPolicy } from './types.js';

/** What `defineJob` takes. */
export interface JobSpec<Schema extends StandardSchemaV1, Deps, Out extends HandlerOutcome = HandlerOutcome> {
  /** Unique name of the job kind, e.g. `email.welcome`: `[A-Za-z0-9._:-]`, ≤ 128 bytes. */
  kind: string;
  /** Any Standard Schema validator (zod, valibot, arktype). Checked at enqueue and before each run. */
  payload: Schema;
  /** How long one attempt may run, ≤ 10 minutes. The lease is derived from it. */
  timeoutMs: number;
  /** Routing lane; jobs without one run on `default`. */
  lane?: string;
  retry?: RetryPolicy;
  /** Emit `streak_warning` when one error code repeats this many times in a row. */
  warnAtStreak?: number;
  /** Maps a thrown error to an outcome. Return `undefined` for the default (`retry({ code: 'unexpected' })`). */
  classify?: Classify;
  /**
   * Lease by heartbeat: the lease is a window of three beats (`everyMs`, default a tenth of the
   * timeout within 1-10 s) instead of the whole timeout, and each beat extends it, so a crashed
   * attempt is recovered about one window after its last beat. The outbox beats while the
   * handler runs unless `auto: false`, where the handler must call `ctx.heartbeat()` itself
   * at least every `everyMs`.
   */
  heartbeat?: boolean | { everyMs?: number; auto?: boolean };
  /**
   * At most this many attempts of the kind run at once, across every consumer, lane, isolate
   * and process (1-10000). An attempt counts from its claim until it settles or its lease runs
   * out. Jobs beyond it wait, uncharged, and are claimed as attempts end.
   */
  concurrency?: number;
  /**
   * At most this many attempts of the kind run at once for any one tenant (jobs without a
   * `tenantKey` count as one tenant), across every consumer (1-10000, at most `concurrency`).
   * Other tenants' jobs are claimed past a tenant at its limit; its own wait, uncharged.
   */
  tenantConcurrency?: number;
  /** The priority (0-10, higher first) its jobs get when enqueued without one; default 0. See `EnqueueOptions.priority`. */
  priority?: number;
  /**
   * At most `starts` attempts of the kind start per `perMs`, across every consumer, and at
   * most `burst` (default `starts`) at once: no window of `burst × perMs / starts` ms sees more
   * than `burst` starts. Throttled jobs wait, uncharged, and are not claimed until they may start.
   *
   * @example `{ starts: 20, perMs: 1000, burst: 5 }`: a provider's 20 requests a second.
   */
  rateLimit?: { starts: number; perMs: number; burst?: number };
  handle(payload: StandardSchemaV1.InferOutput<Schema>, ctx: JobContext<Deps>): Promise<Out>;
}

/**
 * Defines a job: a kind, a payload schema, a timeout and a handler returning an outcome.
 * The policy is checked by the core at once; a bad one throws `PostboxError('invalid_policy')`.
 *
 * @example
 * ```ts
 * export const welcomeEmail = defineJob({
 *   kind: 'email.welcome',
 *   payload: z.object({ userId: z.string() }),
 *   timeoutMs: 30_000,
 *   async handle({ userId }, ctx) {
 *     await sendWelcome(userId, { signal: ctx.signal, idempotencyKey: ctx.idempotencyKey });
 *     return ok();
 *   },
 * });
 * ```
 */
export function defineJob<Schema extends StandardSchemaV1, Out extends HandlerOutcome = HandlerOutcome>(
  spec: JobSpec<Schema, unknown, Out>,
): JobDefinition<StandardSchemaV1.InferOutput<Schema>, unknown, Out> {
  return buildJob(spec);
}

/**
 * Binds the deps type once: jobs defined with the returned function get a typed `ctx.deps`,
 * and `createOutbox` then requires matching `deps`.
 *
 * @example
 * ```ts
 * const defineJob = defineJobFor<{ mailer: Mailer }>();
 * ```
 */
export function defineJobFor<Deps>() {
  return <Schema extends StandardSchemaV1, Out extends HandlerOutcome = HandlerOutcome>(
    spec: JobSpec<Schema, Deps, Out>,
  ): JobDefinition<StandardSchemaV1.InferOutput<Schema>, Deps, Out> => buildJob(spec);
}

function buildJob<Schema extends StandardSchemaV1, Deps, Out extends HandlerOutcome>(
  spec: JobSpec<Schema, Deps, Out>,
): JobDefinition<StandardSchemaV1.InferOutput<Schema>, Deps, Out> {
  if (!spec || typeof spec.handle !== 'function') throw new PostboxError('invalid_job', 'defineJob: `handle` must be a function');
  if (!spec.payload || typeof spec.payload['~standard']?.validate !== 'function') {
    throw new PostboxError('invalid_job', `defineJob(${String(spec.kind)}): \`payload\` must be a Standard Schema`);
  }
  const policy = getCore().call<CorePolicy>('policy', {
    kind: spec.kind,
    timeoutMs: spec.timeoutMs,
    ...(spec.lane === undefined ? {} : { lane: spec.lane }),
    ...(spec.retry === undefined ? {} : { retry: spec.retry }),
    warnAtStreak: spec.warnAtStreak ?? null,
    ...(spec.heartbeat === undefined ? {} : { heartbeat: heartbeatOption(spec.kind, spec.heartbeat) }),
    ...(spec.concurrency === undefined ? {} : { concurrency: spec.concurrency }),
    ...(spec.tenantConcurrency === undefined ? {} : { tenantConcurrency: spec.tenantConcurrency }),
    ...(spec.priority === undefined ? {} : { priority: spec.priority }),
    ...(spec.rateLimit === undefined ? {} : { rateLimit: spec.rateLimit }),
  });
  return Object.freeze({
    kind: policy.kind,
    payload: spec.payload,
    timeoutMs: policy.timeoutMs,
    lane: policy.lane,
    retry: spec.retry,
    warnAtStreak: spec.warnAtStreak,
    classify: spec.classify,
    autoHeartbeat: policy.heartbeatMs !== undefined && !(typeof spec.heartbeat === 'object' && spec.heartbeat?.auto === false),
    handle: spec.handle as JobDefinition<StandardSchemaV1.InferOutput<Schema>, Deps, Out>['handle'],
    policy,
  });
}

/** The core's shape of the heartbeat option (`auto` is the shim's alone: who beats, not how). */
function heartbeatOption(kind: string, option: JobSpec<StandardSchemaV1, unknown>['heartbeat']): unknown {
  if (option && typeof option === 'object') {
    const { auto, ...rest } = option;
    if (auto !== undefined && typeof auto !== 'boolean') throw new PostboxError('invalid_policy', `defineJob(${kind}): heartbeat.auto must be a boolean`);
    return rest;
  }
  return option;
}

/**
 * The job succeeded. `commit` runs in the same transaction as the `succeeded` transition
 * (PostgreSQL; a SQLite outbox refuses a job that may return it).
 */
export function ok(): OkOutcome;
export function ok(options: { commit: (tx: Queryable) => Promise<unknown> }): CommitOutcome;
export function ok(options?: { commit?: (tx: Queryable) => Promise<unknown> }): OkOutcome | CommitOutcome;
export function ok(options?: { commit?: (tx: Queryable) => Promise<unknown> }): OkOutcome | CommitOutcome {
  return options?.commit ? { type: 'ok', commit: options.commit } : { type: 'ok' };
}

/** Retry with backoff, or after `after` ms (e.g. a provider's Retry-After). */
export function retry(options: { code: string; after?: number }): RetryOutcome {
  return options.after === undefined ? { type: 'retry', code: options.code } : { type: 'retry', code: options.code, after: options.after };
}

/** Dead-letter now: no more retries. */
export function fail(options: { code: string }): FailOutcome {
  return { type: 'fail', code: options.code };
}

/** Cancel the job: the work is moot. */
export function cancel(options: { reason: string }): CancelOutcome {
  return { type: 'cancel', reason: options.reason };
}

/**
 * Not attempted: try again after `after` ms, charging nothing (the retry budget and schedule
 * stay where they were). For a handler that finds it must not try yet, e.g. a paused webhook
 * endpoint. A job deferred forever never finishes: defer only on a condition that ends.
 */
export function defer(options: { code: string; after: number }): DeferOutcome {
  return { type: 'defer', code: options.code, after: options.after };
}

/** The classification of a thrown error when `classify` has no opinion (the core applies it: docs/ABI.md, pb_settle `thrown`). */
export function defaultClassify(_error: unknown): HandlerOutcome {
  return retry({ code: 'unexpected' });
}
