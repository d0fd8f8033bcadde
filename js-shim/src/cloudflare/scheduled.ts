import { RUN } from '../outbox.js';
import { errorMessage } from '../session.js';
import type { SweepOptions, SweepReport } from '../sweep.js';
import type { OutboxFactory } from './queue.js';
import type { Schedule } from './schedule.js';

/** Options of the scheduled handler: the sweep's budgets and the recurring jobs. */
export interface ScheduledOptions extends SweepOptions {
  schedules?: readonly Schedule[];
}

/** The parts of Cloudflare's `ScheduledController` Postbox uses. */
export interface ScheduledEvent {
  readonly cron: string;
  readonly scheduledTime: number;
}

/** What one tick did. */
export interface ScheduledReport extends SweepReport {
  schedules: { name: string; key: string; ok: boolean }[];
}

/**
 * The Cron Trigger handler: enqueues the occurrences of schedules whose cron is this tick's,
 * then sweeps (recover → reserved → drain → hand-off → retention) within the invocation budget.
 *
 * @example
 * ```ts
 * export default { scheduled: createScheduledHandler(outboxFor, { schedules: [weekly] }) };
 * ```
 */
export function createScheduledHandler<Env>(outboxFor: OutboxFactory<Env>, options: ScheduledOptions = {}) {
  return async (controller: ScheduledEvent, env: Env, ctx?: ExecutionContext): Promise<ScheduledReport> => {
    const outbox = outboxFor(env, ctx);
    const engine = outbox[RUN];
    const rt = engine.runtime;
    const startedAt = rt.clock.now();
    const ran: ScheduledReport['schedules'] = [];
    for (const schedule of options.schedules ?? []) {
      if (schedule.cron !== controller.cron) continue;
      const scheduledAt = new Date(controller.scheduledTime);
      const { key } = rt.core.call<{ key: string }>('cron', { op: 'key', name: schedule.name, scheduledAt: controller.scheduledTime });
      try {
        await engine.withSession((session) =>
          session.exclusive((q) =>
            outbox.transaction(q, async (tx, enqueue, enqueueMany) => {
              if ('run' in schedule) {
                await schedule.run({ scheduledAt, tx, enqueue, enqueueMany });
                return;
              }
              const result = await enqueue(schedule.job, {
                ...schedule.options,
                payload: schedule.payload({ scheduledAt }),
                dedupeKey: schedule.dedupeKey?.({ scheduledAt }) ?? key,
              });
              rt.emit({ type: 'schedule_enqueued', schedule: schedule.name, key, status: result.status });
              // A refused single-job occurrence fails the tick (rolled back), like a throw.
              if (result.status !== 'created' && result.status !== 'exists') throw new Error(`enqueue refused: ${result.status}`);
            }),
          ),
        );
        ran.push({ name: schedule.name, key, ok: true });
      } catch (error) {
        rt.emit({ type: 'schedule_failed', schedule: schedule.name, cron: schedule.cron, error: errorMessage(error), severity: 'error' });
        ran.push({ name: schedule.name, key, ok: false });
      }
    }
    const report = await engine.sweep(startedAt, options);
    return { ...report, schedules: ran };
  };
}
