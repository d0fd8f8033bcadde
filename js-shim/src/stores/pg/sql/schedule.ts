import type { Statement } from './statement.js';
import { ms, ts } from './time.js';

/** ScheduleLastRuns: each named schedule's latest handled occurrence, in epoch ms. */
export const scheduleLastRuns = (s: string): Statement => ({
  name: 'ScheduleLastRuns',
  text: `SELECT name, ${ms('last_at')} AS last_at FROM ${s}.schedule_run WHERE name = ANY($1::text[])`,
});

/**
 * ScheduleRecord: `$1` schedule name, `$2` an occurrence (epoch ms) now dealt with, `$3` now.
 * Never moves back: two ticks running at once each leave the later occurrence.
 */
export const scheduleRecord = (s: string): Statement => ({
  name: 'ScheduleRecord',
  text: `INSERT INTO ${s}.schedule_run AS r (name, last_at, updated_at) VALUES ($1, ${ts('$2')}, ${ts('$3')})
ON CONFLICT (name) DO UPDATE SET last_at = GREATEST(r.last_at, EXCLUDED.last_at), updated_at = EXCLUDED.updated_at`,
});
