// A SQLite outbox on D1 under the same Cloudflare handlers as a PostgreSQL one, inside workerd
// (tests/shim/fixtures/d1-cloudflare-worker.ts): an enqueue in `outbox.transaction` commits
// with the app's write in one D1 batch and is nudged after commit through Miniflare's real
// Queue, whose consumer (createQueueHandler over `outbox.bind(env.DB)`) runs the job; a
// transaction that fails writes nothing and nudges nothing; a Cron Trigger tick
// (createScheduledHandler) enqueues a schedule's occurrence once, and its sweep runs it.
import assert from 'node:assert/strict';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, test } from 'node:test';
import { startWorker, type TestWorker } from '../support/worker.ts';
import { until } from './outbox-env.ts';

const fixtures = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures');
let worker: TestWorker;

interface State {
  jobs: { id: string; status: string; attempts: number; dedupe_key: string | null }[];
  users: string[];
  runs: string[];
  sends: number[];
  events: string[];
}

before(async () => {
  worker = await startWorker({
    entry: path.join(fixtures, 'd1-cloudflare-worker.ts'),
    d1Databases: ['DB'],
    queues: { producers: { OUTBOX_QUEUE: 'postbox-d1' }, consumers: [{ queue: 'postbox-d1', maxBatchSize: 10, maxBatchTimeout: 0 }] },
  });
});
after(async () => {
  await worker?.dispose();
});

const state = async (): Promise<State> => (await worker.fetch('/state')).json() as Promise<State>;
const signup = async (email: string, fail = false) => {
  const res = await worker.fetch('/signup', { method: 'POST', body: JSON.stringify({ email, fail }) });
  return { status: res.status, body: (await res.json()) as { status?: string; id?: string; error?: string } };
};

test('an enqueue in outbox.transaction commits with the app\'s write and runs through the Queue consumer, no sweep involved', async () => {
  const { status, body } = await signup('ada@example.com');
  assert.equal(status, 200);
  assert.equal(body.status, 'created');
  // The nudge went out after the batch committed; the real queue delivers it to createQueueHandler.
  const done = await until(async () => {
    const s = await state();
    return s.jobs.find((j) => j.id === body.id && j.status === 'succeeded') ? s : undefined;
  });
  assert.deepEqual(done.users, ['ada@example.com']);
  assert.deepEqual(done.runs, ['ada@example.com#1']);
  assert.deepEqual(done.sends, [1]);
  assert.equal(done.jobs.find((j) => j.id === body.id)?.attempts, 1);
});

test('a transaction that fails after its enqueue writes neither the app\'s row nor the job, and nudges nothing', async () => {
  const before = await state();
  const { status, body } = await signup('bob@example.com', true);
  assert.equal(status, 500);
  assert.match(body.error ?? '', /failed after its enqueue/);
  const after = await state();
  assert.equal(after.jobs.length, before.jobs.length);
  assert.ok(!after.users.includes('bob@example.com'));
  assert.deepEqual(after.sends, before.sends, 'no nudge for a batch that never ran');
});

test('a Cron Trigger tick enqueues a schedule\'s occurrence once and its sweep runs it', async () => {
  const nine = Date.parse('2026-12-03T09:00:00Z');
  const key = 'schedule:digest:2026-12-03T09:00:00.000Z';
  assert.equal((await worker.scheduled({ cron: '0 9 * * *', scheduledTime: nine })).outcome, 'ok');
  const first = await state();
  const occurrence = first.jobs.filter((j) => j.dedupe_key === key);
  assert.equal(occurrence.length, 1);
  // The tick's sweep drained it (due at once): no queue was needed.
  assert.equal(occurrence[0]!.status, 'succeeded');
  assert.ok(first.runs.includes('digest@2026-12-03T09:00:00.000Z#1'));
  // The same tick again (a Cron Trigger delivered twice): recorded as handled, nothing new.
  assert.equal((await worker.scheduled({ cron: '0 9 * * *', scheduledTime: nine })).outcome, 'ok');
  const again = await state();
  assert.equal(again.jobs.filter((j) => j.dedupe_key === key).length, 1);
  assert.equal(again.runs.filter((r) => r.startsWith('digest@')).length, 1);
});

test('a hostile queue message is acked and reported, as for a PostgreSQL outbox', async () => {
  const result = await worker.queue('postbox-d1', [{ body: { t: 'job', id: 'not-a-uuid', kind: 'd1.welcome', lane: 'default' } }, { body: 'x'.repeat(10) }]);
  assert.equal(result.outcome, 'ok');
  assert.equal(result.ackAll, true);
  assert.ok((await state()).events.filter((e) => e === 'invalid_message').length >= 2);
});
