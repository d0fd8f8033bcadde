// The public API in Node against a real PostgreSQL: definition errors, every database handle
// `outbox.transaction` accepts, strict enqueue, enqueueMany, the test kit and the inspection queries.
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
import { ATTEMPTS } from '../support/ledger.ts';

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

  test('defineJob refuses NaN and ±Infinity as limits and priorities, naming the field, instead of taking them for "no limit"', () => {
    const base = { payload: z.object({}), handle: async () => ok(), kind: 'a', timeoutMs: 1_000 };
    for (const bad of [Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY]) {
      rejects(() => defineJob({ ...base, concurrency: bad }), 'invalid_policy', /concurrency/);
      rejects(() => defineJob({ ...base, concurrency: 4, tenantConcurrency: bad }), 'invalid_policy', /tenantConcurrency/);
      rejects(() => defineJob({ ...base, priority: bad }), 'invalid_policy', /priority/);
      rejects(() => defineJob({ ...base, rateLimit: { starts: bad, perMs: 1_000 } }), 'invalid_policy', /starts/);
      rejects(() => defineJob({ ...base, retry: { maxAttempts: bad } }), 'invalid_policy', /maxAttempts/);
      rejects(() => defineJob({ ...base, heartbeat: { everyMs: bad } }), 'invalid_policy', /everyMs/);
    }
    // The same definitions with finite values are taken.
    assert.equal(defineJob({ ...base, concurrency: 4, tenantConcurrency: 2, priority: 3 }).policy.concurrency, 4);
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
    for (const operationTimeoutMs of [0, 1.5, -1, 2 ** 31, '300' as never]) {
      rejects(() => createOutbox({ jobs: [note], connect, operationTimeoutMs }), 'invalid_config', /options: field 'operationTimeoutMs' must be an integer in \[1, 2147483647\]/);
    }
    rejects(() => createOutbox({ jobs: [note], connect, recordNudges: 'yes' as never }), 'invalid_config', /recordNudges must be a boolean/);
    // The bounds are the core's (pb_claim outbox), named with their range.
    for (const concurrency of [0, 101, 2.5, Number.NaN]) {
      rejects(() => createOutbox({ jobs: [note], connect, concurrency }), 'invalid_config', /options: field 'concurrency' must be an integer in \[1, 100\]/);
    }
    rejects(() => createOutbox({ jobs: [note], connect, lanes: 0 }), 'invalid_config', /options: field 'lanes' must be an integer in \[1, 5\]/);
    rejects(() => createOutbox({ jobs: [note], connect, maxPayloadBytes: 2 * 1024 * 1024 }), 'invalid_config', /options: field 'maxPayloadBytes' must be an integer in \[1, 1048576\]/);
    assert.ok(createOutbox({ jobs: [note], connect, concurrency: 100, lanes: 5, maxPayloadBytes: 1024 * 1024 }));
    // Lanes and handler sessions share one budget of 5 connections (pb_claim outbox).
    rejects(() => createOutbox({ jobs: [note], connect, lanes: 5, handlerSessions: 1 }), 'invalid_config', /field 'handlerSessions' must be at most 0 with lanes 5/);
    rejects(() => createOutbox({ jobs: [note], connect, handlerSessions: -1 }), 'invalid_config', /options: field 'handlerSessions' must be an integer in \[0, 4\]/);
    assert.ok(createOutbox({ jobs: [note], connect, lanes: 3, handlerSessions: 2 }));
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

  test('a pg Pool keeps a healthy connection after a callback error or a strict refusal, and destroys a broken one', async () => {
    // One connection: whichever backend serves the next transaction shows what happened to it.
    const single = new pg.Pool({ connectionString: url, max: 1 });
    single.on('error', () => undefined);
    const pid = async (tx: { query(text: string): Promise<{ rows: any[] }> }) => (await tx.query('SELECT pg_backend_pid() AS pid')).rows[0].pid as number;
    try {
      const first = await outbox().transaction(single, (tx) => pid(tx));
      let seen = 0;
      await assert.rejects(outbox().transaction(single, async (tx) => {
        seen = await pid(tx);
        throw new Error('the application failed');
      }), /the application failed/);
      assert.equal(seen, first);
      const strict = createOutbox({ jobs: [note], connect: createPgConnector(url), strictEnqueue: true });
      await assert.rejects(strict.transaction(single, async (_tx, enqueue) => {
        await enqueue(note, { payload: { body: 42 as unknown as string } });
      }), EnqueueRefusedError);
      // A statement the server refused aborts the transaction, not the session.
      await assert.rejects(outbox().transaction(single, (tx) => tx.query('SELECT 1/0')), /division by zero/);
      assert.equal(await outbox().transaction(single, (tx) => pid(tx)), first, 'the same backend served every transaction');
      assert.equal(single.totalCount, 1);

      // Its backend killed under it: the connection is destroyed, the next one is new.
      await assert.rejects(outbox().transaction(single, async (tx) => {
        await pool.query('SELECT pg_terminate_backend($1)', [first]);
        await tx.query('SELECT 1');
      }));
      const next = await outbox().transaction(single, (tx) => pid(tx));
      assert.notEqual(next, first);
      assert.equal((await pool.query('SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid = $1', [first])).rows[0].n, 0);
    } finally {
      await single.end();
    }
  });

  test('a generateId that does not give UUIDs is a typed error before anything is written', async () => {
    const bad = (generateId: () => string) => createOutbox({ jobs: [note], connect: createPgConnector(url), generateId });
    await assert.rejects(
      bad(() => 'job-1').transaction(pool, async (tx, enqueue) => {
        await tx.query(`INSERT INTO public.note (body) VALUES ('business')`);
        await enqueue(note, { payload: { body: 'x' } });
      }),
      (e: unknown) => e instanceof PostboxError && e.code === 'invalid_id' && /"job-1".*not a UUID/.test(e.message),
    );
    assert.equal((await pool.query('SELECT count(*)::int AS n FROM public.note')).rows[0].n, 0, 'the business write rolled back');
    assert.equal((await pool.query('SELECT count(*)::int AS n FROM outbox.job')).rows[0].n, 0);
    rejects(() => createOutbox({ jobs: [note], connect: createPgConnector(url), generateId: 'uuid' as never }), 'invalid_config', /generateId/);
    const fixed = '01890a5d-ac96-774b-bcce-b302099a8057';
    const [made] = await bad(() => fixed).transaction(pool, (_tx, _enqueue, enqueueMany) => enqueueMany(note, [{ payload: { body: 'y' } }]));
    assert.deepEqual(made, { status: 'created', id: fixed, kind: 'api.note' });
  });

  test('bad enqueue options are typed errors, not silent changes', async () => {
    await assert.rejects(outbox().transaction(pool, (_tx, enqueue) => enqueue(note, { payload: { body: 'x' }, delayMs: -5 })), (e: unknown) => e instanceof PostboxError && /delayMs/.test(e.message));
    await assert.rejects(outbox().transaction(pool, (_tx, enqueue) => enqueue(note, { payload: { body: 'x' }, dedupeKey: '' })), (e: unknown) => e instanceof PostboxError && /dedupeKey/.test(e.message));
    // The core's limit on keys: 1024 characters is accepted, 1025 is not (and names it).
    for (const field of ['dedupeKey', 'tenantKey', 'correlationId'] as const) {
      await assert.rejects(
        outbox().transaction(pool, (_tx, enqueue) => enqueue(note, { payload: { body: 'x' }, [field]: 'k'.repeat(1025) })),
        (e: unknown) => e instanceof PostboxError && e.code === 'invalid_input' && new RegExp(`${field} must be a non-empty string of at most 1024 characters`).test(e.message),
      );
    }
    assert.equal(await count(), 0);
    await outbox().transaction(pool, (_tx, enqueue) => enqueue(note, { payload: { body: 'x' }, dedupeKey: 'k'.repeat(1024), tenantKey: 't'.repeat(1024), correlationId: 'c'.repeat(1024) }));
    assert.equal(await count(), 1);
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
    // runUntilIdle first looks for expired leases (there are none); the drain's come after.
    const [recovery, ...own] = statements.filter((s) => s.startsWith('postbox_'));
    assert.equal(recovery, 'postbox_list_expired_leases');
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
    // One client for the lane, two for the handlers' ctx.db (handlerSessions defaults to 2 here).
    const lanePool = new pg.Pool({ connectionString: url, max: 3 });
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
    // runUntilIdle's recovery opens one session, each drain round `lanes`: one round drains,
    // the next finds nothing due. The first round's handlers write through ctx.db, on handler
    // sessions (at most 2 here: 5 - lanes) opened as they are needed.
    assert.ok(opened >= 8 && opened <= 9, `${opened} connections`);
    assert.equal((await pool.query(`SELECT count(DISTINCT job_id)::int AS n FROM ${ATTEMPTS} a`)).rows[0].n, 12);
    assert.equal((await pool.query(`SELECT count(*)::int AS n FROM ${ATTEMPTS} a`)).rows[0].n, 12, 'no job ran twice');
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

  test('a job\'s own maxAttempts replaces its kind\'s budget and survives a replay; a bad one is a typed error', async () => {
    const stubborn = defineJob({
      kind: 'api.stubborn', payload: z.object({ n: z.number() }), timeoutMs: 5_000,
      retry: { maxAttempts: 4, backoff: { baseMs: 1_000, maxMs: 1_000 } },
      handle: async () => retry({ code: 'nope' }),
    });
    const clock = createTestClock(Date.parse('2026-11-30T12:00:00.000Z'));
    const outbox = createOutbox({ jobs: [stubborn], connect: createPgConnector(url), clock });
    const [short, long, plain] = await outbox.transaction(pool, (_tx, _enqueue, enqueueMany) =>
      enqueueMany(stubborn, [{ payload: { n: 1 }, maxAttempts: 2 }, { payload: { n: 2 }, maxAttempts: 7 }, { payload: { n: 3 } }]));
    await runUntilIdle(outbox, { clock, db: pool });
    const attemptsOf = async (r: unknown) => (await pool.query('SELECT status, attempts, max_attempts FROM outbox.job WHERE id = $1', [(r as { id: string }).id])).rows[0];
    assert.deepEqual(await attemptsOf(short), { status: 'dead', attempts: 2, max_attempts: 2 });
    assert.deepEqual(await attemptsOf(long), { status: 'dead', attempts: 7, max_attempts: 7 });
    assert.deepEqual(await attemptsOf(plain), { status: 'dead', attempts: 4, max_attempts: null });
    await outbox.replay((short as { id: string }).id);
    await runUntilIdle(outbox, { clock, db: pool });
    assert.deepEqual(await attemptsOf(short), { status: 'dead', attempts: 2, max_attempts: 2 }, 'a replay gives the same budget again');
    const bad = (maxAttempts: number) => outbox.transaction(pool, (_tx, enqueue) => enqueue(stubborn, { payload: { n: 4 }, maxAttempts }));
    await assert.rejects(bad(0), (e: unknown) => e instanceof PostboxError && e.code === 'invalid_input' && /maxAttempts.*\[1, 1000\]/.test(e.message));
    await assert.rejects(bad(1001), (e: unknown) => e instanceof PostboxError && e.code === 'invalid_input');
    await assert.rejects(bad(2.5), (e: unknown) => e instanceof PostboxError && /maxAttempts must be an integer/.test(e.message));
    const [one] = await outbox.transaction(pool, (_tx, enqueue) => Promise.all([enqueue(stubborn, { payload: { n: 5 }, maxAttempts: 1 })]));
    await runUntilIdle(outbox, { clock, db: pool });
    assert.deepEqual(await attemptsOf(one), { status: 'dead', attempts: 1, max_attempts: 1 }, 'the single-item statement stores it too');
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

// ---------------------------------------------------------------------------------------------
// enqueueMany: every handle, strict mode, the caps, statement counts and a raced dedupe key.

const manyNote = defineJob({ kind: 'many.note', payload: z.object({ body: z.string() }), timeoutMs: 5_000, handle: async () => ok() });
const manyOther = defineJob({ kind: 'many.other', payload: z.object({ body: z.string() }), timeoutMs: 5_000, handle: async () => ok() });
const manyOutbox = (opts: { strictEnqueue?: true } = {}) => createOutbox({ jobs: [manyNote, manyOther], connect: createPgConnector(url), ...opts });
const jobCount = async () => (await pool.query('SELECT count(*)::int AS n FROM outbox.job')).rows[0].n as number;
const items = (n: number, prefix = 'i') => Array.from({ length: n }, (_, i) => ({ payload: { body: `${prefix}${i}` } }));

/** A pg client whose statements are counted (the outbox's own: those touching outbox.job). */
async function countingClient() {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  const seen = { outbox: 0 };
  const query = client.query.bind(client) as (...args: any[]) => any;
  (client as any).query = (...args: any[]) => {
    if (/outbox\.job/.test(typeof args[0] === 'string' ? args[0] : args[0].text)) seen.outbox++;
    return query(...args);
  };
  return { client, seen };
}

describe('enqueueMany on every handle', () => {
  test('transaction callbacks of a Pool, a Client, drizzle and Kysely: commit keeps the list, a throw drops it', async () => {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    const kysely = new Kysely<any>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: url, max: 1 }) }) });
    const handles: [string, any][] = [['pool', pool], ['client', client], ['drizzle', drizzle(pool)], ['kysely', kysely]];
    for (const [name, db] of handles) {
      const before = await jobCount();
      const results = await manyOutbox().transaction(db, (_tx, _enqueue, enqueueMany) => enqueueMany(manyNote, items(3, name)));
      assert.deepEqual(results.map((r) => r.status), ['created', 'created', 'created'], name);
      assert.equal(await jobCount(), before + 3, name);
      await assert.rejects(manyOutbox().transaction(db, async (_tx, _enqueue, enqueueMany) => {
        await enqueueMany(manyNote, items(3, `${name}-rolled-back`));
        throw new Error('abort');
      }), /abort/);
      assert.equal(await jobCount(), before + 3, `${name}: rolled back`);
    }
    // The caller's own transaction handle works with outbox.enqueueMany too.
    await kysely.transaction().execute(async (trx) => {
      assert.equal((await manyOutbox().enqueueMany(trx, manyNote, items(2, 'kysely-tx'))).length, 2);
    });
    await drizzle(pool).transaction(async (tx) => {
      assert.equal((await manyOutbox().enqueueMany(tx, manyNote, items(2, 'drizzle-tx'))).length, 2);
    });
    assert.equal(await jobCount(), handles.length * 3 + 4);
    await client.end();
    await kysely.destroy();
  });

  test('one statement per call, whatever the length; nothing to write, no statement', async () => {
    const { client, seen } = await countingClient();
    await client.query('BEGIN');
    assert.equal((await manyOutbox().enqueueMany(client, manyNote, items(1000))).length, 1000);
    assert.equal(seen.outbox, 1);
    assert.equal((await manyOutbox().enqueueMany(client, manyNote, items(1))).length, 1);
    assert.equal(seen.outbox, 2);
    const refused = await manyOutbox().enqueueMany(client, manyNote, [{ payload: { body: 1 as unknown as string } }]);
    assert.equal(refused[0]!.status, 'invalid_payload');
    assert.deepEqual(await manyOutbox().enqueueMany(client, manyNote, []), []);
    assert.equal(seen.outbox, 2);
    await client.query('COMMIT');
    await client.end();
  });

  test('dedupe: the first of a repeated key wins; keys are per tenant; another kind or another payload conflicts', async () => {
    const [held] = await manyOutbox().transaction(pool, (_tx, _enqueue, enqueueMany) => enqueueMany(manyOther, [{ payload: { body: 'o' }, dedupeKey: 'other' }]));
    const results = await manyOutbox().transaction(pool, (_tx, _enqueue, enqueueMany) =>
      enqueueMany(manyNote, [
        { payload: { body: 'a' }, dedupeKey: 'k' },
        { payload: { body: 'a' }, dedupeKey: 'k' },
        { payload: { body: 'b' }, dedupeKey: 'k' },
        { payload: { body: 'c' }, dedupeKey: 'k', tenantKey: 't' },
        { payload: { body: 'd' }, dedupeKey: 'other' },
      ]),
    );
    assert.equal(held!.status, 'created');
    assert.deepEqual(results.map((r) => r.status), ['created', 'exists', 'dedupe_conflict', 'created', 'dedupe_conflict']);
    const first = (results[0] as { id: string }).id;
    assert.equal((results[1] as { id: string }).id, first);
    assert.deepEqual(results[2], { status: 'dedupe_conflict', reason: 'payload', id: first });
    assert.deepEqual(results[4], { status: 'dedupe_conflict', reason: 'kind', existingKind: 'many.other' });
    // Against a committed job: the same request is `exists`, another payload a conflict, one at a time or in a list.
    const same = await manyOutbox().transaction(pool, (_tx, enqueue) => enqueue(manyNote, { payload: { body: 'a' }, dedupeKey: 'k' }));
    assert.deepEqual(same, { status: 'exists', id: first, kind: 'many.note' });
    const other = await manyOutbox().transaction(pool, (_tx, enqueue) => enqueue(manyNote, { payload: { body: 'x' }, dedupeKey: 'k' }));
    assert.deepEqual(other, { status: 'dedupe_conflict', reason: 'payload', id: first });
    const again = await manyOutbox().transaction(pool, (_tx, _enqueue, enqueueMany) =>
      enqueueMany(manyNote, [{ payload: { body: 'x' }, dedupeKey: 'k' }, { payload: { body: 'a' }, dedupeKey: 'k' }]));
    assert.deepEqual(again, [{ status: 'dedupe_conflict', reason: 'payload', id: first }, { status: 'exists', id: first, kind: 'many.note' }]);
    assert.deepEqual((await pool.query(`SELECT payload FROM outbox.job WHERE dedupe_key = 'k' AND tenant_key IS NULL`)).rows, [{ payload: { body: 'a' } }]);
    await assert.rejects(
      manyOutbox({ strictEnqueue: true }).transaction(pool, (_tx, enqueue) => enqueue(manyNote, { payload: { body: 'y' }, dedupeKey: 'k' })),
      (e: unknown) => e instanceof EnqueueRefusedError && e.result.status === 'dedupe_conflict' && e.result.reason === 'payload',
    );
  });

  test('a key a concurrent transaction commits meanwhile is found with one more statement', async () => {
    const first = new pg.Client({ connectionString: url });
    await first.connect();
    const { client: second, seen } = await countingClient();
    await first.query('BEGIN');
    const [mine] = await manyOutbox().enqueueMany(first, manyNote, [{ payload: { body: 'first' }, dedupeKey: 'race' }]);
    await second.query('BEGIN');
    // Blocks on the uncommitted key until `first` commits; its snapshot predates that commit.
    const pending = manyOutbox().enqueueMany(second, manyNote, [
      { payload: { body: 'first' }, dedupeKey: 'race' }, { payload: { body: 'free' } }, { payload: { body: 'second' }, dedupeKey: 'race' },
      // The raced holder is compared field by field too.
      { payload: { body: 'first' }, dedupeKey: 'race', maxAttempts: 3 }, { payload: { body: 'first' }, dedupeKey: 'race', metadata: { m: 1 } },
      { payload: { body: 'first' }, dedupeKey: 'race', correlationId: 'c-1' },
    ]);
    await new Promise((r) => setTimeout(r, 200));
    await first.query('COMMIT');
    const results = await pending;
    await second.query('COMMIT');
    assert.deepEqual(results.map((r) => r.status), ['exists', 'created', 'dedupe_conflict', 'dedupe_conflict', 'dedupe_conflict', 'dedupe_conflict']);
    assert.equal((results[0] as { id: string }).id, (mine as { id: string }).id);
    assert.deepEqual(results[2], { status: 'dedupe_conflict', reason: 'payload', id: (mine as { id: string }).id });
    assert.deepEqual(results.slice(3).map((r) => (r as { reason: string }).reason), ['maxAttempts', 'metadata', 'correlationId']);
    assert.equal(seen.outbox, 2);
    await first.end();
    await second.end();
  });
});

describe('enqueueMany refusals and limits', () => {
  test('strictEnqueue names the first refused item; an invalid payload writes nothing', async () => {
    await assert.rejects(
      manyOutbox({ strictEnqueue: true }).transaction(pool, async (tx, _enqueue, enqueueMany) => {
        await tx.query(`INSERT INTO public.note (body) VALUES ('business')`);
        await enqueueMany(manyNote, [{ payload: { body: 'ok' } }, { payload: { body: 'ok' } }, { payload: { body: 7 as unknown as string } }, { payload: {} as { body: string } }]);
      }),
      (e: unknown) => e instanceof EnqueueRefusedError && e.index === 2 && e.result.status === 'invalid_payload' && /items\[2\]/.test(e.message),
    );
    assert.equal(await jobCount(), 0);
    assert.equal((await pool.query('SELECT count(*)::int AS n FROM public.note')).rows[0].n, 0);
    await manyOutbox().transaction(pool, (_tx, _enqueue, enqueueMany) => enqueueMany(manyOther, [{ payload: { body: 'o' }, dedupeKey: 'held' }]));
    await assert.rejects(
      manyOutbox({ strictEnqueue: true }).transaction(pool, (_tx, _enqueue, enqueueMany) => enqueueMany(manyNote, [{ payload: { body: 'a' } }, { payload: { body: 'b' }, dedupeKey: 'held' }])),
      (e: unknown) => e instanceof EnqueueRefusedError && e.index === 1 && e.result.status === 'dedupe_conflict',
    );
    assert.equal(await jobCount(), 1, 'the transaction rolled back');
  });

  test('more than 5000 items, or more than 16 MiB of payloads, is too_large and writes nothing', async () => {
    const tooLarge = (pattern: RegExp) => (e: unknown) => e instanceof PostboxError && e.code === 'too_large' && pattern.test(e.message);
    await assert.rejects(manyOutbox().transaction(pool, (_tx, _enqueue, enqueueMany) => enqueueMany(manyNote, items(5001))), tooLarge(/at most 5000 items/));
    const big = 'x'.repeat(262_000);
    const heavy = Array.from({ length: 65 }, () => ({ payload: { body: big } }));
    await assert.rejects(manyOutbox().transaction(pool, (_tx, _enqueue, enqueueMany) => enqueueMany(manyNote, heavy)), tooLarge(/16777216 bytes/));
    // Even when the schema refuses some of them, the list's length is what counts.
    await assert.rejects(manyOutbox().transaction(pool, (_tx, _enqueue, enqueueMany) => enqueueMany(manyNote, [...items(5000), { payload: {} as { body: string } }])), tooLarge(/5000/));
    assert.equal(await jobCount(), 0);
    assert.equal((await manyOutbox().transaction(pool, (_tx, _enqueue, enqueueMany) => enqueueMany(manyNote, items(5000)))).length, 5000);
  });

  test('a bad option is a typed error naming the item', async () => {
    const bad = async (item: object, pattern: RegExp) =>
      assert.rejects(
        manyOutbox().transaction(pool, (_tx, _enqueue, enqueueMany) => enqueueMany(manyNote, [...items(2), item as { payload: { body: string } }])),
        (e: unknown) => e instanceof PostboxError && e.code === 'invalid_input' && pattern.test(e.message),
      );
    await bad({ payload: { body: 'x' }, delayMs: 1.5 }, /items\[2\]: delayMs/);
    await bad({ payload: { body: 'x' }, dedupeKey: '' }, /items\[2\]: dedupeKey/);
    await bad({ payload: { body: 'x' }, delayMs: -1 }, /items\[2\]\.delayMs/);
    await assert.rejects(manyOutbox().enqueueMany(pool, manyNote, 'nope' as never), (e: unknown) => e instanceof PostboxError && /array/.test(e.message));
    assert.equal(await jobCount(), 0);
  });
});
