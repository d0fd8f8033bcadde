/**
 * An outbox over a SQLite store (D1 or a Durable Object): the same engine as `createOutbox`
 * (engine/drain.ts: the pipeline drain, its settlements with the claim riding on them, leases and
 * heartbeats, recovery and the sweep as the core plans it), on a {@link DirectSession} over the
 * store's handle instead of a PostgreSQL lane session. What is its own: enqueue inside the
 * store's transaction (or as statements for a D1 batch), and operator actions in one store
 * transaction each. Every decision is the core's, by its ABI (docs/ABI.md).
 *
 * Queue nudges, the queue consumer and the Cron Trigger handler are `createOutbox`'s: with
 * `queue`, `transaction` nudges what it enqueued once it commits, and
 * `createQueueHandler((env) => outbox.bind(env.DB))` / `createScheduledHandler(...)` drive this
 * outbox as they drive a PostgreSQL one. Schedules and reserved sweeps are the sweep's options
 * (`sweep(db, { schedules, reserved })`, a Durable Object's alarm).
 *
 * What such a store cannot do, it refuses at once: user code inside its transactions
 * (`onTransition` when the outbox is made; a job whose handler may return `ok({ commit })` is a
 * type error in `jobs`, and if one is returned anyway it settles as `commit_unsupported`, dead at
 * once; `ctx.db` throws `unsupported`).
 * @module
 */
import { getCore } from './core/core.js';
import { outboxConfig } from './engine/outbox-config.js';
import type { FairShareOption } from './config.js';
import { uuidv7 } from './ids.js';
import { PostboxError } from './errors.js';
import { addReport, drainLane, emptyReport, type RunReport } from './engine/drain.js';
import { eventSink, jobRegistry, randomSeed, versionTimestamp, type OutboxRuntime } from './engine/runtime.js';
import { DirectSession } from './engine/session.js';
import { planSweep, recoverExpired, runSweep, type SweepOptions } from './engine/sweep.js';
import { operateJobs, type OperateResult, type OperatorVerb, type TenantScope } from './engine/operate.js';
import { nudgeCommitted, queueForLane, sendNudges } from './engine/nudge.js';
import { endEnqueueTrace, enqueueInTransaction, enqueueJobs, finishEnqueue, keepTraceContext, planEnqueue, startEnqueueTrace, type Api, type EnqueueEnv } from './engine/enqueue.js';
import { RUN, type DrivableOutbox, type DrivenEngine, type TxBatch, type TxEnqueue, type TxEnqueueMany } from './engine/driven.js';
import { cancelBatch, runBatch, type BatchCancelled, type BatchCreated, type BatchMembers, type BatchOptions } from './engine/batch.js';
import { tick, type Schedule, type ScheduledReport } from './engine/schedules.js';
import type { OutboxStore } from './stores/contract.js';
import type { EnqueueOptions, EnqueueResult, JobDefinition, JobRef, OutboxEvent, PlainOutcome, QueueProducer, Telemetry, VersionMetadata } from './types.js';

/** Options of {@link createSqliteOutbox}. */
export interface SqliteOutboxOptions<Db, Tx, S extends OutboxStore<Db, Tx> = OutboxStore<Db, Tx>> {
  /** The store the jobs live in (`createD1OutboxStore()`, `createDurableObjectOutboxStore()`). */
  store: S;
  /**
   * Every job kind this outbox runs or enqueues. A SQLite store cannot run a handler's
   * `ok({ commit })` in its settlement, so a job whose handler may return one is a type error here.
   */
  jobs: readonly JobDefinition<any, any, PlainOutcome>[];
  /** Handlers run at once per drain batch (default 8). */
  concurrency?: number;
  /** Claims interleave tenants, as `createOutbox`'s `fairShare` (weights too). */
  fairShare?: FairShareOption;
  /** Epoch ms (default `Date.now`): a test clock governs every stored time. */
  now?: () => number;
  /** Passed to handlers as `ctx.deps`. */
  deps?: unknown;
  /** Default 256 KiB, as `createOutbox`. */
  maxPayloadBytes?: number;
  /** Retention of finished jobs (defaults: the core's, 7 days succeeded, 90 days dead and cancelled). */
  retention?: { succeededMs?: number; deadMs?: number };
  /** New job ids (default: UUID v7, time-ordered, as `createOutbox`); a custom one must return UUIDs (`invalid_id` otherwise). */
  generateId?: () => string;
  /** Every event the engine raises (`job_settled`, `dead_letter`, `lease_lost`, `retention`, …), as `createOutbox`'s `events`. */
  events?: (event: OutboxEvent) => void;
  /** Rewrites an error's text before it is stored (secrets, personal data), as `createOutbox`'s. */
  redactError?: (message: string) => string;
  /**
   * `env.CF_VERSION_METADATA`, as `createOutbox`'s: jobs carry the deploy that enqueued them, and
   * an older deploy's drains (and `nextDueAt`) leave a newer one's jobs alone.
   */
  version?: VersionMetadata;
  /** A `streak_warning` event once a job fails this many times in a row with one code (a job's own policy wins). */
  warnAtStreak?: number;
  /**
   * Queues to nudge after commit, as `createOutbox`'s: one for every lane (each message names
   * its lane), or one per lane. Without it, jobs run on the sweep only (a Durable Object's alarm,
   * a Cron Trigger).
   */
  queue?: QueueProducer | Record<string, QueueProducer>;
  /** Traces and metrics, as `createOutbox`'s (`openTelemetry()` from `postbox/otel`). */
  telemetry?: Telemetry;
}

/** What a drain or a recovery did, by resulting status: the same counts as `createOutbox`'s drains. */
export type SqliteRunReport = RunReport;

/** What a sweep did: the runs' counts, retention's deletions, any step that failed, and the schedules' occurrences. */
export type SqliteSweepReport = ScheduledReport;

/** Options of one sweep: its budgets and reserved sweeps (as the Cron Trigger handler's), and the schedules due by `at`. */
export interface SqliteSweepOptions extends Omit<SweepOptions, 'compaction'> {
  /** Recurring jobs: their occurrences due by `at` are enqueued first (missed ones caught up, within the core's bound). */
  schedules?: readonly Schedule[];
  /** The tick's time (epoch ms; default now): a Cron Trigger's `scheduledTime`, an alarm's. */
  at?: number;
}

/** A SQLite outbox bound to its database, for `createQueueHandler` and `createScheduledHandler`. */
export type BoundSqliteOutbox = DrivableOutbox;

/** Statements for the caller's own D1 batch, and how to read what they return. */
export interface EnqueueStatements<S> {
  statements: S[];
  /** Pass the results of `statements`, in order; returns one result per item. */
  read(results: readonly unknown[]): EnqueueResult[];
}

/** An outbox over a SQLite store; see {@link createSqliteOutbox}. */
export interface SqliteOutbox<Db, Tx, S extends OutboxStore<Db, Tx> = OutboxStore<Db, Tx>> {
  readonly store: S;
  /**
   * Runs `fn` and every `enqueue` / `enqueueMany` it makes in one store transaction on `db`
   * (D1: one batch with your `tx.add(...)` statements), then nudges the queue once it committed.
   */
  transaction<T>(db: Db, fn: (tx: Tx, enqueue: TxEnqueue, enqueueMany: TxEnqueueMany, batch: TxBatch) => Promise<T>): Promise<T>;
  /**
   * A batch (`createOutbox`'s `batch`): members enqueued by `fn` with `tx`, and a completion job
   * that runs once every member has ended. Needs a store that keeps dependencies (memory here;
   * the SQLite stores refuse it with `unsupported`).
   */
  batch<T>(tx: Tx, opts: BatchOptions, fn: (members: BatchMembers) => Promise<T>): Promise<BatchCreated<T>>;
  /** Cancels a batch's completion job, then every member that has not ended (`createOutbox`'s `cancelBatch`). */
  cancelBatch(db: Db, id: string, reason?: string, scope?: TenantScope): Promise<BatchCancelled>;
  /** Sends nudges for committed jobs (after your own transaction or batch). Never throws. */
  nudge(refs: readonly JobRef[]): Promise<void>;
  /** This outbox on `db`, for the Cloudflare handlers: `createQueueHandler((env) => outbox.bind(env.DB))`. */
  bind(db: Db): BoundSqliteOutbox;
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
  /**
   * The cron sweep's work, as the core plans it: the schedules' due occurrences, then recover,
   * reserved sweeps, drain every lane, hand long jobs to their queue, retention.
   */
  sweep(db: Db, options?: SqliteSweepOptions): Promise<SqliteSweepReport>;
  /**
   * When the next waiting job falls due, or the next occurrence of one of `schedules` (epoch ms),
   * or `null`: for a Durable Object's next alarm.
   */
  nextDueAt(db: Db, options?: { schedules?: readonly Schedule[] }): Promise<number | null>;
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
  if ((options as { onTransition?: unknown }).onTransition !== undefined && store.runsUserCode !== true) {
    throw new PostboxError('invalid_config', 'createSqliteOutbox: onTransition needs a store that runs user code inside its settlement transaction; a SQLite store (D1, Durable Objects) cannot');
  }
  const now = options.now ?? Date.now;
  // Bounds and defaults are the core's, as for createOutbox (pb_claim outbox); only this
  // outbox's own default concurrency (8: a Durable Object's drain is its only consumer) is set here.
  const { concurrency, maxPayloadBytes, maxQueueDelayMs, maxKeyChars } = outboxConfig(
    core, { concurrency: options.concurrency ?? 8, maxPayloadBytes: options.maxPayloadBytes, fairShare: options.fairShare }, 'createSqliteOutbox',
  );
  const generateId = options.generateId ?? uuidv7;
  const versionTs = versionTimestamp(options.version, 'createSqliteOutbox');
  const { registry, policies } = jobRegistry(options.jobs, 'createSqliteOutbox');
  const lanes = [...new Set(policies.map((p) => p.lane))];

  /** The enqueue's inputs as createOutbox's (enqueue.ts): the same checks, the same core calls, on this store. */
  const enqueueEnv = (): EnqueueEnv<Tx> => ({
    core, now: now(), maxPayloadBytes, maxQueueDelayMs, maxKeyChars, hasQueue: options.queue !== undefined, versionTs, generateId, strict: false, store, telemetry: options.telemetry,
  });

  async function enqueueMany<P>(tx: Tx, job: JobDefinition<P>, items: readonly EnqueueOptions<P>[], api: Api = 'enqueueMany'): Promise<EnqueueResult[]> {
    return (await enqueueJobs(enqueueEnv(), tx, job, items, api)).results;
  }

  const emit = eventSink(options.events);
  const base = {
    core, registry, policies, concurrency, emit, store, key: null, versionTs, seed: randomSeed,
    options: { deps: options.deps, redactError: options.redactError, warnAtStreak: options.warnAtStreak, telemetry: options.telemetry, fairShare: options.fairShare },
    clock: { now },
    // Without a queue the sweep (a Durable Object's alarm, a Cron Trigger) runs every due job.
    queueFor: (lane: string) => queueForLane(options.queue, lane),
  } satisfies Omit<OutboxRuntime<Db, Tx>, 'openSession'>;
  /** The engine's runtime and a session on `db`, for one drain, recovery or sweep. */
  const on = (db: Db): [OutboxRuntime<Db, Tx>, DirectSession<Db>] => [{ ...base, openSession: () => new DirectSession(db) }, new DirectSession(db)];

  /** A sweep's options over the outbox's own retention (a sweep's own `retention` wins). */
  const sweepOptions = (opts: SweepOptions): SweepOptions => ({
    ...opts,
    retention: {
      ...(options.retention?.succeededMs === undefined ? {} : { succeededRetentionMs: options.retention.succeededMs }),
      ...(options.retention?.deadMs === undefined ? {} : { deadRetentionMs: options.retention.deadMs }),
      ...opts.retention,
    },
  });

  /** An application transaction on `db` with its enqueues, nudged once it committed (engine/enqueue.ts, as createOutbox's). */
  const transaction = <T>(db: Db, fn: (tx: Tx, enqueue: TxEnqueue, enqueueMany: TxEnqueueMany, batch: TxBatch) => Promise<T>): Promise<T> =>
    enqueueInTransaction(on(db)[0], enqueueEnv, (body) => store.transaction(db, (tx) => body(tx, tx)), fn);

  // Nudges sent outside any database: this outbox never records them (`recordNudges` is PostgreSQL's), so opens no session.
  const unbound: OutboxRuntime<Db, Tx> = {
    ...base,
    openSession: () => {
      throw new PostboxError('unsupported', 'createSqliteOutbox: nudges are not recorded, so need no session');
    },
  };

  /** The engine on `db`, as the queue consumer and the Cron Trigger handler drive it. */
  const engineOn = (db: Db): DrivenEngine<Db> => {
    const [rt, session] = on(db);
    return {
      runtime: rt,
      drain: (opts) => drainLane(rt, session, opts),
      sweep: (startedAt, opts, plan) => runSweep(rt, session, plan ?? planSweep(rt, startedAt, sweepOptions(opts))),
      recover: () => recoverExpired(rt, session),
      // The handle is the platform's: nothing to connect, nothing a deadline must drop.
      withSession: (fn) => fn(session),
      transaction,
    };
  };

  /** One operator action on `ids` in one store transaction (engine/operate.ts, as createOutbox's). */
  async function operate(db: Db, action: OperatorVerb, ids: readonly string[], scope: TenantScope | undefined, reason: string | null) {
    const [rt] = on(db);
    const { results, nudges } = await operateJobs(rt, (_what, fn) => store.transaction(db, fn), action, ids, scope, reason);
    // No queue: a replayed or retried job's nudge is an event, and the next drain or sweep runs it.
    await sendNudges(rt, nudges);
    return results;
  }

  return {
    store,
    transaction,
    bind: (db) => ({ [RUN]: engineOn(db) }),
    nudge: (refs) => nudgeCommitted(unbound, refs),
    cancelMany: (db, ids, reason = 'cancelled', scope) => operate(db, 'cancel', ids, scope, reason),
    batch: (tx, opts, fn) => runBatch((job, items, api) => enqueueMany(tx, job, items, api), opts, fn),
    cancelBatch: (db, id, reason = 'cancelled', scope) =>
      cancelBatch(store.dependencies && ((job) => store.dependencies!.openBatchMembers(db, job)), (ids) => operate(db, 'cancel', ids, scope, reason), id),
    replayMany: (db, ids, scope) => operate(db, 'replay', ids, scope, null),
    retryNowMany: (db, ids, scope) => operate(db, 'retryNow', ids, scope, null),
    eraseTenant: (db, tenantKey) => store.transaction(db, (tx) => store.eraseTenant(tx, tenantKey)),
    async enqueue(tx, job, opts) {
      return (await enqueueMany(tx, job, [opts], 'enqueue'))[0]!;
    },
    enqueueMany: (tx, job, items) => enqueueMany(tx, job, items),
    async enqueueStatements(db, job, items) {
      if (!store.appendStatements) throw new PostboxError('invalid_config', 'enqueueStatements: this store runs appends itself; use enqueue inside store.transaction');
      const env = enqueueEnv();
      // The producer span lasts from here until `read` (the batch ran): the write is the caller's.
      const trace = startEnqueueTrace(env, job, items, 'enqueueStatements');
      const failed = (error: unknown) => (trace?.end({ created: 0, exists: 0, refused: 0, error }), error);
      let planned: Awaited<ReturnType<typeof planEnqueue>>;
      try {
        planned = await planEnqueue(env, job, items, 'enqueueStatements');
      } catch (error) {
        throw failed(error);
      }
      keepTraceContext(planned, trace);
      if (!planned.input) {
        endEnqueueTrace(trace, planned.results);
        return { statements: [], read: () => planned.results as EnqueueResult[] };
      }
      const batch = store.appendStatements(db, planned.input);
      return {
        statements: batch.statements,
        read: (res) => {
          try {
            const { results } = finishEnqueue(env, job, planned, batch.read(res), 'enqueueStatements');
            endEnqueueTrace(trace, results);
            return results;
          } catch (error) {
            throw failed(error);
          }
        },
      };
    },
    async drain(db, opts = {}) {
      const [rt, session] = on(db);
      // The invocation's deadline is the core's (its default budget), as for createOutbox's drains.
      const { deadlineAt } = core.call<{ deadlineAt: number }>('claim', { op: 'deadline', startedAt: now(), invocationBudgetMs: null });
      const report = emptyReport();
      for (const lane of opts.lane === undefined ? lanes : [opts.lane]) {
        addReport(report, await drainLane(rt, session, { lane, deadlineAt, maxJobs: opts.maxJobs, claimedBefore: report.claimed }));
      }
      return report;
    },
    recover(db) {
      return recoverExpired(...on(db));
    },
    sweep(db, opts = {}) {
      const { schedules = [], at, ...sweep } = opts;
      const startedAt = now();
      return tick(engineOn(db), schedules, at ?? startedAt, startedAt, sweepOptions(sweep));
    },
    async nextDueAt(db, opts = {}) {
      let next: number | null = null;
      for (const schedule of opts.schedules ?? []) {
        // The schedule's next minute after now, by the core's cron (a tick then enqueues it).
        const { at } = core.call<{ at: number | null }>('cron', { op: 'next', expr: schedule.cron, after: now() });
        if (at !== null && (next === null || at < next)) next = at;
      }
      for (const lane of lanes) {
        const kinds = policies.filter((p) => p.lane === lane).map((p) => p.kind);
        // Which jobs this deploy may claim is the claim plan's (its version cutoff), as for a drain.
        const { versionCutoff } = core.call<{ versionCutoff: number | null }>('claim', {
          op: 'plan', now: now(), deadlineAt: Number.MAX_SAFE_INTEGER, lane, concurrency, policies, version: versionTs === null ? null : { timestamp: versionTs }, target: null,
        });
        const due = await store.nextDue(db, { lane, kinds, versionCutoff });
        if (due !== null && (next === null || due < next)) next = due;
      }
      return next;
    },
  };
}
