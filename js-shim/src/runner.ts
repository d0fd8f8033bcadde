import { defaultClassify } from './jobs.js';
import { PostboxError } from './errors.js';
import { JOB_CLAIM_DUE, JOB_CLAIM_TARGETS } from './queries/claim.js';
import { JOB_SETTLE_BATCH } from './queries/settle.js';
import { run } from './queries/statement.js';
import type { OutboxRuntime } from './runtime.js';
import { errorMessage, type LaneSession } from './session.js';
import type { HandlerOutcome, JobDefinition, LaneDb, OutboxDb, Queryable } from './types.js';

/** A job row as claimed (or found with an expired lease). */
export interface ClaimedRow {
  id: string;
  kind: string;
  lane: string;
  payload: unknown;
  tenant_key: string | null;
  correlation_id: string | null;
  metadata: Record<string, unknown> | null;
  attempts: number;
  attempt_seq: number;
  crashes: number;
  streak_code: string | null;
  streak: number;
  last_error_code: string | null;
  last_error_message: string | null;
  lease_expires_ms: string | number;
}

/** An outcome in the core's vocabulary (docs/ABI.md, `pb_settle`). */
export interface CoreOutcome {
  type: 'ok' | 'retry' | 'fail' | 'cancel' | 'timeout' | 'crash' | 'claim_late' | 'hook_failed' | 'invalid_payload';
  code?: string;
  after?: number;
  reason?: string;
  message?: string;
}

interface SettleDecision {
  status: string;
  dueAt: number | null;
  attempts: number;
  crashes: number;
  streakCode: string | null;
  streak: number;
  errorCode: string | null;
  errorMessage: string | null;
  finished: boolean;
  charged: boolean;
  attemptOutcome: string;
  events: { type: string; code?: string; reason?: string; streak?: number; crashes?: number }[];
}

/** One finished attempt waiting to be settled. */
export interface Finished {
  row: ClaimedRow;
  outcome: CoreOutcome;
  commit?: (tx: Queryable) => Promise<unknown>;
}

/** Counts of what a run did, by resulting status. */
export interface RunReport {
  claimed: number;
  succeeded: number;
  retrying: number;
  dead: number;
  cancelled: number;
  pending: number;
  claimLate: number;
  stale: number;
  recovered: number;
}

export const emptyReport = (): RunReport => ({
  claimed: 0, succeeded: 0, retrying: 0, dead: 0, cancelled: 0, pending: 0, claimLate: 0, stale: 0, recovered: 0,
});

export function addReport(into: RunReport, from: RunReport): RunReport {
  for (const key of Object.keys(into) as (keyof RunReport)[]) into[key] += from[key];
  return into;
}

interface ClaimPlan {
  limit: number;
  kinds: string[];
  leaseMs: number[];
  versionCutoff: number | null;
  targetOnly: boolean;
}

export interface DrainOptions {
  lane: string;
  deadlineAt: number;
  /** Only these kinds (a reserved sweep); default every registered kind of the lane. */
  kinds?: readonly string[];
  /** Stop after claiming this many. */
  maxJobs?: number;
  /** Claim only these nudged jobs. */
  targets?: readonly { id: string; kind: string }[];
}

/**
 * Claims and runs jobs of one lane until none are due, the plan says stop, or `maxJobs`:
 * claim a batch (one statement), run it concurrently, settle it (one statement), repeat.
 */
export async function drainLane(rt: OutboxRuntime, session: LaneSession, opts: DrainOptions): Promise<RunReport> {
  const report = emptyReport();
  const policies = opts.kinds ? rt.policies.filter((p) => opts.kinds!.includes(p.kind)) : rt.policies;
  // The core decides, per nudge, whether this lane may claim it at all.
  const targets = opts.targets?.filter((target) => plan(rt, policies, opts, target).limit > 0);
  if (targets?.length === 0) return report;
  for (;;) {
    const claimPlan = plan(rt, policies, opts, null);
    let limit = claimPlan.limit;
    if (opts.maxJobs !== undefined) limit = Math.min(limit, opts.maxJobs - report.claimed);
    if (limit <= 0 || claimPlan.kinds.length === 0) break;
    // Nudged targets are claimed a batch at a time, like a drain, so `concurrency` holds.
    const chunk = targets?.splice(0, limit);
    if (chunk?.length === 0) break;
    const now = rt.clock.now();
    const shared = [now, opts.lane, claimPlan.kinds, claimPlan.leaseMs, limit, claimPlan.versionCutoff];
    const rows = await session.exclusive(async (q) =>
      (chunk
        ? await run(q, JOB_CLAIM_TARGETS, [...shared, chunk.map((t) => t.id), chunk.map((t) => t.kind)])
        : await run(q, JOB_CLAIM_DUE, shared)
      ).rows as ClaimedRow[],
    );
    if (rows.length > 0) {
      report.claimed += rows.length;
      addReport(report, await runBatch(rt, session, rows, opts.deadlineAt));
    }
    if (!chunk && rows.length < limit) break;
  }
  return report;
}

function plan(rt: OutboxRuntime, policies: readonly OutboxRuntime['policies'][number][], opts: DrainOptions, target: { id: string; kind: string } | null): ClaimPlan {
  return rt.core.call<ClaimPlan>('claim', {
    op: 'plan',
    now: rt.clock.now(),
    deadlineAt: opts.deadlineAt,
    lane: opts.lane,
    concurrency: rt.concurrency,
    maxBatch: 100,
    policies,
    version: rt.versionTs === null ? null : { timestamp: rt.versionTs },
    target,
  });
}

/** Runs a claimed batch (admitting each job first) and settles it. */
async function runBatch(rt: OutboxRuntime, session: LaneSession, rows: ClaimedRow[], deadlineAt: number): Promise<RunReport> {
  const now = rt.clock.now();
  let abandoned = false;
  const finished = await Promise.all(
    rows.map(async (row): Promise<Finished> => {
      const job = rt.registry.get(row.kind);
      if (!job) return { row, outcome: { type: 'claim_late' } };
      const admit = rt.core.call<{ start: boolean; deadline?: number }>('claim', {
        op: 'admit', now, deadlineAt, leaseExpiresAt: Number(row.lease_expires_ms), timeoutMs: job.policy.timeoutMs,
      });
      if (!admit.start) return { row, outcome: { type: 'claim_late' } };
      const result = await runHandler(rt, session, job, row, admit.deadline ?? now + job.policy.timeoutMs);
      if (result.abandoned) abandoned = true;
      return result.finished;
    }),
  );
  // A handler that timed out mid-query may hold the session forever: settle on a fresh one.
  if (abandoned) await session.replace();
  return settleAll(rt, session, finished);
}

interface HandlerResult {
  finished: Finished;
  abandoned: boolean;
}

async function runHandler(rt: OutboxRuntime, session: LaneSession, job: JobDefinition, row: ClaimedRow, deadline: number): Promise<HandlerResult> {
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

function redact(rt: OutboxRuntime, message: string): string {
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
  return {
    async query(text, values) {
      guard();
      return session.exclusive((q) => tracked(q).query(text, values));
    },
    async transaction(fn) {
      guard();
      return session.transaction(async (q) => {
        const result = await fn(tracked(q));
        guard(); // a straggler past its deadline rolls back instead of committing
        return result;
      });
    },
  };
}

/** Asks the core for every settlement, then writes them: plain ones in one statement, hooked ones each in a transaction. */
export async function settleAll(rt: OutboxRuntime, session: LaneSession, finished: Finished[]): Promise<RunReport> {
  const report = emptyReport();
  if (finished.length === 0) return report;
  const now = rt.clock.now();
  const decisions = decide(rt, now, finished);
  const plain: number[] = [];
  const hooked: number[] = [];
  finished.forEach((f, i) => {
    const hasHook = (f.commit !== undefined || rt.options.onTransition !== undefined) && f.outcome.type !== 'claim_late';
    (hasHook ? hooked : plain).push(i);
  });
  if (plain.length > 0) {
    const settled = await writeWithRetry(rt, session, (q) => writeSettlements(q, now, plain.map((i) => [finished[i]!, decisions[i]!])));
    for (const i of plain) record(rt, report, finished[i]!, decisions[i]!, settled?.has(finished[i]!.row.id) ?? false, settled === null);
  }
  for (const i of hooked) await settleWithHooks(rt, session, now, finished[i]!, decisions[i]!, report);
  return report;
}

function decide(rt: OutboxRuntime, now: number, finished: Finished[]): SettleDecision[] {
  const batch = finished.map((f) => {
    const job = rt.registry.get(f.row.kind);
    if (!job) throw new PostboxError('unknown_kind', `no job registered for kind ${f.row.kind}`);
    return {
      now,
      seed: rt.seed(),
      policy: withOutboxDefaults(rt, job),
      job: {
        status: 'running', attempts: f.row.attempts, crashes: f.row.crashes, streakCode: f.row.streak_code, streak: f.row.streak,
        errorCode: f.row.last_error_code, errorMessage: f.row.last_error_message,
      },
      outcome: f.outcome,
    };
  });
  const out = rt.core.call<{ results: (SettleDecision | { error: { code: string; message: string } })[] }>('settle', { batch });
  return out.results.map((r, i) => {
    if ('error' in r) throw new PostboxError(r.error.code, `settle ${finished[i]!.row.kind}: ${r.error.message}`);
    return r;
  });
}

function withOutboxDefaults(rt: OutboxRuntime, job: JobDefinition) {
  const warn = rt.options.warnAtStreak;
  return job.policy.warnAtStreak === null && warn !== undefined ? { ...job.policy, warnAtStreak: warn } : job.policy;
}

async function writeSettlements(q: LaneDb, now: number, items: [Finished, SettleDecision][]): Promise<Set<string>> {
  const col = <T>(pick: (f: Finished, d: SettleDecision) => T) => items.map(([f, d]) => pick(f, d));
  const { rows } = await run(q, JOB_SETTLE_BATCH, [
    now,
    col((f) => f.row.id), col((f) => f.row.attempt_seq), col((_, d) => d.status), col((_, d) => d.dueAt),
    col((_, d) => d.attempts), col((_, d) => d.crashes), col((_, d) => d.streakCode), col((_, d) => d.streak),
    col((_, d) => d.errorCode), col((_, d) => d.errorMessage), col((_, d) => d.finished), col((_, d) => d.attemptOutcome),
  ]);
  return new Set(rows.map((r: { id: string }) => r.id));
}

/** A settle that hit a broken connection is tried once more on a fresh one; then the lease decides. */
async function writeWithRetry(rt: OutboxRuntime, session: LaneSession, write: (q: LaneDb) => Promise<Set<string>>): Promise<Set<string> | null> {
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      return await session.exclusive(write);
    } catch (error) {
      rt.emit({ type: 'infra_error', where: 'settle', error: errorMessage(error) });
      await session.replace();
    }
  }
  return null;
}

/** Wraps a throw from user code inside the settle transaction, to tell it from a broken session. */
class HookThrew {
  constructor(readonly error: unknown) {}
}

async function runHook(fn: () => Promise<unknown>): Promise<void> {
  try {
    await fn();
  } catch (error) {
    throw new HookThrew(error);
  }
}

async function settleWithHooks(rt: OutboxRuntime, session: LaneSession, now: number, f: Finished, d: SettleDecision, report: RunReport): Promise<void> {
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const settled = await session.transaction(async (tx) => {
        const ids = await writeSettlements(tx, now, [[f, d]]);
        if (!ids.has(f.row.id)) return false;
        if (f.commit && d.status === 'succeeded') await runHook(() => f.commit!(tx));
        const onTransition = rt.options.onTransition;
        if (onTransition) {
          await runHook(() => onTransition(tx, {
            job: { id: f.row.id, kind: f.row.kind, tenantKey: f.row.tenant_key, correlationId: f.row.correlation_id },
            transition: { from: 'running', to: d.status, outcome: d.attemptOutcome, code: d.errorCode, attempt: f.row.attempts + 1 },
          }));
        }
        return true;
      });
      record(rt, report, f, d, settled, false);
      return;
    } catch (error) {
      if (error instanceof HookThrew) {
        // The hook's throw rolled the transition back; the job retries as hook_failed, without hooks.
        const failed: Finished = { row: f.row, outcome: { type: 'hook_failed', message: redact(rt, errorMessage(error.error)) } };
        const [decision] = decide(rt, now, [failed]);
        const written = await writeWithRetry(rt, session, (q) => writeSettlements(q, now, [[failed, decision!]]));
        record(rt, report, failed, decision!, written?.has(f.row.id) ?? false, written === null);
        return;
      }
      // The session broke, not the hook: try the same settlement once more on a fresh one.
      rt.emit({ type: 'infra_error', where: 'settle', error: errorMessage(error) });
      await session.replace();
    }
  }
  record(rt, report, f, d, false, true);
}

function record(rt: OutboxRuntime, report: RunReport, f: Finished, d: SettleDecision, settled: boolean, failed: boolean): void {
  const base = { jobId: f.row.id, kind: f.row.kind };
  if (failed) {
    rt.emit({ type: 'settle_failed', ...base, error: 'settlement could not be written; the lease will expire and the sweep recovers it' });
    return;
  }
  if (!settled) {
    report.stale++;
    rt.emit({ type: 'stale_settle', ...base, attempt: f.row.attempt_seq });
    return;
  }
  if (f.outcome.type === 'claim_late') {
    report.claimLate++;
    rt.emit({ type: 'claim_late', ...base });
  } else if (f.outcome.type === 'crash') {
    report.recovered++;
  }
  const status = d.status as keyof RunReport;
  if (status in report && status !== 'claimed') report[status]++;
  rt.emit({ type: 'job_settled', ...base, from: 'running', to: d.status as never, outcome: d.attemptOutcome, code: d.errorCode, attempt: f.row.attempts + 1 });
  for (const e of d.events) {
    if (e.type === 'dead_letter') rt.emit({ type: 'dead_letter', ...base, code: e.code ?? null, reason: e.reason ?? '' });
    else if (e.type === 'cancelled') rt.emit({ type: 'cancelled', ...base, code: e.code ?? null, reason: e.reason ?? '' });
    else if (e.type === 'streak_warning') rt.emit({ type: 'streak_warning', ...base, code: e.code ?? '', streak: e.streak ?? 0 });
    else if (e.type === 'crash_loop') rt.emit({ type: 'crash_loop', ...base, crashes: e.crashes ?? 0 });
  }
}
