// Claims of lanes with flow-limited kinds (a kind's `concurrency` or `rateLimit`; migration
// 0009). The plain claim statements stay as they are for lanes with none, so limits cost
// nothing where none is set.
import { RELEASED_COLUMN } from './dependencies.js';
import { CLAIM_ORDER, claimablePredicate, claimedArray, claimRank, type Pick } from './claim.js';
import { SETTLE_PARAMS, settleCtes } from './settle.js';
import type { Statement } from './statement.js';
import { ms, ts } from './time.js';

/** How many parameters the claim itself has before the limits' four (claimCtes). */
const claimParams = (pick: Pick) => (pick === 'due' ? 5 : 7);

/**
 * The claim of a lane with limited kinds. Parameters as claimCtes's, then: limited kinds[],
 * concurrency slots[] (0: none), rate slots[] (0: none), rate hold ms[] (parallel).
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
 */
export function limitedClaimCtes(s: string, first: number, pick: Pick, settling = false): string {
  const p = (i: number) => `$${first + i}`;
  const l = (i: number) => p(claimParams(pick) + i);
  const now = ts('$1');
  const targeted = pick === 'targets' ? ` AND j.id = ANY(${p(5)}::uuid[])` : '';
  const freeConcurrency = `k.job_id IS NULL
          OR EXISTS (SELECT 1 FROM ${s}.job h WHERE h.id = k.job_id AND (h.attempt_seq > k.attempt_seq
                     OR h.attempt_seq = k.attempt_seq AND (h.lease_expires_at IS NULL OR h.lease_expires_at <= ${now})))
          OR k.held_until <= ${now} AND NOT EXISTS (SELECT 1 FROM ${s}.job h WHERE h.id = k.job_id)${
            // An attempt this very statement settles frees its slot for the claim riding on it.
            settling ? `
          OR EXISTS (SELECT 1 FROM settled x WHERE x.id = k.job_id AND x.attempt_seq = k.attempt_seq)` : ''}`;
  const freeSlots = (pool: 'c' | 'r') => `SELECT k.kind, k.slot, row_number() OVER (PARTITION BY k.kind ORDER BY k.slot) AS rn
    FROM lim CROSS JOIN LATERAL (
      SELECT k.kind, k.slot FROM ${s}.kind_slot k
       WHERE k.kind = lim.kind AND k.pool = '${pool}' AND k.slot <= lim.${pool === 'c' ? 'cn' : 'rn'}
         AND (${pool === 'c' ? freeConcurrency : `k.held_until IS NULL OR k.held_until <= ${now}`})
       ORDER BY k.slot LIMIT ${p(3)} FOR UPDATE SKIP LOCKED) k
   WHERE lim.${pool === 'c' ? 'cn' : 'rn'} > 0`;
  return `lease AS (
  SELECT kind, lease_ms FROM unnest(${p(1)}::text[], ${p(2)}::bigint[]) AS l(kind, lease_ms)
), lim AS (
  SELECT * FROM unnest(${l(0)}::text[], ${l(1)}::int[], ${l(2)}::int[], ${l(3)}::bigint[]) AS l(kind, cn, rn, hold_ms)
), cs AS (
  ${freeSlots('c')}
), rs AS (
  ${freeSlots('r')}
), room AS (
  SELECT lim.kind, lim.rn AS rate_slots, lim.hold_ms,
         LEAST(CASE WHEN lim.cn > 0 THEN (SELECT count(*) FROM cs WHERE cs.kind = lim.kind) ELSE ${p(3)}::bigint END,
               CASE WHEN lim.rn > 0 THEN (SELECT count(*) FROM rs WHERE rs.kind = lim.kind) ELSE ${p(3)}::bigint END) AS n,
         lim.rn > 0 AND (SELECT count(*) FROM rs WHERE rs.kind = lim.kind)
                        <= CASE WHEN lim.cn > 0 THEN (SELECT count(*) FROM cs WHERE cs.kind = lim.kind) ELSE ${p(3)}::bigint END AS rate_bound
    FROM lim
), lpick AS (
  SELECT x.id, x.kind, x.rank, row_number() OVER (PARTITION BY x.kind ORDER BY x.rank, x.id) AS rn, room.n AS room
    FROM room CROSS JOIN LATERAL (
      SELECT j.id, j.kind, ${claimRank('j')} AS rank FROM ${s}.job j
       WHERE ${claimablePredicate(first, pick)} AND j.kind = room.kind${targeted}
       ORDER BY ${claimRank('j')}, j.id LIMIT room.n + 1 FOR UPDATE SKIP LOCKED) x
), upick AS (
  SELECT j.id, ${claimRank('j')} AS rank FROM ${s}.job j
   WHERE ${claimablePredicate(first, pick)} AND j.kind <> ALL(${l(0)}::text[])${targeted}
   ORDER BY ${claimRank('j')}, j.id LIMIT ${p(3)}::bigint FOR UPDATE SKIP LOCKED
), picked AS (
  SELECT u.id FROM (SELECT id, rank FROM upick UNION ALL SELECT id, rank FROM lpick WHERE rn <= room) u
   ORDER BY u.rank, u.id LIMIT ${p(3)}::bigint
), claimed AS (
  UPDATE ${s}.job j
     SET status = 'running', attempt_seq = j.attempt_seq + 1, updated_at = ${now}, started_at = ${now},
         lease_expires_at = ${now} + l.lease_ms * interval '1 millisecond'
    FROM lease l
   WHERE j.id = ANY(ARRAY(SELECT id FROM picked)) AND l.kind = j.kind
  RETURNING j.*
), took AS (
  SELECT c.id, c.kind, c.attempt_seq, c.lease_expires_at, row_number() OVER (PARTITION BY c.kind ORDER BY c.due_at, c.id) AS rn
    FROM claimed c WHERE c.kind = ANY(${l(0)}::text[])
), take_c AS (
  UPDATE ${s}.kind_slot k SET job_id = t.id, attempt_seq = t.attempt_seq, held_until = t.lease_expires_at
    FROM took t JOIN cs ON cs.kind = t.kind AND cs.rn = t.rn
   WHERE k.kind = cs.kind AND k.pool = 'c' AND k.slot = cs.slot
), take_r AS (
  UPDATE ${s}.kind_slot k SET job_id = t.id, attempt_seq = t.attempt_seq, held_until = ${now} + lim.hold_ms * interval '1 millisecond'
    FROM took t JOIN rs ON rs.kind = t.kind AND rs.rn = t.rn JOIN lim ON lim.kind = t.kind
   WHERE k.kind = rs.kind AND k.pool = 'r' AND k.slot = rs.slot
), throttled AS (
  -- Kinds with due jobs left for want of a slot, and when a rate slot frees (null: only
  -- concurrency is in the way; the slots this statement takes are not in its snapshot).
  SELECT room.kind, CASE WHEN room.rate_bound THEN ${ms(`COALESCE(
           (SELECT min(k.held_until) FROM ${s}.kind_slot k WHERE k.kind = room.kind AND k.pool = 'r' AND k.slot <= room.rate_slots AND k.held_until > ${now}),
           ${now} + room.hold_ms * interval '1 millisecond')`)} END AS retry_at
    FROM room WHERE EXISTS (SELECT 1 FROM lpick WHERE lpick.kind = room.kind AND lpick.rn > room.n)
)`;
}

/** The answer's throttled kinds, as JSON. */
const THROTTLED = `(SELECT COALESCE(json_agg(json_build_object('kind', kind, 'retryAt', retry_at)), '[]') FROM throttled) AS throttled`;

/** A limited lane's claim: the claimed jobs (claimedArray, traced) and the throttled kinds, as JSON. */
const limitedClaim = (s: string, pick: Pick): Statement => ({
  name: `postbox_claim_limited_${pick}`,
  text: `WITH ${limitedClaimCtes(s, 2, pick)}
SELECT (SELECT COALESCE(json_agg(${claimedArray(true)} ORDER BY ${CLAIM_ORDER}), '[]') FROM claimed) AS claimed, ${THROTTLED}`,
});

/** JobSettleThenClaim for a limited lane (drain.ts's, with limitedClaimCtes). */
const limitedSettleThenClaim = (s: string, pick: Pick): Statement => ({
  name: `postbox_settle_then_claim_limited_${pick}`,
  text: `WITH RECURSIVE ${settleCtes(s, 2)}, ${limitedClaimCtes(s, 2 + SETTLE_PARAMS, pick, true)}
SELECT (SELECT COALESCE(json_agg(id), '[]') FROM settled) AS settled, ${RELEASED_COLUMN},
       (SELECT COALESCE(json_agg(${claimedArray(true)} ORDER BY ${CLAIM_ORDER}), '[]') FROM claimed) AS claimed, ${THROTTLED}`,
});

export const jobClaimLimitedDue = (s: string) => limitedClaim(s, 'due');
export const jobClaimLimitedTargets = (s: string) => limitedClaim(s, 'targets');
export const jobSettleThenClaimLimitedDue = (s: string) => limitedSettleThenClaim(s, 'due');
export const jobSettleThenClaimLimitedTargets = (s: string) => limitedSettleThenClaim(s, 'targets');

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
