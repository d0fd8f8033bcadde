// Flow limits inside workerd against a real PostgreSQL: a kind's `concurrency` holds across
// several consumers at once and across a crashed attempt (until its lease runs out), a
// `rateLimit` spaces the kind's starts, and a throttled kind holds back only itself.
// POSTBOX_PG picks the server (17, 15 or 14).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import pg from 'pg';
import { countBacklog } from '../../js-shim/src/inspect/index.ts';
import { until, useOutboxEnv } from './outbox-env.ts';
import { ATTEMPTS } from '../support/ledger.ts';

const env = useOutboxEnv({ entry: 'flow-worker.ts' });

type Report = { claimed: number; succeeded: number; throttled: number };
type Stats = { running: Record<string, number>; most: Record<string, number>; starts: { kind: string; key: string; at: number }[] };

const post = async (path: string, body: object = {}) => {
  const res = await env.post(path, body);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body;
};
const enqueue = (kind: string, opts: { n?: number; key?: string; ms?: number; tenantKey?: string | null } = {}) => post('/enqueue', { kind, ...opts }) as Promise<string[]>;
const drains = (n: number) => post('/drains', { n }) as Promise<Report[]>;
const stats = async () => (await (await env.worker.fetch('/stats')).json()) as Stats;
const statusCounts = async (kind: string) =>
  Object.fromEntries((await env.sql(`SELECT status, count(*)::int AS n FROM outbox.job WHERE kind = $1 GROUP BY status`, [kind])).map((r) => [r.status, r.n]));
const throttledEvents = async () => ((await (await env.worker.fetch('/events')).json()) as { type: string }[]).filter((e) => e.type === 'throttled');
const sum = (reports: Report[], key: keyof Report) => reports.reduce((n, r) => n + r[key], 0);

describe('flow limits', () => {
  test('a concurrency limit holds across four consumers at once, and is reached', async () => {
    await post('/reset');
    await env.sql('DELETE FROM outbox.kind_slot');
    await enqueue('flow.capped', { n: 24, ms: 60 });
    const reports = await drains(4);
    assert.deepEqual(await statusCounts('flow.capped'), { succeeded: 24 });
    assert.equal(sum(reports, 'claimed'), 24);
    const { most } = await stats();
    assert.equal(most['flow.capped'], 3, 'never more than 3 handlers at once, and 3 at some point');
    assert.ok(sum(reports, 'throttled') > 0, 'some claims were held back by the limit');
    // Reported once per drain that was held back, with the core's reason.
    const events = await throttledEvents();
    assert.ok(events.length >= 1 && events.length <= 4, JSON.stringify([events.length, reports]));
    for (const e of events) assert.deepEqual(e, { type: 'throttled', lane: 'default', kind: 'flow.capped', reason: 'concurrency_limit' });
    // Every slot is free again: held only by attempts that have ended.
    const held = await env.sql(
      `SELECT count(*)::int AS n FROM outbox.kind_slot k JOIN outbox.job j ON j.id = k.job_id AND j.attempt_seq = k.attempt_seq
        WHERE k.pool = 'c' AND j.status = 'running'`,
    );
    assert.equal(held[0].n, 0);
  });

  test('a rate limit spaces starts: at most its burst in any window of burst / rate', async () => {
    await post('/reset');
    await env.sql('DELETE FROM outbox.kind_slot');
    // 10 a second, bursting to 2: no 200 ms window holds more than 2 starts.
    await enqueue('flow.rated', { n: 12 });
    const reports = await drains(2);
    assert.deepEqual(await statusCounts('flow.rated'), { succeeded: 12 });
    assert.ok(sum(reports, 'throttled') > 0);
    assert.ok((await throttledEvents()).every((e) => JSON.stringify(e) === JSON.stringify({ type: 'throttled', lane: 'default', kind: 'flow.rated', reason: 'rate_limit' })));
    const started = (await env.sql(`SELECT extract(epoch FROM started_at) * 1000 AS s FROM ${ATTEMPTS} a WHERE kind = 'flow.rated' ORDER BY 1`)).map((r) => Number(r.s));
    assert.equal(started.length, 12);
    for (let i = 2; i < started.length; i++) assert.ok(started[i]! - started[i - 2]! >= 200, `starts ${i - 2} and ${i}: ${started[i]! - started[i - 2]!} ms apart`);
    // Twelve starts two at a time: at least five holds of 200 ms from the first to the last.
    assert.ok(started.at(-1)! - started[0]! >= 1_000);
  });

  test('a running attempt holds its slot until it settles or its lease runs out; other kinds go on meanwhile', async () => {
    await post('/reset');
    await env.sql('DELETE FROM outbox.kind_slot');
    await enqueue('flow.single', { key: 'gate:a' });
    await post('/drain-background');
    await until(async () => (await stats()).running['flow.single'] === 1);
    const [waiting] = await enqueue('flow.single', { key: 'b' });
    await enqueue('flow.free', { n: 5 });
    // A second consumer: the free kind runs, the single one waits (uncharged), and the drain
    // ends once its claims have been held back for 5 s.
    const [held] = await drains(1);
    assert.equal(held!.claimed, 5);
    assert.ok(held!.throttled > 0);
    assert.deepEqual(await statusCounts('flow.free'), { succeeded: 5 });
    const row = (await env.sql(`SELECT status, attempts, attempt_seq FROM outbox.job WHERE id = $1`, [waiting]))[0];
    assert.deepEqual(row, { status: 'pending', attempts: 0, attempt_seq: 0 });
    // Inspection sees it held back by the limit (and nothing of the unlimited kind).
    const client = new pg.Client({ connectionString: env.dbUrl });
    await client.connect();
    try {
      const limits = [{ kind: 'flow.single', policy: { concurrency: 1 } }];
      const backlog = await countBacklog(client, { limits });
      assert.deepEqual(backlog.map((b) => [b.kind, b.due, b.processing, b.throttled]), [['flow.single', 1, 1, 1]]);
      assert.equal((await countBacklog(client)).find((b) => b.kind === 'flow.single')!.throttled, undefined, 'only when asked');
    } finally {
      await client.end();
    }
    // Past the running attempt's lease (10 s + a 10 s margin), it no longer counts: the waiting job runs.
    await post('/clock', { offsetMs: 21_000 });
    const [after] = await drains(1);
    assert.equal(after!.claimed, 1);
    assert.equal((await env.sql(`SELECT status FROM outbox.job WHERE id = $1`, [waiting]))[0].status, 'succeeded');
    await post('/gate', { name: 'gate:a' });
    await post('/background');
  });

  test('a tenant limit holds per tenant across four consumers, and a quiet tenant runs beside a busy one', async () => {
    await post('/reset');
    await env.sql('DELETE FROM outbox.kind_slot');
    // Tenant a's backlog first, then b's few and some without a tenant.
    await enqueue('flow.tenanted', { n: 16, ms: 150, key: 'a', tenantKey: 'a' });
    await enqueue('flow.tenanted', { n: 4, ms: 150, key: 'b', tenantKey: 'b' });
    await enqueue('flow.tenanted', { n: 3, ms: 150, key: 'n', tenantKey: null });
    const reports = await drains(4);
    assert.deepEqual(await statusCounts('flow.tenanted'), { succeeded: 23 });
    const { most, starts } = await stats();
    assert.equal(most['flow.tenanted:a'], 2, 'never more than 2 of tenant a at once, and 2 at some point');
    assert.equal(most['flow.tenanted:b'], 2);
    assert.ok(most['flow.tenanted:-']! <= 2);
    assert.ok(most['flow.tenanted']! <= 5, `the kind's own limit: ${most['flow.tenanted']}`);
    // b did not wait for a's backlog: its last job started before a's tenth.
    const startsOf = (prefix: string) => starts.filter((s) => s.kind === 'flow.tenanted' && s.key.startsWith(prefix)).map((s) => s.at);
    assert.ok(Math.max(...startsOf('b')) <= startsOf('a').sort((x, y) => x - y)[9]!, JSON.stringify(starts));
    assert.ok(sum(reports, 'throttled') > 0);
    assert.ok((await throttledEvents()).some((e) => (e as { reason?: string }).reason === 'tenant_concurrency_limit'));
    // The attempt ledger agrees: no attempt of a tenant ran beside two others of it. Its
    // instants are each drain's clock reading taken before its statement, so an attempt that
    // took a slot freed by a statement still running can look started a few milliseconds before
    // that slot's attempt finished (workerd's clock moves only at I/O, so on a busy machine by
    // tens of milliseconds); each attempt is looked at in its middle (75 ms in), which a real
    // third attempt at once would cover and that skew does not reach.
    const ledger = await env.sql(
      `SELECT COALESCE(j.tenant_key, '-') AS tenant, extract(epoch FROM a.started_at) * 1000 AS s, extract(epoch FROM a.finished_at) * 1000 AS f
         FROM ${ATTEMPTS} a JOIN outbox.job j ON j.id = a.job_id WHERE a.kind = 'flow.tenanted'`,
    );
    for (const tenant of ['a', 'b', '-']) {
      const mine = ledger.filter((r) => r.tenant === tenant);
      const at = (r: (typeof mine)[number]) => (Number(r.s) + Number(r.f)) / 2;
      const most = Math.max(...mine.map((r) => mine.filter((o) => Number(o.s) <= at(r) && Number(o.f) > at(r)).length));
      assert.ok(most <= 2, `tenant ${tenant}: ${most} attempts at once in the ledger`);
    }
    // Each tenant has its two slots; erasing a tenant takes its slots with its jobs.
    const slots = async () =>
      Object.fromEntries((await env.sql(`SELECT scope, count(*)::int AS n FROM outbox.kind_slot WHERE kind = 'flow.tenanted' AND pool = 't' GROUP BY scope`)).map((r) => [r.scope, r.n]));
    assert.deepEqual(await slots(), { 't:a': 2, 't:b': 2, n: 2 });
    assert.deepEqual(await post('/erase', { tenantKey: 'a' }), { erased: 16 });
    assert.deepEqual(await slots(), { 't:b': 2, n: 2 });
  });

  test('a tenant at its limit holds back only its own jobs; its next job runs once its attempts end', async () => {
    await post('/reset');
    await env.sql('DELETE FROM outbox.kind_slot');
    await enqueue('flow.tenanted', { key: 'gate:a1', tenantKey: 'a' });
    await enqueue('flow.tenanted', { key: 'gate:a2', tenantKey: 'a' });
    await post('/drain-background');
    await until(async () => (await stats()).running['flow.tenanted:a'] === 2);
    const [waiting] = await enqueue('flow.tenanted', { key: 'a3', tenantKey: 'a' });
    await enqueue('flow.tenanted', { n: 3, key: 'c', tenantKey: 'c' });
    // A second consumer runs c's three and leaves a's third pending, uncharged, after 5 s held back.
    const [held] = await drains(1);
    assert.equal(held!.claimed, 3);
    assert.ok(held!.throttled > 0);
    assert.deepEqual(await env.sql(`SELECT status, attempts, attempt_seq FROM outbox.job WHERE id = $1`, [waiting]), [{ status: 'pending', attempts: 0, attempt_seq: 0 }]);
    // Inspection sees it held back by its tenant's limit.
    const client = new pg.Client({ connectionString: env.dbUrl });
    await client.connect();
    try {
      const backlog = await countBacklog(client, { limits: [{ kind: 'flow.tenanted', policy: { concurrency: 5, tenantConcurrency: 2 } }] });
      assert.deepEqual(backlog.map((b) => [b.kind, b.due, b.processing, b.throttled]), [['flow.tenanted', 1, 2, 1]]);
    } finally {
      await client.end();
    }
    // A nudge naming a's third and one more of c's: the nudged claim takes c's, leaves a's (its
    // drain stops at once: a's 10 s attempt would not fit its deadline, and a's two must not time out).
    const [cLate] = await enqueue('flow.tenanted', { key: 'c-late', tenantKey: 'c' });
    const nudged = (await post('/drain-targets', { budgetMs: 10_500, targets: [{ id: waiting, kind: 'flow.tenanted' }, { id: cLate, kind: 'flow.tenanted' }] })) as Report;
    assert.equal(nudged.claimed, 1);
    assert.equal((await env.sql(`SELECT status FROM outbox.job WHERE id = $1`, [cLate]))[0].status, 'succeeded');
    assert.equal((await env.sql(`SELECT status FROM outbox.job WHERE id = $1`, [waiting]))[0].status, 'pending');
    // a's attempts end and settle: the next drain takes a's third.
    await post('/gate', { name: 'gate:a1' });
    await post('/gate', { name: 'gate:a2' });
    const bg = (await post('/background')) as Report[];
    assert.equal(bg[0]!.succeeded, 2, JSON.stringify(bg));
    const [after] = await drains(1);
    assert.equal(after!.claimed, 1);
    assert.equal((await env.sql(`SELECT status FROM outbox.job WHERE id = $1`, [waiting]))[0].status, 'succeeded');
  });
});
