// Runs one handler: payload validation, the timeout (real time), the AbortSignal, a fenced
// ctx.db, and the mapping of whatever the handler did (returned, threw, hung) to an outcome.
import type { Finished, ClaimedRow } from './attempt.js';
import { LANE_DB } from './db.js';
import { PostboxError } from './errors.js';
import { defaultClassify } from './jobs.js';
import type { OutboxRuntime } from './runtime.js';
import { errorMessage, type LaneSession } from './session.js';
import type { HandlerOutcome, JobDefinition, OutboxDb, Queryable } from './types.js';

/**
 * @internal The outbox's clock and event sink, on every handler's ctx under this key, for
 * Postbox's own handlers (postbox/webhooks) that decide with the outbox's `now` and emit events.
 */
export const HANDLER_RUNTIME: unique symbol = Symbol.for('postbox.handlerRuntime');
export interface HandlerRuntime {
  now(): number;
  /** The outbox's statements, so Postbox's own handlers write to its schema. */
  sql: import('./queries/index.js').OutboxSql;
  emit(event: import('./types.js').OutboxEvent): void;
}

export interface HandlerResult {
  finished: Finished;
  abandoned: boolean;
}

export async function runHandler(rt: OutboxRuntime, session: LaneSession, job: JobDefinition, row: ClaimedRow, deadline: number): Promise<HandlerResult> {
  const controller = new AbortController();
  const fence = { closed: false, inflight: 0 };
  const ctx = {
    jobId: row.id,
    kind: row.kind,
    attempt: row.attempts + 1,
    idempotencyKey: row.id,
    signal: controller.signal,
    deadline,
    remainingMs: () => Math.max(0, deadline - rt.clock.now()),
    db: fencedDb(session, fence),
    deps: rt.options.deps,
    tenantKey: row.tenant_key,
    correlationId: row.correlation_id,
    metadata: row.metadata,
    [HANDLER_RUNTIME]: { now: () => rt.clock.now(), emit: rt.emit, sql: rt.sql } satisfies HandlerRuntime,
  };
  const work = (async (): Promise<Finished> => {
    const validated = await job.payload['~standard'].validate(row.payload);
    if (validated.issues) {
      return { row, outcome: { type: 'invalid_payload', message: validated.issues.map((i) => i.message).join('; ') } };
    }
    return fromHandlerOutcome(row, await job.handle(validated.value, ctx));
  })().catch((error: unknown) => classifyThrow(rt, job, row, error));

  let timer: ReturnType<typeof setTimeout> | undefined;
  // The timeout is real time (the platform's), whatever the outbox's clock says.
  const timeout = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), job.policy.timeoutMs);
  });
  const winner = await Promise.race([work, timeout]);
  clearTimeout(timer);
  fence.closed = true;
  if (winner === 'timeout') {
    controller.abort(new PostboxError('timeout', `attempt of ${row.kind} timed out after ${job.policy.timeoutMs} ms`));
    return { finished: { row, outcome: { type: 'timeout', message: `timed out after ${job.policy.timeoutMs} ms` } }, abandoned: fence.inflight > 0 };
  }
  return { finished: winner, abandoned: false };
}

function fromHandlerOutcome(row: ClaimedRow, outcome: HandlerOutcome | undefined): Finished {
  switch (outcome?.type) {
    case 'ok':
      return outcome.commit ? { row, outcome: { type: 'ok' }, commit: outcome.commit } : { row, outcome: { type: 'ok' } };
    case 'retry':
      return { row, outcome: outcome.after === undefined ? { type: 'retry', code: outcome.code } : { type: 'retry', code: outcome.code, after: outcome.after } };
    case 'fail':
      return { row, outcome: { type: 'fail', code: outcome.code } };
    case 'cancel':
      return { row, outcome: { type: 'cancel', reason: outcome.reason } };
    case 'defer':
      return { row, outcome: { type: 'defer', code: outcome.code, after: outcome.after } };
    default:
      return { row, outcome: { type: 'retry', code: 'invalid_outcome', message: 'handler returned no outcome: return ok(), retry(), fail() or cancel()' } };
  }
}

function classifyThrow(rt: OutboxRuntime, job: JobDefinition, row: ClaimedRow, error: unknown): Finished {
  let outcome: HandlerOutcome | undefined;
  try {
    outcome = job.classify?.(error);
  } catch (classifyError) {
    rt.emit({ type: 'infra_error', where: `classify(${job.kind})`, error: errorMessage(classifyError) });
  }
  const finished = fromHandlerOutcome(row, outcome ?? defaultClassify(error));
  return { ...finished, outcome: { ...finished.outcome, message: redact(rt, errorMessage(error)) } };
}

export function redact(rt: OutboxRuntime, message: string): string {
  if (!rt.options.redactError) return message;
  try {
    return rt.options.redactError(message);
  } catch {
    return '[redaction failed]';
  }
}

/** `ctx.db`: the lane session, closed to the handler once its attempt has ended. */
function fencedDb(session: LaneSession, fence: { closed: boolean; inflight: number }): OutboxDb {
  const guard = () => {
    if (fence.closed) throw new PostboxError('attempt_closed', 'ctx.db used after the attempt returned or timed out');
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
      return session.exclusive((q) => tracked(q).query(text, values));
    },
    async transaction(fn) {
      guard();
      // The whole transaction holds the session, even while `fn` awaits something else: a
      // handler that times out inside it leaves the session to be replaced, not waited for.
      fence.inflight++;
      try {
        return await session.transaction(async (q) => {
          const result = await fn(tracked(q));
          guard(); // a straggler past its deadline rolls back instead of committing
          return result;
        });
      } finally {
        fence.inflight--;
      }
    },
  };
  return Object.assign(db, { [LANE_DB]: true });
}

