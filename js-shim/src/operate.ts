/**
 * Operator actions over every job a filter matches, for dashboards and command lines. The
 * filter only selects candidates: whether each job may be cancelled, replayed or retried now
 * is the core's decision, taken per job by the outbox's `cancelMany` / `replayMany` /
 * `retryNowMany`, one statement per page.
 * @module
 */
import { getCore } from './core/core.js';
import type { TransactionalDb } from './stores/pg/db.js';
import { PostboxError } from './errors.js';
import { listJobs, type JobFilter } from './inspect/index.js';
import type { OperateResult, Outbox, TenantScope } from './outbox.js';
import type { JobStatus } from './types.js';

/** An operator action by filter. */
export type OperatorAction = 'cancel' | 'replay' | 'retryNow';

/**
 * The operator actions a job of `status` accepts, in the order cancel, replay, retryNow: the
 * core's own table (pb_operate `actions`), the same one its per-job decision applies, so a
 * dashboard or command line offers exactly what would not be refused.
 */
export function allowedActions(status: JobStatus): OperatorAction[] {
  return getCore().call<{ actions: OperatorAction[] }>('operate', { op: 'actions', job: { status } }).actions;
}

/** Options of `operateMatching`. */
export interface OperateMatchingOptions {
  /** Only the tenant's jobs (`null`: jobs without a tenant); the filter's `tenantKey` cannot widen it. */
  scope?: TenantScope;
  /** Lists what would be acted on and changes nothing. */
  dryRun?: boolean;
  /** Cancel reason, stored as the job's last error code. Default `cancelled`. */
  reason?: string;
  /** Jobs per page (one listing query and one action statement each). Default 500, at most 1000. */
  pageSize?: number;
  /** Stops after this many matched jobs (default: no limit); `truncated` says it did. */
  max?: number;
  /** Statement timeout of the listing queries. */
  statementTimeoutMs?: number;
}

/** What `operateMatching` did (or, in a dry run, would act on). */
export interface OperateMatchingReport {
  action: OperatorAction;
  dryRun: boolean;
  /** Jobs the filter matched. */
  matched: number;
  /** Jobs the action changed (0 in a dry run). */
  changed: number;
  /** Jobs whose status the core refused the action for. */
  invalidState: number;
  /** Jobs gone (erased) between listing and acting. */
  notFound: number;
  /** Per-job results in listing order (in a dry run: the matched ids, `status: 'ok'` unknown, so omitted). */
  results: OperateResult[];
  /** Matched ids (also in a dry run). */
  ids: string[];
  /** `max` stopped the run before the filter was exhausted. */
  truncated: boolean;
}

/**
 * Applies `action` to every job `filter` matches, oldest first, page by page.
 * Read queries go through the read-only, time-bounded inspection path on `db`; the action
 * goes through `outbox`, which locks each page's jobs and asks the core per job.
 */
export async function operateMatching(
  outbox: Outbox<any>,
  db: TransactionalDb,
  action: OperatorAction,
  filter: JobFilter,
  opts: OperateMatchingOptions = {},
): Promise<OperateMatchingReport> {
  if (action !== 'cancel' && action !== 'replay' && action !== 'retryNow') {
    throw new PostboxError('invalid_input', `unknown operator action ${JSON.stringify(action)}: expected cancel, replay or retryNow`);
  }
  const pageSize = opts.pageSize ?? 500;
  if (!Number.isInteger(pageSize) || pageSize < 1 || pageSize > 1000) throw new PostboxError('invalid_input', 'pageSize must be an integer in 1..1000');
  const max = opts.max ?? Infinity;
  if (max !== Infinity && (!Number.isInteger(max) || max < 1)) throw new PostboxError('invalid_input', 'max must be a positive integer');
  const scoped = opts.scope !== undefined && 'tenantKey' in opts.scope;
  if (scoped && filter.tenantKey !== undefined && filter.tenantKey !== opts.scope!.tenantKey) {
    throw new PostboxError('wrong_tenant', 'the filter names another tenant than the operator scope');
  }
  const where: JobFilter = scoped ? { ...filter, tenantKey: opts.scope!.tenantKey ?? null } : filter;
  const report: OperateMatchingReport = {
    action, dryRun: opts.dryRun === true, matched: 0, changed: 0, invalidState: 0, notFound: 0, results: [], ids: [], truncated: false,
  };
  // The jobs are listed in the outbox's own schema: the one its actions write to.
  const named = outbox.name === null ? {} : { outbox: outbox.name };
  let cursor: string | undefined;
  for (;;) {
    const room = Math.min(pageSize, max - report.matched);
    const page = await listJobs(db, { ...where, ...named, limit: room, ...(cursor ? { cursor } : {}), ...(opts.statementTimeoutMs ? { statementTimeoutMs: opts.statementTimeoutMs } : {}) });
    const ids = page.jobs.map((j) => j.id);
    report.matched += ids.length;
    report.ids.push(...ids);
    if (!report.dryRun && ids.length > 0) {
      const results =
        action === 'cancel' ? await outbox.cancelMany(ids, opts.reason ?? 'cancelled', opts.scope)
        : action === 'replay' ? await outbox.replayMany(ids, opts.scope)
        : await outbox.retryNowMany(ids, opts.scope);
      for (const r of results) {
        if (r.status === 'ok') report.changed++;
        else if (r.status === 'invalid_state') report.invalidState++;
        else report.notFound++;
      }
      report.results.push(...results);
    }
    if (!page.nextCursor) return report;
    if (report.matched >= max) {
      report.truncated = true;
      return report;
    }
    cursor = page.nextCursor;
  }
}
