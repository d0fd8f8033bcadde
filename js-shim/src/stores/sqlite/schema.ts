/**
 * The outbox's tables in SQLite (D1 and Durable Object storage): the PostgreSQL migrations'
 * tables in SQLite types. Times are INTEGER epoch ms on the caller's clock, ids TEXT, JSON TEXT
 * (the payload kept as the caller wrote it). A SQLite database has no schemas, so each outbox is a
 * table prefix: `outbox_` for the default outbox, `outbox_<name>_` for a named one.
 * tests/shim/sqlite-schema.test.ts checks these tables against migrations/ as PostgreSQL applies
 * them (columns, NOT NULLs, primary keys, indexes), listing the differences the designs mean.
 * @module
 */
import { checkOutboxName } from '../../name.js';
import type { SqliteDriver } from './driver.js';

/**
 * The table prefix of an outbox: `outbox_` (no name) or `outbox_<name>_`. No two outboxes'
 * tables can meet: a named outbox's tables all end in one of its table names after its
 * own `_`, and none of those names is another's suffix. Throws `PostboxError('invalid_config')`
 * for an invalid name.
 */
export function sqliteTablePrefix(name?: string | null): string {
  const checked = checkOutboxName(name);
  return checked === null ? 'outbox_' : `outbox_${checked}_`;
}

/** One numbered migration: statements applied together, in order. */
export interface SqliteMigration {
  version: number;
  name: string;
  statements: string[];
}

/**
 * The migrations for the outbox with table prefix `p`. Each runs as one batch with its record;
 * a `CREATE` is idempotent (`IF NOT EXISTS`), and an `ALTER TABLE` that another isolate applied
 * first fails its batch whole, which {@link migrateSqlite} then finds recorded.
 */
function migrations(p: string): SqliteMigration[] {
  return [
    {
      version: 1,
      name: 'outbox_tables',
      statements: [
        `CREATE TABLE IF NOT EXISTS ${p}job (
  id                 TEXT    PRIMARY KEY NOT NULL,
  kind               TEXT    NOT NULL,
  lane               TEXT    NOT NULL DEFAULT 'default',
  status             TEXT    NOT NULL DEFAULT 'pending'
                     CHECK (status IN ('pending', 'running', 'retrying', 'succeeded', 'dead', 'cancelled')),
  payload            TEXT    NOT NULL,
  tenant_key         TEXT,
  -- A NULL tenant is a scope of its own: 'n' for none, 't:<key>' otherwise.
  tenant_scope       TEXT    GENERATED ALWAYS AS (COALESCE('t:' || tenant_key, 'n')) STORED,
  dedupe_key         TEXT,
  correlation_id     TEXT,
  metadata           TEXT,
  due_at             INTEGER NOT NULL,
  created_at         INTEGER NOT NULL,
  updated_at         INTEGER NOT NULL,
  finished_at        INTEGER,
  attempts           INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  attempt_seq        INTEGER NOT NULL DEFAULT 0 CHECK (attempt_seq >= 0),
  crashes            INTEGER NOT NULL DEFAULT 0 CHECK (crashes >= 0),
  streak_code        TEXT,
  streak             INTEGER NOT NULL DEFAULT 0 CHECK (streak >= 0),
  lease_expires_at   INTEGER,
  last_error_code    TEXT,
  last_error_message TEXT,
  version_ts         INTEGER,
  replayed_at        INTEGER,
  nudge_sent_at      INTEGER,
  max_attempts       INTEGER CHECK (max_attempts BETWEEN 1 AND 1000),
  CHECK ((status IN ('succeeded', 'dead', 'cancelled')) = (finished_at IS NOT NULL)),
  CHECK ((status = 'running') = (lease_expires_at IS NOT NULL))
) STRICT`,
        `CREATE UNIQUE INDEX IF NOT EXISTS ${p}job_dedupe_key ON ${p}job (tenant_scope, dedupe_key) WHERE dedupe_key IS NOT NULL`,
        `CREATE INDEX IF NOT EXISTS ${p}job_claimable ON ${p}job (lane, due_at, id) WHERE status IN ('pending', 'retrying')`,
        `CREATE INDEX IF NOT EXISTS ${p}job_lease ON ${p}job (lease_expires_at) WHERE status = 'running'`,
        `CREATE INDEX IF NOT EXISTS ${p}job_finished ON ${p}job (status, finished_at) WHERE finished_at IS NOT NULL`,
        `CREATE INDEX IF NOT EXISTS ${p}job_correlation ON ${p}job (correlation_id) WHERE correlation_id IS NOT NULL`,
        `CREATE INDEX IF NOT EXISTS ${p}job_tenant ON ${p}job (tenant_key, created_at) WHERE tenant_key IS NOT NULL`,
        `CREATE INDEX IF NOT EXISTS ${p}job_created ON ${p}job (created_at, id)`,
        `CREATE TABLE IF NOT EXISTS ${p}attempt (
  job_id           TEXT    NOT NULL REFERENCES ${p}job (id) ON DELETE CASCADE,
  seq              INTEGER NOT NULL,
  kind             TEXT    NOT NULL,
  started_at       INTEGER NOT NULL,
  lease_expires_at INTEGER NOT NULL,
  finished_at      INTEGER,
  outcome          TEXT,
  error_code       TEXT,
  error_message    TEXT,
  PRIMARY KEY (job_id, seq)
) STRICT, WITHOUT ROWID`,
        `CREATE INDEX IF NOT EXISTS ${p}attempt_finished ON ${p}attempt (finished_at) WHERE finished_at IS NOT NULL`,
        `CREATE TABLE IF NOT EXISTS ${p}webhook_endpoint (
  id              TEXT    PRIMARY KEY NOT NULL,
  state           TEXT    NOT NULL DEFAULT 'closed' CHECK (state IN ('closed', 'open', 'half_open', 'disabled')),
  failures        INTEGER NOT NULL DEFAULT 0 CHECK (failures >= 0),
  opened_at       INTEGER,
  failing_since   INTEGER,
  disabled_reason TEXT,
  version         INTEGER NOT NULL DEFAULT 0,
  created_at      INTEGER NOT NULL,
  updated_at      INTEGER NOT NULL,
  CHECK ((state = 'disabled') = (disabled_reason IS NOT NULL))
) STRICT`,
        // One row, rewritten by each guard of a D1 transaction (see sqlite/statements.ts).
        `CREATE TABLE IF NOT EXISTS ${p}guard (
  id INTEGER PRIMARY KEY NOT NULL CHECK (id = 0),
  ok INTEGER NOT NULL CONSTRAINT postbox_conflict CHECK (ok = 1)
) STRICT`,
        `CREATE TABLE IF NOT EXISTS ${p}schedule_run (
  name       TEXT    PRIMARY KEY NOT NULL,
  last_at    INTEGER NOT NULL,
  updated_at INTEGER NOT NULL
) STRICT`,
      ],
    },
    {
      // migrations/0008: the trace context of the span that enqueued a job (postbox/otel).
      version: 2,
      name: 'job_trace_context',
      statements: [`ALTER TABLE ${p}job ADD COLUMN trace_context TEXT`],
    },
    {
      // Flow limits (migrations/0009 on PostgreSQL): one writer claims at a time here, so a
      // limited claim counts what holds its kind's room instead of taking slot rows: running
      // jobs with a live lease, and starts in the rate window, which this index finds.
      version: 3,
      name: 'attempt_kind_started',
      statements: [`CREATE INDEX IF NOT EXISTS ${p}attempt_kind_started ON ${p}attempt (kind, started_at)`],
    },
    {
      // migrations/0010: priorities with aging; claims order by due time less the boost.
      version: 4,
      name: 'job_priority',
      statements: [
        `ALTER TABLE ${p}job ADD COLUMN priority INTEGER NOT NULL DEFAULT 0`,
        `ALTER TABLE ${p}job ADD COLUMN boost_ms INTEGER NOT NULL DEFAULT 0`,
        `DROP INDEX IF EXISTS ${p}job_claimable`,
        `CREATE INDEX ${p}job_claimable ON ${p}job (lane, due_at - boost_ms, id) WHERE status IN ('pending', 'retrying')`,
      ],
    },
    {
      // migrations/0011: fair share; a fair claim skips through the tenant scopes with due jobs.
      version: 5,
      name: 'job_fair',
      statements: [`CREATE INDEX IF NOT EXISTS ${p}job_fair ON ${p}job (lane, tenant_scope, due_at - boost_ms, id) WHERE status IN ('pending', 'retrying')`],
    },
    {
      // migrations/0012 and 0013: job dependencies and batches. A STRICT table's CHECK cannot be
      // altered, so the job table is rebuilt with 'waiting' among its statuses and the new
      // columns, and the attempt table with it: dropping the old job table would otherwise fire
      // its attempts' ON DELETE CASCADE. The new attempt table references the new job table,
      // whose rename carries the reference along; every index is made again after the renames.
      version: 6,
      name: 'job_dependencies',
      statements: [
        jobTable(`${p}job_next`),
        `INSERT INTO ${p}job_next (${JOB_COLUMNS}) SELECT ${JOB_COLUMNS} FROM ${p}job`,
        attemptTable(`${p}attempt_next`, `${p}job_next`),
        `INSERT INTO ${p}attempt_next (${ATTEMPT_COLUMNS}) SELECT ${ATTEMPT_COLUMNS} FROM ${p}attempt`,
        `DROP TABLE ${p}attempt`,
        `DROP TABLE ${p}job`,
        `ALTER TABLE ${p}job_next RENAME TO ${p}job`,
        `ALTER TABLE ${p}attempt_next RENAME TO ${p}attempt`,
        `CREATE UNIQUE INDEX ${p}job_dedupe_key ON ${p}job (tenant_scope, dedupe_key) WHERE dedupe_key IS NOT NULL`,
        `CREATE INDEX ${p}job_claimable ON ${p}job (lane, due_at - boost_ms, id) WHERE status IN ('pending', 'retrying')`,
        `CREATE INDEX ${p}job_lease ON ${p}job (lease_expires_at) WHERE status = 'running'`,
        `CREATE INDEX ${p}job_finished ON ${p}job (status, finished_at) WHERE finished_at IS NOT NULL`,
        `CREATE INDEX ${p}job_correlation ON ${p}job (correlation_id) WHERE correlation_id IS NOT NULL`,
        `CREATE INDEX ${p}job_tenant ON ${p}job (tenant_key, created_at) WHERE tenant_key IS NOT NULL`,
        `CREATE INDEX ${p}job_created ON ${p}job (created_at, id)`,
        `CREATE INDEX ${p}job_fair ON ${p}job (lane, tenant_scope, due_at - boost_ms, id) WHERE status IN ('pending', 'retrying')`,
        `CREATE INDEX ${p}attempt_finished ON ${p}attempt (finished_at) WHERE finished_at IS NOT NULL`,
        `CREATE INDEX ${p}attempt_kind_started ON ${p}attempt (kind, started_at)`,
        // The sweep's check on waiting jobs, oldest first.
        `CREATE INDEX ${p}job_waiting ON ${p}job (updated_at) WHERE status = 'waiting'`,
        // One row per dependency; a settle finds a parent's children by the key, the job page a
        // child's parents by job_edge_child. Deleting jobs deletes their edges in the same batch.
        `CREATE TABLE ${p}job_edge (
  parent_id TEXT NOT NULL,
  child_id  TEXT NOT NULL,
  -- The parent's end counted into the child: by which settle batch (its token), or 'birth'
  -- (the parent had ended when the child was written); NULL: not yet (stores/sqlite/dependencies.ts).
  counted   TEXT,
  PRIMARY KEY (parent_id, child_id)
) STRICT, WITHOUT ROWID`,
        `CREATE INDEX ${p}job_edge_child ON ${p}job_edge (child_id)`,
      ],
    },
    {
      // migrations/0017: a batch's completion job is marked as one (1; NULL for any other job).
      version: 7,
      name: 'job_completes_batch',
      statements: [`ALTER TABLE ${p}job ADD COLUMN completes_batch INTEGER`],
    },
    {
      // An attempt an operator's cancel ended while it ran keeps its lease, and with it its
      // concurrency slot (stores/sqlite/statements.ts, cancelledRunning); a settle ends the lease
      // when the attempt finishes. Attempts settled before kept theirs: ended the same way, so
      // the index holds only attempts whose lease outlived them.
      version: 8,
      name: 'attempt_held',
      statements: [
        `UPDATE ${p}attempt SET lease_expires_at = finished_at WHERE finished_at IS NOT NULL AND lease_expires_at > finished_at`,
        `CREATE INDEX IF NOT EXISTS ${p}attempt_held ON ${p}attempt (kind, lease_expires_at) WHERE finished_at IS NOT NULL AND lease_expires_at > finished_at`,
      ],
    },
  ];
}

/** The job table's columns as version 6 has them, the generated tenant_scope aside: what its rebuild copies. */
const JOB_COLUMNS = `id, kind, lane, status, payload, tenant_key, dedupe_key, correlation_id, metadata, due_at, created_at, updated_at,
  finished_at, attempts, attempt_seq, crashes, streak_code, streak, lease_expires_at, last_error_code, last_error_message, version_ts,
  replayed_at, nudge_sent_at, max_attempts, trace_context, priority, boost_ms`;

const ATTEMPT_COLUMNS = 'job_id, seq, kind, started_at, lease_expires_at, finished_at, outcome, error_code, error_message';

/** The job table as version 6 has it (migrations 0001 to 0013 in SQLite types). */
function jobTable(name: string): string {
  return `CREATE TABLE ${name} (
  id                 TEXT    PRIMARY KEY NOT NULL,
  kind               TEXT    NOT NULL,
  lane               TEXT    NOT NULL DEFAULT 'default',
  status             TEXT    NOT NULL DEFAULT 'pending'
                     CHECK (status IN ('pending', 'running', 'retrying', 'succeeded', 'dead', 'cancelled', 'waiting')),
  payload            TEXT    NOT NULL,
  tenant_key         TEXT,
  -- A NULL tenant is a scope of its own: 'n' for none, 't:<key>' otherwise.
  tenant_scope       TEXT    GENERATED ALWAYS AS (COALESCE('t:' || tenant_key, 'n')) STORED,
  dedupe_key         TEXT,
  correlation_id     TEXT,
  metadata           TEXT,
  due_at             INTEGER NOT NULL,
  created_at         INTEGER NOT NULL,
  updated_at         INTEGER NOT NULL,
  finished_at        INTEGER,
  attempts           INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
  attempt_seq        INTEGER NOT NULL DEFAULT 0 CHECK (attempt_seq >= 0),
  crashes            INTEGER NOT NULL DEFAULT 0 CHECK (crashes >= 0),
  streak_code        TEXT,
  streak             INTEGER NOT NULL DEFAULT 0 CHECK (streak >= 0),
  lease_expires_at   INTEGER,
  last_error_code    TEXT,
  last_error_message TEXT,
  version_ts         INTEGER,
  replayed_at        INTEGER,
  nudge_sent_at      INTEGER,
  max_attempts       INTEGER CHECK (max_attempts BETWEEN 1 AND 1000),
  trace_context      TEXT,
  priority           INTEGER NOT NULL DEFAULT 0,
  boost_ms           INTEGER NOT NULL DEFAULT 0,
  -- Dependencies (0012): unfinished parents, and what a parent's failure does ('cancel' or 'release').
  waiting_on         INTEGER NOT NULL DEFAULT 0,
  on_parent_failure  TEXT    CHECK (on_parent_failure IN ('cancel', 'release')),
  -- How its parents ended (0013): all, dead, cancelled; NULL without parents.
  parents_total      INTEGER,
  parents_dead       INTEGER,
  parents_cancelled  INTEGER,
  CHECK ((status IN ('succeeded', 'dead', 'cancelled')) = (finished_at IS NOT NULL)),
  CHECK ((status = 'running') = (lease_expires_at IS NOT NULL))
) STRICT`;
}

/** The attempt table, its job_id referencing `jobs`. */
function attemptTable(name: string, jobs: string): string {
  return `CREATE TABLE ${name} (
  job_id           TEXT    NOT NULL REFERENCES ${jobs} (id) ON DELETE CASCADE,
  seq              INTEGER NOT NULL,
  kind             TEXT    NOT NULL,
  started_at       INTEGER NOT NULL,
  lease_expires_at INTEGER NOT NULL,
  finished_at      INTEGER,
  outcome          TEXT,
  error_code       TEXT,
  error_message    TEXT,
  PRIMARY KEY (job_id, seq)
) STRICT, WITHOUT ROWID`;
}

/**
 * The migrations of an outbox's SQLite tables (default: the default outbox), for a migration
 * tool of your own (`wrangler d1 migrations`, say): join each one's statements with `;\n`.
 * {@link migrateSqlite} applies the same statements and records them.
 */
export function sqliteMigrations(name?: string | null): SqliteMigration[] {
  return migrations(sqliteTablePrefix(name));
}

/**
 * Applies the outbox's migrations that the database lacks, each as one atomic batch with its
 * record in `<prefix>schema_migration`; repeating it is a no-op. Returns the versions applied.
 */
export async function migrateSqlite(driver: SqliteDriver, name?: string | null): Promise<number[]> {
  const p = sqliteTablePrefix(name);
  const table = `${p}schema_migration`;
  const create = `CREATE TABLE IF NOT EXISTS ${table} (version INTEGER PRIMARY KEY NOT NULL, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT`;
  const [, rows] = await driver.batch([
    { sql: create, params: [] },
    { sql: `SELECT version FROM ${table}`, params: [] },
  ]);
  const have = new Set((rows ?? []).map((r) => Number(r.version)));
  const applied: number[] = [];
  for (const m of migrations(p)) {
    if (have.has(m.version)) continue;
    try {
      await driver.batch([
        ...m.statements.map((sql) => ({ sql, params: [] })),
        { sql: `INSERT OR IGNORE INTO ${table} (version, name, applied_at) VALUES (?1, ?2, ?3)`, params: [m.version, m.name, Date.now()] },
      ]);
    } catch (error) {
      // Another isolate applied it meanwhile (its ALTER TABLE ran first): nothing left to do.
      const [again] = await driver.batch([{ sql: `SELECT 1 AS applied FROM ${table} WHERE version = ?1`, params: [m.version] }]);
      if ((again ?? []).length > 0) continue;
      throw error;
    }
    applied.push(m.version);
  }
  return applied;
}
