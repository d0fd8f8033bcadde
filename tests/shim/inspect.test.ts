// The read-only inspection queries in Node against a real PostgreSQL: listJobs' order and every
// filter, findJobsByCorrelationId, countBacklog's columns, aggregateAttemptOutcomes and the
// statement timeout every query runs under.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import pg from 'pg';
import { z } from 'zod';
import { createOutbox, defineJob, ok, PostboxError } from 'postbox';
import { aggregateAttemptOutcomes, countBacklog, countJobs, findJobsByCorrelationId, getJob, listAttempts, listJobs } from 'postbox/inspect';
import { createPgConnector } from 'postbox/pg';
import { migrate } from 'postbox/sql';
import { readOnly } from '../../js-shim/src/inspect/read.ts';
import { startPostgres, type PgServer } from '../support/postgres.ts';

let server: PgServer;
let pool: pg.Pool;
const T0 = Date.parse('2026-11-01T00:00:00.000Z');
const at = (minutes: number) => new Date(T0 + minutes * 60_000);
/** Job ids in creation order: j[0] is created at T0, j[1] a minute later, … */
const j: string[] = [];

const a = defineJob({ kind: 'insp.a', payload: z.object({ n: z.number() }), timeoutMs: 5_000, handle: async () => ok() });
const b = defineJob({ kind: 'insp.b', payload: z.object({ n: z.number() }), timeoutMs: 5_000, handle: async () => ok() });

before(async () => {
  server = await startPostgres();
  const url = await server.createDatabase('inspect');
  pool = new pg.Pool({ connectionString: url, max: 3 });
  const client = await pool.connect();
  await migrate(client);
  client.release();
  const outbox = createOutbox({ jobs: [a, b], connect: createPgConnector(url) });
  // Six jobs: kinds, tenants, correlation ids and statuses spread so each filter picks a different set.
  const specs = [
    { job: a, tenantKey: 't1', correlationId: 'c1', status: 'succeeded', finished: 10 },
    { job: a, tenantKey: 't1', correlationId: 'c1', status: 'dead', finished: 20 },
    { job: b, tenantKey: 't2', correlationId: 'c2', status: 'pending', finished: null },
    { job: b, tenantKey: null, correlationId: 'c1', status: 'retrying', finished: null },
    { job: a, tenantKey: null, correlationId: null, status: 'cancelled', finished: 30 },
    { job: b, tenantKey: 't2', correlationId: null, status: 'running', finished: null },
  ] as const;
  for (const [n, s] of specs.entries()) {
    const r = await outbox.transaction(pool, (_tx, enqueue) =>
      enqueue(s.job as typeof a, { payload: { n }, ...(s.tenantKey ? { tenantKey: s.tenantKey } : {}), ...(s.correlationId ? { correlationId: s.correlationId } : {}) }));
    assert.equal(r.status, 'created');
    j.push((r as { id: string }).id);
    await pool.query(
      `UPDATE outbox.job SET created_at = $2, status = $3, finished_at = $4,
              lease_expires_at = CASE WHEN $3 = 'running' THEN $5::timestamptz END WHERE id = $1`,
      [j[n], at(n), s.status, s.finished === null ? null : at(s.finished), at(100)],
    );
  }
});
after(async () => {
  await pool?.end();
  await server?.stop();
});

const ids = async (filter: Parameters<typeof listJobs>[1]) => (await listJobs(pool, filter)).jobs.map((x) => j.indexOf(x.id));

test('listJobs: oldest first by default, newest first with desc, and the cursor follows the order', async () => {
  assert.deepEqual(await ids({}), [0, 1, 2, 3, 4, 5]);
  assert.deepEqual(await ids({ order: 'desc' }), [5, 4, 3, 2, 1, 0]);
  const page = await listJobs(pool, { order: 'desc', limit: 4 });
  assert.deepEqual(page.jobs.map((x) => j.indexOf(x.id)), [5, 4, 3, 2]);
  assert.deepEqual(await ids({ order: 'desc', cursor: page.nextCursor! }), [1, 0]);
});

test('listJobs: every filter, alone and combined', async () => {
  assert.deepEqual(await ids({ status: 'dead' }), [1]);
  assert.deepEqual(await ids({ kind: 'insp.b' }), [2, 3, 5]);
  assert.deepEqual(await ids({ tenantKey: 't2' }), [2, 5]);
  assert.deepEqual(await ids({ tenantKey: null }), [3, 4], 'null means jobs without a tenant');
  assert.deepEqual(await ids({ correlationId: 'c1' }), [0, 1, 3]);
  assert.deepEqual(await ids({ createdAtOrAfter: at(2) }), [2, 3, 4, 5], 'inclusive');
  assert.deepEqual(await ids({ createdAfter: at(2) }), [3, 4, 5], 'exclusive');
  assert.deepEqual(await ids({ createdBefore: at(2) }), [0, 1], 'exclusive');
  assert.deepEqual(await ids({ finishedAfter: at(10) }), [1, 4], 'exclusive; unfinished jobs never match');
  assert.deepEqual(await ids({ finishedBefore: at(30) }), [0, 1]);
  assert.deepEqual(await ids({ kind: 'insp.a', tenantKey: 't1', finishedAfter: at(5), finishedBefore: at(15) }), [0]);
  assert.deepEqual(await countJobs(pool, { correlationId: 'c1' }), { pending: 0, running: 0, retrying: 1, succeeded: 1, dead: 1, cancelled: 0, waiting: 0 });
});

test('findJobsByCorrelationId: every job of the id, oldest first, tenant-scoped when asked', async () => {
  assert.deepEqual((await findJobsByCorrelationId(pool, { correlationId: 'c1' })).map((x) => j.indexOf(x.id)), [0, 1, 3]);
  assert.deepEqual((await findJobsByCorrelationId(pool, { correlationId: 'c1', tenantKey: 't1' })).map((x) => j.indexOf(x.id)), [0, 1]);
  assert.deepEqual(await findJobsByCorrelationId(pool, { correlationId: 'nope' }), []);
});

test('countBacklog: pending, retrying, due, aged, scheduled, processing and stuck per kind and lane', async () => {
  // At T0+60 min: job 2 (pending) is due since its creation, job 3 (retrying) is set due later.
  await pool.query(`UPDATE outbox.job SET due_at = $2 WHERE id = $1`, [j[2], at(2)]);
  await pool.query(`UPDATE outbox.job SET due_at = $2 WHERE id = $1`, [j[3], at(90)]);
  const rows = await countBacklog(pool, { now: at(60).getTime(), agedMs: 30 * 60_000 });
  assert.deepEqual(rows, [
    { kind: 'insp.b', lane: 'default', pending: 1, retrying: 1, due: 1, aged: 1, scheduled: 1, processing: 1, stuck: 0, unregistered: 0 },
  ]);
  const later = await countBacklog(pool, { now: at(120).getTime(), agedMs: 60 * 60_000 });
  assert.deepEqual(later.map((r) => [r.due, r.aged, r.scheduled, r.stuck]), [[2, 1, 0, 1]], 'the lease expired at +100 min: stuck');
});

test('aggregateAttemptOutcomes: counts and duration percentiles per kind and outcome in a window', async () => {
  const attempt = (job: number, seq: number, kind: string, start: number, ms: number, outcome: string) =>
    pool.query(`INSERT INTO outbox.attempt (job_id, seq, kind, started_at, lease_expires_at, finished_at, outcome)
                VALUES ($1, $2, $3, $4::timestamptz, $4::timestamptz + interval '1 min', $4::timestamptz + $5 * interval '1 ms', $6)`,
      [j[job], seq, kind, at(start), ms, outcome]);
  for (let i = 0; i < 100; i++) await attempt(0, i + 1, 'insp.a', 10, i + 1, 'ok'); // 1..100 ms
  await attempt(1, 1, 'insp.a', 11, 500, 'retry');
  await attempt(1, 2, 'insp.a', 12, 700, 'fail');
  await attempt(2, 1, 'insp.b', 13, 40, 'ok');
  await attempt(3, 1, 'insp.b', 200, 40, 'ok'); // outside the window
  const rows = await aggregateAttemptOutcomes(pool, { since: at(0), until: at(100) });
  assert.deepEqual(rows, [
    { kind: 'insp.a', outcome: 'fail', count: 1, p50Ms: 700, p95Ms: 700, p99Ms: 700, maxMs: 700 },
    { kind: 'insp.a', outcome: 'ok', count: 100, p50Ms: 51, p95Ms: 95, p99Ms: 99, maxMs: 100 },
    { kind: 'insp.a', outcome: 'retry', count: 1, p50Ms: 500, p95Ms: 500, p99Ms: 500, maxMs: 500 },
    { kind: 'insp.b', outcome: 'ok', count: 1, p50Ms: 40, p95Ms: 40, p99Ms: 40, maxMs: 40 },
  ]);
  assert.deepEqual((await aggregateAttemptOutcomes(pool, { since: at(0), until: at(100), kind: 'insp.b' })).map((r) => r.count), [1]);
  assert.deepEqual((await aggregateAttemptOutcomes(pool, { since: at(0), until: at(100), tenantKey: 't2' })).map((r) => [r.kind, r.count]), [['insp.b', 1]]);
  assert.deepEqual(await aggregateAttemptOutcomes(pool, { since: at(0), until: at(100), tenantKey: null }), []);
  await assert.rejects(aggregateAttemptOutcomes(pool, { since: new Date('nope') }), (e: unknown) => e instanceof PostboxError && e.code === 'invalid_input');
});

test('every inspection query is bounded by statementTimeoutMs and read-only', async () => {
  const locker = await pool.connect();
  await locker.query('BEGIN');
  await locker.query('LOCK TABLE outbox.job IN ACCESS EXCLUSIVE MODE');
  try {
    const started = Date.now();
    await assert.rejects(listJobs(pool, { statementTimeoutMs: 300 }), /statement timeout/);
    await assert.rejects(countBacklog(pool, { statementTimeoutMs: 300 }), /statement timeout/);
    assert.ok(Date.now() - started < 10_000, 'the reads gave up instead of waiting on the lock');
  } finally {
    await locker.query('ROLLBACK');
    locker.release();
  }
  await assert.rejects(listJobs(pool, { statementTimeoutMs: 0 }), (e: unknown) => e instanceof PostboxError && /statementTimeoutMs/.test(e.message));

  // Read-only: each query's transaction is READ ONLY when it commits, and was given no
  // transaction id (nothing written). Checked on the same connection, just before its COMMIT.
  const client = await pool.connect();
  try {
    const ends: { ro: string; xid: string | null }[] = [];
    const probe = {
      async query(text: string, values?: unknown[]) {
        if (text === 'COMMIT') {
          ends.push((await client.query(`SELECT current_setting('transaction_read_only') AS ro, pg_current_xact_id_if_assigned()::text AS xid`)).rows[0]);
        }
        return client.query(text, values);
      },
    };
    const reads = [
      () => listJobs(probe),
      () => countJobs(probe),
      () => getJob(probe, { id: j[0]! }),
      () => findJobsByCorrelationId(probe, { correlationId: 'c1' }),
      () => countBacklog(probe),
      () => aggregateAttemptOutcomes(probe, { since: at(0), until: at(100) }),
      () => listAttempts(probe, { jobId: j[0]! }),
    ];
    for (const read of reads) await read();
    assert.deepEqual(ends, reads.map(() => ({ ro: 'on', xid: null })));
    // A write on the inspection path is refused by the server (25006), whatever it would touch.
    await assert.rejects(
      readOnly(probe, {}, (q) => q.query('UPDATE outbox.job SET kind = kind WHERE false')),
      (e: unknown) => (e as { code?: string }).code === '25006',
    );
  } finally {
    client.release();
  }
});
