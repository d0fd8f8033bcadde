// Several databases behind one consumer (`createOutboxes`), inside workerd against real
// PostgreSQL: two databases on one server, each behind its own Hyperdrive binding, one Queue and
// one Cron Trigger for both (tests/shim/fixtures/multidb-worker.ts). Every job runs in the
// database it was enqueued in; a nudge names its outbox; one naming an outbox not served is
// sent to the dead-letter queue; one database down stops nothing of the other's.
import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, beforeEach, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { createOutboxes, defineJob, ok, PostboxError } from 'postbox';
import { createPgConnector } from 'postbox/pg';
import { migrate } from '../../js-shim/src/sql/index.ts';
import { startPostgres, type PgServer } from '../support/postgres.ts';
import { startWorker, type TestWorker } from '../support/worker.ts';
import { until } from './outbox-env.ts';

const fixtures = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures');
type Db = 'eu' | 'us';
const NAMES: Record<Db, string> = { eu: 'multi_eu', us: 'multi_us' };
let server: PgServer;
let worker: TestWorker;
const urls = {} as Record<Db, string>;

/** One statement on a client of its own (a database taken down drops every session it had). */
async function sql(db: Db | 'admin', text: string, values?: unknown[]): Promise<any[]> {
  const client = new pg.Client({ connectionString: db === 'admin' ? server.url : urls[db] });
  await client.connect();
  try {
    return (await client.query(text, values)).rows;
  } finally {
    await client.end();
  }
}

/** The database refuses new sessions (FATAL 55000) and its open ones are ended: it is down. */
async function takeDown(db: Db): Promise<void> {
  await sql('admin', `ALTER DATABASE ${NAMES[db]} ALLOW_CONNECTIONS false`);
  await sql('admin', 'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [NAMES[db]]);
}
async function bringUp(db: Db): Promise<void> {
  await sql('admin', `ALTER DATABASE ${NAMES[db]} ALLOW_CONNECTIONS true`);
}

const get = async (pathname: string) => (await (await worker.fetch(pathname)).json()) as any;
const post = async (pathname: string, body: unknown) =>
  (await (await worker.fetch(pathname, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } })).json()) as any;
const enqueue = async (db: Db, notes: string[], nudge = true) => ((await post('/enqueue', { db, notes, nudge })) as { id: string; status: string }[]).map((r) => r.id);
const statusIn = async (db: Db, id: string) => (await sql(db, 'SELECT status FROM outbox.job WHERE id = $1', [id]))[0]?.status as string | undefined;
const ranIn = async (db: Db) => (await sql(db, `SELECT note, db FROM public.ran WHERE note NOT LIKE 'tick %' ORDER BY note`)).map((r) => `${r.note}@${r.db}`);

/** Makes a job look like its isolate died mid-attempt: claimed, its lease already expired. */
async function crashWhileRunning(db: Db, id: string): Promise<void> {
  await sql(db, `UPDATE outbox.job SET status = 'running', attempt_seq = attempt_seq + 1, lease_expires_at = now() - interval '1 second' WHERE id = $1`, [id]);
  await sql(db, `INSERT INTO outbox.attempt (job_id, seq, kind, started_at, lease_expires_at)
                 SELECT id, attempt_seq, kind, now() - interval '1 minute', lease_expires_at FROM outbox.job WHERE id = $1`, [id]);
}

before(async () => {
  server = await startPostgres();
  for (const db of ['eu', 'us'] as const) {
    urls[db] = await server.createDatabase(NAMES[db]);
    const client = new pg.Client({ connectionString: urls[db] });
    await client.connect();
    await migrate(client);
    await client.query('CREATE TABLE public.ran (job_id uuid NOT NULL, note text NOT NULL, db text NOT NULL)');
    await client.query('CREATE TABLE public.app_row (id serial PRIMARY KEY, note text NOT NULL)');
    await client.end();
  }
  worker = await startWorker({
    entry: path.join(fixtures, 'multidb-worker.ts'),
    hyperdrives: { HYPERDRIVE_EU: urls.eu, HYPERDRIVE_US: urls.us },
    queues: {
      producers: { OUTBOX_QUEUE: 'postbox-multi' },
      consumers: [
        // No retries: a message the consumer sends back goes to the dead-letter queue at once.
        { queue: 'postbox-multi', maxBatchSize: 10, maxBatchTimeout: 0, maxRetries: 0, deadLetterQueue: 'postbox-multi-dlq' },
        { queue: 'postbox-multi-dlq', maxBatchSize: 10, maxBatchTimeout: 0 },
      ],
    },
  });
});
after(async () => {
  await worker?.dispose();
  await server?.stop();
});
beforeEach(async () => {
  for (const db of ['eu', 'us'] as const) {
    await bringUp(db);
    await sql(db, 'DELETE FROM outbox.job; DELETE FROM outbox.schedule_run; DELETE FROM public.ran; DELETE FROM public.app_row');
  }
  await get('/events');
  await get('/reports');
  await get('/sent');
});

describe('one queue for two databases', () => {
  test('each database keeps its jobs with its business rows, its nudges name it, and its jobs run in it', async () => {
    assert.deepEqual(await get('/keys'), { keys: ['eu', 'us'], eu: 'eu', us: 'us' });
    const eu = await enqueue('eu', ['e1', 'e2']);
    const us = await enqueue('us', ['u1']);
    // The jobs and the business rows committed together, each in its own database only.
    assert.deepEqual((await sql('eu', 'SELECT note FROM public.app_row')).map((r) => r.note), ['e1,e2']);
    assert.deepEqual((await sql('us', 'SELECT note FROM public.app_row')).map((r) => r.note), ['u1']);
    assert.equal((await sql('eu', 'SELECT count(*)::int AS n FROM outbox.job'))[0].n, 2);
    assert.equal((await sql('us', 'SELECT count(*)::int AS n FROM outbox.job'))[0].n, 1);
    // One sendBatch per commit, each message naming its outbox.
    const bodies = (await get('/sent')).flatMap((s: { messages: { body: any }[] }) => s.messages.map((m) => m.body));
    assert.deepEqual(
      bodies.map((b: any) => [b.outbox, b.t, b.t === 'jobs' ? b.ids : [b.id]]),
      [['eu', 'jobs', eu], ['us', 'job', us]],
    );
    for (const id of eu) await until(async () => (await statusIn('eu', id)) === 'succeeded');
    for (const id of us) await until(async () => (await statusIn('us', id)) === 'succeeded');
    assert.deepEqual(await ranIn('eu'), ['e1@multi_eu', 'e2@multi_eu']);
    assert.deepEqual(await ranIn('us'), ['u1@multi_us']);
    const runs = (await get('/reports')).filter((r: any) => r.handler === 'queue').flatMap((r: any) => r.report.outboxes);
    assert.deepEqual(
      runs.map((r: any) => [r.outbox, r.ok]).sort(),
      [['eu', true], ['us', true]],
    );
    assert.equal(runs.reduce((n: number, r: any) => n + r.succeeded, 0), 3);
  });

  test('one batch for both: each message is routed to its outbox, an older nudge naming none to the default, and each is acked or sent back on its own', async () => {
    const [e1] = await enqueue('eu', ['e1'], false);
    const [u1, u2] = await enqueue('us', ['u1', 'u2'], false);
    const [old] = await enqueue('eu', ['old'], false);
    assert.deepEqual(await get('/sent'), [], 'nothing nudged');
    const job = (id: string, outbox?: string) => ({ v: 1, t: 'job', id, kind: 'test.note', lane: 'default', ...(outbox ? { outbox } : {}) });
    const result = await worker.queue('postbox-multi', [
      { id: 'm-eu', body: job(e1!, 'eu') },
      { id: 'm-us', body: { v: 1, t: 'jobs', kind: 'test.note', lane: 'default', outbox: 'us', ids: [u1, u2] } },
      { id: 'm-old', body: job(old!) },
      { id: 'm-ap', body: job('0190a5b2-0000-7000-8000-000000000001', 'ap') },
      { id: 'm-junk', body: { v: 1, t: 'job', id: 'x', kind: 'test.note', lane: 'default', outbox: 'eu' } },
    ]);
    assert.equal(result.outcome, 'ok');
    assert.equal(result.ackAll, false);
    assert.deepEqual(result.explicitAcks.sort(), ['m-eu', 'm-junk', 'm-old', 'm-us']);
    // The core's decision for an outbox not served here: back to the queue in 60 s, then dead-lettered.
    assert.deepEqual(result.retryMessages, [{ msgId: 'm-ap', delaySeconds: 60 }]);
    assert.equal(await statusIn('eu', e1!), 'succeeded');
    assert.equal(await statusIn('eu', old!), 'succeeded');
    assert.equal(await statusIn('us', u1!), 'succeeded');
    assert.equal(await statusIn('us', u2!), 'succeeded');
    assert.deepEqual(await ranIn('eu'), ['e1@multi_eu', 'old@multi_eu']);
    assert.deepEqual(await ranIn('us'), ['u1@multi_us', 'u2@multi_us']);
    const invalid = (await get('/events')).filter((e: any) => e.type === 'invalid_message');
    assert.deepEqual(
      invalid.map((e: any) => [e.messageId, e.code, e.outbox]),
      [['m-ap', 'unknown_outbox', null], ['m-junk', 'invalid_message', null]],
    );
    assert.match(invalid[0].message, /outbox 'ap', which this consumer does not serve/);
    const [{ report }] = (await get('/reports')).filter((r: any) => r.handler === 'queue');
    assert.equal(report.unknownOutbox, 1);
    assert.deepEqual(report.outboxes.map((r: any) => [r.outbox, r.messages, r.succeeded, r.ok]), [['eu', 2, 2, true], ['us', 1, 2, true]]);
    assert.equal(report.succeeded, 4);
  });

  test('a nudge naming an outbox this consumer does not serve goes through the real queue to its dead-letter queue, logged', async () => {
    const body = { v: 1, t: 'drain', lane: 'default', outbox: 'ap' };
    await post('/send', { body });
    const seen: any[] = [];
    const dead = await until(async () => (seen.push(...(await get('/events'))), seen.find((e) => e.type === 'dlq_message')));
    assert.deepEqual(dead.body, body);
    const invalid = seen.filter((e) => e.type === 'invalid_message');
    assert.deepEqual(invalid.map((e) => [e.code, e.outbox]), [['unknown_outbox', null]]);
    assert.match(invalid[0].message, /outbox 'ap'/);
  });
});

describe('one cron for two databases', () => {
  test('the sweep recovers crashed attempts in both databases and runs the schedules in each, reported per outbox', async () => {
    const [e1] = await enqueue('eu', ['e1'], false);
    const [u1] = await enqueue('us', ['u1'], false);
    await crashWhileRunning('eu', e1!);
    await crashWhileRunning('us', u1!);
    const result = await worker.scheduled({ cron: '*/5 * * * *', scheduledTime: onTheTick() });
    assert.equal(result.outcome, 'ok');
    const [{ report }] = (await get('/reports')).filter((r: any) => r.handler === 'scheduled');
    assert.deepEqual(report.outboxes.map((t: any) => [t.outbox, t.ok, t.skipped, t.report.recovered, t.report.schedules.length]), [['eu', true, false, 1, 1], ['us', true, false, 1, 1]]);
    // Recovered as a crash (uncharged), each in its own database, and back to retrying.
    for (const [db, id] of [['eu', e1], ['us', u1]] as const) {
      const [row] = await sql(db, 'SELECT status, crashes FROM outbox.job WHERE id = $1', [id]);
      assert.deepEqual(row, { status: 'retrying', crashes: 1 });
      assert.deepEqual((await sql(db, 'SELECT outcome FROM outbox.attempt WHERE job_id = $1', [id])).map((r) => r.outcome), ['crash']);
      // The schedule ticked once in each database.
      assert.equal((await sql(db, `SELECT count(*)::int AS n FROM outbox.schedule_run WHERE name = 'tick'`))[0].n, 1);
    }
    // The recovery events name their outbox.
    const recovered = (await get('/events')).filter((e: any) => e.type === 'recovered');
    assert.deepEqual(recovered.map((e: any) => e.outbox).sort(), ['eu', 'us']);
  });
});

describe('a backlog outliving its turn', () => {
  test("a sweep cut short leaves a drain message naming its database, and the queue consumer drains that database's backlog", async () => {
    const notes = Array.from({ length: 12 }, (_, i) => `s${i}`);
    const ids = ((await post('/enqueue', { db: 'us', notes, nudge: false, slow: true })) as { id: string }[]).map((r) => r.id);
    const ticks = (await post('/tick-short', { budgetMs: 4_000 })).outboxes;
    const usTick = ticks.find((t: any) => t.outbox === 'us');
    assert.ok(usTick.ok && usTick.report.succeeded > 0 && usTick.report.succeeded < 12, JSON.stringify(usTick));
    const drains = (await get('/sent')).flatMap((s: { messages: { body: any }[] }) => s.messages.map((m) => m.body)).filter((b: any) => b.t === 'drain');
    assert.deepEqual(drains, [{ v: 1, t: 'drain', lane: 'default', outbox: 'us' }]);
    const requested = (await get('/events')).filter((e: any) => e.type === 'drain_requested');
    assert.deepEqual(requested.map((e: any) => [e.outbox, e.lane]), [['us', 'default']]);
    for (const id of ids) await until(async () => (await statusIn('us', id)) === 'succeeded');
    assert.equal((await ranIn('us')).length, 12);
    assert.deepEqual(await ranIn('eu'), []);
    const runs = (await get('/reports')).filter((r: any) => r.handler === 'queue').flatMap((r: any) => r.report.outboxes);
    assert.ok(runs.length > 0 && runs.every((r: any) => r.outbox === 'us' && r.ok), JSON.stringify(runs));
  });
});

describe('one database down', () => {
  test("the other's nudges, queue batches and sweep go on; the failing one's messages come back and its tick is reported failed", async () => {
    const [u1] = await enqueue('us', ['u1'], false);
    const [eCrashed] = await enqueue('eu', ['crashed'], false);
    await crashWhileRunning('eu', eCrashed!);
    await takeDown('us');

    // The real queue: an eu enqueue runs while us is down.
    const [e1] = await enqueue('eu', ['e1']);
    await until(async () => (await statusIn('eu', e1!)) === 'succeeded');

    // One batch for both: eu's message is acked, us's sent back (here: to the dead-letter queue).
    const job = (id: string, outbox: string) => ({ v: 1, t: 'job', id, kind: 'test.note', lane: 'default', outbox });
    const [e2] = await enqueue('eu', ['e2'], false);
    const result = await worker.queue('postbox-multi', [{ id: 'm-us', body: job(u1!, 'us') }, { id: 'm-eu', body: job(e2!, 'eu') }]);
    assert.equal(result.outcome, 'ok');
    assert.deepEqual(result.explicitAcks, ['m-eu']);
    assert.deepEqual(result.retryMessages, [{ msgId: 'm-us', delaySeconds: 5 }]);
    assert.equal(await statusIn('eu', e2!), 'succeeded');
    const queueRun = (await get('/reports')).filter((r: any) => r.handler === 'queue').at(-1).report;
    const us = queueRun.outboxes.find((r: any) => r.outbox === 'us');
    assert.equal(us.ok, false);
    assert.match(us.error, /could not open an outbox connection/);
    assert.deepEqual(queueRun.outboxes.find((r: any) => r.outbox === 'eu'), { outbox: 'eu', messages: 1, ok: true, error: null, ...counts({ claimed: 1, succeeded: 1 }) });
    const infra = (await get('/events')).filter((e: any) => e.type === 'infra_error');
    assert.ok(infra.length > 0 && infra.every((e: any) => e.outbox === 'us'), JSON.stringify(infra));

    // The cron: eu's sweep recovers its crashed attempt; us's tick fails step by step, reported as its own.
    await worker.scheduled({ cron: '*/5 * * * *', scheduledTime: onTheTick() });
    const ticks = (await get('/reports')).filter((r: any) => r.handler === 'scheduled').at(-1).report.outboxes;
    const [euTick, usTick] = ticks;
    assert.equal(euTick.outbox, 'eu');
    assert.equal(euTick.ok, true);
    assert.equal(euTick.report.recovered, 1);
    assert.deepEqual(euTick.report.failedSteps, []);
    assert.equal(usTick.outbox, 'us');
    assert.equal(usTick.ok, false);
    assert.ok(usTick.report.failedSteps.includes('recover') && usTick.report.failedSteps.includes('drain'), JSON.stringify(usTick.report.failedSteps));
    assert.equal((await sql('eu', 'SELECT status FROM outbox.job WHERE id = $1', [eCrashed]))[0].status, 'retrying');
    const failures = (await get('/events')).filter((e: any) => e.type === 'infra_error' || e.type === 'schedule_failed');
    assert.ok(failures.length > 0 && failures.every((e: any) => e.outbox === 'us'), JSON.stringify(failures));

    // Back up: us's next tick runs the job whose nudge was lost.
    await bringUp('us');
    await worker.scheduled({ cron: '*/5 * * * *', scheduledTime: onTheTick() });
    assert.equal(await statusIn('us', u1!), 'succeeded');
    assert.deepEqual(await ranIn('us'), ['u1@multi_us']);
    const after = (await get('/reports')).filter((r: any) => r.handler === 'scheduled').at(-1).report.outboxes;
    assert.deepEqual(after.map((t: any) => [t.outbox, t.ok]), [['eu', true], ['us', true]]);
  });
});

// The latest 5-minute boundary: an every-5-minutes schedule's own occurrence.
const onTheTick = () => Math.floor(Date.now() / 300_000) * 300_000;

function counts(over: Record<string, number>) {
  return { claimed: 0, succeeded: 0, retrying: 0, dead: 0, cancelled: 0, pending: 0, claimLate: 0, released: 0, stale: 0, recovered: 0, throttled: 0, ...over };
}

describe('createOutboxes', () => {
  const job = defineJob({ kind: 'cfg.job', payload: { '~standard': { version: 1, vendor: 't', validate: (value: unknown) => ({ value }) } }, timeoutMs: 1_000, handle: async () => ok() });
  const connect = createPgConnector('postgres://u:p@127.0.0.1:1/x');
  const refused = (fn: () => unknown, message: RegExp) =>
    assert.throws(fn, (e: unknown) => e instanceof PostboxError && e.code === 'invalid_config' && message.test(e.message));

  test("the core decides how many outboxes run at once within the invocation's connections", () => {
    refused(
      () => createOutboxes({ jobs: [job], databases: { a: connect, b: connect, c: connect }, parallel: 3 }),
      /^createOutboxes: parallel must be at most 2: the outboxes running at once may hold 5 connections together/,
    );
    // At concurrency 8 each outbox takes the whole budget: one at a time.
    refused(() => createOutboxes({ jobs: [job], databases: { a: connect, b: connect }, concurrency: 8, parallel: 2 }), /parallel must be at most 1/);
    // A database of its own options: without handler sessions, three fit.
    const fleet = createOutboxes({ jobs: [job], databases: { a: connect, b: { connect, handlerSessions: 0 }, c: { connect, name: 'billing' } }, parallel: 2 });
    assert.deepEqual(Object.keys(fleet), ['a', 'b', 'c']);
    assert.deepEqual([fleet.a.key, fleet.b.key, fleet.c.key, fleet.c.name, fleet.a.name], ['a', 'b', 'c', 'billing', null]);
  });

  test('keys, the default and the databases are checked before anything connects', () => {
    refused(() => createOutboxes({ jobs: [job], databases: { EU: connect } }), /databases key: "EU" is not a valid outbox name/);
    refused(() => createOutboxes({ jobs: [job], databases: { eu: connect }, default: 'us' as never }), /default must be one of the databases' keys \(eu\)/);
    refused(() => createOutboxes({ jobs: [job], databases: {} }), /databases must have at least 1 item/);
    refused(() => createOutboxes({ jobs: [job], databases: { eu: 'postgres://' as never } }), /databases\.eu must be a connector/);
    refused(() => createOutboxes({ jobs: [job], databases: { eu: { connect, lanes: 9 } } }), /^createOutboxes: databases\.eu: options: field 'lanes' must be an integer in \[1, 5\]/);
    refused(() => createOutboxes({ jobs: [job] } as never), /`databases`/);
  });
});
