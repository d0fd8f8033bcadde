// enqueueMany inside workerd (Miniflare) against a real PostgreSQL: per-item results in one
// statement, rollback, nudges coalesced into multi-job Queue messages that the consumer runs,
// hostile multi-job messages, and a schedule's fan-out.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { until, useOutboxEnv } from './outbox-env.ts';
import { ATTEMPTS } from '../support/ledger.ts';

const env = useOutboxEnv();

const enqueueMany = (jobs: object[], extra: object = {}) => env.post('/enqueue-many', { jobs, ...extra });
const count = async (where = 'true') => (await env.sql(`SELECT count(*)::int AS n FROM outbox.job WHERE ${where}`))[0].n as number;
const ok = (key: string, opts: object = {}) => ({ payload: { key, do: 'ok' }, ...opts });
/** Beyond the queue's 24-hour delay: the job is written, not nudged, and not run during the test. */
const parked = { delayMs: 90_000_000 };

describe('enqueueMany', () => {
  test('mixed items: per-item results in input order, from one statement', async () => {
    // A key held by another kind, then a list that meets it, repeats a key and has a bad payload.
    const other = await env.post('/enqueue', { jobs: [{ kind: 'test.bulk', payload: { key: 'b' }, dedupeKey: 'taken', ...parked }] });
    assert.equal(other.body[0].status, 'created');
    const res = await enqueueMany([
      ok('m0', { dedupeKey: 'd1', ...parked }),
      { payload: { key: 'm1', do: 'dance' } },
      ok('m0', { dedupeKey: 'd1', ...parked }),
      ok('m3', { dedupeKey: 'taken', ...parked }),
      ok('m4', { dedupeKey: 'd1', tenantKey: 'org-a', ...parked }),
      { payload: { key: 'y'.repeat(300_000), do: 'ok' } },
      ok('m6', parked),
      ok('m7', { dedupeKey: 'd1', ...parked }),
    ]);
    assert.equal(res.status, 200, JSON.stringify(res.body).slice(0, 500));
    const { results, statements } = res.body;
    assert.equal(statements, 1, 'one statement for the whole list');
    assert.deepEqual(results.map((r: { status: string }) => r.status), ['created', 'invalid_payload', 'exists', 'dedupe_conflict', 'created', 'invalid_payload', 'created', 'dedupe_conflict']);
    assert.equal(results[2].id, results[0].id, 'a repeated key within the list is the first item\'s job');
    assert.deepEqual(results[3], { status: 'dedupe_conflict', reason: 'kind', existingKind: 'test.bulk' });
    assert.deepEqual(results[7], { status: 'dedupe_conflict', reason: 'payload', id: results[0].id }, 'the same key with another payload');
    assert.notEqual(results[4].id, results[0].id, 'dedupe is per tenant');
    assert.match(results[5].issues[0].message, /262144/);
    assert.equal(await count(`kind = 'test.echo'`), 3);
    // Written as enqueue writes one job: pending, due later, with its payload and keys.
    const [row] = await env.sql('SELECT status, payload, dedupe_key, tenant_key FROM outbox.job WHERE id = $1', [results[4].id]);
    assert.deepEqual(row, { status: 'pending', payload: { key: 'm4', do: 'ok' }, dedupe_key: 'd1', tenant_key: 'org-a' });
  });

  test('items sharing a key with an earlier item or a committed job but differing in a field are conflicts naming it', async () => {
    const opts = { maxAttempts: 4, metadata: { a: 1, b: [1, 2] }, correlationId: 'corr-1', ...parked };
    const held = await enqueueMany([ok('h0', { dedupeKey: 'k-held', ...opts })]);
    assert.equal(held.body.results[0].status, 'created');
    const res = await enqueueMany([
      ok('k0', { dedupeKey: 'k1', ...opts }),
      ok('k0', { dedupeKey: 'k1', ...opts, metadata: { b: [1, 2], a: 1 } }),
      ok('k0', { dedupeKey: 'k1', ...opts, maxAttempts: 5 }),
      ok('k0', { dedupeKey: 'k1', ...opts, maxAttempts: undefined }),
      ok('k0', { dedupeKey: 'k1', ...opts, metadata: { a: 1 } }),
      ok('k0', { dedupeKey: 'k1', ...opts, metadata: null }),
      ok('k0', { dedupeKey: 'k1', ...opts, correlationId: 'corr-2' }),
      ok('k0', { dedupeKey: 'k1', ...opts, correlationId: undefined }),
      ok('k0', { dedupeKey: 'k1', ...opts, correlationId: 'corr-2', metadata: { a: 1 } }),
      ok('h0', { dedupeKey: 'k-held', ...opts, metadata: { b: [1, 2], a: 1 } }),
      ok('h0', { dedupeKey: 'k-held', ...opts, maxAttempts: 3 }),
      ok('h0', { dedupeKey: 'k-held', ...opts, metadata: {} }),
      ok('h0', { dedupeKey: 'k-held', ...opts, correlationId: 'corr-3' }),
    ]);
    assert.equal(res.status, 200, JSON.stringify(res.body).slice(0, 500));
    assert.equal(res.body.statements, 1);
    const [first, ...rest] = res.body.results;
    const heldId = held.body.results[0].id;
    assert.equal(first.status, 'created');
    assert.deepEqual(rest, [
      { status: 'exists', id: first.id, kind: 'test.echo' },
      { status: 'dedupe_conflict', reason: 'maxAttempts', id: first.id },
      { status: 'dedupe_conflict', reason: 'maxAttempts', id: first.id },
      { status: 'dedupe_conflict', reason: 'metadata', id: first.id },
      { status: 'dedupe_conflict', reason: 'metadata', id: first.id },
      { status: 'dedupe_conflict', reason: 'correlationId', id: first.id },
      { status: 'dedupe_conflict', reason: 'correlationId', id: first.id },
      { status: 'dedupe_conflict', reason: 'metadata', id: first.id },
      { status: 'exists', id: heldId, kind: 'test.echo' },
      { status: 'dedupe_conflict', reason: 'maxAttempts', id: heldId },
      { status: 'dedupe_conflict', reason: 'metadata', id: heldId },
      { status: 'dedupe_conflict', reason: 'correlationId', id: heldId },
    ]);
    assert.equal(await count(), 2);
  });

  test('a rolled-back transaction drops every job of the list and sends no nudge', async () => {
    const res = await enqueueMany([ok('r0'), ok('r1'), ok('r2')], { rollback: true });
    assert.equal(res.status, 500);
    assert.equal(await count(), 0);
    assert.equal((await env.sql('SELECT count(*)::int AS n FROM public.app_row'))[0].n, 0);
    assert.deepEqual(await env.sent(), []);
  });

  test('250 jobs are nudged by 3 coalesced messages in one sendBatch, and the consumer runs them all', async () => {
    const res = await enqueueMany(Array.from({ length: 250 }, (_, i) => ok(`c${i}`)));
    assert.equal(res.body.statements, 1);
    const sent = await env.sent();
    assert.equal(sent.length, 1, 'one sendBatch');
    assert.deepEqual(sent[0]!.messages.map((m) => [m.body.t, m.body.ids.length, m.delaySeconds ?? 0]), [['jobs', 100, 0], ['jobs', 100, 0], ['jobs', 50, 0]]);
    const ids = res.body.results.map((r: { id: string }) => r.id);
    assert.deepEqual(sent[0]!.messages.flatMap((m) => m.body.ids), ids, 'every job once, in order');
    await until(async () => (await count(`status = 'succeeded'`)) === 250, 30_000);
    assert.equal((await env.sql(`SELECT count(*)::int AS n FROM ${ATTEMPTS} a`))[0].n, 250, 'each job ran once');
    assert.equal((await env.events()).filter((e) => e.type === 'invalid_message').length, 0);
  });

  test('delayed nudges are grouped by delay', async () => {
    await enqueueMany([ok('g0'), ok('g1', { delayMs: 1_500 }), ok('g2'), ok('g3', { delayMs: 1_500 }), ok('g4', { delayMs: 90_000_000 })]);
    const [batch] = await env.sent();
    // The 25-hour job is beyond the queue's delay: the sweep runs it.
    assert.deepEqual(batch!.messages.map((m) => [m.body.t, m.body.ids?.length ?? 1, m.delaySeconds ?? 0]), [['jobs', 2, 0], ['jobs', 2, 2]]);
  });

  test('a single job keeps the single-job message', async () => {
    await env.post('/enqueue', { jobs: [ok('s0', parked)] });
    assert.deepEqual(await env.sent(), []);
    await env.post('/enqueue', { jobs: [ok('s1')] });
    const [batch] = await env.sent();
    assert.equal(batch!.messages.length, 1);
    assert.equal(batch!.messages[0]!.body.t, 'job');
  });
});

describe('multi-job queue messages', () => {
  test('a message names many jobs; duplicates across messages run once', async () => {
    const res = await enqueueMany(Array.from({ length: 3 }, (_, i) => ok(`q${i}`, parked)));
    const ids = res.body.results.map((r: { id: string }) => r.id);
    await env.sql(`UPDATE outbox.job SET due_at = now() - interval '1 minute'`);
    const body = { v: 1, t: 'jobs', kind: 'test.echo', lane: 'default', ids };
    const result = await env.worker.queue('postbox', [{ body }, { body: { v: 1, t: 'job', id: ids[0], kind: 'test.echo', lane: 'default' } }]);
    assert.equal(result.outcome, 'ok');
    assert.equal(await count(`status = 'succeeded'`), 3);
    assert.equal((await env.sql(`SELECT count(*)::int AS n FROM ${ATTEMPTS} a`))[0].n, 3);
  });

  test('hostile or oversized multi-job messages are acked and reported, never thrown', async () => {
    const res = await enqueueMany([ok('h0', parked)]);
    const id = res.body.results[0].id;
    await env.sql(`UPDATE outbox.job SET due_at = now() - interval '1 minute'`);
    const ids = (n: number) => Array.from({ length: n }, (_, i) => `0190a5b2-0000-7000-8000-${String(i).padStart(12, '0')}`);
    const result = await env.worker.queue('postbox', [
      { id: 'too-many', body: { v: 1, t: 'jobs', kind: 'test.echo', lane: 'default', ids: ids(101) } },
      { id: 'huge', body: { v: 1, t: 'jobs', kind: 'test.echo', lane: 'default', ids: ids(60_000) } },
      { id: 'sql', body: { v: 1, t: 'jobs', kind: 'test.echo', lane: 'default', ids: [id, "x'; DROP TABLE outbox.job; --"] } },
      { id: 'empty', body: { v: 1, t: 'jobs', kind: 'test.echo', lane: 'default', ids: [] } },
      { id: 'kind', body: { v: 1, t: 'jobs', kind: 'k'.repeat(10_000), lane: 'default', ids: [id] } },
      { id: 'shape', body: { v: 1, t: 'jobs', kind: 'test.echo', lane: 'default', ids: { 0: id } } },
      { id: 'lane', body: { v: 1, t: 'jobs', kind: 'test.echo', lane: 'bulk', ids: [id] } },
    ]);
    assert.equal(result.outcome, 'ok');
    assert.equal(result.ackAll, true);
    const invalid = (await env.events()).filter((e) => e.type === 'invalid_message');
    assert.deepEqual(
      invalid.map((e) => [e.messageId, e.code]),
      [['too-many', 'too_large'], ['huge', 'too_large'], ['sql', 'invalid_message'], ['empty', 'invalid_message'], ['kind', 'invalid_message'], ['shape', 'invalid_message'], ['lane', 'wrong_lane']],
    );
    assert.ok(invalid.every((e) => e.message.length > 0 && e.message.length < 300));
    // None of them ran the job its ids named.
    assert.equal((await env.job(id)).status, 'pending');
  });
});

describe('schedules', () => {
  test('a fan-out schedule enqueues its list in one go, once per tick', async () => {
    const scheduledTime = Date.parse('2026-11-30T03:00:00.000Z');
    assert.equal((await env.worker.scheduled({ cron: '0 3 * * *', scheduledTime })).outcome, 'ok');
    assert.equal((await env.worker.scheduled({ cron: '0 3 * * *', scheduledTime })).outcome, 'ok');
    const keys = (await env.sql(`SELECT dedupe_key FROM outbox.job WHERE kind = 'test.tick' ORDER BY dedupe_key`)).map((r) => r.dedupe_key);
    assert.deepEqual(keys, [0, 1, 2, 3, 4].map((s) => `fanout:2026-11-30T03:00:00.000Z:${s}`));
    const sent = await env.sent();
    assert.equal(sent.length, 1, 'the second tick created nothing to nudge');
    assert.deepEqual(sent[0]!.messages.map((m) => [m.body.t, m.body.ids.length]), [['jobs', 5]]);
  });
});
