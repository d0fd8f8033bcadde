// The long simulation campaign: many seeds, longer sequences, on every store, each failure shrunk
// to its shortest failing prefix. See README.md.
//
//   node --import tsx tests/sim/campaign.ts --seeds 2000 --ops 60
//   node --import tsx tests/sim/campaign.ts --from 4711 --seeds 1 --ops 23 --verbose   (one seed, step by step)
//
// Options: --from S (first seed, default 1), --seeds N (default 500), --ops M (default 40),
// --stores memory,d1,durable-object,postgres (default all; the first is the reference),
// --without NAME (an exclusion of exclusions.ts to turn off; repeatable), --chunk C (seeds per
// request, default 25), --no-shrink, --max-failures K (stop after K failing seeds), --verbose (each
// operation and every store's step results).
// Exits 1 when any seed fails.
import { parseArgs } from 'node:util';
import { compareResults, failuresOf } from './digest.ts';
import { EXCLUSIONS } from './exclusions.ts';
import { describe, generate } from './ops.ts';
import type { Flavor, SimResult } from './runner.ts';
import { FLAVORS, startSimStores, type SimStores } from './stores.ts';

const { values } = parseArgs({
  options: {
    from: { type: 'string', default: '1' },
    seeds: { type: 'string', default: '500' },
    ops: { type: 'string', default: '40' },
    stores: { type: 'string', default: FLAVORS.join(',') },
    without: { type: 'string', multiple: true, default: [] },
    chunk: { type: 'string', default: '25' },
    'no-shrink': { type: 'boolean', default: false },
    'max-failures': { type: 'string', default: 'Infinity' },
    verbose: { type: 'boolean', default: false },
  },
});
const from = Number(values.from);
const count = Number(values.seeds);
const ops = Number(values.ops);
const chunk = Number(values.chunk);
const flavors = values.stores.split(',') as Flavor[];
const without = values.without;
const maxFailures = Number(values['max-failures']);
for (const f of flavors) if (!FLAVORS.includes(f)) throw new Error(`no store ${f}; there are: ${FLAVORS.join(', ')}`);
for (const name of without) if (!(name in EXCLUSIONS)) throw new Error(`no exclusion ${name}; there are: ${Object.keys(EXCLUSIONS).join(', ')}`);

/** Why `seed`'s first `n` operations fail, on the stores and across them; empty when they pass. */
async function failures(stores: SimStores, seed: number, n: number): Promise<{ lines: string[]; results: { flavor: Flavor; result: SimResult }[] }> {
  const results: { flavor: Flavor; result: SimResult }[] = [];
  for (const flavor of flavors) results.push({ flavor, result: (await stores.run(flavor, [seed], n, without))[0]! });
  return { lines: verdict(results), results };
}

function verdict(results: { flavor: Flavor; result: SimResult }[]): string[] {
  return [...results.flatMap((r) => failuresOf(r.flavor, r.result)), ...compareResults(results)];
}

/** The shortest prefix of `seed`'s sequence that still fails (a failure at step k stays in every longer prefix). */
async function shrink(stores: SimStores, seed: number, n: number): Promise<{ length: number; lines: string[] }> {
  let lo = 1;
  let hi = n;
  let best = (await failures(stores, seed, n)).lines;
  while (lo < hi) {
    const mid = Math.floor((lo + hi) / 2);
    const lines = (await failures(stores, seed, mid)).lines;
    if (lines.length > 0) {
      hi = mid;
      best = lines;
    } else lo = mid + 1;
  }
  return { length: hi, lines: best };
}

function printVerbose(seed: number, results: { flavor: Flavor; result: SimResult }[]): void {
  const sequence = generate(seed, ops);
  console.log(`seed ${seed}, ${ops} operations:`);
  sequence.forEach((op, i) => console.log(`  ${i} ${describe(op)}`));
  for (const { flavor, result } of results) {
    console.log(`${flavor}:`);
    for (const line of result.digest.steps) console.log(`  ${line}`);
    for (const [id, state] of Object.entries(result.digest.jobs)) console.log(`  ${id} ${state}`);
    if (Object.keys(result.excused).length > 0) console.log(`  excused: ${JSON.stringify(result.excused)}`);
  }
}

const started = performance.now();
const stores = await startSimStores();
let failed = 0;
try {
  const seeds = Array.from({ length: count }, (_, i) => from + i);
  const time: Partial<Record<Flavor, number>> = {};
  const excused: Record<string, number> = {};
  let ran = 0;
  for (let i = 0; i < seeds.length && failed < maxFailures; i += chunk) {
    const part = seeds.slice(i, i + chunk);
    const byFlavor = new Map<Flavor, SimResult[]>();
    for (const flavor of flavors) {
      const t = performance.now();
      const results = await stores.run(flavor, part, ops, without);
      // Seeds after one whose drain never returned were not run there (it may still write): each on its own.
      for (let j = 0; j < results.length; j++) if (results[j]!.error?.startsWith('not run:')) results[j] = (await stores.run(flavor, [part[j]!], ops, without))[0]!;
      byFlavor.set(flavor, results);
      time[flavor] = (time[flavor] ?? 0) + (performance.now() - t);
    }
    for (let j = 0; j < part.length && failed < maxFailures; j++) {
      const seed = part[j]!;
      ran++;
      const results = flavors.map((flavor) => ({ flavor, result: byFlavor.get(flavor)![j]! }));
      for (const { result } of results.slice(0, 1)) for (const [name, n] of Object.entries(result.excused)) excused[name] = (excused[name] ?? 0) + n;
      if (values.verbose) printVerbose(seed, results);
      const lines = verdict(results);
      if (lines.length === 0) continue;
      failed++;
      const shrunk = values['no-shrink'] ? { length: ops, lines } : await shrink(stores, seed, ops);
      console.log(`\nFAIL seed ${seed}: shortest failing prefix ${shrunk.length} of ${ops} operations`);
      for (const line of shrunk.lines.slice(0, 12)) console.log(`  ${line.replace(/\n/g, '\n  ')}`);
      console.log(`  reproduce: node --import tsx tests/sim/campaign.ts --from ${seed} --seeds 1 --ops ${shrunk.length}${without.map((w) => ` --without ${w}`).join('')} --verbose`);
    }
    process.stdout.write(`\r${Math.min(i + chunk, seeds.length)}/${seeds.length} seeds, ${failed} failing`);
  }
  console.log(`\n${ran} seeds of ${ops} operations on ${flavors.join(', ')} in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  console.log(`time per store: ${flavors.map((f) => `${f} ${((time[f] ?? 0) / 1000).toFixed(1)} s`).join(', ')}`);
  console.log(`held back or stepped around by exclusions (per store): ${JSON.stringify(excused)}${without.length > 0 ? `; turned off: ${without.join(', ')}` : ''}`);
  console.log(failed === 0 ? 'every seed passed' : `${failed} seeds failed`);
} finally {
  await stores.dispose();
}
process.exit(failed === 0 ? 0 : 1);
