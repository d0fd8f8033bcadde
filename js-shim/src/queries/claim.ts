import type { Statement } from './statement.js';
import { ms, ts } from './time.js';

/** Columns a claimed or recovered job carries back to the shim. */
const CLAIMED_COLUMNS = `id, kind, lane, payload, tenant_key, correlation_id, metadata, attempts, attempt_seq,
  crashes, streak_code, streak, last_error_code, last_error_message, ${ms('lease_expires_at')} AS lease_expires_ms`;

/**
 * JobClaimBatch: one statement claims up to $limit due jobs of the given kinds (optionally
 * only the given id/kind pairs), leases each for its kind's lease, and opens their attempts.
 * $1 now, $2 lane, $3 kinds[], $4 leaseMs[] (parallel to kinds), $5 limit,
 * $6 version cutoff or NULL, $7 target ids[] or NULL, $8 target kinds[] (parallel to $7).
 */
export const JOB_CLAIM_BATCH: Statement = { name: 'postbox_claim_batch', text: `
WITH lease AS (
  SELECT kind, lease_ms FROM unnest($3::text[], $4::bigint[]) AS l(kind, lease_ms)
), picked AS (
  SELECT j.id FROM outbox.job j
   WHERE j.status IN ('pending', 'retrying') AND j.due_at <= ${ts('$1')}
     AND j.lane = $2 AND j.kind = ANY($3::text[])
     AND ($6::bigint IS NULL OR j.version_ts IS NULL OR j.version_ts <= $6::bigint)
     AND ($7::uuid[] IS NULL OR (j.id, j.kind) IN (SELECT * FROM unnest($7::uuid[], $8::text[])))
   ORDER BY j.due_at, j.id
   LIMIT $5
   FOR UPDATE SKIP LOCKED
), claimed AS (
  UPDATE outbox.job j
     SET status = 'running', attempt_seq = j.attempt_seq + 1, updated_at = ${ts('$1')},
         lease_expires_at = ${ts('$1')} + l.lease_ms * interval '1 millisecond'
    FROM picked p, lease l
   WHERE j.id = p.id AND l.kind = j.kind
  RETURNING j.*
), opened AS (
  INSERT INTO outbox.attempt (job_id, seq, kind, started_at, lease_expires_at)
  SELECT id, attempt_seq, kind, ${ts('$1')}, lease_expires_at FROM claimed
)
SELECT ${CLAIMED_COLUMNS} FROM claimed` };

/**
 * JobListExpiredLeases: running jobs of registered kinds whose lease ended before $1.
 * No lock is needed: the settle that follows is fenced by attempt_seq and status.
 */
export const JOB_LIST_EXPIRED_LEASES: Statement = { name: 'postbox_list_expired_leases', text: `
SELECT ${CLAIMED_COLUMNS} FROM outbox.job
 WHERE status = 'running' AND lease_expires_at < ${ts('$1')} AND kind = ANY($2::text[])
 ORDER BY lease_expires_at
 LIMIT $3` };
