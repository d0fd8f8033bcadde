/**
 * Priorities with aging under a steady backlog (README, flow control): jobs of priority 1 arrive
 * faster than the consumers drain them, so a backlog grows for the whole run. Early on, a few
 * jobs of priority 0 are enqueued (the lowest, behind everything that arrives for a minute),
 * and later a few of priority 10 (the highest).
 *
 *   - priority 10: their enqueue-to-start waits, against the priority-1 jobs' at the same time;
 *   - priority 0: their waits, and the aging rule checked on the attempt ledger: no job that
 *     fell due more than a minute per level of difference after a waiting job starts before it
 *     (a claim's rank is due time less a minute per level, migration 0010), so a low job waits
 *     for what was due before it plus a minute per level, never for the backlog as a whole.
 *
 * Two consumers in this process, each `runDrain` in a loop with concurrency 8, 20 ms handlers.
 *
 *   node --import tsx bench/priorities.ts [--rate 1000] [--seconds 100] [--no-write]
 */
import pg from 'pg';
import { createOutbox, defineJob, ok, runDrain } from 'postbox';
import { createPgConnector } from 'postbox/pg';
import { migrate } from 'postbox/sql';
import { startPostgres, withClient } from '../tests/support/postgres.ts';
import { arg, machineLine, writeResults } from './common.ts';
import { ATTEMPTS } from '../tests/support/ledger.ts';

const RATE = Number(arg('rate') ?? 1000);
const SECONDS = Number(arg('seconds') ?? 100);
const WRITE = !process.argv.includes('--no-write');
const CONSUMERS = 2;
const anyPayload = { '~standard': { version: 1 as const, vendor: 'bench', validate: (value: unknown) => ({ value }) } };
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const work = defineJob({ kind: 'bench.prio', payload: anyPayload, timeoutMs: 30_000, handle: async () => (await sleep(20), ok()) });

const quantile = (xs: number[], q: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))] ?? NaN;

async function main(): Promise<void> {
  const server = await startPostgres();
  try {
    const url = await server.createDatabase('priorities');
    await withClient(url, (c) => migrate(c));
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    const producer = createOutbox({ jobs: [work], connect: createPgConnector(url) });
    let stop = false;
    const consumers = Array.from({ length: CONSUMERS }, async () => {
      const outbox = createOutbox({ jobs: [work], connect: createPgConnector(url), concurrency: 8 });
      while (!stop) if ((await runDrain(outbox)).claimed === 0) await sleep(50);
    });
    // The steady load: priority 1, in lists every 100 ms; the few of 0 at 5 s, of 10 at half time.
    const t0 = Date.now();
    let sent = 0;
    let lowSent = false;
    let highSent = false;
    while (Date.now() - t0 < SECONDS * 1000) {
      const due = Math.floor(((Date.now() - t0) / 1000) * RATE) - sent;
      if (due > 0) {
        await producer.enqueueMany(client, work, Array.from({ length: due }, (_, i) => ({ payload: { n: sent + i, tag: 'p1' }, priority: 1 })));
        sent += due;
      }
      if (!lowSent && Date.now() - t0 >= 5_000) {
        await producer.enqueueMany(client, work, Array.from({ length: 20 }, (_, i) => ({ payload: { n: i, tag: 'p0' }, priority: 0 })));
        lowSent = true;
      }
      if (!highSent && Date.now() - t0 >= (SECONDS * 1000) / 2) {
        await producer.enqueueMany(client, work, Array.from({ length: 20 }, (_, i) => ({ payload: { n: i, tag: 'p10' }, priority: 10 })));
        highSent = true;
      }
      await sleep(100);
    }
    // Let the low jobs run if they have not yet (the load has stopped growing the backlog).
    const lowDone = async () => Number((await client.query(`SELECT count(*) FROM ${ATTEMPTS} a JOIN outbox.job j ON j.id = a.job_id WHERE j.payload ->> 'tag' = 'p0'`)).rows[0].count) >= 20;
    const waitUntil = Date.now() + 120_000;
    while (!(await lowDone()) && Date.now() < waitUntil) await sleep(500);
    stop = true;
    await Promise.all(consumers);

    const rows = (await client.query(
      `SELECT j.payload ->> 'tag' AS tag, j.priority,
              (extract(epoch FROM j.created_at) * 1000)::float8 AS created,
              (extract(epoch FROM j.due_at) * 1000 - j.boost_ms)::float8 AS rank,
              (extract(epoch FROM a.started_at) * 1000)::float8 AS started
         FROM outbox.job j JOIN ${ATTEMPTS} a ON a.job_id = j.id AND a.seq = 1`)).rows.map((r) => ({
      tag: String(r.tag), rank: Number(r.rank), created: Number(r.created), started: Number(r.started),
    }));
    const backlogAtEnd = Number((await client.query(`SELECT count(*) FROM outbox.job WHERE status IN ('pending', 'retrying')`)).rows[0].count);
    await client.end();
    const waits = (tag: string) => rows.filter((r) => r.tag === tag).map((r) => r.started - r.created);
    const low = rows.filter((r) => r.tag === 'p0');
    const high = rows.filter((r) => r.tag === 'p10');
    // Priority-1 jobs enqueued in the same second as the high ones: what they waited meanwhile.
    const highAt = high.length > 0 ? Math.min(...high.map((r) => r.created)) : NaN;
    const peers = rows.filter((r) => r.tag === 'p1' && Math.abs(r.created - highAt) < 1_000).map((r) => r.started - r.created);
    // The aging rule: jobs ranked after a low job that started before it (a claim is made at one
    // instant, so "before" means an earlier claim, by more than a statement's few ms).
    const overtaken = low.map((l) => rows.filter((r) => r.rank > l.rank && r.started < l.started - 50).length);
    const lowWaits = waits('p0');
    const ahead = low.map((l) => rows.filter((r) => r.tag === 'p1' && r.rank <= l.rank).length);
    const report = [
      '# Priorities with aging under a steady backlog',
      '',
      machineLine(),
      `- PostgreSQL ${server.serverVersion} (${server.flavor}); ${CONSUMERS} consumers in one process, each \`runDrain\` in a loop with \`concurrency: 8\`, 20 ms handlers`,
      `- load: ${RATE} jobs/s of priority 1 for ${SECONDS} s (more than the consumers drain: a backlog builds; ${backlogAtEnd.toLocaleString('en')} left pending once the priority-0 jobs had run), 20 of priority 0 at 5 s, 20 of priority 10 at ${SECONDS / 2} s`,
      `- command: \`node --import tsx bench/priorities.ts --rate ${RATE} --seconds ${SECONDS}\``,
      '',
      '| jobs | started | wait p50 | wait p99 / max |',
      '|---|---:|---:|---:|',
      `| priority 10, enqueued at ${SECONDS / 2} s | ${high.length} of 20 | ${quantile(waits('p10'), 0.5).toFixed(0)} ms | ${quantile(waits('p10'), 0.99).toFixed(0)} ms |`,
      `| priority 1, enqueued within 1 s of them | ${peers.length} | ${quantile(peers, 0.5).toFixed(0)} ms | ${quantile(peers, 0.99).toFixed(0)} ms |`,
      `| priority 0, enqueued at 5 s | ${low.length} of 20 | ${(quantile(lowWaits, 0.5) / 1000).toFixed(1)} s | ${(Math.max(...lowWaits) / 1000).toFixed(1)} s |`,
      '',
      `The priority-0 jobs rank a minute after their due time against priority 1 (one level): each waited for the ${Math.min(...ahead).toLocaleString('en')}–${Math.max(...ahead).toLocaleString('en')} priority-1 jobs that ranked before it (enqueued before it or up to a minute after), and ${Math.max(...overtaken)} jobs ranked after a priority-0 job started before it (target 0): the backlog that kept growing behind them did not hold them back.`,
      '',
    ].join('\n');
    process.stderr.write(`${report}\n`);
    if (WRITE) await writeResults('priorities', 0, report);
  } finally {
    await server.stop();
  }
}

await main();
