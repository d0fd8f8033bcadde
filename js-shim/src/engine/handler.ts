// Runs one handler: payload validation, the timeout (real time), the AbortSignal, a fenced
// ctx.db, its lease (ctx.heartbeat, automatic beats, the stop point: lease.ts), and the mapping of whatever the handler did (returned, threw, hung) to an outcome.
import type { Finished, ClaimedRow } from './attempt.js';
import { LANE_DB } from '../stores/pg/db.js';
import { PostboxError, errorMessage } from '../errors.js';
import { AttemptLease, lostError, type Admitted } from './lease.js';
import type { EngineRuntime } from './runtime.js';
import type { Deadline } from './deadline.js';
import { LaneSession, type HandlerSessions, type Session } from './session.js';
import type { HandlerOutcome, JobDefinition, OutboxDb, ParentOutcomes, Queryable } from '../types.js';

/**
 * @internal The outbox's clock and event sink, on every handler's ctx under this key, for
 * Postbox's own handlers (postbox/webhooks) that decide with the outbox's `now` and emit events.
 */
export const HANDLER_RUNTIME: unique symbol = Symbol.for('postbox.handlerRuntime');
export interface HandlerRuntime {
  now(): number;
  /** The store's webhook endpoints (postbox/webhooks writes them with ctx.db); absent where it keeps none. */
  webhookEndpoints: import('../stores/contract.js').WebhookEndpointStore<Queryable> | undefined;
  emit(event: import('../types.js').OutboxEvent): void;
}

export interface HandlerResult {
  /** Null when the attempt lost its job (a `lease_lost` event): nothing to settle. */
  finished: Finished | null;
  /** The attempt ended with ctx.db work on the lane's session: the drain replaces that session. */
  abandoned: boolean;
}

const handlerRuntimes = new WeakMap<EngineRuntime<unknown>, HandlerRuntime>();

/** The one HandlerRuntime of an outbox, shared by all its attempts. */
function handlerRuntimeOf(rt: EngineRuntime<unknown>): HandlerRuntime {
  let hr = handlerRuntimes.get(rt);
  if (!hr) {
    hr = { now: () => rt.clock.now(), emit: rt.emit, webhookEndpoints: rt.store.webhookEndpoints };
    handlerRuntimes.set(rt, hr);
  }
  return hr;
}

export async function runHandler<Db>(rt: EngineRuntime<Db>, session: Session<Db>, job: JobDefinition, row: ClaimedRow, admitted: Admitted): Promise<HandlerResult> {
  const deadline = admitted.deadline;
  // Made when a handler first reads ctx.signal: most never do, and a controller per attempt is a
  // measurable share of a short job's cost.
  let controller: AbortController | undefined;
  let abortReason: unknown;
  const abort = (reason: unknown) => {
    abortReason = reason;
    controller?.abort(reason);
  };
  const fence: Fence = { closed: false, inflight: 0, tx: null };
  // The attempt ends once, by whichever comes first: the handler's result, its timer, or a
  // lost lease. One promise for the three (not a race of three), since every job makes one.
  let end!: (how: Finished | 'timeout' | 'lost') => void;
  const ended = new Promise<Finished | 'timeout' | 'lost'>((resolve) => {
    end = resolve;
  });
  // Made when the attempt has a stop point or beats, or when the handler first calls
  // ctx.heartbeat(): most jobs are covered by their claim's lease and never need one.
  let lease: AttemptLease<Db> | undefined;
  const leaseOf = (): AttemptLease<Db> => (lease ??= new AttemptLease(rt, session, job, row, admitted, () => end('lost')));
  let db: OutboxDb | undefined;
  let source: DbSource | undefined;
  const ctx = {
    jobId: row.id,
    kind: row.kind,
    attempt: admitted.attempt,
    idempotencyKey: row.id,
    get signal(): AbortSignal {
      if (!controller) {
        controller = new AbortController();
        // Read only after the attempt ended (a handler still running past its timeout): aborted already.
        if (abortReason !== undefined) controller.abort(abortReason);
      }
      return controller.signal;
    },
    deadline,
    remainingMs: () => Math.max(0, deadline - rt.clock.now()),
    heartbeat: async (): Promise<number> => {
      if (lease?.lost) throw lostError(lease.lost);
      if (fence.closed) throw new PostboxError('attempt_closed', 'ctx.heartbeat() called after the attempt returned or timed out');
      // On the lane's session a beat would queue behind the handler's own transaction.
      if (fence.tx && source?.shared) {
        throw new PostboxError('heartbeat_in_transaction', 'ctx.heartbeat() called while a ctx.db transaction is open: it would wait for the transaction; call it between transactions');
      }
      return leaseOf().beat();
    },
    // Made on first use, like the signal: many handlers never touch the database.
    get db(): OutboxDb {
      if (!db) {
        // ctx.db is a PostgreSQL session's: a D1 binding or a Durable Object's storage is the
        // handler's own to use (through deps), with no transaction the outbox could fence.
        if (!(session instanceof LaneSession)) {
          throw new PostboxError('unsupported', `ctx.db needs a store that runs user code in its transactions (PostgreSQL); ${row.kind} runs on one that does not: reach its database through deps`);
        }
        source = session.handlers ? new BorrowedSource(session.handlers, { at: deadline, now: () => rt.clock.now() }) : laneSource(session);
        db = fencedDb(source, fence);
      }
      return db;
    },
    deps: rt.options.deps,
    tenantKey: row.tenant_key,
    correlationId: row.correlation_id,
    metadata: row.metadata,
    parents: parentOutcomes(row),
    [HANDLER_RUNTIME]: handlerRuntimeOf(rt),
  };
  // Armed before the handler runs, so a beat it takes at once is never overridden by admit's numbers.
  if (admitted.stopAt !== undefined || (job.autoHeartbeat && admitted.heartbeatAt != null)) leaseOf().start();
  void (async (): Promise<Finished> => {
    const validated = await job.payload['~standard'].validate(row.payload);
    if (validated.issues) {
      return { row, outcome: { type: 'invalid_payload', message: redact(rt, validated.issues.map((i) => i.message).join('; ')) } };
    }
    return fromHandlerOutcome(row, await job.handle(validated.value, ctx), rt.store.runsUserCode === true);
  })()
    .catch((error: unknown) => classifyThrow(rt, job, row, error))
    .then(end);
  const timerMs = admitted.timerMs;
  // The timeout is real time (the platform's), whatever the outbox's clock says.
  const timer = setTimeout(() => end('timeout'), timerMs);
  const winner = await ended;
  clearTimeout(timer);
  lease?.end();
  fence.closed = true;
  if (winner === 'lost') {
    abort(lostError(lease?.lost ?? 'not_owner'));
    return { finished: null, abandoned: source?.abandon(fence.inflight > 0) ?? false };
  }
  if (winner === 'timeout') {
    abort(new PostboxError('timeout', `attempt of ${row.kind} timed out after ${timerMs} ms`));
    return { finished: { row, outcome: { type: 'timeout', message: `timed out after ${timerMs} ms` } }, abandoned: source?.abandon(fence.inflight > 0) ?? false };
  }
  return { finished: winner, abandoned: false };
}

/**
 * The handler's outcome in the core's vocabulary; anything else is `none`, which the core
 * classifies. A commit on a store that cannot run it (`commits` false) is `commit_unsupported`.
 */
export function fromHandlerOutcome(row: ClaimedRow, outcome: HandlerOutcome | undefined, commits: boolean): Finished {
  switch (outcome?.type) {
    case 'ok':
      if (!outcome.commit) return { row, outcome: { type: 'ok' } };
      return commits ? { row, outcome: { type: 'ok' }, commit: outcome.commit } : { row, outcome: { type: 'commit_unsupported' } };
    case 'retry':
      return { row, outcome: outcome.after === undefined ? { type: 'retry', code: outcome.code } : { type: 'retry', code: outcome.code, after: outcome.after } };
    case 'fail':
      return { row, outcome: { type: 'fail', code: outcome.code } };
    case 'cancel':
      return { row, outcome: { type: 'cancel', reason: outcome.reason } };
    case 'defer':
      return { row, outcome: { type: 'defer', code: outcome.code, after: outcome.after } };
    default:
      return { row, outcome: { type: 'none' } };
  }
}

function classifyThrow(rt: EngineRuntime<unknown>, job: JobDefinition, row: ClaimedRow, error: unknown): Finished {
  let outcome: HandlerOutcome | undefined;
  try {
    outcome = job.classify?.(error);
  } catch (classifyError) {
    rt.emit({ type: 'infra_error', where: `classify(${job.kind})`, error: errorMessage(classifyError) });
  }
  // No classify, or it did not claim the error: `thrown`, which the core classifies.
  const finished: Finished = outcome ? fromHandlerOutcome(row, outcome, rt.store.runsUserCode === true) : { row, outcome: { type: 'thrown' } };
  return { ...finished, outcome: { ...finished.outcome, message: redact(rt, errorMessage(error)) } };
}

/**
 * How much of an error's text goes to the core, which keeps 2,000 bytes of it: a megabyte of
 * message would only weigh on the core's input (2 MiB per call, shared by a batch).
 */
const MAX_ERROR_CHARS = 4_000;

/** An error's text as the job row may keep it: cut, then passed through the outbox's `redactError`. */
export function redact(rt: EngineRuntime<unknown>, text: string): string {
  const message = text.length > MAX_ERROR_CHARS ? text.slice(0, MAX_ERROR_CHARS) : text;
  if (!rt.options.redactError) return message;
  try {
    return rt.options.redactError(message);
  } catch {
    return '[redaction failed]';
  }
}

interface Fence {
  closed: boolean;
  /** Queries and transactions of the handler on its session now. */
  inflight: number;
  /** The client of the handler's open ctx.db transaction: its other ctx.db queries join it. */
  tx: Queryable | null;
}

/** Where one attempt's ctx.db runs. */
interface DbSource {
  /** True when ctx.db shares the lane's session (no handler sessions). */
  readonly shared: boolean;
  run<T>(fn: (session: LaneSession) => Promise<T>): Promise<T>;
  /**
   * The attempt ended with `busy` ctx.db work: drops what may be stuck. True when that is the
   * lane's session, which the drain must then replace.
   */
  abandon(busy: boolean): boolean;
}

/** ctx.db on the lane's own session (`handlerSessions: 0`). */
const laneSource = (session: LaneSession): DbSource => ({ shared: true, run: (fn) => fn(session), abandon: (busy) => busy });

/**
 * ctx.db on a handler session borrowed from the drain's pool on first use and kept while the
 * attempt has ctx.db work going, so its statements never queue behind the lane's.
 */
class BorrowedSource implements DbSource {
  readonly shared = false;
  #held: Promise<LaneSession> | null = null;
  #session: LaneSession | null = null;
  #users = 0;
  #ended = false;

  constructor(
    readonly pool: HandlerSessions,
    readonly until: Deadline,
  ) {}

  async run<T>(fn: (session: LaneSession) => Promise<T>): Promise<T> {
    this.#users++;
    try {
      this.#held ??= this.pool.acquire(this.until).then(
        (session) => {
          // Granted after the attempt ended (it waited for a free one): straight back.
          if (this.#ended) {
            this.pool.release(session);
            throw closedDbError();
          }
          return (this.#session = session);
        },
        (error: unknown) => {
          this.#held = null;
          throw error;
        },
      );
      return await fn(await this.#held);
    } finally {
      if (--this.#users === 0 && this.#session) {
        this.pool.release(this.#session);
        this.#session = null;
        this.#held = null;
      }
    }
  }

  abandon(): boolean {
    this.#ended = true;
    // Lent with work on it: it may be stuck mid-statement, so it is destroyed, not returned.
    if (this.#session && this.#users > 0) this.pool.discard(this.#session);
    this.#session = null;
    return false;
  }
}

const closedDbError = () => new PostboxError('attempt_closed', 'ctx.db used after the attempt returned or timed out');

/** `ctx.db`: the attempt's session, closed to the handler once its attempt has ended. */
function fencedDb(source: DbSource, fence: Fence): OutboxDb {
  const guard = () => {
    if (fence.closed) throw closedDbError();
  };
  const tracked = (q: Queryable): Queryable => ({
    async query(text, values) {
      guard();
      fence.inflight++;
      try {
        return await q.query(text, values);
      } finally {
        fence.inflight--;
      }
    },
  });
  const db: OutboxDb = {
    async query(text, values) {
      guard();
      // The handler's transaction holds its session: a query queued behind it would wait for
      // it to end, which may be waiting for this query. It joins the transaction instead.
      if (fence.tx) return tracked(fence.tx).query(text, values);
      return source.run((session) => session.exclusive((q) => tracked(q).query(text, values)));
    },
    async transaction(fn) {
      guard();
      if (fence.tx) {
        throw new PostboxError(
          'transaction_open',
          'ctx.db.transaction (or outbox.transaction(ctx.db, …)) called while this handler’s ctx.db transaction is open: use that transaction (its tx, or ctx.db, whose queries join it)',
        );
      }
      // The whole transaction holds the session, even while `fn` awaits something else: a
      // handler that times out inside it leaves the session to be dropped, not waited for.
      fence.inflight++;
      try {
        return await source.run((session) =>
          session.transaction(async (q) => {
            fence.tx = q;
            try {
              const result = await fn(tracked(q));
              guard(); // a straggler past its deadline rolls back instead of committing
              return result;
            } finally {
              fence.tx = null;
            }
          }),
        );
      } finally {
        fence.inflight--;
      }
    },
  };
  return Object.assign(db, { [LANE_DB]: true });
}

/** How a claimed job's parents ended, from the counts its store keeps (none: null). Every parent has finished by the time a child runs, so those not dead or cancelled succeeded. */
function parentOutcomes(row: ClaimedRow): ParentOutcomes | null {
  if (row.parents_total == null) return null;
  const total = Number(row.parents_total);
  const dead = Number(row.parents_dead ?? 0);
  const cancelled = Number(row.parents_cancelled ?? 0);
  return { total, succeeded: Math.max(0, total - dead - cancelled), dead, cancelled };
}
