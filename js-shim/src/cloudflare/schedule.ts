import type { StandardSchemaV1 } from '@standard-schema/spec';
import { getCore, isCoreError } from '../core/core.js';
import { PostboxError } from '../errors.js';
import type { Schedule, ScheduleSpec } from '../engine/schedules.js';

export type { Schedule, ScheduleSpec } from '../engine/schedules.js';

/**
 * Defines a schedule. The cron expression is checked by the core now, so a bad one fails at
 * start-up (`PostboxError` code `invalid_cron`, naming the field) instead of never firing.
 *
 * @example
 * ```ts
 * defineSchedule({ cron: '0 9 * * MON', job: weeklyNewsletter, payload: ({ scheduledAt }) => ({ week: isoWeek(scheduledAt) }) });
 * ```
 */
export function defineSchedule<P>(spec: ScheduleSpec<P>): Schedule {
  const parsed = getCore().callText('cron', JSON.stringify({ op: 'parse', expr: spec.cron }));
  if (isCoreError(parsed)) throw new PostboxError(parsed.error.code, `defineSchedule: ${parsed.error.message}`);
  const name = 'job' in spec ? spec.name ?? spec.job.kind : spec.name;
  if (typeof name !== 'string' || name.length === 0) throw new PostboxError('invalid_schedule', 'defineSchedule: a `run` schedule needs a `name`');
  // The name goes into every occurrence key: the core checks it now, not at the first tick.
  const keyed = getCore().callText('cron', JSON.stringify({ op: 'key', name, scheduledAt: 0 }));
  if (isCoreError(keyed)) throw new PostboxError('invalid_schedule', `defineSchedule: ${keyed.error.message}`);
  return Object.freeze({ ...spec, name }) as Schedule;
}

export type { StandardSchemaV1 };
