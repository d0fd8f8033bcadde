import { childEffectsCtes, PARENT_FAILED, revivedChildrenCtes } from './dependencies.js';
import { closeAttempts } from './attempts.js';
import { ts } from './time.js';

/** Tenant scope filter: $tenantAny true means any tenant; else the tenant (NULL = none). */
const scoped = (anyParam: string, tenantParam: string) =>
  `(${anyParam}::bool OR tenant_scope = COALESCE('t:' || ${tenantParam}::text, 'n'))`;

/**
 * JobGetForOperate: status of jobs an operator acts on, locked for the action. With $4 (a
 * replay), a job cancelled by its parent's failure comes with its parents counted: failed (dead
 * or cancelled, not among $1) and open (unfinished, or dead or cancelled among $1: the same
 * replay reopens them).
 */
export const jobLockForOperate = (s: string) => `
SELECT j.id, j.kind, j.lane, j.status, j.last_error_code AS code,
       CASE WHEN $4::bool AND j.status = 'cancelled' AND j.last_error_code = '${PARENT_FAILED}' THEN (
         SELECT json_build_object(
                  'failed', count(*) FILTER (WHERE p.status IN ('dead', 'cancelled') AND p.id <> ALL($1::uuid[])),
                  'open', count(*) FILTER (WHERE p.status NOT IN ('succeeded', 'dead', 'cancelled') OR p.id = ANY($1::uuid[]) AND p.status IN ('dead', 'cancelled')))
           FROM ${s}.job_edge e JOIN ${s}.job p ON p.id = e.parent_id WHERE e.child_id = j.id) END AS parents
  FROM ${s}.job j
 WHERE j.id = ANY($1::uuid[]) AND ${scoped('$2', '$3')}
 FOR UPDATE OF j`;

/**
 * JobApplyOperate: writes operator decisions made by the core. `close` (the core's
 * closeAttempt outcome, or NULL) ends the job's open attempt in the same statement; a budget
 * (the core's numbers, or NULLs) is written as the job's counters, its streak's code cleared and
 * replayed_at stamped; `finished` sets finished_at (else it is cleared); `record` makes the
 * reason the job's last error code; `waiting_on` (NULL: 0) the open parents of a job the core
 * sent back to wait on them. A job cancelled here has its effect on its waiting children, and a
 * replayed one (a fresh budget) revives the children its failure cancelled (dependencies.ts),
 * but not one written here itself: each row is written once.
 */
export const jobApplyOperate = (s: string) => `
WITH RECURSIVE o AS (
  SELECT * FROM unnest($2::uuid[], $3::text[], $4::bigint[], $5::int[], $6::int[], $7::int[], $8::text[], $9::text[], $10::bool[], $11::bool[], $12::int[])
    AS o(id, status, due_ms, attempts, crashes, streak, reason, close, finished, record, waiting_on)
), closed AS (
  ${closeAttempts(s, `SELECT o.id, cj.attempt_seq, cj.kind, cj.started_at, o.close, o.reason, NULL::text, o.status
    FROM o JOIN ${s}.job cj ON cj.id = o.id
   WHERE o.close IS NOT NULL AND cj.status = 'running'`)}
), kept AS (
  -- A running attempt cancelled here keeps its concurrency and tenant slots until its lease would
  -- have ended (held_until): its handler may still be running, and is not told at once.
  UPDATE ${s}.kind_slot k SET job_id = NULL, attempt_seq = NULL
    FROM o JOIN ${s}.job cj ON cj.id = o.id
   WHERE o.close IS NOT NULL AND cj.status = 'running'
     AND k.kind = cj.kind AND k.pool IN ('c', 't') AND k.job_id = o.id AND k.attempt_seq = cj.attempt_seq
), replayed AS (
  SELECT id FROM o WHERE attempts IS NOT NULL
), ${childEffectsCtes(s, 'o', '$1')}, ${revivedChildrenCtes(s, 'replayed', '$1', 'o')}
UPDATE ${s}.job j
   SET status = o.status,
       due_at = COALESCE(to_timestamp(o.due_ms / 1000.0), j.due_at),
       attempts = COALESCE(o.attempts, j.attempts),
       crashes = COALESCE(o.crashes, j.crashes),
       streak = COALESCE(o.streak, j.streak),
       streak_code = CASE WHEN o.streak IS NULL THEN j.streak_code END,
       replayed_at = CASE WHEN o.attempts IS NULL THEN j.replayed_at ELSE ${ts('$1')} END,
       last_error_code = CASE WHEN o.record THEN o.reason ELSE j.last_error_code END,
       lease_expires_at = NULL,
       -- Only a replay the core sent back to its parents leaves a job waiting: any other must count
       -- no parent, or their settles would wake it.
       waiting_on = COALESCE(o.waiting_on, 0),
       finished_at = CASE WHEN o.finished THEN ${ts('$1')} END,
       updated_at = ${ts('$1')}
  FROM o WHERE j.id = o.id
RETURNING j.id, j.kind, j.lane, j.status`;

/**
 * JobEraseTenant: deletes every job of one tenant (and, by the trigger of migration 0005, their
 * attempts), and the tenant's slots but those of attempts still running, which stay held until
 * their lease would have ended (held_until; their job is gone), as the kind-wide slots do.
 */
export const jobEraseTenant = (s: string) => `WITH slots AS (
  -- The tenant's concurrency slots name it too (migration 0014).
  DELETE FROM ${s}.kind_slot k WHERE k.pool = 't' AND k.scope = 't:' || $1
     AND NOT EXISTS (SELECT 1 FROM ${s}.job h WHERE h.id = k.job_id AND h.attempt_seq = k.attempt_seq AND h.status = 'running')
)
DELETE FROM ${s}.job WHERE tenant_key = $1`;

/** JobEraseTenantIds: deletes only the listed jobs, and only those of the tenant (an operator erases what it counted). */
export const jobEraseTenantIds = (s: string) => `DELETE FROM ${s}.job WHERE tenant_key = $1 AND id = ANY($2::uuid[])`;
