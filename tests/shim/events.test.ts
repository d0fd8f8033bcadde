// The event catalogue and the handler's context, in Node against a real PostgreSQL: each event
// type a test can cause here is caused and asserted with its fields, and what a handler sees in
// `ctx` is checked against the test clock. (Hand-off, nudge_failed, claim_late and settle_failed
// inside workerd are in outbox.test.ts and faults.test.ts.)
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { z } from 'zod';
import { cancel, createOutbox, defineJob, ok, retry, type JobContext, type OutboxEvent, type QueueProducer } from 'postbox';
import { createScheduledHandler } from 'postbox/cloudflare';
import { createPgConnector } from 'postbox/pg';
import { createTestClock, runUntilIdle } from 'postbox/testing';
import { useMigratedDb } from '../support/migrated-db.ts';

const db = useMigratedDb('events', { max: 3, resetEachTest: true });
const T0 = Date.parse('2026-11-30T12:00:00.000Z');

const seen: { kind: string; ctx: Omit<JobContext, 'db' | 'signal' | 'deps' | 'remainingMs'> & { remainingMs: number; aborted: boolean } }[] = [];
const probe = defineJob({
  kind: 'ev.probe',
  payload: z.object({ then: z.enum(['ok', 'retry', 'throw', 'cancel', 'bounce', 'cancelled_meanwhile']) }),
  timeoutMs: 4_000,
  warnAtStreak: 2,
  retry: { maxAttempts: 5, backoff: { baseMs: 1_000, maxMs: 1_000 }, perCode: { bounced: { streak: 2, onExhaustion: 'cancel' } } },
  classify: (error) => {
    if ((error as Error).message === 'classify me') throw new Error('classify itself broke');
    return undefined;
  },
  async handle({ then }, ctx) {
    seen.push({
      kind: ctx.kind,
      ctx: {
        jobId: ctx.jobId, kind: ctx.kind, attempt: ctx.attempt, idempotencyKey: ctx.idempotencyKey, deadline: ctx.deadline,
        remainingMs: ctx.remainingMs(), aborted: ctx.signal.aborted, tenantKey: ctx.tenantKey, correlationId: ctx.correlationId, metadata: ctx.metadata,
      },
    });
    if (then === 'retry') return retry({ code: 'again' });
    if (then === 'throw') throw new Error('classify me');
    if (then === 'cancel') return cancel({ reason: 'moot' });
    if (then === 'bounce') return retry({ code: 'bounced' });
    // An operator cancels the job while this attempt runs: its settle then finds it gone.
    if (then === 'cancelled_meanwhile') await operatorOutbox!.cancel({ id: ctx.jobId }, 'operator');
    return ok();
  },
});

let operatorOutbox: ReturnType<typeof setup>['outbox'] | null = null;

function setup(opts: { events?: (e: OutboxEvent) => void; maxPayloadBytes?: number; queue?: Record<string, QueueProducer> } = {}) {
  const clock = createTestClock(T0);
  const events: OutboxEvent[] = [];
  const outbox = createOutbox({
    jobs: [probe],
    connect: createPgConnector(db.url),
    clock,
    events: opts.events ?? ((e) => events.push(e)),
    ...(opts.maxPayloadBytes ? { maxPayloadBytes: opts.maxPayloadBytes } : {}),
    ...(opts.queue ? { queue: opts.queue } : {}),
  });
  return { clock, events, outbox };
}
const enqueue = (outbox: ReturnType<typeof setup>['outbox'], then: 'ok' | 'retry' | 'throw' | 'cancel' | 'bounce' | 'cancelled_meanwhile', extra: object = {}) =>
  outbox.transaction(db.pool, async (_tx, enq) => {
    const r = await enq(probe, { payload: { then }, ...extra });
    assert.equal(r.status, 'created');
    return (r as { id: string }).id;
  });
const ofType = <T extends OutboxEvent['type']>(events: OutboxEvent[], type: T) => events.filter((e) => e.type === type) as Extract<OutboxEvent, { type: T }>[];

test('ctx: ids, attempt, deadline and remainingMs on the outbox clock, tenant, correlation id and metadata', async () => {
  seen.length = 0;
  const { clock, outbox } = setup();
  const id = await enqueue(outbox, 'ok', { tenantKey: 'acme', correlationId: 'req-7', metadata: { source: 'signup', n: 1 } });
  await runUntilIdle(outbox, { clock, db: db.pool });
  assert.deepEqual(seen.map((s) => s.ctx), [{
    jobId: id, kind: 'ev.probe', attempt: 1, idempotencyKey: id, deadline: T0 + 4_000, remainingMs: 4_000, aborted: false,
    tenantKey: 'acme', correlationId: 'req-7', metadata: { source: 'signup', n: 1 },
  }]);
});

test('events: job_settled on every settlement, streak_warning at warnAtStreak, dead_letter at the budget', async () => {
  seen.length = 0;
  const { clock, events, outbox } = setup();
  const id = await enqueue(outbox, 'retry');
  await runUntilIdle(outbox, { clock, db: db.pool });
  assert.deepEqual(seen.map((s) => s.ctx.attempt), [1, 2, 3, 4, 5], 'ctx.attempt counts charged attempts');
  const settled = ofType(events, 'job_settled');
  assert.deepEqual(settled.map((e) => [e.to, e.outcome, e.code, e.attempt]), [
    ['retrying', 'retry', 'again', 1], ['retrying', 'retry', 'again', 2], ['retrying', 'retry', 'again', 3], ['retrying', 'retry', 'again', 4], ['dead', 'retry', 'again', 5],
  ]);
  assert.deepEqual(ofType(events, 'streak_warning'), [{ type: 'streak_warning', jobId: id, kind: 'ev.probe', code: 'again', streak: 2 }]);
  assert.deepEqual(ofType(events, 'dead_letter'), [{ type: 'dead_letter', jobId: id, kind: 'ev.probe', code: 'again', reason: 'attempts_exhausted' }]);
});

test('a classify that throws is reported as infra_error and the default (retry unexpected) applies', async () => {
  const { clock, events, outbox } = setup();
  const id = await enqueue(outbox, 'throw');
  await runUntilIdle(outbox, { clock, db: db.pool, maxRounds: 1 }).catch(() => undefined);
  const job = (await db.pool.query('SELECT status, last_error_code, last_error_message FROM outbox.job WHERE id = $1', [id])).rows[0];
  assert.deepEqual(job, { status: 'retrying', last_error_code: 'unexpected', last_error_message: 'classify me' });
  assert.deepEqual(ofType(events, 'infra_error')[0], { type: 'infra_error', where: 'classify(ev.probe)', error: 'classify itself broke' });
});

test('an event sink that throws breaks nothing: the job still runs and settles', async () => {
  let calls = 0;
  const { clock, outbox } = setup({ events: () => { calls++; throw new Error('sink down'); } });
  const id = await enqueue(outbox, 'ok');
  const report = await runUntilIdle(outbox, { clock, db: db.pool });
  assert.equal(report.succeeded, 1);
  assert.ok(calls > 0, 'the sink was called');
  assert.equal((await db.pool.query('SELECT status FROM outbox.job WHERE id = $1', [id])).rows[0].status, 'succeeded');
});

test('nudge_skipped: a lane without a queue leaves its jobs to the sweep, and says so', async () => {
  // Queues per lane, none for the default lane (the other lane's producer is never reached).
  const unused: QueueProducer = { send: async () => assert.fail('no send'), sendBatch: async () => assert.fail('no sendBatch') };
  const { events, outbox } = setup({ queue: { reports: unused } });
  await enqueue(outbox, 'ok');
  assert.deepEqual(ofType(events, 'nudge_skipped'), [{ type: 'nudge_skipped', jobs: 1, reason: 'no queue for lane default; the cron sweep will run them' }]);
});

test('a custom maxPayloadBytes refuses a payload over it, naming the limit', async () => {
  const { outbox } = setup({ maxPayloadBytes: 15 });
  const small = await outbox.transaction(db.pool, (_tx, enq) => enq(probe, { payload: { then: 'ok' } }));
  assert.equal(small.status, 'created', '{"then":"ok"} is 13 bytes');
  const big = await outbox.transaction(db.pool, (_tx, enq) => enq(probe, { payload: { then: 'retry' } }));
  assert.equal(big.status, 'invalid_payload');
  assert.equal((big as { issues: { message: string }[] }).issues[0]!.message, 'payload is 16 bytes; the limit is 15');
});

test('recovered and retention: a sweep recovers an expired lease and deletes finished jobs past retention', async () => {
  const { clock, events, outbox } = setup();
  const sweep = createScheduledHandler(() => outbox, { retention: { succeededRetentionMs: 86_400_000 } });
  const crashed = await enqueue(outbox, 'ok');
  const old = await enqueue(outbox, 'ok');
  const recent = await enqueue(outbox, 'ok');
  // One attempt died holding its lease; one job finished two days ago, one an hour ago.
  await db.pool.query(`UPDATE outbox.job SET status = 'running', attempt_seq = 1, lease_expires_at = $2 WHERE id = $1`, [crashed, new Date(T0 - 1_000)]);
  await db.pool.query(`INSERT INTO outbox.attempt (job_id, seq, kind, started_at, lease_expires_at) VALUES ($1, 1, 'ev.probe', $2, $3)`, [crashed, new Date(T0 - 60_000), new Date(T0 - 1_000)]);
  await db.pool.query(`UPDATE outbox.job SET status = 'succeeded', finished_at = $2 WHERE id = $1`, [old, new Date(T0 - 2 * 86_400_000)]);
  await db.pool.query(`UPDATE outbox.job SET status = 'succeeded', finished_at = $2 WHERE id = $1`, [recent, new Date(T0 - 3_600_000)]);
  const report = await sweep({ cron: '*/5 * * * *', scheduledTime: clock.now() }, {});
  assert.deepEqual(ofType(events, 'recovered'), [{ type: 'recovered', jobs: 1 }]);
  assert.deepEqual(ofType(events, 'retention'), [{ type: 'retention', deleted: 1, batches: 1 }]);
  assert.equal(report.deleted, 1);
  const left = (await db.pool.query('SELECT id, status FROM outbox.job ORDER BY id')).rows;
  assert.deepEqual(new Set(left.map((r) => r.id)), new Set([crashed, recent]), 'only the job past retention is gone');
  assert.equal((await db.pool.query(`SELECT outcome FROM outbox.attempt WHERE job_id = $1 AND seq = 1`, [crashed])).rows[0].outcome, 'crash');
});

test('events: cancelled when a code\'s streak runs out under onExhaustion cancel (not when a handler cancels); stale_settle carries the attempt number job_settled would have', async () => {
  const { clock, events, outbox } = setup();
  const moot = await enqueue(outbox, 'cancel');
  const bounced = await enqueue(outbox, 'bounce');
  await runUntilIdle(outbox, { clock, db: db.pool });
  assert.deepEqual(ofType(events, 'cancelled'), [{ type: 'cancelled', jobId: bounced, kind: 'ev.probe', code: 'bounced', reason: 'streak_exhausted' }]);
  const settled = (id: string) => ofType(events, 'job_settled').filter((e) => e.jobId === id).map((e) => [e.to, e.code, e.attempt]);
  assert.deepEqual(settled(moot), [['cancelled', 'moot', 1]]);
  assert.deepEqual(settled(bounced), [['retrying', 'bounced', 1], ['cancelled', 'bounced', 2]]);

  events.length = 0;
  operatorOutbox = outbox;
  // Two failed attempts first, so attempt_seq and the attempt number differ: replayed, the third
  // run is the job's attempt 1 again (a fresh budget) under attempt_seq 3.
  const stale = await enqueue(outbox, 'cancelled_meanwhile');
  await db.pool.query(`UPDATE outbox.job SET attempt_seq = 2 WHERE id = $1`, [stale]);
  await runUntilIdle(outbox, { clock, db: db.pool });
  const [event] = ofType(events, 'stale_settle');
  assert.deepEqual(event, { type: 'stale_settle', jobId: stale, kind: 'ev.probe', attempt: 1 });
  const { rows } = await db.pool.query(`SELECT status, attempt_seq FROM outbox.job WHERE id = $1`, [stale]);
  assert.deepEqual(rows, [{ status: 'cancelled', attempt_seq: 3 }]);
});
