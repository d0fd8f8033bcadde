/**
 * Job dependencies (wasm/include/postbox/dependencies.h) in SQLite's dialect: the same rule as
 * the PostgreSQL statements (stores/pg/sql/dependencies.ts), in statements a batch runs one after
 * another with no JavaScript between them. What PostgreSQL does in one statement's CTEs takes two
 * here, so each parent's end is counted into its children exactly once by marking the edge that
 * carried it: `counted` holds the batch's token (or `birth`, for a parent that had ended when its
 * child was written). A stale or repeated settle of the same parent finds its edges marked and
 * counts nothing again. These statements apply the core's effects and decide nothing else.
 * @module
 */

/** The statuses that end a job. */
const FINAL = `('succeeded', 'dead', 'cancelled')`;
/** The code of a child cancelled by its parent's failure (the core's kParentFailedCode). */
const PARENT_FAILED = 'parent_failed';

/** The dependency statements of one outbox's tables. */
export interface SqliteDependencySql {
  /** `?1` refs (JSON array of {id, tenantKey}): `ord` (from 0) and the status of each found in its tenant's scope. */
  readonly parentStates: string;
  /** `?1` edges (JSON array of {parent, child, ended}). */
  readonly addEdges: string;
  /**
   * After a settle or an operator write, `?2` its rows (JSON array with `id`), `?3` the batch's
   * token: marks the edges of every row that has ended and of every waiting child its failure
   * cancels (recursively), not yet counted, with the token.
   */
  readonly markEnded: string;
  /**
   * Then, `?1` now and the same `?2`, `?3`: applies the marked ends to their children (one
   * UPDATE, as childEffectsCtes); returns each child written (id, kind, lane, status).
   */
  readonly applyEnded: string;
  /**
   * After an operator's replay, `?1` now, `?2` its writes (`budgetAttempts` set on a replayed
   * one, `fromStatus` its status before): a waiting child kept `release` that had counted the
   * end of a replayed job, or of a child the replay revives, counts it unfinished again (as
   * revivedChildrenCtes' `uncounted`)...
   */
  readonly uncount: string;
  /** ...and those edges are unmarked (run next, same parameters). */
  readonly uncountMarks: string;
  /** Then, `?2` the same: unmarks the edges the revived children count again. */
  readonly reviveMarks: string;
  /** Then, `?1` now and the same `?2`: the children the replayed jobs' failures cancelled wait again (as revivedChildrenCtes). */
  readonly revive: string;
  /** `?1` now, `?2` limit: the sweep's check (as JobResolveWaiting); returns the jobs written. */
  readonly resolveWaiting: string;
  /** `?1` id, `?2` limit: a job's parents and children with their kinds and statuses. */
  readonly dependencies: string;
  /** `?1` id: the counts kept with the job and its stored parents by status. */
  readonly parentTally: string;
  /** `?1` id: one row (`ids`, a JSON array of its members not ended) when it is a batch's completion; none otherwise. */
  readonly openBatchMembers: string;
}

export function sqliteDependencySql(job: string, edge: string): SqliteDependencySql {
  // The rows a write ended (`?2`), and the waiting 'cancel' children their failures cancel, and
  // theirs: by edges not yet counted (or counted by this batch, once markEnded has run).
  const uncounted = `(e.counted IS NULL OR e.counted = ?3)`;
  const ended = `ended(id, status) AS (
  SELECT j.id, j.status FROM json_each(?2) s JOIN ${job} j ON j.id = s.value ->> 'id' WHERE j.status IN ${FINAL}
), doomed(id) AS (
  SELECT c.id FROM ended f JOIN ${edge} e ON e.parent_id = f.id JOIN ${job} c ON c.id = e.child_id
   WHERE f.status IN ('dead', 'cancelled') AND ${uncounted} AND c.waiting_on > 0 AND c.on_parent_failure = 'cancel'
  UNION
  SELECT c.id FROM doomed d JOIN ${edge} e ON e.parent_id = d.id JOIN ${job} c ON c.id = e.child_id
   WHERE ${uncounted} AND c.waiting_on > 0 AND c.on_parent_failure = 'cancel'
), ends(id) AS (
  SELECT id FROM ended UNION SELECT id FROM doomed
)`;
  // A child revived when every parent that failed did so because of a failure now replayed.
  const revivable = `c.status = 'cancelled' AND c.last_error_code = '${PARENT_FAILED}'
     AND NOT EXISTS (SELECT 1 FROM ${edge} pe JOIN ${job} p ON p.id = pe.parent_id
                      WHERE pe.child_id = c.id AND p.id NOT IN (SELECT id FROM replayed)
                        AND (p.status = 'dead' OR (p.status = 'cancelled' AND p.last_error_code IS NOT '${PARENT_FAILED}')))`;
  const revived = `replayed(id) AS (
  SELECT value ->> 'id' FROM json_each(?2) WHERE value ->> 'budgetAttempts' IS NOT NULL
), revived(id) AS (
  SELECT c.id FROM replayed r JOIN ${edge} e ON e.parent_id = r.id JOIN ${job} c ON c.id = e.child_id WHERE ${revivable}
  UNION
  -- A job its parent's failure cancelled that the replay itself sent back to wait (operateJobs
  -- wrote it): its edges count again as a revived child's do; revive's UPDATE passes it over.
  SELECT value ->> 'id' FROM json_each(?2) WHERE value ->> 'budgetAttempts' IS NOT NULL AND value ->> 'status' = 'waiting'
  UNION
  SELECT c.id FROM revived v JOIN ${edge} e ON e.parent_id = v.id JOIN ${job} c ON c.id = e.child_id WHERE ${revivable}
)`;
  // A revived child counts again each parent not succeeded (the replayed ones and the revived).
  const countsAgain = `p.status <> 'succeeded'`;
  // Jobs the replay makes unfinished again, with the end their waiting children had counted.
  const reopened = `${revived}, reopened(id, was) AS (
  SELECT value ->> 'id', value ->> 'fromStatus' FROM json_each(?2) WHERE value ->> 'budgetAttempts' IS NOT NULL
  UNION SELECT id, 'cancelled' FROM revived
)`;
  const recountable = `c.status = 'waiting' AND c.on_parent_failure = 'release' AND e.counted IS NOT NULL`;
  return {
    parentStates: `
SELECT r.key AS ord, j.status AS status FROM json_each(?1) r
  JOIN ${job} j ON j.id = r.value ->> 'id' AND j.tenant_scope = COALESCE('t:' || (r.value ->> 'tenantKey'), 'n')`,
    addEdges: `
INSERT OR IGNORE INTO ${edge} (parent_id, child_id, counted)
SELECT value ->> 'parent', value ->> 'child', CASE WHEN value ->> 'ended' THEN 'birth' END FROM json_each(?1)`,
    markEnded: `
WITH RECURSIVE ${ended}
UPDATE ${edge} SET counted = ?3 WHERE counted IS NULL AND parent_id IN (SELECT id FROM ends)`,
    applyEnded: `
WITH RECURSIVE ${ended}, marked(id, status) AS (
  SELECT e.child_id, CASE WHEN e.parent_id IN (SELECT id FROM doomed) THEN 'cancelled' ELSE p.status END
    FROM ${edge} e JOIN ${job} p ON p.id = e.parent_id
   WHERE e.counted = ?3 AND e.parent_id IN (SELECT id FROM ends)
), effect(id, n, dead, cancelled, cancel) AS (
  SELECT id, 0, 0, 0, 1 FROM doomed
  UNION ALL
  SELECT m.id, count(*), sum(m.status = 'dead'), sum(m.status = 'cancelled'), 0
    FROM marked m JOIN ${job} c ON c.id = m.id
   WHERE m.id NOT IN (SELECT id FROM doomed) AND (m.status = 'succeeded' OR c.on_parent_failure = 'release')
   GROUP BY m.id
)
UPDATE ${job}
   SET status = CASE WHEN f.cancel THEN 'cancelled' WHEN ${job}.waiting_on - f.n <= 0 THEN 'pending' ELSE 'waiting' END,
       waiting_on = CASE WHEN f.cancel THEN 0 ELSE max(${job}.waiting_on - f.n, 0) END,
       due_at = CASE WHEN NOT f.cancel AND ${job}.waiting_on - f.n <= 0 THEN max(${job}.due_at, ?1) ELSE ${job}.due_at END,
       last_error_code = CASE WHEN f.cancel THEN '${PARENT_FAILED}' ELSE ${job}.last_error_code END,
       finished_at = CASE WHEN f.cancel THEN ?1 END,
       parents_dead = ${job}.parents_dead + f.dead, parents_cancelled = ${job}.parents_cancelled + f.cancelled,
       updated_at = ?1
  FROM effect f
 WHERE ${job}.id = f.id AND ${job}.waiting_on > 0
RETURNING ${job}.id AS id, ${job}.kind AS kind, ${job}.lane AS lane, ${job}.status AS status`,
    uncount: `
WITH RECURSIVE ${reopened}, u(id, n, dead, cancelled) AS (
  SELECT e.child_id, count(*), sum(r.was = 'dead'), sum(r.was = 'cancelled')
    FROM reopened r JOIN ${edge} e ON e.parent_id = r.id JOIN ${job} c ON c.id = e.child_id
   WHERE r.was IN ('dead', 'cancelled') AND ${recountable}
   GROUP BY e.child_id
)
UPDATE ${job}
   SET waiting_on = ${job}.waiting_on + u.n, parents_dead = ${job}.parents_dead - u.dead,
       parents_cancelled = ${job}.parents_cancelled - u.cancelled, updated_at = ?1
  FROM u WHERE ${job}.id = u.id`,
    uncountMarks: `
WITH RECURSIVE ${reopened}
UPDATE ${edge} SET counted = NULL
 WHERE counted IS NOT NULL AND parent_id IN (SELECT id FROM reopened WHERE was IN ('dead', 'cancelled'))
   AND child_id IN (SELECT c.id FROM ${job} c WHERE c.status = 'waiting' AND c.on_parent_failure = 'release')`,
    reviveMarks: `
WITH RECURSIVE ${revived}
UPDATE ${edge} SET counted = NULL
 WHERE child_id IN (SELECT id FROM revived) AND parent_id IN (SELECT p.id FROM ${job} p WHERE ${countsAgain})`,
    revive: `
WITH RECURSIVE ${revived}
UPDATE ${job}
   SET status = 'waiting', finished_at = NULL, last_error_code = NULL, updated_at = ?1,
       waiting_on = (SELECT count(*) FROM ${edge} e JOIN ${job} p ON p.id = e.parent_id WHERE e.child_id = ${job}.id AND ${countsAgain})
 WHERE id IN (SELECT id FROM revived) AND status = 'cancelled'`,
    resolveWaiting: `
WITH w AS (
  SELECT c.id, c.on_parent_failure,
         max(COALESCE(p.status IN ('dead', 'cancelled'), 0)) AS failed,
         max(COALESCE(p.status NOT IN ${FINAL}, 0)) AS open,
         sum(p.status = 'dead') AS dead, sum(p.status = 'cancelled') AS cancelled
    FROM (SELECT id, on_parent_failure FROM ${job} r WHERE status = 'waiting'
             AND NOT EXISTS (SELECT 1 FROM ${edge} e JOIN ${job} p ON p.id = e.parent_id WHERE e.child_id = r.id AND p.status NOT IN ${FINAL})
           ORDER BY updated_at LIMIT ?2) c
    LEFT JOIN ${edge} e ON e.child_id = c.id LEFT JOIN ${job} p ON p.id = e.parent_id
   GROUP BY c.id, c.on_parent_failure
)
UPDATE ${job}
   SET waiting_on = 0,
       status = CASE WHEN w.failed AND w.on_parent_failure = 'cancel' THEN 'cancelled' ELSE 'pending' END,
       last_error_code = CASE WHEN w.failed AND w.on_parent_failure = 'cancel' THEN '${PARENT_FAILED}' ELSE ${job}.last_error_code END,
       finished_at = CASE WHEN w.failed AND w.on_parent_failure = 'cancel' THEN ?1 END,
       due_at = CASE WHEN w.failed AND w.on_parent_failure = 'cancel' THEN ${job}.due_at ELSE max(${job}.due_at, ?1) END,
       parents_dead = max(${job}.parents_dead, COALESCE(w.dead, 0)), parents_cancelled = max(${job}.parents_cancelled, COALESCE(w.cancelled, 0)),
       updated_at = ?1
  FROM w WHERE ${job}.id = w.id AND ${job}.status = 'waiting' AND NOT w.open
RETURNING ${job}.id AS id, ${job}.kind AS kind, ${job}.lane AS lane, ${job}.status AS status`,
    dependencies: `
SELECT * FROM (SELECT 'parent' AS side, e.parent_id AS id, p.kind AS kind, p.status AS status
                 FROM ${edge} e LEFT JOIN ${job} p ON p.id = e.parent_id WHERE e.child_id = ?1 ORDER BY e.parent_id LIMIT ?2)
UNION ALL
SELECT * FROM (SELECT 'child', e.child_id, c.kind, c.status
                 FROM ${edge} e JOIN ${job} c ON c.id = e.child_id WHERE e.parent_id = ?1 ORDER BY e.child_id LIMIT ?2)`,
    parentTally: `
SELECT c.parents_total AS total, c.parents_dead AS dead, c.parents_cancelled AS cancelled,
       (SELECT json_group_object(status, n) FROM (
          SELECT p.status AS status, count(*) AS n FROM ${edge} e JOIN ${job} p ON p.id = e.parent_id WHERE e.child_id = c.id GROUP BY p.status)) AS by_status
  FROM ${job} c WHERE c.id = ?1`,
    openBatchMembers: `
SELECT (SELECT json_group_array(e.parent_id) FROM ${edge} e JOIN ${job} p ON p.id = e.parent_id
         WHERE e.child_id = c.id AND p.status NOT IN ${FINAL}) AS ids
  FROM ${job} c WHERE c.id = ?1 AND c.completes_batch = 1`,
  };
}
