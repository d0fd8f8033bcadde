/**
 * The dashboard's own reads beyond `postbox/inspect`: attempt rates over time, dead-letter
 * growth and the job table's health. All run on the inspection path (read-only transaction,
 * statement timeout), in one transaction per page.
 * @module
 */
import type { Core } from '../core/core.js';
import type { Queryable } from '../types.js';
import { ts } from '../queries/time.js';
import { tenantFilter } from '../inspect/read.js';

/** Attempts that finished within one bucket of the chart's window. */
export interface RateBucket {
  /** Bucket start, epoch ms. */
  start: number;
  ok: number;
  /** Every other outcome but `claim_late` (which charges nothing: the job was merely late). */
  failed: number;
}

/** Finished attempts per bucket over `[since, since + buckets * bucketMs)`, oldest first. */
export async function attemptRates(
  q: Queryable,
  s: string,
  opts: { since: number; bucketMs: number; buckets: number; tenantKey?: string | null },
): Promise<RateBucket[]> {
  const params: unknown[] = [opts.since, opts.bucketMs, opts.since + opts.bucketMs * opts.buckets];
  const scoped = opts.tenantKey === undefined ? '' : `AND EXISTS (SELECT 1 FROM ${s}.job j WHERE j.id = a.job_id AND ${tenantFilter(opts.tenantKey, params).replace('tenant_scope', 'j.tenant_scope')})`;
  const { rows } = await q.query(
    `SELECT floor((extract(epoch from a.finished_at) * 1000 - $1::bigint) / $2::bigint)::int AS bucket,
            count(*) FILTER (WHERE a.outcome = 'ok')::int AS ok,
            count(*) FILTER (WHERE a.outcome <> 'ok' AND a.outcome <> 'claim_late')::int AS failed
       FROM ${s}.attempt a
      WHERE a.finished_at >= ${ts('$1')} AND a.finished_at < ${ts('$3')} ${scoped}
      GROUP BY 1`,
    params,
  );
  const out: RateBucket[] = Array.from({ length: opts.buckets }, (_, i) => ({ start: opts.since + i * opts.bucketMs, ok: 0, failed: 0 }));
  for (const r of rows) {
    const b = out[r.bucket];
    if (b) {
      b.ok = r.ok;
      b.failed = r.failed;
    }
  }
  return out;
}

/** Jobs that dead-lettered in the last window and in the one before it, and all dead jobs. */
export interface DeadLetterGrowth {
  lastWindow: number;
  previousWindow: number;
  total: number;
}

export async function deadLetterGrowth(q: Queryable, s: string, opts: { now: number; windowMs: number; tenantKey?: string | null }): Promise<DeadLetterGrowth> {
  const params: unknown[] = [opts.now, opts.windowMs];
  const { rows } = await q.query(
    `SELECT count(*) FILTER (WHERE finished_at > ${ts('($1::bigint - $2::bigint)')})::int AS last_window,
            count(*) FILTER (WHERE finished_at <= ${ts('($1::bigint - $2::bigint)')} AND finished_at > ${ts('($1::bigint - 2 * $2::bigint)')})::int AS previous_window,
            count(*)::int AS total
       FROM ${s}.job WHERE status = 'dead' AND ${tenantFilter(opts.tenantKey, params)}`,
    params,
  );
  return { lastWindow: rows[0].last_window, previousWindow: rows[0].previous_window, total: rows[0].total };
}

/** The job table (`outbox.job`, or a named outbox's) as PostgreSQL's statistics see it. Ages are by the server's clock. */
export interface TableHealth {
  /** The table, e.g. `outbox.job`. */
  table: string;
  liveTuples: number;
  deadTuples: number;
  totalBytes: number;
  /** Since the last autovacuum of the table; `null`: never (since statistics were reset). */
  lastAutovacuumAgeMs: number | null;
  lastVacuumAgeMs: number | null;
  /**
   * The session whose snapshot holds back cleanup the longest (its `backend_xmin` is the
   * oldest), or `null` when no other session holds one. Without `pg_read_all_stats` (e.g. the
   * `pg_monitor` role) PostgreSQL hides other roles' sessions' details, so this may miss them.
   */
  oldestXmin: { pid: number; xidAge: number; transactionAgeMs: number | null; state: string | null; applicationName: string | null } | null;
}

/** `schema` unquoted (`outbox`, `outbox_billing`): it is compared as a value. */
export async function tableHealth(q: Queryable, schema: string): Promise<TableHealth | null> {
  const table = await q.query(
    `SELECT n_live_tup::bigint AS live, n_dead_tup::bigint AS dead, pg_total_relation_size(relid)::bigint AS bytes,
            round(extract(epoch from now() - last_autovacuum) * 1000)::bigint AS autovacuum_ms,
            round(extract(epoch from now() - last_vacuum) * 1000)::bigint AS vacuum_ms
       FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = 'job'`,
    [schema],
  );
  const t = table.rows[0];
  if (!t) return null;
  const holder = await q.query(
    `SELECT pid, age(backend_xmin)::int AS xid_age, state, application_name,
            round(extract(epoch from now() - xact_start) * 1000)::bigint AS xact_ms
       FROM pg_stat_activity
      WHERE backend_xmin IS NOT NULL AND pid <> pg_backend_pid()
      ORDER BY age(backend_xmin) DESC LIMIT 1`,
  );
  const h = holder.rows[0];
  const num = (v: unknown) => (v === null || v === undefined ? null : Number(v));
  return {
    table: `${schema}.job`,
    liveTuples: Number(t.live),
    deadTuples: Number(t.dead),
    totalBytes: Number(t.bytes),
    lastAutovacuumAgeMs: num(t.autovacuum_ms),
    lastVacuumAgeMs: num(t.vacuum_ms),
    oldestXmin: h
      ? { pid: h.pid, xidAge: h.xid_age, transactionAgeMs: num(h.xact_ms), state: h.state ?? null, applicationName: h.application_name || null }
      : null,
  };
}

/** The core's grades of the table's health and the dead letters (docs/ABI.md, pb_backlog `health`). */
export interface HealthGrades {
  deadTuples: 'ok' | 'warn' | 'error';
  autovacuum: 'ok' | 'warn';
  xminHold: 'ok' | 'warn' | 'error';
  deadLetters: 'ok' | 'warn' | 'error';
}

/** Asks the core to grade what PostgreSQL reports (absent facts grade ok). */
export function gradeHealth(core: Core, table: TableHealth | null, dead: DeadLetterGrowth): HealthGrades {
  return core.call<HealthGrades>('backlog', {
    op: 'health',
    deadLetters: dead.lastWindow,
    ...(table
      ? {
          deadTuples: table.deadTuples,
          liveTuples: table.liveTuples,
          lastAutovacuumAgeMs: table.lastAutovacuumAgeMs,
          xminHoldMs: table.oldestXmin?.transactionAgeMs ?? null,
        }
      : {}),
  });
}

/** A health warning the dashboard shows. */
export interface HealthWarning {
  severity: 'warn' | 'error';
  title: string;
  detail: string;
}

const minutes = (ms: number) => (ms >= 3_600_000 ? `${Number((ms / 3_600_000).toFixed(1))} h` : `${Math.round(ms / 60_000)} min`);

/** Warnings for the table's health (none when it is fine), as the core graded it. */
export function gradeTableHealth(h: TableHealth, grades: HealthGrades): HealthWarning[] {
  const out: HealthWarning[] = [];
  const ratio = h.deadTuples / Math.max(h.liveTuples, 1);
  if (grades.deadTuples !== 'ok') {
    out.push({
      severity: grades.deadTuples,
      title: `Dead tuples in ${h.table}`,
      detail: `${h.deadTuples} dead against ${h.liveTuples} live tuples (${(ratio * 100).toFixed(0)}%).`,
    });
  }
  if (grades.autovacuum !== 'ok') {
    const lastVacuum = h.lastAutovacuumAgeMs;
    out.push({
      severity: grades.autovacuum,
      title: 'Autovacuum is lagging',
      detail: lastVacuum === null ? `${h.table} has not been autovacuumed since statistics were reset.` : `The last autovacuum of ${h.table} was ${minutes(lastVacuum)} ago.`,
    });
  }
  const x = h.oldestXmin;
  if (x && x.transactionAgeMs !== null && grades.xminHold !== 'ok') {
    out.push({
      severity: grades.xminHold,
      title: 'A transaction holds back cleanup',
      detail: `Session ${x.pid}${x.applicationName ? ` (${x.applicationName})` : ''}, ${x.state ?? 'state unknown'}, has held its snapshot for ${minutes(x.transactionAgeMs)} (${x.xidAge} transactions old): no dead row newer than it can be vacuumed.`,
    });
  }
  return out;
}

/** A warning when jobs dead-lettered in the last window (`windowMs`, the core's), as the core graded it. */
export function gradeDeadLetters(g: DeadLetterGrowth, grade: HealthGrades['deadLetters'], windowMs: number): HealthWarning[] {
  if (grade === 'ok') return [];
  return [{
    severity: grade,
    title: 'Dead letters are growing',
    detail: `${g.lastWindow} job(s) dead-lettered in the last ${minutes(windowMs)} (${g.previousWindow} in the window before; ${g.total} dead in all).`,
  }];
}
