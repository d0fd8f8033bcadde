// Broken connections: the database goes away before a claim, or mid-attempt before the
// settle. Nothing is lost: the message is redelivered, or the settle retries on a fresh session.
import assert from 'node:assert/strict';
import net from 'node:net';
import path from 'node:path';
import { after, before, beforeEach, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { startWorker, type TestWorker } from '../support/worker.ts';
import { crashWhileRunning, startOutboxEnv, until, type OutboxEnv } from './outbox-env.ts';
import { ATTEMPTS } from '../support/ledger.ts';

const fixtures = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures');
let env: OutboxEnv;
let unreachable: TestWorker;
let hangUp: net.Server;
const refused = new Set<net.Socket>();

/** A PostgreSQL ErrorResponse message of severity FATAL. */
function pgFatal(code: string, message: string): Buffer {
  const fields = Buffer.from(`SFATAL\0VFATAL\0C${code}\0M${message}\0\0`);
  const head = Buffer.alloc(5);
  head.write('E');
  head.writeUInt32BE(fields.length + 4, 1);
  return Buffer.concat([head, fields]);
}

before(async () => {
  env = await startOutboxEnv();
  // A "database" that refuses every session, as a server shutting down does: it declines TLS
  // and answers the startup message with FATAL 57P03. It leaves closing to the client: Miniflare's
  // Hyperdrive proxy pipes sockets without error listeners, so a write it forwards after this
  // side closed would surface in this process as an uncaught error instead of in the Worker.
  hangUp = net.createServer((socket) => {
    refused.add(socket);
    socket.on('close', () => refused.delete(socket));
    socket.on('error', () => undefined);
    socket.on('data', (chunk) => {
      if (chunk.length === 8 && chunk.readUInt32BE(4) === 80877103) return void socket.write('N'); // SSLRequest
      if (chunk[0] === 0) socket.write(pgFatal('57P03', 'the database system is shutting down')); // StartupMessage
    });
  });
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
  for (const socket of refused) socket.destroy();
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
  // The message comes back after the core's delay for a first delivery, not at once.
  assert.equal(result.retryBatch.retry, false);
  assert.deepEqual(result.retryMessages.map((m: { delaySeconds?: number }) => m.delaySeconds), [5]);
  assert.deepEqual(result.explicitAcks, []);
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
  // Every step that needs the database was tried and reported, in the core's order: the
  // schedules' read first (tried 3 times, as the core decides for a lost connection), then the sweep.
  assert.deepEqual(failed, ['schedule', 'schedule', 'sweep recover', 'sweep dependencies', 'sweep drain', 'sweep handoff', 'sweep unregistered', 'sweep retention', 'sweep compact']);
  assert.deepEqual(events.filter((e) => e.type === 'schedule_failed').map((e) => e.schedule), ['test.tick', 'fanout']);
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
    const attempts = await env.sql(`SELECT outcome FROM ${ATTEMPTS} a WHERE job_id = $1`, [id]);
    assert.deepEqual(attempts, [{ outcome: 'ok' }]);
    if (hook === 'record') assert.deepEqual((await env.sql('SELECT note FROM public.sink WHERE key = $1', [id])).map((r) => r.note), ['transition:succeeded']);
  });
}

for (const hook of ['commit', 'onTransition'] as const) {
  test(`a connection lost inside the ${hook} hook retries the settle on a fresh session, charging nothing`, async () => {
    if (hook === 'onTransition') await env.post('/hook', { mode: 'slow' });
    const marker = hook === 'commit' ? 'in_commit_hook' : 'in_transition_hook';
    const res = await env.post('/enqueue', { jobs: [{ payload: { key: 'hookkill', do: hook === 'commit' ? 'commit_slow' : 'ok' } }] });
    const id = res.body[0].id;
    // Kill the backend while the hook's statement runs inside the settle transaction.
    const killed = await until(async () => {
      const rows = await env.sql(
        `SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity
          WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE $1`,
        [`%${marker}%`],
      );
      return rows.length > 0 ? rows : undefined;
    });
    assert.equal(killed.length, 1);
    const job = await until(async () => {
      const j = await env.job(id);
      return j.status === 'succeeded' ? j : undefined;
    });
    // One charged attempt, settled ok; no hook_failed anywhere.
    assert.equal(job.attempts, 1);
    assert.equal(job.last_error_code, null);
    assert.deepEqual(await env.sql(`SELECT outcome FROM ${ATTEMPTS} a WHERE job_id = $1`, [id]), [{ outcome: 'ok' }]);
    // The hook's effects landed once, with the transition that finally committed.
    const sink = (key: string) => env.sql('SELECT note FROM public.sink WHERE key = $1 ORDER BY id', [key]).then((rows) => rows.map((r) => r.note));
    if (hook === 'commit') assert.deepEqual(await sink('hookkill'), ['commit_slow', 'committed']);
    else assert.deepEqual(await sink(id), ['transition:succeeded']);
    const events = await env.events();
    assert.ok(events.some((e) => e.type === 'infra_error' && e.where === 'settle'), JSON.stringify(events));
    assert.ok(!events.some((e) => e.type === 'job_settled' && e.outcome === 'hook_failed'));
  });
}

test('a settle that keeps losing its connection gives up with settle_failed; the sweep recovers the job and nothing is lost', async () => {
  const res = await env.post('/enqueue', { jobs: [{ payload: { key: 'twice', do: 'commit_slow' } }] });
  const id = res.body[0].id;
  // pg_terminate_backend only signals: the killed session can stay visible in pg_stat_activity for a moment, so the
  // second kill must wait for a different session (the retry's), not re-kill the first.
  const killed: number[] = [];
  const killHook = () => until(async () => {
    const rows = await env.sql(
      `SELECT pid, pg_terminate_backend(pid) AS ok FROM pg_stat_activity
        WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE '%in_commit_hook%'
          AND NOT (pid = ANY($1::int[]))`,
      [killed],
    );
    if (rows.length === 0) return undefined;
    killed.push(...rows.map((r: { pid: number }) => r.pid));
    return rows;
  });
  await killHook();
  await killHook(); // the retry on a fresh session loses its connection too: the core says give up
  const failed = await until(async () => (await env.events()).find((e) => e.type === 'settle_failed'));
  assert.deepEqual(failed, { type: 'settle_failed', jobId: id, kind: 'test.echo', error: 'settlement could not be written; the lease will expire and the sweep recovers it' });
  assert.equal((await env.job(id)).status, 'running', 'nothing was written: the lease still holds the job');
  // Past the lease, the sweep recovers the crash (uncharged) and, once the backoff passed, runs it again.
  await env.post('/clock', { offsetMs: 60_000 });
  await env.post('/sweep', {});
  assert.equal((await env.job(id)).status, 'retrying');
  await env.post('/clock', { offsetMs: 600_000 });
  await env.post('/sweep', {});
  const job = await until(async () => {
    const j = await env.job(id);
    return j.status === 'succeeded' ? j : undefined;
  });
  assert.equal(job.crashes, 0);
  assert.deepEqual(await env.sql(`SELECT seq, outcome FROM ${ATTEMPTS} a WHERE job_id = $1 ORDER BY seq`, [id]), [{ seq: 1, outcome: 'crash' }, { seq: 2, outcome: 'ok' }]);
  assert.deepEqual((await env.sql(`SELECT note FROM public.sink WHERE key = 'twice' ORDER BY id`)).map((r) => r.note), ['commit_slow', 'commit_slow', 'committed']);
});

describe('the sweep report', () => {
  const HOUR = 3_600_000;
  /** One job of each kind of sweep work: a crashed attempt, a due job, a long-lease job to hand off. */
  async function sweepWork() {
    const res = await env.post('/enqueue', {
      jobs: [
        { payload: { key: 'crashed', do: 'ok' }, delayMs: 10 * HOUR },
        { payload: { key: 'due', do: 'ok' }, delayMs: HOUR },
        { kind: 'test.bulk', payload: { key: 'long' }, delayMs: HOUR },
      ],
    });
    const [crashed, due, long] = res.body.map((r: { id: string }) => r.id);
    await crashWhileRunning(env, crashed);
    await env.post('/clock', { offsetMs: 2 * HOUR });
    return { crashed, due, long };
  }
  const zero = { claimed: 0, succeeded: 0, retrying: 0, dead: 0, cancelled: 0, pending: 0, claimLate: 0, released: 0, stale: 0, recovered: 0, throttled: 0, handedOff: 0, deleted: 0, unblocked: 0, unregistered: [], rebuiltIndexes: [], analyzedTables: [], schedulesDeferred: 0 };

  test('a healthy sweep reports exact counts, every field a number, and hands long jobs to their queue', async () => {
    const { crashed, due, long } = await sweepWork();
    const report = (await env.post('/sweep', {})).body;
    assert.deepEqual(report, { ...zero, claimed: 1, succeeded: 1, retrying: 1, recovered: 1, handedOff: 1, failedSteps: [], schedules: [] });
    assert.equal((await env.job(crashed)).status, 'retrying');
    assert.equal((await env.job(due)).status, 'succeeded');
    const events = await env.events();
    assert.deepEqual(events.filter((e) => e.type === 'recovered'), [{ type: 'recovered', jobs: 1 }]);
    assert.deepEqual(events.filter((e) => e.type === 'handoff'), [{ type: 'handoff', lane: 'bulk', jobs: 1 }]);
    // The handed-off job runs from its lane's queue (Miniflare's), not in the sweep.
    await until(async () => (await env.job(long)).status === 'succeeded');
  });

  test('a long job is handed off once per cooldown: the next sweep skips it, a sweep after the cooldown hands it off again', async () => {
    const long = (await env.post('/enqueue', { jobs: [{ kind: 'test.bulk', payload: { key: 'cooldown' }, delayMs: HOUR }] })).body[0].id;
    await env.post('/clock', { offsetMs: 2 * HOUR });
    await env.sent();
    // Its consumer never gets to it (as when the queue is backed up): a KEY SHARE lock makes the
    // claim's FOR UPDATE SKIP LOCKED pass it by, while the sweep can still read and mark it.
    const holder = new pg.Client({ connectionString: env.dbUrl });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM outbox.job WHERE id = $1 FOR KEY SHARE', [long]);
      const bulkIds = async () => (await env.sent()).filter((b) => b.queue === 'postbox-bulk').flatMap((b) => b.messages.map((m) => m.body.id ?? m.body.ids));
      const first = (await env.post('/sweep', {})).body;
      assert.equal(first.handedOff, 1);
      const nudgedAt = (await env.job(long)).nudge_sent_at as Date;
      assert.ok(nudgedAt, 'the hand-off is recorded');
      assert.equal(nudgedAt.getTime() - Date.now() > HOUR, true, 'recorded on the outbox clock');
      const second = (await env.post('/sweep', {})).body;
      assert.equal(second.handedOff, 0, 'within the cooldown: not nudged again');
      assert.deepEqual(await bulkIds(), [long], 'one nudge for two sweeps');
      assert.equal((await env.job(long)).status, 'pending');
      assert.deepEqual((await env.events()).filter((e) => e.type === 'handoff'), [{ type: 'handoff', lane: 'bulk', jobs: 1 }]);
      // The default cooldown is 15 minutes.
      await env.post('/clock', { offsetMs: 2 * HOUR + 14 * 60_000 });
      assert.equal((await env.post('/sweep', {})).body.handedOff, 0, 'still within 15 min');
      await env.post('/clock', { offsetMs: 2 * HOUR + 16 * 60_000 });
      assert.equal((await env.post('/sweep', {})).body.handedOff, 1, 'after the cooldown: handed off again');
      assert.deepEqual(await bulkIds(), [long]);
      assert.ok(((await env.job(long)).nudge_sent_at as Date).getTime() > nudgedAt.getTime() + 15 * 60_000, 'the new hand-off is recorded');
    } finally {
      await holder.query('ROLLBACK');
      await holder.end();
    }
  });

  test('a hand-off whose send fails starts no cooldown: the next sweep tries again', async () => {
    const long = (await env.post('/enqueue', { jobs: [{ kind: 'test.bulk', payload: { key: 'lost' }, delayMs: HOUR }] })).body[0].id;
    await env.post('/clock', { offsetMs: 2 * HOUR });
    await env.post('/queue-down', { down: true });
    assert.equal((await env.post('/sweep', {})).body.handedOff, 0);
    assert.equal((await env.job(long)).nudge_sent_at, null);
    assert.deepEqual((await env.events()).filter((e) => e.type === 'nudge_failed').map((e) => e.jobs), [1]);
    await env.post('/queue-down', { down: false });
    assert.equal((await env.post('/sweep', {})).body.handedOff, 1);
    await until(async () => (await env.job(long)).status === 'succeeded');
  });

  test('a recovery step that loses its connection is reported; drain, hand-off and retention still run', async () => {
    const { crashed, due } = await sweepWork();
    await env.post('/break', { statement: 'postbox_list_expired_leases' });
    const report = (await env.post('/sweep', {})).body;
    assert.deepEqual(report, { ...zero, claimed: 1, succeeded: 1, handedOff: 1, failedSteps: ['recover'], schedules: [] });
    // The crashed attempt is untouched (the next sweep recovers it); the due job ran on a fresh session.
    assert.equal((await env.job(crashed)).status, 'running');
    assert.equal((await env.job(due)).status, 'succeeded');
    const infra = (await env.events()).filter((e) => e.type === 'infra_error').map((e) => e.where);
    assert.deepEqual(infra, ['sweep recover']);
  });
});
