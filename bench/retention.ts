// Retention against a local PostgreSQL, two ways:
//   (a) one batch: the sweep's DELETE of 1,000 finished jobs and their attempts, timed alone
//       (--batch-rows N finished jobs, default 20,000, deleted 1,000 at a time);
//   (b) as a rate: a backlog of --rows N finished jobs (default 1,000,000, each with one
//       attempt) cleared by the real sweep (`runSweep`, retention as the core plans it: batches
//       of 1,000 while they come back full, 60 s a sweep), every DELETE timed; from that, how
//       many finished jobs a second the default */5 cron keeps up with. With --drain, a
//       consumer runs fresh jobs meanwhile and its claims are timed before and during retention.
// Run: nice node --import tsx bench/retention.ts [--rows N] [--batch-rows N] [--drain] [--no-write]
import os from 'node:os';
import pg from 'pg';
import { z } from 'zod';
import { createOutbox, defineJob, ok, runConsumer, runSweep } from 'postbox';
import { createPgConnector } from 'postbox/pg';
import { migrate } from 'postbox/sql';
import { outboxSql } from '../js-shim/src/stores/pg/sql/index.ts';
import { startPostgres } from '../tests/support/postgres.ts';
import { arg, flag, timeQueries, writeResults, type QuerySpan } from './common.ts';

const ROWS = Number(arg('rows') ?? 1_000_000);
const BATCH_ROWS = Number(arg('batch-rows') ?? 20_000);
const DRAIN = flag('drain');
const CRON_PERIOD_S = 300; // the default */5
const BUDGET_S = 60; // the core's default retention budget a sweep (README "Retention")
const log = (line: string) => process.stderr.write(`${line}\n`);

const server = await startPostgres();

/**
 * The one place that writes the backlog: `n` jobs that succeeded 8 to 9 days ago (past the
 * default 7-day retention), each with one `ok` attempt, in chunks of 100,000 rows. The attempt's
 * columns are the ones its table has (a column such as lease_expires_at only while it exists).
 */
async function insertFinished(client: pg.Client, n: number): Promise<void> {
  const { rows } = await client.query(`SELECT column_name FROM information_schema.columns WHERE table_schema = 'outbox' AND table_name = 'attempt'`);
  const has = new Set(rows.map((r) => r.column_name as string));
  const optional = ['lease_expires_at'].filter((c) => has.has(c));
  const cols = ['job_id', 'seq', 'kind', 'started_at', 'finished_at', 'outcome', ...optional].join(', ');
  const values = ['id', '1', `'bench.retention'`, 'finished_at', 'finished_at', `'ok'`, ...optional.map(() => 'finished_at')].join(', ');
  for (let done = 0; done < n; done += 100_000) {
    await client.query(
      `WITH j AS (
         INSERT INTO outbox.job (id, kind, status, payload, due_at, created_at, updated_at, finished_at, attempts, attempt_seq)
         SELECT gen_random_uuid(), 'bench.retention', 'succeeded', '{"a":1}'::jsonb, t, t, t, t, 1, 1
           FROM generate_series(1, $1::int) AS g, LATERAL (SELECT now() - interval '8 days' - (g % 86400) * interval '1 second' AS t) at
         RETURNING id, finished_at)
       INSERT INTO outbox.attempt (${cols}) SELECT ${values} FROM j`,
      [Math.min(100_000, n - done)],
    );
  }
  await client.query('VACUUM ANALYZE outbox.job');
  await client.query('VACUUM ANALYZE outbox.attempt');
}

async function freshDatabase(name: string): Promise<{ url: string; client: pg.Client }> {
  const url = await server.createDatabase(name);
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  await migrate(client);
  return { url, client };
}

const stats = (spans: readonly QuerySpan[]) => {
  const ms = spans.map((s) => s.ms).sort((x, y) => x - y);
  const at = (q: number) => ms[Math.min(ms.length - 1, Math.floor(q * ms.length))] ?? NaN;
  return { n: ms.length, median: at(0.5), p99: at(0.99), max: ms.at(-1) ?? NaN, total: ms.reduce((x, y) => x + y, 0) };
};
const f1 = (x: number) => x.toFixed(1);
const int = (x: number) => Math.round(x).toLocaleString('en-US');

// (a) One batch at a time, the statement alone.
const a = await freshDatabase('retention_batch');
await insertFinished(a.client, BATCH_ROWS);
const cutoff = Date.now() - 7 * 86_400_000;
const batchTimes: QuerySpan[] = [];
for (let i = 0; i < BATCH_ROWS / 1000; i++) {
  const start = performance.now();
  const { rowCount } = await a.client.query(outboxSql().deleteFinished, [cutoff, cutoff, 1000]);
  batchTimes.push({ start, ms: performance.now() - start });
  if (rowCount !== 1000) throw new Error(`deleted ${rowCount}`);
}
await a.client.end();
const batch = stats(batchTimes);
log(`(a) ${batch.n} batches of 1,000 jobs (+1,000 attempts): median ${f1(batch.median)} ms, max ${f1(batch.max)}`);

// (b) The backlog, cleared by the sweep.
const b = await freshDatabase('retention_rate');
const insertStarted = performance.now();
await insertFinished(b.client, ROWS);
log(`(b) ${int(ROWS)} finished jobs + attempts written in ${f1((performance.now() - insertStarted) / 1000)} s`);

const bench = defineJob({ kind: 'bench.retention', payload: z.object({}), timeoutMs: 5_000, handle: async () => ok() });
const sweeper = createOutbox({ jobs: [bench], connect: createPgConnector(b.url) });
// --drain: fresh jobs of a kind only the consumer registers (the sweep's own drain leaves them).
const fresh = defineJob({ kind: 'bench.fresh', payload: z.object({ n: z.number() }), timeoutMs: 5_000, handle: async () => ok() });
const consumer = createOutbox({ jobs: [fresh], connect: createPgConnector(b.url), concurrency: 8 });
const claims = timeQueries((sql) => sql.includes('FROM claimed') && sql.includes('outbox.job'));
const stop = new AbortController();
let producing: Promise<void> = Promise.resolve();
let drained: Promise<unknown> = Promise.resolve();
if (DRAIN) {
  // 200 jobs a second in batches of 20, drained as they come.
  const producer = new pg.Client({ connectionString: b.url });
  await producer.connect();
  producing = (async () => {
    for (let n = 0; !stop.signal.aborted; n++) {
      await consumer.transaction(producer, (_tx, _enqueue, enqueueMany) => enqueueMany(fresh, Array.from({ length: 20 }, (_, i) => ({ payload: { n: n * 20 + i } }))));
      await new Promise((r) => setTimeout(r, 100));
    }
    await producer.end();
  })();
  drained = runConsumer(consumer, { signal: stop.signal, idleMs: 20 });
  await new Promise((r) => setTimeout(r, 5_000)); // a baseline of claims without retention
}

const deletes = timeQueries((sql) => sql.includes('USING doomed'));
const sweeps: { deleted: number; ms: number; retentionMs: number }[] = [];
const sweepsStarted = performance.now();
while (sweeps.length < 50) {
  const first = deletes.length;
  const started = performance.now();
  const report = await runSweep(sweeper);
  if (report.failedSteps.length > 0) throw new Error(`sweep steps failed: ${report.failedSteps.join(', ')}`);
  const mine = deletes.slice(first);
  const retentionMs = mine.length === 0 ? 0 : mine.at(-1)!.start + mine.at(-1)!.ms - mine[0]!.start;
  sweeps.push({ deleted: report.deleted, ms: performance.now() - started, retentionMs });
  log(`    sweep ${sweeps.length}: ${int(report.deleted)} jobs in ${mine.length} batches, retention ${f1(retentionMs / 1000)} s`);
  const left = Number((await b.client.query(`SELECT count(*) AS n FROM outbox.job WHERE kind = 'bench.retention'`)).rows[0].n);
  if (left === 0 || report.deleted === 0) break;
}
const totalMs = performance.now() - sweepsStarted;
const retentionStart = deletes[0]?.start ?? 0;
const retentionEnd = deletes.length ? deletes.at(-1)!.start + deletes.at(-1)!.ms : 0;
stop.abort();
await producing;
await drained;
const attemptsLeft = Number((await b.client.query(`SELECT count(*) AS n FROM outbox.attempt WHERE kind = 'bench.retention'`)).rows[0].n);
await b.client.end();
await server.stop();

const deleted = sweeps.reduce((n, s) => n + s.deleted, 0);
if (deleted !== ROWS || attemptsLeft !== 0) throw new Error(`deleted ${deleted} of ${ROWS} jobs; ${attemptsLeft} attempts left`);
const retentionMs = sweeps.reduce((n, s) => n + s.retentionMs, 0);
const d = stats(deletes);
const jobsPerSec = ROWS / (retentionMs / 1000);
const perSweep = jobsPerSec * BUDGET_S;
const sustained = perSweep / CRON_PERIOD_S;

const lines = [
  `# Postbox retention — ${new Date().toISOString()}`,
  '',
  `- PostgreSQL ${server.serverVersion} (${server.flavor}), Node ${process.version}, ${os.cpus().length} CPUs (shared), \`nice\``,
  `- Command: \`nice node --import tsx bench/retention.ts --rows ${ROWS}${DRAIN ? ' --drain' : ''}\``,
  '',
  '## (a) One batch',
  '',
  `${batch.n} batches of 1,000 finished jobs (+1,000 attempts) from ${int(BATCH_ROWS)}, the DELETE alone: median ${f1(batch.median)} ms, max ${f1(batch.max)} ms.`,
  '',
  '## (b) A backlog cleared by the sweep',
  '',
  `${int(ROWS)} finished jobs (each with one attempt: ${int(2 * ROWS)} rows) past retention, cleared by \`runSweep\` with the default retention (batches of 1,000, ${BUDGET_S} s a sweep).`,
  '',
  '| | |',
  '|---|---:|',
  `| sweeps | ${sweeps.length} (${sweeps.map((s) => int(s.deleted)).join(' + ')} jobs) |`,
  `| total time (sweeps, end to end) | ${f1(totalMs / 1000)} s |`,
  `| retention time (first DELETE to last, per sweep, summed) | ${f1(retentionMs / 1000)} s |`,
  `| rate | ${int(jobsPerSec)} jobs/s (${int(2 * jobsPerSec)} rows/s) |`,
  `| batches (DELETE statements) | ${d.n} |`,
  `| one DELETE: median / p99 / longest | ${f1(d.median)} / ${f1(d.p99)} / ${f1(d.max)} ms |`,
  `| one DELETE: median of the first / last tenth of batches | ${f1(stats(deletes.slice(0, Math.ceil(d.n / 10))).median)} / ${f1(stats(deletes.slice(-Math.ceil(d.n / 10))).median)} ms |`,
  `| one sweep's ${BUDGET_S} s budget clears | ${int(perSweep)} jobs |`,
  `| sustained at \`*/5\` (that ÷ ${CRON_PERIOD_S} s) | **${int(sustained)} finished jobs/s** (target ≥ 2,000) |`,
  '',
  `The longest DELETE holds its row locks ${f1(d.max)} ms (target ≤ 1 s); a lock is held only by the statement that takes it.`,
];
if (DRAIN) {
  const before = stats(claims.filter((c) => c.start < sweepsStarted));
  const inside = stats(claims.filter((c) => c.start >= retentionStart && c.start <= retentionEnd));
  lines.push(
    '',
    '## Claims while retention runs (`--drain`)',
    '',
    'A consumer (concurrency 8) drains fresh jobs enqueued at 200 a second, from 5 s before the sweep until it ends.',
    '',
    '| claim statement | count | median | p99 | longest |',
    '|---|---:|---:|---:|---:|',
    `| before retention | ${before.n} | ${f1(before.median)} ms | ${f1(before.p99)} ms | ${f1(before.max)} ms |`,
    `| during retention | ${inside.n} | ${f1(inside.median)} ms | ${f1(inside.p99)} ms | ${f1(inside.max)} ms |`,
  );
}
const report = `${lines.join('\n')}\n`;
process.stdout.write(report);
if (!flag('no-write')) await writeResults('retention', 0, report);
