// The store conformance suite (postbox/testing's outboxStoreContract) against the memory store
// and the PostgreSQL store on a real server (the default outbox and a named one in one
// database), in Node and inside workerd (tests/shim/fixtures/store-worker.ts); broken stores
// that must fail it; the PostgreSQL store's transaction keeping the callback's error when
// the rollback itself fails; and the engine's scenarios (fixtures/sqlite/runtime.ts, which
// sqlite-stores.test.ts runs on D1, a Durable Object and the memory store) on PostgreSQL inside
// workerd, so that the one engine is held to the same behaviour on every store.
import assert from 'node:assert/strict';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { MemoryOutboxDatabase, MemoryOutboxStore, postgresOutboxStore, PostgresOutboxStore, type LaneDb } from 'postbox';
import { migrate } from 'postbox/sql';
import { outboxStoreContract } from 'postbox/testing';
import { startPostgres, type PgServer } from '../support/postgres.ts';
import { startWorker, type TestWorker } from '../support/worker.ts';
import { memoryStoreScenarios } from './fixtures/memory-contract.ts';
import { engineScenarios } from './fixtures/sqlite/runtime.ts';

const OTHER = 'contract_b';
/** The named outbox the engine's scenarios run on, apart from the suite's two. */
const ENGINE = 'engine_scenarios';

describe('memory store', () => {
  for (const s of memoryStoreScenarios({ otherName: OTHER })) test(s.name, s.run);

  test('rejects bad input with typed errors', async () => {
    const store = new MemoryOutboxStore();
    const item = { id: 'not-a-uuid', payloadJson: '{}', tenantKey: null, dedupeKey: null, correlationId: null, metadataJson: null, dueAt: 0, maxAttempts: null };
    await assert.rejects(store.append(undefined, { kind: 'k', lane: 'default', now: 0, versionTs: null, items: [item] }), { code: 'invalid_id' });
    const id = crypto.randomUUID();
    await assert.rejects(store.append(undefined, { kind: 'k', lane: 'default', now: 0, versionTs: null, items: [{ ...item, id, payloadJson: '{nope' }] }), { code: 'invalid_input' });
    assert.equal(await store.getJob(undefined, { id }), null, 'a refused list writes nothing');
    assert.throws(() => new MemoryOutboxStore({ name: 'Bad Name' }), { code: 'invalid_config' });
  });
});

test('the batched-append scenario runs when the store has appendStatements and a batch runner is given', async () => {
  // A stand-in for a store without interactive transactions: its "statement" is the append itself.
  let last: MemoryOutboxStore | undefined;
  const scenarios = memoryStoreScenarios({ runBatch: async (db, statements) => [await last!.append(db, statements[0] as never)] }, (database, name) => {
    const store = new MemoryOutboxStore({ name, database });
    (store as { appendStatements?: unknown }).appendStatements = (_db: unknown, input: unknown) => ({ statements: [input], read: (results: unknown[]) => results[0] });
    return (last = store);
  });
  const batched = scenarios.find((s) => s.name.startsWith('append as batched statements'));
  assert.ok(batched);
  await batched.run();
  // Without appendStatements the scenario says what is missing.
  const without = outboxStoreContract<unknown>({ makeStore: () => new MemoryOutboxStore(), db: () => undefined, runBatch: async () => [] });
  await assert.rejects(without.find((s) => s.name.startsWith('append as batched'))!.run(), /no appendStatements/);
  assert.equal(outboxStoreContract<unknown>({ makeStore: () => new MemoryOutboxStore(), db: () => undefined }).some((s) => s.name.startsWith('append as batched')), false);
});

describe('the suite fails broken stores', () => {
  // Each mutant breaks one rule; the scenario that checks it must reject.
  const run = async (make: (database: MemoryOutboxDatabase) => (name: string | null) => MemoryOutboxStore, scenario: RegExp) => {
    const s = memoryStoreScenarios({}, (database, name) => make(database)(name)).find((x) => scenario.test(x.name));
    assert.ok(s, `a scenario matching ${scenario}`);
    await assert.rejects(s.run(), /store contract:/);
  };

  test('a claim that is not oldest due first', () =>
    run((database) => (name) => {
      const store = new MemoryOutboxStore({ name, database });
      const claim = store.claim.bind(store);
      store.claim = async (db, input) => (await claim(db, { ...input, limit: 100 })).reverse().slice(0, input.limit);
      return store;
    }, /^claim takes due jobs/));

  test('an append that ignores dedupe keys', () =>
    run((database) => (name) => {
      const store = new MemoryOutboxStore({ name, database });
      const append = store.append.bind(store);
      store.append = (tx, input) => append(tx, { ...input, items: input.items.map((i) => ({ ...i, dedupeKey: null })) });
      return store;
    }, /^append is idempotent/));

  test('a settle that is not fenced by the attempt', () =>
    run((database) => (name) => {
      const store = new MemoryOutboxStore({ name, database });
      const settle = store.settle.bind(store);
      // Tries every attempt number, as a store without the fence would accept any.
      store.settle = async (db, input) => {
        const out = new Set<string>();
        for (let seq = 1; seq < 5; seq++) for (const id of await settle(db, { ...input, items: input.items.map((i) => ({ ...i, attemptSeq: seq })) })) out.add(id);
        return [...out];
      };
      return store;
    }, /^leases fence/));

  test('a store that keeps its own due times instead of the core\'s', () =>
    run((database) => (name) => {
      const store = new MemoryOutboxStore({ name, database });
      const settle = store.settle.bind(store);
      store.settle = (db, input) => settle(db, { ...input, items: input.items.map((i) => ({ ...i, dueAt: i.dueAt === null ? null : input.now + 60_000 })) });
      return store;
    }, /^retries wait out/));

  test('outboxes that share their jobs', () =>
    // Every store is the default outbox's tables, whatever name it reports.
    run((database) => (name) => Object.defineProperty(new MemoryOutboxStore({ database }), 'name', { value: name }), /^named outboxes/));
});

describe('PostgreSQL store', () => {
  let server: PgServer;
  let url: string;
  let client: pg.Client;

  before(async () => {
    server = await startPostgres();
    url = await server.createDatabase('store_contract');
    client = new pg.Client({ connectionString: url });
    await client.connect();
    await migrate(client);
    await migrate(client, { name: OTHER });
  });
  after(async () => {
    await client?.end();
    await server?.stop();
  });

  test('the suite passes on the default and a named outbox', async (t) => {
    // A pool: racing claims then run on connections of their own, as lanes do (SKIP LOCKED).
    const pool = new pg.Pool({ connectionString: url, max: 4 });
    t.after(() => pool.end());
    const scenarios = outboxStoreContract({
      makeStore: (name) => postgresOutboxStore(name),
      db: () => pool as unknown as LaneDb,
      reset: async () => {
        await client.query(`TRUNCATE outbox.job, "outbox_${OTHER}".job, outbox.schedule_run, "outbox_${OTHER}".schedule_run CASCADE`);
      },
      otherName: OTHER,
    });
    assert.ok(scenarios.length >= 12);
    for (const s of scenarios) await t.test(s.name, s.run);
  });

  test('inside workerd: the suite passes on the memory store and on PostgreSQL over Hyperdrive', async () => {
    const fixture = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures/store-worker.ts');
    let worker: TestWorker | undefined;
    try {
      worker = await startWorker({ entry: fixture, databaseUrl: url });
      for (const store of ['memory', 'postgres']) {
        const res = await worker.fetch('/run', { method: 'POST', body: JSON.stringify({ store, otherName: OTHER }), headers: { 'content-type': 'application/json' } });
        assert.equal(res.status, 200);
        const results = (await res.json()) as { name: string; ok: boolean; error?: string }[];
        assert.ok(results.length >= 12, `${store}: every scenario ran`);
        assert.deepEqual(results.filter((r) => !r.ok), [], `${store}: every scenario passes in workerd`);
      }
    } finally {
      await worker?.dispose();
    }
  });

  describe("the engine's scenarios on PostgreSQL (workerd)", () => {
    let worker: TestWorker | undefined;
    before(async () => {
      await migrate(client, { name: ENGINE });
      worker = await startWorker({ entry: path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures/store-worker.ts'), databaseUrl: url });
    });
    after(async () => {
      await worker?.dispose();
    });

    // Each in its own request, on the outbox's tables emptied by the Worker first.
    for (const name of Object.keys(engineScenarios)) {
      test(name, async () => {
        const res = await worker!.fetch('/engine', { method: 'POST', body: JSON.stringify({ name, outbox: ENGINE }), headers: { 'content-type': 'application/json' } });
        const text = await res.text();
        assert.equal(res.status, 200, text);
      });
    }
  });

  test('one store per name, and a typed error for a bad one', () => {
    assert.equal(postgresOutboxStore(), postgresOutboxStore(null));
    assert.ok(postgresOutboxStore(OTHER) instanceof PostgresOutboxStore);
    assert.equal(postgresOutboxStore(OTHER).name, OTHER);
    assert.throws(() => postgresOutboxStore('Robert"; DROP'), { code: 'invalid_config' });
  });

  test('transaction: the callback\'s error survives a rollback that fails, and the connection goes back', async () => {
    const pool = new pg.Pool({ connectionString: url, max: 1 });
    pool.on('error', () => undefined);
    const store = postgresOutboxStore();
    const boom = new Error('the callback failed');
    let pid = 0;
    await assert.rejects(
      store.transaction(pool, async (tx) => {
        pid = (await tx.query('SELECT pg_backend_pid() AS pid')).rows[0].pid;
        await store.append(tx, {
          kind: 'k', lane: 'default', now: Date.now(), versionTs: null,
          items: [{ id: crypto.randomUUID(), payloadJson: '{}', tenantKey: null, dedupeKey: 'lost', correlationId: null, metadataJson: null, dueAt: Date.now(), maxAttempts: null }],
        });
        // Its connection dies under it: ROLLBACK cannot be sent.
        await client.query('SELECT pg_terminate_backend($1)', [pid]);
        throw boom;
      }),
      (error) => error === boom,
    );
    // The one pooled connection was released (discarded): the next transaction gets a fresh one.
    const again = await store.transaction(pool, async (tx) => (await tx.query('SELECT pg_backend_pid() AS pid')).rows[0].pid);
    assert.notEqual(again, pid);
    assert.equal((await client.query(`SELECT count(*)::int AS n FROM outbox.job WHERE dedupe_key = 'lost'`)).rows[0].n, 0, 'nothing committed');
    await pool.end();
  });
});
