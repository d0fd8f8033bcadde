// The test kit on PGlite: the two documented examples run as written (only the imports name
// Postbox's modules and the project's test runner), then what they rely on: the connector
// shares the one PGlite session safely, crashed attempts are recovered under a test clock,
// and a job that never settles down fails the test with `not_idle`.
import assert from 'node:assert/strict';
import { after, describe, it, test } from 'node:test';
import { expect } from 'expect';
import { z } from 'zod';
import { createOutbox, defineJob, ok, PostboxError } from 'postbox';
import { countJobs, getJob } from 'postbox/inspect';
import { createOutboxTestDatabase, createTestClock, runUntilIdle, type OutboxTestDatabase } from 'postbox/testing';

import { welcomeEmail } from './fixtures/testing-kit/jobs.ts';
import { fakeMailer, flakyMailer } from './fixtures/testing-kit/mailers.ts'; // records each userId it "sends" to; throws on the first `failures` sends

const opened: OutboxTestDatabase[] = [];
import { ATTEMPTS } from '../support/ledger.ts';
after(async () => {
  for (const t of opened) await t.close();
});

describe('the documented examples', () => {
  it('sends the welcome email', async () => {
    const test = await createOutboxTestDatabase(); // pglite with the schema applied
    opened.push(test);
    const sent: string[] = [];
    const outbox = createOutbox({
      jobs: [welcomeEmail],
      deps: { mailer: fakeMailer(sent) },
      connect: test.connect,
    });

    await outbox.transaction(test.db, (tx, enqueue) =>
      enqueue(welcomeEmail, { payload: { userId: 'u1' }, dedupeKey: 'welcome:u1' }),
    );

    expect(await runUntilIdle(outbox)).toMatchObject({ succeeded: 1 });
    expect(sent).toEqual(['u1']);
  });

  it('retries until the provider recovers', async () => {
    const test = await createOutboxTestDatabase();
    opened.push(test);
    const clock = createTestClock();
    const outbox = createOutbox({
      jobs: [welcomeEmail],
      deps: { mailer: flakyMailer({ failures: 2 }) },
      connect: test.connect,
      clock,
    });

    await outbox.transaction(test.db, (tx, enqueue) =>
      enqueue(welcomeEmail, { payload: { userId: 'u1' }, dedupeKey: 'welcome:u1' }),
    );

    const report = await runUntilIdle(outbox, { clock, db: test.db });

    expect(report).toMatchObject({ retrying: 2, succeeded: 1 });
  });
});

describe('the test database', () => {
  let t: OutboxTestDatabase;

  test('has the schema, and the inspection functions read it', async () => {
    t = await createOutboxTestDatabase();
    opened.push(t);
    const outbox = createOutbox({ jobs: [welcomeEmail], deps: { mailer: fakeMailer([]) }, connect: t.connect });
    const job = await outbox.transaction(t.db, (_tx, enqueue) => enqueue(welcomeEmail, { payload: { userId: 'u2' } }));
    assert.equal(job.status, 'created');
    const view = await getJob(t.db, { id: (job as { id: string }).id });
    assert.equal(view?.status, 'pending');
    assert.equal(view?.kind, 'email.welcome');
    assert.equal((await countJobs(t.db)).pending, 1);
    // A rolled-back transaction leaves nothing behind.
    await assert.rejects(outbox.transaction(t.db, async (_tx, enqueue) => {
      await enqueue(welcomeEmail, { payload: { userId: 'u3' } });
      throw new Error('business write failed');
    }), /business write failed/);
    assert.equal((await countJobs(t.db)).pending, 1);
    // outbox.enqueue inside a transaction the caller owns, on a client of its own.
    const client = await t.db.connect();
    await client.query('BEGIN');
    await outbox.enqueue(client, welcomeEmail, { payload: { userId: 'u4' } });
    await client.query('COMMIT');
    client.release();
    assert.equal((await countJobs(t.db)).pending, 2);
    assert.equal((await runUntilIdle(outbox)).succeeded, 2);
  });

  test('a transaction on one handle keeps every other handle out until it ends', async () => {
    await t.db.query('CREATE TABLE public.seen (n int)');
    const outbox = createOutbox({ jobs: [welcomeEmail], deps: { mailer: fakeMailer([]) }, connect: t.connect });
    const lane = await t.connect();
    const client = await t.db.connect();
    await client.query('BEGIN');
    await client.query('INSERT INTO public.seen VALUES (1)');
    // Another handle's statement waits for the transaction; if it ran inside it, the
    // rollback below would take its row too.
    const other = lane.db.query('INSERT INTO public.seen VALUES (2)');
    const enqueued = outbox.transaction(t.db, (_tx, enqueue) => enqueue(welcomeEmail, { payload: { userId: 'u5' } }));
    let settled = false;
    void Promise.all([other, enqueued]).then(() => (settled = true));
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(settled, false, 'the other handles waited');
    await client.query('ROLLBACK');
    client.release();
    await Promise.all([other, enqueued]);
    assert.deepEqual((await t.db.query('SELECT n FROM public.seen')).rows, [{ n: 2 }]);
    await lane.close();
  });

  test('a connection ended inside its transaction rolls it back and lets the others in', async () => {
    const lane = await t.connect();
    await lane.db.query('BEGIN');
    await lane.db.query('INSERT INTO public.seen VALUES (3)');
    const waiting = t.db.query('SELECT count(*)::int AS n FROM public.seen WHERE n = 3');
    await lane.destroy();
    assert.equal((await waiting).rows[0].n, 0);
    assert.equal(lane.isBroken?.(), true);
    await assert.rejects(lane.db.query('SELECT 1'), (e: unknown) => e instanceof PostboxError && e.code === 'session_closed');
  });
});

describe('runUntilIdle', () => {
  const start = Date.parse('2026-11-30T12:00:00.000Z');

  test('recovers an attempt whose run crashed once the clock passes its lease, and runs the job again', async () => {
    const t = await createOutboxTestDatabase();
    opened.push(t);
    const clock = createTestClock(start);
    let runs = 0;
    let crashed!: () => void;
    const started = new Promise<void>((resolve) => (crashed = resolve));
    let wakeFirst!: () => void;
    const firstWakes = new Promise<void>((resolve) => (wakeFirst = resolve));
    const job = defineJob({
      kind: 'kit.crashy',
      payload: z.object({}),
      timeoutMs: 30_000,
      async handle() {
        runs++;
        if (runs === 1) {
          // The first run hangs as if its process had died (its drain is abandoned), until the
          // end of the test lets it return, far too late.
          crashed();
          await firstWakes;
        }
        return ok();
      },
    });
    const dead = createOutbox({ jobs: [job], connect: t.connect, clock });
    const { id } = (await dead.transaction(t.db, (_tx, enqueue) => enqueue(job, { payload: {} }))) as { id: string };
    const abandoned = runUntilIdle(dead);
    await started;
    assert.equal((await getJob(t.db, { id }))?.status, 'running');

    const outbox = createOutbox({ jobs: [job], connect: t.connect, clock });
    // Before the lease runs out, the attempt may still be alive: nothing to do.
    assert.equal((await runUntilIdle(outbox, { clock, db: t.db })).recovered, 0);
    assert.equal((await getJob(t.db, { id }))?.status, 'running');

    clock.advance(job.policy.leaseMs + 1);
    const report = await runUntilIdle(outbox, { clock, db: t.db });
    assert.equal(report.recovered, 1);
    assert.equal(report.succeeded, 1);
    assert.equal(runs, 2);
    const view = await getJob(t.db, { id });
    assert.equal(view?.status, 'succeeded');
    const attempts = await t.db.query(`SELECT seq, outcome FROM ${ATTEMPTS} a WHERE job_id = $1 ORDER BY seq`, [id]);
    assert.deepEqual(attempts.rows, [{ seq: 1, outcome: 'crash' }, { seq: 2, outcome: 'ok' }]);
    // The first run returns at last: its settlement is fenced off.
    wakeFirst();
    const late = await abandoned;
    assert.equal(late.stale, 1);
    assert.equal((await getJob(t.db, { id }))?.status, 'succeeded');
  });

  test('throws not_idle after maxRounds when a job keeps coming back', async () => {
    const t = await createOutboxTestDatabase();
    opened.push(t);
    const clock = createTestClock(start);
    const job = defineJob({
      kind: 'kit.forever',
      payload: z.object({}),
      timeoutMs: 1_000,
      retry: { maxAttempts: 1_000 },
      async handle() {
        throw new Error('always down');
      },
    });
    const outbox = createOutbox({ jobs: [job], connect: t.connect, clock });
    await outbox.transaction(t.db, (_tx, enqueue) => enqueue(job, { payload: {} }));
    await assert.rejects(runUntilIdle(outbox, { clock, db: t.db, maxRounds: 5 }), (e: unknown) => {
      assert.ok(e instanceof PostboxError);
      assert.equal(e.code, 'not_idle');
      assert.match(e.message, /5 rounds/);
      return true;
    });
    // Rounds 1, 3 and 5 ran it; rounds 2 and 4 found nothing due and moved the clock.
    const [view] = (await t.db.query(`SELECT status, attempts FROM outbox.job`)).rows;
    assert.deepEqual(view, { status: 'retrying', attempts: 3 });
    await assert.rejects(runUntilIdle(outbox, { maxRounds: 0 }), (e: unknown) => e instanceof PostboxError && e.code === 'invalid_input');
  });
});
