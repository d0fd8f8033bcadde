// The SQLite stores (D1 and Durable Object SQLite) inside workerd: every scenario of
// fixtures/sqlite/ runs in the Worker against Miniflare's real D1 database and a fresh
// SQLite-backed Durable Object; the engine's scenarios (createSqliteOutbox) run on the memory
// store there too. No PostgreSQL is involved: store-conformance.test.ts runs the engine's
// scenarios on PostgreSQL.
import assert from 'node:assert/strict';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { outboxStoreContract } from '../../js-shim/src/testing/store-contract.ts';
import { startWorker, type TestWorker } from '../support/worker.ts';
import { scenarios } from './fixtures/sqlite/scenarios.ts';
import { d1RuntimeScenarios, engineScenarios as engine } from './fixtures/sqlite/runtime.ts';
import { d1Scenarios, durableObjectScenarios } from './fixtures/sqlite/transactions.ts';

const fixtures = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures');
let worker: TestWorker;

before(async () => {
  worker = await startWorker({
    entry: path.join(fixtures, 'sqlite-stores-worker.ts'),
    d1Databases: ['DB'],
    durableObjects: { STORE_OBJECT: { className: 'StoreObject', useSQLite: true } },
  });
});
after(async () => {
  await worker?.dispose();
});

const flavors = {
  d1: { ...scenarios, ...engine, ...d1Scenarios, ...d1RuntimeScenarios },
  'durable-object': { ...scenarios, ...engine, ...durableObjectScenarios },
  // The engine's scenarios on the third store, the memory store, in the same Worker.
  memory: engine,
};

for (const [flavor, list] of Object.entries(flavors)) {
  describe(`${flavor === 'memory' ? 'the memory store' : `SQLite store on ${flavor === 'd1' ? 'D1' : 'a Durable Object'}`} (workerd)`, () => {
    for (const name of Object.keys(list)) {
      test(name, async () => {
        const res = await worker.fetch(`/${flavor}/run?name=${encodeURIComponent(name)}`);
        const text = await res.text();
        assert.equal(res.status, 200, text);
      });
    }
  });
}


// postbox/testing's conformance suite: every scenario runs inside workerd on each store.
const contractNames = (batched: boolean) =>
  outboxStoreContract({ makeStore: () => undefined as never, db: () => undefined, ...(batched ? { runBatch: async () => [] } : {}) }).map((s) => s.name);
for (const flavor of ['d1', 'durable-object']) {
  describe(`conformance suite on ${flavor === 'd1' ? 'D1' : 'a Durable Object'} (workerd)`, () => {
    // D1 also runs the suite's batched-append scenario (its appendStatements in a db.batch).
    for (const name of contractNames(flavor === 'd1')) {
      test(name, async () => {
        const res = await worker.fetch(`/contract/${flavor}/run?name=${encodeURIComponent(name)}`);
        const text = await res.text();
        assert.equal(res.status, 200, text);
      });
    }
  });
}
