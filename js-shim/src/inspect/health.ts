/**
 * The outbox's own health: each of its tables as PostgreSQL's statistics see them, and what
 * holds back cleanup (the xmin horizon) in this database. The store reads the facts in one
 * statement; the core grades them (docs/ABI.md, pb_backlog `health`).
 * @module
 */
import type { Core } from '../core/core.js';
import type { Queryable } from '../types.js';

/** The outbox's tables, whose statistics health reads. */
export const OUTBOX_TABLES = ['job', 'attempt', 'schedule_run', 'webhook_endpoint'] as const;

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

/**
 * Something that holds back this database's xmin horizon, so no dead row newer than it can be
 * vacuumed: `xidAge` is how many transactions behind it is; `ageMs` how long it has held
 * it, where PostgreSQL knows (not for a slot).
 *
 * - `session`: a session of this database (or a physical standby's WAL sender, whose
 *   `hot_standby_feedback` holds back every database) with a snapshot (`backend_xmin`) or a
 *   transaction id (`backend_xid`); `ageMs` is since its transaction began. Without
 *   `pg_read_all_stats` (e.g. the `pg_monitor` role) PostgreSQL hides other roles' sessions'
 *   details, so this may miss them. Autovacuum workers are left out: PostgreSQL 14 and later
 *   ignore their snapshots when it vacuums.
 * - `prepared`: a prepared transaction (`PREPARE TRANSACTION`) of this database, held until
 *   `COMMIT PREPARED` or `ROLLBACK PREPARED`.
 * - `slot`: a physical replication slot (it holds back every database) or a logical slot of
 *   this database, by its `xmin` or else its `catalog_xmin`.
 */
export type HorizonHolder =
  | { kind: 'session'; pid: number; xidAge: number; ageMs: number | null; state: string | null; applicationName: string | null; backendType: string | null }
  | { kind: 'prepared'; gid: string; xidAge: number; ageMs: number | null; owner: string | null }
  | { kind: 'slot'; slotName: string; slotType: 'physical' | 'logical'; active: boolean; xidAge: number; ageMs: null };

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
  // age() of a transaction id is in transactions; the three holder kinds are one UNION ALL, so
  // the check costs one round trip and sees one instant. Ages are clamped at 0 (here, as
  // greatest() would turn a NULL into 0): a session that began after this transaction's now()
  // is a few ms in the future, and a transaction id assigned since then a few ahead.
  const { rows } = await q.query(
    `WITH t AS (
       SELECT relname AS name, n_live_tup AS live, n_dead_tup AS dead, pg_total_relation_size(relid) AS bytes,
              round(extract(epoch FROM now() - last_autovacuum) * 1000)::bigint AS autovacuum_ms,
              round(extract(epoch FROM now() - last_vacuum) * 1000)::bigint AS vacuum_ms
         FROM pg_stat_user_tables WHERE schemaname = $1 AND relname = ANY($2::text[])
     ), h AS (
       (SELECT 'session' AS kind, pid::text AS id, greatest(age(coalesce(backend_xmin, backend_xid)), 0) AS xid_age,
               round(extract(epoch FROM now() - xact_start) * 1000)::bigint AS age_ms,
               state AS a, application_name AS b, backend_type AS c
          FROM pg_stat_activity
         WHERE pid <> pg_backend_pid() AND coalesce(backend_xmin, backend_xid) IS NOT NULL
           AND backend_type IS DISTINCT FROM 'autovacuum worker'
           AND (datid = (SELECT oid FROM pg_database WHERE datname = current_database())
                OR (datid IS NULL AND backend_type = 'walsender'))
         ORDER BY 3 DESC LIMIT 1)
       UNION ALL
       (SELECT 'prepared', gid, greatest(age(transaction), 0), round(extract(epoch FROM now() - prepared) * 1000)::bigint, owner::text, NULL, NULL
          FROM pg_prepared_xacts WHERE database = current_database()
         ORDER BY 3 DESC LIMIT 1)
       UNION ALL
       (SELECT 'slot', slot_name::text, greatest(age(coalesce(xmin, catalog_xmin)), 0), NULL, slot_type, active::text, NULL
          FROM pg_replication_slots
         WHERE coalesce(xmin, catalog_xmin) IS NOT NULL AND (slot_type = 'physical' OR database = current_database())
         ORDER BY 3 DESC LIMIT 1)
     )
     SELECT (SELECT coalesce(json_agg(t ORDER BY t.name), '[]') FROM t) AS tables,
            (SELECT coalesce(json_agg(h ORDER BY h.xid_age DESC), '[]') FROM h) AS horizon`,
    [schema, OUTBOX_TABLES],
  );
  const json = (v: unknown): any[] => (typeof v === 'string' ? JSON.parse(v) : (v as any[]) ?? []);
  const num = (v: unknown) => (v === null || v === undefined ? null : Math.max(Number(v), 0));
  return {
    tables: json(rows[0]?.tables).map((t) => ({
      table: `${schema}.${t.name}`,
      liveTuples: Number(t.live),
      deadTuples: Number(t.dead),
      totalBytes: Number(t.bytes),
      lastAutovacuumAgeMs: num(t.autovacuum_ms),
      lastVacuumAgeMs: num(t.vacuum_ms),
    })),
    horizon: json(rows[0]?.horizon).map((h): HorizonHolder => {
      const xidAge = Number(h.xid_age);
      if (h.kind === 'session') {
        return { kind: 'session', pid: Number(h.id), xidAge, ageMs: num(h.age_ms), state: h.a ?? null, applicationName: h.b || null, backendType: h.c ?? null };
      }
      if (h.kind === 'prepared') return { kind: 'prepared', gid: h.id, xidAge, ageMs: num(h.age_ms), owner: h.a ?? null };
      return { kind: 'slot', slotName: h.id, slotType: h.a === 'logical' ? 'logical' : 'physical', active: h.b === 'true', xidAge, ageMs: null };
    }),
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
