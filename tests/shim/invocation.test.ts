// One invocation deadline bounds every await inside workerd: a database that stops answering
// (mid-attempt, or before a connection is even opened) ends the invocation at its deadline with
// a typed report instead of hanging, and the job is recovered afterwards: nothing is lost.
// Also: pending jobs of a kind this deploy does not register are reported, not silent.
import assert from 'node:assert/strict';
import net from 'node:net';
import path from 'node:path';
import { after, before, beforeEach, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { listenLocal, type ListeningProxy } from '../support/local-proxy.ts';
import { startWorker, type TestWorker } from '../support/worker.ts';
import { startOutboxEnv, until, type OutboxEnv } from './outbox-env.ts';

const fixtures = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures');

interface FreezingProxy extends ListeningProxy {
  /** From now on nothing is forwarded either way, and new connections are never answered. */
  freeze(): void;
  thaw(): void;
}

/** A TCP relay to the database that can go silent, as a stalled network or server does. */
async function freezingProxy(targetPort: number): Promise<FreezingProxy> {
  let frozen = false;
  const sockets = new Set<net.Socket>();
  const track = (s: net.Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
    s.on('error', () => undefined);
    return s;
  };
  const server = net.createServer((client) => {
    track(client);
    if (frozen) return; // accepted, never answered
    const upstream = track(net.connect(targetPort, '127.0.0.1'));
    client.on('data', (d) => void (frozen || upstream.write(d)));
    upstream.on('data', (d) => void (frozen || client.write(d)));
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  const proxy = await listenLocal(server, sockets);
  return { ...proxy, freeze: () => void (frozen = true), thaw: () => void (frozen = false) };
}

let env: OutboxEnv;
let proxy: FreezingProxy;
let stalled: TestWorker;

const post = async (worker: TestWorker, pathname: string, body: unknown) => {
  const res = await worker.fetch(pathname, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
  return (await res.json()) as any;
};
const eventsOf = async (worker: TestWorker) => (await (await worker.fetch('/events')).json()) as any[];

before(async () => {
  env = await startOutboxEnv();
  proxy = await freezingProxy(Number(new URL(env.dbUrl).port));
  // The same Worker, reaching the same database through the proxy. Its queues have no
  // consumer: only the test runs its handlers.
  stalled = await startWorker({
    entry: path.join(fixtures, 'outbox-worker.ts'),
    databaseUrl: proxy.url(env.dbUrl),
    queues: { producers: { OUTBOX_QUEUE: 'postbox-stalled', BULK_QUEUE: 'postbox-bulk-stalled' } },
  });
});
after(async () => {
  await stalled?.dispose();
  await proxy?.close();
  await env?.stop();
});
beforeEach(async () => {
  proxy.thaw();
  await env.reset();
  await eventsOf(stalled);
});

describe('one invocation deadline bounds every await', () => {
  test('a queue batch whose database does not answer is sent back, each message after the core\'s delay for its delivery count', async () => {
    const [created] = await post(stalled, '/enqueue', { jobs: [{ payload: { key: 'unanswered', do: 'ok' } }] });
    assert.equal(created.status, 'created');
    proxy.freeze();
    try {
      const out = await post(stalled, '/drain-short', {
        budgetMs: 3_000,
        jobs: [{ id: created.id, kind: 'test.echo', attempts: 1 }, { id: created.id, kind: 'test.echo', attempts: 3 }],
      });
      assert.equal(out.acked, false);
      assert.equal(out.retried, false, 'not the whole batch at once, with no delay');
      assert.deepEqual(out.answers, [{ id: 'm0', ack: false, delaySeconds: 5 }, { id: 'm1', ack: false, delaySeconds: 20 }]);
    } finally {
      proxy.thaw();
    }
    assert.equal((await env.job(created.id)).status, 'pending', 'nothing claimed it: the job waits for the next nudge or sweep');
  });

  test('a settle stuck on a silent connection ends at the queue invocation\'s deadline; the sweep recovers the job and nothing is lost', async () => {
    const [created] = await post(stalled, '/enqueue', { jobs: [{ payload: { key: 'stuck', do: 'sleep', ms: 1_000 } }] });
    assert.equal(created.status, 'created');
    // A 3 s invocation: the job (2 s timeout) is admitted; the connection goes silent while it runs.
    const running = post(stalled, '/drain-short', { budgetMs: 3_000, jobs: [{ id: created.id, kind: 'test.echo' }] });
    await until(async () => (await env.sql(`SELECT 1 FROM public.sink WHERE key = 'stuck'`)).length > 0, 5_000);
    proxy.freeze();
    const out = await running;
    // Ended by the deadline (3 s from the start): the settle began after the 1 s handler, so the
    // connector's own 4 s query timeout could not have ended it before 5 s.
    assert.ok(out.ms >= 2_500 && out.ms < 4_800, `the invocation took ${out.ms} ms`);
    assert.equal(out.report.claimed, 1);
    assert.equal(out.report.succeeded, 0);
    const events = await eventsOf(stalled);
    const failed = events.find((e) => e.type === 'settle_failed' && e.jobId === created.id);
    assert.ok(failed, JSON.stringify(events));
    assert.ok(events.some((e) => e.type === 'infra_error' && e.where === 'settle' && /deadline passed/.test(e.error)), JSON.stringify(events));
    // The settlement was never written: the job still holds its lease, uncharged.
    const held = await env.job(created.id);
    assert.equal(held.status, 'running');
    assert.equal(held.attempts, 0);

    // Past the lease, the healthy Worker's sweep recovers it as a crash (not an attempt) and,
    // once its crash backoff has passed, runs it again: it succeeds, shown as attempt 1 both times.
    proxy.thaw();
    await env.post('/clock', { offsetMs: 60_000 });
    await env.post('/sweep', {});
    const recovered = await env.job(created.id);
    assert.equal(recovered.status, 'retrying');
    assert.equal(recovered.crashes, 1);
    assert.equal(recovered.attempts, 0);
    await env.post('/clock', { offsetMs: 3_600_000 });
    await env.post('/sweep', {});
    const done = await env.job(created.id);
    assert.equal(done.status, 'succeeded');
    assert.equal(done.attempts, 1);
    const runs = await env.sql(`SELECT attempt FROM public.sink WHERE key = 'stuck' ORDER BY id`);
    assert.deepEqual(runs.map((r) => r.attempt), [1, 1]);
  });

  test('a connection that is never answered ends the sweep at its deadline: every step that needed it reports deadline_exceeded', async () => {
    proxy.freeze();
    const out = await post(stalled, '/sweep-short', {});
    // The 3 s budget ends it, well before the connector's 10 s connection timeout.
    assert.ok(out.ms >= 2_500 && out.ms < 6_000, `the sweep took ${out.ms} ms`);
    const report = out.report;
    assert.ok(report.failedSteps.includes('recover'), JSON.stringify(report));
    for (const step of ['handoff', 'unregistered', 'retention']) assert.ok(report.failedSteps.includes(step), `${step} failed: ${JSON.stringify(report)}`);
    const events = await eventsOf(stalled);
    const exceeded = events.filter((e) => e.type === 'deadline_exceeded');
    assert.deepEqual(exceeded.map((e) => e.where).sort(), report.failedSteps.map((s: string) => `sweep ${s}`).sort());
    assert.ok(exceeded.every((e) => e.severity === 'error'));
  });
});

describe('an unregistered kind that sits pending is visible', () => {
  test('the sweep reports each kind with its count of jobs due past the grace; countBacklog counts every waiting one', async () => {
    const res = await env.post('/enqueue', { jobs: [{ payload: { key: 'a', do: 'ok' }, delayMs: 3_600_000 }, { payload: { key: 'b', do: 'ok' }, delayMs: 3_600_000 }, { payload: { key: 'c', do: 'ok' }, delayMs: 3_600_000 }] });
    const [old, recent, registered] = res.body.map((r: { id: string }) => r.id);
    // Two jobs of a kind this deploy no longer registers: one due for 10 min, one for 1 min.
    await env.sql(`UPDATE outbox.job SET kind = 'test.gone', due_at = now() - interval '10 minutes' WHERE id = $1`, [old]);
    await env.sql(`UPDATE outbox.job SET kind = 'test.gone', due_at = now() - interval '1 minute' WHERE id = $1`, [recent]);
    await env.events();
    const sweep = await env.post('/sweep', {});
    assert.deepEqual(sweep.body.unregistered, [{ kind: 'test.gone', count: 1 }]);
    const events = await env.events();
    assert.deepEqual(events.filter((e) => e.type === 'unknown_kind'), [{ type: 'unknown_kind', kind: 'test.gone', count: 1, severity: 'warn' }]);
    // Nothing touched them: still pending, waiting for a deploy that registers the kind.
    for (const id of [old, recent]) assert.equal((await env.job(id)).status, 'pending');

    const backlog = (await (await env.worker.fetch('/backlog')).json()) as any[];
    const gone = backlog.find((b) => b.kind === 'test.gone');
    assert.equal(gone.unregistered, 2);
    assert.equal(gone.due, 2);
    const echo = backlog.find((b) => b.kind === 'test.echo');
    assert.equal(echo.unregistered, 0);
    assert.equal(echo.scheduled, 1);
    assert.equal((await env.job(registered)).status, 'pending');
  });

  test('no unregistered kinds, no report', async () => {
    await env.post('/enqueue', { jobs: [{ payload: { key: 'z', do: 'ok' }, delayMs: 3_600_000 }] });
    const sweep = await env.post('/sweep', {});
    assert.deepEqual(sweep.body.unregistered, []);
    assert.equal((await env.events()).filter((e) => e.type === 'unknown_kind').length, 0);
  });
});
