// Broken connections: the database goes away before a claim, or mid-attempt before the
// settle. Nothing is lost: the message is redelivered, or the settle retries on a fresh session.
import assert from 'node:assert/strict';
import net from 'node:net';
import path from 'node:path';
import { after, before, beforeEach, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { startWorker, type TestWorker } from '../support/worker.ts';
import { startOutboxEnv, until, type OutboxEnv } from './outbox-env.ts';

const fixtures = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures');
let env: OutboxEnv;
let unreachable: TestWorker;
let hangUp: net.Server;

before(async () => {
  env = await startOutboxEnv();
  // A "database" that accepts connections and hangs up at once: the server went away.
  hangUp = net.createServer((socket) => socket.destroy());
  await new Promise<void>((resolve) => hangUp.listen(0, '127.0.0.1', resolve));
  const port = (hangUp.address() as net.AddressInfo).port;
  // Same Worker, but its Hyperdrive binding points at that server.
  unreachable = await startWorker({
    entry: path.join(fixtures, 'outbox-worker.ts'),
    databaseUrl: `postgres://postbox:postbox@127.0.0.1:${port}/nowhere`,
    queues: { producers: { OUTBOX_QUEUE: 'postbox-x', BULK_QUEUE: 'postbox-bulk-x' } },
  });
});
after(async () => {
  await unreachable?.dispose();
  hangUp?.close();
  await env?.stop();
});
beforeEach(async () => {
  await env.reset();
});

test('a consumer that cannot reach the database asks for redelivery and reports infra_error', async () => {
  const result = await unreachable.queue('postbox', [
    { body: { v: 1, t: 'job', id: '0190a5b2-0000-7000-8000-000000000001', kind: 'test.echo', lane: 'default' } },
  ]);
  assert.equal(result.outcome, 'ok');
  assert.equal(result.ackAll, false);
  assert.equal(result.retryBatch.retry, true);
  const events = (await (await unreachable.fetch('/events')).json()) as any[];
  const infra = events.find((e) => e.type === 'infra_error');
  assert.ok(infra, JSON.stringify(events));
  assert.match(infra.error, /could not open an outbox connection/);
});

test('a sweep whose database is gone reports each failed step and still finishes', async () => {
  await unreachable.fetch('/events');
  const result = await unreachable.scheduled({ cron: '*/5 * * * *' });
  assert.equal(result.outcome, 'ok');
  const events = (await (await unreachable.fetch('/events')).json()) as any[];
  const failed = events.filter((e) => e.type === 'infra_error').map((e) => e.where);
  // Every step that needs the database was tried and reported, in the core's order.
  assert.deepEqual(failed, ['sweep recover', 'sweep drain', 'sweep handoff', 'sweep retention']);
});

for (const hook of ['off', 'record'] as const) {
  test(`a session killed mid-attempt is replaced, and the settlement still lands (onTransition ${hook})`, async () => {
    await env.post('/hook', { mode: hook });
    const res = await env.post('/enqueue', { jobs: [{ payload: { key: 'kill', do: 'sleep', ms: 1_500 } }] });
    const id = res.body[0].id;
    // Kill while the handler sleeps: after its first write through ctx.db has landed.
    await until(async () => (await env.sql('SELECT 1 FROM public.sink WHERE key = $1', ['kill'])).length > 0);
    const killed = await env.sql(
      `SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity
        WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'`,
    );
    assert.ok(killed.length >= 1);
    const job = await until(async () => {
      const j = await env.job(id);
      return j.status === 'succeeded' ? j : undefined;
    });
    assert.equal(job.attempts, 1);
    const attempts = await env.sql('SELECT outcome FROM outbox.attempt WHERE job_id = $1', [id]);
    assert.deepEqual(attempts, [{ outcome: 'ok' }]);
    if (hook === 'record') assert.deepEqual((await env.sql('SELECT note FROM public.sink WHERE key = $1', [id])).map((r) => r.note), ['transition:succeeded']);
  });
}
