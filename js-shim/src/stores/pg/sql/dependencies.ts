import { ts } from './time.js';

/**
 * Job dependencies (wasm/include/postbox/dependencies.h) in SQL. A waiting child counts its
 * unfinished parents in `waiting_on`; what a parent that ends dead or cancelled does to it is
 * the effect the core named at enqueue, kept in `on_parent_failure` ('cancel' or 'release'); a
 * parent that succeeds always releases. These statements apply those effects and decide
 * nothing else. A child's `parents_*` counts (migration 0013) gain each parent's end as it is
 * counted down, so they say how its parents ended once none is left.
 */

/** The statuses that end a job. */
const FINAL = `('succeeded', 'dead', 'cancelled')`;
/** The code a child cancelled by its parent's failure records (the core's kParentFailedCode). */
export const PARENT_FAILED = 'parent_failed';

/**
 * CTEs applying the effects of jobs that have just finished on their waiting children. `finished`
 * names a CTE of (id, status) rows (any status; only final ones count) and `now` an epoch-ms
 * parameter. A failed parent cancels its 'cancel' children, and each child so cancelled does the
 * same to its own children (`doomed`, recursive: the statement needs WITH RECURSIVE); every other
 * finished parent takes one off each child's count (`freed`), and a child whose count reaches 0
 * falls due at once, or at its own due time if later. Both are written by ONE update (`released`,
 * which returns every child it wrote): each UPDATE of the job table in a statement opens all its
 * indexes, which every settle would pay even with no child to touch. Children are reached by
 * primary key only (LATERAL probes, `= ANY`), however many jobs wait. A child's row is locked by
 * the update, so two settles that finish its last two parents at once count down in turn.
 */
export const childEffectsCtes = (s: string, finished: string, now: string): string => {
  // The child of edge `e`, if it waits and `filter` holds for it: a probe by primary key. A job
  // waits exactly while it counts unfinished parents (waiting_on > 0; every other status has 0),
  // said so rather than as status = 'waiting', which would let the planner walk job_waiting (the
  // sweep's index of every waiting job) instead.
  const waitingChild = (filter: string) => `JOIN ${s}.job c ON c.id = e.child_id AND c.waiting_on > 0${filter}`;
  return `doomed AS (
  SELECT c.id FROM ${finished} f JOIN ${s}.job_edge e ON e.parent_id = f.id ${waitingChild(` AND c.on_parent_failure = 'cancel'`)}
   WHERE f.status IN ('dead', 'cancelled')
  UNION
  SELECT c.id FROM doomed d JOIN ${s}.job_edge e ON e.parent_id = d.id ${waitingChild(` AND c.on_parent_failure = 'cancel'`)}
), freed AS (
  SELECT e.child_id AS id, count(*)::int AS n,
         count(*) FILTER (WHERE f.status = 'dead')::int AS dead, count(*) FILTER (WHERE f.status = 'cancelled')::int AS cancelled
    FROM (SELECT id, status FROM ${finished} WHERE status IN ${FINAL} UNION ALL SELECT id, 'cancelled' FROM doomed) f
    JOIN ${s}.job_edge e ON e.parent_id = f.id ${waitingChild('')}
   WHERE (f.status = 'succeeded' OR c.on_parent_failure = 'release') AND NOT EXISTS (SELECT 1 FROM doomed d WHERE d.id = c.id)
   GROUP BY e.child_id
), effect AS (
  SELECT id, 0 AS n, 0 AS dead, 0 AS cancelled, true AS cancel FROM doomed UNION ALL SELECT id, n, dead, cancelled, false FROM freed
), released AS (
  UPDATE ${s}.job c
     SET waiting_on = CASE WHEN f.cancel THEN 0 ELSE GREATEST(c.waiting_on - f.n, 0) END,
         status = CASE WHEN f.cancel THEN 'cancelled' WHEN c.waiting_on - f.n <= 0 THEN 'pending' ELSE 'waiting' END,
         due_at = CASE WHEN NOT f.cancel AND c.waiting_on - f.n <= 0 THEN GREATEST(c.due_at, ${ts(now)}) ELSE c.due_at END,
         last_error_code = CASE WHEN f.cancel THEN '${PARENT_FAILED}' ELSE c.last_error_code END,
         finished_at = CASE WHEN f.cancel THEN ${ts(now)} END,
         parents_dead = c.parents_dead + f.dead, parents_cancelled = c.parents_cancelled + f.cancelled,
         updated_at = ${ts(now)}
    FROM effect f
   WHERE c.id = ANY(ARRAY(SELECT id FROM effect)) AND c.id = f.id AND c.waiting_on > 0
  RETURNING c.id, c.kind, c.lane, c.status
)`;
};

/** A settle statement's column of the children it released (now due): `[[id, kind, lane], …]`, or null for none. */
export const RELEASED_COLUMN = `(SELECT json_agg(json_build_array(id, kind, lane)) FROM released WHERE status = 'pending') AS released`;

/**
 * JobParentStates: the status of each named parent in the scope of the tenant that names it
 * ($1 ids, $2 tenant keys, NULL for none, parallel), by `ord` from 1; a parent not found there
 * has no row. Another tenant's job is as unknown as a missing one.
 */
export const jobParentStates = (s: string) => `
SELECT t.ord, j.status FROM unnest($1::uuid[], $2::text[]) WITH ORDINALITY AS t(id, tenant_key, ord)
  JOIN ${s}.job j ON j.id = t.id AND j.tenant_scope = COALESCE('t:' || t.tenant_key, 'n')`;

/** JobEdgesInsert: the edges of jobs just appended with parents ($1 parent ids, $2 child ids, parallel). */
export const jobEdgesInsert = (s: string) => `
INSERT INTO ${s}.job_edge (parent_id, child_id) SELECT * FROM unnest($1::uuid[], $2::uuid[]) ON CONFLICT DO NOTHING`;

/**
 * JobResolveWaiting: the sweep's check. Waiting jobs every parent of which has finished, by
 * committed state (oldest update first, at most $2, $1 now), get the effect their parents' ends
 * call for. The limit counts only such jobs: waiting jobs whose parents are still open (a fan-out
 * behind a parent due tomorrow) are passed over, never taking the places of younger ones the
 * check can release. A settle cannot see a child enqueued while it ran, so a child whose last parent
 * finished then waits for this. Parents seen unfinished (or gone: retention took them, and what
 * they did is long past) count as such; this never counts a child down, it only ends its wait.
 * Its parents' ends are counted afresh from those still stored (never fewer than the settles
 * counted: retention may have taken some).
 */
export const jobResolveWaiting = (s: string) => {
  // A parent of child `c` that has not finished (one gone counts as finished, as below).
  const openParentOf = (c: string) => `SELECT 1 FROM ${s}.job_edge e JOIN ${s}.job p ON p.id = e.parent_id WHERE e.child_id = ${c}.id AND p.status NOT IN ${FINAL}`;
  return `
WITH w AS (
  SELECT c.id, c.on_parent_failure,
         bool_or(p.status IN ('dead', 'cancelled')) AS failed,
         bool_or(p.status IS NOT NULL AND p.status NOT IN ${FINAL}) AS open,
         count(*) FILTER (WHERE p.status = 'dead')::int AS dead, count(*) FILTER (WHERE p.status = 'cancelled')::int AS cancelled
    FROM (SELECT id, on_parent_failure FROM ${s}.job r WHERE status = 'waiting' AND NOT EXISTS (${openParentOf('r')})
           ORDER BY updated_at LIMIT $2) c
    LEFT JOIN ${s}.job_edge e ON e.child_id = c.id LEFT JOIN ${s}.job p ON p.id = e.parent_id
   GROUP BY c.id, c.on_parent_failure
)
UPDATE ${s}.job c
   SET waiting_on = 0,
       status = CASE WHEN w.failed AND w.on_parent_failure = 'cancel' THEN 'cancelled' ELSE 'pending' END,
       last_error_code = CASE WHEN w.failed AND w.on_parent_failure = 'cancel' THEN '${PARENT_FAILED}' ELSE c.last_error_code END,
       finished_at = CASE WHEN w.failed AND w.on_parent_failure = 'cancel' THEN ${ts('$1')} END,
       due_at = CASE WHEN w.failed AND w.on_parent_failure = 'cancel' THEN c.due_at ELSE GREATEST(c.due_at, ${ts('$1')}) END,
       parents_dead = GREATEST(c.parents_dead, w.dead), parents_cancelled = GREATEST(c.parents_cancelled, w.cancelled),
       updated_at = ${ts('$1')}
  FROM w WHERE c.id = w.id AND c.status = 'waiting' AND NOT COALESCE(w.open, false)
RETURNING c.id::text AS id, c.kind, c.lane, c.status`;
};

/**
 * CTEs reviving what replayed jobs' failures cancelled: children cancelled with parent_failed
 * (and theirs, recursively) wait again, counting their unfinished parents (a replayed job and
 * every revived one among them), unless another parent of theirs is dead or was cancelled for
 * a reason of its own, which would only cancel them again (nor are their children revived).
 * And a child still waiting that had counted a replayed or revived job's end (one kept
 * `release`) counts it unfinished again, its end taken back out of the child's counts: the
 * job's next end is counted once more, not on top of the last. `replayed` names a CTE of ids,
 * `written` one of the ids the statement writes itself (never revived here).
 */
export const revivedChildrenCtes = (s: string, replayed: string, now: string, written: string): string => {
  // A job the same statement writes itself (replayed by name too) is no revived child: one write a row.
  const revivable = `c.status = 'cancelled' AND c.last_error_code = '${PARENT_FAILED}' AND c.id NOT IN (SELECT id FROM ${written})
     AND NOT EXISTS (SELECT 1 FROM ${s}.job_edge pe JOIN ${s}.job p ON p.id = pe.parent_id
                      WHERE pe.child_id = c.id AND p.id NOT IN (SELECT id FROM ${replayed})
                        AND (p.status = 'dead' OR (p.status = 'cancelled' AND p.last_error_code IS DISTINCT FROM '${PARENT_FAILED}')))`;
  return `revived AS (
  SELECT c.id FROM ${replayed} r JOIN ${s}.job_edge e ON e.parent_id = r.id JOIN ${s}.job c ON c.id = e.child_id WHERE ${revivable}
  UNION
  SELECT c.id FROM revived v JOIN ${s}.job_edge e ON e.parent_id = v.id JOIN ${s}.job c ON c.id = e.child_id WHERE ${revivable}
), reopened AS (
  UPDATE ${s}.job c
     SET status = 'waiting', finished_at = NULL, last_error_code = NULL, updated_at = ${ts(now)},
         waiting_on = (SELECT count(*) FROM ${s}.job_edge e JOIN ${s}.job p ON p.id = e.parent_id
                        WHERE e.child_id = c.id AND (p.status <> 'succeeded' OR p.id IN (SELECT id FROM ${replayed})))::int
    FROM revived v
   WHERE c.id = v.id AND c.status = 'cancelled'
  RETURNING c.id
), uncounted AS (
  UPDATE ${s}.job c
     SET waiting_on = c.waiting_on + u.n, parents_dead = c.parents_dead - u.dead, parents_cancelled = c.parents_cancelled - u.cancelled, updated_at = ${ts(now)}
    FROM (SELECT e.child_id AS id, count(*)::int AS n,
                 count(*) FILTER (WHERE p.status = 'dead')::int AS dead, count(*) FILTER (WHERE p.status = 'cancelled')::int AS cancelled
            FROM (SELECT id FROM ${replayed} UNION SELECT id FROM revived) r
            JOIN ${s}.job p ON p.id = r.id AND p.status IN ('dead', 'cancelled')
            JOIN ${s}.job_edge e ON e.parent_id = r.id
           GROUP BY e.child_id) u
   WHERE c.id = u.id AND c.waiting_on > 0 AND c.on_parent_failure = 'release'
)`;
};

/**
 * JobParentTally: how a job's parents stand ($1 id): its kept counts (`parents_*`, NULL for a
 * job without parents) and, of its parents still stored, how many are in each status.
 */
export const jobParentTally = (s: string) => `
SELECT c.parents_total AS total, c.parents_dead AS dead, c.parents_cancelled AS cancelled,
       (SELECT COALESCE(json_object_agg(status, n), '{}') FROM (
          SELECT p.status, count(*)::int AS n FROM ${s}.job_edge e JOIN ${s}.job p ON p.id = e.parent_id WHERE e.child_id = c.id GROUP BY p.status) t) AS by_status
  FROM ${s}.job c WHERE c.id = $1`;

/**
 * JobOpenBatchMembers: the members not finished of the batch whose completion job is $1, as one
 * row of `ids`; no row when $1 is no batch's completion (no job, or any other child).
 */
export const jobOpenBatchMembers = (s: string) => `
SELECT ARRAY(SELECT e.parent_id::text FROM ${s}.job_edge e JOIN ${s}.job p ON p.id = e.parent_id
              WHERE e.child_id = c.id AND p.status NOT IN ${FINAL}) AS ids
  FROM ${s}.job c WHERE c.id = $1 AND c.completes_batch`;

/**
 * JobLockOrphans: the waiting children of jobs about to be erased ($1 ids) that are not erased
 * with them, locked: an erased parent never runs, so they are cancelled before it goes.
 */
export const jobLockOrphans = (s: string) => `
SELECT c.id::text AS id, c.kind, c.lane, c.status FROM ${s}.job c
 WHERE c.id IN (SELECT e.child_id FROM ${s}.job_edge e WHERE e.parent_id = ANY($1::uuid[]))
   AND c.waiting_on > 0 AND c.id <> ALL($1::uuid[])
 FOR UPDATE`;

/** JobDependencies: a job's parents and children ($1), each with its kind and status, at most $2 of each (by id). */
export const jobDependencies = (s: string) => `
(SELECT 'parent' AS side, e.parent_id::text AS id, p.kind, p.status FROM ${s}.job_edge e LEFT JOIN ${s}.job p ON p.id = e.parent_id WHERE e.child_id = $1 ORDER BY e.parent_id LIMIT $2)
UNION ALL
(SELECT 'child', e.child_id::text, c.kind, c.status FROM ${s}.job_edge e JOIN ${s}.job c ON c.id = e.child_id WHERE e.parent_id = $1 ORDER BY e.child_id LIMIT $2)
ORDER BY 1 DESC, 2`;
