/**
 * Running jobs on a SQLite store (D1 or a Durable Object): enqueue (inside the store's
 * transaction, or as statements for a D1 batch), drain (claim, run handlers, settle), and a
 * sweep (recover expired leases, drain, retention) that a Durable Object's `alarm()` or a Cron
 * Trigger calls. Every decision is the core's, by its ABI (docs/ABI.md): due times and payload
 * caps (`pb_enqueue`), dedupe verdicts, which kinds to claim with which lease (`pb_claim` plan),
 * whether a claimed job may start (`admit`), each settlement (`pb_settle`) and the sweep's steps
 * and cut-offs (`pb_sweep`). This file does the I/O around them.
 *
 * Heartbeats work as with `createOutbox` (the same lease: `ctx.heartbeat()`, automatic beats, the
 * stop point). What it does not do (yet) that `createOutbox` does on PostgreSQL: `ok({ commit })`
 * and `onTransition` hooks (a store of D1 batches or Durable Object transactions cannot run user
 * code inside its settlement: `onTransition` is refused when the outbox is created, and a handler
 * that returns `ok({ commit })` fails its job at once as `commit_unsupported`), Queue nudges,
 * schedules, reserved sweeps, deploy versions and concurrency across drains.
 * @module
 */
import { getCore, isCoreError, type Core } from '../core/core.js';
import { outboxConfig } from '../outbox-config.js';
import { PostboxError } from '../errors.js';
import { AttemptLease, lostError, type Admitted } from '../lease.js';
import type { OutboxRuntime } from '../runtime.js';
import { randomSeed } from '../runtime.js';
import type { LaneSession } from '../session.js';
import type { OperateResult, TenantScope } from '../outbox.js';
import { type DedupeVerdict, dedupeItem, heldResult } from '../dedupe.js';
import type { AppendInput, AppendRow, ClaimedJob, JobStatus, OutboxStore, SettleWrite } from '../store/contract.js';
import type { CorePolicy, EnqueueOptions, EnqueueResult, HandlerOutcome, JobDefinition, OutboxEvent } from '../types.js';

/** Options of {@link createSqliteOutbox}. */
export interface SqliteOutboxOptions<Db, Tx, S extends OutboxStore<Db, Tx> = OutboxStore<Db, Tx>> {
  /** The store the jobs live in (`createD1OutboxStore()`, `createDurableObjectOutboxStore()`). */
  store: S;
  /** Every job kind this outbox runs or enqueues. */
  jobs: readonly JobDefinition[];
  /** Handlers run at once per drain batch (default 8). */
  concurrency?: number;
  /** Epoch ms (default `Date.now`): a test clock governs every stored time. */
  now?: () => number;
  /** Passed to handlers as `ctx.deps`. */
  deps?: unknown;
  /** Default 256 KiB, as `createOutbox`. */
  maxPayloadBytes?: number;
  /** Retention of finished jobs (defaults: the core's, 7 days succeeded, 90 days dead and cancelled). */
  retention?: { succeededMs?: number; deadMs?: number };
  /** New job ids (default `crypto.randomUUID`). */
  generateId?: () => string;
  /** Where lease events go (`lease_lost`, `infra_error` of a failed beat). */
  events?: (event: OutboxEvent) => void;
}

/** What a drain or sweep did, by resulting status. */
export interface SqliteRunReport {
  claimed: number;
  succeeded: number;
  retrying: number;
  pending: number;
  dead: number;
  cancelled: number;
  /** Settles the store refused (the attempt no longer owned its job). */
  stale: number;
  /** Expired leases settled as crashes. */
  recovered: number;
  /** Attempts that lost their job while running (nothing settled: its new owner or the recovery decides). */
  lost: number;
  /** Finished jobs deleted by retention. */
  deleted: number;
}

/** Statements for the caller's own D1 batch, and how to read what they return. */
export interface EnqueueStatements<S> {
  statements: S[];
  /** Pass the results of `statements`, in order; returns one result per item. */
  read(results: readonly unknown[]): EnqueueResult[];
}

/** An outbox over a SQLite store; see {@link createSqliteOutbox}. */
export interface SqliteOutbox<Db, Tx, S extends OutboxStore<Db, Tx> = OutboxStore<Db, Tx>> {
  readonly store: S;
  /** Enqueues one job with `tx` (inside `store.transaction`, or a database handle). Refusals are results, not throws. */
  enqueue<P>(tx: Tx, job: JobDefinition<P>, options: EnqueueOptions<NoInfer<P>>): Promise<EnqueueResult>;
  /** Enqueues a list of jobs of one kind in one write. */
  enqueueMany<P>(tx: Tx, job: JobDefinition<P>, items: readonly EnqueueOptions<NoInfer<P>>[]): Promise<EnqueueResult[]>;
  /**
   * The enqueue as statements for your own atomic batch (D1: `db.batch([...yours, ...statements])`).
   * Only for stores with `appendStatements` (D1). Refused items (bad payloads) are decided before
   * any statement exists and are never written.
   */
  enqueueStatements<P>(db: Db, job: JobDefinition<P>, items: readonly EnqueueOptions<NoInfer<P>>[]): Promise<EnqueueStatements<unknown>>;
  /** Claims and runs due jobs of `lane` (default every lane) until none is due or `maxJobs` ran. */
  drain(db: Db, options?: { lane?: string; maxJobs?: number }): Promise<SqliteRunReport>;
  /** Settles running jobs whose lease ran out as crashes (the core decides what follows). */
  recover(db: Db): Promise<SqliteRunReport>;
  /** The cron sweep's work, as the core plans it: recover, drain every lane, retention. */
  sweep(db: Db): Promise<SqliteRunReport>;
  /** When the next waiting job falls due (epoch ms), or `null`: for a Durable Object's next alarm. */
  nextDueAt(db: Db): Promise<number | null>;
  /**
   * Operator actions, as `createOutbox` has them and the core decides them, each in one store
   * transaction: pending, retrying or running jobs to cancelled (a running attempt's late settle
   * then changes nothing). `scope.tenantKey` limits them to one tenant (`null`: jobs without one).
   */
  cancelMany(db: Db, ids: readonly string[], reason?: string, scope?: TenantScope): Promise<OperateResult[]>;
  /** Dead or cancelled jobs back to pending, due now, with a fresh retry budget. */
  replayMany(db: Db, ids: readonly string[], scope?: TenantScope): Promise<OperateResult[]>;
  /** Pending or retrying jobs due now. */
  retryNowMany(db: Db, ids: readonly string[], scope?: TenantScope): Promise<OperateResult[]>;
  /** Deletes every job (and attempt record) of one tenant; returns how many jobs. */
  eraseTenant(db: Db, tenantKey: string): Promise<number>;
}

const emptyReport = (): SqliteRunReport => ({ claimed: 0, succeeded: 0, retrying: 0, pending: 0, dead: 0, cancelled: 0, stale: 0, recovered: 0, lost: 0, deleted: 0 });

function callCore<T>(core: Core, family: Parameters<Core['call']>[0], input: unknown, what: string): T {
  const out = core.call<T | { error: { code: string; message: string } }>(family, input);
  if (isCoreError(out)) throw new PostboxError(out.error.code, `${what}: ${out.error.message}`);
  return out as T;
}

type CoreOutcome = { type: string; code?: string; after?: number; reason?: string; message?: string };

/**
 * An outbox over a SQLite store: the same jobs (`defineJob`) and the same core as
 * `createOutbox`, with the store's handle in place of a PostgreSQL connection.
 *
 * @example
 * ```ts
 * const outbox = createSqliteOutbox({ store: createDurableObjectOutboxStore(), jobs: [welcomeEmail] });
 * await outbox.store.transaction(ctx.storage, async (tx) => {
 *   tx.sql.exec('INSERT INTO users (id, email) VALUES (?, ?)', id, email);
 *   await outbox.enqueue(tx, welcomeEmail, { payload: { userId: id } });
 * });
 * await outbox.sweep(ctx.storage); // in alarm()
 * ```
 */
export function createSqliteOutbox<Db, Tx, S extends OutboxStore<Db, Tx>>(options: SqliteOutboxOptions<Db, Tx, S> & { store: S & OutboxStore<Db, Tx> }): SqliteOutbox<Db, Tx, S> {
  const core = getCore();
  const store = options.store;
  // A D1 batch or a Durable Object's storage transaction cannot run user code: refused here, at
  // once, rather than silently never called.
  if ((options as { onTransition?: unknown }).onTransition !== undefined) {
    throw new PostboxError('invalid_config', 'createSqliteOutbox: onTransition needs a store that runs user code inside its settlement transaction; a SQLite store (D1, Durable Objects) cannot');
  }
  const now = options.now ?? Date.now;
  // Bounds and defaults are the core's, as for createOutbox (pb_claim outbox); only this
  // outbox's own default concurrency (8: a Durable Object's drain is its only consumer) is set here.
  const { concurrency, maxPayloadBytes, maxQueueDelayMs } = outboxConfig(
    core, { concurrency: options.concurrency ?? 8, maxPayloadBytes: options.maxPayloadBytes }, 'createSqliteOutbox',
  );
  const generateId = options.generateId ?? (() => crypto.randomUUID());
  const registry = new Map<string, JobDefinition>();
  for (const job of options.jobs) {
    if (registry.has(job.kind)) throw new PostboxError('invalid_config', `job kind ${job.kind} is registered twice`);
    registry.set(job.kind, job);
  }
  const policies: CorePolicy[] = [...registry.values()].map((j) => j.policy);
  const lanes = [...new Set(policies.map((p) => p.lane))];

  const known = (job: JobDefinition) => {
    if (registry.get(job?.kind) !== job) throw new PostboxError('unknown_kind', `job ${String(job?.kind)} is not registered with this outbox`);
  };

  /** Schema checks and the core's enqueue decisions; the items to write, and the refusals. */
  async function prepare<P>(job: JobDefinition<P>, items: readonly EnqueueOptions<P>[]) {
    known(job);
    if (!Array.isArray(items)) throw new PostboxError('invalid_input', 'enqueue: items must be an array of enqueue options');
    const at = now();
    const results: (EnqueueResult | undefined)[] = new Array(items.length);
    const prepared = await Promise.all(items.map(async (opts, i) => {
      if (!opts || typeof opts !== 'object') throw new PostboxError('invalid_input', `enqueue: items[${i}] needs options with a payload`);
      for (const key of ['dedupeKey', 'tenantKey', 'correlationId'] as const) {
        if (opts[key] !== undefined && opts[key] !== null && typeof opts[key] !== 'string') throw new PostboxError('invalid_input', `enqueue: items[${i}].${key} must be a string`);
      }
      const validated = await job.payload['~standard'].validate(opts.payload);
      if (validated.issues) {
        results[i] = { status: 'invalid_payload', issues: validated.issues.map((issue) => ({ message: issue.message })) };
        return null;
      }
      const payloadJson = JSON.stringify(validated.value);
      if (payloadJson === undefined) {
        results[i] = { status: 'invalid_payload', issues: [{ message: 'payload is not JSON-serialisable' }] };
        return null;
      }
      return { payloadJson, opts };
    }));
    const decisions = callCore<{ results: ({ ok: true; dueAt: number } | { ok: false; issues: { message: string }[] })[] }>(core, 'enqueue', {
      op: 'batch', now: at, maxPayloadBytes, maxQueueDelayMs, hasQueue: false,
      items: prepared.map((p, i) => ({
        delayMs: items[i]!.delayMs ?? 0,
        payloadBytes: p ? new TextEncoder().encode(p.payloadJson).length : 0,
        ...(items[i]!.maxAttempts === undefined ? {} : { maxAttempts: items[i]!.maxAttempts }),
      })),
    }, 'enqueue').results;
    const writes: number[] = [];
    const input: AppendInput = { kind: job.kind, lane: job.lane, now: at, versionTs: null, items: [] };
    const appendItems: AppendInput['items'][number][] = [];
    prepared.forEach((p, i) => {
      const d = decisions[i]!;
      if (!p) return;
      if (!d.ok) {
        results[i] = { status: 'invalid_payload', issues: d.issues.map((issue) => ({ message: issue.message })) };
        return;
      }
      writes.push(i);
      appendItems.push({
        id: generateId(), payloadJson: p.payloadJson, tenantKey: p.opts.tenantKey ?? null, dedupeKey: p.opts.dedupeKey ?? null,
        correlationId: p.opts.correlationId ?? null, metadataJson: p.opts.metadata === undefined ? null : JSON.stringify(p.opts.metadata),
        dueAt: d.dueAt, maxAttempts: p.opts.maxAttempts ?? null,
      });
    });
    return { input: { ...input, items: appendItems }, writes, results };
  }

  /** The append's rows as results; a held key is `exists` or a conflict as the core says. */
  function finish(job: JobDefinition, rows: AppendRow[], writes: number[], results: (EnqueueResult | undefined)[]): EnqueueResult[] {
    const held = rows.map((r, w) => [r, w] as const).filter(([r]) => !r.created);
    const verdicts = held.length === 0 ? [] : callCore<{ results: DedupeVerdict[] }>(
      core, 'enqueue', { op: 'dedupe', items: held.map(([r]) => dedupeItem(r, job.kind)) }, 'enqueue',
    ).results;
    rows.forEach((r, w) => {
      if (r.created) results[writes[w]!] = { status: 'created', id: r.id, kind: r.kind };
    });
    held.forEach(([r, w], n) => {
      results[writes[w]!] = heldResult(r, verdicts[n]!);
    });
    return results as EnqueueResult[];
  }

  async function enqueueMany<P>(tx: Tx, job: JobDefinition<P>, items: readonly EnqueueOptions<P>[]): Promise<EnqueueResult[]> {
    const { input, writes, results } = await prepare(job, items);
    const rows = input.items.length === 0 ? [] : await store.append(tx, input);
    return finish(job, rows, writes, results);
  }

  /** The core's settlement of each finished attempt, written fenced by the attempt. */
  async function settle(db: Db, finished: { row: ClaimedJob; outcome: CoreOutcome }[], report: SqliteRunReport): Promise<void> {
    if (finished.length === 0) return;
    const at = now();
    const indexOf = new Map<string, number>();
    const used: CorePolicy[] = [];
    const batch = finished.map(({ row, outcome }) => {
      let policy = indexOf.get(row.kind);
      if (policy === undefined) {
        const job = registry.get(row.kind);
        if (!job) throw new PostboxError('unknown_kind', `no job registered for kind ${row.kind}`);
        indexOf.set(row.kind, (policy = used.push(job.policy) - 1));
      }
      return {
        now: at, seed: randomSeed(), policy, outcome,
        job: { status: 'running', attempts: row.attempts, crashes: row.crashes, streakCode: row.streak_code, streak: row.streak, maxAttempts: row.max_attempts, errorCode: row.last_error_code, errorMessage: row.last_error_message },
      };
    });
    type Decision = { status: SettleWrite['status']; dueAt: number | null; attempts: number; crashes: number; streakCode: string | null; streak: number; errorCode: string | null; errorMessage: string | null; finished: boolean; attemptOutcome: string };
    const out = callCore<{ results: (Decision | { error: { code: string; message: string } })[] }>(core, 'settle', { policies: used, batch }, 'settle').results;
    const items: SettleWrite[] = out.map((d, i) => {
      if ('error' in d) throw new PostboxError(d.error.code, `settle ${finished[i]!.row.kind}: ${d.error.message}`);
      const { row } = finished[i]!;
      return {
        id: row.id, attemptSeq: row.attempt_seq, status: d.status, dueAt: d.dueAt, attempts: d.attempts, crashes: d.crashes,
        streakCode: d.streakCode, streak: d.streak, errorCode: d.errorCode, errorMessage: d.errorMessage, finished: d.finished, outcome: d.attemptOutcome,
      };
    });
    const written = new Set(await store.settle(db, { now: at, items }));
    for (const item of items) {
      if (!written.has(item.id)) report.stale++;
      else if (item.outcome === 'crash') report.recovered++;
      if (written.has(item.id) && item.status !== 'running') report[item.status]++;
    }
  }

  const emit = (event: OutboxEvent) => {
    try {
      options.events?.(event);
    } catch {
      // A throwing sink must not fail the attempt.
    }
  };
  // What the lease (lease.ts) needs of a runtime: the clock, the core, the store and the sink.
  const leaseRuntime = { clock: { now }, core, store, emit } as unknown as OutboxRuntime;

  /** Runs one claimed job: admit (the core), its lease, validate, the handler under its timeout. `null`: it lost its job. */
  async function run(db: Db, row: ClaimedJob, deadlineAt: number): Promise<CoreOutcome | null> {
    const job = registry.get(row.kind)!;
    const admitted = callCore<(Admitted & { start: true }) | { start: false; reason: string }>(core, 'claim', {
      op: 'admit', now: now(), deadlineAt, leaseExpiresAt: Number(row.lease_expires_ms), timeoutMs: job.policy.timeoutMs,
      heartbeatMs: job.policy.heartbeatMs ?? null,
    }, 'admit');
    if (!admitted.start) return { type: admitted.reason };
    const controller = new AbortController();
    let closed = false;
    let onLost: () => void = () => undefined;
    const lostLease = new Promise<'lost'>((resolve) => (onLost = () => resolve('lost')));
    const session = { exclusive: <T>(fn: (q: Db) => Promise<T>) => fn(db) } as unknown as LaneSession;
    const lease = new AttemptLease(leaseRuntime, session, job, row, admitted, () => onLost());
    const ctx = {
      jobId: row.id, kind: row.kind, attempt: row.attempts + 1, idempotencyKey: row.id, signal: controller.signal, deadline: admitted.deadline,
      remainingMs: () => Math.max(0, admitted.deadline - now()),
      heartbeat: async (): Promise<number> => {
        if (lease.lost) throw lostError(lease.lost);
        if (closed) throw new PostboxError('attempt_closed', 'ctx.heartbeat() called after the attempt returned or timed out');
        return lease.beat();
      },
      db: undefined as never, deps: options.deps, tenantKey: row.tenant_key, correlationId: row.correlation_id, metadata: row.metadata,
    };
    lease.start();
    const work = (async (): Promise<CoreOutcome> => {
      const validated = await job.payload['~standard'].validate(row.payload);
      if (validated.issues) return { type: 'invalid_payload', message: validated.issues.map((i) => i.message).join('; ') };
      return fromHandler(await job.handle(validated.value, ctx as never));
    })().catch((error: unknown): CoreOutcome => {
      let outcome: HandlerOutcome | undefined;
      try {
        outcome = job.classify?.(error);
      } catch {
        outcome = undefined;
      }
      // Unclaimed by classify: `thrown`, which the core classifies.
      return { ...(outcome ? fromHandler(outcome) : { type: 'thrown' }), message: error instanceof Error ? error.message : String(error) };
    });
    let timer: ReturnType<typeof setTimeout> | undefined;
    // Real time, whatever the outbox's clock says (as createOutbox).
    const timeout = new Promise<CoreOutcome>((resolve) => {
      timer = setTimeout(() => resolve({ type: 'timeout', message: `timed out after ${job.policy.timeoutMs} ms` }), job.policy.timeoutMs);
    });
    const outcome = await Promise.race([work, timeout, lostLease]);
    clearTimeout(timer);
    lease.end();
    closed = true;
    if (outcome === 'lost') {
      controller.abort(lostError(lease.lost ?? 'not_owner'));
      return null;
    }
    if (outcome.type === 'timeout') controller.abort(new PostboxError('timeout', `attempt of ${row.kind} timed out`));
    return outcome;
  }

  async function drainLane(db: Db, lane: string, deadlineAt: number, report: SqliteRunReport, maxJobs: number): Promise<void> {
    while (report.claimed < maxJobs) {
      const at = now();
      const plan = callCore<{ limit: number; kinds: string[]; leaseMs: number[]; versionCutoff: number | null }>(core, 'claim', {
        op: 'plan', now: at, deadlineAt, lane, concurrency, maxBatch: concurrency, policies, version: null, target: null,
      }, 'claim plan');
      const limit = Math.min(plan.limit, maxJobs - report.claimed);
      if (limit <= 0) return;
      const claimed = await store.claim(db, { now: at, lane, kinds: plan.kinds, leaseMs: plan.leaseMs, limit, versionCutoff: plan.versionCutoff });
      report.claimed += claimed.length;
      if (claimed.length === 0) return;
      const outcomes = await Promise.all(claimed.map((row) => run(db, row, deadlineAt)));
      report.lost += outcomes.filter((o) => o === null).length;
      await settle(db, claimed.flatMap((row, i) => (outcomes[i] ? [{ row, outcome: outcomes[i]! }] : [])), report);
      if (claimed.length < limit) return;
    }
  }

  const sweepPlan = (at: number) =>
    callCore<{ deadlineAt: number; steps: ({ type: 'recover'; limit: number } | { type: 'drain'; deadlineAt: number } | { type: 'retention'; succeededBefore: number; deadBefore: number; limit: number } | { type: string })[] }>(
      core, 'sweep', {
        // Budgets and retention default to the core's (the same as createScheduledHandler's).
        op: 'plan', now: at, startedAt: at, reserved: [], retention: { ...options.retention }, policies,
      }, 'sweep plan');

  async function recoverWith(db: Db, limit: number, report: SqliteRunReport): Promise<void> {
    const expired = await store.listExpiredLeases(db, { now: now(), kinds: policies.map((p) => p.kind), limit });
    await settle(db, expired.map((row) => ({ row, outcome: { type: 'crash' } })), report);
  }

  type OperateDecision = { ok: true; status: JobStatus; dueAt: number | null; reset: boolean; closeAttempt: string | null; finished: boolean; recordReason: boolean } | { ok: false };

  /** One operator action on `ids`: read them, ask the core about each, write its decisions, in one transaction. */
  function operate(db: Db, action: 'cancel' | 'replay' | 'retryNow', ids: readonly string[], scope: TenantScope | undefined, reason: string | null) {
    if (!Array.isArray(ids) || !ids.every((id) => typeof id === 'string')) throw new PostboxError('invalid_input', `${action}: ids must be an array of job ids`);
    const at = now();
    return store.transaction(db, async (tx) => {
      const rows = await store.lockForOperate(tx, scope && 'tenantKey' in scope ? { ids, tenantKey: scope.tenantKey ?? null } : { ids });
      const found = new Map(rows.map((r) => [r.id, r]));
      const results: OperateResult[] = [];
      const writes: { id: string; status: JobStatus; dueAt: number | null; reset: boolean; reason: string | null; closeAttempt: string | null; finished: boolean; recordReason: boolean }[] = [];
      for (const id of ids) {
        const row = found.get(id);
        if (!row) {
          results.push({ id, status: 'not_found' });
          continue;
        }
        const d = callCore<OperateDecision>(core, 'operate', { action, now: at, job: { status: row.status } }, action);
        if (!d.ok) {
          results.push({ id, status: 'invalid_state', jobStatus: row.status });
          continue;
        }
        writes.push({ id, status: d.status, dueAt: d.dueAt, reset: d.reset, reason, closeAttempt: d.closeAttempt, finished: d.finished, recordReason: d.recordReason });
        results.push({ id, status: 'ok', jobStatus: d.status });
      }
      const written = new Set((writes.length === 0 ? [] : await store.applyOperate(tx, { now: at, writes })).map((w) => w.id));
      // A job that changed between the read and the write (no lock on D1) is reported as found in another state.
      return results.map((r): OperateResult => (r.status === 'ok' && !written.has(r.id) ? { id: r.id, status: 'invalid_state' } : r));
    });
  }

  return {
    store,
    cancelMany: (db, ids, reason = 'cancelled', scope) => operate(db, 'cancel', ids, scope, reason),
    replayMany: (db, ids, scope) => operate(db, 'replay', ids, scope, null),
    retryNowMany: (db, ids, scope) => operate(db, 'retryNow', ids, scope, null),
    eraseTenant: (db, tenantKey) => store.transaction(db, (tx) => store.eraseTenant(tx, tenantKey)),
    async enqueue(tx, job, opts) {
      return (await enqueueMany(tx, job, [opts]))[0]!;
    },
    enqueueMany,
    async enqueueStatements(db, job, items) {
      if (!store.appendStatements) throw new PostboxError('invalid_config', 'enqueueStatements: this store runs appends itself; use enqueue inside store.transaction');
      const { input, writes, results } = await prepare(job, items);
      if (input.items.length === 0) return { statements: [], read: () => results as EnqueueResult[] };
      const batch = store.appendStatements(db, input);
      return { statements: batch.statements, read: (res) => finish(job, batch.read(res), writes, [...results]) };
    },
    async drain(db, opts = {}) {
      const report = emptyReport();
      // The invocation's deadline is the core's (its default budget), as for createOutbox's drains.
      const { deadlineAt } = callCore<{ deadlineAt: number }>(core, 'claim', { op: 'deadline', startedAt: now(), invocationBudgetMs: null }, 'drain');
      for (const lane of opts.lane === undefined ? lanes : [opts.lane]) await drainLane(db, lane, deadlineAt, report, opts.maxJobs ?? Infinity);
      return report;
    },
    async recover(db) {
      const report = emptyReport();
      // As many as the sweep's own recovery step takes at once.
      const step = sweepPlan(now()).steps.find((s) => s.type === 'recover' && 'limit' in s) as { limit: number } | undefined;
      await recoverWith(db, step?.limit ?? 0, report);
      return report;
    },
    async sweep(db) {
      const report = emptyReport();
      for (const step of sweepPlan(now()).steps) {
        if (step.type === 'recover' && 'limit' in step) await recoverWith(db, step.limit, report);
        else if (step.type === 'drain' && 'deadlineAt' in step) for (const lane of lanes) await drainLane(db, lane, step.deadlineAt, report, Infinity);
        else if (step.type === 'retention' && 'succeededBefore' in step) report.deleted += await store.deleteFinished(db, step);
      }
      return report;
    },
    async nextDueAt(db) {
      let next: number | null = null;
      for (const lane of lanes) {
        const kinds = policies.filter((p) => p.lane === lane).map((p) => p.kind);
        const due = await store.nextDue(db, { lane, kinds, versionCutoff: null });
        if (due !== null && (next === null || due < next)) next = due;
      }
      return next;
    },
  };
}

/** A handler's outcome as the core's settle reads it; what the handler did instead of naming one (`none`, a commit this store cannot run) the core classifies. */
function fromHandler(outcome: HandlerOutcome | undefined): CoreOutcome {
  switch (outcome?.type) {
    case 'ok':
      // A SQLite store cannot run user code inside its settlement transaction.
      return outcome.commit ? { type: 'commit_unsupported' } : { type: 'ok' };
    case 'retry':
      return outcome.after === undefined ? { type: 'retry', code: outcome.code } : { type: 'retry', code: outcome.code, after: outcome.after };
    case 'fail':
      return { type: 'fail', code: outcome.code };
    case 'cancel':
      return { type: 'cancel', reason: outcome.reason };
    case 'defer':
      return { type: 'defer', code: outcome.code, after: outcome.after };
    default:
      return { type: 'none' };
  }
}
