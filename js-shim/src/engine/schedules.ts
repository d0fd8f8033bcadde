/**
 * Recurring jobs, as the engine runs them on any store: a tick asks the core which occurrences
 * of each schedule are due (missed ones included, within its bound), enqueues each occurrence
 * and records it in one transaction, and leaves what the invocation cannot finish to the next
 * tick. The Cron Trigger handler (cloudflare/scheduled.ts) and a SQLite outbox's sweep both tick
 * through here.
 * @module
 */
import { errorMessage } from '../errors.js';
import type { DrivenEngine, TxEnqueue, TxEnqueueMany } from './driven.js';
import type { EngineRuntime } from './runtime.js';
import { failureFacts, type Session } from './session.js';
import { planSweep, type SweepOptions, type SweepReport } from './sweep.js';
import type { EnqueueOptions, EnqueueResult, JobDefinition, Queryable } from '../types.js';

/**
 * A recurring job: one occurrence per minute its cron matches. Each tick of the Worker's Cron
 * Triggers (or a SQLite outbox's sweep) enqueues the occurrences due by its time, so list the
 * cron in `triggers.crons` to run it on time (any other trigger, like the sweep every 5 minutes,
 * picks it up at its next tick).
 */
export type ScheduleSpec<P> =
  | {
      /** Cloudflare's cron dialect, UTC. */
      cron: string;
      /** Defaults to the job's kind. Names the occurrence key `schedule:<name>:<ISO time>`. */
      name?: string;
      job: JobDefinition<P>;
      payload: (tick: { scheduledAt: Date }) => P;
      /** Choose your own dedupe key; defaults to the occurrence key. */
      dedupeKey?: (tick: { scheduledAt: Date }) => string;
      options?: Omit<EnqueueOptions<P>, 'payload' | 'dedupeKey'>;
    }
  | {
      cron: string;
      /** Required for `run` schedules. */
      name: string;
      /**
       * Fans out: everything it enqueues commits together. `enqueueMany` writes a whole list in
       * one statement; give each item a dedupe key derived from the tick, so a tick delivered
       * twice enqueues nothing new. `tx` is the store's transaction (PostgreSQL: a `Queryable`).
       */
      run: (tick: { scheduledAt: Date; key: string; tx: Queryable; enqueue: TxEnqueue<any>; enqueueMany: TxEnqueueMany<any> }) => Promise<void>;
    };

/** A validated schedule (`defineSchedule`). */
export type Schedule = ScheduleSpec<any> & { readonly name: string };

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

/** The core's answer for one schedule at one tick (docs/ABI.md, `pb_cron` `due`). */
interface DueSchedule {
  name: string;
  baseline: number | null;
  occurrences: { at: number; key: string }[];
  skipped: boolean;
}

/** What the core says about a failed occurrence (docs/ABI.md, `pb_settle` `failure`, part `schedule`). */
type FailureNext = 'retry' | 'give_up' | 'fail';

/** One outbox's tick: its schedules (until the core's cutoff, so recovery keeps its budget), then its sweep. */
export async function tick(engine: DrivenEngine, schedules: readonly Schedule[], at: number, startedAt: number, options: SweepOptions): Promise<ScheduledReport> {
  // Planned once up front: schedules stop at `schedulesUntil`, so recovery keeps its budget.
  const { schedulesUntil, deadlineAt } = planSweep(engine.runtime, startedAt, options);
  const ran =
    schedules.length > 0
      ? await engine.withSession((session) => runSchedules(engine, session, schedules, at, schedulesUntil), deadlineAt)
      : { runs: [], deferred: 0 };
  // The sweep plans again from now: recovery's budget starts when it does.
  const report = await engine.sweep(startedAt, options);
  return { ...report, schedules: ran.runs, schedulesDeferred: ran.deferred };
}

/**
 * Runs `fn` on the session; when it throws, reports what was seen to the core, which decides:
 * try again on a fresh session, leave it to the next tick (`give_up`), or fail it (`fail`).
 */
async function tryOnSession<Db, T>(rt: EngineRuntime<Db>, session: Session<Db>, fn: (q: Db) => Promise<T>) {
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

async function runSchedules<Db>(
  engine: DrivenEngine<Db>,
  session: Session<Db>,
  schedules: readonly Schedule[],
  at: number,
  until: number,
): Promise<{ runs: ScheduleRun[]; deferred: number }> {
  const rt = engine.runtime;
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
  const record = (name: string, occurrence: number) => (q: Db) => rt.store.recordScheduleRun(q, { name, at: occurrence, now: rt.clock.now() });

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
      const entry = await runOccurrence(engine, session, schedule, occurrence, key, record(schedule.name, occurrence));
      ran.push(entry.run);
      // The database is out of reach: leave the rest to the next tick's catch-up.
      if (entry.next === 'give_up') break;
    }
  }
  if (deferred > 0) rt.emit({ type: 'schedules_deferred', occurrences: deferred, severity: 'warn' });
  return { runs: ran, deferred };
}

/** One occurrence in one transaction: its enqueues and its record commit together. */
async function runOccurrence<Db>(
  engine: DrivenEngine<Db>,
  session: Session<Db>,
  schedule: Schedule,
  at: number,
  key: string,
  record: (q: Db) => Promise<unknown>,
): Promise<{ run: ScheduleRun; next?: FailureNext }> {
  const rt = engine.runtime;
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
    return engine.transaction(q, async (tx, enqueue, enqueueMany) => {
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
