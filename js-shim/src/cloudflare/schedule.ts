import type { StandardSchemaV1 } from '@standard-schema/spec';
import { getCore, isCoreError } from '../core/core.js';
import { PostboxError } from '../errors.js';
import type { TxEnqueue, TxEnqueueMany } from '../outbox.js';
import type { EnqueueOptions, JobDefinition, Queryable } from '../types.js';

/**
 * A recurring job: one occurrence per minute its cron matches. Each tick of the Worker's Cron
 * Triggers enqueues the occurrences due by its time, so list the cron in `triggers.crons` to
 * run it on time (any other trigger, like the sweep every 5 minutes, picks it up at its next tick).
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
       * twice enqueues nothing new.
       */
      run: (tick: { scheduledAt: Date; key: string; tx: Queryable; enqueue: TxEnqueue<any>; enqueueMany: TxEnqueueMany<any> }) => Promise<void>;
    };

/** A validated schedule. */
export type Schedule = ScheduleSpec<any> & { readonly name: string };

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
