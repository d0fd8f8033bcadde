// Named outboxes against a real PostgreSQL: the default outbox and two named ones (`billing`,
// `shipping`) in one database. Inside workerd (tests/shim/fixtures/named-worker.ts): enqueue,
// drain, recovery, operator actions, schedules, webhooks, inspection and the dashboard, none
// seeing another outbox's rows. In Node: migrate per name, typed errors for bad names,
// prepared statements of two outboxes on one connection, drizzle, and the command line.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, beforeEach, describe, test } from 'node:test';
import pg from 'pg';
import { z } from 'zod';
import { createOutbox, defineJob, ok, PostboxError, runDrain, type Connector } from 'postbox';
import { createDashboard } from 'postbox/dashboard';
import { outboxTables, verifyOutboxSchema } from 'postbox/drizzle';
import { countJobs, getJob, listJobs } from 'postbox/inspect';
import { createPgConnector } from 'postbox/pg';
import { migrate, migrationLockKey, MIGRATION_LOCK_KEY, OUTBOX_MIGRATIONS, outboxMigrations, outboxSchemaName } from 'postbox/sql';
import { outboxSql } from '../../js-shim/src/stores/pg/sql/index.ts';
import { startPostgres, type PgServer } from '../support/postgres.ts';
import { startWorker, type TestWorker } from '../support/worker.ts';
import { attemptLedger } from '../../js-shim/src/stores/pg/sql/attempts.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const BIN = path.join(root, 'js-shim/dist/cli/main.js');
const NAMED = ['billing', 'shipping'] as const;
const ALL = ['default', ...NAMED] as const;
type Name = (typeof ALL)[number];
/** The schema of each outbox, as SQL names it in these tests' own queries. */
const SCHEMA: Record<Name, string> = { default: 'outbox', billing: 'outbox_billing', shipping: 'outbox_shipping' };

let server: PgServer;
let url: string;
let client: pg.Client;
let worker: TestWorker;

const sql = async (text: string, values?: unknown[]) => (await client.query(text, values)).rows;
const post = async (pathname: string, body: unknown = {}) => {
  const res = await worker.fetch(pathname, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
  const text = await res.text();
  assert.equal(res.status, 200, `${pathname}: ${text}`);
  return JSON.parse(text);
};
const enqueue = (outbox: Name, note: string, extra: Record<string, unknown> = {}) => post('/enqueue', { outbox, note, ...extra });
const jobsIn = async (name: Name) => sql(`SELECT id, status, payload->>'note' AS note, dedupe_key FROM ${SCHEMA[name]}.job ORDER BY created_at, id`);

before(async () => {
  server = await startPostgres();
  url = await server.createDatabase('named');
  client = new pg.Client({ connectionString: url });
  await client.connect();
  await migrate(client);
  for (const name of NAMED) await migrate(client, { name });
  await client.query('CREATE TABLE public.ran (outbox text NOT NULL, job_id uuid NOT NULL, note text NOT NULL)');
  worker = await startWorker({ entry: path.join(root, 'tests/shim/fixtures/named-worker.ts'), databaseUrl: url });
});
after(async () => {
  await worker?.dispose();
  await client?.end();
  await server?.stop();
});
beforeEach(async () => {
  for (const name of ALL) await sql(`DELETE FROM ${SCHEMA[name]}.job; DELETE FROM ${SCHEMA[name]}.schedule_run; DELETE FROM ${SCHEMA[name]}.webhook_endpoint`);
  await sql('DELETE FROM public.ran');
  await post('/clock', { offsetMs: 0 });
  await worker.fetch('/events');
});

describe('names', () => {
  test('a name is its own schema; the default outbox keeps schema outbox', async () => {
    assert.deepEqual(await post('/names', {}), { name: null, schema: 'outbox' });
    assert.deepEqual(await post('/names', { outbox: 'billing' }), { name: 'billing', schema: 'outbox_billing' });
    assert.equal(outboxSchemaName(), 'outbox');
    assert.equal(outboxSchemaName('shipping'), 'outbox_shipping');
    const schemas = (await sql(`SELECT nspname FROM pg_namespace WHERE nspname LIKE 'outbox%' ORDER BY 1`)).map((r) => r.nspname);
    assert.deepEqual(schemas, ['outbox', 'outbox_billing', 'outbox_shipping']);
  });

  test('a bad name is a typed invalid_config error everywhere, before anything touches the database', async () => {
    const connect: Connector = async () => {
      throw new Error('must not connect');
    };
    const bad = ['', 'Billing', '1st', 'a-b', 'a b', 'x'.repeat(33), 'billing"; DROP SCHEMA outbox; --', 42];
    const typed = (fn: () => unknown) => assert.throws(fn, (e: unknown) => e instanceof PostboxError && e.code === 'invalid_config', String(fn));
    const typedAsync = (fn: () => Promise<unknown>) => assert.rejects(fn, (e: unknown) => e instanceof PostboxError && e.code === 'invalid_config');
    for (const name of bad) {
      typed(() => createOutbox({ jobs: [], connect, name: name as string }));
      typed(() => outboxMigrations(name as string));
      typed(() => outboxTables(name as string));
      typed(() => createDashboard(() => createOutbox({ jobs: [], connect }), { authorize: () => true, name: name as string }));
      await typedAsync(() => migrate(client, { name: name as string }));
      await typedAsync(() => listJobs(client, { outbox: name as string }));
      await typedAsync(() => verifyOutboxSchema(client, { name: name as string }));
    }
    // The longest name (32 characters) is accepted.
    assert.equal(createOutbox({ jobs: [], connect, name: 'a'.repeat(32) }).schema, `outbox_${'a'.repeat(32)}`);
    // Nothing was created by the refused calls.
    const schemas = (await sql(`SELECT count(*)::int AS n FROM pg_namespace WHERE nspname LIKE 'outbox%'`))[0].n;
    assert.equal(schemas, 3);
  });

  test('prepared statements: a named outbox\'s are named per outbox, within PostgreSQL\'s 63 bytes; the default\'s keep their names', () => {
    const longest = 'z'.repeat(32);
    const statements = (name?: string) => Object.values(outboxSql(name)).filter((v): v is { name: string; text: string } => typeof v === 'object' && v !== null && 'text' in v);
    const names = (name?: string) => statements(name).map((s) => s.name);
    assert.ok(names().includes('postbox_claim_due'));
    assert.ok(names('billing').includes('billing:claim_due'));
    for (const n of names(longest)) assert.ok(Buffer.byteLength(n) <= 63, `${n} is ${Buffer.byteLength(n)} bytes`);
    const all = [...names(), ...names('billing'), ...names('shipping'), ...names(longest)];
    assert.equal(new Set(all).size, all.length, 'every statement name is unique across outboxes');
    // Built once per name: the same object comes back.
    assert.equal(outboxSql('billing'), outboxSql('billing'));
    for (const s of statements('billing')) {
      assert.match(s.text, /"outbox_billing"\./);
      assert.doesNotMatch(s.text, /(^|[^_"])outbox\./);
    }
  });
});

describe('migrate', () => {
  test('migrate twice is idempotent, per name; each outbox records its own migrations under its own lock', async () => {
    for (const name of NAMED) assert.deepEqual(await migrate(client, { name }), { applied: [] });
    assert.deepEqual(await migrate(client), { applied: [] });
    const fresh = await migrate(client, { name: 'fresh' });
    assert.deepEqual(fresh.applied, OUTBOX_MIGRATIONS.map((m) => m.version));
    assert.deepEqual(await migrate(client, { name: 'fresh' }), { applied: [] });
    const versions = (schema: string) => sql(`SELECT version FROM ${schema}.schema_migration ORDER BY version`).then((r) => r.map((x) => x.version));
    assert.deepEqual(await versions('outbox_fresh'), OUTBOX_MIGRATIONS.map((m) => m.version));
    assert.deepEqual(await versions('outbox'), OUTBOX_MIGRATIONS.map((m) => m.version));
    assert.deepEqual(await verifyOutboxSchema(client, { name: 'fresh' }), []);
    // Each name locks on its own key; the default keeps its key.
    assert.equal(migrationLockKey(), MIGRATION_LOCK_KEY);
    const keys = new Set([migrationLockKey(), migrationLockKey('billing'), migrationLockKey('shipping'), migrationLockKey('fresh')]);
    assert.equal(keys.size, 4);
    for (const k of keys) assert.ok(BigInt(k) >= -(2n ** 63n) && BigInt(k) < 2n ** 63n);
    await sql('DROP SCHEMA outbox_fresh CASCADE');
  });

  test('two concurrent migrators of one new name apply each migration exactly once', async () => {
    const a = new pg.Client({ connectionString: url });
    const b = new pg.Client({ connectionString: url });
    await a.connect();
    await b.connect();
    try {
      const [ra, rb] = await Promise.all([migrate(a, { name: 'race' }), migrate(b, { name: 'race' })]);
      assert.deepEqual([...ra.applied, ...rb.applied].sort((x, y) => x - y), OUTBOX_MIGRATIONS.map((m) => m.version));
    } finally {
      await a.end();
      await b.end();
      await sql('DROP SCHEMA IF EXISTS outbox_race CASCADE');
    }
  });

  test('OUTBOX_MIGRATIONS stays the default schema\'s text; outboxMigrations(name) names the named schema instead', () => {
    assert.equal(outboxMigrations(), OUTBOX_MIGRATIONS);
    const billing = outboxMigrations('billing');
    assert.equal(outboxMigrations('billing'), billing);
    assert.equal(billing.length, OUTBOX_MIGRATIONS.length);
    for (const [i, m] of billing.entries()) {
      const d = OUTBOX_MIGRATIONS[i]!;
      assert.equal(m.version, d.version);
      assert.equal(m.statements.length, d.statements.length);
      for (const [j, s] of m.statements.entries()) {
        // The same statement, only the schema swapped: undo the swap and compare.
        assert.equal(s.replaceAll('"outbox_billing"', 'outbox'), d.statements[j]);
      }
    }
    assert.match(billing[0]!.statements[0]!, /CREATE SCHEMA IF NOT EXISTS "outbox_billing"/);
  });
});

describe('isolation inside workerd', () => {
  test('the same dedupe key in two outboxes is two jobs; each drain runs only its own', async () => {
    const results = await Promise.all(ALL.map((name) => enqueue(name, `hello ${name}`, { dedupeKey: 'same-key' })));
    for (const r of results) assert.equal(r.status, 'created');
    assert.equal(new Set(results.map((r) => r.id)).size, 3);
    // Again in billing: the key is held there, so it exists; the others are untouched.
    assert.equal((await enqueue('billing', 'hello billing', { dedupeKey: 'same-key' })).status, 'exists');
    assert.equal((await enqueue('billing', 'another payload', { dedupeKey: 'same-key' })).status, 'dedupe_conflict');
    for (const name of ALL) assert.equal((await jobsIn(name)).length, 1);

    const report = await post('/drain', { outbox: 'billing' });
    assert.equal(report.succeeded, 1);
    assert.deepEqual(await sql('SELECT outbox, note FROM public.ran'), [{ outbox: 'billing', note: 'hello billing' }]);
    assert.equal((await jobsIn('billing'))[0].status, 'succeeded');
    assert.equal((await jobsIn('default'))[0].status, 'pending');
    assert.equal((await jobsIn('shipping'))[0].status, 'pending');

    // Draining an outbox with nothing due claims nothing, whatever waits elsewhere.
    assert.equal((await post('/drain', { outbox: 'billing' })).claimed, 0);
    assert.equal((await post('/drain', { outbox: 'default' })).succeeded, 1);
    assert.equal((await post('/drain', { outbox: 'shipping' })).succeeded, 1);
    assert.deepEqual((await sql('SELECT outbox FROM public.ran ORDER BY outbox')).map((r) => r.outbox), ['billing', 'default', 'shipping']);
    const attempts: number[] = [];
    for (const name of ALL) attempts.push((await sql(`SELECT count(*)::int AS n FROM ${attemptLedger(SCHEMA[name]!)} a`))[0].n);
    assert.deepEqual(attempts, [1, 1, 1]);
  });

  test('recovery of expired leases (the sweep\'s first step) touches only its own outbox', async () => {
    const ids: Record<string, string> = {};
    for (const name of ALL) ids[name] = (await enqueue(name, `crash ${name}`)).id;
    // Each job looks like its isolate died mid-attempt: claimed, lease already expired.
    for (const name of ALL) {
      const s = SCHEMA[name];
      await sql(`UPDATE ${s}.job SET status = 'running', attempt_seq = attempt_seq + 1, lease_expires_at = now() - interval '1 second' WHERE id = $1`, [ids[name]]);
      await sql(`INSERT INTO ${s}.attempt (job_id, seq, kind, started_at, lease_expires_at) SELECT id, attempt_seq, kind, now() - interval '1 minute', lease_expires_at FROM ${s}.job WHERE id = $1`, [ids[name]]);
    }
    const recovered = await post('/recover', { outbox: 'shipping' });
    assert.equal(recovered.recovered, 1, JSON.stringify(recovered));
    assert.equal((await jobsIn('shipping'))[0].status, 'retrying');
    assert.equal((await jobsIn('default'))[0].status, 'running');
    assert.equal((await jobsIn('billing'))[0].status, 'running');
    const outcomes = await sql(`SELECT outcome FROM outbox_shipping.attempt`);
    assert.deepEqual(outcomes, [{ outcome: 'crash' }]);
    assert.deepEqual(await sql(`SELECT outcome FROM outbox_billing.attempt`), [{ outcome: null }]);
  });

  test('operator actions reach only their own outbox: an id from another outbox is not found', async () => {
    const d = (await enqueue('default', 'd')).id;
    const b = (await enqueue('billing', 'b')).id;
    const s = (await enqueue('shipping', 's', { tenantKey: 'acme' })).id;
    const cancelled = await post('/operate', { outbox: 'billing', action: 'cancel', ids: [b, d, s] });
    assert.deepEqual(cancelled.map((r: { status: string }) => r.status), ['ok', 'not_found', 'not_found']);
    assert.equal((await jobsIn('billing'))[0].status, 'cancelled');
    assert.equal((await jobsIn('default'))[0].status, 'pending');
    assert.equal((await jobsIn('shipping'))[0].status, 'pending');
    // Replay in the default outbox does not see billing's cancelled job.
    const replayed = await post('/operate', { outbox: 'default', action: 'replay', ids: [b] });
    assert.deepEqual(replayed.map((r: { status: string }) => r.status), ['not_found']);
    assert.deepEqual((await post('/operate', { outbox: 'billing', action: 'replay', ids: [b] }))[0].status, 'ok');
    // Erasing tenant acme in billing leaves shipping's acme job alone.
    assert.deepEqual(await post('/operate', { outbox: 'billing', action: 'erase', tenantKey: 'acme' }), [{ erased: 0 }]);
    assert.deepEqual(await post('/operate', { outbox: 'shipping', action: 'erase', tenantKey: 'acme' }), [{ erased: 1 }]);
    assert.equal((await jobsIn('shipping')).length, 0);
    assert.equal((await jobsIn('default')).length, 1);
  });

  test('schedules: one tick enqueues each outbox\'s occurrence in its own schema, recorded in its own schedule_run', async () => {
    const time = Date.parse('2026-11-30T10:05:00.000Z');
    await post('/clock', { offsetMs: time - Date.now() });
    const result = await worker.scheduled({ cron: '*/5 * * * *', scheduledTime: time });
    assert.equal(result.outcome, 'ok');
    const events = await (await worker.fetch('/events')).json();
    const reports = events.filter((e: { type: string }) => e.type === 'test_report');
    assert.deepEqual(reports.map((r: { outbox: string }) => r.outbox), ['default', 'billing', 'shipping']);
    for (const r of reports) assert.deepEqual(r.report.schedules.map((s: { key: string; status: string }) => [s.key, s.status]), [['schedule:tick:2026-11-30T10:05:00.000Z', 'enqueued']]);
    for (const name of ALL) {
      const jobs = await jobsIn(name);
      assert.deepEqual(jobs.map((j) => j.dedupe_key), ['schedule:tick:2026-11-30T10:05:00.000Z'], name);
      const runs = await sql(`SELECT name, last_at FROM ${SCHEMA[name]}.schedule_run`);
      assert.equal(runs.length, 1, name);
      assert.equal(new Date(runs[0].last_at).toISOString(), '2026-11-30T10:05:00.000Z');
    }
    // The same tick again (delivered twice): nothing new anywhere.
    await worker.scheduled({ cron: '*/5 * * * *', scheduledTime: time });
    for (const name of ALL) assert.equal((await jobsIn(name)).length, 1);
    // Only the default outbox's record is moved back: billing and shipping do not follow.
    await sql(`UPDATE outbox.schedule_run SET last_at = '2026-11-30T09:55:00Z'`);
    await worker.scheduled({ cron: '*/5 * * * *', scheduledTime: time });
    assert.equal((await jobsIn('default')).length, 2, 'the default outbox caught 10:00 up');
    assert.equal((await jobsIn('billing')).length, 1);
    assert.equal((await jobsIn('shipping')).length, 1);
  });

  test('webhooks: an endpoint\'s breaker state lives in its own outbox\'s webhook_endpoint table', async () => {
    assert.equal((await post('/enqueue-hook', { outbox: 'billing', endpoint: 'ep-billing' })).status, 'created');
    assert.equal((await post('/drain', { outbox: 'billing' })).succeeded, 1);
    assert.deepEqual(await sql('SELECT id FROM outbox_billing.webhook_endpoint'), [{ id: 'ep-billing' }]);
    assert.deepEqual(await sql('SELECT id FROM outbox.webhook_endpoint'), []);
    assert.deepEqual(await sql('SELECT id FROM outbox_shipping.webhook_endpoint'), []);
    assert.deepEqual((await post('/inspect', { outbox: 'billing' })).endpoints, ['ep-billing']);
    assert.deepEqual((await post('/inspect', { outbox: 'default' })).endpoints, []);
  });

  test('inspection reads only the outbox it names', async () => {
    await enqueue('default', 'only in default');
    await enqueue('billing', 'b1');
    await enqueue('billing', 'b2');
    const seen = async (outbox: Name) => (await post('/inspect', { outbox })).jobs.map((j: { note: string }) => j.note);
    assert.deepEqual(await seen('default'), ['only in default']);
    assert.deepEqual(await seen('billing'), ['b1', 'b2']);
    assert.deepEqual(await seen('shipping'), []);
    const backlog = (await post('/inspect', { outbox: 'billing' })).backlog;
    assert.deepEqual(backlog.map((b: { kind: string; pending: number }) => [b.kind, b.pending]), [['test.note', 2]]);
    // Health reads the named outbox's own four tables.
    assert.deepEqual((await post('/inspect', { outbox: 'billing' })).healthTables, ['attempt', 'index_baseline', 'job', 'job_edge', 'kind_slot', 'schedule_run', 'webhook_endpoint'].map((t) => `outbox_billing.${t}`));
    // The same from Node, with postbox/inspect directly.
    assert.equal((await countJobs(client, { outbox: 'billing' })).pending, 2);
    assert.equal((await countJobs(client)).pending, 1);
    const b1 = (await jobsIn('billing'))[0].id;
    assert.equal((await getJob(client, { id: b1, outbox: 'billing' }))?.id, b1);
    assert.equal(await getJob(client, { id: b1 }), null);
  });

  test('the dashboard with a name shows and acts on that outbox only; a name its outbox does not carry fails', async () => {
    await enqueue('default', 'default job');
    const b = (await enqueue('billing', 'billing job')).id;
    const billingPage = await worker.fetch('/billing/jobs');
    const billingHtml = await billingPage.text();
    assert.equal(billingPage.status, 200, billingHtml);
    assert.ok(billingHtml.includes(b), 'the billing job is listed');
    assert.match(billingHtml, /outbox billing/);
    const defaultHtml = await (await worker.fetch('/main/jobs')).text();
    assert.ok(!defaultHtml.includes(b), 'the default dashboard does not list billing\'s job');
    const overview = await (await worker.fetch('/billing/')).text();
    // Its tables' health is its own schema's.
    for (const t of ['job', 'attempt', 'kind_slot', 'job_edge', 'schedule_run', 'webhook_endpoint', 'index_baseline']) assert.match(overview, new RegExp(`<tr><td>outbox_billing\\.${t}</td>`));
    assert.doesNotMatch(overview, /<td>outbox\.job<\/td>/);
    const one = await worker.fetch(`/billing/jobs/${b}`);
    assert.equal(one.status, 200);
    assert.equal((await worker.fetch(`/main/jobs/${b}`)).status, 404);

    // An action through the billing dashboard: cancel the job (CSRF cookie and token from the page).
    const cookie = billingPage.headers.get('set-cookie')!.split(';')[0]!;
    const token = /name="csrf" value="([^"]+)"/.exec(billingHtml)![1]!;
    const form = new URLSearchParams({ csrf: token, op: 'cancel:selected', id: b, return: '/billing/jobs' });
    const res = await worker.fetch('/billing/actions', { method: 'POST', body: form, headers: { cookie, 'content-type': 'application/x-www-form-urlencoded', 'sec-fetch-site': 'same-origin' }, redirect: 'manual' });
    assert.equal(res.status, 303, await res.text());
    assert.equal((await jobsIn('billing'))[0].status, 'cancelled');
    assert.equal((await jobsIn('default'))[0].status, 'pending');

    const mismatched = await worker.fetch('/mismatched/jobs');
    assert.equal(mismatched.status, 500);
    assert.match(await mismatched.text(), /name is &quot;billing&quot;, but outboxFor returns the outbox &quot;shipping&quot;/);
  });
});

describe('Node', () => {
  test('two outboxes on ONE connection: their prepared statements do not collide', async () => {
    const shared = new pg.Client({ connectionString: url });
    await shared.connect();
    // Every session either outbox opens is this one client, kept open across sessions.
    const connect: Connector = async () => ({ db: shared, close: async () => undefined, destroy: async () => undefined });
    const job = defineJob({ kind: 'test.node', payload: z.object({ n: z.number() }), timeoutMs: 1_000, handle: async () => ok() });
    try {
      const outboxes = [createOutbox({ jobs: [job], connect }), createOutbox({ jobs: [job], connect, name: 'billing' }), createOutbox({ jobs: [job], connect, name: 'shipping' })];
      for (const [i, outbox] of outboxes.entries()) await outbox.transaction(shared, (_tx, enqueue) => enqueue(job, { payload: { n: i } }));
      for (const outbox of outboxes) assert.equal((await runDrain(outbox)).succeeded, 1);
      // Again, now that each outbox's statements are prepared on the connection.
      for (const outbox of outboxes) await outbox.transaction(shared, (_tx, enqueue) => enqueue(job, { payload: { n: 9 } }));
      for (const outbox of outboxes) assert.equal((await runDrain(outbox)).succeeded, 1);
      const prepared = (await shared.query(`SELECT name FROM pg_prepared_statements ORDER BY name`)).rows.map((r) => r.name);
      assert.ok(prepared.includes('postbox_claim_due') && prepared.includes('billing:claim_due') && prepared.includes('shipping:claim_due'), prepared.join(', '));
    } finally {
      await shared.end();
    }
  });

  test('postbox/testing: createOutboxTestDatabase({ names }) migrates named outboxes; runUntilIdle drives only its own', async () => {
    const { createOutboxTestDatabase, createTestClock, runUntilIdle } = await import('postbox/testing');
    const t = await createOutboxTestDatabase({ names: ['billing'] });
    try {
      const clock = createTestClock();
      const ran: string[] = [];
      const job = defineJob({ kind: 'kit.job', payload: z.object({ who: z.string() }), timeoutMs: 1_000, handle: async ({ who }) => (ran.push(who), ok()) });
      const billing = createOutbox({ name: 'billing', jobs: [job], connect: t.connect, clock });
      const main = createOutbox({ jobs: [job], connect: t.connect, clock });
      await billing.transaction(t.db, (_tx, enqueue) => enqueue(job, { payload: { who: 'billing' }, delayMs: 60_000 }));
      await main.transaction(t.db, (_tx, enqueue) => enqueue(job, { payload: { who: 'default' } }));
      const report = await runUntilIdle(billing, { clock, db: t.db });
      assert.equal(report.succeeded, 1);
      assert.deepEqual(ran, ['billing']);
      assert.equal((await countJobs(t.db, { outbox: 'billing' })).succeeded, 1);
      assert.equal((await countJobs(t.db)).pending, 1);
      await assert.rejects(() => createOutboxTestDatabase({ names: ['Nope'] }), (e: unknown) => e instanceof PostboxError && e.code === 'invalid_config');
    } finally {
      await t.close();
    }
  });

  test('drizzle: outboxTables(name) queries the named schema; verifyOutboxSchema({ name }) checks it', async () => {
    const { drizzle } = await import('drizzle-orm/node-postgres');
    const { eq } = await import('drizzle-orm');
    await enqueue('billing', 'via drizzle');
    const db = drizzle(client);
    const billing = outboxTables('billing');
    assert.equal(outboxTables('billing'), billing);
    const rows = await db.select().from(billing.job).where(eq(billing.job.status, 'pending'));
    assert.deepEqual(rows.map((r) => (r.payload as { note: string }).note), ['via drizzle']);
    assert.deepEqual(await db.select().from(outboxTables().job), []);
    for (const name of NAMED) assert.deepEqual(await verifyOutboxSchema(client, { name }), []);
    assert.deepEqual(await verifyOutboxSchema(client), []);
    // Drift in one named outbox is reported for it alone.
    await sql('DROP INDEX outbox_shipping.job_created');
    try {
      assert.deepEqual(await verifyOutboxSchema(client, { name: 'shipping' }), [{ type: 'missing_index', table: 'job', index: 'job_created' }]);
      assert.deepEqual(await verifyOutboxSchema(client, { name: 'billing' }), []);
      assert.deepEqual(await verifyOutboxSchema(client), []);
    } finally {
      await sql('CREATE INDEX job_created ON outbox_shipping.job (created_at, id)');
    }
    // An outbox never migrated: every table is missing.
    const missing = await verifyOutboxSchema(client, { name: 'nowhere' });
    assert.deepEqual(missing.map((d) => d.type), [...Array(6).fill('missing_table'), 'missing_function']);
  });

  test('the command line: --name on migrate, list, show, status, actions, erase-tenant and verify-schema', async () => {
    // Never skipped: without the built bin this test fails and says why.
    assert.ok(existsSync(BIN), `${BIN} is missing: build the shim first (npm run -w postbox build)`);
    const cli = (args: string[]) =>
      new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve, reject) => {
        const child = spawn(process.execPath, [BIN, ...args], { env: { ...process.env, DATABASE_URL: url }, cwd: root });
        let stdout = '';
        let stderr = '';
        child.stdout.on('data', (c) => (stdout += c));
        child.stderr.on('data', (c) => (stderr += c));
        child.stdin.end();
        child.on('error', reject);
        child.on('close', (code) => resolve({ code, stdout, stderr }));
      });
    const ok0 = (r: { code: number | null; stdout: string; stderr: string }) => assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);

    let r = await cli(['migrate', '--name', 'cli_new', '--json']);
    ok0(r);
    assert.deepEqual(JSON.parse(r.stdout).applied.length, OUTBOX_MIGRATIONS.length);
    assert.equal(JSON.parse(r.stdout).schema, 'outbox_cli_new');
    r = await cli(['migrate', '--name', 'cli_new']);
    ok0(r);
    assert.match(r.stdout, /schema outbox_cli_new is up to date/);
    r = await cli(['verify-schema', '--name', 'cli_new']);
    ok0(r);
    await sql('DROP SCHEMA outbox_cli_new CASCADE');

    const b = (await enqueue('billing', 'cli billing', { tenantKey: 't1' })).id;
    const d = (await enqueue('default', 'cli default')).id;
    r = await cli(['list', '--name', 'billing', '--json']);
    ok0(r);
    assert.deepEqual(JSON.parse(r.stdout).jobs.map((j: { id: string }) => j.id), [b]);
    r = await cli(['list', '--json']);
    assert.deepEqual(JSON.parse(r.stdout).jobs.map((j: { id: string }) => j.id), [d]);
    r = await cli(['--name', 'billing', 'show', b, '--json']);
    ok0(r);
    assert.equal(JSON.parse(r.stdout).job.id, b);
    assert.equal((await cli(['show', b])).code, 1, 'the default outbox has no such job');
    r = await cli(['status', '--name', 'billing', '--json']);
    ok0(r);
    assert.equal(JSON.parse(r.stdout).totals.pending, 1);
    r = await cli(['cancel', '--name', 'shipping', b, '--json']);
    assert.equal(r.code, 1, 'not found in shipping');
    assert.equal(JSON.parse(r.stdout).notFound, 1);
    r = await cli(['cancel', '--name', 'billing', '--status', 'pending', '--yes', '--json']);
    ok0(r);
    assert.equal(JSON.parse(r.stdout).changed, 1);
    assert.equal((await jobsIn('billing'))[0].status, 'cancelled');
    assert.equal((await jobsIn('default'))[0].status, 'pending');
    r = await cli(['erase-tenant', 't1', '--name', 'billing', '--yes', '--json']);
    ok0(r);
    assert.equal(JSON.parse(r.stdout).erased, 1);
    assert.equal((await jobsIn('default')).length, 1);

    r = await cli(['list', '--name', 'never']);
    assert.equal(r.code, 3);
    assert.match(r.stderr, /relation "outbox_never\.job" does not exist .*run `postbox migrate --name never`/);

    r = await cli(['list', '--name', 'Bad-Name']);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /--name.*outbox name/);
    assert.doesNotMatch(r.stderr, /\n\s+at /);
  });
});

describe('roles', () => {
  test('examples/roles/roles.sql with -v schema=outbox_billing grants on that schema only', async () => {
    const { execFile } = await import('node:child_process');
    const { promisify } = await import('node:util');
    const rolesSql = path.join(root, 'examples/roles/roles.sql');
    await promisify(execFile)('psql', ['-X', '-q', '-v', 'ON_ERROR_STOP=1', '-v', 'worker=nb_worker', '-v', 'app=nb_app', '-v', 'schema=outbox_billing', '-f', rolesSql, url]);
    const can = async (role: string, table: string, privilege: string) =>
      (await sql('SELECT has_table_privilege($1, $2, $3) AS ok', [role, table, privilege]))[0].ok as boolean;
    assert.equal(await can('nb_app', 'outbox_billing.job', 'INSERT'), true);
    assert.equal(await can('nb_app', 'outbox_billing.job', 'UPDATE'), false);
    assert.equal(await can('nb_worker', 'outbox_billing.job', 'UPDATE'), true);
    assert.equal(await can('nb_worker', 'outbox_billing.schedule_run', 'INSERT'), true);
    assert.equal(await can('nb_app', 'outbox.job', 'INSERT'), false);
    assert.equal(await can('nb_worker', 'outbox_shipping.job', 'UPDATE'), false);
  });
});

test(`server is ${process.env.POSTBOX_PG ?? 'embedded'}: a named outbox enqueues, drains and settles in its own schema on it`, async () => {
  // The server these tests ran against is the one the environment names.
  const [{ server_version: version }] = await sql('SHOW server_version');
  assert.equal(version, server.serverVersion);
  const ran: number[] = [];
  const job = defineJob({ kind: 'test.server', payload: z.object({ n: z.number() }), timeoutMs: 2_000, handle: async ({ n }) => (ran.push(n), ok()) });
  const shipping = createOutbox({ name: 'shipping', jobs: [job], connect: createPgConnector(url) });
  const created = await shipping.transaction(client, (_tx, enqueue) => enqueue(job, { payload: { n: 7 } }));
  assert.equal(created.status, 'created');
  const id = (created as { id: string }).id;
  const report = await runDrain(shipping);
  assert.equal(report.succeeded, 1);
  assert.deepEqual(ran, [7]);
  assert.deepEqual(await sql(`SELECT id, status, attempts FROM outbox_shipping.job`), [{ id, status: 'succeeded', attempts: 1 }]);
  assert.deepEqual(await sql(`SELECT job_id, outcome FROM ${attemptLedger('outbox_shipping')} a`), [{ job_id: id, outcome: 'ok' }]);
  // Nothing of it reached the other outboxes' schemas.
  for (const name of ['default', 'billing'] as const) {
    assert.deepEqual(await sql(`SELECT id FROM ${SCHEMA[name]}.job`), [], name);
    assert.deepEqual(await sql(`SELECT job_id FROM ${SCHEMA[name]}.attempt`), [], name);
  }
});
