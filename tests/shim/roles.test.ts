// examples/roles/roles.sql applied with psql to a real PostgreSQL: the application role can
// enqueue and read but not change or delete jobs; the worker role runs the outbox; each role
// carries its guardrail settings.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { after, before, test } from 'node:test';
import pg from 'pg';
import { z } from 'zod';
import { createOutbox, defineJob, ok, runSweep, type OutboxEvent } from 'postbox';
import { listJobs } from 'postbox/inspect';
import { createPgConnector } from 'postbox/pg';
import { migrate } from 'postbox/sql';
import { runUntilIdle } from 'postbox/testing';
import { startPostgres, type PgServer } from '../support/postgres.ts';

const rolesSql = path.join(path.dirname(fileURLToPath(import.meta.url)), '../../examples/roles/roles.sql');
let server: PgServer;
let ownerUrl: string;
const as = (user: string) => {
  const u = new URL(ownerUrl);
  u.username = user;
  u.password = 'secret';
  return u.toString();
};

const note = defineJob({
  kind: 'roles.note',
  payload: z.object({ body: z.string() }),
  timeoutMs: 5_000,
  handle: async ({ body }, ctx) => {
    await ctx.db.query('INSERT INTO public.note (body) VALUES ($1)', [body]);
    return ok();
  },
});

before(async () => {
  server = await startPostgres();
  ownerUrl = await server.createDatabase('roles');
  const owner = new pg.Client({ connectionString: ownerUrl });
  await owner.connect();
  await migrate(owner);
  await owner.query('CREATE TABLE public.note (id serial PRIMARY KEY, body text NOT NULL)');
  await owner.end();
  // Custom names through psql variables, as the file's header shows.
  await promisify(execFile)('psql', ['-X', '-v', 'ON_ERROR_STOP=1', '-v', 'worker=pb_worker', '-v', 'app=pb_app', '-f', rolesSql, ownerUrl]);
  const admin = new pg.Client({ connectionString: ownerUrl });
  await admin.connect();
  await admin.query(`ALTER ROLE pb_worker PASSWORD 'secret'; ALTER ROLE pb_app PASSWORD 'secret'`);
  await admin.query('GRANT INSERT ON public.note TO pb_worker; GRANT USAGE ON SEQUENCE public.note_id_seq TO pb_worker');
  await admin.end();
});
after(async () => {
  await server?.stop();
});

test('the roles file runs twice without error (it creates roles only when missing)', async () => {
  await promisify(execFile)('psql', ['-X', '-v', 'ON_ERROR_STOP=1', '-v', 'worker=pb_worker', '-v', 'app=pb_app', '-f', rolesSql, ownerUrl]);
});

test('the worker role may read, insert and update every table the outbox uses', async () => {
  const owner = new pg.Client({ connectionString: ownerUrl });
  await owner.connect();
  try {
    // (has_table_privilege with a list is true if any one is held: each is asked on its own.)
    // Every table the migrations create but the migrator's own record: a table added later
    // without a grant in the roles file fails here, not in production.
    const { rows } = await owner.query(
      `SELECT c.relname AS table, (SELECT bool_and(has_table_privilege('pb_worker', c.oid, p)) FROM unnest(ARRAY['SELECT', 'INSERT', 'UPDATE']) p) AS worker
         FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'outbox' AND c.relkind = 'r' AND c.relname <> 'schema_migration' ORDER BY 1`,
    );
    assert.deepEqual(rows.map((r) => r.table), ['attempt', 'index_baseline', 'job', 'job_edge', 'kind_slot', 'schedule_run', 'webhook_endpoint']);
    for (const r of rows) assert.equal(r.worker, true, `pb_worker on outbox.${r.table}`);
  } finally {
    await owner.end();
  }
});

test('the application role enqueues and reads, and cannot update or delete jobs', async () => {
  const app = new pg.Client({ connectionString: as('pb_app') });
  await app.connect();
  try {
    const outbox = createOutbox({ jobs: [note], connect: createPgConnector(as('pb_app')) });
    const first = await outbox.transaction(app, (_tx, enqueue) => enqueue(note, { payload: { body: 'hello' }, dedupeKey: 'k1' }));
    assert.equal(first.status, 'created');
    const again = await outbox.transaction(app, (_tx, enqueue) => enqueue(note, { payload: { body: 'hello' }, dedupeKey: 'k1' }));
    assert.equal(again.status, 'exists', 'the dedupe re-read works with SELECT alone');
    // A child of that job: its parent's state read, the child written waiting, its edge inserted, with no UPDATE.
    const child = await outbox.transaction(app, (_tx, enqueue) => enqueue(note, { payload: { body: 'after' }, dependsOn: [(first as { id: string }).id] }));
    assert.equal(child.status, 'created');
    assert.equal((await app.query('SELECT status, waiting_on FROM outbox.job WHERE id = $1', [(child as { id: string }).id])).rows[0].status, 'waiting');
    assert.equal((await listJobs(app, {})).jobs.length, 2);
    await assert.rejects(app.query(`UPDATE outbox.job SET status = 'succeeded'`), /permission denied/);
    await assert.rejects(app.query('DELETE FROM outbox.job'), /permission denied/);
    await assert.rejects(app.query('DELETE FROM outbox.attempt'), /permission denied/);
    assert.equal((await app.query('SHOW idle_in_transaction_session_timeout')).rows[0].idle_in_transaction_session_timeout, '1min');
  } finally {
    await app.end();
  }
});

test('the worker role runs the outbox under its guardrails', async () => {
  const outbox = createOutbox({ jobs: [note], connect: createPgConnector(as('pb_worker')) });
  await runUntilIdle(outbox);
  const owner = new pg.Client({ connectionString: ownerUrl });
  await owner.connect();
  try {
    // The note and its child (the application role's dependsOn test): the worker's settle released the child.
    assert.deepEqual((await owner.query('SELECT status, attempts FROM outbox.job')).rows, [{ status: 'succeeded', attempts: 1 }, { status: 'succeeded', attempts: 1 }]);
    assert.deepEqual((await owner.query('SELECT body FROM public.note ORDER BY id')).rows, [{ body: 'hello' }, { body: 'after' }], 'the child ran after its parent');
  } finally {
    await owner.end();
  }
  const worker = new pg.Client({ connectionString: as('pb_worker') });
  await worker.connect();
  try {
    const show = async (name: string) => (await worker.query(`SELECT current_setting($1) AS v`, [name])).rows[0].v;
    assert.equal(await show('idle_in_transaction_session_timeout'), '1min');
    assert.equal(await show('lock_timeout'), '5s');
    assert.equal(await show('statement_timeout'), '14min');
    assert.equal(await show('jit'), 'off');
    if (Number(await show('server_version_num')) >= 170000) assert.equal(await show('transaction_timeout'), '15min');
    // The cron handler records each schedule's last occurrence (catch-up after missed ticks):
    // once to insert, once to update.
    await worker.query(`INSERT INTO outbox.schedule_run (name, last_at, updated_at) VALUES ('weekly', now(), now())
                        ON CONFLICT (name) DO UPDATE SET last_at = EXCLUDED.last_at`);
    await worker.query(`INSERT INTO outbox.schedule_run (name, last_at, updated_at) VALUES ('weekly', now(), now())
                        ON CONFLICT (name) DO UPDATE SET last_at = EXCLUDED.last_at`);
    // The default privileges reach a table a later migration would add.
    const owner2 = new pg.Client({ connectionString: ownerUrl });
    await owner2.connect();
    await owner2.query('CREATE TABLE outbox.later (id int)');
    await owner2.end();
    await worker.query('INSERT INTO outbox.later VALUES (1)');
  } finally {
    await worker.end();
  }
});

test('the worker role rebuilds a bloated index on PostgreSQL 17 (MAINTAIN); before 17 the sweep says it may not, once per cooldown', async () => {
  const events: OutboxEvent[] = [];
  const outbox = createOutbox({ jobs: [note], connect: createPgConnector(as('pb_worker')), events: (e) => events.push(e) });
  // The first sweep takes the baselines, as the worker.
  assert.deepEqual((await runSweep(outbox)).failedSteps, []);
  const owner = new pg.Client({ connectionString: ownerUrl });
  await owner.connect();
  try {
    const baseline = Number((await owner.query(`SELECT baseline_bytes FROM outbox.index_baseline WHERE name = 'job_pkey'`)).rows[0].baseline_bytes);
    assert.ok(baseline > 0);
    // 400,000 jobs come and go: the primary key keeps their pages (well past 8 MiB).
    await owner.query(
      `INSERT INTO outbox.job (id, kind, status, payload, due_at, created_at, updated_at, finished_at, attempts, attempt_seq)
       SELECT gen_random_uuid(), 'roles.note', 'succeeded', '{}'::jsonb, now(), now(), now(), now(), 1, 1 FROM generate_series(1, 400000)`,
    );
    await owner.query(`DELETE FROM outbox.job WHERE status = 'succeeded' AND payload = '{}'::jsonb`);
    await owner.query('VACUUM outbox.job');
    const bloated = Number((await owner.query(`SELECT pg_relation_size('outbox.job_pkey') AS b`)).rows[0].b);
    assert.ok(bloated >= 2 * baseline && bloated - baseline >= 8 * 1024 * 1024, `job_pkey ${bloated} bytes against a baseline of ${baseline}`);
    const pg17 = Number((await owner.query('SHOW server_version_num')).rows[0].server_version_num) >= 170000;
    const report = await runSweep(outbox);
    assert.deepEqual(report.failedSteps, []);
    const refused = events.filter((e) => e.type === 'compaction_refused');
    const pkeyBytes = Number((await owner.query(`SELECT pg_relation_size('outbox.job_pkey') AS b`)).rows[0].b);
    if (pg17) {
      assert.ok(report.rebuiltIndexes.includes('job_pkey'), JSON.stringify(report.rebuiltIndexes));
      assert.deepEqual(refused, []);
      assert.ok(pkeyBytes < 1024 * 1024, `job_pkey ${pkeyBytes} bytes after its rebuild`);
    } else {
      assert.deepEqual(report.rebuiltIndexes, []);
      assert.equal(refused.length, 1, JSON.stringify(refused));
      assert.match((refused[0] as { error: string }).error, /must be owner/);
      // A refusal starts that index's cooldown: later sweeps try each other bloated index once,
      // then stop trying (and warning).
      for (let i = 0; i < 4; i++) await runSweep(outbox);
      const indexes = events.filter((e) => e.type === 'compaction_refused').map((e) => (e as { index: string }).index);
      assert.ok(indexes.includes('job_pkey') && indexes.length <= 4, JSON.stringify(indexes));
      assert.equal(new Set(indexes).size, indexes.length, `each refused once: ${JSON.stringify(indexes)}`);
      assert.ok(pkeyBytes > 4 * 1024 * 1024, 'the index is as bloated as it was');
    }
  } finally {
    await owner.end();
  }
});

test('the worker role analyzes a table grown past its statistics on PostgreSQL 17 (MAINTAIN); before 17 the sweep leaves it to autovacuum', async () => {
  const events: OutboxEvent[] = [];
  const outbox = createOutbox({ jobs: [note], connect: createPgConnector(as('pb_worker')), events: (e) => events.push(e) });
  const owner = new pg.Client({ connectionString: ownerUrl });
  await owner.connect();
  try {
    // Never analyzed (a truncated table counts as new), 60,000 jobs: about 2,000 pages.
    await owner.query('TRUNCATE outbox.job, outbox.attempt, outbox.job_edge');
    await owner.query(
      `INSERT INTO outbox.job (id, kind, status, payload, due_at, created_at, updated_at, finished_at, attempts, attempt_seq)
       SELECT gen_random_uuid(), 'roles.note', 'succeeded', '{}'::jsonb, now(), now(), now(), now(), 1, 1 FROM generate_series(1, 60000)`,
    );
    const pg17 = Number((await owner.query('SHOW server_version_num')).rows[0].server_version_num) >= 170000;
    const report = await runSweep(outbox);
    assert.deepEqual(report.failedSteps, []);
    const tuples = async () => Number((await owner.query(`SELECT reltuples FROM pg_class WHERE oid = 'outbox.job'::regclass`)).rows[0].reltuples);
    if (pg17) {
      assert.deepEqual(report.analyzedTables, ['job']);
      assert.ok((await tuples()) > 50_000);
    } else {
      // Not the owner, no MAINTAIN: not tried, not reported as done.
      assert.deepEqual(report.analyzedTables, []);
      assert.deepEqual(events.filter((e) => e.type === 'table_analyzed'), []);
      assert.equal(await tuples(), -1);
    }
  } finally {
    await owner.query('TRUNCATE outbox.job, outbox.attempt, outbox.job_edge');
    await owner.end();
  }
});
