/**
 * Job dependencies at scale, against one PostgreSQL: what a parent's end costs when it releases
 * many children, and what many parents finishing into one child cost.
 *
 *   fan-out: one parent and N children (default 10,000) depending on it, enqueued in lists of
 *     5,000 (the enqueueMany cap); a drain at concurrency 32 runs the parent, whose settle
 *     releases every child in its own statement, then the children.
 *   fan-in: 100 parents (the most a job may name) and one child of all of them; the drain runs
 *     the parents, each settle counting the child down under its row lock, then the child.
 *
 *   batch fan-in: a batch (outbox.batch) of N members (default 10,000) and its completion job,
 *     in one transaction; every member's settle counts the completion down (and adds its end)
 *     under the completion's row lock, and the last one's releases it.
 *
 * For each: the enqueue's round trips and time, the drain's time, the slowest settle statement
 * (pg_stat_statements: the one that released the children), and the drain without dependencies
 * on the same number of jobs as the comparison.
 *
 *   node --import tsx bench/dependencies.ts [--children 10000] [--no-write]
 */
import { createOutbox, defineJob, ok, runDrain, type EnqueueResult } from 'postbox';
import { createPgConnector } from 'postbox/pg';
import { migrate } from 'postbox/sql';
import { startPostgres, withClient } from '../tests/support/postgres.ts';
import { arg, machineLine, queriesOn, writeResults } from './common.ts';

const CHILDREN = Number(arg('children') ?? 10_000);
const WRITE = !process.argv.includes('--no-write');
const anyPayload = { '~standard': { version: 1 as const, vendor: 'bench', validate: (value: unknown) => ({ value }) } };
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const job = defineJob({ kind: 'bench.step', payload: anyPayload, timeoutMs: 60_000, handle: async () => (await sleep(2), ok()) });
const idOf = (r: EnqueueResult | undefined) => (r as { id: string }).id;

const server = await startPostgres({ settings: { shared_preload_libraries: 'pg_stat_statements' } });
const lines: string[] = [];
try {
  type Batch = (members: object[]) => Promise<{ id: string; members: number }>;
  const measure = async (name: string, build: (enqueue: (items: object[]) => Promise<EnqueueResult[]>, batch: Batch) => Promise<number>) => {
    const db = `deps_${name.replace(/\W/g, '_')}`;
    const url = await server.createDatabase(db);
    await withClient(url, async (c) => {
      await migrate(c);
      await c.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
    });
    const outbox = createOutbox({ jobs: [job], connect: createPgConnector(url), concurrency: 32 });
    const t0 = performance.now();
    const q0 = queriesOn(db);
    const jobs = await withClient(url, (c) =>
      build(
        (items) => outbox.enqueueMany(c, job, items as never),
        // One transaction: the members in lists of 5,000, then the completion.
        async (members) => {
          await c.query('BEGIN');
          const made = await outbox.batch(c, { onComplete: { job, payload: { role: 'batch done' } } }, async (m) => {
            for (let i = 0; i < members.length; i += 5_000) await m.enqueueMany(job, members.slice(i, i + 5_000) as never);
          });
          await c.query('COMMIT');
          return made;
        },
      ));
    const enqueueMs = performance.now() - t0;
    const enqueueTrips = queriesOn(db) - q0;
    await withClient(url, (c) => c.query('SELECT pg_stat_statements_reset()'));
    const t1 = performance.now();
    let done = 0;
    while (done < jobs) {
      const r = await runDrain(outbox);
      done += r.succeeded;
      if (r.claimed === 0) await sleep(5);
    }
    const drainMs = performance.now() - t1;
    const slowest = await withClient(url, async (c) => (await c.query(
      `SELECT round(max_exec_time::numeric, 1) AS ms FROM pg_stat_statements
        WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND query ILIKE '%settled%'
        ORDER BY max_exec_time DESC LIMIT 1`)).rows[0]?.ms);
    const left = await withClient(url, async (c) => Number((await c.query(`SELECT count(*) FROM outbox.job WHERE status <> 'succeeded'`)).rows[0].count));
    process.stderr.write(`${name}: ${jobs} jobs, enqueue ${enqueueMs.toFixed(0)} ms in ${enqueueTrips} round trips, drain ${drainMs.toFixed(0)} ms, slowest settle ${slowest} ms, left ${left}\n`);
    lines.push(`| ${name} | ${jobs.toLocaleString('en')} | ${enqueueTrips} | ${enqueueMs.toFixed(0)} ms | ${drainMs.toFixed(0)} ms (${(jobs / (drainMs / 1000)).toFixed(0)} jobs/s) | ${slowest} ms | ${left} |`);
  };

  await measure('fan-out', async (enqueue) => {
    const [parent] = await enqueue([{ payload: { role: 'parent' } }]);
    for (let i = 0; i < CHILDREN; i += 5_000) {
      await enqueue(Array.from({ length: Math.min(5_000, CHILDREN - i) }, (_, k) => ({ payload: { child: i + k }, dependsOn: [idOf(parent)] })));
    }
    return CHILDREN + 1;
  });
  await measure('no dependencies, same jobs', async (enqueue) => {
    for (let i = 0; i < CHILDREN + 1; i += 5_000) await enqueue(Array.from({ length: Math.min(5_000, CHILDREN + 1 - i) }, (_, k) => ({ payload: { i: i + k } })));
    return CHILDREN + 1;
  });
  await measure('fan-in', async (enqueue) => {
    const parents = (await enqueue(Array.from({ length: 100 }, (_, k) => ({ payload: { parent: k } })))).map(idOf);
    await enqueue([{ payload: { role: 'child' }, dependsOn: parents }]);
    return 101;
  });

  await measure('batch fan-in', async (_enqueue, batch) => {
    const made = await batch(Array.from({ length: CHILDREN }, (_, k) => ({ payload: { member: k } })));
    if (made.members !== CHILDREN) throw new Error(`batch of ${made.members} members, ${CHILDREN} enqueued`);
    return CHILDREN + 1;
  });

  const report = [
    "# Job dependencies: fan-out and fan-in, and a batch's fan-in",
    '',
    machineLine(),
    `- PostgreSQL (embedded), one outbox, \`createOutbox({ concurrency: 32 })\` draining in one process, handlers of 2 ms`,
    '- command: `node --import tsx bench/dependencies.ts`',
    '',
    `Fan-out: one parent and ${CHILDREN.toLocaleString('en')} children that depend on it, enqueued in lists of 5,000 (the parent's state read once per list, the children written in the list's one INSERT, their edges in one more). The parent's settle releases every child in its own statement; the drain that ran the parent claims on for them. Fan-in: 100 parents (the most a job may name) and one child of all of them: each parent's settle counts the child down under its row lock. Batch fan-in: a batch of ${CHILDREN.toLocaleString('en')} members and its completion job in one transaction (\`outbox.batch\`; members in lists of 5,000); every member's settle counts the completion down under its row lock, the 32 handlers' settles in turn. The slowest settle is the longest execution of a statement that settles (pg_stat_statements' max): in the fan-out, the one that released the children.`,
    '',
    '| run | jobs | enqueue round trips | enqueue | drain | slowest settle | not succeeded after |',
    '|---|---|---|---|---|---|---|',
    ...lines,
    '',
  ].join('\n');
  process.stdout.write(`${report}\n`);
  if (WRITE) await writeResults('dependencies', 0, report);
} finally {
  await server.stop();
}
