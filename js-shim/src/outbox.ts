import type { DepsOption, JobsDeps, OutboxOptions } from './config.js';
import { getCore } from './core/core.js';
import { outboxConfig, type OutboxConfig } from './engine/outbox-config.js';
import { runTransaction, toQueryable, type TransactionalDb } from './stores/pg/db.js';
import { boundedTransaction } from './stores/pg/bounded.js';
import { enqueueInTransaction, enqueueJobs, type EnqueueEnv } from './engine/enqueue.js';
import { PostboxError } from './errors.js';
import { isUuid, uuidv7 } from './ids.js';
import { checkOutboxName } from './name.js';
import { nudgeCommitted, queueForLane, sendNudges } from './engine/nudge.js';
import { outboxSql } from './stores/pg/sql/index.js';
import { postgresOutboxStore } from './stores/pg/store.js';
import { addReport, drainLane, emptyReport, type RunReport } from './engine/drain.js';
import { eraseJobs, operateJobs, type OperateResult, type OperatorVerb, type TenantScope } from './engine/operate.js';
import { eventSink, jobRegistry, randomSeed, versionTimestamp, type OutboxRuntime } from './engine/runtime.js';
import { HandlerSessions, LaneSession } from './engine/session.js';
import type { LaneDb } from './types.js';
import { RUN, type DrivenEngine, type TxBatch, type TxEnqueue, type TxEnqueueMany } from './engine/driven.js';
import { cancelBatch, runBatch, type BatchCancelled, type BatchCreated, type BatchMembers, type BatchOptions } from './engine/batch.js';
import { planSweep, recoverExpired, runSweep, type SweepOptions, type SweepReport } from './engine/sweep.js';
import type { CorePolicy, EnqueueAccepted, EnqueueOptions, EnqueueResult, JobDefinition, JobRef } from './types.js';

export { RUN, type TxBatch, type TxEnqueue, type TxEnqueueMany } from './engine/driven.js';
export type { BatchCancelled, BatchCompletion, BatchCreated, BatchMembers, BatchOptions } from './engine/batch.js';

export type { OperateResult, TenantScope } from './engine/operate.js';

/** An outbox bound to one invocation's `env`. */
export interface Outbox<R = EnqueueResult> {
  /**
   * Runs `fn` and every `enqueue` / `enqueueMany` it makes in one transaction on `db`, then
   * nudges the queue once it has committed. Pass the top-level database, not a transaction.
   */
  transaction<T>(db: TransactionalDb, fn: (tx: any, enqueue: TxEnqueue<R>, enqueueMany: TxEnqueueMany<R>, batch: TxBatch<R>) => Promise<T>): Promise<T>;
  /** Enqueues inside a transaction the caller owns (one statement). Nudge after commit yourself. */
  enqueue<P>(tx: unknown, job: JobDefinition<P>, opts: EnqueueOptions<P>): Promise<R>;
  /**
   * Enqueues a list of jobs of one kind inside a transaction the caller owns, in ONE statement
   * (at most 5000 items and 16 MiB of payloads, else `PostboxError('too_large')` and nothing is
   * written). Results come in list order, by `enqueue`'s rules; of items sharing a dedupe key
   * in one tenant scope the first wins and the later ones are `exists` of it. Under
   * `strictEnqueue` a refusal throws `EnqueueRefusedError` naming the item (`index`). Nudge
   * after commit yourself.
   */
  enqueueMany<P>(tx: unknown, job: JobDefinition<P>, items: readonly EnqueueOptions<P>[]): Promise<R[]>;
  /**
   * A batch inside a transaction the caller owns: `fn` enqueues the members (`members.enqueue`,
   * `members.enqueueMany`), then the completion job (`onComplete`) is enqueued waiting on every
   * one of them. It falls due, once, when the last member reaches a final status, in the
   * statement that settles it; its handler reads the members' ends in `ctx.parents`
   * (`{ total, succeeded, dead, cancelled }`) and its id is the batch's. Members share the
   * completion's tenant; a batch has at most 100000. A refused completion throws
   * `EnqueueRefusedError` (roll the transaction back: its members are written in it). Inside
   * `transaction`, use the `batch` its callback gets, which nudges after commit.
   *
   * @example
   * const { id } = await outbox.batch(tx, { onComplete: { job: importDone, payload: { importId } } }, async (members) => {
   *   await members.enqueueMany(importRow, rows.map((row) => ({ payload: row })));
   * });
   */
  batch<T>(tx: unknown, opts: BatchOptions, fn: (members: BatchMembers<R>) => Promise<T>): Promise<BatchCreated<T>>;
  /**
   * Cancels a batch as a whole: its completion job (so it will not run), then every member that
   * has not ended (each as `cancel` would, in transactions of at most 1000).
   */
  cancelBatch(id: string, reason?: string, scope?: TenantScope): Promise<BatchCancelled>;
  /** Sends nudges for committed jobs. Never throws. */
  nudge(refs: readonly JobRef[]): Promise<void>;
  /** Cancels a pending, retrying or running job. */
  cancel(ref: { id: string }, reason?: string, scope?: TenantScope): Promise<OperateResult>;
  cancelMany(ids: readonly string[], reason?: string, scope?: TenantScope): Promise<OperateResult[]>;
  /** Dead or cancelled → pending with a fresh retry budget, and nudged. */
  replay(id: string, scope?: TenantScope): Promise<OperateResult>;
  replayMany(ids: readonly string[], scope?: TenantScope): Promise<OperateResult[]>;
  /** Makes a pending or retrying job due now, and nudges it. */
  retryNow(id: string, scope?: TenantScope): Promise<OperateResult>;
  retryNowMany(ids: readonly string[], scope?: TenantScope): Promise<OperateResult[]>;
  /**
   * Deletes every job (and attempt) of one tenant. Returns how many jobs. With `ids`, deletes
   * only those of them that are the tenant's, in one statement: a job committed after the ids
   * were read (say, while an operator was asked to confirm a count) is left alone.
   */
  eraseTenant(tenantKey: string, opts?: { ids?: readonly string[] }): Promise<number>;
  /** This outbox's name (`createOutbox({ name })`); `null` for the default outbox. */
  readonly name: string | null;
  /**
   * Its key among several outboxes (`createOutboxes({ databases })`), which every nudge it
   * sends names so that one consumer can route it to this outbox's database; `null` for an
   * outbox of its own (`createOutbox`), whose nudges name none.
   */
  readonly key: string | null;
  /** Its schema: `outbox`, or `outbox_<name>` for a named outbox. */
  readonly schema: string;
  /** The kinds it registers, sorted (for `countBacklog`'s `registeredKinds`). */
  readonly kinds: readonly string[];
  /** Its kinds with a `concurrency`, `rateLimit` or `tenantConcurrency`, and their policies (for `countBacklog`'s `limits`). */
  readonly limits: readonly { kind: string; policy: CorePolicy }[];
  /** @internal Runs one lane: nudged targets, or a bounded drain. */
  readonly [RUN]: OutboxEngine;
}

/** A `strictEnqueue: true` outbox: enqueue results are always accepted ones. */
export type StrictOutbox = Outbox<EnqueueAccepted>;

/** @internal What the Cloudflare handlers, the Node consumer and the test kit drive: the engine on PostgreSQL. */
export interface OutboxEngine extends DrivenEngine<LaneDb> {
  runtime: OutboxRuntime & { options: OutboxOptions<readonly JobDefinition[], unknown> };
  /** Its numeric options, as the core checked them: `lanes` and `handlerSessions` are the connections a drain may hold. */
  config: OutboxConfig;
  /** A session for `fn`, closed after; with `deadlineAt`, every use of it gives up then. Its handlers' ctx.db uses `handlers`. */
  withSession<T>(fn: (session: LaneSession) => Promise<T>, deadlineAt?: number, handlers?: HandlerSessions | null): Promise<T>;
}

/**
 * Creates an outbox. Cheap: it connects lazily, never at construction, so create one per
 * invocation from its `env`.
 *
 * @example
 * ```ts
 * export const outboxFor = (env: Env) =>
 *   createOutbox({
 *     jobs: [welcomeEmail],
 *     connect: createPgConnector(env.OUTBOX_DB.connectionString),
 *     queue: env.OUTBOX_QUEUE,
 *   });
 * ```
 */
export function createOutbox<const Jobs extends readonly JobDefinition<any, any>[]>(
  options: Omit<OutboxOptions<Jobs>, 'deps'> & DepsOption<JobsDeps<Jobs>> & { strictEnqueue: true },
): StrictOutbox;
export function createOutbox<const Jobs extends readonly JobDefinition<any, any>[]>(
  options: Omit<OutboxOptions<Jobs>, 'deps'> & DepsOption<JobsDeps<Jobs>>,
): Outbox;
export function createOutbox(options: OutboxOptions): Outbox<any> {
  return buildOutbox(options, null, 'createOutbox');
}

/**
 * @internal An outbox; with `key`, one of several (`createOutboxes`): its nudges name it.
 * `who` prefixes configuration errors.
 */
export function buildOutbox(options: OutboxOptions, key: string | null, who: string): Outbox<any> {
  if (!options || !Array.isArray(options.jobs) || typeof options.connect !== 'function') {
    throw new PostboxError('invalid_config', `${who}: \`jobs\` (an array) and \`connect\` (a function) are required`);
  }
  const sql = outboxSql(checkOutboxName(options.name, `${who}: name`));
  const store = postgresOutboxStore(sql.name);
  const { registry, policies } = jobRegistry(options.jobs, who);
  const core = getCore();
  // The core owns the bounds and defaults of the outbox's own numbers (docs/ABI.md, pb_claim outbox).
  const config = outboxConfig(core, options, who);
  const { concurrency, lanes, handlerSessions, operationTimeoutMs } = config;
  if (options.generateId !== undefined && typeof options.generateId !== 'function') {
    throw new PostboxError('invalid_config', `${who}: generateId must be a function returning a UUID`);
  }
  if (options.recordNudges !== undefined && typeof options.recordNudges !== 'boolean') {
    throw new PostboxError('invalid_config', `${who}: recordNudges must be a boolean`);
  }
  const runtime: OutboxEngine['runtime'] = {
    core,
    options,
    registry,
    policies,
    clock: options.clock ?? { now: () => Date.now() },
    concurrency,
    versionTs: versionTimestamp(options.version, who),
    emit: eventSink(options.events),
    queueFor: (lane) => queueForLane(options.queue, lane),
    key,
    seed: randomSeed,
    store,
    openSession: () => new LaneSession(options.connect),
  };
  const enqueueEnv = (): EnqueueEnv => ({
    core: runtime.core,
    now: runtime.clock.now(),
    maxPayloadBytes: config.maxPayloadBytes,
    maxQueueDelayMs: config.maxQueueDelayMs,
    maxKeyChars: config.maxKeyChars,
    hasQueue: options.queue !== undefined,
    versionTs: runtime.versionTs,
    generateId: options.generateId ?? uuidv7,
    strict: options.strictEnqueue === true,
    store,
    telemetry: options.telemetry,
  });

  const deadlineOf = (deadlineAt: number | undefined) => (deadlineAt === undefined ? undefined : { at: deadlineAt, now: () => runtime.clock.now() });
  const withSession = async <T>(fn: (session: LaneSession) => Promise<T>, deadlineAt?: number, handlers?: HandlerSessions | null): Promise<T> => {
    const session = new LaneSession(options.connect, deadlineOf(deadlineAt), handlers);
    try {
      return await fn(session);
    } finally {
      await session.close();
    }
  };
  /** Runs `fn` with the handler sessions of one drain or sweep, ended with it. */
  const withHandlerSessions = async <T>(deadlineAt: number, fn: (handlers: HandlerSessions | null) => Promise<T>): Promise<T> => {
    if (handlerSessions === 0) return fn(null);
    const handlers = new HandlerSessions(options.connect, handlerSessions, deadlineOf(deadlineAt));
    try {
      return await fn(handlers);
    } finally {
      await handlers.close();
    }
  };

  /**
   * Runs an operator action in one transaction on its own connection, all of it (connecting,
   * the SQL, closing) bounded by `operationTimeoutMs`: a lock held elsewhere or a server that
   * does not answer makes it fail (rolled back, its connection destroyed) instead of waiting.
   */
  const operatorTransaction = <T>(what: string, fn: (q: LaneDb) => Promise<T>): Promise<T> =>
    boundedTransaction(options.connect, operationTimeoutMs, what, fn);

  const operate = async (action: OperatorVerb, ids: readonly string[], scope: TenantScope | undefined, reason: string | null) => {
    const { results, nudges } = await operateJobs(runtime, operatorTransaction, action, ids, scope, reason);
    await sendNudges(runtime, nudges);
    return results;
  };

  const outbox: Outbox<any> = {
    name: sql.name,
    key,
    schema: sql.schema,
    kinds: [...registry.keys()].sort(),
    limits: [...registry.values()].filter((j) => j.policy.concurrency || j.policy.rateSlots || j.policy.tenantConcurrency).map((j) => ({ kind: j.kind, policy: j.policy })),
    // A node-postgres handle (a Client, PoolClient, Pool, or a handler's ctx.db) also takes the
    // nudges' record after the commit, instead of a connection of the outbox's own.
    transaction: (db, fn) =>
      enqueueInTransaction(runtime, enqueueEnv, (body) => runTransaction(db, body), fn, typeof (db as { query?: unknown }).query === 'function' ? db : undefined),
    async enqueue(tx, job, opts) {
      return (await enqueueJobs(enqueueEnv(), toQueryable(tx), job, [opts], 'enqueue')).results[0]!;
    },
    async enqueueMany(tx, job, items) {
      return (await enqueueJobs(enqueueEnv(), toQueryable(tx), job, items, 'enqueueMany')).results;
    },
    batch: (tx, opts, fn) => runBatch(async (job, items, api) => (await enqueueJobs(enqueueEnv(), toQueryable(tx), job, items, api)).results, opts, fn),
    cancelBatch: (id, reason = 'cancelled', scope) =>
      cancelBatch((job) => operatorTransaction('cancelBatch', (q) => store.dependencies.openBatchMembers(q, job)), (ids) => operate('cancel', ids, scope, reason), id),
    nudge: (refs) => nudgeCommitted(runtime, refs),
    cancel: async (ref, reason = 'cancelled', scope) => (await operate('cancel', [ref.id], scope, reason))[0]!,
    cancelMany: (ids, reason = 'cancelled', scope) => operate('cancel', ids, scope, reason),
    replay: async (id, scope) => (await operate('replay', [id], scope, null))[0]!,
    replayMany: (ids, scope) => operate('replay', ids, scope, null),
    retryNow: async (id, scope) => (await operate('retryNow', [id], scope, null))[0]!,
    retryNowMany: (ids, scope) => operate('retryNow', ids, scope, null),
    async eraseTenant(tenantKey, opts) {
      if (typeof tenantKey !== 'string' || tenantKey.length === 0) throw new PostboxError('invalid_input', 'eraseTenant: tenantKey must be a non-empty string');
      const ids = opts?.ids;
      if (ids !== undefined && (!Array.isArray(ids) || !ids.every(isUuid))) {
        throw new PostboxError('invalid_input', 'eraseTenant: ids must be an array of job ids (UUIDs)');
      }
      // A whole tenant goes with its children (a job's parents are of its own tenant); named jobs
      // leave their waiting children behind, which eraseJobs cancels.
      if (ids === undefined) return operatorTransaction('eraseTenant', (q) => store.eraseTenant(q, tenantKey));
      return eraseJobs(runtime, store, operatorTransaction, tenantKey, ids);
    },
    [RUN]: {
      runtime,
      config,
      withSession,
      async drain(opts) {
        // Each connection drains on its own session; nudged targets are dealt out among them.
        const shares = opts.targets
          ? Array.from({ length: lanes }, (_, i) => opts.targets!.filter((_, j) => j % lanes === i)).filter((t) => t.length > 0)
          : Array.from({ length: lanes }, () => undefined);
        // The lanes' handlers share one pool of handler sessions: lanes + pool stay within the core's budget.
        const reports = await withHandlerSessions(opts.deadlineAt, (handlers) =>
          Promise.all(
            shares.map((targets) => withSession((session) => drainLane(runtime, session, targets ? { ...opts, targets } : opts), opts.deadlineAt, handlers)),
          ),
        );
        return reports.reduce(addReport, emptyReport());
      },
      sweep(startedAt, opts, plan = planSweep(runtime, startedAt, opts)) {
        return withHandlerSessions(plan.deadlineAt, (handlers) => withSession((session) => runSweep(runtime, session, plan), plan.deadlineAt, handlers));
      },
      recover: () => withSession((session) => recoverExpired(runtime, session)),
      transaction: (db, fn) => outbox.transaction(db, fn),
    },
  };
  return outbox;
}

export type { RunReport, SweepOptions, SweepReport };
