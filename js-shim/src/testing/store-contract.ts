/**
 * The store conformance suite: scenarios any {@link OutboxStore} must pass, runner-agnostic.
 * Each scenario throws on failure; wire them into your test runner of choice. Wherever a value
 * is a decision (a due time, a retry's backoff, an operator action's effect), the scenario asks
 * the core for it through the shim, exactly as the runtime does, and checks the store kept it.
 * @module
 */
import type { OutboxStore } from '../stores/contract.js';
import { appendScenarios } from './contract/append.js';
import { Driver, type StoreScenario } from './contract/driver.js';
import { leasesScenarios } from './contract/leases.js';
import { operationsScenarios } from './contract/operations.js';
import { settleScenarios } from './contract/settle.js';

export type { StoreScenario } from './contract/driver.js';

/** What the suite needs to drive a store. */
export interface OutboxStoreContractOptions<Db, Tx> {
  /**
   * The store of the outbox `name` (`null`: the default outbox). Within one scenario every store
   * made must share one database, so named outboxes can be checked for isolation.
   */
  makeStore(name: string | null): OutboxStore<Db, Tx> | Promise<OutboxStore<Db, Tx>>;
  /** The handle the store's operations (and `transaction`) run on. */
  db(): Db | Promise<Db>;
  /** Empties every outbox the scenarios use (the default and `otherName`); runs before each scenario. */
  reset?(): Promise<void>;
  /** The second outbox of the isolation scenario. Default `contract_b`. */
  otherName?: string;
  /**
   * Runs the statements of `store.appendStatements` as one batch and resolves to their results,
   * in order (for D1: `db.batch(statements)`). Given, the suite also checks the batched append.
   */
  runBatch?(db: Db, statements: unknown[]): Promise<unknown[]>;
}

/**
 * The conformance scenarios for a store. Example with `node:test`:
 * ```ts
 * for (const s of outboxStoreContract({ makeStore: (name) => new MemoryOutboxStore({ name, database }), db: () => undefined }))
 *   test(s.name, s.run);
 * ```
 */
export function outboxStoreContract<Db, Tx = Db>(options: OutboxStoreContractOptions<Db, Tx>): StoreScenario[] {
  const otherName = options.otherName ?? 'contract_b';
  const scenario = (name: string, body: (d: Driver<Db, Tx>) => Promise<void>, batched = false): StoreScenario => ({
    name,
    async run() {
      await options.reset?.();
      const store = await options.makeStore(null);
      await body(new Driver(store, await options.db(), batched ? options.runBatch! : null));
    },
  });

  return [
    ...appendScenarios(scenario, Boolean(options.runBatch)),
    ...leasesScenarios(scenario),
    ...settleScenarios(scenario),
    ...operationsScenarios(scenario, options, otherName),
  ];
}
