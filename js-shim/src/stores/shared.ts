/**
 * Pieces every store shares: counts, page sizes, cursors and attempt views look the same
 * whatever holds the jobs.
 * @module
 */
import { PostboxError } from '../errors.js';
import type { AppendRow, AttemptView, JobStatus } from './contract.js';

/** An append's row for an item written under its own id: nothing to compare. */
export const createdRow = (id: string, kind: string): AppendRow => ({
  id, kind, created: true, samePayload: true, sameMaxAttempts: true, sameMetadata: true, sameCorrelationId: true, samePriority: true, sameOnParentFailure: true,
});

/** Every status at zero: counts report all seven. */
export const emptyCounts = (): Record<JobStatus, number> => ({ pending: 0, running: 0, retrying: 0, succeeded: 0, dead: 0, cancelled: 0, waiting: 0 });

/** A page size must be an integer in 1..1000. */
export function checkLimit(limit: unknown): number {
  if (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 1 || limit > 1000) throw new PostboxError('invalid_input', 'limit must be an integer in 1..1000');
  return limit;
}

/** A cursor names the last job of a page: its creation time (epoch ms) and id. */
export const encodeCursor = (createdMs: number, id: string): string => `${createdMs}.${id}`;

export function decodeCursor(cursor: string): [number, string] {
  const match = /^(\d+)\.([0-9a-f-]{36})$/i.exec(cursor);
  if (!match) throw new PostboxError('invalid_input', 'cursor is malformed: pass back nextCursor as it was returned');
  return [Number(match[1]), match[2]!.toLowerCase()];
}

/** An attempt record as `listAttempts` returns it. */
export function attemptView(seq: number, outcome: string | null, code: string | null, message: string | null, startedAt: number, finishedAt: number | null): AttemptView {
  return {
    attempt: seq,
    outcome,
    code,
    ...(message === null ? {} : { message }),
    startedAt: new Date(startedAt),
    finishedAt: finishedAt === null ? null : new Date(finishedAt),
    durationMs: finishedAt === null ? null : finishedAt - startedAt,
  };
}

/** A job's tenant scope, as the job tables' `tenant_scope` column has it: 'n' without a tenant, 't:<key>' otherwise. */
export const tenantScope = (tenantKey: string | null): string => (tenantKey === null ? 'n' : `t:${tenantKey}`);

/**
 * The order a fair claim hands its jobs over in (sql/fair.ts, `ClaimFairShare`): round by
 * round over the visited scopes (each scope's first job by `rank`, then each one's second, …),
 * then the jobs that filled the rest, each group by rank and id. `visited` is in visiting order.
 */
export function fairOrder<T>(
  jobs: readonly T[], visited: readonly string[], scopeOf: (job: T) => string, rankOf: (job: T) => number, idOf: (job: T) => string,
  weights?: Readonly<Record<string, number>> | null,
): T[] {
  const seen = new Set(visited);
  // A scope of weight w offers w jobs a round (fair_share.h, fair_round); the rest fill last.
  return byRounds(jobs, (job) => (seen.has(scopeOf(job)) ? scopeOf(job) : null), (job) => weightOf(weights, scopeOf(job)), rankOf, idOf);
}

/**
 * The order a fair claim of a limited lane hands its jobs over in (sql/limits.ts with fair share):
 * round by round, where a limited kind's round is its job's place among the kind's jobs of the
 * scope and the other kinds' is as {@link fairOrder} has it over all of them (weights
 * included); each round by rank and id.
 */
export function limitedFairOrder<T>(
  jobs: readonly T[], limited: ReadonlySet<string>, kindOf: (job: T) => string, scopeOf: (job: T) => string,
  rankOf: (job: T) => number, idOf: (job: T) => string, weights?: Readonly<Record<string, number>> | null,
): T[] {
  const limitedOf = (job: T) => limited.has(kindOf(job));
  return byRounds(jobs, (job) => `${limitedOf(job) ? kindOf(job) : ''}\0${scopeOf(job)}`, (job) => (limitedOf(job) ? 1 : weightOf(weights, scopeOf(job))), rankOf, idOf);
}

/**
 * Jobs round by round: a job's round is its place by rank among the jobs of its group (`groupOf`;
 * null: none, the last round) divided by its weight, rounded up; each round by rank and id.
 */
function byRounds<T>(
  jobs: readonly T[], groupOf: (job: T) => string | null, weightOfJob: (job: T) => number, rankOf: (job: T) => number, idOf: (job: T) => string,
): T[] {
  const byRank = [...jobs].sort((a, b) => rankOf(a) - rankOf(b) || (idOf(a) < idOf(b) ? -1 : idOf(a) > idOf(b) ? 1 : 0));
  const taken = new Map<string, number>();
  return byRank
    .map((job, i) => {
      const group = groupOf(job);
      if (group === null) return { job, i, round: Number.MAX_SAFE_INTEGER };
      taken.set(group, (taken.get(group) ?? 0) + 1);
      return { job, i, round: Math.ceil(taken.get(group)! / weightOfJob(job)) };
    })
    .sort((a, b) => a.round - b.round || a.i - b.i)
    .map((x) => x.job);
}

/**
 * A fair claim's choice among due jobs already in claim order (`ClaimFairShare`): the scopes it
 * visits (after `after`, wrapping round, at most min(tenants, limit)), each one's share of the
 * limit, the rest filled in claim order; and where the next claim starts.
 */
export function fairPick<T>(due: readonly T[], scopeOf: (job: T) => string, limit: number, fair: { tenants: number; after: string | null; weights?: Readonly<Record<string, number>> | null }):
  { picked: T[]; visited: string[]; fairAfter: string | null } {
  const most = Math.max(0, Math.min(fair.tenants, limit));
  const scopes = [...new Set(due.map(scopeOf))].sort();
  const after = fair.after;
  const visited = (after === null ? scopes : [...scopes.filter((s) => s > after), ...scopes.filter((s) => s <= after)]).slice(0, most);
  // Each visited scope's share, in proportion to its weight (fair_share.h, fair_share_of).
  const total = visited.reduce((n, s) => n + weightOf(fair.weights, s), 0);
  const share = new Map(visited.map((s) => [s, Math.max(1, Math.ceil((limit * weightOf(fair.weights, s)) / total))]));
  const offered = new Set<T>();
  for (const job of due) {
    const left = share.get(scopeOf(job));
    if (left === undefined || left === 0) continue;
    share.set(scopeOf(job), left - 1);
    offered.add(job);
  }
  const rest = due.filter((job) => !offered.has(job)).slice(0, Math.max(0, limit - offered.size));
  return { picked: [...offered, ...rest], visited, fairAfter: visited.length > 0 && visited.length >= most ? visited[visited.length - 1]! : null };
}

/** A tenant scope's fair-share weight: as named, else 1. */
const weightOf = (weights: Readonly<Record<string, number>> | null | undefined, scope: string): number => weights?.[scope] ?? 1;
