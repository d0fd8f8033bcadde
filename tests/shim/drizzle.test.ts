// `postbox/drizzle` against a real PostgreSQL: the drizzle tables match what migrations/
// creates, and verifyOutboxSchema reports drift (missing or changed columns, indexes,
// constraints) instead of letting a deploy run against the wrong schema.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { count } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import { expectedColumns, outboxJob, verifyOutboxSchema } from 'postbox/drizzle';
import { migrate } from 'postbox/sql';
import { startPostgres, type PgServer } from '../support/postgres.ts';

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
       FROM information_schema.columns WHERE table_schema = 'outbox' AND table_name IN ('job', 'attempt', 'schedule_run')`,
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
  const drift = await verifyOutboxSchema(client);
  assert.deepEqual(
    drift.map((d) => d.type + ':' + ('column' in d ? d.column : 'index' in d ? d.index : 'constraint' in d ? d.constraint : '')).sort(),
    ['changed_column:kind', 'missing_column:correlation_id', 'missing_constraint:job_running_has_lease', 'missing_index:job_claimable', 'missing_index:job_correlation'].sort(),
  );
  await client.query('DROP SCHEMA outbox CASCADE');
  assert.deepEqual(await verifyOutboxSchema(client), [{ type: 'missing_table', table: 'job' }, { type: 'missing_table', table: 'attempt' }, { type: 'missing_table', table: 'schedule_run' }]);
  await client.end();
});
