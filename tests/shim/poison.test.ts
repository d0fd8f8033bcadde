// One row's data never fails the rows written with it: texts PostgreSQL refuses (U+0000, half a
// surrogate pair) are refused at enqueue as results, made storable in settlements, and a
// settlement the database still refuses is split off from the others and written alone.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { until, useOutboxEnv } from './outbox-env.ts';
import { ATTEMPTS } from '../support/ledger.ts';

const env = useOutboxEnv({ vars: { CONCURRENCY: '8' } });

/** 40 jobs that succeed, with `bad` in the middle of them, in one enqueueMany; waits for all 41 to settle. */
async function drainAmong(bad: { key: string; do: string }) {
  const jobs = Array.from({ length: 40 }, (_, i) => ({ payload: { key: `ok-${i}`, do: 'ok' } }));
  jobs.splice(20, 0, { payload: bad });
  const { status, body } = await env.post('/enqueue-many', { jobs });
  assert.equal(status, 200, JSON.stringify(body));
  assert.ok(body.results.every((r: any) => r.status === 'created'), JSON.stringify(body.results));
  await until(async () => {
    const [{ n }] = await env.sql(`SELECT count(*)::int AS n FROM outbox.job WHERE status IN ('pending', 'running')`);
    return n === 0;
  });
  const innocent = await env.sql(
    `SELECT j.status, j.attempts, j.crashes, (SELECT count(*)::int FROM ${ATTEMPTS} a WHERE a.job_id = j.id) AS runs
       FROM outbox.job j WHERE j.payload->>'key' LIKE 'ok-%'`,
  );
  assert.equal(innocent.length, 40);
  for (const row of innocent) assert.deepEqual(row, { status: 'succeeded', attempts: 1, crashes: 0, runs: 1 });
  const [poisoned] = await env.sql(`SELECT * FROM outbox.job WHERE payload->>'key' = $1`, [bad.key]);
  return poisoned;
}

test('a handler error holding U+0000, among 40 jobs at concurrency 8: every innocent job succeeds with one attempt', async () => {
  const row = await drainAmong({ key: 'nul', do: 'throw_nul' });
  assert.equal(row.status, 'retrying');
  assert.equal(row.last_error_code, 'unexpected');
  assert.equal(row.last_error_message, 'bad\uFFFDbyte nul');
  assert.equal(row.crashes, 0);
});

test('half a surrogate pair in an error, or U+0000 in a retry code, is the handler\'s own failure, stored, and poisons nobody', async () => {
  const lone = await drainAmong({ key: 'lone', do: 'throw_lone' });
  assert.equal(lone.status, 'retrying');
  assert.equal(lone.last_error_message, 'half \uFFFD a pair lone');
  await env.reset();
  const code = await drainAmong({ key: 'code', do: 'retry_nul' });
  assert.equal(code.status, 'retrying');
  assert.equal(code.last_error_code, 'invalid_outcome');
  assert.match(code.last_error_message, /code must be a string of 1 to 128 bytes without control characters/);
});

test('an error of 3 MB is cut, not a refusal of the batch it rides on', async () => {
  const row = await drainAmong({ key: 'long', do: 'fail_long' });
  assert.equal(row.status, 'retrying');
  assert.equal(row.last_error_message.length, 2000);
});

test('a settlement the database refuses (a CHECK the application added) is split off and written with its text replaced', async () => {
  await env.sql(`ALTER TABLE outbox.job ADD CONSTRAINT no_poison CHECK (last_error_message IS NULL OR last_error_message NOT LIKE '%poison%')`);
  try {
    const row = await drainAmong({ key: 'poison', do: 'throw' });
    assert.equal(row.status, 'retrying');
    assert.equal(row.attempts, 1);
    assert.equal(row.crashes, 0);
    assert.equal(row.last_error_code, 'unexpected');
    assert.equal(row.last_error_message, "the attempt's error text was refused by the database (SQLSTATE 23514) and replaced by this note");
    const [attempt] = await env.sql(`SELECT outcome, finished_at IS NOT NULL AS closed FROM ${ATTEMPTS} a WHERE job_id = $1`, [row.id]);
    assert.deepEqual(attempt, { outcome: 'retry', closed: true });
    const events = await env.events();
    assert.ok(events.some((e) => e.type === 'infra_error' && /no_poison/.test(e.error)), 'the refusal is reported');
    assert.ok(!events.some((e) => e.type === 'settle_failed'), JSON.stringify(events.filter((e) => e.type === 'settle_failed')));
  } finally {
    await env.sql('ALTER TABLE outbox.job DROP CONSTRAINT no_poison');
  }
});

test('enqueue refuses texts PostgreSQL cannot store as typed results, and the caller\'s transaction goes on', async () => {
  const cases: [string, any, string | undefined][] = [
    ['payload', { payload: { key: 'a\u0000b', do: 'ok' } }, undefined],
    ['payload', { payload: { key: 'half \ud800', do: 'ok' } }, undefined],
    ['dedupeKey', { payload: { key: 'k', do: 'ok' }, dedupeKey: 'd\u0000' }, 'dedupeKey'],
    ['tenantKey', { payload: { key: 'k', do: 'ok' }, tenantKey: '\udc00t' }, 'tenantKey'],
    ['correlationId', { payload: { key: 'k', do: 'ok' }, correlationId: 'c\u0000' }, 'correlationId'],
    ['metadata', { payload: { key: 'k', do: 'ok' }, metadata: { note: 'm\u0000' } }, 'metadata'],
  ];
  for (const [field, job, path] of cases) {
    // Alone (enqueue): a result, and the app's row in the same transaction commits.
    const { status, body } = await env.post('/enqueue', { note: `alone ${field}`, jobs: [job] });
    assert.equal(status, 200, JSON.stringify(body));
    assert.equal(body[0].status, 'invalid_payload', field);
    assert.match(body[0].issues[0].message, new RegExp(`^${field} holds`), field);
    assert.deepEqual(body[0].issues[0].path, path === undefined ? undefined : [path]);
  }
  assert.equal((await env.sql(`SELECT count(*)::int AS n FROM public.app_row WHERE note LIKE 'alone %'`))[0].n, cases.length);
  // In a list: only the bad items are refused; the rest are created in the same statement.
  const jobs = cases.map(([, job]) => job);
  jobs.push({ payload: { key: 'fine', do: 'ok' } }, { payload: { key: 'a \\u0000 is six characters here', do: 'ok' } });
  const many = await env.post('/enqueue-many', { jobs });
  assert.equal(many.status, 200, JSON.stringify(many.body));
  assert.deepEqual(many.body.results.map((r: any) => r.status), [...cases.map(() => 'invalid_payload'), 'created', 'created']);
  const stored = await env.sql(`SELECT payload->>'key' AS key FROM outbox.job ORDER BY key`);
  assert.deepEqual(stored.map((r) => r.key), ['a \\u0000 is six characters here', 'fine']);
});

test('metadata: null means none in enqueue and enqueueMany alike, and a non-object is refused', async () => {
  const one = await env.post('/enqueue', { jobs: [{ payload: { key: 'one', do: 'nothing' }, metadata: null, delayMs: 60_000 }] });
  const many = await env.post('/enqueue-many', { jobs: [{ payload: { key: 'many', do: 'nothing' }, metadata: null, delayMs: 60_000 }, { payload: { key: 'many2', do: 'nothing' }, delayMs: 60_000 }] });
  assert.equal(one.status, 200, JSON.stringify(one.body));
  assert.equal(many.status, 200, JSON.stringify(many.body));
  const rows = await env.sql(`SELECT payload->>'key' AS key, metadata IS NULL AS none FROM outbox.job ORDER BY key`);
  assert.deepEqual(rows, [{ key: 'many', none: true }, { key: 'many2', none: true }, { key: 'one', none: true }]);
  for (const metadata of [[1, 2], 'text', 7]) {
    const bad = await env.post('/enqueue', { jobs: [{ payload: { key: 'bad', do: 'ok' }, metadata }] });
    assert.equal(bad.status, 500);
    assert.equal(bad.body.code, 'invalid_input');
    assert.match(bad.body.error, /metadata must be a plain object/);
  }
});
