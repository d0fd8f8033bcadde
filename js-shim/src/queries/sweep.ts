import { ms, ts } from './time.js';

/** JobDeleteFinished: retention. Deletes finished jobs past their retention, bounded. */
export const jobDeleteFinished = (s: string) => `
WITH doomed AS (
  SELECT id FROM ${s}.job
   WHERE (status = 'succeeded' AND finished_at < ${ts('$1')})
      OR (status IN ('dead', 'cancelled') AND finished_at < ${ts('$2')})
   LIMIT $3
)
DELETE FROM ${s}.job j USING doomed d WHERE j.id = d.id`;

/** JobListDueForHandoff: due jobs of long-lease kinds, to nudge onto their lane's queue. */
export const jobListDueForHandoff = (s: string) => `
UPDATE ${s}.job j SET nudge_sent_at = ${ts('$1')}
 WHERE j.id IN (SELECT id FROM ${s}.job
                 WHERE status IN ('pending', 'retrying') AND due_at <= ${ts('$1')}
                   AND lane = $2 AND kind = ANY($3::text[])
                 ORDER BY due_at LIMIT $4)
RETURNING j.id, j.kind, j.lane, ${ms('j.due_at')} AS due_ms`;
