/**
 * Read-only operator queries. Each runs in a read-only transaction bounded by
 * `statementTimeoutMs` (default 30 s), so a dashboard cannot hold a connection for long.
 * @module
 */
import { getCore } from '../core/core.js';
import type { TransactionalDb } from '../stores/pg/db.js';
import { PostboxError } from '../errors.js';
import type { CorePolicy, JobStatus } from '../types.js';
import type { AttemptView, DependencyView, JobFilter, JobView } from '../stores/contract.js';
import { checkOutboxName, outboxSchemaName } from '../name.js';
import { gradeHealth, readHealthFacts, type HealthGrade, type HorizonHolder, type TableHealth } from './health.js';
import { postgresOutboxStore, tenantFilter } from '../stores/pg/store.js';
import { attemptLedger } from '../stores/pg/sql/attempts.js';
import { checkLimit, decodeCursor } from '../stores/shared.js';
import { readOnly, type ReadOptions } from './read.js';

export type { AttemptView, DependencyView, JobFilter, JobView };

/** The store of the outbox a read names (checked by `readOnly` first). */
const storeOf = (opts: ReadOptions) => postgresOutboxStore(checkOutboxName(opts.outbox, 'outbox'));

/** One job by id, or `null` (also when it belongs to another tenant than `tenantKey`). */
export async function getJob(db: TransactionalDb, opts: { id: string; tenantKey?: string | null } & ReadOptions): Promise<JobView | null> {
  return readOnly(db, opts, (q) => storeOf(opts).getJob(q, opts.tenantKey === undefined ? { id: opts.id } : { id: opts.id, tenantKey: opts.tenantKey }));
}

/**
 * A job's dependencies (`dependsOn`): the parents it waits or waited for and the children that
 * wait or waited for it, each with its kind and status (a parent retention has deleted keeps its
 * id, with `kind` and `status` null). `null` when the job is not found (in `tenantKey`'s scope).
 */
export async function getJobDependencies(
  db: TransactionalDb, opts: { id: string; tenantKey?: string | null; limit?: number } & ReadOptions,
): Promise<{ parents: DependencyView[]; children: DependencyView[] } | null> {
  const limit = checkLimit(opts.limit ?? 1000);
  return readOnly(db, opts, async (q) => {
    const store = storeOf(opts);
    const job = await store.getJob(q, opts.tenantKey === undefined ? { id: opts.id } : { id: opts.id, tenantKey: opts.tenantKey });
    return job ? store.dependencies.dependencies(q, job.id, limit) : null;
  });
}

/**
 * A batch (`outbox.batch`) as it stands: its completion job (whose id is the batch's), how many
 * members it has, how many ended dead or cancelled as each was counted, and of the members still
 * stored, how many are in each status now (those retention deleted are `gone`). List its members
 * with {@link getJobDependencies} (they are the completion's parents). Also answers for any job
 * with parents (`dependsOn`). `null` when the job is not found (in `tenantKey`'s scope) or has no
 * parents.
 */
export async function getBatch(db: TransactionalDb, opts: { id: string; tenantKey?: string | null } & ReadOptions): Promise<BatchView | null> {
  return readOnly(db, opts, async (q) => {
    const store = storeOf(opts);
    const job = await store.getJob(q, opts.tenantKey === undefined ? { id: opts.id } : { id: opts.id, tenantKey: opts.tenantKey });
    const tally = job ? await store.dependencies.parentTally(q, job.id) : null;
    if (!job || !tally) return null;
    const stored = Object.values(tally.byStatus).reduce((n, c) => n + (c ?? 0), 0);
    return {
      id: job.id, completion: { kind: job.kind, status: job.status }, members: tally.total, ended: { dead: tally.dead, cancelled: tally.cancelled },
      byStatus: tally.byStatus, gone: Math.max(0, tally.total - stored),
    };
  });
}

/** A batch as {@link getBatch} reads it. */
export interface BatchView {
  /** The batch's id: its completion job's. */
  id: string;
  completion: { kind: string; status: JobStatus };
  /** How many members it has. */
  members: number;
  /** How many members ended dead or cancelled, as each was counted when it ended. */
  ended: { dead: number; cancelled: number };
  /** The members still stored, by status now. */
  byStatus: Partial<Record<JobStatus, number>>;
  /** Members retention has deleted (they had ended). */
  gone: number;
}

/** A page of jobs, oldest first by default; pass `nextCursor` back as `cursor` with the same filters. */
export async function listJobs(
  db: TransactionalDb,
  opts: JobFilter & ReadOptions & { limit?: number; order?: 'asc' | 'desc'; cursor?: string } = {},
): Promise<{ jobs: JobView[]; nextCursor: string | null }> {
  const limit = checkLimit(opts.limit ?? 50);
  if (opts.cursor) decodeCursor(opts.cursor);
  return readOnly(db, opts, (q) => storeOf(opts).listJobs(q, { ...opts, limit }));
}

/** Counts by status for the filter. */
export async function countJobs(db: TransactionalDb, opts: JobFilter & ReadOptions = {}): Promise<Record<JobStatus, number>> {
  return readOnly(db, opts, (q) => storeOf(opts).countJobs(q, opts));
}

/** Every job sharing a correlation id, oldest first. */
export async function findJobsByCorrelationId(db: TransactionalDb, opts: { correlationId: string; tenantKey?: string | null; limit?: number } & ReadOptions) {
  return (await listJobs(db, { ...opts, limit: opts.limit ?? 100 })).jobs;
}

/** One row of `countBacklog`: a kind in one lane. `processing` counts running jobs. */
export interface BacklogRow {
  kind: string;
  lane: string;
  pending: number;
  retrying: number;
  due: number;
  aged: number;
  /** Pending or retrying, due later than `now` (delayed jobs and retries waiting out a backoff). */
  scheduled: number;
  processing: number;
  stuck: number;
  /**
   * Pending and retrying jobs of this kind when `registeredKinds` is given and does not list it:
   * nothing that registers only those kinds will ever run them. 0 otherwise.
   */
  unregistered: number;
  /**
   * With `limits`, for a kind that has one: of its due jobs, how many its `concurrency`,
   * `rateLimit` or `tenantConcurrency` holds back right now (its running attempts, its rate
   * slots held, its tenants' running attempts).
   */
  throttled?: number;
}

/**
 * Backlog per kind and lane: pending and retrying jobs, how many are due now or overdue by
 * `agedMs`, and running jobs, of which `stuck` hold a lease past expiry. `tenantKey` narrows it
 * to one tenant (`null`: jobs without one). With `registeredKinds` (e.g. `outbox.kinds`), rows
 * of other kinds count their waiting jobs as `unregistered`. With `limits` (job definitions,
 * e.g. the outbox's), rows of kinds with a flow limit say how many due jobs it holds back.
 */
export async function countBacklog(
  db: TransactionalDb,
  opts: {
    now?: number; agedMs?: number; tenantKey?: string | null; registeredKinds?: readonly string[];
    limits?: readonly { kind: string; policy: Pick<CorePolicy, 'concurrency' | 'rateSlots' | 'tenantConcurrency'> }[];
  } & ReadOptions = {},
): Promise<BacklogRow[]> {
  const now = opts.now ?? Date.now();
  // Where each count is cut is the core's (docs/ABI.md, pb_backlog window); the SQL only counts.
  const cut = getCore().call<{ dueBefore: number; agedBefore: number; stuckBefore: number }>('backlog', { op: 'window', now, agedMs: opts.agedMs ?? null });
  return readOnly(db, opts, async (q, s) => {
    const params: unknown[] = [cut.dueBefore, cut.agedBefore, cut.stuckBefore];
    const { rows } = await q.query(
      `SELECT kind, lane,
              count(*) FILTER (WHERE status = 'pending')::int AS pending,
              count(*) FILTER (WHERE status = 'retrying')::int AS retrying,
              count(*) FILTER (WHERE status IN ('pending', 'retrying') AND due_at <= to_timestamp($1::bigint / 1000.0))::int AS due,
              count(*) FILTER (WHERE status IN ('pending', 'retrying') AND due_at <= to_timestamp($2::bigint / 1000.0))::int AS aged,
              count(*) FILTER (WHERE status IN ('pending', 'retrying') AND due_at > to_timestamp($1::bigint / 1000.0))::int AS scheduled,
              count(*) FILTER (WHERE status = 'running')::int AS processing,
              count(*) FILTER (WHERE status = 'running' AND lease_expires_at < to_timestamp($3::bigint / 1000.0))::int AS stuck
         FROM ${s}.job WHERE status IN ('pending', 'retrying', 'running') AND ${tenantFilter(opts.tenantKey, params)}
        GROUP BY kind, lane ORDER BY kind, lane`,
      params,
    );
    const registered = opts.registeredKinds ? new Set(opts.registeredKinds) : null;
    const out: BacklogRow[] = (rows as Omit<BacklogRow, 'unregistered'>[]).map((r) => ({
      ...r,
      unregistered: registered && !registered.has(r.kind) ? r.pending + r.retrying : 0,
    }));
    const limited = (opts.limits ?? []).filter((j) => j.policy.concurrency || j.policy.rateSlots || j.policy.tenantConcurrency);
    const shown = out.filter((r) => limited.some((j) => j.kind === r.kind));
    if (shown.length === 0) return out;
    // Rate slots held now (migration 0009); running attempts come from the counts above.
    const held = new Map<string, number>(
      (await q.query(`SELECT kind, count(*)::int AS n FROM ${s}.kind_slot WHERE pool = 'r' AND held_until > to_timestamp($1::bigint / 1000.0) GROUP BY kind`, [now])).rows
        .map((r: { kind: string; n: number }) => [r.kind, r.n]),
    );
    const policy = (kind: string) => limited.find((j) => j.kind === kind)!.policy;
    // Kinds limited per tenant: each tenant scope's due and live running jobs, for the core to fit.
    const perTenant = limited.filter((j) => j.policy.tenantConcurrency).map((j) => j.kind);
    const tenants = new Map<string, [number, number][]>();
    if (perTenant.length > 0) {
      const tp: unknown[] = [cut.dueBefore, cut.stuckBefore, perTenant];
      const { rows: scoped } = await q.query(
        `SELECT kind, lane,
                count(*) FILTER (WHERE status IN ('pending', 'retrying') AND due_at <= to_timestamp($1::bigint / 1000.0))::int AS due,
                count(*) FILTER (WHERE status = 'running' AND lease_expires_at >= to_timestamp($2::bigint / 1000.0))::int AS running
           FROM ${s}.job WHERE status IN ('pending', 'retrying', 'running') AND kind = ANY($3::text[]) AND ${tenantFilter(opts.tenantKey, tp)}
          GROUP BY kind, lane, tenant_scope`,
        tp,
      );
      for (const r of scoped as { kind: string; lane: string; due: number; running: number }[]) {
        const key = `${r.kind}\0${r.lane}`;
        if (!tenants.has(key)) tenants.set(key, []);
        tenants.get(key)!.push([r.due, r.running]);
      }
    }
    const { throttled } = getCore().call<{ throttled: number[] }>('backlog', {
      op: 'throttled',
      rows: shown.map((r) => ({
        due: r.due, running: r.processing - r.stuck, concurrency: policy(r.kind).concurrency ?? 0, rateSlots: policy(r.kind).rateSlots ?? 0, rateHeld: held.get(r.kind) ?? 0,
        ...(policy(r.kind).tenantConcurrency ? { tenantConcurrency: policy(r.kind).tenantConcurrency, tenants: tenants.get(`${r.kind}\0${r.lane}`) ?? [] } : {}),
      })),
    });
    shown.forEach((r, i) => (r.throttled = throttled[i]!));
    return out;
  });
}

/** One row of `aggregateAttemptOutcomes`: attempts of one kind that ended with one outcome. */
export interface AttemptOutcomeRow {
  kind: string;
  /**
   * `ok`, `retry`, `fail`, `cancel`, `timeout`, `crash`, `claim_late`, `released` (claimed but
   * never started: the drain stopped first), `hook_failed`, `invalid_payload` or `defer`.
   */
  outcome: string;
  count: number;
  /** Duration percentiles (ms, from start to settle) of those attempts. */
  p50Ms: number;
  p95Ms: number;
  p99Ms: number;
  maxMs: number;
}

/**
 * Attempts that finished in `[since, until)` (default until now), counted per kind and outcome,
 * with duration percentiles: the numbers behind throughput, failure-rate and latency panels.
 * `kind` and `tenantKey` narrow it.
 */
export async function aggregateAttemptOutcomes(
  db: TransactionalDb,
  opts: { since: Date; until?: Date; kind?: string; tenantKey?: string | null } & ReadOptions,
): Promise<AttemptOutcomeRow[]> {
  if (!(opts?.since instanceof Date) || Number.isNaN(opts.since.getTime())) throw new PostboxError('invalid_input', 'aggregateAttemptOutcomes: since must be a valid Date');
  if (opts.until !== undefined && (!(opts.until instanceof Date) || Number.isNaN(opts.until.getTime()))) {
    throw new PostboxError('invalid_input', 'aggregateAttemptOutcomes: until must be a valid Date');
  }
  return readOnly(db, opts, async (q, s) => {
    const params: unknown[] = [opts.since.toISOString(), (opts.until ?? new Date()).toISOString()];
    let filter = '';
    if (opts.kind !== undefined) {
      params.push(opts.kind);
      filter += ` AND a.kind = $${params.length}`;
    }
    if (opts.tenantKey !== undefined) {
      filter += ` AND a.job_id IN (SELECT id FROM ${s}.job WHERE ${tenantFilter(opts.tenantKey, params)})`;
    }
    const { rows } = await q.query(
      `SELECT a.kind, a.outcome, count(*)::int AS count,
              percentile_cont(ARRAY[0.5, 0.95, 0.99]) WITHIN GROUP (ORDER BY d.ms) AS pct, max(d.ms) AS max_ms
         FROM ${attemptLedger(s)} a
         CROSS JOIN LATERAL (SELECT extract(epoch FROM a.finished_at - a.started_at) * 1000 AS ms) d
        WHERE a.finished_at >= $1::timestamptz AND a.finished_at < $2::timestamptz${filter}
        GROUP BY a.kind, a.outcome ORDER BY a.kind, a.outcome`,
      params,
    );
    return rows.map((r: any) => ({
      kind: r.kind, outcome: r.outcome, count: r.count,
      p50Ms: Math.round(Number(r.pct[0])), p95Ms: Math.round(Number(r.pct[1])), p99Ms: Math.round(Number(r.pct[2])), maxMs: Math.round(Number(r.max_ms)),
    }));
  });
}

/** Every attempt of one job, in order (none for an unknown id). */
export async function listAttempts(db: TransactionalDb, opts: { jobId: string } & ReadOptions): Promise<AttemptView[]> {
  if (typeof opts?.jobId !== 'string' || !UUID.test(opts.jobId)) throw new PostboxError('invalid_input', 'listAttempts: jobId must be a job id (a UUID)');
  return readOnly(db, opts, (q) => storeOf(opts).listAttempts(q, { jobId: opts.jobId }));
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Thresholds per metric; a value at or above `warn` / `error` grades it. */
export type BacklogThresholds = Partial<Record<'due' | 'aged' | 'stuck', { warn: number; error: number }>>;

/**
 * Grades backlog counts (e.g. summed from `countBacklog`) against thresholds, as the core
 * decides: `ok`, `warn` or `error`, with the metrics that caused it. Metrics without a
 * threshold use the core's defaults (docs/ABI.md, `pb_backlog`).
 */
export function evaluateBacklog(counts: Record<'due' | 'aged' | 'stuck', number>, thresholds: BacklogThresholds = {}) {
  return getCore().call<{ severity: 'ok' | 'warn' | 'error'; reasons: { metric: string; severity: 'warn' | 'error'; value: number }[] }>('backlog', { counts, thresholds });
}

export type { HealthGrade, HorizonHolder, TableHealth } from './health.js';

/** The outbox's health: its tables and what holds back their cleanup, each graded by the core. */
export interface OutboxHealth {
  /** The worst grade below. */
  severity: HealthGrade;
  /**
   * Every table of the outbox (`job`, `attempt`, `schedule_run`, `webhook_endpoint`, in its own
   * schema), with the core's grades: `deadTuples` (at least 1,000 dead tuples and 20% of live
   * ones warns, as many as live is an error) and `autovacuum` (warns while dead tuples pile up
   * and the table has not been autovacuumed for an hour, or ever).
   */
  tables: (TableHealth & { grades: { deadTuples: HealthGrade; autovacuum: 'ok' | 'warn' } })[];
  /**
   * What holds back this database's xmin horizon: the oldest session, prepared transaction and
   * replication slot that hold one, the furthest behind first, each graded: held 5 minutes or
   * 1,000,000 transactions warns, 1 hour or 100,000,000 is an error. Empty when nothing does.
   */
  horizon: (HorizonHolder & { grade: HealthGrade })[];
}

/**
 * Reads PostgreSQL's statistics of every outbox table and what holds back their cleanup, in one
 * statement, and has the core grade them (docs/ABI.md, pb_backlog `health`). Sessions of other
 * databases on the server do not count: only this database's sessions, prepared transactions
 * and logical slots, and physical slots and standbys' WAL senders (which hold back every
 * database). The statistics are the whole table's, whatever tenant asks.
 */
export async function checkHealth(db: TransactionalDb, opts: ReadOptions = {}): Promise<OutboxHealth> {
  const schema = outboxSchemaName(checkOutboxName(opts.outbox, 'outbox'));
  const facts = await readOnly(db, opts, (q) => readHealthFacts(q, schema));
  const grades = gradeHealth(getCore(), facts);
  return {
    severity: grades.severity,
    tables: facts.tables.map((t, i) => ({ ...t, grades: grades.tables[i]! })),
    horizon: facts.horizon.map((h, i) => ({ ...h, grade: grades.horizon[i]! })),
  };
}
