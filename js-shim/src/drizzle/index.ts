/**
 * Drizzle tables for Postbox's schema, and a drift check. The tables mirror
 * `migrations/` (the source of truth; a test keeps the two equal), so drizzle-kit users can
 * re-export them from their schema and generate migrations as usual, then add
 * {@link OUTBOX_DRIZZLE_EXTRAS} (the trigger drizzle-kit cannot generate) in a custom migration.
 * @module
 */
import { sql } from 'drizzle-orm';
import { bigint, boolean, check, getTableConfig, index, integer, jsonb, pgSchema, primaryKey, smallint, text, timestamp, uniqueIndex, uuid } from 'drizzle-orm/pg-core';
import { runTransaction, type TransactionalDb } from '../stores/pg/db.js';
import { OUTBOX_ROUTINE_STATEMENTS, OUTBOX_ROUTINES } from '../generated/migrations.js';
import { checkOutboxName, outboxSchemaName } from '../name.js';
import { outboxMigrations } from '../sql/index.js';

const tstz = (name: string) => timestamp(name, { withTimezone: true, mode: 'date' });

/** The tables of one schema: `outbox`, or a named outbox's `outbox_<name>`. */
function buildTables<S extends string>(schemaName: S) {
  const schema = pgSchema(schemaName);
  const job = schema.table(
    'job',
    {
      id: uuid('id').primaryKey(),
      kind: text('kind').notNull(),
      lane: text('lane').notNull().default('default'),
      status: text('status').notNull().default('pending'),
      payload: jsonb('payload').notNull(),
      tenantKey: text('tenant_key'),
      tenantScope: text('tenant_scope').generatedAlwaysAs(sql`COALESCE('t:' || tenant_key, 'n')`),
      dedupeKey: text('dedupe_key'),
      correlationId: text('correlation_id'),
      metadata: jsonb('metadata'),
      dueAt: tstz('due_at').notNull(),
      createdAt: tstz('created_at').notNull(),
      updatedAt: tstz('updated_at').notNull(),
      finishedAt: tstz('finished_at'),
      attempts: integer('attempts').notNull().default(0),
      attemptSeq: integer('attempt_seq').notNull().default(0),
      crashes: integer('crashes').notNull().default(0),
      streakCode: text('streak_code'),
      streak: integer('streak').notNull().default(0),
      leaseExpiresAt: tstz('lease_expires_at'),
      lastErrorCode: text('last_error_code'),
      lastErrorMessage: text('last_error_message'),
      versionTs: bigint('version_ts', { mode: 'number' }),
      replayedAt: tstz('replayed_at'),
      nudgeSentAt: tstz('nudge_sent_at'),
      maxAttempts: integer('max_attempts'),
      // The running attempt's start (migration 0006: its attempt row is written when it ends).
      startedAt: tstz('started_at'),
      // The enqueuing span's trace context (migration 0008, postbox/otel).
      traceContext: text('trace_context'),
      // Priority and the core's boost for it (migration 0010): claims order by due time less the boost.
      priority: smallint('priority').notNull().default(0),
      boostMs: integer('boost_ms').notNull().default(0),
      // Dependencies (migration 0012): unfinished parents, and what a parent's failure does.
      waitingOn: integer('waiting_on').notNull().default(0),
      onParentFailure: text('on_parent_failure'),
      // How its parents ended (migration 0013): all of them, and those dead or cancelled; NULL without parents.
      parentsTotal: integer('parents_total'),
      parentsDead: integer('parents_dead'),
      parentsCancelled: integer('parents_cancelled'),
      // A batch's completion job (migration 0017), so cancelBatch acts only on a batch; NULL for any other job.
      completesBatch: boolean('completes_batch'),
    },
    (t) => [
      check('job_status_check', sql`${t.status} IN ('pending', 'running', 'retrying', 'succeeded', 'dead', 'cancelled', 'waiting')`),
      check('job_finished_has_time', sql`(${t.status} IN ('succeeded', 'dead', 'cancelled')) = (${t.finishedAt} IS NOT NULL)`),
      check('job_running_has_lease', sql`(${t.status} = 'running') = (${t.leaseExpiresAt} IS NOT NULL)`),
      check('job_max_attempts_range', sql`${t.maxAttempts} BETWEEN 1 AND 1000`),
      check('job_on_parent_failure_check', sql`${t.onParentFailure} IN ('cancel', 'release')`),
      uniqueIndex('job_dedupe_key').on(t.tenantScope, t.dedupeKey).where(sql`dedupe_key IS NOT NULL`),
      index('job_claimable')
        .on(t.lane, sql`((due_at AT TIME ZONE 'UTC') - boost_ms * interval '1 millisecond')`, t.id)
        .where(sql`status IN ('pending', 'retrying')`),
      // Fair share (migration 0011): a fair claim skips through the tenant scopes with due jobs.
      index('job_fair')
        .on(t.lane, t.tenantScope, sql`((due_at AT TIME ZONE 'UTC') - boost_ms * interval '1 millisecond')`, t.id)
        .where(sql`status IN ('pending', 'retrying')`),
      index('job_lease').on(t.leaseExpiresAt).where(sql`status = 'running'`),
      index('job_finished').on(t.status, t.finishedAt).where(sql`finished_at IS NOT NULL`),
      index('job_correlation').on(t.correlationId).where(sql`correlation_id IS NOT NULL`),
      index('job_tenant').on(t.tenantKey, t.createdAt).where(sql`tenant_key IS NOT NULL`),
      index('job_created').on(t.createdAt, t.id),
      index('job_waiting').on(t.updatedAt).where(sql`status = 'waiting'`),
    ],
  );

  const attempt = schema.table(
    'attempt',
    {
      // No foreign key: a trigger on job deletes a job's attempts with it (migration 0005).
      jobId: uuid('job_id').notNull(),
      seq: integer('seq').notNull(),
      kind: text('kind').notNull(),
      startedAt: tstz('started_at').notNull(),
      // Written by schemas before 0006 only; a running attempt's lease is on its job.
      leaseExpiresAt: tstz('lease_expires_at'),
      finishedAt: tstz('finished_at'),
      outcome: text('outcome'),
      errorCode: text('error_code'),
      errorMessage: text('error_message'),
    },
    (t) => [primaryKey({ name: 'attempt_pkey', columns: [t.jobId, t.seq] }), index('attempt_finished').on(t.finishedAt).where(sql`finished_at IS NOT NULL`)],
  );

  const scheduleRun = schema.table('schedule_run', {
    name: text('name').primaryKey(),
    lastAt: tstz('last_at').notNull(),
    updatedAt: tstz('updated_at').notNull(),
  });

  const webhookEndpoint = schema.table(
    'webhook_endpoint',
    {
      id: text('id').primaryKey(),
      state: text('state').notNull().default('closed'),
      failures: integer('failures').notNull().default(0),
      openedAt: tstz('opened_at'),
      failingSince: tstz('failing_since'),
      disabledReason: text('disabled_reason'),
      version: bigint('version', { mode: 'number' }).notNull().default(0),
      createdAt: tstz('created_at').notNull(),
      updatedAt: tstz('updated_at').notNull(),
    },
    (t) => [
      check('webhook_endpoint_state_check', sql`${t.state} IN ('closed', 'open', 'half_open', 'disabled')`),
      check('webhook_endpoint_failures_check', sql`${t.failures} >= 0`),
      check('webhook_endpoint_disabled_has_reason', sql`(${t.state} = 'disabled') = (${t.disabledReason} IS NOT NULL)`),
    ],
  );
  const indexBaseline = schema.table('index_baseline', {
    name: text('name').primaryKey(),
    baselineBytes: bigint('baseline_bytes', { mode: 'number' }),
    rebuiltAt: tstz('rebuilt_at'),
    updatedAt: tstz('updated_at').notNull(),
  });
  const kindSlot = schema.table(
    'kind_slot',
    {
      kind: text('kind').notNull(),
      pool: text('pool').notNull(),
      slot: integer('slot').notNull(),
      jobId: uuid('job_id'),
      attemptSeq: integer('attempt_seq'),
      heldUntil: tstz('held_until'),
      // The tenant scope of a per-tenant slot (pool 't', migration 0014); '' for the kind's own.
      scope: text('scope').notNull().default(''),
    },
    (t) => [
      primaryKey({ name: 'kind_slot_pkey', columns: [t.kind, t.pool, t.scope, t.slot] }),
      check('kind_slot_pool_check', sql`${t.pool} IN ('c', 'r', 't')`),
      check('kind_slot_slot_check', sql`${t.slot} >= 1`),
    ],
  );
  // No foreign keys: a trigger on job deletes a job's edges with it (migration 0012).
  const jobEdge = schema.table(
    'job_edge',
    { parentId: uuid('parent_id').notNull(), childId: uuid('child_id').notNull() },
    (t) => [primaryKey({ name: 'job_edge_pkey', columns: [t.parentId, t.childId] }), index('job_edge_child').on(t.childId)],
  );
  return { schema, job, attempt, scheduleRun, webhookEndpoint, indexBaseline, kindSlot, jobEdge };
}

/** The drizzle tables of one outbox, as {@link outboxTables} returns them. */
export type OutboxTables<S extends string = string> = ReturnType<typeof buildTables<S>>;

const defaults = buildTables('outbox');

/** The `outbox` schema (the default outbox's). */
export const outboxSchema = defaults.schema;
/** `outbox.job`: one row per job. */
export const outboxJob = defaults.job;
/** `outbox.attempt`: one row per attempt to run a job. */
export const outboxAttempt = defaults.attempt;
/** `outbox.schedule_run`: per schedule, the latest occurrence a tick dealt with (catch-up starts after it). */
export const outboxScheduleRun = defaults.scheduleRun;
/** `outbox.index_baseline`: per index, its size while no snapshot held the horizon (the sweep's compaction). */
export const outboxIndexBaseline = defaults.indexBaseline;
/** `outbox.webhook_endpoint`: each webhook endpoint's breaker state (`postbox/webhooks`). */
export const outboxWebhookEndpoint = defaults.webhookEndpoint;
/** `outbox.kind_slot`: the slots a claim takes for kinds with a `concurrency`, `rateLimit` or `tenantConcurrency` (migrations 0009, 0014). */
export const outboxKindSlot = defaults.kindSlot;
/** `outbox.job_edge`: one row per job dependency, parent to child (migration 0012). */
export const outboxJobEdge = defaults.jobEdge;

/** What {@link outboxDrizzleExtras} returns. */
export interface OutboxDrizzleExtras {
  /**
   * The statements joined by `;` and drizzle's `--> statement-breakpoint` (an SQL comment), so
   * the text is both a drizzle-kit custom migration file and plain SQL for psql.
   */
  readonly sql: string;
  /** One statement per entry, without the semicolon. */
  readonly statements: readonly string[];
}

const extrasByName = new Map<string | null, OutboxDrizzleExtras>();

/**
 * What drizzle-kit cannot generate from the drizzle tables: the functions and triggers of
 * `migrations/`, taken from the migration files themselves. Today the trigger that deletes a
 * job's attempts with the job (retention, `eraseTenant`, a DELETE by hand): without it, those
 * attempts and their error messages stay behind. Put `sql` in a custom migration
 * (`drizzle-kit generate --custom`) after the one that creates the tables. For a named outbox,
 * its schema's. Throws `PostboxError('invalid_config')` for an invalid name.
 */
export function outboxDrizzleExtras(name?: string | null): OutboxDrizzleExtras {
  const checked = checkOutboxName(name, 'outboxDrizzleExtras: name');
  const hit = extrasByName.get(checked);
  if (hit) return hit;
  const migrations = outboxMigrations(checked);
  const statements = OUTBOX_ROUTINE_STATEMENTS.map(([m, i]) => migrations[m]!.statements[i]!);
  const extras = Object.freeze({ sql: `${statements.join(';\n--> statement-breakpoint\n')};\n`, statements: Object.freeze(statements) });
  extrasByName.set(checked, extras);
  return extras;
}

/** {@link outboxDrizzleExtras} of the default outbox: the SQL drizzle-kit users add to their migrations. */
export const OUTBOX_DRIZZLE_EXTRAS: string = outboxDrizzleExtras().sql;

const named = new Map<string, OutboxTables>();

/**
 * The drizzle tables of a named outbox (`createOutbox({ name })`), in its schema
 * `outbox_<name>`: `{ schema, job, attempt, scheduleRun, webhookEndpoint, indexBaseline }`, the same columns, indexes and
 * checks as the default tables. Without a name, the default outbox's. Built once per name;
 * throws `PostboxError('invalid_config')` for an invalid name.
 *
 * @example
 * ```ts
 * const billing = outboxTables('billing');
 * const dead = await db.select().from(billing.job).where(eq(billing.job.status, 'dead'));
 * ```
 */
export function outboxTables(name?: string | null): OutboxTables {
  const checked = checkOutboxName(name, 'outboxTables: name');
  if (checked === null) return defaults;
  let tables = named.get(checked);
  if (!tables) named.set(checked, (tables = buildTables(outboxSchemaName(checked))));
  return tables;
}

/** Every Postbox table, in the order drift is reported. */
const tableList = (t: OutboxTables) => [t.job, t.attempt, t.scheduleRun, t.webhookEndpoint, t.indexBaseline, t.kindSlot];

/** One difference between the database and the schema Postbox expects. */
export type SchemaDrift =
  | { type: 'unsupported_server'; serverVersionNum: number }
  | { type: 'missing_table'; table: string }
  | { type: 'missing_column'; table: string; column: string }
  | { type: 'changed_column'; table: string; column: string; expected: string; actual: string }
  | { type: 'missing_index'; table: string; index: string }
  | { type: 'invalid_index'; table: string; index: string }
  | { type: 'missing_constraint'; table: string; constraint: string }
  | { type: 'missing_function'; function: string }
  | { type: 'missing_trigger'; table: string; trigger: string }
  | { type: 'disabled_trigger'; table: string; trigger: string };

/** What each column must be, as `information_schema` spells it, from the drizzle tables. */
export function expectedColumns(name?: string | null) {
  return tableList(outboxTables(name)).flatMap((table) => {
    const config = getTableConfig(table);
    return config.columns.map((c) => ({ table: config.name, column: c.name, type: c.getSQLType(), notNull: c.notNull }));
  });
}

/** Options of {@link verifyOutboxSchema}. */
export interface VerifyOutboxSchemaOptions {
  /** A named outbox: checks its schema `outbox_<name>`. Default: the default outbox's `outbox`. */
  name?: string;
}

/**
 * Compares the live `outbox` schema (or a named outbox's) with the tables above: tables, columns
 * (type, nullability), indexes (present and valid: a failed `CREATE INDEX CONCURRENTLY` leaves an
 * invalid one), constraints, the functions and triggers of {@link outboxDrizzleExtras} (present,
 * triggers enabled), and the server version. `[]` when they match; run it in CI or at deploy.
 */
export async function verifyOutboxSchema(db: TransactionalDb, opts: VerifyOutboxSchemaOptions = {}): Promise<SchemaDrift[]> {
  const name = checkOutboxName(opts?.name, 'verifyOutboxSchema: name');
  const schema = outboxSchemaName(name);
  const expectedTables = tableList(outboxTables(name));
  return runTransaction(db, async (q) => {
    const drift: SchemaDrift[] = [];
    const version = Number((await q.query('SHOW server_version_num')).rows[0].server_version_num);
    if (version < 140000) drift.push({ type: 'unsupported_server', serverVersionNum: version });
    const { rows: columns } = await q.query(
      `SELECT table_name, column_name, data_type, is_nullable FROM information_schema.columns WHERE table_schema = $1`,
      [schema],
    );
    const actual = new Map(columns.map((c: any) => [`${c.table_name}.${c.column_name}`, c]));
    const tables = new Set(columns.map((c: any) => c.table_name));
    for (const expected of expectedColumns(name)) {
      if (!tables.has(expected.table)) {
        if (!drift.some((d) => d.type === 'missing_table' && d.table === expected.table)) drift.push({ type: 'missing_table', table: expected.table });
        continue;
      }
      const found = actual.get(`${expected.table}.${expected.column}`);
      if (!found) {
        drift.push({ type: 'missing_column', table: expected.table, column: expected.column });
        continue;
      }
      const want = `${expected.type}${expected.notNull ? ' not null' : ''}`;
      const have = `${found.data_type}${found.is_nullable === 'NO' ? ' not null' : ''}`;
      if (expected.type !== found.data_type || expected.notNull !== (found.is_nullable === 'NO')) {
        drift.push({ type: 'changed_column', table: expected.table, column: expected.column, expected: want, actual: have });
      }
    }
    const { rows: indexes } = await q.query(
      `SELECT t.relname AS table_name, i.relname AS index_name, x.indisvalid AS valid
         FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid
         JOIN pg_namespace n ON n.oid = t.relnamespace WHERE n.nspname = $1`,
      [schema],
    );
    const { rows: constraints } = await q.query(
      `SELECT c.conname FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace WHERE n.nspname = $1`,
      [schema],
    );
    const constraintNames = new Set(constraints.map((c: any) => c.conname));
    for (const table of expectedTables) {
      const config = getTableConfig(table);
      if (!tables.has(config.name)) continue;
      const expectedIndexes = [...config.indexes.map((i) => i.config.name!), `${config.name}_pkey`];
      for (const name of expectedIndexes) {
        const found = indexes.find((i: any) => i.index_name === name && i.table_name === config.name);
        if (!found) drift.push({ type: 'missing_index', table: config.name, index: name });
        else if (!found.valid) drift.push({ type: 'invalid_index', table: config.name, index: name });
      }
      for (const name of config.checks.map((c) => c.name)) {
        if (!constraintNames.has(name)) drift.push({ type: 'missing_constraint', table: config.name, constraint: name });
      }
    }
    // drizzle-kit creates neither: a schema made from the tables alone lacks them.
    const { rows: functions } = await q.query(
      `SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1`,
      [schema],
    );
    const functionNames = new Set(functions.map((f: any) => f.proname));
    for (const fn of OUTBOX_ROUTINES.functions) {
      if (!functionNames.has(fn)) drift.push({ type: 'missing_function', function: fn });
    }
    const { rows: triggers } = await q.query(
      `SELECT c.relname AS table_name, t.tgname, t.tgenabled FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
         JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND NOT t.tgisinternal`,
      [schema],
    );
    for (const trigger of OUTBOX_ROUTINES.triggers) {
      if (!tables.has(trigger.table)) continue;
      const found = triggers.find((t: any) => t.tgname === trigger.name && t.table_name === trigger.table);
      if (!found) drift.push({ type: 'missing_trigger', table: trigger.table, trigger: trigger.name });
      else if (found.tgenabled === 'D') drift.push({ type: 'disabled_trigger', table: trigger.table, trigger: trigger.name });
    }
    return drift;
  });
}
