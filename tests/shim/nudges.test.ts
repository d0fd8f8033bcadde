// createOutbox's nudging options, inside workerd against real PostgreSQL: `recordNudges`
// (nudge_sent_at written after a nudge goes out), `operationTimeoutMs` (an operator action
// blocked by a lock fails with a typed error instead of hanging) and one `queue` for every lane.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import pg from 'pg';
import { until, useOutboxEnv } from './outbox-env.ts';

const env = useOutboxEnv();
const HOUR = 3_600_000;
const enqueue = async (keys: string[], delayMs = 0) =>
  (await env.post('/enqueue', { jobs: keys.map((key) => ({ payload: { key, do: 'ok' }, delayMs })) })).body.map((r: { id: string }) => r.id) as string[];
const nudgedAt = async (ids: string[]) =>
  (await env.sql('SELECT nudge_sent_at FROM outbox.job WHERE id = ANY($1::uuid[]) ORDER BY id', [ids])).map((r) => r.nudge_sent_at as Date | null);

describe('recordNudges', () => {
  test('off by default: a nudge writes nothing', async () => {
    const ids = await enqueue(['a', 'b'], HOUR);
    assert.equal((await env.sent()).length, 1, 'the nudge went out');
    assert.deepEqual(await nudgedAt(ids), [null, null]);
    assert.equal((await (await env.worker.fetch('/nudge-writes')).json() as { statements: number }).statements, 0);
  });

  test('on: the nudged jobs get nudge_sent_at, in one statement per sent batch', async () => {
    await env.post('/options', { recordNudges: true });
    const before = Date.now();
    await env.worker.fetch('/outbox-connects');
    // Delayed, so the consumer does not run them (and settle them) while the test looks.
    const ids = await enqueue(['a', 'b', 'c'], HOUR);
    // Written on the application's own connection after its commit: the outbox opened none.
    assert.equal((await (await env.worker.fetch('/outbox-connects')).json() as { connects: number }).connects, 0);
    const batches = await env.sent();
    assert.equal(batches.length, 1, 'one sendBatch for the three');
    const times = await nudgedAt(ids);
    for (const t of times) assert.ok(t && t.getTime() >= before - 1000 && t.getTime() <= Date.now() + 1000, `recorded at send time: ${t}`);
    assert.equal(new Set(times.map((t) => t!.getTime())).size, 1, 'one write for the batch');
    assert.equal((await (await env.worker.fetch('/nudge-writes')).json() as { statements: number }).statements, 1);
    // Operator actions' nudges are recorded too.
    await env.sql(`UPDATE outbox.job SET nudge_sent_at = NULL`);
    const res = await env.post('/operate', { action: 'retryNow', ids: [ids[0]] });
    assert.equal(res.body[0].status, 'ok');
    assert.ok((await env.job(ids[0]!)).nudge_sent_at, 'retryNow nudge recorded');
    // The nudge runs the job now; let it settle here rather than after the next test's reset.
    await until(async () => (await env.job(ids[0]!)).status === 'succeeded');
  });

  test('a nudge that fails to send is not recorded', async () => {
    await env.post('/options', { recordNudges: true });
    await env.post('/queue-down', { down: true });
    const ids = await enqueue(['q'], HOUR);
    assert.deepEqual(await nudgedAt(ids), [null]);
    assert.deepEqual((await env.events()).map((e) => e.type), ['nudge_failed']);
  });

  test('a failed write is an infra_error event; the enqueue still commits and the nudge still goes out', async () => {
    await env.post('/options', { recordNudges: true });
    // A real failure of the write: a constraint the UPDATE violates (NOT VALID: existing rows pass).
    await env.sql('ALTER TABLE outbox.job ADD CONSTRAINT no_nudge_record CHECK (nudge_sent_at IS NULL) NOT VALID');
    try {
      const res = await env.post('/enqueue', { jobs: [{ payload: { key: 'x', do: 'ok' }, delayMs: HOUR }] });
      assert.equal(res.status, 200);
      assert.equal(res.body[0].status, 'created');
      assert.equal((await env.sent()).length, 1);
      const events = await env.events();
      const infra = events.filter((e) => e.type === 'infra_error');
      assert.equal(infra.length, 1);
      assert.equal(infra[0].where, 'record nudges');
      assert.match(infra[0].error, /no_nudge_record/);
      const job = await env.job(res.body[0].id);
      assert.equal(job.status, 'pending');
      assert.equal(job.nudge_sent_at, null);
    } finally {
      await env.sql('ALTER TABLE outbox.job DROP CONSTRAINT no_nudge_record');
    }
  });
});

describe('operationTimeoutMs', () => {
  test('cancel of a job locked elsewhere fails fast with PostboxError(timeout) and changes nothing', async () => {
    await env.post('/options', { operationTimeoutMs: 300 });
    const [id] = await enqueue(['locked'], HOUR);
    const holder = new pg.Client({ connectionString: env.dbUrl });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM outbox.job WHERE id = $1 FOR UPDATE', [id]);
      const started = Date.now();
      const res = await env.post('/operate', { action: 'cancelOne', id, reason: 'stop' });
      const took = Date.now() - started;
      assert.equal(res.status, 500);
      assert.equal(res.body.code, 'timeout');
      assert.match(res.body.error, /PostboxError: cancel: not done within operationTimeoutMs \(300 ms\)/);
      assert.ok(took < 3000, `failed within the bound, not after a hang (${took} ms)`);
    } finally {
      await holder.query('ROLLBACK');
      await holder.end();
    }
    const job = await env.job(id!);
    assert.equal(job.status, 'pending');
    assert.equal(job.finished_at, null);
    // Unblocked, the same action goes through.
    assert.equal((await env.post('/operate', { action: 'cancelOne', id, reason: 'stop' })).body.status, 'ok');
    assert.equal((await env.job(id!)).status, 'cancelled');
  });

  test('eraseTenant is bounded too', async () => {
    await env.post('/options', { operationTimeoutMs: 300 });
    const res = await env.post('/enqueue', { jobs: [{ payload: { key: 't', do: 'ok' }, delayMs: HOUR, tenantKey: 'acme' }] });
    const id = res.body[0].id;
    const holder = new pg.Client({ connectionString: env.dbUrl });
    await holder.connect();
    try {
      await holder.query('BEGIN');
      await holder.query('SELECT 1 FROM outbox.job WHERE id = $1 FOR UPDATE', [id]);
      const erased = await env.post('/operate', { action: 'erase', tenantKey: 'acme' });
      assert.equal(erased.body.code, 'timeout');
    } finally {
      await holder.query('ROLLBACK');
      await holder.end();
    }
    assert.ok(await env.job(id), 'nothing erased');
  });
});

describe('one Queue for every lane', () => {
  test('with a single producer, every lane is nudged on it, and its consumer drains the lane each message names', async () => {
    await env.post('/single-queue', { on: true });
    const res = await env.post('/enqueue', { jobs: [{ payload: { key: 'first', do: 'ok' } }, { kind: 'test.bulk', payload: { key: 'second' } }] });
    const [first, second] = res.body.map((r: { id: string }) => r.id);
    // Both lanes' nudges went to the one queue, each message naming its lane.
    const sent = await env.sent();
    assert.deepEqual(sent.map((s) => s.queue), ['postbox', 'postbox']);
    assert.deepEqual(sent.flatMap((s) => s.messages.map((m) => m.body.lane)).sort(), ['bulk', 'default']);
    await until(async () => (await env.job(first)).status === 'succeeded');
    await until(async () => (await env.job(second)).status === 'succeeded');
    assert.deepEqual((await env.sql(`SELECT note FROM public.sink WHERE key = 'second'`)).map((r) => r.note), ['bulk']);
    const events = await env.events();
    assert.ok(!events.some((e) => e.type === 'nudge_skipped' || e.type === 'invalid_message'), JSON.stringify(events));
  });

  test('a long-lease job of the second lane, handed off by the sweep to the one queue, runs', async () => {
    await env.post('/single-queue', { on: true });
    // Due later than Queues can delay a message: no nudge at enqueue, only the sweep's hand-off.
    const id = (await env.post('/enqueue', { jobs: [{ kind: 'test.bulk', payload: { key: 'long' }, delayMs: 25 * HOUR }] })).body[0].id;
    assert.deepEqual(await env.sent(), []);
    await env.sql(`UPDATE outbox.job SET due_at = now() - interval '1 minute' WHERE id = $1`, [id]);
    const report = (await env.post('/sweep', {})).body;
    assert.equal(report.handedOff, 1);
    assert.equal(report.claimed, 0, 'the sweep does not run a long-lease job itself');
    const sent = await env.sent();
    assert.equal(sent.length, 1);
    assert.equal(sent[0].queue, 'postbox');
    assert.equal(sent[0].messages[0].body.lane, 'bulk');
    await until(async () => (await env.job(id)).status === 'succeeded');
    assert.deepEqual((await env.events()).filter((e) => e.type === 'handoff'), [{ type: 'handoff', lane: 'bulk', jobs: 1 }]);
  });

  test('one Queue per lane still works: each lane on its own queue', async () => {
    const res = await env.post('/enqueue', { jobs: [{ payload: { key: 'd', do: 'ok' } }, { kind: 'test.bulk', payload: { key: 'b' } }] });
    const [d, b] = res.body.map((r: { id: string }) => r.id);
    assert.deepEqual((await env.sent()).map((s) => s.queue).sort(), ['postbox', 'postbox-bulk']);
    await until(async () => (await env.job(d)).status === 'succeeded');
    await until(async () => (await env.job(b)).status === 'succeeded');
  });
});
