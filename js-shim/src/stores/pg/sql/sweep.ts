import { ts } from './time.js';

/** JobDeleteFinished: retention. Deletes finished jobs past their retention, bounded. */
export const jobDeleteFinished = (s: string) => `
WITH doomed AS (
  SELECT id FROM ${s}.job
   WHERE (status = 'succeeded' AND finished_at < ${ts('$1')})
      OR (status IN ('dead', 'cancelled') AND finished_at < ${ts('$2')})
   LIMIT $3
)
DELETE FROM ${s}.job j USING doomed d WHERE j.id = d.id`;

/**
 * JobListDueForHandoff: due jobs of long-lease kinds, to nudge onto their lane's queue; jobs
 * nudged at or after the core's cutoff ($5) are left alone (the hand-off cooldown).
 */
export const jobListDueForHandoff = (s: string) => `
SELECT id, kind, lane FROM ${s}.job
 WHERE status IN ('pending', 'retrying') AND due_at <= ${ts('$1')}
   AND lane = $2 AND kind = ANY($3::text[])
   AND (nudge_sent_at IS NULL OR nudge_sent_at < ${ts('$5')})
 ORDER BY due_at LIMIT $4`;

/** JobRecordNudges: when jobs were last nudged (one statement per sent batch). */
export const jobRecordNudges = (s: string) => `
UPDATE ${s}.job SET nudge_sent_at = ${ts('$1')} WHERE id = ANY($2::uuid[])`;

/** JobCountActive: jobs waiting or running, per kind, lane and status (a telemetry's backlog gauge). */
export const jobCountActive = (s: string) => `
SELECT kind, lane, status, count(*)::int AS count FROM ${s}.job
 WHERE status IN ('pending', 'retrying', 'running')
 GROUP BY kind, lane, status`;

/**
 * JobCountUnregistered: pending jobs of kinds this deploy does not register ($2), due before
 * the core's cutoff ($1), per kind: no claim of this deploy will ever take them.
 */
export const jobCountUnregistered = (s: string) => `
SELECT kind, count(*)::int AS count FROM ${s}.job
 WHERE status IN ('pending', 'retrying') AND due_at < ${ts('$1')} AND kind <> ALL($2::text[])
 GROUP BY kind ORDER BY kind`;
