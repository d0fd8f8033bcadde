/**
 * The outbox's own health: each of its tables as PostgreSQL's statistics see them, and what
 * holds back cleanup (the xmin horizon) in this database. The store reads the facts in one
 * statement; the core grades them (docs/ABI.md, pb_backlog `health`).
 * @module
 */
import type { Core } from '../core/core.js';
import type { Queryable } from '../types.js';
import { HORIZON_HOLDERS, ageOrNull, horizonHolders, jsonList, type HorizonHolder } from '../stores/pg/sql/horizon.js';

export type { HorizonHolder } from '../stores/pg/sql/horizon.js';

/** The outbox's tables, whose statistics health reads. */
export const OUTBOX_TABLES = ['job', 'attempt', 'schedule_run', 'webhook_endpoint', 'index_baseline', 'kind_slot', 'job_edge'] as const;

/** A grade of the core's: `ok`, `warn` or `error`. */
export type HealthGrade = 'ok' | 'warn' | 'error';

/** One outbox table (e.g. `outbox.attempt`) as PostgreSQL's statistics see it. Ages are by the server's clock. */
export interface TableHealth {
  /** The table, schema-qualified: `outbox.job`, or `outbox_billing.job` in the outbox named `billing`. */
  table: string;
  /** Estimated live rows (`n_live_tup`). */
  liveTuples: number;
  /** Estimated dead rows not yet vacuumed (`n_dead_tup`). */
  deadTuples: number;
  /** Size on disk with its indexes and TOAST (`pg_total_relation_size`). */
  totalBytes: number;
  /** Since the last autovacuum of the table; `null`: never (since statistics were reset). */
  lastAutovacuumAgeMs: number | null;
  /** Since the last manual VACUUM; `null`: never. */
  lastVacuumAgeMs: number | null;
}

/** What the store reads for health. */
export interface HealthFacts {
  /** The outbox's tables that exist, by name. */
  tables: TableHealth[];
  /** The oldest holder of each kind that holds one, the furthest behind first. */
  horizon: HorizonHolder[];
}

/**
 * Reads the facts in one statement. `schema` unquoted (`outbox`, `outbox_billing`): it is
 * compared as a value.
 */
export async function readHealthFacts(q: Queryable, schema: string): Promise<HealthFacts> {
  const { rows } = await q.query(
    `WITH t AS (
       SELECT relname AS name, n_live_tup AS live, n_dead_tup AS dead, pg_total_relation_size(relid) AS bytes,
              round(extract(epoch FROM now() - last_autovacuum) * 1000)::bigint AS autovacuum_ms,
              round(extract(epoch FROM now() - last_vacuum) * 1000)::bigint AS vacuum_ms
         FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = ANY($2::text[])
     ), h AS (
${HORIZON_HOLDERS}     )
     SELECT (SELECT coalesce(json_agg(t ORDER BY t.name), '[]') FROM t) AS tables,
            (SELECT coalesce(json_agg(h ORDER BY h.xid_age DESC), '[]') FROM h) AS horizon`,
    [schema, OUTBOX_TABLES],
  );
  return {
    tables: jsonList(rows[0]?.tables).map((t) => ({
      table: `${schema}.${t.name}`,
      liveTuples: Number(t.live),
      deadTuples: Number(t.dead),
      totalBytes: Number(t.bytes),
      lastAutovacuumAgeMs: ageOrNull(t.autovacuum_ms),
      lastVacuumAgeMs: ageOrNull(t.vacuum_ms),
    })),
    horizon: horizonHolders(rows[0]?.horizon),
  };
}

/** The core's grades of the facts (docs/ABI.md, pb_backlog `health`), lists in the facts' order. */
export interface HealthGrades {
  tables: { deadTuples: HealthGrade; autovacuum: 'ok' | 'warn' }[];
  horizon: HealthGrade[];
  /** The worst of `tables`' `deadTuples`. */
  deadTuples: HealthGrade;
  /** The worst of `tables`' `autovacuum`. */
  autovacuum: 'ok' | 'warn';
  /** The worst of `horizon`. */
  xminHold: HealthGrade;
  deadLetters: HealthGrade;
  /** The worst of everything. */
  severity: HealthGrade;
}

/** Asks the core to grade what PostgreSQL reports (absent facts grade ok). */
export function gradeHealth(core: Core, facts: HealthFacts | null, deadLetters?: number): HealthGrades {
  return core.call<HealthGrades>('backlog', {
    op: 'health',
    ...(deadLetters === undefined ? {} : { deadLetters }),
    ...(facts
      ? {
          tables: facts.tables.map((t) => ({ deadTuples: t.deadTuples, liveTuples: t.liveTuples, lastAutovacuumAgeMs: t.lastAutovacuumAgeMs })),
          horizon: facts.horizon.map((h) => ({ ageMs: h.ageMs, xidAge: h.xidAge })),
        }
      : {}),
  });
}
