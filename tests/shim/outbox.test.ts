// The outbox end to end inside workerd (Miniflare) against a real PostgreSQL: enqueue in the
// app's transaction, Queue nudge, claim, run, settle, sweep and recovery.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { crashWhileRunning as crashAt, sleep, until, useOutboxEnv } from './outbox-env.ts';
import { ATTEMPTS } from '../support/ledger.ts';

const env = useOutboxEnv();

const SWEEP = '*/5 * * * *';
const enqueue = async (jobs: object[], extra: object = {}) => env.post('/enqueue', { jobs, ...extra });
const enqueueOne = async (payload: object, opts: object = {}) => {
  const res = await enqueue([{ payload, ...opts }]);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body[0] as { status: string; id: string; kind: string };
};
const settledJob = (id: string, status: string) => until(async () => {
  const job = await env.job(id);
  return job?.status === status ? job : undefined;
});
const sinkFor = (key: string) => env.sql('SELECT note, attempt FROM public.sink WHERE key = $1 ORDER BY id', [key]);
/** Moves the Worker's clock past every due time and runs one sweep. */
async function sweepAt(offsetMs: number) {
  await env.post('/clock', { offsetMs });
  const result = await env.worker.scheduled({ cron: SWEEP });
  assert.equal(result.outcome, 'ok');
}

describe('enqueue inside the transaction', () => {
  test('a committed job is nudged and runs once', async () => {
    const created = await enqueueOne({ key: 'c1', do: 'ok' });
    assert.equal(created.status, 'created');
    assert.equal(created.kind, 'test.echo');
    const job = await settledJob(created.id, 'succeeded');
    assert.equal(job.attempts, 1);
    assert.ok(job.finished_at);
    assert.deepEqual(await sinkFor('c1'), [{ note: 'ok', attempt: 1 }]);
    assert.equal((await env.sql('SELECT count(*)::int AS n FROM public.app_row'))[0].n, 1);
    const attempts = await env.sql(`SELECT seq, outcome FROM ${ATTEMPTS} a WHERE job_id = $1`, [created.id]);
    assert.deepEqual(attempts, [{ seq: 1, outcome: 'ok' }]);
    // The success wrote no attempt row: the job row records it (migration 0016).
    assert.equal((await env.sql('SELECT count(*)::int AS n FROM outbox.attempt WHERE job_id = $1', [created.id]))[0].n, 0);
  });

  test('a rolled-back transaction leaves neither the app row nor the job', async () => {
    const res = await enqueue([{ payload: { key: 'rb', do: 'ok' } }], { rollback: true });
    assert.equal(res.status, 500);
    await sleep(300);
    assert.equal((await env.sql('SELECT count(*)::int AS n FROM outbox.job'))[0].n, 0);
    assert.equal((await env.sql('SELECT count(*)::int AS n FROM public.app_row'))[0].n, 0);
    assert.deepEqual(await sinkFor('rb'), []);
  });

  test('dedupe keys are per tenant; a key held by another kind, or with another payload, is a conflict', async () => {
    const first = await enqueueOne({ key: 'd1', do: 'ok' }, { dedupeKey: 'welcome:1' });
    const again = await enqueueOne({ key: 'd1', do: 'ok' }, { dedupeKey: 'welcome:1' });
    assert.equal(first.status, 'created');
    assert.deepEqual(again, { status: 'exists', id: first.id, kind: 'test.echo' });
    const otherTenant = await enqueueOne({ key: 'd1', do: 'ok' }, { dedupeKey: 'welcome:1', tenantKey: 'org-a' });
    assert.equal(otherTenant.status, 'created');
    assert.notEqual(otherTenant.id, first.id);
    const conflict = await enqueue([{ kind: 'test.bulk', payload: { key: 'd1' }, dedupeKey: 'welcome:1' }]);
    assert.deepEqual(conflict.body[0], { status: 'dedupe_conflict', reason: 'kind', existingKind: 'test.echo' });
    const changed = await enqueueOne({ key: 'd1', do: 'fail' }, { dedupeKey: 'welcome:1' });
    assert.deepEqual(changed, { status: 'dedupe_conflict', reason: 'payload', id: first.id });
    assert.equal((await env.sql('SELECT count(*)::int AS n FROM outbox.job'))[0].n, 2);
  });

  test('the same key with another maxAttempts, metadata or correlationId is a conflict naming the field; an exact repeat exists', async () => {
    const opts = { dedupeKey: 'same:1', maxAttempts: 4, metadata: { a: 1, b: { c: [1, 2] } }, correlationId: 'corr-1', delayMs: 90_000_000 };
    const payload = { key: 's1', do: 'ok' };
    const first = await enqueueOne(payload, opts);
    assert.equal(first.status, 'created');
    // The same request again, its metadata's keys in another order: the same job.
    assert.deepEqual(await enqueueOne({ do: 'ok', key: 's1' }, { ...opts, metadata: { b: { c: [1, 2] }, a: 1 } }), { status: 'exists', id: first.id, kind: 'test.echo' });
    // The delay is not compared (the README says why): a repeat arrives later by nature.
    assert.deepEqual(await enqueueOne(payload, { ...opts, delayMs: 95_000_000 }), { status: 'exists', id: first.id, kind: 'test.echo' });
    const differing: [string, object][] = [
      ['maxAttempts', { maxAttempts: 5 }], ['maxAttempts', { maxAttempts: undefined }],
      ['metadata', { metadata: { a: 2, b: { c: [1, 2] } } }], ['metadata', { metadata: undefined }],
      ['correlationId', { correlationId: 'corr-2' }], ['correlationId', { correlationId: undefined }],
    ];
    for (const [reason, change] of differing) {
      assert.deepEqual(await enqueueOne(payload, { ...opts, ...change }), { status: 'dedupe_conflict', reason, id: first.id }, JSON.stringify(change));
    }
    // Of several differing fields the first in the documented order is named.
    assert.deepEqual(await enqueueOne(payload, { ...opts, correlationId: 'corr-2', maxAttempts: 5 }), { status: 'dedupe_conflict', reason: 'maxAttempts', id: first.id });
    // A job enqueued without them, repeated with them.
    const bare = await enqueueOne(payload, { dedupeKey: 'same:2', delayMs: 90_000_000 });
    assert.deepEqual(await enqueueOne(payload, { dedupeKey: 'same:2', metadata: {} }), { status: 'dedupe_conflict', reason: 'metadata', id: bare.id });
    assert.deepEqual(await enqueueOne(payload, { dedupeKey: 'same:2', metadata: null }), { status: 'exists', id: bare.id, kind: 'test.echo' }, 'null metadata is none');
    assert.equal((await env.sql('SELECT count(*)::int AS n FROM outbox.job'))[0].n, 2);
  });

  test('a payload failing its schema, or over the size cap, is refused and writes nothing', async () => {
    const bad = await enqueueOne({ key: 'x', do: 'dance' });
    assert.equal(bad.status, 'invalid_payload');
    assert.ok((bad as any).issues.length > 0);
    const huge = await enqueueOne({ key: 'y'.repeat(300_000), do: 'ok' });
    assert.equal(huge.status, 'invalid_payload');
    assert.match((huge as any).issues[0].message, /262144/);
    assert.equal((await env.sql('SELECT count(*)::int AS n FROM outbox.job'))[0].n, 0);
    // Both app rows still commit: a lenient refusal is a result, not a throw.
    assert.equal((await env.sql('SELECT count(*)::int AS n FROM public.app_row'))[0].n, 2);
  });

  test('a delayed job is not run by an early nudge, and runs once due', async () => {
    const created = await enqueueOne({ key: 'late', do: 'ok' }, { delayMs: 3_600_000 });
    // The enqueue's own nudge is delayed by the queue for the hour; deliver one now instead.
    const sent = await env.sent();
    assert.deepEqual(sent.flatMap((b) => b.messages.map((m) => m.delaySeconds)), [3600]);
    const early = await env.worker.queue('postbox', [{ body: { v: 1, t: 'job', id: created.id, kind: 'test.echo', lane: 'default' } }]);
    assert.equal(early.outcome, 'ok');
    assert.equal((await env.job(created.id)).status, 'pending', 'the claim refuses a job that is not due');
    assert.deepEqual(await sinkFor('late'), []);
    await sweepAt(3_600_001);
    assert.equal((await env.job(created.id)).status, 'succeeded');
  });

  test('a job claimed ahead whose turn comes too late for its lease is claim_late: nothing charged, due again soon', async () => {
    // Four slots busy for 1.5 s, and a fifth job claimed ahead of its slot in the same statement.
    const res = await enqueue([
      ...Array.from({ length: 4 }, (_, i) => ({ payload: { key: `busy${i}`, do: 'sleep', ms: 1_500 } })),
      { payload: { key: 'ahead', do: 'ok' } },
    ]);
    const ahead = res.body[4].id;
    await until(async () => (await env.job(ahead)).status === 'running');
    // While it waits, 25 s pass on the outbox's clock: its lease (2 s timeout + 6 s) no longer
    // leaves room for a whole attempt plus the settle reserve.
    await env.post('/clock', { offsetMs: 25_000 });
    const late = await until(async () => (await env.events()).find((e) => e.type === 'claim_late'));
    assert.deepEqual(late, { type: 'claim_late', jobId: ahead, kind: 'test.echo' });
    const job = await until(async () => {
      const j = await env.job(ahead);
      return j.status === 'pending' ? j : undefined;
    });
    assert.equal(job.attempts, 0, 'nothing charged');
    assert.deepEqual(await sinkFor('ahead'), [], 'the handler never ran');
    assert.deepEqual(await env.sql(`SELECT outcome FROM ${ATTEMPTS} a WHERE job_id = $1`, [ahead]), [{ outcome: 'claim_late' }]);
    await sweepAt(60_000);
    await settledJob(ahead, 'succeeded');
  });

  test('a queue that refuses the nudge: nudge_failed, the job is committed anyway and the sweep runs it', async () => {
    await env.post('/queue-down', { down: true });
    const created = await enqueueOne({ key: 'qdown', do: 'ok' });
    assert.equal(created.status, 'created');
    const events = await env.events();
    assert.deepEqual(events.filter((e) => e.type === 'nudge_failed'), [{ type: 'nudge_failed', jobs: 1, error: 'queue postbox is unavailable' }]);
    assert.equal((await env.job(created.id)).status, 'pending');
    await env.post('/queue-down', { down: false });
    await sweepAt(0);
    assert.equal((await env.job(created.id)).status, 'succeeded');
  });
});

describe('outcomes and retries', () => {
  test('retry backs off within the policy, then dead-letters when attempts run out', async () => {
    const created = await enqueueOne({ key: 'r1', do: 'retry' });
    let job = await settledJob(created.id, 'retrying');
    assert.equal(job.attempts, 1);
    assert.equal(job.last_error_code, 'flaky');
    // baseMs 1000: the first retry waits between 500 and 1000 ms.
    const delay = job.due_at.getTime() - job.updated_at.getTime();
    assert.ok(delay >= 500 && delay <= 1000, `delay ${delay}`);
    await sweepAt(10_000);
    job = await env.job(created.id);
    assert.equal(job.status, 'retrying');
    assert.equal(job.attempts, 2);
    assert.equal(job.streak, 2);
    await sweepAt(20_000);
    job = await env.job(created.id);
    assert.equal(job.status, 'dead');
    assert.equal(job.attempts, 3);
    assert.deepEqual((await sinkFor('r1')).map((r) => r.attempt), [1, 2, 3]);
    const events = await env.events();
    assert.ok(events.some((e) => e.type === 'dead_letter' && e.jobId === created.id && e.reason === 'attempts_exhausted'));
  });

  test('retry({ after }) is capped by the code\'s maxDelayMs', async () => {
    const created = await enqueueOne({ key: 'ra', do: 'retry_after', ms: 60_000, code: 'throttled' });
    const job = await settledJob(created.id, 'retrying');
    assert.equal(job.due_at.getTime() - job.updated_at.getTime(), 1_500);
  });

  test('a per-code streak rule can cancel instead of dead-lettering', async () => {
    const created = await enqueueOne({ key: 'b1', do: 'retry', code: 'bounced' });
    await settledJob(created.id, 'retrying');
    await sweepAt(10_000);
    const job = await env.job(created.id);
    assert.equal(job.status, 'cancelled');
    assert.equal(job.last_error_code, 'bounced');
  });

  test('fail dead-letters at once; cancel cancels', async () => {
    const failed = await enqueueOne({ key: 'f1', do: 'fail', code: 'http_4xx' });
    const cancelled = await enqueueOne({ key: 'k1', do: 'cancel', code: 'user_gone' });
    assert.equal((await settledJob(failed.id, 'dead')).last_error_code, 'http_4xx');
    assert.equal((await settledJob(cancelled.id, 'cancelled')).last_error_code, 'user_gone');
  });

  test('thrown errors go through classify; non-Error throws and redaction are handled', async () => {
    const plain = await enqueueOne({ key: 'secret-abc', do: 'throw' });
    const permanent = await enqueueOne({ key: 't2', do: 'throw', code: 'PERMANENT' });
    const str = await enqueueOne({ key: 't3', do: 'throw_string' });
    const none = await enqueueOne({ key: 't4', do: 'nothing' });
    const j1 = await settledJob(plain.id, 'retrying');
    assert.equal(j1.last_error_code, 'unexpected');
    assert.equal(j1.last_error_message, 'boom [redacted]');
    assert.equal((await settledJob(permanent.id, 'dead')).last_error_code, 'permanent');
    assert.equal((await settledJob(str.id, 'retrying')).last_error_message, 'a string t3');
    assert.equal((await settledJob(none.id, 'retrying')).last_error_code, 'invalid_outcome');
  });

  test('a handler past its timeout is settled as timeout, its signal aborts and ctx.db is fenced', async () => {
    const created = await enqueueOne({ key: 'h1', do: 'hang' });
    const job = await until(async () => {
      const j = await env.job(created.id);
      return j?.status === 'retrying' ? j : undefined;
    }, 10_000);
    assert.equal(job.last_error_code, 'timeout');
    const attempt = (await env.sql(`SELECT outcome FROM ${ATTEMPTS} a WHERE job_id = $1`, [created.id]))[0];
    assert.equal(attempt.outcome, 'timeout');
    const aborted = await until(async () => (await env.events()).find((e) => e.type === 'test_aborted'));
    assert.equal(aborted.fenced, true);
    assert.deepEqual((await sinkFor('h1')).map((r) => r.note), ['hang']);
  });
});

describe('handlers that never return', () => {
  test('one stuck inside ctx.db.transaction times out, its transaction rolls back, and the lane goes on', async () => {
    const stuck = await enqueueOne({ key: 'tx-stuck', do: 'hang_in_tx' });
    const job = await until(async () => {
      const j = await env.job(stuck.id);
      return j?.status === 'retrying' ? j : undefined;
    }, 10_000);
    assert.equal(job.last_error_code, 'timeout');
    // The handler's first write (outside) landed; the one inside the abandoned transaction did not.
    assert.deepEqual((await sinkFor('tx-stuck')).map((r) => r.note), ['hang_in_tx']);
    const next = await enqueueOne({ key: 'after-stuck', do: 'ok' });
    await settledJob(next.id, 'succeeded');
  });
});

describe('atomic completion', () => {
  test('ok({ commit }) commits with the succeeded transition', async () => {
    const created = await enqueueOne({ key: 'cm', do: 'commit' });
    await settledJob(created.id, 'succeeded');
    assert.deepEqual((await sinkFor('cm')).map((r) => r.note), ['commit', 'committed']);
  });

  test('a throwing commit rolls back its writes and retries as hook_failed', async () => {
    const created = await enqueueOne({ key: 'ct', do: 'commit_throw' });
    const job = await settledJob(created.id, 'retrying');
    assert.equal(job.last_error_code, 'hook_failed');
    assert.equal(job.last_error_message, 'commit hook failed');
    assert.deepEqual((await sinkFor('ct')).map((r) => r.note), ['commit_throw']);
  });

  test('a throw from commit goes to the job\'s classify, as a handler\'s throw does', async () => {
    // The fixture's classify fails errors whose code is PERMANENT.
    const created = await enqueueOne({ key: 'cp', do: 'commit_throw', code: 'PERMANENT' });
    const job = await settledJob(created.id, 'dead');
    assert.equal(job.last_error_code, 'permanent');
    assert.equal(job.last_error_message, 'commit hook failed');
    assert.equal(job.attempts, 1);
    assert.deepEqual((await sinkFor('cp')).map((r) => r.note), ['commit_throw']);
  });

  test('onTransition writes in the settle transaction, and its throw rolls the transition back', async () => {
    await env.post('/hook', { mode: 'record' });
    const created = await enqueueOne({ key: 'ot', do: 'ok' });
    await settledJob(created.id, 'succeeded');
    assert.deepEqual((await sinkFor(created.id)).map((r) => r.note), ['transition:succeeded']);
    await env.post('/hook', { mode: 'throw' });
    const second = await enqueueOne({ key: 'ot2', do: 'ok' });
    const job = await settledJob(second.id, 'retrying');
    assert.equal(job.last_error_code, 'hook_failed');
    assert.deepEqual(await sinkFor(second.id), []);
  });
});

describe('the drain as a pipeline', () => {
  test('one slow handler holds only its own slot: the others run and settle meanwhile', async () => {
    const res = await enqueue([
      { payload: { key: 'slow', do: 'sleep', ms: 1_500 } },
      ...Array.from({ length: 6 }, (_, i) => ({ payload: { key: `fast${i}`, do: 'sleep', ms: 20 } })),
    ]);
    const [slow, ...fast] = (res.body as { id: string }[]).map((r) => r.id);
    // Every fast job is settled while the slow one still runs (a batch-at-a-time drain would
    // have held their settlements until the slow handler returned).
    await until(async () => (await env.sql(`SELECT count(*)::int AS n FROM outbox.job WHERE status = 'succeeded' AND id = ANY($1::uuid[])`, [fast]))[0].n === 6, 1_000);
    assert.equal((await env.job(slow!)).status, 'running');
    await settledJob(slow!, 'succeeded');
  });
});

describe('ctx.db shared by the handlers of one lane', () => {
  test('outbox.transaction(ctx.db) is one transaction: its rollback spares another handler\'s write', async () => {
    const res = await enqueue([
      { payload: { key: 'rolls-back', do: 'tx_rollback', ms: 400 } },
      { payload: { key: 'writes', do: 'write_late', ms: 100 } },
    ]);
    const [a, b] = res.body as { id: string }[];
    await settledJob(a!.id, 'succeeded');
    await settledJob(b!.id, 'succeeded');
    // The other handler's row survived; the rolled-back one and its continuation are gone.
    assert.deepEqual((await sinkFor('writes')).map((r) => r.note), ['write_late', 'late']);
    assert.deepEqual((await sinkFor('rolls-back')).map((r) => r.note), ['tx_rollback']);
    assert.equal((await env.sql(`SELECT count(*)::int AS n FROM outbox.job WHERE payload->>'key' = 'rolls-back:next'`))[0].n, 0);
    // Both attempts settled by the drain as usual.
    const attempts = await env.sql(`SELECT job_id, outcome FROM ${ATTEMPTS} a WHERE job_id = ANY($1) ORDER BY job_id`, [[a!.id, b!.id]]);
    assert.deepEqual(attempts.map((r) => r.outcome), ['ok', 'ok']);
  });
});

describe('recovery and fencing', () => {
  const crashWhileRunning = (id: string) => crashAt(env, id);

  test('the sweep recovers an expired lease as a crash, charging no attempt; repeated crashes dead-letter', async () => {
    const created = await enqueueOne({ key: 'cr', do: 'ok' }, { delayMs: 3_600_000 });
    await crashWhileRunning(created.id);
    await sweepAt(0);
    let job = await env.job(created.id);
    assert.equal(job.status, 'retrying');
    assert.equal(job.crashes, 1);
    assert.equal(job.attempts, 0);
    assert.equal((await env.sql(`SELECT outcome FROM ${ATTEMPTS} a WHERE job_id = $1`, [created.id]))[0].outcome, 'crash');
    await crashWhileRunning(created.id);
    await sweepAt(0);
    await crashWhileRunning(created.id);
    await sweepAt(0);
    job = await env.job(created.id);
    assert.equal(job.status, 'dead');
    assert.equal(job.last_error_code, 'crash_loop');
    assert.ok((await env.events()).some((e) => e.type === 'crash_loop' && e.jobId === created.id));
  });

  test('a settle from an attempt that no longer owns the job changes nothing', async () => {
    const created = await enqueueOne({ key: 'st', do: 'sleep', ms: 1_200 });
    await until(async () => (await env.job(created.id)).status === 'running');
    const cancelled = await env.post('/operate', { action: 'cancel', ids: [created.id], reason: 'operator' });
    assert.equal(cancelled.body[0].status, 'ok');
    await until(async () => (await env.events()).find((e) => e.type === 'stale_settle' && e.jobId === created.id));
    const job = await env.job(created.id);
    assert.equal(job.status, 'cancelled');
    assert.equal(job.last_error_code, 'operator');
    // The cancel closed the running attempt; the late settle did not reopen or rewrite it.
    const attempts = await env.sql(`SELECT seq, outcome, error_code, finished_at IS NOT NULL AS finished FROM ${ATTEMPTS} a WHERE job_id = $1`, [created.id]);
    assert.deepEqual(attempts, [{ seq: 1, outcome: 'cancel', error_code: 'operator', finished: true }]);
  });
});

describe('queue messages', () => {
  test('a nudge for the wrong kind or an unknown id runs nothing', async () => {
    const created = await enqueueOne({ key: 'wk', do: 'ok' }, { delayMs: 3_600_000 });
    await env.sql(`UPDATE outbox.job SET due_at = now() - interval '1 minute' WHERE id = $1`, [created.id]);
    const result = await env.worker.queue('postbox', [
      { body: { v: 1, t: 'job', id: created.id, kind: 'test.tick', lane: 'default' } },
      { body: { v: 1, t: 'job', id: '0190a5b2-0000-7000-8000-000000000000', kind: 'test.echo', lane: 'default' } },
    ]);
    assert.equal(result.outcome, 'ok');
    assert.equal((await env.job(created.id)).status, 'pending');
    await env.worker.queue('postbox', [{ body: { v: 1, t: 'job', id: created.id, kind: 'test.echo', lane: 'default' } }]);
    assert.equal((await env.job(created.id)).status, 'succeeded');
  });

  test('a deploy older than the one that enqueued a job leaves it alone', async () => {
    await env.post('/version', { timestamp: '2026-11-30T10:00:00.000Z' });
    const created = await enqueueOne({ key: 'v1', do: 'ok' }, { delayMs: 3_600_000 });
    assert.equal((await env.job(created.id)).version_ts, String(Date.parse('2026-11-30T10:00:00.000Z')));
    await env.sql(`UPDATE outbox.job SET due_at = now() - interval '1 minute' WHERE id = $1`, [created.id]);
    const nudge = { body: { v: 1, t: 'job', id: created.id, kind: 'test.echo', lane: 'default' } };
    await env.post('/version', { timestamp: '2026-11-30T09:00:00.000Z' });
    await env.worker.queue('postbox', [nudge]);
    await sweepAt(0);
    assert.equal((await env.job(created.id)).status, 'pending');
    await env.post('/version', { timestamp: '2026-11-30T11:00:00.000Z' });
    await env.worker.queue('postbox', [nudge]);
    assert.equal((await env.job(created.id)).status, 'succeeded');
  });

  test('the dead-letter consumer reports each message and acks it; the job row is untouched', async () => {
    const created = await enqueueOne({ key: 'dlq', do: 'ok' }, { delayMs: 3_600_000 });
    const body = { v: 1, t: 'job', id: created.id, kind: 'test.echo', lane: 'default' };
    const result = await env.worker.queue('postbox-dlq', [{ id: 'm1', body }]);
    assert.equal(result.outcome, 'ok');
    assert.equal(result.ackAll, true);
    const dlq = (await env.events()).filter((e) => e.type === 'dlq_message');
    assert.deepEqual(dlq, [{ type: 'dlq_message', queue: 'postbox-dlq', messageId: 'm1', body }]);
    assert.equal((await env.job(created.id)).status, 'pending');
  });

  test('hostile messages are acked and reported, never thrown', async () => {
    const result = await env.worker.queue('postbox', [
      { body: 'not json' },
      { body: { v: 2, t: 'job' } },
      { body: { v: 1, t: 'job', id: "x'; DROP TABLE outbox.job; --", kind: 'test.echo', lane: 'default' } },
      { body: { v: 1, t: 'job', id: '0190a5b2-0000-7000-8000-000000000000', kind: 'k'.repeat(10_000), lane: 'default' } },
      { body: null },
      { body: [1, 2, 3] },
    ]);
    assert.equal(result.outcome, 'ok');
    assert.equal(result.ackAll, true);
    const invalid = (await env.events()).filter((e) => e.type === 'invalid_message');
    assert.equal(invalid.length, 6);
    assert.ok(invalid.every((e) => typeof e.code === 'string' && e.message.length > 0));
    assert.equal((await env.sql(`SELECT to_regclass('outbox.job') IS NOT NULL AS ok`))[0].ok, true);
  });
});

describe('operators', () => {
  test('replay gives a dead job a fresh budget; retryNow makes a job due; tenant scope hides others', async () => {
    const created = await enqueueOne({ key: 'op', do: 'fail' }, { tenantKey: 'org-a' });
    await settledJob(created.id, 'dead');
    const wrongTenant = await env.post('/operate', { action: 'replay', ids: [created.id], tenantKey: 'org-b' });
    assert.equal(wrongTenant.body[0].status, 'not_found');
    const noTenant = await env.post('/operate', { action: 'replay', ids: [created.id], tenantKey: null });
    assert.equal(noTenant.body[0].status, 'not_found');
    const replayed = await env.post('/operate', { action: 'replay', ids: [created.id], tenantKey: 'org-a' });
    assert.equal(replayed.body[0].status, 'ok');
    const job = await env.job(created.id);
    assert.equal(job.attempts, 0);
    assert.ok(job.replayed_at);
    // The replay nudged it: it runs (and fails) again; retryNow then refuses a dead job.
    await until(async () => (await env.sql(`SELECT count(*)::int AS n FROM ${ATTEMPTS} a WHERE job_id = $1 AND finished_at IS NOT NULL`, [created.id]))[0].n === 2);
    await settledJob(created.id, 'dead');
    const again = await env.post('/operate', { action: 'retryNow', ids: [created.id] });
    assert.deepEqual(again.body[0], { id: created.id, status: 'invalid_state', jobStatus: 'dead' });
    // A job waiting an hour: retryNow makes it due and nudges it, so it runs without a sweep.
    const later = await enqueueOne({ key: 'op-later', do: 'ok' }, { delayMs: 3_600_000 });
    const now = await env.post('/operate', { action: 'retryNow', ids: [later.id] });
    assert.deepEqual(now.body[0], { id: later.id, status: 'ok', jobStatus: 'pending' });
    await settledJob(later.id, 'succeeded');
    const invalid = await env.post('/operate', { action: 'replay', ids: [crypto.randomUUID()] });
    assert.equal(invalid.body[0].status, 'not_found');
  });

  test('eraseTenant deletes every job of one tenant, with its attempts, and no other', async () => {
    const ran = await enqueueOne({ key: 'e0', do: 'ok' }, { tenantKey: 'leaving' });
    await settledJob(ran.id, 'succeeded');
    await enqueueOne({ key: 'e1', do: 'ok' }, { tenantKey: 'leaving', delayMs: 3_600_000 });
    await enqueueOne({ key: 'e2', do: 'ok' }, { tenantKey: 'staying', delayMs: 3_600_000 });
    const attemptsOf = async (id: string) => (await env.sql(`SELECT count(*)::int AS n FROM ${ATTEMPTS} a WHERE job_id = $1`, [id]))[0].n;
    assert.equal(await attemptsOf(ran.id), 1);
    const res = await env.post('/operate', { action: 'erase', tenantKey: 'leaving' });
    assert.equal(res.body.deleted, 2);
    assert.deepEqual((await env.sql('SELECT tenant_key FROM outbox.job')).map((r) => r.tenant_key), ['staying']);
    assert.equal(await attemptsOf(ran.id), 0);
  });

  test('eraseTenant with ids deletes only those of the tenant\'s jobs, in one statement', async () => {
    const [a, b] = [await enqueueOne({ key: 'i1', do: 'ok' }, { tenantKey: 'leaving', delayMs: 3_600_000 }), await enqueueOne({ key: 'i2', do: 'ok' }, { tenantKey: 'leaving', delayMs: 3_600_000 })];
    const other = await enqueueOne({ key: 'i3', do: 'ok' }, { tenantKey: 'staying', delayMs: 3_600_000 });
    // The other tenant's id is named too: it is not the tenant's, so it stays.
    const res = await env.post('/operate', { action: 'erase', tenantKey: 'leaving', ids: [a.id, other.id, crypto.randomUUID()] });
    assert.equal(res.body.deleted, 1);
    assert.deepEqual(new Set((await env.sql('SELECT id FROM outbox.job')).map((r) => r.id)), new Set([b.id, other.id]));
    assert.equal((await env.post('/operate', { action: 'erase', tenantKey: 'leaving', ids: [] })).body.deleted, 0);
    const bad = await env.post('/operate', { action: 'erase', tenantKey: 'leaving', ids: ['not-a-uuid'] });
    assert.equal(bad.body.code, 'invalid_input');
    assert.equal((await env.sql('SELECT count(*)::int AS n FROM outbox.job'))[0].n, 2);
  });
});

describe('lanes and schedules', () => {
  test('a bulk-lane job runs on its own queue', async () => {
    const res = await enqueue([{ kind: 'test.bulk', payload: { key: 'bk' } }]);
    const created = res.body[0];
    await settledJob(created.id, 'succeeded');
    assert.deepEqual((await sinkFor('bk')).map((r) => r.note), ['bulk']);
  });

  test('the sweep hands a long-lease job to its lane queue instead of running it', async () => {
    const res = await enqueue([{ kind: 'test.bulk', payload: { key: 'ho' }, delayMs: 3_600_000 }]);
    const created = res.body[0];
    await env.sql(`UPDATE outbox.job SET due_at = now() - interval '1 minute' WHERE id = $1`, [created.id]);
    await sweepAt(0);
    assert.ok((await env.job(created.id)).nudge_sent_at);
    await settledJob(created.id, 'succeeded');
  });

  test('a backlog that outlives the sweep\'s budget is handed to the queue consumer as a drain', async () => {
    const jobs = Array.from({ length: 12 }, (_, i) => ({ payload: { key: `bl${i}`, do: 'sleep', ms: 1_200 }, delayMs: 3_600_000 }));
    const res = await enqueue(jobs);
    const ids = res.body.map((r: { id: string }) => r.id);
    await env.sql(`UPDATE outbox.job SET due_at = now() - interval '1 minute' WHERE id = ANY($1::uuid[])`, [ids]);
    // 3 s budget, 2 s timeout, 1.2 s handlers, 4 at a time: one batch fits, then the plan stops.
    const result = await env.worker.scheduled({ cron: '*/7 * * * *' });
    assert.equal(result.outcome, 'ok');
    const afterSweep = await env.sql(`SELECT count(*)::int AS n FROM outbox.job WHERE status = 'succeeded' AND id = ANY($1::uuid[])`, [ids]);
    assert.equal(afterSweep[0].n, 4);
    assert.ok((await env.events()).some((e) => e.type === 'drain_requested' && e.lane === 'default'));
    // The four claimed ahead never got a slot before the deadline: released in the sweep's
    // last statement, uncharged, instead of waiting out their lease.
    const released = await env.sql(`SELECT count(*)::int AS n FROM ${ATTEMPTS} a WHERE outcome = 'released' AND job_id = ANY($1::uuid[])`, [ids]);
    assert.equal(released[0].n, 4);
    // The drain message reaches the real queue consumer, which runs the rest.
    await until(async () => (await env.sql(`SELECT count(*)::int AS n FROM outbox.job WHERE status = 'succeeded' AND id = ANY($1::uuid[])`, [ids]))[0].n === 12, 20_000);
    const charged = await env.sql(`SELECT DISTINCT attempts FROM outbox.job WHERE id = ANY($1::uuid[])`, [ids]);
    assert.deepEqual(charged, [{ attempts: 1 }]);
  });

  test('a schedule enqueues one job per tick, keyed by the tick time', async () => {
    const scheduledTime = Date.parse('2026-11-30T09:00:00.000Z');
    await env.worker.scheduled({ cron: '0 9 * * MON', scheduledTime });
    await env.worker.scheduled({ cron: '0 9 * * MON', scheduledTime });
    const jobs = await env.sql(`SELECT dedupe_key, kind FROM outbox.job WHERE kind = 'test.tick'`);
    assert.deepEqual(jobs, [{ dedupe_key: 'schedule:test.tick:2026-11-30T09:00:00.000Z', kind: 'test.tick' }]);
  });
});
