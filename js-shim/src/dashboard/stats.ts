/**
 * The dashboard's own reads beyond `postbox/inspect`: attempt rates over time and dead-letter
 * growth, both on the inspection path (read-only transaction, statement timeout), in one
 * transaction per page; and the warnings it shows for the outbox's health.
 * @module
 */
import type { Queryable } from '../types.js';
import { attemptLedger } from '../stores/pg/sql/attempts.js';
import { ts } from '../stores/pg/sql/time.js';
import { tenantFilter } from '../inspect/read.js';
import type { HealthFacts, HealthGrade, HealthGrades, TableHealth } from '../inspect/health.js';

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
  const scoped = opts.tenantKey === undefined ? '' : `AND EXISTS (SELECT 1 FROM ${s}.job j WHERE j.id = a.job_id AND ${tenantFilter(opts.tenantKey, params, 'j.tenant_scope')})`;
  const { rows } = await q.query(
    `SELECT floor((extract(epoch from a.finished_at) * 1000 - $1::bigint) / $2::bigint)::int AS bucket,
            count(*) FILTER (WHERE a.outcome = 'ok')::int AS ok,
            count(*) FILTER (WHERE a.outcome <> 'ok' AND a.outcome <> 'claim_late')::int AS failed
       FROM ${attemptLedger(s)} a
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

/** A health warning the dashboard shows. */
export interface HealthWarning {
  severity: 'warn' | 'error';
  title: string;
  detail: string;
}

const minutes = (ms: number) => (ms >= 3_600_000 ? `${Number((ms / 3_600_000).toFixed(1))} h` : `${Math.round(ms / 60_000)} min`);

/** Warnings for the tables and the horizon (none when they are fine), as the core graded them. */
export function gradeTableHealth(facts: HealthFacts, grades: HealthGrades): HealthWarning[] {
  const out: HealthWarning[] = [];
  for (const [i, t] of facts.tables.entries()) {
    const g = grades.tables[i];
    if (!g) continue;
    if (g.deadTuples !== 'ok') {
      out.push({
        severity: g.deadTuples,
        title: `Dead tuples in ${t.table}`,
        detail: `${t.deadTuples} dead against ${t.liveTuples} live tuples (${percentDead(t)}%).`,
      });
    }
    if (g.autovacuum !== 'ok') {
      out.push({
        severity: g.autovacuum,
        title: `Autovacuum is lagging on ${t.table}`,
        detail: t.lastAutovacuumAgeMs === null ? `${t.table} has not been autovacuumed since statistics were reset.` : `The last autovacuum of ${t.table} was ${minutes(t.lastAutovacuumAgeMs)} ago.`,
      });
    }
  }
  for (const [i, h] of facts.horizon.entries()) {
    const grade = grades.horizon[i];
    if (!grade || grade === 'ok') continue;
    const held = `${h.ageMs === null ? '' : `for ${minutes(h.ageMs)} `}(${h.xidAge} transactions behind): no dead row newer than it can be vacuumed`;
    if (h.kind === 'session') {
      out.push({ severity: grade, title: 'A transaction holds back cleanup', detail: `Session ${h.pid}${h.applicationName ? ` (${h.applicationName})` : ''}, ${h.state ?? 'state unknown'}, has held its snapshot ${held}.` });
    } else if (h.kind === 'prepared') {
      out.push({ severity: grade, title: 'A prepared transaction holds back cleanup', detail: `Prepared transaction ${h.gid}${h.owner ? ` (${h.owner})` : ''} has been open ${held}. COMMIT PREPARED or ROLLBACK PREPARED it.` });
    } else {
      out.push({ severity: grade, title: 'A replication slot holds back cleanup', detail: `The ${h.active ? 'active' : 'inactive'} ${h.slotType} slot ${h.slotName} holds the horizon ${held}. Drop it if nothing consumes it.` });
    }
  }
  return out;
}

/** Dead tuples as a percentage of live ones (of 1 for an empty table), rounded. */
export const percentDead = (t: TableHealth) => ((t.deadTuples / Math.max(t.liveTuples, 1)) * 100).toFixed(0);

/** A warning when jobs dead-lettered in the last window (`windowMs`, the core's), as the core graded it. */
export function gradeDeadLetters(g: DeadLetterGrowth, grade: HealthGrade, windowMs: number): HealthWarning[] {
  if (grade === 'ok') return [];
  return [{
    severity: grade,
    title: 'Dead letters are growing',
    detail: `${g.lastWindow} job(s) dead-lettered in the last ${minutes(windowMs)} (${g.previousWindow} in the window before; ${g.total} dead in all).`,
  }];
}
