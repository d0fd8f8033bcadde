import { PostboxError, errorMessage } from '../errors.js';
import { FLEET, isOutboxFleet, type FleetEngine, type OutboxFleet } from '../fleet.js';
import { RUN, type DrivableOutbox } from '../engine/driven.js';
import { tick, type Schedule, type ScheduledReport } from '../engine/schedules.js';
import type { SweepOptions } from '../engine/sweep.js';
import { inTurns, type OutboxFactory, type OutboxFleetFactory } from './queue.js';

export type { ScheduledReport, ScheduleRun } from '../engine/schedules.js';

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
export function createScheduledHandler<Env>(outboxFor: (env: Env, ctx?: ExecutionContext) => DrivableOutbox | OutboxFleet<string, any>, options: ScheduledOptions = {}) {
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
    return tick(made[RUN], byOutbox ? [] : lists['']!, controller.scheduledTime, rt.clock.now(), options);
  };
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
      const report = await tick(outbox[RUN], schedules, controller.scheduledTime, now, { ...options, invocationBudgetMs: share.budgetMs, recoveryBudgetMs: share.recoveryBudgetMs });
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

