import { ts } from './time.js';

/**
 * The attempt ledger in SQL: which ended attempts have rows of their own, and how every reader
 * sees all of them.
 *
 * An attempt that ends its job in success (outcome `ok`, status `succeeded`) writes no attempt
 * row (migration 0016): its job row already says all of it (attempt_seq, kind, started_at,
 * finished_at), and a succeeded job's row is final: no operator action takes a job out of
 * `succeeded` (wasm/src/operate.cpp), so it says it until retention deletes the job. Why: that row,
 * with its two index entries, was about a quarter of the WAL a drain wrote per job, for a record
 * the job row holds anyway (bench/statement-cost.ts, variant success-rows). Every other ended attempt (a retry, a
 * failure, a crash, a cancel, a success whose hook failed) has its row, written once when it
 * ends (migration 0006); a running attempt is its job row's until then.
 */

/**
 * Writes the ended attempts `rows` selects (id, seq, kind, started_at, outcome, error_code,
 * error_message, status: the job's status after the write) as the ledger's rows, once each,
 * except a success that finished its job, which its job row records. A row an earlier schema
 * opened at claim time is closed instead; one already closed is left alone. `now` is the epoch
 * ms now: `$1`, or an expression that hides it from the planner (settleCtes).
 */
export const closeAttempts = (s: string, rows: string, now = '$1'): string => `INSERT INTO ${s}.attempt AS a (job_id, seq, kind, started_at, finished_at, outcome, error_code, error_message)
  SELECT e.id, e.seq, e.kind, COALESCE(e.started_at, ${ts(now)}), ${ts(now)}, e.outcome, e.error_code, e.error_message
    FROM (${rows}) AS e(id, seq, kind, started_at, outcome, error_code, error_message, status)
   WHERE NOT (${SUCCESS_ON_JOB_ROW('e')})
  ON CONFLICT (job_id, seq) DO UPDATE
     SET finished_at = EXCLUDED.finished_at, outcome = EXCLUDED.outcome, error_code = EXCLUDED.error_code, error_message = EXCLUDED.error_message
   WHERE a.finished_at IS NULL`;

/** Whether ended attempt `e` (outcome, and its job's status after it) is one whose record is its job row. */
const SUCCESS_ON_JOB_ROW = (e: string) => `${e}.outcome = 'ok' AND ${e}.status = 'succeeded'`;

/**
 * The whole ledger as one relation (job_id, seq, kind, started_at, finished_at, outcome,
 * error_code, error_message), for `FROM ${attemptLedger(s)} a`: every attempt row, and the
 * final attempt of each succeeded job without one (its job row records it). A running
 * attempt is not in it. A reader's conditions on it reach both branches: by job_id through
 * each table's key, by finished_at through attempt_finished and job_finished. A job that
 * succeeded without being claimed (none does today) has no started_at, and so no attempt.
 */
export const attemptLedger = (s: string): string => `(
  SELECT job_id, seq, kind, started_at, finished_at, outcome, error_code, error_message FROM ${s}.attempt
   UNION ALL
  SELECT j.id, j.attempt_seq, j.kind, j.started_at, j.finished_at, 'ok'::text, NULL::text, NULL::text
    FROM ${s}.job j
   WHERE j.status = 'succeeded' AND j.started_at IS NOT NULL
     AND NOT EXISTS (SELECT 1 FROM ${s}.attempt r WHERE r.job_id = j.id AND r.seq = j.attempt_seq)
)`;
