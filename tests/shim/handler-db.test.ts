// Handler database work inside workerd against a real PostgreSQL: ctx.db runs on handler
// sessions of the drain's own, so a handler's long transaction holds up neither the lane's
// claims and settlements nor other attempts' heartbeats; ctx.db inside the handler's own
// ctx.db transaction joins it; and the lanes plus the handler sessions stay within the
// connection budget the core sets.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { until, useOutboxEnv } from './outbox-env.ts';

const env = useOutboxEnv({ entry: 'handler-db-worker.ts' });

type Note = { key: string; note: string; value?: any; at: number };
const enqueue = async (jobs: { kind: string; payload: object }[]): Promise<string[]> => {
  const res = await env.post('/enqueue', { jobs });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body;
};
const notes = async (key: string): Promise<Note[]> => ((await (await env.worker.fetch('/notes')).json()) as Note[]).filter((n) => n.key === key);
const noteOf = (key: string, name: string, timeoutMs?: number) => until(async () => (await notes(key)).find((n) => n.note === name), timeoutMs);
const drain = async () => assert.equal((await env.post('/drain', {})).status, 200);
const reset = async () => assert.equal((await env.post('/reset', {})).status, 200);
const succeeded = async (ids: string[]) =>
  (await env.sql(`SELECT count(*)::int AS n FROM outbox.job WHERE status = 'succeeded' AND id = ANY($1::uuid[])`, [ids]))[0].n as number;

describe('ctx.db on handler sessions', () => {
  test('a handler holding a ctx.db transaction holds up neither the lane’s other jobs nor their heartbeats', async () => {
    await reset();
    const [longId, beatId] = await enqueue([
      { kind: 'hd.long', payload: { key: 'long' } },
      { kind: 'hd.beat', payload: { key: 'beat' } },
    ]);
    const quick = await enqueue(Array.from({ length: 50 }, (_, i) => ({ kind: 'hd.quick', payload: { key: `q${i}` } })));
    await drain();
    const opened = await noteOf('long', 'long_open');
    // Every quick job runs its ctx.db write and is settled while the long transaction is open
    // (its row is not visible yet and the job still runs): they never wait for it.
    await until(async () => (await succeeded(quick)) === 50, 10_000);
    assert.equal((await env.sql(`SELECT count(*)::int AS n FROM public.sink WHERE key LIKE 'q%'`))[0].n, 50);
    assert.equal((await env.sql(`SELECT count(*)::int AS n FROM public.sink WHERE key = 'long'`))[0].n, 0, 'the long transaction is still open');
    assert.equal((await env.job(longId!)).status, 'running');
    // The heartbeating job's beats get through meanwhile, promptly, and move its lease.
    const beats = await until(async () => {
      const b = (await notes('beat')).filter((n) => n.note === 'beat' && n.at > opened.at);
      return b.length >= 3 ? b : undefined;
    }, 10_000);
    assert.ok(beats.every((b) => b.value.ms < 500), JSON.stringify(beats.map((b) => b.value.ms)));
    assert.equal(Number((await env.sql(`SELECT round(extract(epoch FROM lease_expires_at) * 1000)::bigint AS ms FROM outbox.job WHERE id = $1`, [beatId]))[0].ms), beats.at(-1)!.value.lease);
    assert.equal((await notes('long')).some((n) => n.note === 'long_committed'), false, 'all of it before the long transaction committed');
    await env.post('/gate', { name: 'long:commit' });
    await env.post('/gate', { name: 'beat:done' });
    await until(async () => (await succeeded([longId!, beatId!])) === 2, 15_000);
    assert.equal((await env.sql(`SELECT count(*)::int AS n FROM public.sink WHERE key = 'long'`))[0].n, 1);
    // Settled before the long one: by the database's own clock too.
    const order = await env.sql(
      `SELECT count(*)::int AS n FROM outbox.job q, outbox.job l WHERE l.id = $1 AND q.id = ANY($2::uuid[]) AND q.finished_at < l.finished_at`,
      [longId, quick],
    );
    assert.equal(order[0].n, 50);
    const events = await env.events();
    assert.deepEqual(events.filter((e) => e.type === 'lease_lost' || e.type === 'infra_error'), []);
    assert.equal((await notes('beat')).some((n) => n.note === 'beat_failed'), false);
    assert.equal((await noteOf('drain', 'report')).value.succeeded, 52);
  });

  test('ctx.db inside the handler’s own ctx.db transaction joins it; a nested transaction is refused at once', async () => {
    await reset();
    const [id] = await enqueue([{ kind: 'hd.reenter', payload: { key: 're' } }]);
    await drain();
    const committed = await noteOf('re', 'committed', 10_000);
    // Well before the 3 s timeout: nothing waited behind the transaction.
    assert.ok(committed.value.ms < 1_000, JSON.stringify(committed.value));
    const joined = (await noteOf('re', 'joined_query')).value;
    assert.equal(joined.n, 1, 'the query saw the transaction’s own uncommitted row');
    assert.equal((await noteOf('re', 'joined_enqueue')).value.status, 'created');
    const nested = (await noteOf('re', 'nested')).value;
    assert.equal(nested.code, 'transaction_open');
    assert.equal(nested.typed, true);
    assert.ok(nested.ms < 100, JSON.stringify(nested));
    await until(async () => (await env.job(id!)).status === 'succeeded');
    // The enqueue committed with the transaction; the follow-up job then runs.
    const followUps = await env.sql(`SELECT id FROM outbox.job WHERE kind = 'hd.quick' AND payload->>'key' = 're:next'`);
    assert.equal(followUps.length, 1);
  });

  test('the lanes and the handler sessions stay within the connection budget; one over it is refused', async () => {
    await reset();
    // Within the budget by default, whatever concurrency asks for.
    assert.deepEqual((await env.post('/budget', { lanes: 5 })).body, { accepted: true });
    assert.deepEqual((await env.post('/budget', { lanes: 2, handlerSessions: 3 })).body, { accepted: true });
    const refused = (await env.post('/budget', { lanes: 4, handlerSessions: 2 })).body;
    assert.equal(refused.code, 'invalid_config');
    assert.equal(refused.typed, true);
    assert.match(refused.message, /field 'handlerSessions' must be at most 1 with lanes 4: lanes \+ handlerSessions may hold at most 5 connections/);
    assert.match((await env.post('/budget', { handlerSessions: 5 })).body.message, /field 'handlerSessions' must be an integer in \[0, 4\]/);
    // Eight handlers holding ctx.db transactions at once, on two handler sessions: they take
    // turns, and the drain never holds more than its lane plus those two.
    await env.post('/options', { handlerSessions: 2 });
    const ids = await enqueue(Array.from({ length: 8 }, (_, i) => ({ kind: 'hd.hold', payload: { key: `h${i}`, ms: 300 } })));
    await drain();
    await until(async () => (await succeeded(ids)) === 8, 15_000);
    await noteOf('drain', 'report');
    const connections = (await (await env.worker.fetch('/connections')).json()) as { open: number; max: number; opened: number };
    assert.deepEqual(connections, { open: 0, max: 3, opened: 3 });
  });
});
