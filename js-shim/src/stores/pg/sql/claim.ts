import type { ClaimedJob } from '../../contract.js';
import { GENERIC_PLAN_ONLY, type Statement } from './statement.js';
import { ms, ts } from './time.js';

/**
 * What a claimed or recovered job carries back to the shim, in {@link claimedFromArray}'s order:
 * lease_expires_ms, then how the job's parents ended (NULLs for a job without parents).
 */
const claimedValues = (lease: string) => `id, kind, lane, payload, tenant_key, correlation_id, metadata, attempts, attempt_seq,
  crashes, streak_code, streak, max_attempts, last_error_code, last_error_message, ${lease}, parents_total, parents_dead, parents_cancelled`;
const CLAIMED_VALUES = claimedValues(ms('lease_expires_at'));

/**
 * What a traced claim adds (`ClaimInput.traced`: the outbox has telemetry): the job's trace
 * context and its enqueue time. Only then, since the two values cost every claimed row a
 * measurable share of the drain's time (bench/probe-drain.ts, c=32: about 5 %).
 */
const TRACE_VALUES = `trace_context, ${ms('created_at')}`;

/** The claimed values as columns of a result row (the traced ones too: recovery and inspection are not the drain's hot path). */
const UNTRACED_COLUMNS = claimedValues(`${ms('lease_expires_at')} AS lease_expires_ms`);
const CLAIMED_COLUMNS = `${UNTRACED_COLUMNS}, trace_context, ${ms('created_at')} AS created_ms`;

/** How jobs are picked: the due ones in order (a drain), or only nudged ones. */
export type Pick = 'due' | 'targets';

/** A value read through a scalar subquery, so that no plan sees it: custom and generic plans then cost the same (see claimCtes). */
export const hidden = (sql: string) => `(SELECT ${sql})`;

/** In the drain's pick, every value is {@link hidden}; the nudged pick keeps its values visible. */
export const hide = (pick: Pick) => (pick === 'due' ? hidden : (sql: string) => sql);

/**
 * The order claims take due jobs in: due time less the priority's boost (migration 0010), as
 * the claim index has it, so the index both orders the claim and bounds its scan.
 */
export const claimRank = (j: string) => `((${j}.due_at AT TIME ZONE 'UTC') - ${j}.boost_ms * interval '1 millisecond')`;

/** The claimed jobs in claim order, as a statement hands them back: the drain starts them in it. */
export const CLAIM_ORDER = `${claimRank('claimed')}, claimed.id`;

/** Whether job `j` is one a claim of these parameters may take (see claimCtes for `first`). */
export function claimablePredicate(first: number, pick: Pick): string {
  const p = (i: number) => `$${first + i}`;
  const v = hide(pick);
  // A due job's rank is at or before now (a boost is never negative): said as well, so the scan
  // of the claim index stops at now, not at the end of the delayed jobs.
  return `j.status IN ('pending', 'retrying') AND j.due_at <= ${v(ts('$1'))} AND ${claimRank('j')} <= ${v(`${ts('$1')} AT TIME ZONE 'UTC'`)}
     AND j.lane = ${v(`${p(0)}::text`)} AND j.kind = ANY(${v(`${p(1)}::text[]`)}::text[])
     AND (j.version_ts IS NULL OR j.version_ts <= ${v(`COALESCE(${p(4)}::bigint, 9007199254740991)`)})`;
}

/**
 * The claim part of a statement: picks rows and leases each for its kind's lease; the attempt
 * is the job row's (status, attempt_seq, started_at, lease) until it ends (migration 0006). `$1` is now; from `first`: lane, kinds[], leaseMs[] (parallel to kinds), limit,
 * version cutoff (NULL: no deploy versions), and for `targets` ids[] and kinds[] (parallel).
 * `s` is the schema as written in SQL (see name.ts). Neither variant has optional clauses, so the server can keep one generic plan for each.
 */
export function claimCtes(s: string, first: number, pick: Pick): string {
  const p = (i: number) => `$${first + i}`;
  // In the drain's pick every value is read through a scalar subquery, so that no plan can see
  // it: a custom plan that knows the instant, the lane, the kinds and the small limit looks far
  // cheaper than the generic one once a backlog of some thousands of jobs waits (delayed or
  // backing off), so the server planned the statement afresh on every call (~400 µs, more than
  // its execution at concurrency 1). Hidden, custom and generic plans cost the same and the
  // server keeps the generic one, which uses the same index (bench/probe-drain.ts --statements
  // shows plans per call). The nudged pick keeps its values visible: its ids are its plan.
  const v = hide(pick);
  const claimable = claimablePredicate(first, pick);
  const picked =
    pick === 'due'
      ? `SELECT j.id FROM ${s}.job j
   WHERE ${claimable}
   ORDER BY ${claimRank('j')}, j.id
   LIMIT ${v(`${p(3)}::bigint`)}
   FOR UPDATE SKIP LOCKED`
      : `SELECT j.id FROM ${s}.job j
    JOIN unnest(${p(5)}::uuid[], ${p(6)}::text[]) AS t(id, kind) ON j.id = t.id AND j.kind = t.kind
   WHERE j.id = ANY(${p(5)}::uuid[]) AND ${claimable}
   LIMIT ${p(3)}
   FOR UPDATE OF j SKIP LOCKED`;
  return `${leaseCte(first, pick)}, picked AS (
  ${picked}
), ${claimedCte(s, pick)}`;
}

/** Each claimed kind's lease (parameters at `first` + 1 and + 2, as claimCtes has them; hidden in the drain's pick). */
export const leaseCte = (first: number, pick: Pick = 'due') => {
  const v = hide(pick);
  return `lease AS (
  SELECT kind, lease_ms FROM unnest(${v(`$${first + 1}::text[]`)}, ${v(`$${first + 2}::bigint[]`)}) AS l(kind, lease_ms)
)`;
};

/**
 * Leases the `picked` jobs: each becomes running under its next attempt. Rows are reached by
 * id through the primary key (`id = ANY(array)`): the generic plan a named statement settles
 * on cannot size a join, and joined it hashed a scan of the whole table, so every claim cost
 * time in proportion to the jobs kept (finished ones included).
 */
export const claimedCte = (s: string, pick: Pick = 'due') => {
  const now = ts(hide(pick)('$1::bigint'));
  return `claimed AS (
  UPDATE ${s}.job j
     SET status = 'running', attempt_seq = j.attempt_seq + 1, updated_at = ${now}, started_at = ${now},
         lease_expires_at = ${now} + l.lease_ms * interval '1 millisecond'
    FROM lease l
   WHERE j.id = ANY(ARRAY(SELECT id FROM picked)) AND l.kind = j.kind
  RETURNING j.*
)`;
};

export { CLAIMED_COLUMNS, traceName };

/**
 * The claimed columns as one JSON array per job, for statements that return the claim inside
 * JSON (drain.ts): without a key per field the answer is about a third the size, which
 * keeps a claim's answer within a segment or two. Same order as {@link claimedFromArray}.
 */
export const claimedArray = (traced: boolean) => `json_build_array(${CLAIMED_VALUES}${traced ? `, ${TRACE_VALUES}` : ''})`;

/** One job of {@link claimedArray} as the row the claim statements return. */
export function claimedFromArray(a: readonly unknown[]): ClaimedJob {
  const job: ClaimedJob = {
    id: a[0] as string, kind: a[1] as string, lane: a[2] as string, payload: a[3], tenant_key: a[4] as string | null,
    correlation_id: a[5] as string | null, metadata: a[6] as Record<string, unknown> | null, attempts: a[7] as number,
    attempt_seq: a[8] as number, crashes: a[9] as number, streak_code: a[10] as string | null, streak: a[11] as number,
    max_attempts: a[12] as number | null, last_error_code: a[13] as string | null, last_error_message: a[14] as string | null,
    lease_expires_ms: a[15] as number, parents_total: a[16] as number | null, parents_dead: a[17] as number | null, parents_cancelled: a[18] as number | null,
  };
  if (a.length > 19) {
    job.trace_context = a[19] as string | null;
    job.created_ms = a[20] as number;
  }
  return job;
}

/** A claim statement's name, and its traced variant's. */
const traceName = (name: string, traced: boolean) => (traced ? `${name}_traced` : name);

/** JobClaimDue: up to limit due jobs, oldest due first. $1 now, $2 lane … $6 cutoff. */
export const jobClaimDue = (s: string, traced = false): Statement => ({
  name: traceName('postbox_claim_due', traced),
  text: `WITH ${claimCtes(s, 2, 'due')}
SELECT ${traced ? CLAIMED_COLUMNS : UNTRACED_COLUMNS} FROM claimed WHERE ${GENERIC_PLAN_ONLY} ORDER BY ${CLAIM_ORDER}`,
});

/** JobClaimTargets: the claimable ones among nudged jobs. $1 now, $2 lane … $8 target kinds. */
export const jobClaimTargets = (s: string, traced = false): Statement => ({
  name: traceName('postbox_claim_targets', traced),
  text: `WITH ${claimCtes(s, 2, 'targets')}
SELECT ${traced ? CLAIMED_COLUMNS : UNTRACED_COLUMNS} FROM claimed ORDER BY ${CLAIM_ORDER}`,
});

/**
 * JobListExpiredLeases: running jobs of registered kinds whose lease ended before $1.
 * No lock is needed: the settle that follows is fenced by attempt_seq and status.
 */
export const jobListExpiredLeases = (s: string): Statement => ({
  name: 'postbox_list_expired_leases',
  text: `
SELECT ${CLAIMED_COLUMNS} FROM ${s}.job
 WHERE status = 'running' AND lease_expires_at < ${ts('$1')} AND kind = ANY($2::text[])
 ORDER BY lease_expires_at
 LIMIT $3`,
});

/**
 * JobListExpiredUnregistered: running jobs of kinds this deploy does not register ($2) whose
 * lease ended before $1. No job definition here will ever settle them but the sweep's.
 */
export const jobListExpiredUnregistered = (s: string): Statement => ({
  name: 'postbox_list_expired_unregistered',
  text: `
SELECT ${CLAIMED_COLUMNS} FROM ${s}.job
 WHERE status = 'running' AND lease_expires_at < ${ts('$1')} AND kind <> ALL($2::text[])
 ORDER BY lease_expires_at
 LIMIT $3`,
});

/**
 * JobNextDue: when the earliest job a claim of this lane could take falls due (epoch ms, NULL
 * when none waits). The claim's own predicate without its `due_at <= now`. $1 lane, $2
 * kinds[], $3 version cutoff (NULL: no deploy versions). The test kit skips its clock there.
 */
export const jobNextDue = (s: string): Statement => ({
  name: 'postbox_next_due',
  text: `
SELECT ${ms('min(due_at)')} AS due FROM ${s}.job
 WHERE status IN ('pending', 'retrying') AND lane = $1 AND kind = ANY($2::text[])
   AND (version_ts IS NULL OR version_ts <= COALESCE($3::bigint, 9007199254740991))`,
});
