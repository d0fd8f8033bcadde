// Claims with fair share across tenants (an outbox's `fairShare`; migration 0011,
// wasm/include/postbox/fair_share.h). The plain claim statements stay as they are for outboxes
// without it, so fair share costs nothing where it is off.
import { RELEASED_COLUMN } from './dependencies.js';
import { claimablePredicate, claimedArray, claimRank, claimedCte, hide, leaseCte } from './claim.js';
import { SETTLE_PARAMS, settleCtes } from './settle.js';
import { GENERIC_PLAN_ONLY, type Statement } from './statement.js';

/** How many parameters the claim itself has before the fair share's two (claimCtes, due pick). */
const CLAIM_PARAMS = 5;

/**
 * A fair claim of due jobs. Parameters as claimCtes's (due pick), then: how many tenant scopes
 * to visit at most (no more than the limit), the scope the drain's previous claim visited last
 * (NULL: from the first), and the scopes' weights (jsonb {scope: weight}; NULL: all weigh 1).
 *
 * The scopes with a claimable job are found by skipping through the job_fair index, one probe
 * each, from just after the previous claim's last scope and round to it again. Each visited
 * scope offers its first ⌈limit × w / Σw⌉ jobs in claim order (fair_share_of: w its weight, Σw
 * the visited scopes'); the claim takes them round by round, w of a scope's a round (every
 * scope's first job, then every scope's second, …, fair_round) and fills what
 * room is left in the lane's claim order, so one tenant's backlog never keeps another's first
 * job out of the claim and still fills every claim itself. `picked` carries each job's place
 * (`ord`), which is the order the answer hands jobs to the drain.
 */
export function fairClaimCtes(s: string, first: number): string {
  const p = (i: number) => `$${first + i}`;
  const v = hide('due');
  const claimable = claimablePredicate(first, 'due');
  const limit = v(`${p(3)}::bigint`);
  const tenants = v(`LEAST(${p(CLAIM_PARAMS)}::int, ${p(3)}::bigint)`);
  const after = v(`${p(CLAIM_PARAMS + 1)}::text`);
  const weights = v(`${p(CLAIM_PARAMS + 2)}::jsonb`);
  const nextScope = (bound: string) =>
    `(SELECT j.tenant_scope FROM ${s}.job j WHERE ${claimable} AND ${bound} ORDER BY j.tenant_scope LIMIT 1)`;
  return `${leaseCte(first)}, fair_on(scope, n) AS (
  SELECT ${nextScope(`j.tenant_scope > COALESCE(${after}, '')`)}, 1
  UNION ALL
  SELECT ${nextScope('j.tenant_scope > t.scope')}, t.n + 1 FROM fair_on t WHERE t.scope IS NOT NULL AND t.n < ${tenants}
), fair_round(scope, n) AS (
  SELECT ${nextScope(`j.tenant_scope <= ${after}`)}, (SELECT count(scope) FROM fair_on) + 1
   WHERE ${after} IS NOT NULL AND (SELECT count(scope) FROM fair_on) < ${tenants}
  UNION ALL
  SELECT ${nextScope(`j.tenant_scope > t.scope AND j.tenant_scope <= ${after}`)}, t.n + 1
    FROM fair_round t WHERE t.scope IS NOT NULL AND t.n < ${tenants}
), visited AS (
  SELECT scope, n FROM fair_on WHERE scope IS NOT NULL
  UNION ALL SELECT scope, n FROM fair_round WHERE scope IS NOT NULL
), weighed AS (
  SELECT v.scope, v.n, COALESCE((${weights} ->> v.scope)::int, 1) AS w FROM visited v
), offered AS (
  SELECT x.id, x.rank, v.n, v.w FROM weighed v CROSS JOIN LATERAL (
    SELECT j.id, ${claimRank('j')} AS rank FROM ${s}.job j
     WHERE ${claimable} AND j.tenant_scope = v.scope
     ORDER BY ${claimRank('j')}, j.id
     LIMIT GREATEST(1, (${limit} * v.w + (SELECT sum(w) FROM weighed) - 1) / (SELECT sum(w) FROM weighed))::bigint FOR UPDATE SKIP LOCKED) x
), rest AS (
  SELECT j.id, ${claimRank('j')} AS rank FROM ${s}.job j
   WHERE ${claimable} AND j.id <> ALL(ARRAY(SELECT id FROM offered))
   ORDER BY ${claimRank('j')}, j.id LIMIT GREATEST(0, ${limit} - (SELECT count(*) FROM offered)) FOR UPDATE SKIP LOCKED
), picked AS (
  SELECT id, row_number() OVER (ORDER BY round, rank, id) AS ord FROM (
    SELECT id, rank, (row_number() OVER (PARTITION BY n ORDER BY rank, id) + w - 1) / w AS round FROM offered
    UNION ALL SELECT id, rank, 9223372036854775807 FROM rest) u
   ORDER BY round, rank, id LIMIT ${limit}
), ${claimedCte(s)}`;
}

/**
 * The scope the drain's next fair claim starts after: the last one visited when the claim
 * visited as many as it might (more may wait beyond it), else none (it saw every scope).
 */
const fairAfter = (first: number) => `(SELECT CASE WHEN count(*) >= LEAST($${first + CLAIM_PARAMS}::int, $${first + 3}::bigint) THEN (array_agg(scope ORDER BY n DESC))[1] END
          FROM visited) AS fair_after`;

/** The fair answer's claimed jobs (claimedArray, traced), in the order the claim picked them. */
const FAIR_CLAIMED = `(SELECT COALESCE(json_agg(${claimedArray(true)} ORDER BY pick_ord), '[]')
          FROM (SELECT c.*, p.ord AS pick_ord FROM claimed c JOIN picked p ON p.id = c.id) claimed) AS claimed`;

/** A fair claim: the claimed jobs and where the next claim starts, as one row. */
export const jobClaimFairDue = (s: string): Statement => ({
  name: 'postbox_claim_fair_due',
  text: `WITH RECURSIVE ${fairClaimCtes(s, 2)}
SELECT ${FAIR_CLAIMED}, ${fairAfter(2)} WHERE ${GENERIC_PLAN_ONLY}`,
});

/** JobSettleThenClaim with a fair claim (drain.ts's, with fairClaimCtes). */
export const jobSettleThenClaimFairDue = (s: string): Statement => ({
  name: 'postbox_settle_then_claim_fair_due',
  text: `WITH RECURSIVE ${settleCtes(s, 2)}, ${fairClaimCtes(s, 2 + SETTLE_PARAMS)}
SELECT (SELECT COALESCE(json_agg(id), '[]') FROM settled) AS settled, ${RELEASED_COLUMN}, ${FAIR_CLAIMED}, ${fairAfter(2 + SETTLE_PARAMS)}
 WHERE ${GENERIC_PLAN_ONLY}`,
});
