import type { Statement } from './statement.js';
import { ts } from './time.js';

/**
 * JobSettleBatch: writes many settlements in one statement. Each row is fenced by the
 * attempt that claimed it (attempt_seq) and by status 'running', so a late or duplicate
 * settle changes nothing. The attempt row closes in the same statement.
 * Returns the ids that were actually settled.
 */
export const JOB_SETTLE_BATCH: Statement = { name: 'postbox_settle_batch', text: `
WITH s AS (
  SELECT * FROM unnest($2::uuid[], $3::int[], $4::text[], $5::bigint[], $6::int[], $7::int[], $8::text[],
                       $9::int[], $10::text[], $11::text[], $12::bool[], $13::text[])
    AS s(id, seq, status, due_ms, attempts, crashes, streak_code, streak, error_code, error_message, finished, outcome)
), settled AS (
  UPDATE outbox.job j
     SET status = s.status,
         due_at = COALESCE(to_timestamp(s.due_ms / 1000.0), j.due_at),
         attempts = s.attempts, crashes = s.crashes, streak_code = s.streak_code, streak = s.streak,
         last_error_code = s.error_code, last_error_message = s.error_message,
         lease_expires_at = NULL,
         finished_at = CASE WHEN s.finished THEN ${ts('$1')} END,
         updated_at = ${ts('$1')}
    FROM s
   WHERE j.id = s.id AND j.attempt_seq = s.seq AND j.status = 'running'
  RETURNING j.id
), closed AS (
  UPDATE outbox.attempt a
     SET finished_at = ${ts('$1')}, outcome = s.outcome, error_code = s.error_code, error_message = s.error_message
    FROM s JOIN settled ON settled.id = s.id
   WHERE a.job_id = s.id AND a.seq = s.seq AND a.finished_at IS NULL
)
SELECT id FROM settled` };
