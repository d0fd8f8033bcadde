import type { Statement } from './statement.js';
import { ms, ts } from './time.js';

/** Columns a claimed or recovered job carries back to the shim. */
const CLAIMED_COLUMNS = `id, kind, lane, payload, tenant_key, correlation_id, metadata, attempts, attempt_seq,
  crashes, streak_code, streak, last_error_code, last_error_message, ${ms('lease_expires_at')} AS lease_expires_ms`;

/**
 * A claim statement around one way of picking rows: it leases each picked job for its kind's
 * lease and opens its attempt, all in one statement. Parameters shared by both variants:
 * $1 now, $2 lane, $3 kinds[], $4 leaseMs[] (parallel to kinds), $5 limit,
 * $6 version cutoff (NULL: no deploy versions).
 * Each variant has no optional clauses, so the server can keep one generic plan for it.
 */
const claimWith = (name: string, picked: string): Statement => ({
  name,
  text: `
WITH lease AS (
  SELECT kind, lease_ms FROM unnest($3::text[], $4::bigint[]) AS l(kind, lease_ms)
), picked AS (${picked}
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
SELECT ${CLAIMED_COLUMNS} FROM claimed`,
});

/** Rows a claim may take: due, of the lane's registered kinds, not from a newer deploy. */
const CLAIMABLE = `j.status IN ('pending', 'retrying') AND j.due_at <= ${ts('$1')}
     AND j.lane = $2 AND j.kind = ANY($3::text[])
     AND (j.version_ts IS NULL OR j.version_ts <= COALESCE($6::bigint, 9007199254740991))`;

/** JobClaimDue: up to $limit due jobs, oldest due first (the drain). */
export const JOB_CLAIM_DUE = claimWith('postbox_claim_due', `
  SELECT j.id FROM outbox.job j
   WHERE ${CLAIMABLE}
   ORDER BY j.due_at, j.id
   LIMIT $5
   FOR UPDATE SKIP LOCKED`);

/** JobClaimTargets: the nudged jobs among $7 ids[] / $8 kinds[] (parallel) that are claimable. */
export const JOB_CLAIM_TARGETS = claimWith('postbox_claim_targets', `
  SELECT j.id FROM outbox.job j
    JOIN unnest($7::uuid[], $8::text[]) AS t(id, kind) ON j.id = t.id AND j.kind = t.kind
   WHERE ${CLAIMABLE}
   LIMIT $5
   FOR UPDATE OF j SKIP LOCKED`);

/**
 * JobListExpiredLeases: running jobs of registered kinds whose lease ended before $1.
 * No lock is needed: the settle that follows is fenced by attempt_seq and status.
 */
export const JOB_LIST_EXPIRED_LEASES: Statement = { name: 'postbox_list_expired_leases', text: `
SELECT ${CLAIMED_COLUMNS} FROM outbox.job
 WHERE status = 'running' AND lease_expires_at < ${ts('$1')} AND kind = ANY($2::text[])
 ORDER BY lease_expires_at
 LIMIT $3` };
