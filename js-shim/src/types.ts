import type { StandardSchemaV1 } from '@standard-schema/spec';

/** Anything with node-postgres's `query(text, values)`: a `Client`, `PoolClient` or `Pool`. */
export interface Queryable {
  query(text: string, values?: unknown[]): Promise<{ rows: any[]; rowCount: number | null }>;
}

/**
 * A lane's session: node-postgres's `Client` / `PoolClient`, which also take a named query
 * config. Postbox names its hot statements so the server plans them once per session.
 */
export interface LaneDb extends Queryable {
  query(text: string, values?: unknown[]): Promise<{ rows: any[]; rowCount: number | null }>;
  query(config: { name: string; text: string; values?: unknown[] }): Promise<{ rows: any[]; rowCount: number | null }>;
}

/**
 * The database a handler gets as `ctx.db`: a handler session of the drain's own (or, with
 * `handlerSessions: 0`, the lane's session), fenced so that every call rejects once the
 * attempt has returned or timed out. While its `transaction` is open, `query` joins it.
 */
export interface OutboxDb extends Queryable {
  /**
   * Runs `fn` in a transaction; commits if it resolves. Refused (`transaction_open`) while
   * another of this handler's ctx.db transactions is open.
   */
  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T>;
}

/** Success (`ok()`). */
export type OkOutcome = { readonly type: 'ok'; readonly commit?: undefined };
/** Success with work committed in the settlement's own transaction (`ok({ commit })`): PostgreSQL only. */
export type CommitOutcome = { readonly type: 'ok'; readonly commit: (tx: Queryable) => Promise<unknown> };
/** Retry with backoff (`retry()`). */
export type RetryOutcome = { readonly type: 'retry'; readonly code: string; readonly after?: number };
/** Dead-letter now (`fail()`). */
export type FailOutcome = { readonly type: 'fail'; readonly code: string };
/** The work is moot (`cancel()`). */
export type CancelOutcome = { readonly type: 'cancel'; readonly reason: string };
/** Not attempted, try later, nothing charged (`defer()`). */
export type DeferOutcome = { readonly type: 'defer'; readonly code: string; readonly after: number };

/** What a handler returns. Build one with `ok`, `retry`, `fail`, `cancel` or `defer`. */
export type HandlerOutcome = OkOutcome | CommitOutcome | RetryOutcome | FailOutcome | CancelOutcome | DeferOutcome;

/**
 * What a handler of a store that cannot run user code in its transactions (D1, Durable Objects)
 * may return: every outcome but `ok({ commit })`. `createSqliteOutbox` takes only jobs whose
 * handlers return these, so a job that may commit is refused where it meets such a store.
 */
export type PlainOutcome = Exclude<HandlerOutcome, CommitOutcome>;

/** A per-code retry rule: a number caps the streak; an object can do more. */
export type PerCodeRule =
  | number
  | {
      /** Dead-letter (or cancel) once this code occurs this many times in a row. */
      streak?: number;
      /** The attempt budget while this code is the failure (widens or narrows `maxAttempts`). */
      maxAttempts?: number;
      /** The longest delay before retrying this code. */
      maxDelayMs?: number;
      /** What exhaustion of this rule does. Default `'dead'`. */
      onExhaustion?: 'dead' | 'cancel';
    };

/** Retry policy of a job. Every field is optional; the core fills the defaults. */
export interface RetryPolicy {
  /** Attempts charged since the last replay before the job dead-letters. Default 20. */
  maxAttempts?: number;
  /**
   * Exponential, jittered backoff. Default `{ baseMs: 30_000, maxMs: 3_600_000 }`. Or an
   * explicit schedule: `scheduleMs[n-1]` is the wait after failed attempt n (the last entry
   * repeats), jittered down by at most a tenth; baseMs and maxMs are then unused.
   */
  backoff?: { baseMs?: number; maxMs?: number; scheduleMs?: readonly number[] };
  /** Per-error-code rules, merged over the defaults `timeout: 5`, `invalid_payload: 3`. */
  perCode?: Record<string, PerCodeRule>;
  /** Consecutive crashes (lease expired, never settled) before `dead(crash_loop)`. Default 3. */
  maxCrashes?: number;
}

/** The context a handler runs with. */
export interface JobContext<Deps = unknown> {
  readonly jobId: string;
  readonly kind: string;
  /** This attempt's number among those charged since the last replay (1-based). */
  readonly attempt: number;
  /** Stable across retries: pass it to providers that deduplicate. */
  readonly idempotencyKey: string;
  /** Aborts once the attempt has timed out. */
  readonly signal: AbortSignal;
  /** Epoch ms at which the attempt times out, on the outbox's clock. */
  readonly deadline: number;
  /** Milliseconds left before `deadline`. */
  remainingMs(): number;
  /**
   * Extends this attempt's lease to what the core decides (the new expiry, epoch ms on the
   * outbox's clock, is what it resolves to). One fenced UPDATE on the lane's session, outside
   * any `ctx.db` transaction. Rejects with `PostboxError` code `lease_lost` when the attempt no
   * longer owns the job (cancelled, recovered after its lease ran out) — the signal then aborts
   * and `ctx.db` closes; `attempt_closed` after the attempt ended; `heartbeat_in_transaction`
   * while this handler has a `ctx.db` transaction open (the beat would wait for it).
   * A kind without `heartbeat` has a lease covering its whole timeout: the beat only checks it.
   */
  heartbeat(): Promise<number>;
  readonly db: OutboxDb;
  readonly deps: Deps;
  readonly tenantKey: string | null;
  readonly correlationId: string | null;
  readonly metadata: Record<string, unknown> | null;
  /**
   * How this job's parents ended, for a job enqueued with `dependsOn` or as a batch's completion
   * (`outbox.batch`: its parents are the batch's members, and the batch's id is this job's id);
   * `null` for a job without parents. Each parent counts by the final status it first reached.
   */
  readonly parents: ParentOutcomes | null;
}

/** How a job's parents ended ({@link JobContext.parents}): all of them, by final status. */
export interface ParentOutcomes {
  readonly total: number;
  readonly succeeded: number;
  readonly dead: number;
  readonly cancelled: number;
}

/** Maps a thrown error to an outcome; `undefined` means "use the default". */
export type Classify = (error: unknown) => HandlerOutcome | undefined;

/**
 * A job definition, as returned by `defineJob`. `Out` is what its handler may return, as
 * inferred from it: a job whose handler never returns `ok({ commit })` has a {@link PlainOutcome}.
 */
export interface JobDefinition<Payload = any, Deps = any, Out extends HandlerOutcome = HandlerOutcome> {
  readonly kind: string;
  readonly payload: StandardSchemaV1<unknown, Payload>;
  readonly timeoutMs: number;
  readonly lane: string;
  readonly retry: RetryPolicy | undefined;
  readonly warnAtStreak: number | undefined;
  readonly classify: Classify | undefined;
  /** Whether the outbox beats for the handler while it runs (`heartbeat` on, `auto` not false). */
  readonly autoHeartbeat?: boolean;
  readonly handle: (payload: Payload, ctx: JobContext<Deps>) => Promise<Out>;
  /** The policy as normalised by the core (lease, defaults, per-code rules). */
  readonly policy: CorePolicy;
  /** Type-level marker of the deps this job needs. */
  readonly __deps?: (deps: Deps) => void;
}

/** Why a drain left a kind's due jobs waiting (`throttled` events): the limit in the way. */
export type ThrottleReason = 'concurrency_limit' | 'rate_limit' | 'tenant_concurrency_limit';

/** A normalised policy from the core (docs/ABI.md, `pb_policy`). */
export interface CorePolicy {
  kind: string;
  lane: string;
  timeoutMs: number;
  leaseMs: number;
  maxAttempts: number;
  baseMs: number;
  maxMs: number;
  maxCrashes: number;
  warnAtStreak: number | null;
  /** Present only when the kind heartbeats: the interval between beats (ms). */
  heartbeatMs?: number;
  /** Present only when the policy has an explicit schedule. */
  scheduleMs?: number[];
  /** Present only when the kind has a default priority (`defineJob`'s `priority`). */
  priority?: number;
  /** Present only when the kind has a concurrency limit (`defineJob`'s `concurrency`). */
  concurrency?: number;
  /** Present only when the kind has a per-tenant concurrency limit (`defineJob`'s `tenantConcurrency`). */
  tenantConcurrency?: number;
  /** Present only when the kind has a rate limit: at most `rateSlots` starts in any `rateHoldMs` window. */
  rateSlots?: number;
  rateHoldMs?: number;
  perCode: Record<string, { streak: number | null; maxAttempts: number | null; maxDelayMs: number | null; onExhaustion: 'dead' | 'cancel' }>;
}

/** Options beside the payload when enqueueing. */
export interface EnqueueOptions<Payload> {
  payload: Payload;
  /** Unique per tenant: a repeat returns the existing job. Derive it from business identity. */
  dedupeKey?: string;
  /** Scopes dedupe and operator actions. */
  tenantKey?: string | null;
  /** Find related jobs later (a request or trace id). */
  correlationId?: string;
  /** Run no earlier than this many ms from now. */
  delayMs?: number;
  /** Passed to the handler as `ctx.metadata`. */
  metadata?: Record<string, unknown>;
  /**
   * This job's retry budget (1–1000), replacing its kind's `retry.maxAttempts`; a per-code
   * budget still rules while that code is the failure. Kept across replays.
   */
  maxAttempts?: number;
  /**
   * 0-10, higher first; default the kind's `priority`, else 0. Claims take due jobs in order of
   * due time less a minute per level, so a job waits behind higher-priority work only while that
   * work fell due no more than a minute per level of difference after it: nothing starves.
   */
  priority?: number;
  /**
   * Parents this job waits for: ids of jobs already enqueued (in this job's tenant scope), and
   * in `enqueueMany`, indexes of earlier items of the same list (an item whose dedupe key was
   * held names the job holding it). The job is created `waiting` and falls due as soon as every
   * parent has succeeded, in the statement that settled the last one. At most 100; a later item,
   * the item itself or an id not found is refused (`invalid_dependency`). PostgreSQL and memory
   * stores; a SQLite outbox refuses it.
   */
  dependsOn?: ReadonlyArray<string | number>;
  /**
   * What a parent that ends `dead` or `cancelled` does to this job while it waits: `'cancel'`
   * (default) cancels it under code `parent_failed`, and its own waiting children in turn;
   * `'run'` counts that parent as done, as if it had succeeded. Replaying a failed parent brings
   * back the children its failure cancelled.
   */
  onParentFailure?: 'cancel' | 'run';
}

/** A job reference, enough to nudge it. */
export interface JobRef {
  id: string;
  kind: string;
  lane?: string;
}

export type EnqueueAccepted = { status: 'created' | 'exists'; id: string; kind: string };
export type EnqueueRefusal =
  /** The dedupe key is held by a job of another kind. */
  | { status: 'dedupe_conflict'; reason: 'kind'; existingKind: string }
  /**
   * The dedupe key is held by a job of this kind (`id`) that differs from this request in the
   * field `reason` names: the first differing one of payload, maxAttempts, metadata,
   * correlationId, priority, dependsOn (the same parents, in any order) and onParentFailure, in
   * that order. (`delayMs` is not compared: it is not stored.)
   */
  | { status: 'dedupe_conflict'; reason: 'payload' | 'maxAttempts' | 'metadata' | 'correlationId' | 'priority' | 'dependsOn' | 'onParentFailure'; id: string }
  | { status: 'invalid_payload'; issues: ReadonlyArray<{ message: string; path?: ReadonlyArray<PropertyKey | { key: PropertyKey }> }> }
  /**
   * `dependsOn` cannot be met: more than 100 parents (`too_many_parents`), the item itself or a
   * later item of the list (`dependency_cycle`), an id with no job in the tenant's scope
   * (`unknown_parent`), or an earlier item that was refused (`parent_refused`).
   */
  | { status: 'invalid_dependency'; reason: DependencyRefusalReason; message: string };
/** Why `dependsOn` refused a job (see {@link EnqueueRefusal}). */
export type DependencyRefusalReason = 'too_many_parents' | 'dependency_cycle' | 'unknown_parent' | 'parent_refused';
/** What `enqueue` returns: a result, never a throw (unless `strictEnqueue`). */
export type EnqueueResult = EnqueueAccepted | EnqueueRefusal;

/** A Cloudflare Queue producer binding, as much of it as Postbox uses. */
export interface QueueProducer {
  send(body: unknown, options?: { delaySeconds?: number }): Promise<unknown>;
  sendBatch(messages: Iterable<{ body: unknown; delaySeconds?: number }>): Promise<unknown>;
}

/** A connection the outbox owns until it calls exactly one of `close` or `destroy`. */
export interface LaneConnection {
  /** The session: a node-postgres `Client` / `PoolClient`. */
  readonly db: LaneDb;
  /** Healthy: return it (e.g. `client.release()` or `client.end()`). */
  close(): Promise<void>;
  /** Never reuse it. Idempotent; makes a later `close()` a no-op. */
  destroy(): Promise<void>;
  /** True once the session is known dead. */
  isBroken?(): boolean;
}

/**
 * Opens one lane connection. `signal`, when given, aborts a connect still under way (the
 * operator actions' `operationTimeoutMs`): reject, and leave no socket open. A connector that
 * ignores it is still safe: a connection that arrives too late is destroyed.
 */
export type Connector = (options?: { signal?: AbortSignal }) => Promise<LaneConnection>;

/** A clock: epoch ms. Tests pass `createTestClock()`. */
export interface Clock {
  now(): number;
}

/** Structured events Postbox emits. Send them somewhere you alert on. */
export type OutboxEvent =
  | { type: 'job_settled'; jobId: string; kind: string; from: 'running'; to: JobStatus; outcome: string; code: string | null; attempt: number }
  | { type: 'dead_letter'; jobId: string; kind: string; code: string | null; reason: string }
  | { type: 'streak_warning'; jobId: string; kind: string; code: string; streak: number }
  | { type: 'crash_loop'; jobId: string; kind: string; crashes: number }
  | { type: 'cancelled'; jobId: string; kind: string; code: string | null; reason: string }
  | { type: 'claim_late'; jobId: string; kind: string }
  | { type: 'stale_settle'; jobId: string; kind: string; attempt: number }
  /**
   * An attempt gave up its job: a heartbeat found it no longer owns it (`not_owner`: cancelled
   * or recovered), its lease had run out (`lease_expired`), or no beat got through before the
   * lease's settle reserve (`heartbeats_failed`). Its handler is aborted and nothing is settled:
   * the job's owner, or the recovery once the lease runs out, decides what happens next.
   */
  | { type: 'lease_lost'; jobId: string; kind: string; attempt: number; reason: 'not_owner' | 'lease_expired' | 'heartbeats_failed' }
  | { type: 'settle_failed'; jobId: string; kind: string; error: string }
  | { type: 'infra_error'; where: string; error: string }
  | { type: 'invalid_message'; queue: string; messageId: string; code: string; message: string }
  | { type: 'nudge_skipped'; jobs: number; reason: string }
  | { type: 'nudge_failed'; jobs: number; error: string }
  /** An occurrence rolled back (`key`, after `tries`), or, without `key`, a tick that could not read the schedules' last runs. */
  | { type: 'schedule_failed'; schedule: string; cron: string; key?: string; tries?: number; error: string; severity: 'error' }
  /** An occurrence committed. `status`: the job's enqueue status, or `run` for a `run` schedule. */
  | { type: 'schedule_enqueued'; schedule: string; key: string; status: string; created: number; exists: number; rejected: number }
  /** An occurrence committed with refused enqueues (`status`: the first refusal's), under lenient enqueue. */
  | { type: 'schedule_rejected'; schedule: string; key: string; status: string; rejected: number; severity: 'error' }
  /** Occurrences since `since` (ISO; the last one handled) fell outside the catch-up bound and were not enqueued. */
  | { type: 'schedule_missed'; schedule: string; since: string | null; from: string | null; severity: 'warn' }
  | { type: 'dlq_message'; queue: string; messageId: string; body: unknown }
  | { type: 'recovered'; jobs: number }
  | { type: 'retention'; deleted: number; batches: number }
  /** The sweep rebuilt an index a held horizon had bloated: `bytes` before, against its `baselineBytes`. */
  | { type: 'index_rebuilt'; index: string; bytes: number; baselineBytes: number }
  /** The sweep refreshed a table's planner statistics: they described a much smaller table, so plans kept read it whole. */
  | { type: 'table_analyzed'; table: string }
  /** The sweep may not rebuild a bloated index (not the tables' owner; PostgreSQL 17: no MAINTAIN privilege). */
  | { type: 'compaction_refused'; index: string; bytes: number; error: string; severity: 'warn' }
  | { type: 'handoff'; lane: string; jobs: number }
  /**
   * A drain left due jobs of `kind` waiting for its flow limit: all its `concurrency` slots held
   * by running attempts, its `rateLimit`'s starts used up for now, or every tenant with due jobs
   * of it running its `tenantConcurrency`. Once per kind and drain; the jobs are not charged and
   * are claimed as room frees.
   */
  | { type: 'throttled'; lane: string; kind: string; reason: ThrottleReason }
  /**
   * `count` pending jobs of `kind`, due for over 5 minutes, that this deploy does not register:
   * nothing here will run them (a kind removed or renamed, or a deploy that never shipped it).
   */
  | { type: 'unknown_kind'; kind: string; count: number; severity: 'warn' }
  /** Schedule occurrences not started this tick: recovery's budget is held back from schedules; the next tick catches them up. */
  | { type: 'schedules_deferred'; occurrences: number; severity: 'warn' }
  /** The invocation's deadline passed while `where` was still waiting (a connection or queue that does not answer). */
  | { type: 'deadline_exceeded'; where: string; severity: 'error' }
  /**
   * A drain message went to the lane's queue: a sweep's budget ran out with due jobs left, or a
   * drain stopped behind a rate slot and comes back when it frees (`delaySeconds`, the core's).
   */
  | { type: 'drain_requested'; lane: string; delaySeconds?: number }
  /** A webhook endpoint's breaker opened: deliveries to it wait for its cooldown. */
  | { type: 'webhook_endpoint_paused'; endpoint: string; failures: number; jobId: string }
  /** A paused webhook endpoint answered again: deliveries resume. */
  | { type: 'webhook_endpoint_resumed'; endpoint: string; jobId: string }
  /** A webhook endpoint is disabled (`gone`: it answered 410; `failing`: failures outlasted `disableAfterMs`). */
  | { type: 'webhook_endpoint_disabled'; endpoint: string; reason: 'gone' | 'failing'; jobId: string };

/** A job's status; `waiting`: it has parents (`dependsOn`) that have not all finished. */
export type JobStatus = 'pending' | 'running' | 'retrying' | 'succeeded' | 'dead' | 'cancelled' | 'waiting';

/** Cloudflare's version metadata binding. */
export interface VersionMetadata {
  id: string;
  tag?: string;
  timestamp: string;
}

// Telemetry: what the engine tells a tracing and metrics system, whichever store it runs on
// (each enqueue, each attempt from its start to its settlement, each claim statement and each
// sweep). The engine calls it only when an outbox has one (`telemetry`), so an outbox without
// one pays a property check. `postbox/otel` implements it over `@opentelemetry/api`.

/** One enqueue call (a list of one kind): what it asked for and what came of it. */
export interface EnqueueTrace {
  /**
   * The trace context every job of this enqueue keeps (a W3C traceparent, at most 512
   * characters), for its attempts to link to; `null`: none.
   */
  readonly context: string | null;
  /** Ends the enqueue's span: how many items were created, found existing, or refused. */
  end(result: { created: number; exists: number; refused: number; error?: unknown }): void;
}

/** One attempt, from the moment its handler starts to its settlement (or to losing its job). */
export interface AttemptTrace {
  /** The handler returned, threw or timed out: the attempt's run is over, its settlement to come. */
  ran(): void;
  /**
   * The attempt settled: its outcome in the core's vocabulary (`ok`, `retry`, `timeout`, …), the
   * job's new status, the error code it carries, and whether the write stood (`stale`: the job
   * had moved on, so nothing changed).
   */
  settled(result: { outcome: string; status: string; code: string | null; message: string | null; stale: boolean }): void;
  /** The attempt ended without a settlement of its own (its lease lost; its settlement failed to write). */
  abandoned(reason: string): void;
}

/** A unit of the engine's own work (a claim statement, a sweep), for a span around it. */
export interface OperationTrace {
  end(result?: { error?: unknown; attributes?: Record<string, string | number> }): void;
}

/** What the engine reports to (see {@link EnqueueTrace} and its siblings above). Every method must not throw. */
export interface Telemetry {
  /**
   * Whether attempts use each job's stored trace context and enqueue time (`attempt`'s
   * `traceContext` and `enqueuedAt`): the claims then return them, a little more work per
   * claimed job, so a telemetry that records nothing says false.
   */
  readonly needsJobContext: boolean;
  /** An enqueue of `count` jobs of `kind` is starting. */
  enqueue(info: { kind: string; lane: string; count: number; api: string }): EnqueueTrace;
  /** A claimed attempt's handler is starting. */
  attempt(info: {
    jobId: string;
    kind: string;
    lane: string;
    attempt: number;
    tenantKey: string | null;
    /** What its enqueue's {@link EnqueueTrace.context} was, or null (always null without `needsJobContext`). */
    traceContext: string | null;
    /** When the job was enqueued (NaN without `needsJobContext`) and when this attempt started, epoch ms on the outbox's clock. */
    enqueuedAt: number;
    startedAt: number;
  }): AttemptTrace;
  /**
   * A settlement of an attempt that never ran here: a crash the sweep recovered (its lease ran
   * out), a job claimed too late to start, one released unstarted.
   */
  settledUnrun(info: { jobId: string; kind: string; lane: string; outcome: string; status: string; code: string | null }): void;
  /** A claim statement (`claim`), a sweep (`sweep`) or one of its steps (`sweep.<step>`) is starting. */
  operation(name: string, attributes: Record<string, string | number>): OperationTrace;
  /**
   * What a sweep counted of the jobs waiting or running, by kind, lane and status, when it
   * ended (the backlog gauge's values until the next sweep). A sweep counts only when this is set.
   */
  backlog?(counts: readonly BacklogCount[]): void;
}

/** Jobs of one kind in one lane with one unfinished status (`countActive`, a telemetry's backlog). */
export interface BacklogCount {
  kind: string;
  lane: string;
  status: 'pending' | 'retrying' | 'running';
  count: number;
}
