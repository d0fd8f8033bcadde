/**
 * Postbox inside workerd (Miniflare), through the local Hyperdrive binding and directly: how its
 * statements reach the wire, what one costs, and what a drain achieves.
 *
 *   node --import tsx bench/hyperdrive.ts [--jobs 2000] [--n 200] [--pg embedded|debian15] [--no-write]
 *
 * Env equivalents: BENCH_JOBS, BENCH_N, POSTBOX_PG.
 *
 * The Worker is bench/hyperdrive-worker.ts. `via`: `binding` = the Hyperdrive binding, i.e.
 * Miniflare's local proxy (what wrangler dev gives you) in front of PostgreSQL; `direct` = a
 * connection string workerd dials itself. `connector`: `createPgConnector` as shipped, or a bare
 * `pg.Client` (what createPgConnector did before it corked the Workers socket). Three parts:
 *
 * 1. writes: `n` × `SELECT $1::int` through tests/support/wire-proxy.ts (between the path and
 *    PostgreSQL), which counts the chunks each statement arrived in;
 * 2. latency: `SELECT 1` and `SELECT $1::int`, `n` sequential on one session, timed in the Worker;
 * 3. drain: `--jobs` jobs (2 ms handler) at concurrency 1, 8 and 32, enqueued from Node (not timed),
 *    drained in the Worker with `runDrain` (timed from Node around the request).
 *
 * Nothing is asserted about time. See bench/README.md.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createOutbox, defineJob, ok } from 'postbox';
import { migrate } from 'postbox/sql';
import { startPostgres, withClient, type PgFlavor, type PgServer } from '../tests/support/postgres.ts';
import { startWireProxy } from '../tests/support/wire-proxy.ts';
import { setProxyNoDelay, startWorker, type TestWorker } from '../tests/support/worker.ts';

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  if (i >= 0) return process.argv[i + 1];
  return process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
}
const JOBS = Number(arg('jobs') ?? process.env.BENCH_JOBS ?? 2000);
const N = Number(arg('n') ?? process.env.BENCH_N ?? 200);
const FLAVOR = (arg('pg') ?? process.env.POSTBOX_PG ?? 'embedded') as PgFlavor;
const WRITE = !process.argv.includes('--no-write');
const HANDLER_MS = 2;
if (!Number.isInteger(JOBS) || JOBS < 1 || !Number.isInteger(N) || N < 1) throw new Error('--jobs / --n must be positive integers');

const here = path.dirname(fileURLToPath(import.meta.url));
const entry = path.join(here, 'hyperdrive-worker.ts');
const VIAS = ['binding', 'direct'] as const;
const CONNECTORS = ['bare', 'postbox'] as const;
type Via = (typeof VIAS)[number];
type ConnectorKind = (typeof CONNECTORS)[number];
const connectorLabel = (c: ConnectorKind) => (c === 'postbox' ? 'createPgConnector' : 'bare pg.Client (before)');
const log = (s: string) => process.stderr.write(s);
/** The path as the tables name it: the binding with its proxy's Nagle off is a diagnosis, not wrangler dev. */
const pathLabel = (r: { via: Via; noDelay?: boolean }) => (r.noDelay ? 'binding, proxy with TCP_NODELAY' : r.via);
/** The variants of each (via, connector): the binding is also measured with its proxy's Nagle off, for createPgConnector. */
const variantsOf = (via: Via, connector: ConnectorKind): boolean[] => (via === 'binding' && connector === 'postbox' ? [false, true] : [false]);

/** Runs `fn` with the local Hyperdrive proxy's new sockets set to TCP_NODELAY when `on`. */
async function withNoDelay<T>(on: boolean, fn: () => Promise<T>): Promise<T> {
  setProxyNoDelay(on);
  try {
    return await fn();
  } finally {
    setProxyNoDelay(false);
  }
}

/** A Worker whose binding and DIRECT_URL both lead to `url`. */
const workerFor = (url: string) => startWorker({ entry, databaseUrl: url, vars: { DIRECT_URL: url } });

async function post<T>(worker: TestWorker, pathname: string, body: object): Promise<T> {
  const res = await worker.fetch(pathname, { method: 'POST', body: JSON.stringify(body) });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`${pathname} ${JSON.stringify(body)}: ${res.status} ${text.slice(0, 500)}`);
  return JSON.parse(text) as T;
}

const quantile = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
};
const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

interface WritesRow { via: Via; connector: ConnectorKind; statements: number; meanChunks: number; maxChunks: number; single: number }
interface LatencyRow { via: Via; connector: ConnectorKind; noDelay?: boolean; sql: string; median: number; mean: number; p90: number }
interface DrainRow { via: Via; connector: ConnectorKind; noDelay?: boolean; concurrency: number; wallS: number; jobsPerS: number; ratio?: number }

async function measureWrites(server: PgServer): Promise<WritesRow[]> {
  const url = await server.createDatabase('bench_writes');
  const proxy = await startWireProxy({ targetPort: server.port });
  const worker = await workerFor(proxy.url(url));
  const rows: WritesRow[] = [];
  try {
    for (const via of VIAS) {
      for (const connector of CONNECTORS) {
        proxy.reset();
        await post(worker, '/latency', { via, connector, sql: 'param', n: N });
        // The 20 warm-up statements count too: they are the same statement.
        const chunks = proxy.statements().filter((s) => s.types === 'PBDES').map((s) => s.chunks);
        rows.push({ via, connector, statements: chunks.length, meanChunks: mean(chunks), maxChunks: Math.max(...chunks), single: chunks.filter((c) => c === 1).length });
        log(`writes  ${via.padEnd(7)} ${connectorLabel(connector).padEnd(24)} ${mean(chunks).toFixed(2)} chunks/statement\n`);
      }
    }
  } finally {
    await worker.dispose();
    await proxy.close();
  }
  return rows;
}

async function measureLatency(server: PgServer): Promise<LatencyRow[]> {
  const url = await server.createDatabase('bench_latency');
  const worker = await workerFor(url);
  const rows: LatencyRow[] = [];
  try {
    const text = { plain: 'SELECT 1', param: 'SELECT $1::int', large: "SELECT repeat('x', 40000) (a 40 KB answer)" };
    for (const sql of ['plain', 'param', 'large'] as const) {
      for (const via of VIAS) {
        for (const connector of CONNECTORS) {
          for (const noDelay of variantsOf(via, connector)) {
            const { ms } = await withNoDelay(noDelay, () => post<{ ms: number[] }>(worker, '/latency', { via, connector, sql, n: N }));
            const row = { via, connector, noDelay, sql: text[sql], median: quantile(ms, 0.5), mean: mean(ms), p90: quantile(ms, 0.9) };
            rows.push(row);
            log(`latency ${pathLabel(row).padEnd(7)} ${connectorLabel(connector).padEnd(24)} ${row.sql.padEnd(15)} median ${row.median.toFixed(3)} ms, mean ${row.mean.toFixed(3)} ms\n`);
          }
        }
      }
    }
  } finally {
    await worker.dispose();
  }
  return rows;
}

/** Accepts any payload, as in the Worker. */
const anyPayload = { '~standard': { version: 1 as const, vendor: 'bench', validate: (value: unknown) => ({ value }) } };

async function measureDrains(server: PgServer): Promise<DrainRow[]> {
  const job = defineJob({ kind: 'bench.sleep', payload: anyPayload, timeoutMs: 60_000, handle: async () => ok() });
  // Enqueue only: never connects.
  const outbox = createOutbox({ jobs: [job], connect: () => Promise.reject(new Error('not used')) });
  const rows: DrainRow[] = [];
  let seq = 0;
  for (const concurrency of [1, 8, 32]) {
    for (const connector of CONNECTORS) {
      for (const [via, noDelay] of VIAS.flatMap((v) => variantsOf(v, connector).map((d) => [v, d] as const))) {
        const url = await server.createDatabase(`bench_drain_${++seq}`);
        await withClient(url, async (c) => {
          await migrate(c);
          await c.query('BEGIN');
          for (let i = 0; i < JOBS; i += 5000) {
            await outbox.enqueueMany(c, job, Array.from({ length: Math.min(5000, JOBS - i) }, (_, k) => ({ payload: { i: i + k } })));
          }
          await c.query('COMMIT');
        });
        const worker = await workerFor(url);
        try {
          log(`drain   ${pathLabel({ via, noDelay }).padEnd(7)} ${connectorLabel(connector).padEnd(24)} c=${concurrency} (${JOBS} jobs) `);
          const t0 = performance.now();
          await withNoDelay(noDelay, () => post(worker, '/drain', { via, connector, concurrency, handlerMs: HANDLER_MS }));
          const wallS = (performance.now() - t0) / 1000;
          const done = await withClient(url, async (c) => (await c.query(`SELECT count(*)::int AS n FROM outbox.job WHERE status = 'succeeded'`)).rows[0].n as number);
          if (done !== JOBS) throw new Error(`expected ${JOBS} succeeded jobs, got ${done}`);
          rows.push({ via, connector, noDelay, concurrency, wallS, jobsPerS: JOBS / wallS });
          log(`${wallS.toFixed(2)} s, ${(JOBS / wallS).toFixed(0)} jobs/s\n`);
        } finally {
          await worker.dispose();
        }
      }
    }
  }
  for (const r of rows) {
    const direct = rows.find((d) => d.via === 'direct' && d.connector === r.connector && d.concurrency === r.concurrency);
    if (direct) r.ratio = r.jobsPerS / direct.jobsPerS;
  }
  return rows;
}

function render(pgVersion: string, writes: WritesRow[], latency: LatencyRow[], drains: DrainRow[]): string {
  const cpus = os.cpus();
  const f = (n: number, d: number) => n.toFixed(d);
  const lines = [
    `# Postbox in workerd: Hyperdrive binding vs direct — ${new Date().toISOString()}`,
    '',
    `- machine: ${cpus.length} × ${cpus[0]?.model ?? 'unknown CPU'}, ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB, ${os.platform()} ${os.release()}`,
    `- PostgreSQL ${pgVersion} (${FLAVOR}, local TCP, fsync=off), Node ${process.version}, Miniflare (workerd) from the repo's devDependencies`,
    '- binding = the Worker\'s Hyperdrive binding (Miniflare\'s local proxy, as under wrangler dev); direct = a connection string workerd dials itself',
    '- bare pg.Client (before) = a plain `pg.Client`, which is how `createPgConnector` wrote to the Workers socket before it corked it',
    "- binding, proxy with TCP_NODELAY = the same binding with Nagle's algorithm turned off on the local proxy's sockets (patched in this process; wrangler dev leaves it on): an answer larger than one segment then no longer waits for the Worker side's delayed ACK",
    '',
    `## Writes per statement (\`SELECT $1::int\`, ${N} + 20 warm-up, chunks seen by tests/support/wire-proxy.ts)`,
    '',
    '| path | connector | statements | chunks / statement (mean) | max | statements in one chunk |',
    '|---|---|---:|---:|---:|---:|',
    ...writes.map((r) => `| ${r.via} | ${connectorLabel(r.connector)} | ${r.statements} | ${f(r.meanChunks, 2)} | ${r.maxChunks} | ${r.single} |`),
    '',
    `## Statement latency (${N} sequential on one session after 20 warm-up, timed in the Worker, ms)`,
    '',
    "workerd's clock advances in whole milliseconds (and only across I/O), so median and p90 are whole",
    'milliseconds; the mean is the total over all statements ÷ their number.',
    '',
    '| statement | path | connector | median | mean | p90 |',
    '|---|---|---|---:|---:|---:|',
    ...latency.map((r) => `| \`${r.sql}\` | ${pathLabel(r)} | ${connectorLabel(r.connector)} | ${f(r.median, 3)} | ${f(r.mean, 3)} | ${f(r.p90, 3)} |`),
    '',
    `## Drain (${JOBS} jobs, ${HANDLER_MS} ms handler, \`runDrain\` in the Worker, one connection; ratio = jobs/s ÷ direct with the same connector)`,
    '',
    '| concurrency | path | connector | wall s | jobs/s | binding ÷ direct |',
    '|---:|---|---|---:|---:|---:|',
    ...drains.map((r) => `| ${r.concurrency} | ${pathLabel(r)} | ${connectorLabel(r.connector)} | ${f(r.wallS, 2)} | ${f(r.jobsPerS, 0)} | ${r.via === 'binding' && r.ratio !== undefined ? `${f(r.ratio, 2)}×` : '—'} |`),
    '',
  ];
  return lines.join('\n');
}

async function main(): Promise<void> {
  const server = await startPostgres({ flavor: FLAVOR });
  let report: string;
  try {
    const writes = await measureWrites(server);
    const latency = await measureLatency(server);
    const drains = await measureDrains(server);
    report = render(server.serverVersion, writes, latency, drains);
  } finally {
    await server.stop();
  }
  process.stdout.write(report);
  if (WRITE) {
    const dir = path.join(here, 'results');
    await mkdir(dir, { recursive: true });
    const file = path.join(dir, `hyperdrive-${new Date().toISOString().slice(0, 10)}.md`);
    await writeFile(file, report);
    log(`wrote ${path.relative(process.cwd(), file)}\n`);
  }
}

await main();
