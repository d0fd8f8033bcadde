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
  return `${leaseCte(first)}, ${fairPickCtes(s, {
    claimable: claimablePredicate(first, 'due'),
    limit: v(`${p(3)}::bigint`),
    tenants: v(`LEAST(${p(CLAIM_PARAMS)}::int, ${p(3)}::bigint)`),
    after: v(`${p(CLAIM_PARAMS + 1)}::text`),
    weights: v(`${p(CLAIM_PARAMS + 2)}::jsonb`),
  })}, picked AS (
  SELECT id, row_number() OVER (ORDER BY round, rank, id) AS ord FROM fair_pick
), ${claimedCte(s)}`;
}

/** What {@link fairPickCtes} picks among: SQL expressions, read as they stand. */
export interface FairPickSql {
  /** The predicate on `j` of the jobs it may take. */
  readonly claimable: string;
  /** How many jobs it takes at most. */
  readonly limit: string;
  /** How many tenant scopes it visits at most. */
  readonly tenants: string;
  /** The scope the previous claim visited last (NULL: from the first). */
  readonly after: string;
  /** The scopes' weights (jsonb {scope: weight}; NULL: all weigh 1). */
  readonly weights: string;
  /** A prefix for its CTEs' names, so that two picks fit in one statement. */
  readonly prefix?: string;
}

/**
 * A fair pick (fair_share.h), as CTEs: `${prefix}visited` (scope, n) the scopes visited, and
 * `${prefix}fair_pick` (id, rank, round) the jobs picked, each with its round (the rest filled in
 * claim order have the last). Rows are locked as they are picked (SKIP LOCKED).
 */
export function fairPickCtes(s: string, q: FairPickSql): string {
  const x = q.prefix ?? '';
  const nextScope = (bound: string) =>
    `(SELECT j.tenant_scope FROM ${s}.job j WHERE ${q.claimable} AND ${bound} ORDER BY j.tenant_scope LIMIT 1)`;
  return `${x}fair_on(scope, n) AS (
  SELECT ${nextScope(`j.tenant_scope > COALESCE(${q.after}, '')`)}, 1
  UNION ALL
  SELECT ${nextScope('j.tenant_scope > t.scope')}, t.n + 1 FROM ${x}fair_on t WHERE t.scope IS NOT NULL AND t.n < ${q.tenants}
), ${x}fair_round(scope, n) AS (
  SELECT ${nextScope(`j.tenant_scope <= ${q.after}`)}, (SELECT count(scope) FROM ${x}fair_on) + 1
   WHERE ${q.after} IS NOT NULL AND (SELECT count(scope) FROM ${x}fair_on) < ${q.tenants}
  UNION ALL
  SELECT ${nextScope(`j.tenant_scope > t.scope AND j.tenant_scope <= ${q.after}`)}, t.n + 1
    FROM ${x}fair_round t WHERE t.scope IS NOT NULL AND t.n < ${q.tenants}
), ${x}visited AS (
  SELECT scope, n FROM ${x}fair_on WHERE scope IS NOT NULL
  UNION ALL SELECT scope, n FROM ${x}fair_round WHERE scope IS NOT NULL
), ${x}weighed AS (
  SELECT v.scope, v.n, COALESCE((${q.weights} ->> v.scope)::int, 1) AS w FROM ${x}visited v
), ${x}offered AS (
  SELECT x.id, x.rank, v.n, v.w FROM ${x}weighed v CROSS JOIN LATERAL (
    SELECT j.id, ${claimRank('j')} AS rank FROM ${s}.job j
     WHERE ${q.claimable} AND j.tenant_scope = v.scope
     ORDER BY ${claimRank('j')}, j.id
     LIMIT GREATEST(1, (${q.limit} * v.w + (SELECT sum(w) FROM ${x}weighed) - 1) / (SELECT sum(w) FROM ${x}weighed))::bigint FOR UPDATE SKIP LOCKED) x
), ${x}rest AS (
  SELECT j.id, ${claimRank('j')} AS rank FROM ${s}.job j
   WHERE ${q.claimable} AND j.id <> ALL(ARRAY(SELECT id FROM ${x}offered))
   ORDER BY ${claimRank('j')}, j.id LIMIT GREATEST(0, ${q.limit} - (SELECT count(*) FROM ${x}offered)) FOR UPDATE SKIP LOCKED
), ${x}fair_pick AS (
  SELECT id, rank, round FROM (
    SELECT id, rank, (row_number() OVER (PARTITION BY n ORDER BY rank, id) + w - 1) / w AS round FROM ${x}offered
    UNION ALL SELECT id, rank, 9223372036854775807 FROM ${x}rest) u
   ORDER BY round, rank, id LIMIT ${q.limit}
)`;
}

/**
 * Where the drain's next fair claim starts (as `column`): the last scope `visited` names when
 * the claim visited as many as it might (`most`; more may wait beyond it), else none.
 */
export const fairAfterColumn = (visited: string, most: string, column = 'fair_after') => `(SELECT CASE WHEN count(*) >= ${most} THEN (array_agg(scope ORDER BY n DESC))[1] END
          FROM ${visited}) AS ${column}`;

/** The scope the drain's next fair claim starts after (fairAfterColumn). */
const fairAfter = (first: number) => fairAfterColumn('visited', `LEAST($${first + CLAIM_PARAMS}::int, $${first + 3}::bigint)`);

/** The fair answer's claimed jobs (claimedArray, traced), in the order the claim picked them. */
export const FAIR_CLAIMED = `(SELECT COALESCE(json_agg(${claimedArray(true)} ORDER BY pick_ord), '[]')
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
