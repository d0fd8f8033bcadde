/**
 * Throughput benchmark: Postbox against its peers, side by side, in ONE run on ONE server.
 *
 *   node --import tsx bench/throughput.ts [--jobs 2000] [--pg embedded|debian15]
 *                                         [--only postbox,seed,graphile-worker,pg-boss] [--no-write]
 *                                         [--rtt-ms 0] [--profile] [--groups 1,2] [--rounds 3]
 *
 * Env equivalents: BENCH_JOBS, POSTBOX_PG, BENCH_ONLY, BENCH_RTT_MS, BENCH_ROUNDS, BENCH_GROUPS (1-based scenario
 * numbers, in the table's order: 1 = 2 ms c=1, 2 = c=8, 3 = c=32, 4 = mixed c=8, 5 = mixed c=32).
 *
 * With --rtt-ms N > 0 every system's connections go through bench/latency-proxy.ts, which delays
 * each chunk by N/2 ms in each direction (a fixed added round-trip time, standing in for the
 * network between a Worker and its database); enqueueing and verification may go direct.
 *
 * For every (scenario, system) it creates a fresh database, enqueues the jobs in bulk (not
 * timed), then times draining them all and checks every job ended succeeded. A drain under 2 s
 * is run --rounds times (each round runs every system of the scenario in turn) and the run
 * with the median rate is its row. Round trips are
 * counted client-side: every `pg.Client#query` on that database during the timed part (one
 * query = one round trip with node-postgres' extended protocol). See bench/README.md.
 */
import os from 'node:os';
import pg from 'pg';
import { createOutbox, defineJob, ok, runDrain } from 'postbox';
import { createPgPoolConnector } from 'postbox/pg';
import { migrate } from 'postbox/sql';
import { Logger, makeWorkerUtils, runMigrations, runOnce } from 'graphile-worker';
import PgBoss from 'pg-boss';
import { startPostgres, withClient, type PgFlavor, type PgServer } from '../tests/support/postgres.ts';
import { createSeedSchema, drainSeed, enqueueSeed } from './peers/seed-design.ts';
import { startLatencyProxy, type LatencyProxy } from './latency-proxy.ts';
import { arg, flag, pkgVersion, postmasterPidOf, queriesOn, serverCpuMs, takeProfile, writeResults } from './common.ts';

// ---------------------------------------------------------------------------------------------
// Options

const JOBS = Number(arg('jobs') ?? process.env.BENCH_JOBS ?? 2000);
const FLAVOR = (arg('pg') ?? process.env.POSTBOX_PG ?? 'embedded') as PgFlavor;
const ONLY = (arg('only') ?? process.env.BENCH_ONLY ?? '').split(',').filter(Boolean);
const WRITE = !flag('no-write');
const RTT_MS = Number(arg('rtt-ms') ?? process.env.BENCH_RTT_MS ?? 0);
/** Rounds of the short drains (see REPEAT_BELOW_S); the median run is reported. */
const ROUNDS = Number(arg('rounds') ?? process.env.BENCH_ROUNDS ?? 3);
/** A drain shorter than this (s) is run again in the next rounds. */
const REPEAT_BELOW_S = 2;
const GROUPS = (arg('groups') ?? process.env.BENCH_GROUPS ?? '').split(',').filter(Boolean).map(Number);
if (!Number.isInteger(JOBS) || JOBS < 1) throw new Error('--jobs must be a positive integer');
if (!Number.isInteger(ROUNDS) || ROUNDS < 1) throw new Error('--rounds must be a positive integer');
if (!Number.isFinite(RTT_MS) || RTT_MS < 0) throw new Error('--rtt-ms must be a number ≥ 0');

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));


// ---------------------------------------------------------------------------------------------
// Systems. Each `setup` enqueues (untimed) and returns `drain` (timed) and `verify` (untimed).

interface Scenario {
  handlerMs: number;
  concurrency: number;
  jobs: number;
  /** Mixed latency: every `slowEvery`-th job (by index) sleeps `slowMs` instead. */
  slowEvery?: number;
  slowMs?: number;
}

/** How long job `i` sleeps: the same deterministic mix for every system. */
const handlerMsOf = (s: Scenario, i: number): number => (s.slowEvery && i % s.slowEvery === 0 ? s.slowMs! : s.handlerMs);
const indexOf = (payload: unknown): number => Number((payload as { i?: number } | null)?.i ?? 0);
const scenarioLabel = (s: Scenario) => (s.slowEvery ? `${s.handlerMs} ms + ${100 / s.slowEvery}% ${s.slowMs} ms` : `${s.handlerMs} ms`);

/** One benchmark database: `url` is direct (enqueue, verify); `systemUrl` is what the system under
 * test connects with (through the latency proxy when --rtt-ms > 0, otherwise the same as `url`). */
interface Db {
  url: string;
  systemUrl: string;
}

interface Variant {
  system: string;
  /** Handlers in flight at most. */
  inFlight: number;
  /** Connections the drain holds at most (a description, e.g. "1", "8", "≤10 (pool)"). */
  connections: string;
  note?: string;
  setup(db: Db, s: Scenario): Promise<{ drain(): Promise<void>; verify(): Promise<void>; close?(): Promise<void> }>;
}

/** A Standard Schema that accepts anything: peers do not validate either. */
const anyPayload = { '~standard': { version: 1 as const, vendor: 'bench', validate: (value: unknown) => ({ value }) } };

function postbox(concurrency: number, drains: number): Variant {
  return {
    system: drains === 1 ? 'postbox' : `postbox ×${drains} drains`,
    inFlight: concurrency * drains,
    connections: String(drains),
    note: drains === 1 ? undefined : `${drains} drains in parallel, concurrency ${concurrency} each`,
    async setup({ url, systemUrl }, s) {
      const job = defineJob({
        kind: 'bench.sleep',
        payload: anyPayload,
        timeoutMs: 60_000,
        async handle(payload) {
          await sleep(handlerMsOf(s, indexOf(payload)));
          return ok();
        },
      });
      // Connected during set-up, like graphile-worker's pool: a drain checks a warm connection
      // out instead of opening one (and authenticating) inside the timed window.
      const pool = new pg.Pool({ connectionString: systemUrl, max: drains });
      pool.on('error', () => undefined);
      await Promise.all(Array.from({ length: drains }, () => pool.connect())).then((clients) => clients.forEach((c) => c.release()));
      const outbox = createOutbox({ jobs: [job], connect: createPgPoolConnector(pool), concurrency });
      await withClient(url, async (c) => {
        await migrate(c);
        await c.query('BEGIN');
        for (let i = 0; i < s.jobs; i++) await outbox.enqueue(c, job, { payload: { i } });
        await c.query('COMMIT');
      });
      return {
        async drain() {
          await Promise.all(
            Array.from({ length: drains }, async () => {
              for (;;) {
                const r = await runDrain(outbox);
                if (r.claimed === 0) return;
              }
            }),
          );
        },
        verify: () => expectCount(url, `SELECT count(*)::int AS n FROM outbox.job WHERE status = 'succeeded'`, s.jobs),
        close: () => pool.end(),
      };
    },
  };
}

/**
 * The ceiling: the same handlers, `concurrency` at a time, a slot refilled the moment its
 * handler ends, and no database at all. No system can beat it in the same scenario.
 */
function handlersOnly(concurrency: number): Variant {
  return {
    system: 'handlers only',
    inFlight: concurrency,
    connections: '0',
    note: 'no database: the ceiling',
    async setup(_db, s) {
      let ran = 0;
      return {
        async drain() {
          let next = 0;
          await Promise.all(
            Array.from({ length: concurrency }, async () => {
              while (next < s.jobs) {
                const i = next++;
                await sleep(handlerMsOf(s, i));
                ran++;
              }
            }),
          );
        },
        async verify() {
          if (ran !== s.jobs) throw new Error(`ran ${ran} of ${s.jobs}`);
        },
      };
    },
  };
}

function seed(workers: number): Variant {
  return {
    system: 'seed design',
    inFlight: workers,
    connections: String(workers),
    note: workers > 1 ? `${workers} one-job-at-a-time workers, one connection each` : undefined,
    async setup({ url, systemUrl }, s) {
      await withClient(url, async (c) => {
        await createSeedSchema(c);
        await enqueueSeed(c, 'bench.sleep', s.jobs);
      });
      return {
        async drain() {
          await drainSeed(systemUrl, workers, (payload) => sleep(handlerMsOf(s, indexOf(payload))));
        },
        verify: () => expectCount(url, `SELECT count(*)::int AS n FROM seed.job WHERE status = 'succeeded'`, s.jobs),
      };
    },
  };
}

const quietLogger = new Logger(() => () => undefined);

function graphileWorker(concurrency: number, batched: boolean): Variant {
  return {
    system: batched ? 'graphile-worker (batched)' : 'graphile-worker',
    inFlight: concurrency,
    connections: `≤${concurrency + 1} (pool)`,
    note: batched ? `localQueue.size ${concurrency}, completeJobBatchDelay 0` : undefined,
    async setup({ url, systemUrl }, s) {
      // One pool for migrations, enqueue and the drain (as before --rtt-ms existed), so through
      // the proxy when there is one: the setup part is not timed.
      const pool = new pg.Pool({ connectionString: systemUrl, max: concurrency + 1 });
      pool.on('error', () => undefined);
      pool.on('connect', (client) => client.on('error', () => undefined));
      await runMigrations({ pgPool: pool, logger: quietLogger });
      const utils = await makeWorkerUtils({ pgPool: pool, logger: quietLogger });
      for (let i = 0; i < s.jobs; i += 1000) {
        await utils.addJobs(Array.from({ length: Math.min(1000, s.jobs - i) }, (_, k) => ({ identifier: 'sleep', payload: { i: i + k } })));
      }
      await utils.release();
      let ran = 0;
      return {
        async drain() {
          await runOnce({
            pgPool: pool,
            concurrency,
            noHandleSignals: true,
            pollInterval: 10,
            logger: quietLogger,
            taskList: {
              sleep: async (payload) => {
                await sleep(handlerMsOf(s, indexOf(payload)));
                ran++;
              },
            },
            ...(batched ? { preset: { worker: { localQueue: { size: concurrency }, completeJobBatchDelay: 0 } } } : {}),
          });
        },
        async verify() {
          if (ran !== s.jobs) throw new Error(`graphile-worker ran ${ran} of ${s.jobs}`);
          await expectCount(url, `SELECT count(*)::int AS n FROM graphile_worker.jobs`, 0);
        },
        close: () => pool.end(),
      };
    },
  };
}

function pgBoss(batchSize: number): Variant {
  return {
    system: 'pg-boss',
    inFlight: batchSize,
    connections: '1',
    note: `fetch(batchSize ${batchSize}) → handlers → complete(ids), in a loop`,
    async setup({ url, systemUrl }, s) {
      // One instance for setup and drain (its start opens the pool; not timed), so through the proxy.
      const boss = new PgBoss({ connectionString: systemUrl, max: 2, supervise: false, schedule: false, migrate: true });
      boss.on('error', () => undefined);
      await boss.start();
      await boss.createQueue('bench');
      for (let i = 0; i < s.jobs; i += 1000) {
        await boss.insert(Array.from({ length: Math.min(1000, s.jobs - i) }, (_, k) => ({ name: 'bench', data: { i: i + k } })));
      }
      return {
        async drain() {
          for (;;) {
            const jobs = await boss.fetch('bench', { batchSize });
            if (!jobs || jobs.length === 0) return;
            await Promise.all(jobs.map((j: { data: unknown }) => sleep(handlerMsOf(s, indexOf(j.data)))));
            await boss.complete('bench', jobs.map((j: { id: string }) => j.id));
          }
        },
        verify: () => expectCount(url, `SELECT count(*)::int AS n FROM pgboss.job WHERE name = 'bench' AND state = 'completed'`, s.jobs),
        close: () => boss.stop({ graceful: false, wait: true, close: true } as any),
      };
    },
  };
}

/** Updates + deletes so far in every table of the database: each leaves one dead row version behind. */
async function deadVersions(url: string): Promise<number> {
  return withClient(url, async (c) => {
    await c.query('SELECT pg_stat_clear_snapshot()');
    const { rows } = await c.query('SELECT COALESCE(sum(n_tup_upd + n_tup_del), 0)::bigint AS n FROM pg_stat_user_tables');
    return Number(rows[0].n);
  });
}

/** The server's WAL insert position now (the cluster's: rows are measured one at a time). */
async function walLsn(url: string): Promise<string> {
  return withClient(url, async (c) => String((await c.query('SELECT pg_current_wal_lsn()::text AS lsn')).rows[0].lsn));
}

/** WAL bytes written since `from`. */
async function walSince(url: string, from: string): Promise<number> {
  return withClient(url, async (c) => Number((await c.query('SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn) AS n', [from])).rows[0].n));
}

async function expectCount(url: string, sql: string, want: number): Promise<void> {
  const n = await withClient(url, async (c) => (await c.query(sql)).rows[0].n as number);
  if (n !== want) throw new Error(`expected ${want}, got ${n}: ${sql}`);
}

// ---------------------------------------------------------------------------------------------
// Scenarios

interface Group {
  scenario: Scenario;
  variants: Variant[];
}

// Mixed latency: one job in twenty (5%) sleeps 200 ms, the rest 2 ms; by job index, so every
// system gets the same mix in the same order.
const MIXED = { slowEvery: 20, slowMs: 200 };
const groups: Group[] = [
  {
    scenario: { handlerMs: 2, concurrency: 1, jobs: JOBS },
    variants: [handlersOnly(1), postbox(1, 1), seed(1), graphileWorker(1, false), pgBoss(1)],
  },
  {
    scenario: { handlerMs: 2, concurrency: 8, jobs: JOBS },
    variants: [handlersOnly(8), postbox(8, 1), postbox(1, 8), seed(8), graphileWorker(8, false), graphileWorker(8, true), pgBoss(8)],
  },
  {
    scenario: { handlerMs: 2, concurrency: 32, jobs: JOBS },
    variants: [handlersOnly(32), postbox(32, 1), graphileWorker(32, false), graphileWorker(32, true), pgBoss(32)],
  },
  {
    scenario: { handlerMs: 2, concurrency: 8, jobs: JOBS, ...MIXED },
    variants: [handlersOnly(8), postbox(8, 1), graphileWorker(8, false), graphileWorker(8, true), pgBoss(8)],
  },
  {
    scenario: { handlerMs: 2, concurrency: 32, jobs: JOBS, ...MIXED },
    variants: [handlersOnly(32), postbox(32, 1), graphileWorker(32, false), graphileWorker(32, true), pgBoss(32)],
  },
];

interface Row {
  system: string;
  scenario: string;
  jobs: number;
  wallS: number;
  jobsPerS: number;
  rtPerJob: number | null;
  /** CPU the database server spent during the drain, per job (µs); null when not measurable. */
  dbCpuUsPerJob?: number | null;
  /** Row versions the drain left dead (updates + deletes, every table of the database) ÷ jobs. */
  deadPerJob?: number | null;
  walPerJob?: number | null;
  /** CPU this process (the system's client side and its handlers) spent during the drain, per job (µs). */
  clientCpuUsPerJob?: number;
  note?: string;
  ratio?: number;
  /** jobs/s ÷ the handlers-only ceiling's in the same scenario. */
  ofCeiling?: number;
  /** How many runs the row is the median of. */
  runs?: number;
  error?: string;
}

function wanted(system: string): boolean {
  if (ONLY.length === 0) return true;
  return ONLY.some((o) => system.startsWith(o));
}

/** Median wall time of `n` sequential `SELECT 1` on one connection: what one round trip costs. */
async function measureRoundTrip(url: string, n = 200): Promise<number> {
  return withClient(url, async (c) => {
    for (let i = 0; i < 20; i++) await c.query('SELECT 1');
    const times: number[] = [];
    for (let i = 0; i < n; i++) {
      const t0 = performance.now();
      await c.query('SELECT 1');
      times.push(performance.now() - t0);
    }
    times.sort((a, b) => a - b);
    return times[Math.floor(n / 2)];
  });
}

interface Network {
  rttMs: number;
  directMs: number;
  viaProxyMs?: number;
}

async function main(): Promise<void> {
  const server: PgServer = await startPostgres({ flavor: FLAVOR });
  const rows: Row[] = [];
  let dbSeq = 0;
  let proxy: LatencyProxy | undefined;
  let network: Network | undefined;
  let pmPid: number | null = null;
  try {
    if (RTT_MS > 0) proxy = await startLatencyProxy({ targetPort: server.port, rttMs: RTT_MS });
    pmPid = await postmasterPidOf(server.url);
    network = { rttMs: RTT_MS, directMs: await measureRoundTrip(server.url), viaProxyMs: proxy ? await measureRoundTrip(proxy.url(server.url)) : undefined };
    process.stderr.write(
      `round trip (SELECT 1, median): direct ${network.directMs.toFixed(3)} ms` +
        (network.viaProxyMs === undefined ? '' : `, via proxy (+${RTT_MS} ms) ${network.viaProxyMs.toFixed(3)} ms`) +
        '\n',
    );
    const measure = async (v: Variant, scenario: Scenario): Promise<Row> => {
      const label = `${scenarioLabel(scenario)}, c=${v.inFlight}, conns ${v.connections}`;
      const dbName = `bench_${++dbSeq}`;
      const url = await server.createDatabase(dbName);
      const db: Db = { url, systemUrl: proxy ? proxy.url(url) : url };
      process.stderr.write(`… ${v.system.padEnd(26)} ${label} (${scenario.jobs} jobs) `);
      let run: Awaited<ReturnType<Variant['setup']>> | undefined;
      try {
        run = await v.setup(db, scenario);
        // Quiet start: the enqueued rows analysed and vacuumed now, so autovacuum does not pick
        // this database's tables up during the timed drain (same for every system).
        await withClient(url, (c) => c.query('VACUUM ANALYZE'));
        takeProfile();
        const dead0 = await deadVersions(url);
        const wal0 = await walLsn(url);
        const q0 = queriesOn(dbName);
        const db0 = pmPid === null ? null : serverCpuMs(pmPid);
        const cpu0 = process.cpuUsage();
        const t0 = performance.now();
        await run.drain();
        const wallMs = performance.now() - t0;
        const cpu = process.cpuUsage(cpu0);
        const db1 = pmPid === null ? null : serverCpuMs(pmPid);
        const q = queriesOn(dbName) - q0;
        const wal = await walSince(url, wal0);
        await run.verify();
        // The drain's backends report their counts when they end (or idle for a second).
        await run.close?.();
        run = undefined;
        await new Promise((r) => setTimeout(r, 1_200));
        const dead = (await deadVersions(url)) - dead0;
        const row: Row = {
          system: v.system,
          scenario: label,
          jobs: scenario.jobs,
          wallS: wallMs / 1000,
          jobsPerS: scenario.jobs / (wallMs / 1000),
          rtPerJob: q > 0 ? q / scenario.jobs : null,
          dbCpuUsPerJob: db0 === null || db1 === null ? null : ((db1 - db0) * 1000) / scenario.jobs,
          clientCpuUsPerJob: (cpu.user + cpu.system) / scenario.jobs,
          deadPerJob: dead / scenario.jobs,
          walPerJob: wal / scenario.jobs,
          note: v.note,
        };
        process.stderr.write(
          `${row.wallS.toFixed(2)} s, ${row.jobsPerS.toFixed(0)} jobs/s, ${row.rtPerJob?.toFixed(2) ?? 'n/a'} RT/job, CPU/job: db ${row.dbCpuUsPerJob?.toFixed(0) ?? '?'} µs, client ${row.clientCpuUsPerJob!.toFixed(0)} µs, dead versions/job ${row.deadPerJob?.toFixed(2)}, WAL/job ${row.walPerJob?.toFixed(0)} B\n`,
        );
        const profile = takeProfile();
        if (profile) process.stderr.write(`    statements: ${profile}\n`);
        return row;
      } catch (error) {
        const message = error instanceof Error ? error.message : String(error);
        process.stderr.write(`FAILED: ${message}\n`);
        return { system: v.system, scenario: label, jobs: scenario.jobs, wallS: NaN, jobsPerS: NaN, rtPerJob: null, error: message.split('\n')[0] };
      } finally {
        await run?.close?.().catch(() => undefined);
        // Dropped once measured, so its dead rows give autovacuum nothing to do during later rows.
        await withClient(server.url, (c) => c.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`)).catch(() => undefined);
      }
    };
    for (const [g, { scenario, variants }] of groups.entries()) {
      if (GROUPS.length > 0 && !GROUPS.includes(g + 1)) continue;
      // Short drains swing with the machine: those are run ROUNDS times, each round every system
      // in turn (so a slow minute hits all of them), and the median run is the row.
      const runs = new Map<Variant, Row[]>();
      for (let round = 0; round < ROUNDS; round++) {
        for (const v of variants) {
          if (!wanted(v.system)) continue;
          const prior = runs.get(v) ?? [];
          if (round > 0 && (prior.some((r) => r.error) || prior[0]!.wallS > REPEAT_BELOW_S)) continue;
          runs.set(v, [...prior, await measure(v, scenario)]);
        }
      }
      const groupRows: Row[] = [...runs.values()].map(medianRun);
      const base = groupRows.find((r) => r.system === 'postbox' && !r.error);
      const ceiling = groupRows.find((r) => r.system === 'handlers only' && !r.error);
      for (const r of groupRows) {
        if (base && !r.error) r.ratio = r.jobsPerS / base.jobsPerS;
        if (ceiling && !r.error) r.ofCeiling = r.jobsPerS / ceiling.jobsPerS;
      }
      rows.push(...groupRows);
    }
  } finally {
    await proxy?.close();
    await server.stop();
  }
  const report = render(rows, server.serverVersion, network!);
  process.stdout.write(report);
  if (WRITE) await writeResults('throughput', RTT_MS, report);
  if (rows.some((r) => r.error)) process.exitCode = 1;
}

/** The run with the median rate (of an even count, the slower middle one); a failed run stands for all. */
function medianRun(runs: Row[]): Row {
  const failed = runs.find((r) => r.error);
  if (failed) return failed;
  const sorted = [...runs].sort((a, b) => a.jobsPerS - b.jobsPerS);
  return { ...sorted[Math.floor((sorted.length - 1) / 2)]!, runs: runs.length };
}

function render(rows: Row[], pgVersion: string, net: Network): string {
  const cpus = os.cpus();
  const fmt = (n: number, d: number) => (Number.isFinite(n) ? n.toFixed(d) : '—');
  const lines = [
    `# Postbox throughput — ${new Date().toISOString()}`,
    '',
    `- machine: ${cpus.length} × ${cpus[0]?.model ?? 'unknown CPU'}, ${(os.totalmem() / 2 ** 30).toFixed(1)} GiB, ${os.platform()} ${os.release()}`,
    `- PostgreSQL ${pgVersion} (${FLAVOR}, local TCP, fsync=off), Node ${process.version}`,
    net.rttMs > 0
      ? `- added round-trip time: **${net.rttMs} ms** (bench/latency-proxy.ts, fixed ${net.rttMs / 2} ms each way, on every system's connections; enqueue and verification direct); measured \`SELECT 1\` round trip, median: ${net.directMs.toFixed(2)} ms direct, ${net.viaProxyMs!.toFixed(2)} ms via the proxy`
      : `- added round-trip time: none (direct loopback TCP); measured \`SELECT 1\` round trip, median: ${net.directMs.toFixed(2)} ms`,
    `- peers: graphile-worker ${pkgVersion('graphile-worker')}, pg-boss ${pkgVersion('pg-boss')}, pg ${pkgVersion('pg')}`,
    `- jobs: ${JOBS} per scenario; handler = setTimeout sleep, 2 ms, or mixed (every 20th job, 5%, 200 ms); wall time = draining only (enqueue not timed); a drain under ${REPEAT_BELOW_S} s is run ${ROUNDS} times, the systems in turn each round, and its row is the median run; Postbox drains through a pool connected during set-up, as graphile-worker's is`,
    '- round trips = pg queries sent to the benchmark database during the drain, ÷ jobs; ratio = jobs/s ÷ Postbox (single drain) jobs/s in the same scenario; of ceiling = jobs/s ÷ the handlers-only row (same handlers, no database) in the same scenario',
    '',
    '- CPU / job = CPU time during the drain ÷ jobs: the database server\'s (postmaster and backends, from /proc; it includes the fixed cost of connecting) and this process\'s (the system\'s client side and the handlers); unlike wall time, CPU time barely changes when other work shares the machine',
    '',
    '- dead versions / job = row versions the drain left for vacuum (updates + deletes in every table of the database, from pg_stat_user_tables) ÷ jobs',
    '- WAL / job = bytes of write-ahead log the server wrote during the drain (pg_current_wal_lsn before and after; the rows run one at a time) ÷ jobs: every row version and index entry the drain writes is logged, so this is the write work per job, whatever the statements look like',
    '',
    '| system | scenario (handler ms, concurrency, connections) | jobs | wall s | jobs/s | round trips / job | DB CPU µs / job | client CPU µs / job | dead versions / job | WAL B / job | ratio vs Postbox | of ceiling |',
    '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
  ];
  for (const r of rows) {
    const system = r.error ? `${r.system} (failed: ${r.error})` : r.note ? `${r.system} — ${r.note}` : r.system;
    lines.push(`| ${system} | ${r.scenario} | ${r.jobs} | ${fmt(r.wallS, 2)} | ${fmt(r.jobsPerS, 0)} | ${r.rtPerJob === null ? 'n/a' : r.rtPerJob.toFixed(2)} | ${r.dbCpuUsPerJob == null ? 'n/a' : r.dbCpuUsPerJob.toFixed(0)} | ${r.clientCpuUsPerJob === undefined ? '—' : r.clientCpuUsPerJob.toFixed(0)} | ${r.deadPerJob == null ? '—' : r.deadPerJob.toFixed(2)} | ${r.walPerJob == null ? '—' : r.walPerJob.toFixed(0)} | ${r.ratio === undefined ? '—' : `${r.ratio.toFixed(2)}×`} | ${r.ofCeiling === undefined ? '—' : `${(r.ofCeiling * 100).toFixed(0)}%`} |`);
  }
  lines.push('');
  return lines.join('\n');
}

await main();
