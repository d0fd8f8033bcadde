// createSqliteOutbox inside workerd (Miniflare's D1, and a SQLite-backed Durable Object): one
// drain of N jobs (enqueued untimed, in chunks of 500), timed from outside the Worker, for a
// handler that returns at once and one that waits 10 ms. With `--against DIR`, the same Worker
// bundled from another checkout (its own js-shim, say the commit before a change) runs beside
// this one, the repetitions interleaved, so both columns share the machine's moments.
//
//   node --import tsx bench/sqlite.ts [--jobs 2000] [--reps 3] [--concurrency 8] [--against /tmp/before] [--no-write]
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startWorker, type TestWorker } from '../tests/support/worker.ts';
import { arg, flag, machineLine, writeResults } from './common.ts';

const here = path.dirname(fileURLToPath(import.meta.url));
const JOBS = Number(arg('jobs') ?? 2000);
const REPS = Number(arg('reps') ?? 3);
const CONCURRENCY = Number(arg('concurrency') ?? 8);
const AGAINST = arg('against');
const FLAVORS = ['durable-object', 'd1'] as const;
const HANDLER_MS = [0, 10];

const start = (root: string) =>
  startWorker({
    entry: path.join(root, 'bench', 'sqlite-worker.ts'),
    d1Databases: ['DB'],
    durableObjects: { BENCH_OBJECT: { className: 'BenchObject', useSQLite: true } },
  });

let runs = 0;
/** Seeds a fresh run and times its drain (ms); refuses a drain that did not run every job. */
async function drainOnce(worker: TestWorker, flavor: string, ms: number): Promise<number> {
  const run = `r${process.pid}_${++runs}`;
  const q = `run=${run}&jobs=${JOBS}&ms=${ms}&concurrency=${CONCURRENCY}`;
  const seeded = await worker.fetch(`/${flavor}/seed?${q}`);
  if (!seeded.ok) throw new Error(`seed ${flavor}: ${await seeded.text()}`);
  const t0 = performance.now();
  const res = await worker.fetch(`/${flavor}/drain?${q}`);
  const elapsed = performance.now() - t0;
  const body = (await res.json()) as { succeeded?: number };
  if (body.succeeded !== JOBS) throw new Error(`drain ${flavor}: ${JSON.stringify(body)}`);
  return elapsed;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const systems: { name: string; worker: TestWorker }[] = [{ name: 'this tree', worker: await start(path.join(here, '..')) }];
if (AGAINST) systems.push({ name: path.basename(AGAINST), worker: await start(path.resolve(AGAINST)) });
const rows: string[] = [];
try {
  for (const flavor of FLAVORS) {
    for (const ms of HANDLER_MS) {
      const times = systems.map(() => [] as number[]);
      // One warm-up each (bundling, migration, the core's first compile), then interleaved reps.
      for (const s of systems) await drainOnce(s.worker, flavor, ms);
      for (let r = 0; r < REPS; r++) for (const [i, s] of systems.entries()) times[i]!.push(await drainOnce(s.worker, flavor, ms));
      const cells = systems.map((s, i) => {
        const m = median(times[i]!);
        return `${Math.round(m)} ms, ${Math.round((JOBS / m) * 1000)} jobs/s`;
      });
      const ratio = systems.length > 1 ? ` | ${(median(times[1]!) / median(times[0]!)).toFixed(2)}×` : '';
      const line = `| ${flavor} | ${ms} ms | ${cells.join(' | ')}${ratio} |`;
      rows.push(line);
      process.stderr.write(`${line}\n`);
    }
  }
} finally {
  for (const s of systems) await s.worker.dispose();
}

const header = systems.length > 1 ? `| store | handler | ${systems.map((s) => s.name).join(' | ')} | ${systems[1]!.name} ÷ this tree |\n|---|---|${systems.map(() => '---|').join('')}---|` : '| store | handler | this tree |\n|---|---|---|';
const report = `# SQLite stores: one drain of ${JOBS} jobs inside workerd

- \`node --import tsx bench/sqlite.ts --jobs ${JOBS} --reps ${REPS} --concurrency ${CONCURRENCY}${AGAINST ? ` --against ${AGAINST}` : ''}\`
${machineLine()}
- each cell: the median of ${REPS} drains (after one warm-up), timed from outside the Worker; concurrency ${CONCURRENCY}

${header}
${rows.join('\n')}
`;
if (!flag('no-write')) await writeResults('sqlite', 0, report);
process.stdout.write(report);
