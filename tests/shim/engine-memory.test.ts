// The engine scenarios of createSqliteOutbox (enqueue, the pipeline drain, settlement, recovery,
// the sweep, operator actions, heartbeats) on the memory store: the third store under the one
// engine, beside D1 and Durable Objects inside workerd (sqlite-stores.test.ts) and PostgreSQL
// (outbox.test.ts and the rest).
import { describe, test } from 'node:test';
import { MemoryOutboxStore } from '../../js-shim/src/store/memory.ts';
import { heartbeatScenarios, operatorScenarios, runtimeScenarios } from './fixtures/sqlite/runtime.ts';
import type { Harness } from './fixtures/sqlite/scenarios.ts';

describe('the engine on the memory store', () => {
  for (const [name, scenario] of Object.entries({ ...runtimeScenarios, ...operatorScenarios, ...heartbeatScenarios })) {
    test(name, () => {
      const harness: Harness = {
        flavor: 'memory',
        store: new MemoryOutboxStore() as never,
        db: undefined,
        driver: undefined as never,
        storeNamed: async (n) => new MemoryOutboxStore({ name: n }) as never,
      };
      return scenario(harness);
    });
  }
});
