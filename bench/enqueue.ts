/**
 * Bulk enqueue benchmark: N jobs (default 5000) in ONE transaction, Postbox against its peers,
 * side by side in one run on one server.
 *
 *   node --import tsx bench/enqueue.ts [--jobs 5000] [--reps 5] [--pg embedded|debian15]
 *                                      [--only postbox,graphile-worker,pg-boss] [--rtt-ms 0] [--no-write]
 *
 * Env equivalents: BENCH_JOBS, BENCH_REPS, POSTBOX_PG, BENCH_ONLY, BENCH_RTT_MS.
 *
 * Each system gets a fresh database. A repetition is one transaction on one connection: BEGIN,
 * the system's bulk call(s) for N jobs, COMMIT; all of it is timed. Repetitions rotate the order
 * of the systems, so a busy moment of a shared machine does not land on one system only. The
 * table gives the median and best jobs/s over the repetitions, and the round trips (pg queries,
 * counted as in throughput.ts) of the enqueue call(s) alone, without BEGIN and COMMIT. With
 * --rtt-ms every connection goes through bench/latency-proxy.ts. See bench/README.md.
 */
import os from 'node:os';
import pg from 'pg';
import { z } from 'zod';
import { createOutbox, defineJob, ok } from 'postbox';
import { createPgConnector } from 'postbox/pg';
import { migrate } from 'postbox/sql';
import { Logger, makeWorkerUtils, runMigrations } from 'graphile-worker';
import PgBoss from 'pg-boss';
import { startPostgres, withClient, type PgFlavor } from '../tests/support/postgres.ts';
import { arg, flag, pkgVersion, queriesOn, writeResults } from './common.ts';
import { startLatencyProxy, type LatencyProxy } from './latency-proxy.ts';

const JOBS = Number(arg('jobs') ?? process.env.BENCH_JOBS ?? 5000);
const REPS = Number(arg('reps') ?? process.env.BENCH_REPS ?? 5);
const FLAVOR = (arg('pg') ?? process.env.POSTBOX_PG ?? 'embedded') as PgFlavor;
const ONLY = (arg('only') ?? process.env.BENCH_ONLY ?? '').split(',').filter(Boolean);
const RTT_MS = Number(arg('rtt-ms') ?? process.env.BENCH_RTT_MS ?? 0);
const WRITE = !flag('no-write');
if (!Number.isInteger(JOBS) || JOBS < 1 || JOBS > 5000) throw new Error('--jobs must be an integer in 1..5000 (enqueueMany takes at most 5000)');
if (!Number.isInteger(REPS) || REPS < 1) throw new Error('--reps must be a positive integer');

/** The same small payload for every system: `{ i, to }`. */
const payloadOf = (i: number) => ({ i, to: `user${i}@example.com` });

/** One system: opens its connection, then runs transactions of `jobs` jobs starting at `from`. */
interface System {
  name: string;
  note: string;
  open(url: string): Promise<{ transaction(from: number, jobs: number, enqueue: () => void): Promise<void>; close(): Promise<void>; count(): Promise<number> }>;
}

/** A Standard Schema that accepts anything: the peers do not validate payloads either. */
const anyPayload = { '~standard': { version: 1 as const, vendor: 'bench', validate: (value: unknown) => ({ value }) } };

function postbox(name: string, note: string, mode: 'many' | 'loop', opts: { zod?: boolean; dedupe?: boolean } = {}): System {
  return {
    name,
    note,
    async open(url) {
      const job = defineJob({
        kind: 'bench.enqueue',
        payload: opts.zod ? z.object({ i: z.number().int(), to: z.string().email() }) : anyPayload,
        timeoutMs: 60_000,
        handle: async () => ok(),
      });
      // enqueue never connects: it runs on the caller's client.
      const outbox = createOutbox({ jobs: [job], connect: createPgConnector(url) });
      const client = new pg.Client({ connectionString: url });
      await client.connect();
      await migrate(client);
      return {
        async transaction(from, jobs, enqueued) {
          const items = Array.from({ length: jobs }, (_, k) => ({
            payload: payloadOf(from + k),
            ...(opts.dedupe ? { dedupeKey: `bench:${from + k}` } : {}),
          }));
          await client.query('BEGIN');
          enqueued();
          if (mode === 'many') await outbox.enqueueMany(client, job, items);
          else for (const item of items) await outbox.enqueue(client, job, item);
          enqueued();
          await client.query('COMMIT');
        },
        close: () => client.end(),
        count: async () => (await client.query('SELECT count(*)::int AS n FROM outbox.job')).rows[0].n,
      };
    },
  };
}

const quietLogger = new Logger(() => () => undefined);

const graphileWorker: System = {
  name: 'graphile-worker addJobs',
  note: 'WorkerUtils.addJobs(specs): one add_jobs() call',
  async open(url) {
    // One client only, so BEGIN, addJobs and COMMIT share its session: one transaction.
    const pool = new pg.Pool({ connectionString: url, max: 1 });
    pool.on('error', () => undefined);
    await runMigrations({ pgPool: pool, logger: quietLogger });
    const utils = await makeWorkerUtils({ pgPool: pool, logger: quietLogger });
    return {
      async transaction(from, jobs, enqueued) {
        const specs = Array.from({ length: jobs }, (_, k) => ({ identifier: 'bench', payload: payloadOf(from + k) }));
        await pool.query('BEGIN');
        enqueued();
        await utils.addJobs(specs);
        enqueued();
        await pool.query('COMMIT');
      },
      async close() {
        await utils.release();
        await pool.end();
      },
      count: async () => (await pool.query('SELECT count(*)::int AS n FROM graphile_worker.jobs')).rows[0].n,
    };
  },
};

const pgBoss: System = {
  name: 'pg-boss insert',
  note: 'insert(jobs, { db }) on the transaction\'s client: one INSERT … json_to_recordset',
  async open(url) {
    const boss = new PgBoss({ connectionString: url, max: 1, supervise: false, schedule: false, migrate: true });
    boss.on('error', () => undefined);
    await boss.start();
    await boss.createQueue('bench');
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    const db = { executeSql: (text: string, values: unknown[]) => client.query(text, values as unknown[]) };
    return {
      async transaction(from, jobs, enqueued) {
        const items = Array.from({ length: jobs }, (_, k) => ({ name: 'bench', data: payloadOf(from + k) }));
        await client.query('BEGIN');
        enqueued();
        await boss.insert(items, { db });
        enqueued();
        await client.query('COMMIT');
      },
      async close() {
        await client.end();
        await boss.stop({ graceful: false, wait: true, close: true } as any);
      },
      count: async () => (await client.query(`SELECT count(*)::int AS n FROM pgboss.job WHERE name = 'bench'`)).rows[0].n,
    };
  },
};

const systems: System[] = [
  postbox('postbox enqueueMany', 'outbox.enqueueMany(client, job, items): one statement', 'many'),
  postbox('postbox enqueueMany, zod + dedupe keys', 'the same with a zod schema (validated per item) and a dedupe key per item', 'many', { zod: true, dedupe: true }),
  postbox('postbox enqueue loop', 'outbox.enqueue(client, job, item) for each item: one statement each', 'loop'),
  graphileWorker,
  pgBoss,
].filter((s) => ONLY.length === 0 || ONLY.some((o) => s.name.startsWith(o)));

interface Result {
  system: System;
  jobsPerS: number[];
  enqueueRoundTrips: number[];
  error?: string;
}

async function main(): Promise<void> {
  const server = await startPostgres({ flavor: FLAVOR });
  let proxy: LatencyProxy | undefined;
  const results: Result[] = systems.map((system) => ({ system, jobsPerS: [], enqueueRoundTrips: [] }));
  try {
    if (RTT_MS > 0) proxy = await startLatencyProxy({ targetPort: server.port, rttMs: RTT_MS });
    const open = await Promise.all(
      systems.map(async (s, i) => {
        const dbName = `enqueue_${i + 1}`;
        const url = await server.createDatabase(dbName);
        return { dbName, run: await s.open(proxy ? proxy.url(url) : url) };
      }),
    );
    for (let rep = 0; rep < REPS; rep++) {
      // Rotate the order each repetition.
      for (let k = 0; k < systems.length; k++) {
        const i = (k + rep) % systems.length;
        const r = results[i]!;
        if (r.error) continue;
        const { dbName, run } = open[i]!;
        let marks: number[] = [];
        try {
          const t0 = performance.now();
          await run.transaction(rep * JOBS, JOBS, () => marks.push(queriesOn(dbName)));
          const ms = performance.now() - t0;
          r.jobsPerS.push(JOBS / (ms / 1000));
          r.enqueueRoundTrips.push(marks[1]! - marks[0]!);
          process.stderr.write(`rep ${rep + 1} ${r.system.name.padEnd(40)} ${ms.toFixed(1)} ms, ${(JOBS / (ms / 1000)).toFixed(0)} jobs/s\n`);
        } catch (error) {
          r.error = error instanceof Error ? error.message.split('\n')[0] : String(error);
          process.stderr.write(`rep ${rep + 1} ${r.system.name} FAILED: ${r.error}\n`);
        }
      }
    }
    for (const [i, r] of results.entries()) {
      const n = await open[i]!.run.count();
      if (!r.error && n !== JOBS * REPS) r.error = `expected ${JOBS * REPS} jobs, found ${n}`;
      await open[i]!.run.close().catch(() => undefined);
    }
  } finally {
    await proxy?.close();
    await server.stop();
  }
  const report = render(results, server.serverVersion);
  process.stdout.write(report);
  if (WRITE) await writeResults('enqueue', RTT_MS, report);
  if (results.some((r) => r.error)) process.exitCode = 1;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

function render(results: Result[], pgVersion: string): string {
  const cpus = os.cpus();
  const base = results.find((r) => r.system.name === 'postbox enqueueMany' && !r.error);
  const lines = [
    `# Postbox bulk enqueue — ${new Date().toISOString()}`,
    '',
    `- machine: ${cpus.length} × ${cpus[0]?.model ?? 'unknown CPU'}, ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB, load average ${os.loadavg().map((l) => l.toFixed(1)).join(' ')} at the end`,
    `- PostgreSQL ${pgVersion} (${FLAVOR}, local TCP, fsync=off), Node ${process.version}; peers: graphile-worker ${pkgVersion('graphile-worker')}, pg-boss ${pkgVersion('pg-boss')}`,
    RTT_MS > 0 ? `- added round-trip time: **${RTT_MS} ms** on every connection (bench/latency-proxy.ts)` : '- added round-trip time: none (direct loopback TCP)',
    `- ${JOBS} jobs in one transaction (BEGIN, the bulk call, COMMIT: all timed), ${REPS} repetitions per system in rotating order; payload \`{ i, to }\``,
    '- round trips = pg queries of the enqueue call(s) alone, per transaction (BEGIN and COMMIT add 2); ratio = median jobs/s ÷ Postbox enqueueMany\'s',
    '',
    '| system | median jobs/s | best jobs/s | round trips per call | ratio |',
    '|---|---:|---:|---:|---:|',
  ];
  for (const r of results) {
    const name = `${r.system.name} — ${r.system.note}${r.error ? ` (failed: ${r.error})` : ''}`;
    const med = median(r.jobsPerS);
    const rt = median(r.enqueueRoundTrips);
    lines.push(`| ${name} | ${Number.isFinite(med) ? med.toFixed(0) : '—'} | ${r.jobsPerS.length ? Math.max(...r.jobsPerS).toFixed(0) : '—'} | ${Number.isFinite(rt) ? rt : '—'} | ${base && Number.isFinite(med) ? `${(med / median(base.jobsPerS)).toFixed(2)}×` : '—'} |`);
  }
  lines.push('');
  return lines.join('\n');
}

await main();
