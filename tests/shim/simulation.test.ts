// The deterministic simulation of the whole outbox (tests/sim, README.md there): the same
// generated operation sequences run on the memory store, D1, a Durable Object's SQLite and
// PostgreSQL (inside workerd, through createSqliteOutbox on the test clock), every invariant
// checked after every step, and each seed's end state compared across the four stores.
//
// POSTBOX_SIM_SEEDS (default 300) seeds from POSTBOX_SIM_FROM (default 1), POSTBOX_SIM_OPS
// (default 16) operations each. The long campaign (tests/sim/campaign.ts) runs more and longer.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { compareResults, failuresOf } from '../sim/digest.ts';
import type { Flavor, SimResult } from '../sim/runner.ts';
import { FLAVORS, startSimStores, type SimStores } from '../sim/stores.ts';

const SEEDS = Number(process.env.POSTBOX_SIM_SEEDS ?? 300);
const FROM = Number(process.env.POSTBOX_SIM_FROM ?? 1);
const OPS = Number(process.env.POSTBOX_SIM_OPS ?? 16);
/** Seeds per request: a request's results come back as one JSON answer. */
const CHUNK = 25;

const seeds = Array.from({ length: SEEDS }, (_, i) => FROM + i);
const reproduce = (seed: number) => `node --import tsx tests/sim/campaign.ts --from ${seed} --seeds 1 --ops ${OPS} --verbose`;

describe('simulation: the same operations on every store', () => {
  let stores: SimStores;
  const results = new Map<Flavor, SimResult[]>();

  before(async () => {
    stores = await startSimStores();
  });
  after(async () => {
    await stores?.dispose();
  });

  // One store at a time: workerd runs them all on one thread, and apart they take less in total.
  for (const flavor of FLAVORS) {
    test(`${flavor}: ${SEEDS} seeds of ${OPS} operations hold every invariant after every step`, async (t) => {
      const started = performance.now();
      const all: SimResult[] = [];
      for (let i = 0; i < seeds.length; i += CHUNK) all.push(...(await stores.run(flavor, seeds.slice(i, i + CHUNK), OPS)));
      results.set(flavor, all);
      t.diagnostic(`${flavor}: ${((performance.now() - started) / 1000).toFixed(1)} s`);
      assert.equal(all.length, seeds.length);
      const steps = all.reduce((n, r) => n + r.digest.steps.length, 0);
      assert.equal(steps, seeds.length * OPS, 'every step of every seed ran');
      const failing = all.flatMap((r) => {
        const lines = failuresOf(flavor, r);
        return lines.length === 0 ? [] : [`seed ${r.seed} (${reproduce(r.seed)}):\n  ${lines.slice(0, 5).join('\n  ')}`];
      });
      assert.deepEqual(failing, []);
    });
  }

  test('every seed ends alike on the four stores: each step\'s result, and every job\'s status, attempts, error code and ledger', () => {
    assert.equal(results.size, FLAVORS.length, 'every store ran');
    const differing: string[] = [];
    seeds.forEach((seed, i) => {
      const lines = compareResults(FLAVORS.map((flavor) => ({ flavor, result: results.get(flavor)![i]! })));
      if (lines.length > 0) differing.push(`seed ${seed} (${reproduce(seed)}):\n  ${lines.slice(0, 4).join('\n  ')}`);
    });
    assert.deepEqual(differing, []);
    // The runs did something worth comparing: jobs ran, retried, died, were cancelled, and went.
    const states = results.get('memory')!.flatMap((r) => Object.values(r.digest.jobs));
    for (const want of [/^succeeded/, /^dead/, /^cancelled .*parent_failed/, /^waiting/, /^gone \(retention\)/, /^gone \(erased\)/, /retry\/r1/, /crash\//, /told=/]) {
      assert.ok(states.some((s) => want.test(s)), `some job matches ${want}`);
    }
  });
});
