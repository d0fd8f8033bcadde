// Settlement: the core decides each attempt's transition; this writes them. Plain ones go in
// one statement through writeSettled (alone, or with the next claim: see drain.ts); ones with a hook (ok({ commit }),
// onTransition) each get a transaction, so the hook commits with its transition or not at all.
import { errorMessage } from '../errors.js';
import { emptyReport, type ClaimedRow, type Finished, type RunReport } from './attempt.js';
import { fromHandlerOutcome, redact } from './handler.js';
import type { Core } from '../core/core.js';
import type { EngineRuntime } from './runtime.js';
import { failureFacts, type Session } from './session.js';
import type { ClaimInput, DependentChange, SettleWrite } from '../stores/contract.js';
import type { CorePolicy, HandlerOutcome, JobDefinition, JobStatus, Queryable } from '../types.js';

/** The core's answer for one attempt (docs/ABI.md, `pb_settle`). */
export interface SettleDecision extends Pick<SettleWrite, 'dueAt' | 'attempts' | 'crashes' | 'streakCode' | 'streak' | 'errorCode' | 'errorMessage' | 'finished'> {
  status: string;
  charged: boolean;
  attemptOutcome: string;
  /** The attempt's number as handlers and events show it (a crash is not an attempt). */
  attempt: number;
  events: { type: string; code?: string; reason?: string; streak?: number; crashes?: number }[];
}

/** A settlement and the core's decision for it. */
export type Settlement = [Finished, SettleDecision];

/** The core's rules for hooks (pb_settle `hooks`): outcomes that settle without them, and the status a commit runs on. */
interface HookRules {
  withoutHooks: ReadonlySet<string>;
  commitStatus: string;
}

const hookRulesOf = new WeakMap<Core, HookRules>();

/** Asked of the core once per core instance: every finished attempt is routed by them. */
function hookRules(core: Core): HookRules {
  let rules = hookRulesOf.get(core);
  if (!rules) {
    const answer = core.call<{ withoutHooks: string[]; commitStatus: string }>('settle', { op: 'hooks' });
    rules = { withoutHooks: new Set(answer.withoutHooks), commitStatus: answer.commitStatus };
    hookRulesOf.set(core, rules);
  }
  return rules;
}

/** Whether an attempt's settlement must run a hook inside its transaction: it has one, and the core says its outcome runs hooks. */
export function needsHooks(rt: EngineRuntime<unknown>, f: Finished): boolean {
  return (f.commit !== undefined || rt.options.onTransition !== undefined) && !hookRules(rt.core).withoutHooks.has(f.outcome.type);
}

/** Asks the core for every settlement, then writes them: plain ones in one statement, hooked ones each in a transaction. */
export async function settleAll<Db>(rt: EngineRuntime<Db>, session: Session<Db>, finished: Finished[]): Promise<RunReport> {
  const report = emptyReport();
  await settleHooked(rt, session, finished.filter((f) => needsHooks(rt, f)), report);
  const plain = finished.filter((f) => !needsHooks(rt, f));
  if (plain.length > 0) {
    const now = rt.clock.now();
    const items = decidePairs(rt, now, plain);
    recordAll(rt, report, items, await writeSettled(rt, session, now, items));
  }
  return report;
}

/** Settles attempts whose hooks must commit with them, one transaction each. */
export async function settleHooked<Db>(rt: EngineRuntime<Db>, session: Session<Db>, hooked: Finished[], report: RunReport): Promise<void> {
  if (hooked.length === 0) return;
  const now = rt.clock.now();
  for (const [f, d] of decidePairs(rt, now, hooked)) await settleWithHooks(rt, session, now, f, d, report);
}

/** What a settlement write came to: the ids the database accepted, and those given up on (the lease decides them). */
export interface Written {
  settled: ReadonlySet<string>;
  failed: ReadonlySet<string>;
}

const NOTHING: ReadonlySet<string> = new Set();

/** Records what was written. */
export function recordAll(rt: EngineRuntime<unknown>, report: RunReport, items: Settlement[], written: Written): void {
  for (const [f, d] of items) record(rt, report, f, d, written.settled.has(f.row.id), written.failed.has(f.row.id));
}

/**
 * The core's decision for each attempt, paired with it. An attempt the core refuses (a state
 * it cannot settle) is left out, with an event, for its lease to decide: it never takes the
 * attempts decided with it down too.
 */
export function decidePairs(rt: EngineRuntime<unknown>, now: number, finished: Finished[]): Settlement[] {
  let decisions: (SettleDecision | CoreRefusal)[];
  try {
    decisions = decide(rt, now, finished);
  } catch (error) {
    // The call as a whole was refused (its input too large, say): each attempt on its own.
    if (finished.length === 1) decisions = [refusal(error)];
    else decisions = finished.map((f) => decidePairs(rt, now, [f])[0]?.[1] ?? refusal(error));
  }
  const items: Settlement[] = [];
  finished.forEach((f, i) => {
    const d = decisions[i]!;
    if ('refused' in d) {
      rt.emit({ type: 'infra_error', where: `settle ${f.row.kind}`, error: d.refused });
      rt.emit({ type: 'settle_failed', jobId: f.row.id, kind: f.row.kind, error: 'the core refused the settlement; the lease will expire and the sweep recovers it' });
    } else items.push([f, d]);
  });
  return items;
}

interface CoreRefusal {
  refused: string;
}
const refusal = (error: unknown): CoreRefusal => ({ refused: errorMessage(error) });

/** A success raises no events; one shared, frozen list for all of them. */
const NO_EVENTS: SettleDecision['events'] = Object.freeze([]) as unknown as SettleDecision['events'];

function decide(rt: EngineRuntime<unknown>, now: number, finished: Finished[]): (SettleDecision | CoreRefusal)[] {
  const decisions: (SettleDecision | CoreRefusal)[] = new Array(finished.length);
  // Each kind's policy goes once per call; items name it by index (the core parses it once).
  const policies: CorePolicy[] = [];
  const indexOf = new Map<string, number>();
  const batch: object[] = [];
  const batchAt: number[] = [];
  for (let i = 0; i < finished.length; i++) {
    const f = finished[i]!;
    const job = rt.registry.get(f.row.kind);
    if (!job) {
      decisions[i] = { refused: `no job registered for kind ${f.row.kind}` };
      continue;
    }
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
    decisions[i] = 'error' in r ? { refused: `${r.error.code}: ${r.error.message}` } : r;
  });
  return decisions;
}

function withOutboxDefaults(rt: EngineRuntime<unknown>, job: JobDefinition) {
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

async function writeSettlements<Db>(rt: EngineRuntime<Db>, session: Session<Db>, q: Db, now: number, items: Settlement[]): Promise<Set<string>> {
  const settled = await rt.store.settle(q, { now, items: settleWrites(items) });
  noteReleased(session, settled.released);
  return new Set(settled);
}

/** Keeps the children a write on `session` released for its drain (Session.released). */
function noteReleased(session: Session<unknown>, released: readonly DependentChange[] | undefined): void {
  if (released && released.length > 0) session.released.push(...released);
}

/**
 * The waiting children that settlements written on `session` have released (now due) since the
 * last call: its drain claims on for those of its lane, and nudges the rest.
 */
export function takeReleased(session: Session<unknown>): DependentChange[] {
  return session.released.splice(0);
}

/** What the core says to do about a settlement whose write failed (docs/ABI.md, `pb_settle` `failure`). */
export interface FailureAnswer {
  next: 'retry' | 'hook_failed' | 'give_up' | 'split' | 'sanitize';
  /** With `sanitize`: the error text to write instead. */
  errorMessage?: string;
}

/** What the shim saw of a failed write. */
export interface FailureSeen {
  part: 'write' | 'hook';
  tries: number;
  /** How many settlements the failed statement carried. */
  rows: number;
  /** Whether the row's error text was already replaced. */
  sanitized?: boolean;
}

/** Reports what the shim saw of a failed settle write; the core decides what it means. */
function afterFailure<Db>(rt: EngineRuntime<Db>, session: Session<Db>, error: unknown, seen: FailureSeen): FailureAnswer {
  const { sessionBroken, sqlState } = failureFacts(session, error);
  return rt.core.call<FailureAnswer>('settle', {
    failure: { part: seen.part, sessionBroken, sqlState, tries: seen.tries, rows: Math.max(1, seen.rows), sanitized: seen.sanitized ?? false },
  });
}

/** A write of settlements, and what the claim riding on its first statement (if one did) came to. */
export interface WrittenWithClaim extends Written {
  /** The claim's jobs; `null` when no claim rode along or its statement failed (it claimed nothing). */
  claimed: ClaimedRow[] | null;
  /** The failure that took the claim's statement down when the session was at fault; `null` otherwise. */
  failure: unknown;
}

/**
 * The one writer of plain settlements, for the drain's statements and every other settle alike.
 * With `claim`, the lane's next claim rides on the first statement (one round trip; see
 * drain.ts). As the core decides from a failure: a lost session is tried again on a fresh one;
 * a statement refused for one row's data is split until that row is alone, and that row is
 * written again with its error text replaced, so no other row shares its fate. Retries never
 * carry the claim.
 */
export function writeSettled<Db>(rt: EngineRuntime<Db>, session: Session<Db>, now: number, items: Settlement[], opts: { claim?: ClaimInput; sanitized?: boolean } = {},
): Promise<WrittenWithClaim> {
  if (items.length === 0) return Promise.resolve({ settled: NOTHING, failed: NOTHING, claimed: null, failure: null });
  return writeTry(rt, session, now, items, 1, opts.sanitized ?? false, opts.claim);
}

/** Carries out the core's answer to a failed write of `items`; `retry` writes them again. */
async function writeAfterFailure<Db>(rt: EngineRuntime<Db>, session: Session<Db>, now: number, items: Settlement[], answer: FailureAnswer, tries = 1, sanitized = false,
): Promise<Written> {
  if (answer.next === 'split') {
    const half = Math.ceil(items.length / 2);
    const [a, b] = [await writeSettled(rt, session, now, items.slice(0, half)), await writeSettled(rt, session, now, items.slice(half))];
    return { settled: new Set([...a.settled, ...b.settled]), failed: new Set([...a.failed, ...b.failed]) };
  }
  if (answer.next === 'sanitize') {
    const [f, d] = items[0]!;
    return writeSettled(rt, session, now, [[f, { ...d, errorMessage: answer.errorMessage ?? null }]], { sanitized: true });
  }
  await session.replace();
  if (answer.next !== 'retry') return { settled: NOTHING, failed: new Set(items.map(([f]) => f.row.id)) };
  return writeTry(rt, session, now, items, tries + 1, sanitized);
}

async function writeTry<Db>(rt: EngineRuntime<Db>, session: Session<Db>, now: number, items: Settlement[], tries: number, sanitized: boolean, claim?: ClaimInput,
): Promise<WrittenWithClaim> {
  try {
    if (claim) {
      const out = await session.exclusive((q) => rt.store.settleThenClaim(q, { now, items: settleWrites(items) }, claim));
      noteReleased(session, out.settled.released);
      return { settled: new Set(out.settled), failed: NOTHING, claimed: out.claimed, failure: null };
    }
    return { settled: await session.exclusive((q) => writeSettlements(rt, session, q, now, items)), failed: NOTHING, claimed: null, failure: null };
  } catch (error) {
    rt.emit({ type: 'infra_error', where: 'settle', error: errorMessage(error) });
    const answer = afterFailure(rt, session, error, { part: 'write', tries, rows: items.length, sanitized });
    const written = await writeAfterFailure(rt, session, now, items, answer, tries, sanitized);
    // A row's data at fault (split, sanitize) leaves the session good: its caller claims on.
    const rowAtFault = answer.next === 'split' || answer.next === 'sanitize';
    return { settled: written.settled, failed: written.failed, claimed: null, failure: claim && !rowAtFault ? error : null };
  }
}

/**
 * Settles one attempt with its hooks in one transaction. A hook that fails on a live session
 * settles the job as hook_failed (a throw from `ok({ commit })` first goes to the job's
 * `classify`, as a handler's throw does); a connection lost anywhere in the transaction (the
 * hook's statements included) is infrastructure: the core has it retried, hooks and all, uncharged.
 */
async function settleWithHooks<Db>(rt: EngineRuntime<Db>, session: Session<Db>, now: number, f: Finished, d: SettleDecision, report: RunReport): Promise<void> {
  let sanitized = false;
  for (let tries = 1; ; tries++) {
    const at: { part: 'write' | 'hook'; inCommit: boolean } = { part: 'write', inCommit: false };
    try {
      const settled = await session.transaction(async (tx) => {
        const ids = await writeSettlements(rt, session, tx, now, [[f, d]]);
        if (!ids.has(f.row.id)) return false;
        at.part = 'hook';
        if (f.commit && d.status === hookRules(rt.core).commitStatus) {
          at.inCommit = true;
          // Only a store that runs user code (runsUserCode: PostgreSQL, whose handle is a
          // Queryable) has a commit to run: the handler's outcome is commit_unsupported elsewhere.
          await f.commit(tx as Queryable);
          at.inCommit = false;
        }
        const onTransition = rt.options.onTransition;
        if (onTransition) {
          await onTransition(tx as Queryable, {
            job: { id: f.row.id, kind: f.row.kind, tenantKey: f.row.tenant_key, correlationId: f.row.correlation_id },
            transition: { from: 'running', to: d.status, outcome: d.attemptOutcome, code: d.errorCode, attempt: d.attempt },
          });
        }
        return true;
      });
      record(rt, report, f, d, settled, false);
      return;
    } catch (error) {
      const answer = afterFailure(rt, session, error, { part: at.part, tries, rows: 1, sanitized });
      if (answer.next === 'sanitize') {
        // The transition's own text was refused: the same settlement, hooks and all, with it replaced.
        d = { ...d, errorMessage: answer.errorMessage ?? null };
        sanitized = true;
        continue;
      }
      if (answer.next === 'hook_failed') {
        // The hook's throw rolled the transition back; the job settles as the failure, without hooks.
        const failed = at.inCommit ? commitFailure(rt, f, error) : { row: f.row, outcome: { type: 'hook_failed', message: redact(rt, errorMessage(error)) } } satisfies Finished;
        const items = decidePairs(rt, now, [failed]);
        const written = await writeSettled(rt, session, now, items);
        for (const [g, e] of items) record(rt, report, g, e, written.settled.has(g.row.id), written.failed.has(g.row.id));
        return;
      }
      rt.emit({ type: 'infra_error', where: 'settle', error: errorMessage(error) });
      await session.replace();
      if (answer.next !== 'retry') break;
    }
  }
  record(rt, report, f, d, false, true);
}

/**
 * A throw from `ok({ commit })`, classified as a handler's throw is: the job's `classify` may
 * name the outcome; without one (or when it answers ok, which the rolled-back commit belies)
 * the attempt is `hook_failed`.
 */
function commitFailure(rt: EngineRuntime<unknown>, f: Finished, error: unknown): Finished {
  const job = rt.registry.get(f.row.kind);
  const message = redact(rt, errorMessage(error));
  let outcome: HandlerOutcome | undefined;
  try {
    outcome = job?.classify?.(error);
  } catch (classifyError) {
    rt.emit({ type: 'infra_error', where: `classify(${f.row.kind})`, error: errorMessage(classifyError) });
  }
  if (!outcome || outcome.type === 'ok') return { row: f.row, outcome: { type: 'hook_failed', message } };
  const classified = fromHandlerOutcome(f.row, outcome, rt.store.runsUserCode === true);
  return { row: f.row, outcome: { ...classified.outcome, message } };
}

function record(rt: EngineRuntime<unknown>, report: RunReport, f: Finished, d: SettleDecision, settled: boolean, failed: boolean): void {
  const base = { jobId: f.row.id, kind: f.row.kind };
  if (f.trace) {
    if (failed) f.trace.abandoned('settle_failed');
    else f.trace.settled({ outcome: d.attemptOutcome, status: d.status, code: d.errorCode, message: d.errorMessage, stale: !settled });
  } else if (settled && rt.options.telemetry) {
    rt.options.telemetry.settledUnrun({ jobId: f.row.id, kind: f.row.kind, lane: f.row.lane, outcome: d.attemptOutcome, status: d.status, code: d.errorCode });
  }
  if (failed) {
    rt.emit({ type: 'settle_failed', ...base, error: 'settlement could not be written; the lease will expire and the sweep recovers it' });
    return;
  }
  if (!settled) {
    report.stale++;
    rt.emit({ type: 'stale_settle', ...base, attempt: d.attempt });
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
