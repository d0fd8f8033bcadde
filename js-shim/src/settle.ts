// Settlement: the core decides each attempt's transition; this writes them. Plain ones go in
// one statement (alone, or with the next claim: see runner.ts); ones with a hook (ok({ commit }),
// onTransition) each get a transaction, so the hook commits with its transition or not at all.
import { emptyReport, type Finished, type RunReport } from './attempt.js';
import { isDeadlineError } from './deadline.js';
import { PostboxError } from './errors.js';
import { redact } from './handler.js';
import type { OutboxRuntime } from './runtime.js';
import { errorMessage, type LaneSession } from './session.js';
import type { SettleWrite } from './store/contract.js';
import type { CorePolicy, JobDefinition, JobStatus, LaneDb } from './types.js';

/** The core's answer for one attempt (docs/ABI.md, `pb_settle`). */
export interface SettleDecision {
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
  /** The attempt's number as handlers and events show it (a crash is not an attempt). */
  attempt: number;
  events: { type: string; code?: string; reason?: string; streak?: number; crashes?: number }[];
}

/** A settlement and the core's decision for it. */
export type Settlement = [Finished, SettleDecision];

/** Whether an attempt's settlement must run a hook inside its transaction. */
export function needsHooks(rt: OutboxRuntime, f: Finished): boolean {
  return (f.commit !== undefined || rt.options.onTransition !== undefined) && f.outcome.type !== 'claim_late' && f.outcome.type !== 'released';
}

/** Asks the core for every settlement, then writes them: plain ones in one statement, hooked ones each in a transaction. */
export async function settleAll(rt: OutboxRuntime, session: LaneSession, finished: Finished[]): Promise<RunReport> {
  const report = emptyReport();
  await settleHooked(rt, session, finished.filter((f) => needsHooks(rt, f)), report);
  const plain = finished.filter((f) => !needsHooks(rt, f));
  if (plain.length > 0) {
    const now = rt.clock.now();
    const items = pair(plain, decide(rt, now, plain));
    const settled = await writeWithRetry(rt, session, (q) => writeSettlements(rt, q, now, items));
    recordAll(rt, report, items, settled);
  }
  return report;
}

/** Settles attempts whose hooks must commit with them, one transaction each. */
export async function settleHooked(rt: OutboxRuntime, session: LaneSession, hooked: Finished[], report: RunReport): Promise<void> {
  if (hooked.length === 0) return;
  const now = rt.clock.now();
  const decisions = decide(rt, now, hooked);
  for (let i = 0; i < hooked.length; i++) await settleWithHooks(rt, session, now, hooked[i]!, decisions[i]!, report);
}

export const pair = (finished: Finished[], decisions: SettleDecision[]): Settlement[] => finished.map((f, i) => [f, decisions[i]!]);

/** Records what was written: `settled` holds the ids the database accepted; null when the write failed. */
export function recordAll(rt: OutboxRuntime, report: RunReport, items: Settlement[], settled: ReadonlySet<string> | null): void {
  for (const [f, d] of items) record(rt, report, f, d, settled?.has(f.row.id) ?? false, settled === null);
}

/** A success raises no events; one shared, frozen list for all of them. */
const NO_EVENTS: SettleDecision['events'] = Object.freeze([]) as unknown as SettleDecision['events'];

export function decide(rt: OutboxRuntime, now: number, finished: Finished[]): SettleDecision[] {
  const decisions: SettleDecision[] = new Array(finished.length);
  // Each kind's policy goes once per call; items name it by index (the core parses it once).
  const policies: CorePolicy[] = [];
  const indexOf = new Map<string, number>();
  const batch: object[] = [];
  const batchAt: number[] = [];
  for (let i = 0; i < finished.length; i++) {
    const f = finished[i]!;
    const job = rt.registry.get(f.row.kind);
    if (!job) throw new PostboxError('unknown_kind', `no job registered for kind ${f.row.kind}`);
    // A success reads no policy or text: the core's numeric entry decides it without JSON.
    if (f.outcome.type === 'ok') {
      const ok = rt.core.settleOk({ now, attempts: f.row.attempts, crashes: f.row.crashes, streak: f.row.streak, maxAttempts: f.row.max_attempts ?? null });
      if (ok) {
        decisions[i] = {
          status: ok.status, dueAt: ok.dueAt, attempts: ok.attempts, crashes: ok.crashes, streakCode: null, streak: ok.streak,
          errorCode: null, errorMessage: null, finished: ok.finished, charged: ok.charged, attemptOutcome: 'ok', attempt: ok.attempt, events: NO_EVENTS,
        };
        continue;
      }
    }
    let index = indexOf.get(f.row.kind);
    if (index === undefined) {
      index = policies.push(withOutboxDefaults(rt, job)) - 1;
      indexOf.set(f.row.kind, index);
    }
    batchAt.push(i);
    batch.push({
      now,
      seed: rt.seed(),
      policy: index,
      job: {
        status: 'running', attempts: f.row.attempts, crashes: f.row.crashes, streakCode: f.row.streak_code, streak: f.row.streak,
        maxAttempts: f.row.max_attempts ?? null, errorCode: f.row.last_error_code, errorMessage: f.row.last_error_message,
      },
      outcome: f.outcome,
    });
  }
  if (batch.length === 0) return decisions;
  const out = rt.core.call<{ results: (SettleDecision | { error: { code: string; message: string } })[] }>('settle', { policies, batch });
  out.results.forEach((r, k) => {
    const i = batchAt[k]!;
    if ('error' in r) throw new PostboxError(r.error.code, `settle ${finished[i]!.row.kind}: ${r.error.message}`);
    decisions[i] = r;
  });
  return decisions;
}

function withOutboxDefaults(rt: OutboxRuntime, job: JobDefinition) {
  const warn = rt.options.warnAtStreak;
  return job.policy.warnAtStreak === null && warn !== undefined ? { ...job.policy, warnAtStreak: warn } : job.policy;
}

/** The core's decisions as the store writes them. */
export function settleWrites(items: Settlement[]): SettleWrite[] {
  return items.map(([f, d]) => ({
    id: f.row.id, attemptSeq: f.row.attempt_seq, status: d.status as JobStatus, dueAt: d.dueAt, attempts: d.attempts, crashes: d.crashes,
    streakCode: d.streakCode, streak: d.streak, errorCode: d.errorCode, errorMessage: d.errorMessage, finished: d.finished, outcome: d.attemptOutcome,
  }));
}

async function writeSettlements(rt: OutboxRuntime, q: LaneDb, now: number, items: Settlement[]): Promise<Set<string>> {
  return new Set(await rt.store.settle(q, { now, items: settleWrites(items) }));
}

/** What the core says to do about a settlement whose write failed (docs/ABI.md, `pb_settle` `failure`). */
type FailureNext = 'retry' | 'hook_failed' | 'give_up';

/** Reports what the shim saw of a failed settle write; the core decides what it means. */
function afterFailure(rt: OutboxRuntime, session: LaneSession, part: 'write' | 'hook', error: unknown, tries: number): FailureNext {
  const code = (error as { code?: unknown } | null)?.code;
  const sqlState = typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) ? code : null;
  // A deadline gave up on the session (and dropped it): infrastructure, like a lost connection.
  const sessionBroken = session.isBroken() || isDeadlineError(error);
  return rt.core.call<{ next: FailureNext }>('settle', { failure: { part, sessionBroken, sqlState, tries } }).next;
}

/** Writes settlements; a failed write is tried again on a fresh session while the core says so. Null once it gives up. */
export async function writeWithRetry(rt: OutboxRuntime, session: LaneSession, write: (q: LaneDb) => Promise<Set<string>>): Promise<Set<string> | null> {
  for (let tries = 1; ; tries++) {
    try {
      return await session.exclusive(write);
    } catch (error) {
      rt.emit({ type: 'infra_error', where: 'settle', error: errorMessage(error) });
      const next = afterFailure(rt, session, 'write', error, tries);
      await session.replace();
      if (next !== 'retry') return null;
    }
  }
}

/**
 * Settles one attempt with its hooks in one transaction. A hook that fails on a live session
 * settles the job as hook_failed; a connection lost anywhere in the transaction (the hook's
 * statements included) is infrastructure: the core has it retried, hooks and all, uncharged.
 */
async function settleWithHooks(rt: OutboxRuntime, session: LaneSession, now: number, f: Finished, d: SettleDecision, report: RunReport): Promise<void> {
  for (let tries = 1; ; tries++) {
    const at: { part: 'write' | 'hook' } = { part: 'write' };
    try {
      const settled = await session.transaction(async (tx) => {
        const ids = await writeSettlements(rt, tx, now, [[f, d]]);
        if (!ids.has(f.row.id)) return false;
        at.part = 'hook';
        if (f.commit && d.status === 'succeeded') await f.commit(tx);
        const onTransition = rt.options.onTransition;
        if (onTransition) {
          await onTransition(tx, {
            job: { id: f.row.id, kind: f.row.kind, tenantKey: f.row.tenant_key, correlationId: f.row.correlation_id },
            transition: { from: 'running', to: d.status, outcome: d.attemptOutcome, code: d.errorCode, attempt: d.attempt },
          });
        }
        return true;
      });
      record(rt, report, f, d, settled, false);
      return;
    } catch (error) {
      const next = afterFailure(rt, session, at.part, error, tries);
      if (next === 'hook_failed') {
        // The hook's throw rolled the transition back; the job retries as hook_failed, without hooks.
        const failed: Finished = { row: f.row, outcome: { type: 'hook_failed', message: redact(rt, errorMessage(error)) } };
        const [decision] = decide(rt, now, [failed]);
        const written = await writeWithRetry(rt, session, (q) => writeSettlements(rt, q, now, [[failed, decision!]]));
        record(rt, report, failed, decision!, written?.has(f.row.id) ?? false, written === null);
        return;
      }
      rt.emit({ type: 'infra_error', where: 'settle', error: errorMessage(error) });
      await session.replace();
      if (next === 'give_up') break;
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
  } else if (f.outcome.type === 'released') {
    report.released++;
  } else if (f.outcome.type === 'crash') {
    report.recovered++;
  }
  const status = d.status as keyof RunReport;
  if (status in report && status !== 'claimed') report[status]++;
  rt.emit({ type: 'job_settled', ...base, from: 'running', to: d.status as never, outcome: d.attemptOutcome, code: d.errorCode, attempt: d.attempt });
  for (const e of d.events) {
    if (e.type === 'dead_letter') rt.emit({ type: 'dead_letter', ...base, code: e.code ?? null, reason: e.reason ?? '' });
    else if (e.type === 'cancelled') rt.emit({ type: 'cancelled', ...base, code: e.code ?? null, reason: e.reason ?? '' });
    else if (e.type === 'streak_warning') rt.emit({ type: 'streak_warning', ...base, code: e.code ?? '', streak: e.streak ?? 0 });
    else if (e.type === 'crash_loop') rt.emit({ type: 'crash_loop', ...base, crashes: e.crashes ?? 0 });
  }
}
