// The four stores the simulation runs on, from Node: an embedded PostgreSQL and one workerd
// (Miniflare) with a D1 database, a SQLite-backed Durable Object class and a Hyperdrive binding
// to that PostgreSQL, running tests/shim/fixtures/sim-worker.ts. Shared by the test
// (tests/shim/simulation.test.ts) and the long campaign (campaign.ts).
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startPostgres, type PgServer } from '../support/postgres.ts';
import { setProxyNoDelay, startWorker, type TestWorker } from '../support/worker.ts';
import type { Flavor, SimResult } from './runner.ts';

export const FLAVORS: readonly Flavor[] = ['memory', 'd1', 'durable-object', 'postgres'];

export interface SimStores {
  /** Runs `seeds` (the first `ops` operations of each) on one store, in one request. */
  run(flavor: Flavor, seeds: readonly number[], ops: number, without?: readonly string[]): Promise<SimResult[]>;
  dispose(): Promise<void>;
}

export async function startSimStores(): Promise<SimStores> {
  let server: PgServer | undefined;
  let worker: TestWorker | undefined;
  // Miniflare's local Hyperdrive proxy leaves Nagle's algorithm on: each of the run's many small
  // queries would then wait for a delayed ACK (about 40 ms), and a seed takes seconds instead of
  // a few hundred ms. The statements and their results are the same either way.
  setProxyNoDelay(true);
  try {
    server = await startPostgres();
    const url = await server.createDatabase('simulation');
    worker = await startWorker({
      entry: path.join(path.dirname(fileURLToPath(import.meta.url)), '../shim/fixtures/sim-worker.ts'),
      databaseUrl: url,
      d1Databases: ['DB'],
      durableObjects: { SIM_OBJECT: { className: 'SimObject', useSQLite: true } },
    });
  } catch (error) {
    await worker?.dispose();
    await server?.stop();
    throw error;
  }
  const w = worker;
  const pg = server;
  // One PostgreSQL run at a time: every request of it empties the same outbox's tables.
  let pgQueue: Promise<unknown> = Promise.resolve();
  const request = async (flavor: Flavor, seeds: readonly number[], ops: number, without: readonly string[]) => {
    const res = await w.fetch('/sim', { method: 'POST', body: JSON.stringify({ flavor, seeds, ops, without }), headers: { 'content-type': 'application/json' } });
    const text = await res.text();
    if (res.status !== 200) throw new Error(`${flavor}: HTTP ${res.status}: ${text}`);
    return JSON.parse(text) as SimResult[];
  };
  return {
    run(flavor, seeds, ops, without = []) {
      if (flavor !== 'postgres') return request(flavor, seeds, ops, without);
      const next = pgQueue.then(() => request(flavor, seeds, ops, without));
      pgQueue = next.catch(() => undefined);
      return next;
    },
    async dispose() {
      await w.dispose();
      await pg.stop();
    },
  };
}
