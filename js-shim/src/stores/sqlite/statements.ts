/**
 * The outbox's statements in SQLite's dialect, one set per table prefix. Lists travel as ONE
 * JSON parameter read with `json_each` (D1 allows 100 bound parameters a statement, so a batch
 * never binds a parameter per job). Every write is what the core decided: statuses, due times,
 * counters and lease ends come in as values; these statements only fence them (by attempt and
 * status) and store them.
 * @module
 */

import { sqliteDependencySql, type SqliteDependencySql } from './dependencies.js';

/** Columns a claimed or recovered job carries back (the contract's `ClaimedJob`), plus its due time and boost for ordering. */
const claimedColumns = (t: string) =>
  `${t}id AS id, ${t}kind AS kind, ${t}lane AS lane, ${t}payload AS payload, ${t}tenant_key AS tenant_key,
  ${t}correlation_id AS correlation_id, ${t}metadata AS metadata, ${t}attempts AS attempts, ${t}attempt_seq AS attempt_seq,
  ${t}crashes AS crashes, ${t}streak_code AS streak_code, ${t}streak AS streak, ${t}max_attempts AS max_attempts,
  ${t}last_error_code AS last_error_code, ${t}last_error_message AS last_error_message,
  ${t}lease_expires_at AS lease_expires_ms, ${t}trace_context AS trace_context, ${t}created_at AS created_ms, ${t}due_at AS due_ms,
  ${t}boost_ms AS boost_ms, ${t}parents_total AS parents_total, ${t}parents_dead AS parents_dead, ${t}parents_cancelled AS parents_cancelled`;

/** Columns of an inspected job (the contract's `JobView`, before conversion). */
export const JOB_VIEW_COLUMNS = `id, kind, lane, status, payload, tenant_key, dedupe_key, correlation_id, metadata, attempts, crashes,
  last_error_code, last_error_message, due_at, created_at, finished_at`;

/** SQLite's version of "no version cutoff": the largest integer a JS number holds exactly. */
const NO_CUTOFF = '9007199254740991';

/** The statements of one outbox. */
export interface SqliteSql {
  readonly prefix: string;
  readonly job: string;
  readonly attempt: string;
  readonly edge: string;
  /** Job dependencies (dependencies.ts). */
  readonly deps: SqliteDependencySql;
  /**
   * `?1` items (JSON array: id, payload, tenantKey, dedupeKey, correlationId, metadata, dueAt,
   * maxAttempts, and for a job with parents its status, waitingOn, onParentFailure, code, total,
   * dead, cancelled as the core decided), `?2` kind, `?3` lane, `?4` now, `?5` version ts, `?6` trace context.
   */
  readonly appendInsert: string;
  /** `?1` the same items: the job holding each keyed item's dedupe key (`ord` from 0) and the fields a repeat is compared on. */
  readonly appendHolders: string;
  /** `?1` now, `?2` lane, `?3` {kind: leaseMs}, `?4` limit, `?5` version cutoff, `?6` ids never to claim (JSON array). */
  readonly claimDue: string;
  /** As claimDue, plus `?7` targets {id: kind}. */
  readonly claimTargets: string;
  /**
   * The claim of a lane with flow-limited kinds: as claimDue, plus `?7` targets {id: kind} or
   * null (every due job), `?8` limits {kind: [concurrency, rate slots, rate hold ms, tenant concurrency]} (0: none).
   */
  readonly claimLimited: string;
  /** As claimDue, plus `?7` tenants to visit, `?8` the scope to start after (null: the first), `?9` weights by scope (null: none): a fair claim (`ClaimFairShare`). */
  readonly claimFair: string;
  /** claimFair's parameters: the scopes it visits, in order (run just before it, in its batch). */
  readonly fairVisited: string;
  /**
   * After claimLimited, `?1` now, `?2` lane, `?3` limits (as claimLimited's `?8`), `?4` version
   * cutoff, `?5` targets or null: the limited kinds with due jobs and no room left, and when a
   * rate slot frees (null: not known); `tenant` 1 for a kind with room whose due jobs' tenants have none.
   */
  readonly throttledKinds: string;
  /** `?1` now: the attempt records of the jobs a claim just took. */
  readonly openAttempts: string;
  /** `?1` now, `?2` settlements (JSON array): closes the settled attempts (run before settleJobs). */
  readonly settleAttempts: string;
  /** `?1` now, `?2` settlements: writes the jobs; returns the ids written. */
  readonly settleJobs: string;
  /** `?1` now, `?2` beats (JSON array of id, attemptSeq, leaseExpiresAt): the attempt records (run before heartbeatJobs). */
  readonly heartbeatAttempts: string;
  /** `?1` now, `?2` beats: the jobs; returns the ids written. */
  readonly heartbeatJobs: string;
  /** `?1` now, `?2` kinds (JSON array), `?3` limit. */
  readonly listExpiredLeases: string;
  /** `?1` now, `?2` registered kinds (JSON array), `?3` limit: the other kinds' expired leases. */
  readonly listExpiredUnregistered: string;
  /** `?1` lane, `?2` kinds, `?3` version cutoff. */
  readonly nextDue: string;
  /** `?1` ids (JSON array), `?2` 1 for any tenant, `?3` tenant key. */
  readonly lockForOperate: string;
  /** `?1` now, `?2` writes (JSON array, with the status and attempt each was decided on). */
  readonly operateAttempts: string;
  /** `?1` now, `?2` writes: the jobs; returns id, kind, lane, status of those written. */
  readonly operateJobs: string;
  /** `?1` tenant key. */
  readonly eraseTenantAttempts: string;
  readonly eraseTenantEdges: string;
  readonly eraseTenantJobs: string;
  /** `?1` succeeded before, `?2` dead/cancelled before, `?3` limit. */
  readonly deleteFinishedAttempts: string;
  readonly deleteFinishedEdges: string;
  readonly deleteFinishedJobs: string;
  /** `?1` now, `?2` lane, `?3` kinds, `?4` limit, `?5` nudged before. */
  readonly listDueForHandoff: string;
  /** `?1` now, `?2` ids (JSON array). */
  readonly recordNudges: string;
  /** `?1` due before, `?2` registered kinds (JSON array). */
  readonly countUnregistered: string;
  /** Jobs waiting or running, per kind, lane and status. */
  readonly countActive: string;
  /** `?1` id. */
  readonly listAttempts: string;
  /**
   * Guards of a D1 transaction, run in its batch before its writes: each fails the batch (CHECK
   * constraint `postbox_conflict`) when what the transaction read has changed since.
   * `?1` expected holders (JSON array of key, scope, holder id or null).
   */
  readonly guardHolders: string;
  /** `?1` expected states (JSON array of id, status, seq). */
  readonly guardStates: string;
  /** `?1` tenant key, `?2` the number of its jobs read. */
  readonly guardTenantCount: string;
  /** `?1` schedule names (JSON array). */
  readonly scheduleLastRuns: string;
  /** `?1` name, `?2` occurrence (ms), `?3` now. Never moves back. */
  readonly scheduleRecord: string;
}

/** The claim's predicate on `j`, shared by the claim, the next-due query and the hand-off listing. */
const claimable = (laneParam: string, cutoffParam: string) =>
  `j.status IN ('pending', 'retrying') AND j.lane = ${laneParam}
     AND (j.version_ts IS NULL OR j.version_ts <= COALESCE(${cutoffParam}, ${NO_CUTOFF}))`;

const settleRows = `SELECT value ->> 'id' AS id, value ->> 'attemptSeq' AS seq, value ->> 'status' AS status,
         value ->> 'dueAt' AS due_at, value ->> 'attempts' AS attempts, value ->> 'crashes' AS crashes,
         value ->> 'streakCode' AS streak_code, value ->> 'streak' AS streak, value ->> 'errorCode' AS error_code,
         value ->> 'errorMessage' AS error_message, value ->> 'finished' AS finished, value ->> 'outcome' AS outcome
    FROM json_each(?2)`;

const operateRows = `SELECT value ->> 'id' AS id, value ->> 'status' AS status, value ->> 'dueAt' AS due_at,
         value ->> 'budgetAttempts' AS budget_attempts, value ->> 'budgetCrashes' AS budget_crashes,
         value ->> 'budgetStreak' AS budget_streak, value ->> 'reason' AS reason, value ->> 'closeAttempt' AS close,
         value ->> 'finished' AS finished, value ->> 'recordReason' AS record_reason,
         value ->> 'fromStatus' AS from_status, value ->> 'fromSeq' AS from_seq, value ->> 'waitingOn' AS waiting_on
    FROM json_each(?2)`;

const cache = new Map<string, SqliteSql>();

/** The statements of the outbox whose tables start with `p` (see `sqliteTablePrefix`). */
export function sqliteSql(p: string): SqliteSql {
  const hit = cache.get(p);
  if (hit) return hit;
  const job = `${p}job`;
  const attempt = `${p}attempt`;
  const edge = `${p}job_edge`;

  // The claim picks rows oldest due first and leases them in one UPDATE … FROM; the batch's next
  // statement (openAttempts) opens their attempt records. A job settled earlier in the same
  // batch is never claimed again by it (`?6`), as PostgreSQL's single statement guarantees.
  const claim = (pick: string) => `
UPDATE ${job}
   SET status = 'running', attempt_seq = ${job}.attempt_seq + 1, updated_at = ?1,
       lease_expires_at = ?1 + (SELECT l.value FROM json_each(?3) l WHERE l.key = ${job}.kind)
  FROM (${pick}) AS p
 WHERE ${job}.id = p.id
RETURNING ${claimedColumns(`${job}.`)}`;
  // Claims take due jobs in order of due time less the priority's boost (the claim index's
  // order); a due job's rank is at or before now, said too so the index scan stops there.
  const due = `SELECT j.id FROM ${job} j
   WHERE ${claimable('?2', '?5')} AND j.due_at <= ?1 AND j.due_at - j.boost_ms <= ?1
     AND j.kind IN (SELECT key FROM json_each(?3))
     AND j.id NOT IN (SELECT value FROM json_each(?6))
   ORDER BY j.due_at - j.boost_ms, j.id
   LIMIT ?4`;
  // Fair share (`ClaimFairShare`, as sql/fair.ts on PostgreSQL): `?7` tenants to visit, `?8`
  // the scope to start after. The scopes with a due job are found by skipping through the
  // job_fair index, one probe each; `fairVisited` lists them (run first in the claim's batch),
  // and `fair` takes each one's share in claim order and fills the rest in claim order.
  const dueWhere = `${claimable('?2', '?5')} AND j.due_at <= ?1 AND j.due_at - j.boost_ms <= ?1
     AND j.kind IN (SELECT key FROM json_each(?3)) AND j.id NOT IN (SELECT value FROM json_each(?6))`;
  const nextScope = (bound: string) => `(SELECT j.tenant_scope FROM ${job} j WHERE ${dueWhere} AND ${bound} ORDER BY j.tenant_scope LIMIT 1)`;
  const visits = 'min(?7, ?4)';
  const visited = `RECURSIVE fair_on(scope, n) AS (
  SELECT ${nextScope("j.tenant_scope > COALESCE(?8, '')")}, 1
  UNION ALL SELECT ${nextScope('j.tenant_scope > t.scope')}, t.n + 1 FROM fair_on t WHERE t.scope IS NOT NULL AND t.n < ${visits}
), fair_round(scope, n) AS (
  SELECT ${nextScope('j.tenant_scope <= ?8')}, (SELECT count(scope) FROM fair_on) + 1
   WHERE ?8 IS NOT NULL AND (SELECT count(scope) FROM fair_on) < ${visits}
  UNION ALL SELECT ${nextScope('j.tenant_scope > t.scope AND j.tenant_scope <= ?8')}, t.n + 1
    FROM fair_round t WHERE t.scope IS NOT NULL AND t.n < ${visits}
), visited AS (
  SELECT scope, n FROM fair_on WHERE scope IS NOT NULL UNION ALL SELECT scope, n FROM fair_round WHERE scope IS NOT NULL
)`;
  // `?9` the scopes' weights ({scope: weight}; null: all weigh 1): a scope's share of the claim
  // is in proportion to its weight among the visited scopes', and it offers w jobs a round.
  const fair = `WITH ${visited}, weighed AS (
  SELECT scope, n, COALESCE((SELECT w.value FROM json_each(?9) w WHERE w.key = visited.scope), 1) AS w FROM visited
), shares AS (
  SELECT scope, n, w, max(1, (CAST(?4 AS INTEGER) * w + (SELECT sum(w) FROM weighed) - 1) / (SELECT sum(w) FROM weighed)) AS share FROM weighed
), offered AS (
  SELECT id, rank, n, w FROM (
    SELECT x.id, x.due_at - x.boost_ms AS rank, v.n, v.w, v.share,
           row_number() OVER (PARTITION BY v.n ORDER BY x.due_at - x.boost_ms, x.id) AS k
      FROM shares v JOIN ${job} x ON x.id IN (
        SELECT j.id FROM ${job} j WHERE ${dueWhere} AND j.tenant_scope = v.scope ORDER BY j.due_at - j.boost_ms, j.id LIMIT ?4))
   WHERE k <= share
), rest AS (
  SELECT j.id, j.due_at - j.boost_ms AS rank FROM ${job} j
   WHERE ${dueWhere} AND j.id NOT IN (SELECT id FROM offered)
   ORDER BY j.due_at - j.boost_ms, j.id LIMIT max(0, ?4 - (SELECT count(*) FROM offered))
)
SELECT id FROM (
  SELECT id, rank, (row_number() OVER (PARTITION BY n ORDER BY rank, id) + w - 1) / w AS round FROM offered
  UNION ALL SELECT id, rank, 9223372036854775807 FROM rest)
 ORDER BY round, rank, id LIMIT ?4`;
  // CROSS JOIN keeps the targets the outer loop (SQLite never reorders it): a nudge looks up its
  // jobs by id instead of scanning the lane's due jobs.
  const targets = `SELECT j.id FROM json_each(?7) t CROSS JOIN ${job} j ON j.id = t.key AND j.kind = t.value
   WHERE ${claimable('?2', '?5')} AND j.due_at <= ?1
     AND j.kind IN (SELECT key FROM json_each(?3))
     AND j.id NOT IN (SELECT value FROM json_each(?6))
   LIMIT ?4`;

  // Attempts an operator's cancel ended while they ran: each keeps its slot until its lease would
  // have ended (a settle ends an attempt's lease when it finishes; the operator's close keeps it).
  const cancelledRunning = (where: string, now: string) => `(SELECT count(*) FROM ${attempt} a${where.includes('h.') ? ` JOIN ${job} h ON h.id = a.job_id` : ''}
        WHERE ${where} AND a.finished_at IS NOT NULL AND a.lease_expires_at > a.finished_at AND a.lease_expires_at > ${now})`;
  // Room of a limited kind (`lim`: a json_each row of ?8 or ?3): its concurrency less its jobs
  // running on a live lease, and its rate slots less its starts inside the hold; the smaller.
  const room = (lim: string, now: string) => `min(
      CASE WHEN ${lim}.value ->> 0 > 0 THEN ${lim}.value ->> 0 - (SELECT count(*) FROM ${job} r
        WHERE r.kind = ${lim}.key AND r.status = 'running' AND r.lease_expires_at > ${now})
        - ${cancelledRunning(`a.kind = ${lim}.key`, now)} ELSE 9007199254740991 END,
      CASE WHEN ${lim}.value ->> 1 > 0 THEN ${lim}.value ->> 1 - (SELECT count(*) FROM ${attempt} a
        WHERE a.kind = ${lim}.key AND a.started_at > ${now} - (${lim}.value ->> 2)) ELSE 9007199254740991 END)`;
  // A tenant scope's jobs of `kind` running on a live lease (a kind's `tenantConcurrency`).
  const tenantRunning = (kind: string, scope: string, now: string) => `((SELECT count(*) FROM ${job} r
        WHERE r.kind = ${kind} AND r.tenant_scope = ${scope} AND r.status = 'running' AND r.lease_expires_at > ${now})
        + ${cancelledRunning(`a.kind = ${kind} AND h.tenant_scope = ${scope}`, now)})`;
  // `?8`'s 4th entry is the kind's tenant limit (0: none): such a kind takes no more of a scope's
  // jobs than the scope's room, and its scopes' first jobs before their second (`round`), so a
  // tenant at its limit or with a backlog keeps no other tenant's job out of the kind's room.
  // `?9` 1: fair share, where every limited kind goes round its scopes so, the kinds without
  // limits go round theirs (a scope of weight w, `?10` as claimFair's `?9`, offers w jobs a
  // round), and the claim takes every round's jobs before the next's.
  const limited = `SELECT x.id FROM (
    SELECT y.id, y.kind, y.rank, y.round, row_number() OVER (PARTITION BY y.kind ORDER BY y.round, y.rank, y.id) AS rn FROM (
      SELECT j.id, j.kind, j.tenant_scope AS scope, j.due_at - j.boost_ms AS rank, COALESCE(tl.value ->> 3, 0) AS tn,
             CASE WHEN tl.value ->> 3 > 0 OR ?9 = 1 AND tl.key IS NOT NULL
                  THEN row_number() OVER (PARTITION BY j.kind, j.tenant_scope ORDER BY j.due_at - j.boost_ms, j.id)
                  WHEN ?9 = 1 THEN (row_number() OVER (PARTITION BY tl.key IS NULL, j.tenant_scope ORDER BY j.due_at - j.boost_ms, j.id)
                                    + COALESCE((SELECT w.value FROM json_each(?10) w WHERE w.key = j.tenant_scope), 1) - 1)
                                   / COALESCE((SELECT w.value FROM json_each(?10) w WHERE w.key = j.tenant_scope), 1)
                  ELSE 0 END AS round
        FROM ${job} j LEFT JOIN json_each(?8) tl ON tl.key = j.kind
       WHERE ${claimable('?2', '?5')} AND j.due_at <= ?1
         AND j.kind IN (SELECT key FROM json_each(?3))
         AND j.id NOT IN (SELECT value FROM json_each(?6))
         AND (?7 IS NULL OR EXISTS (SELECT 1 FROM json_each(?7) t WHERE t.key = j.id AND t.value = j.kind))
    ) y WHERE y.tn = 0 OR y.round <= y.tn AND y.round <= y.tn - ${tenantRunning('y.kind', 'y.scope', '?1')}
  ) x LEFT JOIN json_each(?8) lim ON lim.key = x.kind
   WHERE lim.key IS NULL OR x.rn <= ${room('lim', '?1')}
   ORDER BY CASE WHEN ?9 = 1 THEN x.round ELSE 0 END, x.rank, x.id
   LIMIT ?4`;

  // A due job of the limited kind `lim` (throttledKinds' parameters).
  const throttledDue = `${claimable('?2', '?4')} AND j.due_at <= ?1 AND j.kind = lim.key
                 AND (?5 IS NULL OR EXISTS (SELECT 1 FROM json_each(?5) t WHERE t.key = j.id AND t.value = j.kind))`;
  // A settle applies only while the job runs under the settling attempt; a crash (a recovery)
  // only once the lease has run out, so a heartbeat since the listing wins.
  const settleFence = (j: string) => `${j}.id = s.id AND ${j}.attempt_seq = s.seq AND ${j}.status = 'running'
     AND (s.outcome <> 'crash' OR ${j}.lease_expires_at < ?1)`;
  // An operator write applies only over the state it was decided on (D1 cannot hold a lock
  // between the read and the write, so the write checks it instead).
  const operateFence = (j: string) => `${j}.id = o.id AND ${j}.status = o.from_status AND ${j}.attempt_seq = o.from_seq`;
  const beatFence = (j: string) => `${j}.id = b.id AND ${j}.attempt_seq = b.seq AND ${j}.status = 'running' AND ${j}.lease_expires_at > ?1`;
  const beats = `SELECT value ->> 'id' AS id, value ->> 'attemptSeq' AS seq, value ->> 'leaseExpiresAt' AS lease FROM json_each(?2)`;
  const doomed = `SELECT id FROM ${job}
   WHERE (status = 'succeeded' AND finished_at < ?1) OR (status IN ('dead', 'cancelled') AND finished_at < ?2)
   ORDER BY finished_at, id LIMIT ?3`;

  // A guard writes ok = 0 into the one-row guard table when its condition holds, which its
  // CHECK refuses: the batch fails with "CHECK constraint failed: postbox_conflict" and rolls back.
  const guard = (violated: string) => `
INSERT INTO ${p}guard (id, ok) VALUES (0, CASE WHEN ${violated} THEN 0 ELSE 1 END)
ON CONFLICT (id) DO UPDATE SET ok = excluded.ok`;

  const sql: SqliteSql = Object.freeze({
    prefix: p,
    job,
    attempt,
    edge,
    deps: sqliteDependencySql(job, edge),
    appendInsert: `
INSERT INTO ${job} (id, kind, lane, status, payload, tenant_key, dedupe_key, correlation_id, metadata,
                    due_at, created_at, updated_at, version_ts, max_attempts, trace_context, priority, boost_ms,
                    waiting_on, on_parent_failure, last_error_code, finished_at, parents_total, parents_dead, parents_cancelled, completes_batch)
SELECT value ->> 'id', ?2, ?3, COALESCE(value ->> 'depStatus', 'pending'), value ->> 'payload', value ->> 'tenantKey', value ->> 'dedupeKey',
       value ->> 'correlationId', value ->> 'metadata', value ->> 'dueAt', ?4, ?4, ?5, value ->> 'maxAttempts', ?6,
       COALESCE(value ->> 'priority', 0), COALESCE(value ->> 'boostMs', 0),
       COALESCE(value ->> 'waitingOn', 0), value ->> 'onParentFailure', value ->> 'depCode',
       CASE WHEN value ->> 'depStatus' = 'cancelled' THEN ?4 END, value ->> 'parentsTotal', value ->> 'parentsDead', value ->> 'parentsCancelled',
       value ->> 'batch'
  FROM json_each(?1) WHERE true ORDER BY key
ON CONFLICT (tenant_scope, dedupe_key) WHERE dedupe_key IS NOT NULL DO NOTHING`,
    appendHolders: `
SELECT i.key AS ord, j.id AS id, j.kind AS kind, j.payload AS payload, j.max_attempts AS max_attempts, j.metadata AS metadata,
       j.correlation_id AS correlation_id, j.priority AS priority, j.on_parent_failure AS on_parent_failure,
       (SELECT json_group_array(e.parent_id) FROM ${edge} e WHERE e.child_id = j.id) AS parents
  FROM json_each(?1) i
  JOIN ${job} j ON j.dedupe_key = i.value ->> 'dedupeKey' AND j.tenant_scope = COALESCE('t:' || (i.value ->> 'tenantKey'), 'n')
 WHERE i.value ->> 'dedupeKey' IS NOT NULL`,
    claimDue: claim(due),
    claimTargets: claim(targets),
    claimLimited: claim(limited),
    claimFair: claim(fair),
    fairVisited: `WITH ${visited} SELECT scope, n FROM visited ORDER BY n`,
    throttledKinds: `
SELECT lim.key AS kind,
       CASE WHEN lim.value ->> 1 > 0 AND lim.value ->> 1 - (SELECT count(*) FROM ${attempt} a WHERE a.kind = lim.key AND a.started_at > ?1 - (lim.value ->> 2)) <= 0
            THEN (SELECT min(a.started_at) FROM ${attempt} a WHERE a.kind = lim.key AND a.started_at > ?1 - (lim.value ->> 2)) + (lim.value ->> 2) END AS retry_at,
       0 AS tenant
  FROM json_each(?3) lim
 WHERE ${room('lim', '?1')} <= 0 AND EXISTS (SELECT 1 FROM ${job} j WHERE ${throttledDue})
UNION ALL
-- A kind with room whose due jobs' tenants have none (of its first due jobs: a bounded look).
SELECT lim.key, NULL, 1
  FROM json_each(?3) lim
 WHERE lim.value ->> 3 > 0 AND ${room('lim', '?1')} > 0
   AND EXISTS (SELECT 1 FROM (SELECT j.kind, j.tenant_scope FROM ${job} j WHERE ${throttledDue} ORDER BY j.due_at - j.boost_ms, j.id LIMIT 256) d
                WHERE ${tenantRunning('d.kind', 'd.tenant_scope', '?1')} >= lim.value ->> 3)`,
    openAttempts: `
INSERT OR IGNORE INTO ${attempt} (job_id, seq, kind, started_at, lease_expires_at)
SELECT id, attempt_seq, kind, ?1, lease_expires_at FROM ${job}
 WHERE status = 'running' AND lease_expires_at > ?1 AND updated_at = ?1`,
    settleAttempts: `
WITH s AS (${settleRows})
UPDATE ${attempt}
   SET finished_at = ?1, outcome = s.outcome, error_code = s.error_code, error_message = s.error_message, lease_expires_at = min(${attempt}.lease_expires_at, ?1)
  FROM s JOIN ${job} j ON j.id = s.id
 WHERE ${attempt}.job_id = s.id AND ${attempt}.seq = s.seq AND ${attempt}.finished_at IS NULL AND ${settleFence('j')}`,
    settleJobs: `
WITH s AS (${settleRows})
UPDATE ${job}
   SET status = s.status, due_at = COALESCE(s.due_at, ${job}.due_at),
       attempts = s.attempts, crashes = s.crashes, streak_code = s.streak_code, streak = s.streak,
       last_error_code = s.error_code, last_error_message = s.error_message, lease_expires_at = NULL,
       finished_at = CASE WHEN s.finished THEN ?1 END, updated_at = ?1
  FROM s
 WHERE ${settleFence(job)}
RETURNING ${job}.id AS id`,
    heartbeatAttempts: `
WITH b AS (${beats})
UPDATE ${attempt} SET lease_expires_at = b.lease
  FROM b JOIN ${job} j ON j.id = b.id
 WHERE ${attempt}.job_id = b.id AND ${attempt}.seq = b.seq AND ${attempt}.finished_at IS NULL AND ${beatFence('j')}`,
    heartbeatJobs: `
WITH b AS (${beats})
UPDATE ${job} SET lease_expires_at = b.lease
  FROM b
 WHERE ${beatFence(job)}
RETURNING ${job}.id AS id`,
    listExpiredLeases: `
SELECT ${claimedColumns('')} FROM ${job}
 WHERE status = 'running' AND lease_expires_at < ?1 AND kind IN (SELECT value FROM json_each(?2))
 ORDER BY lease_expires_at
 LIMIT ?3`,
    listExpiredUnregistered: `
SELECT ${claimedColumns('')} FROM ${job}
 WHERE status = 'running' AND lease_expires_at < ?1 AND kind NOT IN (SELECT value FROM json_each(?2))
 ORDER BY lease_expires_at
 LIMIT ?3`,
    nextDue: `
SELECT min(j.due_at) AS due FROM ${job} j
 WHERE ${claimable('?1', '?3')} AND j.kind IN (SELECT value FROM json_each(?2))`,
    lockForOperate: `
SELECT j.id, j.kind, j.lane, j.status, j.attempt_seq, j.last_error_code AS code,
       CASE WHEN ?4 AND j.status = 'cancelled' AND j.last_error_code = 'parent_failed' THEN (
         SELECT json_object(
                  'failed', COALESCE(sum(p.status IN ('dead', 'cancelled') AND p.id NOT IN (SELECT value FROM json_each(?1))), 0),
                  'open', COALESCE(sum(p.status NOT IN ('succeeded', 'dead', 'cancelled')
                                       OR p.id IN (SELECT value FROM json_each(?1)) AND p.status IN ('dead', 'cancelled')), 0))
           FROM ${edge} e JOIN ${job} p ON p.id = e.parent_id WHERE e.child_id = j.id) END AS parents
  FROM ${job} j
 WHERE j.id IN (SELECT value FROM json_each(?1)) AND (?2 OR j.tenant_scope = COALESCE('t:' || ?3, 'n'))`,
    operateAttempts: `
WITH o AS (${operateRows})
UPDATE ${attempt}
   SET finished_at = ?1, outcome = o.close, error_code = o.reason
  FROM o JOIN ${job} j ON j.id = o.id
 WHERE o.close IS NOT NULL AND ${attempt}.job_id = o.id AND ${attempt}.seq = j.attempt_seq
   AND ${attempt}.finished_at IS NULL AND ${operateFence('j')}`,
    operateJobs: `
WITH o AS (${operateRows})
UPDATE ${job}
   SET status = o.status,
       due_at = COALESCE(o.due_at, ${job}.due_at),
       attempts = COALESCE(o.budget_attempts, ${job}.attempts),
       crashes = COALESCE(o.budget_crashes, ${job}.crashes),
       streak = COALESCE(o.budget_streak, ${job}.streak),
       streak_code = CASE WHEN o.budget_streak IS NULL THEN ${job}.streak_code END,
       replayed_at = CASE WHEN o.budget_attempts IS NULL THEN ${job}.replayed_at ELSE ?1 END,
       last_error_code = CASE WHEN o.record_reason THEN o.reason ELSE ${job}.last_error_code END,
       lease_expires_at = NULL,
       -- Only a replay the core sent back to its parents leaves a job waiting: any other must count
       -- no parent, or their settles would wake it.
       waiting_on = COALESCE(o.waiting_on, 0),
       finished_at = CASE WHEN o.finished THEN ?1 END,
       updated_at = ?1
  FROM o
 WHERE ${operateFence(job)}
RETURNING ${job}.id AS id, ${job}.kind AS kind, ${job}.lane AS lane, ${job}.status AS status`,
    eraseTenantAttempts: `DELETE FROM ${attempt} WHERE job_id IN (SELECT id FROM ${job} WHERE tenant_key = ?1)`,
    eraseTenantEdges: `DELETE FROM ${edge} WHERE parent_id IN (SELECT id FROM ${job} WHERE tenant_key = ?1) OR child_id IN (SELECT id FROM ${job} WHERE tenant_key = ?1)`,
    eraseTenantJobs: `DELETE FROM ${job} WHERE tenant_key = ?1 RETURNING id`,
    // The same ordered pick three times in one batch: the attempts' and edges' deletes change no
    // job row, so every statement picks the same jobs.
    deleteFinishedAttempts: `DELETE FROM ${attempt} WHERE job_id IN (${doomed})`,
    deleteFinishedEdges: `DELETE FROM ${edge} WHERE parent_id IN (${doomed}) OR child_id IN (${doomed})`,
    deleteFinishedJobs: `DELETE FROM ${job} WHERE id IN (${doomed}) RETURNING id`,
    listDueForHandoff: `
SELECT j.id AS id, j.kind AS kind, j.lane AS lane FROM ${job} j
 WHERE j.status IN ('pending', 'retrying') AND j.due_at <= ?1 AND j.lane = ?2
   AND j.kind IN (SELECT value FROM json_each(?3))
   AND (j.nudge_sent_at IS NULL OR j.nudge_sent_at < ?5)
 ORDER BY j.due_at, j.id LIMIT ?4`,
    recordNudges: `UPDATE ${job} SET nudge_sent_at = ?1 WHERE id IN (SELECT value FROM json_each(?2))`,
    countActive: `
SELECT kind, lane, status, count(*) AS count FROM ${job} WHERE status IN ('pending', 'retrying', 'running') GROUP BY kind, lane, status`,
    countUnregistered: `
SELECT kind, count(*) AS count FROM ${job}
 WHERE status IN ('pending', 'retrying') AND due_at < ?1 AND kind NOT IN (SELECT value FROM json_each(?2))
 GROUP BY kind ORDER BY kind`,
    guardHolders: guard(`EXISTS (SELECT 1 FROM json_each(?1) e
       LEFT JOIN ${job} j ON j.dedupe_key = e.value ->> 'key' AND j.tenant_scope = e.value ->> 'scope'
      WHERE j.id IS NOT (e.value ->> 'holder'))`),
    guardStates: guard(`EXISTS (SELECT 1 FROM json_each(?1) e
       LEFT JOIN ${job} j ON j.id = e.value ->> 'id'
      WHERE j.id IS NULL OR j.status <> e.value ->> 'status' OR j.attempt_seq <> e.value ->> 'seq')`),
    guardTenantCount: guard(`(SELECT count(*) FROM ${job} WHERE tenant_key = ?1) <> ?2`),
    listAttempts: `
SELECT seq, outcome, error_code, error_message, started_at, finished_at FROM ${attempt} WHERE job_id = ?1 ORDER BY seq`,
    scheduleLastRuns: `SELECT name, last_at FROM ${p}schedule_run WHERE name IN (SELECT value FROM json_each(?1))`,
    scheduleRecord: `
INSERT INTO ${p}schedule_run (name, last_at, updated_at) VALUES (?1, ?2, ?3)
ON CONFLICT (name) DO UPDATE SET last_at = max(last_at, excluded.last_at), updated_at = excluded.updated_at`,
  });
  cache.set(p, sql);
  return sql;
}
