// A reserved sweep runs before the catch-all drain and stops at its job budget; `outbox.nudge`
// wakes the queue consumer for jobs enqueued in a transaction the caller owns, and never throws.
// Inside workerd (tests/shim/fixtures/outbox-worker.ts) against a real PostgreSQL.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { crashWhileRunning, sleep, until, useOutboxEnv } from './outbox-env.ts';
import { ATTEMPTS } from '../support/ledger.ts';

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
      `SELECT count(*)::int AS before FROM ${ATTEMPTS} t
        WHERE t.kind = 'test.tick'
          AND t.finished_at <= (SELECT min(e.started_at) FROM ${ATTEMPTS} e WHERE e.kind = 'test.echo')`,
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

/** `n` jobs that finished `daysAgo` days ago (past the default 7-day retention), each with an attempt. */
async function finishedJobs(n: number, daysAgo = 8): Promise<void> {
  await env.sql(
    `WITH j AS (
       INSERT INTO outbox.job (id, kind, status, payload, due_at, created_at, updated_at, finished_at, attempts, attempt_seq)
       SELECT gen_random_uuid(), 'test.echo', 'succeeded', '{}'::jsonb, t, t, t, t, 1, 1
         FROM (SELECT now() - make_interval(days => $2::int) AS t) at, generate_series(1, $1::int)
       RETURNING id, finished_at)
     INSERT INTO outbox.attempt (job_id, seq, kind, started_at, lease_expires_at, finished_at, outcome)
     SELECT id, 1, 'test.echo', finished_at, finished_at, finished_at, 'ok' FROM j`,
    [n, daysAgo],
  );
}
const countJobs = async () => (await env.sql(`SELECT count(*)::int AS n FROM outbox.job`))[0].n as number;

describe('retention', () => {
  test('one sweep deletes every expired job, in batches, however many batches that takes', async () => {
    await finishedJobs(2_500);
    await finishedJobs(3, 1); // not past retention: kept
    const report = (await env.post('/sweep', {})).body;
    assert.deepEqual(report.failedSteps, []);
    assert.equal(report.deleted, 2_500);
    assert.equal(await countJobs(), 3);
    // Their attempts went with them.
    assert.equal((await env.sql(`SELECT count(*)::int AS n FROM ${ATTEMPTS} a`))[0].n, 3);
    // Three batches of the default 1,000: two full, one short (nothing left).
    assert.deepEqual((await env.events()).filter((e) => e.type === 'retention'), [{ type: 'retention', deleted: 2_500, batches: 3 }]);
  });

  test('batchSize sets the batch; the loop stops when its budget is spent, and the next sweep goes on', async () => {
    await finishedJobs(1_000);
    // Each batch moves the outbox's clock on 400 ms: a 1 s budget allows three batches.
    await env.post('/clock', { offsetMs: 0, retentionStepMs: 400 });
    const first = (await env.post('/sweep-with', { options: { retention: { batchSize: 100, budgetMs: 1_000 } } })).body;
    assert.deepEqual(first.failedSteps, []);
    assert.equal(first.deleted, 300);
    assert.equal(await countJobs(), 700);
    assert.deepEqual((await env.events()).filter((e) => e.type === 'retention'), [{ type: 'retention', deleted: 300, batches: 3 }]);
    // Without the step (a budget of 0 allows one batch) and at the default batch, the rest goes.
    await env.post('/clock', { offsetMs: 0 });
    const second = (await env.post('/sweep-with', { options: { retention: { budgetMs: 0 } } })).body;
    assert.equal(second.deleted, 700);
    assert.equal(await countJobs(), 0);
  });

  test('the invocation deadline caps retention\'s budget', async () => {
    await finishedJobs(1_000);
    // A 3 s invocation: the first batch leaves the clock 2 s on, the second past the deadline.
    await env.post('/clock', { offsetMs: 0, retentionStepMs: 2_000 });
    const report = (await env.post('/sweep-with', { options: { invocationBudgetMs: 3_000, retention: { batchSize: 100 } } })).body;
    assert.equal(report.deleted, 200);
    assert.equal(await countJobs(), 800);
  });
});

describe('kinds nothing here runs', () => {
  test('an expired attempt of a kind this deploy does not register is recovered: the job leaves running, its attempt is closed', async () => {
    // Claimed by a deploy that registers test.bulk, whose isolate then died.
    const id = (await env.post('/enqueue', { jobs: [{ kind: 'test.bulk', payload: { key: 'orphan' }, delayMs: 3_600_000 }] })).body[0].id;
    await crashWhileRunning(env, id);
    await env.events();
    // A later deploy without test.bulk sweeps.
    const report = (await env.post('/sweep-with', { without: 'test.bulk' })).body;
    assert.deepEqual(report.failedSteps, []);
    assert.equal(report.recovered, 1);
    const job = await env.job(id);
    assert.equal(job.status, 'retrying');
    assert.equal(job.crashes, 1);
    assert.equal(job.lease_expires_at, null);
    // Settled as a crash under the default policy: the default crash backoff, not forever.
    assert.ok(job.due_at.getTime() > Date.now(), String(job.due_at));
    const attempts = await env.sql(`SELECT outcome, finished_at FROM ${ATTEMPTS} a WHERE job_id = $1`, [id]);
    assert.equal(attempts.length, 1);
    assert.equal(attempts[0].outcome, 'crash');
    assert.ok(attempts[0].finished_at);
    const events = await env.events();
    assert.deepEqual(events.filter((e) => e.type === 'recovered'), [{ type: 'recovered', jobs: 1 }]);
    assert.ok(events.some((e) => e.type === 'job_settled' && e.jobId === id && e.to === 'retrying'), JSON.stringify(events));
    // Back in a deploy that registers the kind, it runs once it is due.
    await env.sql(`UPDATE outbox.job SET due_at = now() - interval '1 minute' WHERE id = $1`, [id]);
    await env.post('/sweep', {});
    await until(async () => (await env.job(id)).status === 'succeeded');
  });

  test('a live lease of an unregistered kind is left alone', async () => {
    const id = (await env.post('/enqueue', { jobs: [{ kind: 'test.bulk', payload: { key: 'alive' }, delayMs: 3_600_000 }] })).body[0].id;
    await crashWhileRunning(env, id);
    await env.sql(`UPDATE outbox.job SET lease_expires_at = now() + interval '10 minutes' WHERE id = $1`, [id]);
    const report = (await env.post('/sweep-with', { without: 'test.bulk' })).body;
    assert.equal(report.recovered, 0);
    assert.equal((await env.job(id)).status, 'running');
  });
});
