// Claims of lanes with flow-limited kinds (a kind's `concurrency` or `rateLimit`; migration
// 0009). The plain claim statements stay as they are for lanes with none, so limits cost
// nothing where none is set.
import { RELEASED_COLUMN } from './dependencies.js';
import { CLAIM_ORDER, claimablePredicate, claimedArray, claimRank, type Pick } from './claim.js';
import { FAIR_CLAIMED, fairAfterColumn, fairPickCtes } from './fair.js';
import { SETTLE_PARAMS, settleCtes } from './settle.js';
import { GENERIC_PLAN_ONLY, type Statement } from './statement.js';
import { ms, ts } from './time.js';

/** How many parameters the claim itself has before the limits' seven (claimCtes). */
const claimParams = (pick: Pick) => (pick === 'due' ? 5 : 7);

/**
 * The claim of a lane with limited kinds. Parameters as claimCtes's, then: limited kinds[],
 * concurrency slots[] (0: none), rate slots[] (0: none), rate hold ms[], tenant concurrency[]
 * (0: none; parallel), how many tenant scopes to visit per kind limited per tenant, and (the due
 * pick only) the scope the visit starts after (NULL: from the first).
 *
 * A job of a limited kind is claimed only with a free slot of each of its pools, taken in the
 * same statement, so the limits hold across every consumer. A rate slot is free once its hold
 * has passed. A concurrency slot is free once the attempt holding it has ended: the job row
 * shows a later attempt, or this one no longer running, or its lease run out. That is asked
 * of the job row, never told to the slot by a settle, so settles and heartbeats are unchanged;
 * and it is asked so that a row version older than the slot's says "held": under SKIP LOCKED a
 * slot taken by a claim that committed after this statement's snapshot is rechecked against
 * the job as that snapshot saw it, before its claim. `held_until` (the claim's lease) frees a
 * slot whose job row is gone. Up to `limit` free slots of each pool are locked per kind; one
 * job more than a kind has room for is looked at, to tell a kind held back by its limit
 * (`throttled`) from one with nothing more due. `settling`: the statement settles attempts
 * first (settleCtes), and theirs are free for its claim.
 *
 * A kind limited per tenant has a pool of slots per tenant scope (pool 't', `scope`; migration
 * 0014), freed like concurrency slots. Its claim visits the scopes with due jobs of it as a fair
 * claim does (skipping through job_fair, after the previous claim's last scope and round), takes
 * up to a scope's free slots of its first jobs, the scopes' first jobs first, within the kind's
 * room. A visited scope without slots has them made (and is tried again by the next claim: rows
 * this statement inserts are not in its snapshot); one with due jobs beyond its free slots holds
 * the kind back (`tenant`) when nothing else does.
 *
 * `fair` (the due pick of an outbox with fair share; three parameters more, as fair.ts's: the
 * scopes to visit, the scope after, the weights): every limited kind visits its scopes so, and
 * one without a tenant limit takes ⌈room / visited⌉ of each one's first jobs before its due
 * order (lpick) fills its room (fpick); the kinds without limits take a fair pick among
 * themselves (fairPickCtes, `u_`); and the claim takes each pick's first round before any
 * second, `picked.ord` the order the answer lists them in.
 */
export function limitedClaimCtes(s: string, first: number, pick: Pick, settling = false, fair = false): string {
  const p = (i: number) => `$${first + i}`;
  const l = (i: number) => p(claimParams(pick) + i);
  const now = ts('$1');
  // A nudged job is claimed by id, and only as the kind it was nudged as (as claimCtes's targets).
  const targeted = pick === 'targets'
    ? ` AND j.id = ANY(${p(5)}::uuid[]) AND EXISTS (SELECT 1 FROM unnest(${p(5)}::uuid[], ${p(6)}::text[]) AS t(id, kind) WHERE t.id = j.id AND t.kind = j.kind)`
    : '';
  const claimable = claimablePredicate(first, pick);
  // A slot an operator's cancel took from a running attempt (job_id cleared, held_until kept)
  // stays held until that attempt's lease would have ended: its handler may still be running.
  const freeConcurrency = `k.job_id IS NULL AND (k.held_until IS NULL OR k.held_until <= ${now})
          OR EXISTS (SELECT 1 FROM ${s}.job h WHERE h.id = k.job_id AND (h.attempt_seq > k.attempt_seq
                     OR h.attempt_seq = k.attempt_seq AND (h.lease_expires_at IS NULL OR h.lease_expires_at <= ${now})))
          OR k.held_until <= ${now} AND NOT EXISTS (SELECT 1 FROM ${s}.job h WHERE h.id = k.job_id)${
            // An attempt this very statement settles frees its slot for the claim riding on it.
            settling ? `
          OR EXISTS (SELECT 1 FROM settled x WHERE x.id = k.job_id AND x.attempt_seq = k.attempt_seq)` : ''}`;
  const freeSlots = (pool: 'c' | 'r') => `SELECT k.kind, k.slot, row_number() OVER (PARTITION BY k.kind ORDER BY k.slot) AS rn
    FROM lim CROSS JOIN LATERAL (
      SELECT k.kind, k.slot FROM ${s}.kind_slot k
       WHERE k.kind = lim.kind AND k.pool = '${pool}' AND k.scope = '' AND k.slot <= lim.${pool === 'c' ? 'cn' : 'rn'}
         AND (${pool === 'c' ? freeConcurrency : `k.held_until IS NULL OR k.held_until <= ${now}`})
       ORDER BY k.slot LIMIT ${p(3)} FOR UPDATE SKIP LOCKED) k
   WHERE lim.${pool === 'c' ? 'cn' : 'rn'} > 0`;
  // The next scope after `bound` with a claimable job of `kind`, one probe of job_fair.
  const nextScope = (kind: string, bound: string) =>
    `(SELECT j.tenant_scope FROM ${s}.job j WHERE ${claimable} AND j.kind = ${kind} AND ${bound} ORDER BY j.tenant_scope LIMIT 1)`;
  const after = `${l(6)}::text`;
  // With fair share every limited kind visits its tenants; without it, those limited per tenant.
  const visiting = fair ? 'lim' : 'tlim';
  // The lane has kinds without limits (a constant: the server gates the scans on it, so a lane
  // of limited kinds never walks their backlog looking for others).
  const unlimited = `EXISTS (SELECT 1 FROM unnest(${p(1)}::text[]) AS u(kind) WHERE u.kind <> ALL(${l(0)}::text[]))`;
  const visits = `${l(5)}::int`;
  const visitedScopes =
    pick === 'due'
      ? `t_on(kind, scope, n) AS (
  SELECT t.kind, ${nextScope('t.kind', `j.tenant_scope > COALESCE(${after}, '')`)}, 1 FROM ${visiting} t
  UNION ALL
  SELECT o.kind, ${nextScope('o.kind', 'j.tenant_scope > o.scope')}, o.n + 1 FROM t_on o WHERE o.scope IS NOT NULL AND o.n < ${visits}
), t_round(kind, scope, n) AS (
  SELECT t.kind, ${nextScope('t.kind', `j.tenant_scope <= ${after}`)}, (SELECT count(o.scope) FROM t_on o WHERE o.kind = t.kind) + 1
    FROM ${visiting} t WHERE ${after} IS NOT NULL AND (SELECT count(o.scope) FROM t_on o WHERE o.kind = t.kind) < ${visits}
  UNION ALL
  SELECT r.kind, ${nextScope('r.kind', `j.tenant_scope > r.scope AND j.tenant_scope <= ${after}`)}, r.n + 1
    FROM t_round r WHERE r.scope IS NOT NULL AND r.n < ${visits}
), tvisited AS (
  SELECT kind, scope, n FROM t_on WHERE scope IS NOT NULL
  UNION ALL SELECT kind, scope, n FROM t_round WHERE scope IS NOT NULL
)`
      : `tvisited AS (
  SELECT d.kind, d.scope, row_number() OVER (PARTITION BY d.kind ORDER BY d.scope) AS n FROM (
    SELECT DISTINCT j.kind, j.tenant_scope AS scope FROM ${s}.job j
     WHERE ${claimable}${targeted} AND j.kind IN (SELECT kind FROM tlim)) d
)`;
  return `lease AS (
  SELECT kind, lease_ms FROM unnest(${p(1)}::text[], ${p(2)}::bigint[]) AS l(kind, lease_ms)
), lim AS (
  SELECT * FROM unnest(${l(0)}::text[], ${l(1)}::int[], ${l(2)}::int[], ${l(3)}::bigint[], ${l(4)}::int[]) AS l(kind, cn, rn, hold_ms, tn)
), tlim AS (
  SELECT kind, tn FROM lim WHERE tn > 0
), cs AS (
  ${freeSlots('c')}
), rs AS (
  ${freeSlots('r')}
), room AS (
  SELECT lim.kind, lim.rn AS rate_slots, lim.hold_ms, lim.tn,
         LEAST(CASE WHEN lim.cn > 0 THEN (SELECT count(*) FROM cs WHERE cs.kind = lim.kind) ELSE ${p(3)}::bigint END,
               CASE WHEN lim.rn > 0 THEN (SELECT count(*) FROM rs WHERE rs.kind = lim.kind) ELSE ${p(3)}::bigint END) AS n,
         lim.rn > 0 AND (SELECT count(*) FROM rs WHERE rs.kind = lim.kind)
                        <= CASE WHEN lim.cn > 0 THEN (SELECT count(*) FROM cs WHERE cs.kind = lim.kind) ELSE ${p(3)}::bigint END AS rate_bound
    FROM lim
), ${visitedScopes}, tnew AS (
  -- Visited scopes without their slots yet (a new tenant, or a limit raised by a deploy).
  SELECT v.kind, v.scope, t.tn FROM tvisited v JOIN tlim t ON t.kind = v.kind
   WHERE NOT EXISTS (SELECT 1 FROM ${s}.kind_slot k WHERE k.kind = v.kind AND k.pool = 't' AND k.scope = v.scope AND k.slot = t.tn)
), tmade AS (
  INSERT INTO ${s}.kind_slot (kind, pool, scope, slot)
  SELECT n.kind, 't', n.scope, g FROM tnew n CROSS JOIN LATERAL generate_series(1, n.tn) AS g
  ON CONFLICT DO NOTHING
), tcand AS (
  -- Each visited scope's free slots as the snapshot sees them, unlocked: tlocked locks only
  -- as many as the claim takes of the scope, so other consumers' claims find the rest.
  SELECT v.kind, v.scope, k.slot, row_number() OVER (PARTITION BY v.kind, v.scope ORDER BY k.slot) AS rn
    FROM tvisited v JOIN tlim t ON t.kind = v.kind CROSS JOIN LATERAL (
      SELECT k.slot FROM ${s}.kind_slot k
       WHERE k.kind = v.kind AND k.pool = 't' AND k.scope = v.scope AND k.slot <= t.tn AND (${freeConcurrency})
       ORDER BY k.slot LIMIT t.tn) k
), tscope AS (
  ${fair
    // A kind without a tenant limit offers each visited scope's first ⌈room / visited⌉ jobs
    // (fair_share.h's quota), no more: its fill comes from lpick.
    ? `SELECT v.kind, v.scope, r.tn, CASE WHEN r.tn > 0 THEN (SELECT count(*) FROM tcand f WHERE f.kind = v.kind AND f.scope = v.scope)
              ELSE (r.n + (SELECT count(*) FROM tvisited c WHERE c.kind = v.kind) - 1) / (SELECT count(*) FROM tvisited c WHERE c.kind = v.kind) END AS free
    FROM tvisited v JOIN room r ON r.kind = v.kind`
    : `SELECT v.kind, v.scope, 1 AS tn, (SELECT count(*) FROM tcand f WHERE f.kind = v.kind AND f.scope = v.scope) AS free FROM tvisited v`}
), toffer AS (
  SELECT x.id, x.kind, v.scope, x.rank, v.free, v.tn, row_number() OVER (PARTITION BY x.kind, v.scope ORDER BY x.rank, x.id) AS trn
    FROM tscope v CROSS JOIN LATERAL (
      SELECT j.id, j.kind, ${claimRank('j')} AS rank FROM ${s}.job j
       WHERE ${claimable} AND j.kind = v.kind AND j.tenant_scope = v.scope${targeted}
       ORDER BY ${claimRank('j')}, j.id LIMIT CASE WHEN v.tn > 0 THEN v.free + 1 ELSE v.free END FOR UPDATE SKIP LOCKED) x
), lpick AS (
  SELECT x.id, x.kind, x.rank, row_number() OVER (PARTITION BY x.kind ORDER BY x.rank, x.id) AS rn, room.n AS room
    FROM room CROSS JOIN LATERAL (
      SELECT j.id, j.kind, ${claimRank('j')} AS rank FROM ${s}.job j
       WHERE ${claimable} AND j.kind = room.kind${targeted}
       ORDER BY ${claimRank('j')}, j.id LIMIT room.n + 1 FOR UPDATE SKIP LOCKED) x
   WHERE room.tn = 0
), tpick AS (
  -- A kind limited per tenant: its scopes' first jobs first (round by round), within the kind's room.
  SELECT o.id, o.kind, o.scope, o.rank, o.trn, row_number() OVER (PARTITION BY o.kind ORDER BY o.trn, o.rank, o.id) AS rn, room.n AS room
    FROM toffer o JOIN room ON room.kind = o.kind WHERE o.trn <= o.free AND o.tn > 0
), ${fair ? `fpick AS (
  -- A limited kind without a tenant limit, with fair share: its visited scopes' first jobs
  -- round by round, then the rest in claim order (lpick), within the kind's room.
  SELECT c.id, c.kind, c.rank, c.round, row_number() OVER (PARTITION BY c.kind ORDER BY c.round, c.rank, c.id) AS rn, room.n AS room FROM (
    SELECT id, kind, rank, min(round) AS round FROM (
      SELECT o.id, o.kind, o.rank, o.trn AS round FROM toffer o WHERE o.tn = 0
      UNION ALL SELECT id, kind, rank, 9223372036854775807 FROM lpick WHERE rn <= room) f GROUP BY id, kind, rank) c
    JOIN room ON room.kind = c.kind
), ` : ''}tlocked AS (
  -- The slots of the jobs tpick takes, locked; one another claim holds means one job fewer.
  SELECT l.kind, l.scope, l.slot, row_number() OVER (PARTITION BY l.kind, l.scope ORDER BY l.slot) AS rn FROM (
    SELECT c.kind, c.scope, k.slot FROM tcand c
      JOIN ${s}.kind_slot k ON k.kind = c.kind AND k.pool = 't' AND k.scope = c.scope AND k.slot = c.slot
     WHERE c.rn <= (SELECT count(*) FROM tpick p WHERE p.kind = c.kind AND p.scope = c.scope AND p.rn <= p.room)
       AND (${freeConcurrency})
     FOR UPDATE OF k SKIP LOCKED) l
), ${fair
    // The kinds without limits, with fair share: a fair pick among their jobs (fair.ts).
    ? `${fairPickCtes(s, {
      claimable: `${claimable} AND j.kind <> ALL(${l(0)}::text[]) AND ${unlimited}`, limit: `${p(3)}::bigint`,
      tenants: `LEAST(${l(7)}::int, ${p(3)}::bigint)`, after: `${l(8)}::text`, weights: `${l(9)}::jsonb`, prefix: 'u_',
    })}, upick AS (
  SELECT id, rank, round FROM u_fair_pick
), picked AS (
  -- Every pick's first round first (each tenant's first job), then the seconds, …; ord the
  -- order the answer hands them over in.
  SELECT u.id, row_number() OVER (ORDER BY u.round, u.rank, u.id) AS ord FROM (SELECT id, rank, round FROM upick UNION ALL SELECT id, rank, round FROM fpick WHERE rn <= room
    UNION ALL SELECT p.id, p.rank, p.trn FROM tpick p
     WHERE p.rn <= p.room AND p.trn <= (SELECT count(*) FROM tlocked l WHERE l.kind = p.kind AND l.scope = p.scope)) u
   ORDER BY u.round, u.rank, u.id LIMIT ${p(3)}::bigint
)`
    : `upick AS (
  SELECT j.id, ${claimRank('j')} AS rank FROM ${s}.job j
   WHERE ${claimable} AND j.kind <> ALL(${l(0)}::text[]) AND ${unlimited}${targeted}
   ORDER BY ${claimRank('j')}, j.id LIMIT ${p(3)}::bigint FOR UPDATE SKIP LOCKED
), picked AS (
  SELECT u.id FROM (SELECT id, rank FROM upick UNION ALL SELECT id, rank FROM lpick WHERE rn <= room
    UNION ALL SELECT p.id, p.rank FROM tpick p
     WHERE p.rn <= p.room AND p.trn <= (SELECT count(*) FROM tlocked l WHERE l.kind = p.kind AND l.scope = p.scope)) u
   ORDER BY u.rank, u.id LIMIT ${p(3)}::bigint
)`}, claimed AS (
  UPDATE ${s}.job j
     SET status = 'running', attempt_seq = j.attempt_seq + 1, updated_at = ${now}, started_at = ${now},
         lease_expires_at = ${now} + l.lease_ms * interval '1 millisecond'
    FROM lease l
   WHERE j.id = ANY(ARRAY(SELECT id FROM picked)) AND l.kind = j.kind
  RETURNING j.*
), took AS (
  SELECT c.id, c.kind, c.tenant_scope, c.attempt_seq, c.lease_expires_at,
         row_number() OVER (PARTITION BY c.kind ORDER BY c.due_at, c.id) AS rn,
         row_number() OVER (PARTITION BY c.kind, c.tenant_scope ORDER BY c.id) AS trn
    FROM claimed c WHERE c.kind = ANY(${l(0)}::text[])
), take_c AS (
  UPDATE ${s}.kind_slot k SET job_id = t.id, attempt_seq = t.attempt_seq, held_until = t.lease_expires_at
    FROM took t JOIN cs ON cs.kind = t.kind AND cs.rn = t.rn
   WHERE k.kind = cs.kind AND k.pool = 'c' AND k.scope = '' AND k.slot = cs.slot
), take_r AS (
  UPDATE ${s}.kind_slot k SET job_id = t.id, attempt_seq = t.attempt_seq, held_until = ${now} + lim.hold_ms * interval '1 millisecond'
    FROM took t JOIN rs ON rs.kind = t.kind AND rs.rn = t.rn JOIN lim ON lim.kind = t.kind
   WHERE k.kind = rs.kind AND k.pool = 'r' AND k.scope = '' AND k.slot = rs.slot
), take_t AS (
  UPDATE ${s}.kind_slot k SET job_id = t.id, attempt_seq = t.attempt_seq, held_until = t.lease_expires_at
    FROM took t JOIN tlocked f ON f.kind = t.kind AND f.scope = t.tenant_scope AND f.rn = t.trn
   WHERE k.kind = f.kind AND k.pool = 't' AND k.scope = f.scope AND k.slot = f.slot
), kthrottled AS (
  -- Kinds with due jobs left for want of a slot, and when a rate slot frees (null: only
  -- concurrency is in the way; the slots this statement takes are not in its snapshot).
  SELECT room.kind, CASE WHEN room.rate_bound THEN ${ms(`COALESCE(
           (SELECT min(k.held_until) FROM ${s}.kind_slot k WHERE k.kind = room.kind AND k.pool = 'r' AND k.scope = '' AND k.slot <= room.rate_slots AND k.held_until > ${now}),
           ${now} + room.hold_ms * interval '1 millisecond')`)} END AS retry_at
    FROM room WHERE EXISTS (SELECT 1 FROM lpick WHERE lpick.kind = room.kind AND lpick.rn > room.n)
                 OR EXISTS (SELECT 1 FROM tpick WHERE tpick.kind = room.kind AND tpick.rn > room.n)
), throttled AS (
  SELECT kind, retry_at, false AS tenant FROM kthrottled
  UNION ALL
  -- Kinds with room whose visited tenants had due jobs beyond their free slots; slots just made: ask again now.
  SELECT t.kind, CASE WHEN EXISTS (SELECT 1 FROM tnew n WHERE n.kind = t.kind) THEN $1::bigint END, true FROM tlim t
   WHERE NOT EXISTS (SELECT 1 FROM kthrottled k WHERE k.kind = t.kind)
     AND (EXISTS (SELECT 1 FROM toffer o WHERE o.kind = t.kind AND o.trn > o.free) OR EXISTS (SELECT 1 FROM tnew n WHERE n.kind = t.kind))
)`;
}

/** The answer's throttled kinds, as JSON. */
const THROTTLED = `(SELECT COALESCE(json_agg(json_build_object('kind', kind, 'retryAt', retry_at, 'tenant', tenant)), '[]') FROM throttled) AS throttled`;

/**
 * Where the drain's next visit of a kind's tenants starts (the first kind that visits them):
 * its last visited scope when it visited as many as it might, else none.
 */
const TENANT_AFTER = (first: number, pick: Pick, fair: boolean) => `(SELECT CASE WHEN count(*) >= $${first + claimParams(pick) + 5}::int THEN (array_agg(scope ORDER BY n DESC))[1] END
          FROM tvisited WHERE kind = (SELECT min(kind) FROM ${fair ? 'lim' : 'tlim'})) AS tenant_after`;

/** With fair share, where the next fair pick among the kinds without limits starts. */
const U_FAIR_AFTER = (first: number) => `, ${fairAfterColumn('u_visited', `LEAST($${first + claimParams('due') + 7}::int, $${first + 3}::bigint)`)}`;

/** The claimed jobs, in claim order; with fair share, in the order the claim picked them (round by round). */
const claimedColumn = (fair: boolean) => (fair ? FAIR_CLAIMED : `(SELECT COALESCE(json_agg(${claimedArray(true)} ORDER BY ${CLAIM_ORDER}), '[]') FROM claimed) AS claimed`);

/** The due pick keeps its generic plan; a nudged pick's values are its plan (claimCtes). */
const keel = (pick: Pick) => (pick === 'due' ? `\n WHERE ${GENERIC_PLAN_ONLY}` : '');

/**
 * A limited lane's claim: the claimed jobs (claimedArray, traced), the throttled kinds, as JSON,
 * and where the next claim's visits start. `fair` (the due pick of an outbox with fair share):
 * three parameters more, after the limits' (fair tenants, the scope after, weights; as fair.ts).
 */
const limitedClaim = (s: string, pick: Pick, fair = false): Statement => ({
  name: `postbox_claim_limited_${fair ? 'fair_' : ''}${pick}`,
  text: `WITH RECURSIVE ${limitedClaimCtes(s, 2, pick, false, fair)}
SELECT ${claimedColumn(fair)}, ${THROTTLED}, ${TENANT_AFTER(2, pick, fair)}${fair ? U_FAIR_AFTER(2) : ''}${keel(pick)}`,
});

/** JobSettleThenClaim for a limited lane (drain.ts's, with limitedClaimCtes). */
const limitedSettleThenClaim = (s: string, pick: Pick, fair = false): Statement => ({
  name: `postbox_settle_then_claim_limited_${fair ? 'fair_' : ''}${pick}`,
  text: `WITH RECURSIVE ${settleCtes(s, 2)}, ${limitedClaimCtes(s, 2 + SETTLE_PARAMS, pick, true, fair)}
SELECT (SELECT COALESCE(json_agg(id), '[]') FROM settled) AS settled, ${RELEASED_COLUMN},
       ${claimedColumn(fair)}, ${THROTTLED},
       ${TENANT_AFTER(2 + SETTLE_PARAMS, pick, fair)}${fair ? U_FAIR_AFTER(2 + SETTLE_PARAMS) : ''}${keel(pick)}`,
});

export const jobClaimLimitedDue = (s: string) => limitedClaim(s, 'due');
export const jobClaimLimitedTargets = (s: string) => limitedClaim(s, 'targets');
export const jobSettleThenClaimLimitedDue = (s: string) => limitedSettleThenClaim(s, 'due');
export const jobSettleThenClaimLimitedTargets = (s: string) => limitedSettleThenClaim(s, 'targets');
export const jobClaimLimitedFairDue = (s: string) => limitedClaim(s, 'due', true);
export const jobSettleThenClaimLimitedFairDue = (s: string) => limitedSettleThenClaim(s, 'due', true);

/**
 * KindSlotsEnsure: the slot rows limited kinds need, created once (a kind's first limited claim
 * in a process). $1 kinds[], $2 pools[] ('c' or 'r'), $3 slot counts[] (parallel).
 */
export const kindSlotsEnsure = (s: string): Statement => ({
  name: 'postbox_kind_slots_ensure',
  text: `INSERT INTO ${s}.kind_slot (kind, pool, slot)
SELECT l.kind, l.pool, g FROM unnest($1::text[], $2::text[], $3::int[]) AS l(kind, pool, n) CROSS JOIN LATERAL generate_series(1, l.n) AS g
ON CONFLICT DO NOTHING`,
});
