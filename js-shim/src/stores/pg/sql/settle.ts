import { childEffectsCtes, RELEASED_COLUMN } from './dependencies.js';
import { closeAttempts } from './attempts.js';
import { hidden } from './claim.js';
import { GENERIC_PLAN_ONLY, type Statement } from './statement.js';
import { ts } from './time.js';

/** Where a settlement's parameters sit: `$1` is now; the 12 arrays start at `first`. */
const settleCtes = (s: string, first: number): string => {
  // Every value is read through a scalar subquery (hidden), so no plan sees it, as in the drain's
  // claim (claimCtes). Seen, the arrays' lengths (unnest's rows, the primary key's probes) and
  // the folded instant made each custom plan cost a little less than the generic one, by more
  // than the planner's own price for planning: the server then planned every call afresh, which
  // doubled the settle-and-claim's time (bench/soak.ts: p50 1.2 -> 2.7 ms from the first
  // autoanalyze, custom plans on 2 of 3 calls). The other cause was job_edge's missing
  // statistics (migration 0015).
  const p = (i: number, type: string) => hidden(`$${first + i}::${type}[]`);
  const now = hidden('$1::bigint');
  // `j.id = ANY(ids)`: reached through the primary key, never by a scan (see claimCtes). A
  // running job is fenced as the one holding a lease (job_running_has_lease makes the two the
  // same): said as status = 'running', it let the planner walk the job_lease index instead,
  // every entry of it, the dead versions of every job run since the last vacuum included.
  return `s AS (
  SELECT * FROM unnest(${p(0, 'uuid')}, ${p(1, 'int')}, ${p(2, 'text')}, ${p(3, 'bigint')}, ${p(4, 'int')}, ${p(5, 'int')},
                       ${p(6, 'text')}, ${p(7, 'int')}, ${p(8, 'text')}, ${p(9, 'text')}, ${p(10, 'bool')}, ${p(11, 'text')})
    AS s(id, seq, status, due_ms, attempts, crashes, streak_code, streak, error_code, error_message, finished, outcome)
), settled AS (
  UPDATE ${s}.job j
     SET status = s.status,
         due_at = COALESCE(to_timestamp(s.due_ms / 1000.0), j.due_at),
         attempts = s.attempts, crashes = s.crashes, streak_code = s.streak_code, streak = s.streak,
         last_error_code = s.error_code, last_error_message = s.error_message,
         lease_expires_at = NULL,
         finished_at = CASE WHEN s.finished THEN ${ts(now)} END,
         updated_at = ${ts(now)}
    FROM s
   WHERE j.id = ANY(${p(0, 'uuid')}::uuid[]) AND j.id = s.id AND j.attempt_seq = s.seq AND j.lease_expires_at IS NOT NULL
     AND (s.outcome <> 'crash' OR j.lease_expires_at < ${ts(now)})
  RETURNING j.id, j.kind, j.started_at, j.attempt_seq, j.status
), closed AS (
  ${closeAttempts(s, `SELECT DISTINCT ON (s.id) s.id, s.seq, settled.kind, settled.started_at, s.outcome, s.error_code, s.error_message, settled.status
    FROM s JOIN settled ON settled.id = s.id`, now)}
), ${childEffectsCtes(s, 'settled', now)}`;
};

/**
 * The settle part of a statement, for composing it with a claim (see drain.ts). A job it
 * finishes has its effect on its waiting children in the same statement (dependencies.ts),
 * whose recursive part makes every statement using it `WITH RECURSIVE`.
 */
export const SETTLE_PARAMS = 12;
export { settleCtes };

/**
 * JobSettleBatch: writes many settlements in one statement. Each row is fenced by the
 * attempt that claimed it (attempt_seq) and by status 'running', so a late or duplicate
 * settle changes nothing; a crash (a recovery) also by a lease that has run out, so a
 * heartbeat that extended it since the recovery listed the job wins. The attempt's row is written in the same statement.
 * $1 now, $2..$13 parallel arrays (id, seq, status, due ms, attempts, crashes, streak code,
 * streak, error code, error message, finished, outcome). Returns one row: the ids actually
 * settled, and the children those settlements released (RELEASED_COLUMN), as JSON.
 */
export const jobSettleBatch = (s: string): Statement => ({
  name: 'postbox_settle_batch',
  text: `WITH RECURSIVE ${settleCtes(s, 2)}
SELECT (SELECT COALESCE(json_agg(id), '[]') FROM settled) AS settled, ${RELEASED_COLUMN}
 WHERE ${GENERIC_PLAN_ONLY}`,
});
