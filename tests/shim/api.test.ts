// The public API in Node against a real PostgreSQL: definition errors, every database handle
// `outbox.transaction` accepts, strict enqueue, the test kit and the inspection queries.
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, test } from 'node:test';
import { drizzle } from 'drizzle-orm/node-postgres';
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { z } from 'zod';
import { createOutbox, defineJob, EnqueueRefusedError, ok, PostboxError, retry, type JobContext } from 'postbox';
import { defineSchedule } from 'postbox/cloudflare';
import { countBacklog, countJobs, evaluateBacklog, getJob, listJobs } from 'postbox/inspect';
import { createPgConnector, createPgPoolConnector } from 'postbox/pg';
import { migrate } from 'postbox/sql';
import { createTestClock, runUntilIdle } from 'postbox/testing';
import { startPostgres, type PgServer } from '../support/postgres.ts';

let server: PgServer;
let url: string;
let pool: pg.Pool;

before(async () => {
  server = await startPostgres();
  url = await server.createDatabase('api');
  pool = new pg.Pool({ connectionString: url, max: 4 });
  const client = await pool.connect();
  await migrate(client);
  await client.query('CREATE TABLE public.note (id serial PRIMARY KEY, body text NOT NULL)');
  client.release();
});
after(async () => {
  await pool?.end();
  await server?.stop();
});
beforeEach(async () => {
  await pool.query('DELETE FROM outbox.job; DELETE FROM public.note');
});

const rejects = (fn: () => unknown, code: string, pattern: RegExp) =>
  assert.throws(fn, (e: unknown) => e instanceof PostboxError && e.code === code && pattern.test(e.message));

let flaky = 0;
const note = defineJob({
  kind: 'api.note',
  payload: z.object({ body: z.string() }),
  timeoutMs: 5_000,
  retry: { backoff: { baseMs: 60_000, maxMs: 600_000 } },
  async handle({ body }, ctx: JobContext) {
    if (body === 'flaky' && flaky++ < 2) return retry({ code: 'not_yet' });
    await ctx.db.query('INSERT INTO public.note (body) VALUES ($1)', [body]);
    return ok();
  },
});

describe('definitions fail fast with typed errors', () => {
  test('defineJob rejects bad timeouts, kinds and schemas', () => {
    const base = { payload: z.object({}), handle: async () => ok() };
    rejects(() => defineJob({ ...base, kind: 'a', timeoutMs: 600_001 }), 'invalid_policy', /timeoutMs/);
    rejects(() => defineJob({ ...base, kind: 'a', timeoutMs: 0 }), 'invalid_policy', /timeoutMs/);
    rejects(() => defineJob({ ...base, kind: 'has space', timeoutMs: 1_000 }), 'invalid_policy', /kind/);
    rejects(() => defineJob({ ...base, kind: 'a', timeoutMs: 1_000, retry: { maxAttempts: 0 } }), 'invalid_policy', /maxAttempts/);
    rejects(() => defineJob({ ...base, kind: 'a', timeoutMs: 1_000, retry: { perCode: { x: { onExhaustion: 'explode' as 'dead' } } } }), 'invalid_policy', /onExhaustion/);
    rejects(() => defineJob({ kind: 'a', timeoutMs: 1_000, payload: {} as never, handle: async () => ok() }), 'invalid_job', /Standard Schema/);
  });

  test('defineSchedule names the bad cron field and value', () => {
    const schedule = (cron: string) => defineSchedule({ cron, job: note, payload: () => ({ body: 'x' }) });
    rejects(() => schedule('0 9 * * 0'), 'invalid_cron', /day-of-week.*'0'/);
    rejects(() => schedule('61 * * * *'), 'invalid_cron', /minute.*'61'/);
    rejects(() => schedule('* * * *'), 'invalid_cron', /5 fields/);
    assert.equal(schedule('0 9 * * MON').name, 'api.note');
  });

  test('createOutbox rejects duplicate kinds and impossible connection budgets', () => {
    const connect = createPgConnector(url);
    rejects(() => createOutbox({ jobs: [note, note], connect }), 'invalid_config', /twice/);
    rejects(() => createOutbox({ jobs: [note], connect, lanes: 9 }), 'invalid_config', /lanes/);
  });
});

describe('outbox.transaction accepts the handles Workers users hold', () => {
  const outbox = () => createOutbox({ jobs: [note], connect: createPgConnector(url) });
  const count = async () => (await pool.query('SELECT count(*)::int AS n FROM outbox.job')).rows[0].n as number;

  test('a pg Pool, a Client, drizzle and Kysely: commit keeps the job, a throw rolls it back', async () => {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    const kysely = new Kysely<any>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: url, max: 1 }) }) });
    const handles: [string, any][] = [['pool', pool], ['client', client], ['drizzle', drizzle(pool)], ['kysely', kysely]];
    for (const [name, db] of handles) {
      const before = await count();
      const result = await outbox().transaction(db, async (_tx, enqueue) => enqueue(note, { payload: { body: name } }));
      assert.equal(result.status, 'created', name);
      assert.equal(await count(), before + 1, name);
      await assert.rejects(outbox().transaction(db, async (_tx, enqueue) => {
        await enqueue(note, { payload: { body: `${name}-rolled-back` } });
        throw new Error('abort');
      }), /abort/);
      assert.equal(await count(), before + 1, `${name}: rolled back`);
    }
    // The caller's own transaction handle works with outbox.enqueue too.
    await kysely.transaction().execute(async (trx) => {
      await sql`INSERT INTO public.note (body) VALUES ('k')`.execute(trx);
      assert.equal((await outbox().enqueue(trx, note, { payload: { body: 'in-kysely-tx' } })).status, 'created');
    });
    await drizzle(pool).transaction(async (tx) => {
      assert.equal((await outbox().enqueue(tx, note, { payload: { body: 'in-drizzle-tx' } })).status, 'created');
    });
    assert.equal(await count(), handles.length + 2);
    await client.end();
    await kysely.destroy();
  });

  test('strictEnqueue throws EnqueueRefusedError and the business write rolls back with it', async () => {
    const strict = createOutbox({ jobs: [note], connect: createPgConnector(url), strictEnqueue: true });
    await assert.rejects(
      strict.transaction(pool, async (tx, enqueue) => {
        await tx.query(`INSERT INTO public.note (body) VALUES ('business')`);
        await enqueue(note, { payload: { body: 42 as unknown as string } });
      }),
      (e: unknown) => e instanceof EnqueueRefusedError && e.result.status === 'invalid_payload',
    );
    assert.equal((await pool.query('SELECT count(*)::int AS n FROM public.note')).rows[0].n, 0);
  });

  test('bad enqueue options are typed errors, not silent changes', async () => {
    await assert.rejects(outbox().transaction(pool, (_tx, enqueue) => enqueue(note, { payload: { body: 'x' }, delayMs: -5 })), (e: unknown) => e instanceof PostboxError && /delayMs/.test(e.message));
    await assert.rejects(outbox().transaction(pool, (_tx, enqueue) => enqueue(note, { payload: { body: 'x' }, dedupeKey: '' })), (e: unknown) => e instanceof PostboxError && /dedupeKey/.test(e.message));
    assert.equal(await count(), 0);
  });
});

describe('round trips', () => {
  test('a drain pays one statement per batch: settlements ride on the next claim', async () => {
    const statements: string[] = [];
    const base = createPgConnector(url);
    const counting = async () => {
      const conn = await base();
      const query = conn.db.query.bind(conn.db) as (...args: any[]) => any;
      (conn.db as any).query = (...args: any[]) => {
        statements.push(typeof args[0] === 'string' ? args[0].trim().split(/\s+/)[0]! : args[0].name);
        return query(...args);
      };
      return conn;
    };
    const outbox = createOutbox({ jobs: [note], connect: counting, concurrency: 4 });
    for (let i = 0; i < 8; i++) await outbox.transaction(pool, (_tx, enqueue) => enqueue(note, { payload: { body: `rt${i}` } }));
    const report = await runUntilIdle(outbox);
    assert.equal(report.succeeded, 8);
    // Each handler writes one note through ctx.db; everything else is the outbox's own.
    const own = statements.filter((s) => s.startsWith('postbox_'));
    // 8 jobs at concurrency 4: one claim takes a window of 8 (4 slots + 4 ahead); the
    // settlements ride on a later claim or go in batches (a settlement waits at most 20 ms for
    // company), so 2 or 3 statements settle all 8. Then runUntilIdle's second round finds
    // nothing due. A statement per job would be 16 or more.
    assert.equal(own[0], 'postbox_claim_due');
    assert.equal(own.at(-1), 'postbox_claim_due');
    const between = own.slice(1, -1);
    assert.ok(between.length >= 1 && between.length <= 3, own.join(', '));
    assert.ok(between.every((n) => n === 'postbox_settle_batch' || n === 'postbox_settle_then_claim_due'), own.join(', '));
    assert.equal((await pool.query(`SELECT count(*)::int AS n FROM outbox.job WHERE status = 'succeeded'`)).rows[0].n, 8);
  });
});

describe('connections', () => {
  test('createPgPoolConnector returns healthy clients to the pool and runs jobs on them', async () => {
    const lanePool = new pg.Pool({ connectionString: url, max: 2 });
    lanePool.on('error', () => undefined);
    const outbox = createOutbox({ jobs: [note], connect: createPgPoolConnector(lanePool), concurrency: 2 });
    for (let i = 0; i < 4; i++) await outbox.transaction(pool, (_tx, enqueue) => enqueue(note, { payload: { body: `pool${i}` } }));
    assert.equal((await runUntilIdle(outbox)).succeeded, 4);
    assert.equal(lanePool.totalCount, lanePool.idleCount, 'every client went back to the pool');
    assert.ok(lanePool.totalCount >= 1);
    await lanePool.end();
  });

  test('lanes: several connections drain one lane together', async () => {
    let opened = 0;
    const base = createPgConnector(url);
    const outbox = createOutbox({ jobs: [note], connect: async () => (opened++, base()), lanes: 3, concurrency: 2 });
    for (let i = 0; i < 12; i++) await outbox.transaction(pool, (_tx, enqueue) => enqueue(note, { payload: { body: `lane${i}` } }));
    assert.equal((await runUntilIdle(outbox)).succeeded, 12);
    // One drain round opens `lanes` sessions; runUntilIdle's idle check opens them once more.
    assert.equal(opened, 6);
    assert.equal((await pool.query(`SELECT count(DISTINCT job_id)::int AS n FROM outbox.attempt`)).rows[0].n, 12);
    assert.equal((await pool.query(`SELECT count(*)::int AS n FROM outbox.attempt`)).rows[0].n, 12, 'no job ran twice');
  });
});

describe('test kit and inspection', () => {
  test('runUntilIdle with a test clock plays retries out instantly', async () => {
    flaky = 0;
    const clock = createTestClock(Date.parse('2026-11-30T12:00:00.000Z'));
    const outbox = createOutbox({ jobs: [note], connect: createPgConnector(url), clock });
    await outbox.transaction(pool, (_tx, enqueue) => enqueue(note, { payload: { body: 'flaky' }, dedupeKey: 'flaky' }));
    const report = await runUntilIdle(outbox, { clock, db: pool });
    assert.equal(report.retrying, 2);
    assert.equal(report.succeeded, 1);
    // Two backoffs of at least 30 s and 60 s passed on the test clock, none in real time.
    assert.ok(clock.now() - Date.parse('2026-11-30T12:00:00.000Z') >= 90_000);
    assert.deepEqual((await pool.query('SELECT body FROM public.note')).rows, [{ body: 'flaky' }]);
  });

  test('getJob, listJobs pages, countJobs, countBacklog and evaluateBacklog', async () => {
    const outbox = createOutbox({ jobs: [note], connect: createPgConnector(url) });
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const r = await outbox.transaction(pool, (_tx, enqueue) => enqueue(note, { payload: { body: `n${i}` }, tenantKey: i < 3 ? 'a' : 'b' }));
      if (r.status === 'created') ids.push(r.id);
    }
    assert.equal((await getJob(pool, { id: ids[0]! }))?.status, 'pending');
    assert.equal(await getJob(pool, { id: ids[0]!, tenantKey: 'b' }), null);
    const first = await listJobs(pool, { tenantKey: 'a', limit: 2 });
    assert.deepEqual(first.jobs.map((j) => j.id), ids.slice(0, 2));
    const second = await listJobs(pool, { tenantKey: 'a', limit: 2, cursor: first.nextCursor! });
    assert.deepEqual(second.jobs.map((j) => j.id), [ids[2]]);
    assert.equal(second.nextCursor, null);
    assert.equal((await countJobs(pool, { tenantKey: 'b' })).pending, 2);
    const backlog = await countBacklog(pool);
    assert.deepEqual(backlog.map((b) => [b.kind, b.pending, b.due]), [['api.note', 5, 5]]);
    const graded = evaluateBacklog({ due: 5, aged: 0, stuck: 0 }, { due: { warn: 3, error: 10 }, aged: { warn: 1, error: 5 }, stuck: { warn: 1, error: 2 } });
    assert.equal(graded.severity, 'warn');
    assert.deepEqual(graded.reasons, [{ metric: 'due', severity: 'warn', value: 5 }]);
    assert.throws(() => evaluateBacklog({ due: -1, aged: 0, stuck: 0 }), (e: unknown) => e instanceof PostboxError && e.code === 'invalid_input');
    await assert.rejects(listJobs(pool, { cursor: 'garbage' }), (e: unknown) => e instanceof PostboxError && e.code === 'invalid_input');
  });
});
