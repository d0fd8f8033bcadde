// `postbox/drizzle` against a real PostgreSQL: the drizzle tables match what migrations/
// creates; a schema drizzle-kit generates from them, plus OUTBOX_DRIZZLE_EXTRAS, behaves like
// the migrated one; and verifyOutboxSchema reports drift (missing tables, missing or changed
// columns, indexes, constraints, functions, triggers) instead of letting a deploy run against
// the wrong schema.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { appendFile, mkdtemp, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { after, before, test } from 'node:test';
import { count } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/node-postgres';
import { migrate as drizzleMigrate } from 'drizzle-orm/node-postgres/migrator';
import pg from 'pg';
import { expectedColumns, OUTBOX_DRIZZLE_EXTRAS, outboxDrizzleExtras, outboxJob, verifyOutboxSchema, type SchemaDrift } from 'postbox/drizzle';
import { migrate, OUTBOX_MIGRATIONS } from 'postbox/sql';
import { startPostgres, type PgServer } from '../support/postgres.ts';

const here = path.dirname(fileURLToPath(import.meta.url));
const drizzleKit = path.join(here, '../../node_modules/drizzle-kit/bin.cjs');
const kitSchema = path.join(here, 'fixtures/drizzle-kit-schema.ts');

/** A drift entry as `type:what`, for comparing lists. */
const describe = (d: SchemaDrift) =>
  `${d.type}:${'column' in d ? d.column : 'index' in d ? d.index : 'constraint' in d ? d.constraint : 'trigger' in d ? d.trigger : 'function' in d ? d.function : 'table' in d ? d.table : ''}`;

let server: PgServer;
before(async () => {
  server = await startPostgres();
});
after(async () => {
  await server?.stop();
});

async function migrated(name: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: await server.createDatabase(name) });
  await client.connect();
  await migrate(client);
  return client;
}

test('the drizzle tables describe exactly the migrated columns', async () => {
  const client = await migrated('drizzle_same');
  const { rows } = await client.query(
    `SELECT table_name AS table, column_name AS column, data_type AS type, is_nullable = 'NO' AS "notNull"
       FROM information_schema.columns WHERE table_schema = 'outbox' AND table_name IN ('job', 'attempt', 'schedule_run', 'webhook_endpoint', 'index_baseline', 'kind_slot')`,
  );
  const key = (c: { table: string; column: string }) => `${c.table}.${c.column}`;
  const sorted = <T extends { table: string; column: string }>(list: T[]) => [...list].sort((a, b) => key(a).localeCompare(key(b)));
  assert.deepEqual(sorted(expectedColumns()), sorted(rows));
  assert.deepEqual(await verifyOutboxSchema(client), []);
  // The tables are usable for queries too.
  assert.deepEqual(await drizzle(client).select({ n: count() }).from(outboxJob), [{ n: 0 }]);
  await client.end();
});

test('drift is reported, not ignored', async () => {
  const client = await migrated('drizzle_drift');
  await client.query('ALTER TABLE outbox.job DROP COLUMN correlation_id CASCADE');
  await client.query('ALTER TABLE outbox.job ALTER COLUMN kind DROP NOT NULL');
  await client.query('DROP INDEX outbox.job_claimable');
  await client.query('ALTER TABLE outbox.job DROP CONSTRAINT job_running_has_lease');
  await client.query('ALTER TABLE outbox.job DISABLE TRIGGER job_deleted_attempts');
  await client.query('ALTER TABLE outbox.webhook_endpoint DROP CONSTRAINT webhook_endpoint_disabled_has_reason');
  const drift = await verifyOutboxSchema(client);
  assert.deepEqual(
    drift.map(describe).sort(),
    [
      'changed_column:kind', 'missing_column:correlation_id', 'missing_constraint:job_running_has_lease', 'missing_index:job_claimable',
      'missing_index:job_correlation', 'disabled_trigger:job_deleted_attempts', 'missing_constraint:webhook_endpoint_disabled_has_reason',
    ].sort(),
  );
  await client.end();
});

test('a missing trigger, function or table is drift', async () => {
  const client = await migrated('drizzle_routines');
  await client.query('DROP TRIGGER job_deleted_attempts ON outbox.job');
  assert.deepEqual(await verifyOutboxSchema(client), [{ type: 'missing_trigger', table: 'job', trigger: 'job_deleted_attempts' }]);
  await client.query('DROP FUNCTION outbox.delete_attempts_of_deleted_jobs()');
  await client.query('DROP TABLE outbox.webhook_endpoint');
  assert.deepEqual((await verifyOutboxSchema(client)).map(describe), [
    'missing_table:webhook_endpoint', 'missing_function:delete_attempts_of_deleted_jobs', 'missing_trigger:job_deleted_attempts',
  ]);
  await client.query('DROP SCHEMA outbox CASCADE');
  assert.deepEqual((await verifyOutboxSchema(client)).map(describe), [
    'missing_table:job', 'missing_table:attempt', 'missing_table:schedule_run', 'missing_table:webhook_endpoint', 'missing_table:index_baseline',
    'missing_table:kind_slot',
    'missing_function:delete_attempts_of_deleted_jobs',
  ]);
  await client.end();
});

test('OUTBOX_DRIZZLE_EXTRAS holds the migrations\' function and trigger, for any outbox', () => {
  // The function as its last migration (0012, which also deletes a job's edges) defines it, then the trigger.
  const all = OUTBOX_MIGRATIONS.flatMap((m) => m.statements);
  const fromFiles = [
    all.filter((s) => /^(--[^\n]*\n|\s)*CREATE (OR REPLACE )?FUNCTION/.test(s)).at(-1)!,
    ...all.filter((s) => /^(--[^\n]*\n|\s)*CREATE TRIGGER/.test(s)),
  ];
  assert.equal(fromFiles.length, 2);
  assert.match(fromFiles[0]!, /job_edge/);
  assert.deepEqual(outboxDrizzleExtras().statements, fromFiles);
  assert.equal(OUTBOX_DRIZZLE_EXTRAS, `${fromFiles.join(';\n--> statement-breakpoint\n')};\n`);
  // Not the foreign key's removal: a schema made from the drizzle tables never had the key.
  assert.doesNotMatch(OUTBOX_DRIZZLE_EXTRAS, /DROP CONSTRAINT/);
  const named = outboxDrizzleExtras('billing').statements;
  assert.match(named[0]!, /CREATE OR REPLACE FUNCTION "outbox_billing"\.delete_attempts_of_deleted_jobs/);
  assert.match(named[1]!, /ON "outbox_billing"\.job[\s\S]*EXECUTE FUNCTION "outbox_billing"\.delete_attempts_of_deleted_jobs/);
  assert.throws(() => outboxDrizzleExtras('Bad Name'), { code: 'invalid_config' });
});

test('drizzle-kit: the schema it generates from the tables, plus OUTBOX_DRIZZLE_EXTRAS, deletes a job\'s attempts with it', async () => {
  const client = new pg.Client({ connectionString: await server.createDatabase('drizzle_kit') });
  await client.connect();
  const dir = await mkdtemp(path.join(os.tmpdir(), 'postbox-drizzle-kit-'));
  const run = promisify(execFile);
  // What a drizzle-kit user runs: generate, then drizzle's migrator.
  const generate = (...args: string[]) =>
    run(process.execPath, [drizzleKit, 'generate', '--dialect', 'postgresql', '--schema', kitSchema, '--out', './drizzle', ...args], { cwd: dir });
  const applyMigrations = () => drizzleMigrate(drizzle(client), { migrationsFolder: path.join(dir, 'drizzle') });
  const orphans = async () => {
    const job = crypto.randomUUID();
    await client.query(
      `INSERT INTO outbox.job (id, kind, payload, due_at, created_at, updated_at) VALUES ($1, 'k', '{}', now(), now(), now())`, [job]);
    await client.query(
      `INSERT INTO outbox.attempt (job_id, seq, kind, started_at, lease_expires_at, error_message) VALUES ($1, 1, 'k', now(), now(), 'a personal detail')`, [job]);
    await client.query('DELETE FROM outbox.job WHERE id = $1', [job]);
    return (await client.query('SELECT count(*)::int AS n FROM outbox.attempt WHERE job_id = $1', [job])).rows[0].n as number;
  };
  try {
    await generate('--name', 'init');
    await applyMigrations();
    // The tables alone: drift names what is missing, and a deleted job leaves its attempt.
    assert.deepEqual((await verifyOutboxSchema(client)).map(describe), ['missing_function:delete_attempts_of_deleted_jobs', 'missing_trigger:job_deleted_attempts']);
    assert.equal(await orphans(), 1);
    await client.query('DELETE FROM outbox.attempt');

    // The extras as a custom migration, as the README says.
    await generate('--custom', '--name', 'postbox_extras');
    const custom = (await readdir(path.join(dir, 'drizzle'))).find((f) => f.endsWith('_postbox_extras.sql'))!;
    await appendFile(path.join(dir, 'drizzle', custom), `\n${OUTBOX_DRIZZLE_EXTRAS}`);
    await applyMigrations();
    assert.deepEqual(await verifyOutboxSchema(client), []);
    assert.equal(await orphans(), 0, 'the attempt went with its job');
  } finally {
    await client.end();
    await rm(dir, { recursive: true, force: true });
  }
});
