// A reserved sweep runs before the catch-all drain and stops at its job budget; `outbox.nudge`
// wakes the queue consumer for jobs enqueued in a transaction the caller owns, and never throws.
// Inside workerd (tests/shim/fixtures/outbox-worker.ts) against a real PostgreSQL.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { sleep, until, useOutboxEnv } from './outbox-env.ts';

const env = useOutboxEnv();

describe('reserved sweeps', () => {
  test('a reserved step claims at most its maxJobs of its kinds, and finishes them before the drain starts', async () => {
    const later = 3_600_000;
    const jobs = [
      ...['e1', 'e2', 'e3'].map((key) => ({ payload: { key, do: 'ok' }, delayMs: later })),
      ...['t1', 't2', 't3'].map((at) => ({ kind: 'test.tick', payload: { at }, delayMs: later })),
    ];
    const ids = (await env.post('/enqueue', { jobs })).body.map((r: { id: string }) => r.id);
    // All due now; the ticks later than the echoes, so the drain alone would not favour them.
    await env.sql(`UPDATE outbox.job SET due_at = now() - interval '10 minutes' WHERE id = ANY($1::uuid[]) AND kind = 'test.echo'`, [ids]);
    await env.sql(`UPDATE outbox.job SET due_at = now() - interval '5 minutes' WHERE id = ANY($1::uuid[]) AND kind = 'test.tick'`, [ids]);

    const report = (await env.post('/sweep-reserved', {})).body;
    assert.equal(report.claimed, 6);
    assert.equal(report.succeeded, 6);
    assert.deepEqual(report.failedSteps, []);
    // Exactly two ticks ran (and settled) before the first echo started: the reserved step's
    // budget. Without the budget all three would have; without the step, none need have.
    const [{ before }] = await env.sql(
      `SELECT count(*)::int AS before FROM outbox.attempt t
        WHERE t.kind = 'test.tick'
          AND t.finished_at <= (SELECT min(e.started_at) FROM outbox.attempt e WHERE e.kind = 'test.echo')`,
    );
    assert.equal(before, 2);
  });
});

describe('outbox.nudge', () => {
  test('a job enqueued in the caller\'s transaction waits; nudged, the consumer runs it once', async () => {
    const created = (await env.post('/enqueue-quiet', { payload: { key: 'quiet', do: 'ok' } })).body;
    assert.equal(created.status, 'created');
    // No nudge went out: the job waits (for a sweep, or a nudge).
    await sleep(1_000);
    assert.equal((await env.job(created.id)).status, 'pending');
    assert.deepEqual(await env.sent(), []);

    assert.deepEqual((await env.post('/nudge', { refs: [{ id: created.id, kind: created.kind }] })).body, { nudged: 1 });
    const sent = await env.sent();
    assert.equal(sent.length, 1);
    assert.equal(sent[0].queue, 'postbox');
    await until(async () => (await env.job(created.id)).status === 'succeeded');
    assert.deepEqual((await env.sql(`SELECT attempt FROM public.sink WHERE key = 'quiet'`)).map((r) => r.attempt), [1]);
  });

  test('a nudge the queue refuses is a nudge_failed event, never a throw; the job stays for the sweep', async () => {
    const created = (await env.post('/enqueue-quiet', { payload: { key: 'refused', do: 'ok' } })).body;
    await env.post('/queue-down', { down: true });
    const res = await env.post('/nudge', { refs: [{ id: created.id, kind: created.kind }] });
    assert.equal(res.status, 200);
    const events = await env.events();
    assert.ok(events.some((e) => e.type === 'nudge_failed' && e.jobs === 1), JSON.stringify(events));
    assert.equal((await env.job(created.id)).status, 'pending');
    await env.post('/queue-down', { down: false });
    await env.post('/sweep', {});
    assert.equal((await env.job(created.id)).status, 'succeeded');
  });
});
