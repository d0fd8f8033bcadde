import { PostboxError, errorMessage } from '../errors.js';
import { FLEET, isOutboxFleet, type FleetEngine, type OutboxFleet } from '../fleet.js';
import { RUN, type Outbox } from '../outbox.js';
import type { OutboxRuntime } from '../engine/runtime.js';
import { failureFacts, type LaneSession } from '../engine/session.js';
import { planSweep, type SweepOptions, type SweepReport } from '../engine/sweep.js';
import type { EnqueueResult, LaneDb } from '../types.js';
import { inTurns, type OutboxFactory, type OutboxFleetFactory } from './queue.js';
import type { Schedule } from './schedule.js';

/** Options of the scheduled handler: the sweep's budgets and the recurring jobs. */
export interface ScheduledOptions extends SweepOptions {
  /**
   * Recurring jobs; every tick enqueues each one's occurrences due by the tick's time. With
   * several outboxes (`createOutboxes`), a list runs in every outbox (each database keeps its
   * own record of what ran, so each ticks once); `{ eu: [report] }` runs each list only in the
   * outbox of its key.
   */
  schedules?: readonly Schedule[] | Readonly<Record<string, readonly Schedule[]>>;
}

/** The parts of Cloudflare's `ScheduledController` Postbox uses. */
export interface ScheduledEvent {
  readonly cron: string;
  readonly scheduledTime: number;
}

/** What a tick did with one occurrence of a schedule. */
export interface ScheduleRun {
  name: string;
  /** The occurrence key, `schedule:<name>:<ISO time>`. */
  key: string;
  /** The occurrence's own time (epoch ms): the tick's, or a missed one caught up. */
  scheduledAt: number;
  /** `enqueued` (committed), `rejected` (committed, but an enqueue was refused), `failed` (rolled back). */
  status: 'enqueued' | 'rejected' | 'failed';
  /** False only when `failed`. */
  ok: boolean;
  /** Transactions tried: more than 1 when a lost connection was retried on a fresh session. */
  tries: number;
  /** Enqueue results of the occurrence, by status (a `run` schedule may enqueue many). */
  created: number;
  exists: number;
  /** Refused enqueues (`invalid_payload`, `dedupe_conflict`) when `strictEnqueue` is off. */
  rejected: number;
}

/** What one tick did. */
export interface ScheduledReport extends SweepReport {
  schedules: ScheduleRun[];
  /** Occurrences due but not started: recovery's budget was held back from schedules. The next tick catches them up. */
  schedulesDeferred: number;
}

/** What one tick did in one of several outboxes. */
export interface OutboxTick {
  /** The outbox's key. */
  outbox: string;
  /** False when a step or a schedule failed (say, its database is down), when it threw, or was skipped. */
  ok: boolean;
  /** Its tick's report; null when skipped or when it threw. */
  report: ScheduledReport | null;
  /** The invocation's time ran out before its turn (the next tick sweeps it). */
  skipped: boolean;
  error: string | null;
}

/** What one tick of several outboxes did: each outbox's part, in the order of `databases`. */
export interface FleetScheduledReport {
  outboxes: OutboxTick[];
}

/** The core's answer for one schedule at one tick (docs/ABI.md, `pb_cron` `due`). */
interface DueSchedule {
  name: string;
  baseline: number | null;
  occurrences: { at: number; key: string }[];
  skipped: boolean;
}

/** What the core says about a failed occurrence (docs/ABI.md, `pb_settle` `failure`, part `schedule`). */
type FailureNext = 'retry' | 'give_up' | 'fail';

/**
 * The Cron Trigger handler: enqueues the occurrences of every schedule due by this tick
 * (missed ones included, within the core's bound), then sweeps (recover → reserved → drain →
 * hand-off → retention) within the invocation budget.
 *
 * With a factory of several outboxes (`createOutboxes`), every outbox is ticked (its schedules,
 * then its sweep) on its own connections, as many at once as the core allows within the
 * invocation's connections, each within its share of the invocation (what is left, split over
 * the turns still to come). One outbox's failure (its database down) is reported in its part
 * of the report and stops no other.
 *
 * @example
 * ```ts
 * export default { scheduled: createScheduledHandler(outboxFor, { schedules: [weekly] }) };
 * ```
 */
export function createScheduledHandler<Env>(
  outboxFor: OutboxFactory<Env>,
  options?: ScheduledOptions,
): (controller: ScheduledEvent, env: Env, ctx?: ExecutionContext) => Promise<ScheduledReport>;
export function createScheduledHandler<Env>(
  outboxFor: OutboxFleetFactory<Env>,
  options?: ScheduledOptions,
): (controller: ScheduledEvent, env: Env, ctx?: ExecutionContext) => Promise<FleetScheduledReport>;
export function createScheduledHandler<Env>(outboxFor: (env: Env, ctx?: ExecutionContext) => Outbox<any> | OutboxFleet<string, any>, options: ScheduledOptions = {}) {
  const byOutbox = !Array.isArray(options.schedules) && options.schedules !== undefined;
  const lists: Record<string, readonly Schedule[]> = byOutbox
    ? (options.schedules as Readonly<Record<string, readonly Schedule[]>>)
    : { '': (options.schedules as readonly Schedule[] | undefined) ?? [] };
  for (const [key, list] of Object.entries(lists)) {
    const names = new Set<string>();
    for (const schedule of list) {
      // Names key the occurrences and the recorded last run: two schedules must not share one.
      if (names.has(schedule.name)) throw new PostboxError('invalid_schedule', `createScheduledHandler: two schedules${key ? ` of ${key}` : ''} are named ${schedule.name}`);
      names.add(schedule.name);
    }
  }
  return async (controller: ScheduledEvent, env: Env, ctx?: ExecutionContext): Promise<ScheduledReport | FleetScheduledReport> => {
    const made = outboxFor(env, ctx);
    if (isOutboxFleet(made)) return tickFleet(made[FLEET], controller, options, byOutbox ? lists : null);
    const rt = made[RUN].runtime;
    if (byOutbox) {
      // Lists by outbox key need several outboxes: none of them is this one's.
      for (const list of Object.values(lists)) for (const s of list) rt.emit({ type: 'schedule_failed', schedule: s.name, cron: s.cron, error: 'schedules by outbox key need createOutboxes', severity: 'error' });
    }
    return tick(made, byOutbox ? [] : lists['']!, controller.scheduledTime, rt.clock.now(), options);
  };
}

/** One outbox's tick: its schedules (until the core's cutoff, so recovery keeps its budget), then its sweep. */
async function tick(outbox: Outbox<any>, schedules: readonly Schedule[], at: number, startedAt: number, options: SweepOptions): Promise<ScheduledReport> {
  const engine = outbox[RUN];
  // Planned once up front: schedules stop at `schedulesUntil`, so recovery keeps its budget.
  const { schedulesUntil, deadlineAt } = planSweep(engine.runtime, startedAt, options);
  const ran =
    schedules.length > 0
      ? await engine.withSession((session) => runSchedules(outbox, session, schedules, at, schedulesUntil), deadlineAt)
      : { runs: [], deferred: 0 };
  // The sweep plans again from now: recovery's budget starts when it does.
  const report = await engine.sweep(startedAt, options);
  return { ...report, schedules: ran.runs, schedulesDeferred: ran.deferred };
}

/** Every outbox's tick, in turns within the core's number at once, each within its share of the invocation. */
async function tickFleet(
  fleet: FleetEngine,
  controller: ScheduledEvent,
  options: ScheduledOptions,
  lists: Record<string, readonly Schedule[]> | null,
): Promise<FleetScheduledReport> {
  if (lists) {
    const keys = new Set(fleet.members.map(([key]) => key));
    for (const [key, list] of Object.entries(lists)) {
      if (keys.has(key)) continue;
      for (const s of list) fleet.emit({ type: 'schedule_failed', schedule: s.name, cron: s.cron, error: `no outbox ${JSON.stringify(key)} here to run it in`, severity: 'error' });
    }
  }
  const rt0 = fleet.members[0]![1][RUN].runtime;
  const startedAt = rt0.clock.now();
  const ticks = await inTurns(fleet.members, fleet.sweepParallel, async ([key, outbox], left): Promise<OutboxTick> => {
    const rt = outbox[RUN].runtime;
    try {
      const now = rt.clock.now();
      const share = rt.core.call<{ budgetMs: number; recoveryBudgetMs: number }>('claim', {
        op: 'share',
        now,
        startedAt,
        invocationBudgetMs: options.invocationBudgetMs ?? null,
        recoveryBudgetMs: options.recoveryBudgetMs ?? null,
        left,
        parallel: fleet.sweepParallel,
      });
      if (share.budgetMs < 1) {
        rt.emit({ type: 'deadline_exceeded', where: 'sweep: no time left for this outbox', severity: 'error' });
        return { outbox: key, ok: false, report: null, skipped: true, error: null };
      }
      const schedules = lists ? (lists[key] ?? []) : (options.schedules as readonly Schedule[] | undefined) ?? [];
      const report = await tick(outbox, schedules, controller.scheduledTime, now, { ...options, invocationBudgetMs: share.budgetMs, recoveryBudgetMs: share.recoveryBudgetMs });
      const ok = report.failedSteps.length === 0 && report.schedules.every((r) => r.ok);
      return { outbox: key, ok, report, skipped: false, error: null };
    } catch (error) {
      // Not expected (each step reports its own failure), but one outbox's throw must not stop the others.
      rt.emit({ type: 'infra_error', where: 'sweep', error: errorMessage(error) });
      return { outbox: key, ok: false, report: null, skipped: false, error: errorMessage(error) };
    }
  });
  return { outboxes: ticks };
}

/**
 * Runs `fn` on the session; when it throws, reports what was seen to the core, which decides:
 * try again on a fresh session, leave it to the next tick (`give_up`), or fail it (`fail`).
 */
async function tryOnSession<T>(rt: OutboxRuntime, session: LaneSession, fn: (q: LaneDb) => Promise<T>) {
  for (let tries = 1; ; tries++) {
    try {
      return { ok: true as const, value: await session.exclusive(fn), tries };
    } catch (error) {
      // A session given up at the invocation's deadline counts as broken: the occurrence is left to the next tick.
      const failure = { part: 'schedule', ...failureFacts(session, error), tries };
      const next = rt.core.call<{ next: FailureNext }>('settle', { failure }).next;
      // A failure of the occurrence's own left a live session (its transaction rolled back).
      if (next !== 'fail') await session.replace();
      if (next !== 'retry') return { ok: false as const, error, next, tries };
      rt.emit({ type: 'infra_error', where: 'schedule', error: errorMessage(error) });
    }
  }
}

async function runSchedules(
  outbox: Outbox<any>,
  session: LaneSession,
  schedules: readonly Schedule[],
  at: number,
  until: number,
): Promise<{ runs: ScheduleRun[]; deferred: number }> {
  const rt = outbox[RUN].runtime;
  const failAll = (error: unknown) => {
    for (const s of schedules) rt.emit({ type: 'schedule_failed', schedule: s.name, cron: s.cron, error: errorMessage(error), severity: 'error' });
    return { runs: [], deferred: 0 };
  };
  const read = await tryOnSession(rt, session, (q) => rt.store.lastScheduleRuns(q, schedules.map((s) => s.name)));
  // Nothing is enqueued without knowing what was: the next tick catches these occurrences up.
  if (!read.ok) return failAll(read.error);
  const lastAt = read.value;
  const { schedules: due } = rt.core.call<{ schedules: DueSchedule[] }>('cron', {
    op: 'due',
    at,
    schedules: schedules.map((s) => ({ name: s.name, expr: s.cron, lastAt: lastAt.get(s.name) ?? null })),
  });
  const record = (name: string, occurrence: number) => (q: LaneDb) => rt.store.recordScheduleRun(q, { name, at: occurrence, now: rt.clock.now() });

  const ran: ScheduleRun[] = [];
  let deferred = 0;
  for (let i = 0; i < schedules.length; i++) {
    const schedule = schedules[i]!;
    const plan = due[i]!;
    if (plan.skipped) {
      rt.emit({
        type: 'schedule_missed',
        schedule: schedule.name,
        since: lastAt.has(schedule.name) ? new Date(lastAt.get(schedule.name)!).toISOString() : null,
        from: plan.occurrences[0] ? new Date(plan.occurrences[0].at).toISOString() : null,
        severity: 'warn',
      });
    }
    // The first run ever: record where catch-up starts, so a first occurrence that fails is retried.
    if (plan.baseline !== null) await tryOnSession(rt, session, record(schedule.name, plan.baseline));
    for (const { at: occurrence, key } of plan.occurrences) {
      // Past the core's cutoff the rest is left unrecorded: the next tick catches it up.
      if (!rt.core.call<{ start: boolean }>('sweep', { op: 'schedule', now: rt.clock.now(), until }).start) {
        deferred++;
        continue;
      }
      const entry = await runOccurrence(outbox, session, schedule, occurrence, key, record(schedule.name, occurrence));
      ran.push(entry.run);
      // The database is out of reach: leave the rest to the next tick's catch-up.
      if (entry.next === 'give_up') break;
    }
  }
  if (deferred > 0) rt.emit({ type: 'schedules_deferred', occurrences: deferred, severity: 'warn' });
  return { runs: ran, deferred };
}

/** One occurrence in one transaction: its enqueues and its record commit together. */
async function runOccurrence(
  outbox: Outbox<any>,
  session: LaneSession,
  schedule: Schedule,
  at: number,
  key: string,
  record: (q: LaneDb) => Promise<unknown>,
): Promise<{ run: ScheduleRun; next?: FailureNext }> {
  const rt = outbox[RUN].runtime;
  const scheduledAt = new Date(at);
  let counts = { created: 0, exists: 0, rejected: 0, refusal: null as string | null };
  const count = (results: EnqueueResult[]) => {
    for (const r of results) {
      if (r.status === 'created' || r.status === 'exists') counts[r.status]++;
      else (counts.rejected++, (counts.refusal ??= r.status));
    }
    return results;
  };
  const result = await tryOnSession(rt, session, (q) => {
    counts = { created: 0, exists: 0, rejected: 0, refusal: null };
    return outbox.transaction(q, async (tx, enqueue, enqueueMany) => {
      if ('run' in schedule) {
        await schedule.run({
          scheduledAt,
          key,
          tx,
          enqueue: async (job, opts) => count([await enqueue(job, opts)])[0]!,
          enqueueMany: async (job, items) => count(await enqueueMany(job, items)),
        });
      } else {
        const r = await enqueue(schedule.job, {
          ...schedule.options,
          payload: schedule.payload({ scheduledAt }),
          dedupeKey: schedule.dedupeKey?.({ scheduledAt }) ?? key,
        });
        count([r]);
      }
      await record(tx);
    });
  });
  const base = { name: schedule.name, key, scheduledAt: at, tries: result.tries, created: counts.created, exists: counts.exists, rejected: counts.rejected };
  if (!result.ok) {
    rt.emit({ type: 'schedule_failed', schedule: schedule.name, cron: schedule.cron, key, tries: result.tries, error: errorMessage(result.error), severity: 'error' });
    // Its own failure (not the connection's) would fail again: pass over it, on record.
    if (result.next === 'fail') await tryOnSession(rt, session, record);
    return { run: { ...base, created: 0, exists: 0, rejected: 0, status: 'failed', ok: false }, next: result.next };
  }
  const status = 'run' in schedule ? 'run' : counts.created > 0 ? 'created' : counts.exists > 0 ? 'exists' : counts.refusal!;
  rt.emit({ type: 'schedule_enqueued', schedule: schedule.name, key, status, created: counts.created, exists: counts.exists, rejected: counts.rejected });
  if (counts.rejected > 0) {
    rt.emit({ type: 'schedule_rejected', schedule: schedule.name, key, status: counts.refusal!, rejected: counts.rejected, severity: 'error' });
  }
  return { run: { ...base, status: counts.rejected > 0 ? 'rejected' : 'enqueued', ok: true } };
}
