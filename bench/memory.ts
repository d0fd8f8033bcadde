/**
 * Memory across a long drain: 100,000 jobs (by default) drained by one Postbox drain on one
 * connection, with the process's resident set sampled before, during and after. A drain that
 * keeps anything per job (reports, buffers, listeners) grows with the job count; this shows
 * whether it stays flat.
 *
 *   node --import tsx bench/memory.ts [--jobs 100000] [--concurrency 32] [--pg embedded|debian15] [--no-write]
 *
 * Jobs are inserted with one INSERT … SELECT (not timed, not through `enqueue`, whose cost is
 * not the question here); the handler sleeps 1 ms. Writes results/memory-<date>.md.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createOutbox, defineJob, ok, runDrain } from 'postbox';
import { createPgConnector } from 'postbox/pg';
import { migrate } from 'postbox/sql';
import { startPostgres, withClient, type PgFlavor } from '../tests/support/postgres.ts';

const arg = (name: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
};
const JOBS = Number(arg('jobs') ?? 100_000);
const CONCURRENCY = Number(arg('concurrency') ?? 32);
const FLAVOR = (arg('pg') ?? 'embedded') as PgFlavor;
const WRITE = !process.argv.includes('--no-write');

const mib = (bytes: number) => (bytes / 2 ** 20).toFixed(1);

const server = await startPostgres({ flavor: FLAVOR });
try {
  const url = await server.createDatabase('memory');
  const anyPayload = { '~standard': { version: 1 as const, vendor: 'bench', validate: (value: unknown) => ({ value }) } };
  const job = defineJob({
    kind: 'bench.memory',
    payload: anyPayload,
    timeoutMs: 60_000,
    async handle() {
      await new Promise((resolve) => setTimeout(resolve, 1));
      return ok();
    },
  });
  const outbox = createOutbox({ jobs: [job], connect: createPgConnector(url), concurrency: CONCURRENCY });
  await withClient(url, async (c) => {
    await migrate(c);
    await c.query(
      `INSERT INTO outbox.job (id, kind, lane, status, payload, due_at, created_at, updated_at)
       SELECT gen_random_uuid(), 'bench.memory', 'default', 'pending', jsonb_build_object('i', g), now(), now(), now()
         FROM generate_series(1, $1::int) g`,
      [JOBS],
    );
  });
  globalThis.gc?.();
  const before = process.memoryUsage();
  const samples: { atS: number; rss: number; heapUsed: number; succeeded: number }[] = [];
  const t0 = performance.now();
  let succeeded = 0;
  const timer = setInterval(() => {
    const m = process.memoryUsage();
    samples.push({ atS: (performance.now() - t0) / 1000, rss: m.rss, heapUsed: m.heapUsed, succeeded });
  }, 2_000);
  // One drain at a time, as a queue consumer would run, until a drain finds nothing due.
  const report = { claimed: 0, succeeded: 0 };
  for (;;) {
    const r = await runDrain(outbox);
    report.claimed += r.claimed;
    report.succeeded += r.succeeded;
    succeeded = report.succeeded;
    if (r.claimed === 0) break;
  }
  clearInterval(timer);
  const wallS = (performance.now() - t0) / 1000;
  globalThis.gc?.();
  const after = process.memoryUsage();
  if (report.succeeded !== JOBS) throw new Error(`drained ${report.succeeded} of ${JOBS}`);
  const peak = Math.max(before.rss, after.rss, ...samples.map((s) => s.rss));
  const lines = [
    `# Postbox memory across a drain — ${new Date().toISOString()}`,
    '',
    `- ${JOBS} jobs, concurrency ${CONCURRENCY}, one connection, 1 ms handler, PostgreSQL ${server.serverVersion} (${FLAVOR}), Node ${process.version}`,
    `- drained in ${wallS.toFixed(1)} s (${(JOBS / wallS).toFixed(0)} jobs/s)`,
    '',
    '| | resident set | heap used |',
    '|---|---:|---:|',
    `| before | ${mib(before.rss)} MiB | ${mib(before.heapUsed)} MiB |`,
    `| peak during | ${mib(peak)} MiB | ${mib(Math.max(...samples.map((s) => s.heapUsed), before.heapUsed))} MiB |`,
    `| after | ${mib(after.rss)} MiB | ${mib(after.heapUsed)} MiB |`,
    '',
    `Samples every 2 s (resident set, MiB): ${samples.map((s) => mib(s.rss)).join(', ')}`,
    '',
  ];
  process.stdout.write(lines.join('\n'));
  if (WRITE) {
    const dir = path.join(path.dirname(fileURLToPath(import.meta.url)), 'results');
    await mkdir(dir, { recursive: true });
    await writeFile(path.join(dir, `memory-${new Date().toISOString().slice(0, 10)}.md`), lines.join('\n'));
  }
} finally {
  await server.stop();
}
