import { ms, ts } from './time.js';

/** JobDeleteFinished: retention. Deletes finished jobs past their retention, bounded. */
export const JOB_DELETE_FINISHED = `
WITH doomed AS (
  SELECT id FROM outbox.job
   WHERE (status = 'succeeded' AND finished_at < ${ts('$1')})
      OR (status IN ('dead', 'cancelled') AND finished_at < ${ts('$2')})
   LIMIT $3
)
DELETE FROM outbox.job j USING doomed d WHERE j.id = d.id`;

/** JobListDueForHandoff: due jobs of long-lease kinds, to nudge onto their lane's queue. */
export const JOB_LIST_DUE_FOR_HANDOFF = `
UPDATE outbox.job j SET nudge_sent_at = ${ts('$1')}
 WHERE j.id IN (SELECT id FROM outbox.job
                 WHERE status IN ('pending', 'retrying') AND due_at <= ${ts('$1')}
                   AND lane = $2 AND kind = ANY($3::text[])
                 ORDER BY due_at LIMIT $4)
RETURNING j.id, j.kind, j.lane, ${ms('j.due_at')} AS due_ms`;
