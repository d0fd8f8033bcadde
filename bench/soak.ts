/**
 * Soak benchmark: a steady enqueue rate for many minutes, drained as it arrives, with an old
 * snapshot held open in the middle third. Does a system stay flat — table sizes, dead tuples,
 * latencies — and does it come back once the snapshot is released? Postbox and graphile-worker
 * in turn, in ONE run on ONE server, each on a fresh database.
 *
 *   node --import tsx bench/soak.ts [--minutes 30] [--rate 1000] [--concurrency 8] [--pg embedded|debian15]
 *                                   [--only postbox,graphile-worker] [--no-write]
 *                                   [--sample-s 10] [--sweep-s 5] [--retention-s 60] [--idle-ms 50] [--seed 1]
 *
 * Env equivalents: BENCH_MINUTES, BENCH_RATE, POSTBOX_PG, BENCH_ONLY.
 *
 * Per system: a producer paced by the wall clock enqueues RATE jobs a second (a transaction per
 * batch: a business-table INSERT and the system's bulk or single enqueue; when behind it runs
 * transactions back to back until it has caught up), a consumer drains them (2 ms handler,
 * CONCURRENCY at a time), the system's maintenance runs every SWEEP s, and every SAMPLE s one
 * sample is taken: throughput, enqueue-to-start latency, claim-statement latency, round trips,
 * the sizes and tuple counts of every table of the system's schema (listed from
 * information_schema, so no table name is hard-coded), autovacuum runs, the server's CPU. From
 * a third to two thirds of the run a separate session holds a REPEATABLE READ snapshot open,
 * idle in transaction. See bench/README.md ("Soak").
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import pg from 'pg';
import { createOutbox, defineJob, ok, runConsumer, runSweep, type OutboxEvent, type RunReport } from 'postbox';
import { createPgPoolConnector } from 'postbox/pg';
import { migrate } from 'postbox/sql';
import { Logger, makeWorkerUtils, run, runMigrations } from 'graphile-worker';
import { startPostgres, withClient, type PgFlavor, type PgServer } from '../tests/support/postgres.ts';
import { arg, countAs, flag, machineLine, onStatement, pkgVersion, postmasterPidOf, queriesOn, serverCpuMs, writeResults } from './common.ts';

// ---------------------------------------------------------------------------------------------
// Options

const MINUTES = Number(arg('minutes') ?? process.env.BENCH_MINUTES ?? 30);
const RATE = Number(arg('rate') ?? process.env.BENCH_RATE ?? 1000);
const CONCURRENCY = Number(arg('concurrency') ?? 8);
const FLAVOR = (arg('pg') ?? process.env.POSTBOX_PG ?? 'embedded') as PgFlavor;
const ONLY = (arg('only') ?? process.env.BENCH_ONLY ?? '').split(',').filter(Boolean);
const WRITE = !flag('no-write');
const SAMPLE_MS = Number(arg('sample-s') ?? 10) * 1000;
const SWEEP_MS = Number(arg('sweep-s') ?? 5) * 1000;
const RETENTION_MS = Number(arg('retention-s') ?? 60) * 1000;
/** How long Postbox's consumer waits after a drain that found nothing due (it has no LISTEN). */
const IDLE_MS = Number(arg('idle-ms') ?? 50);
const SEED = Number(arg('seed') ?? 1);
/** Extra server settings, `name=value;name=value` (for diagnosis: auto_explain, with POSTBOX_PG_LOG). */
const PG_SETTINGS = arg('pg-settings')
  ? Object.fromEntries(arg('pg-settings')!.split(';').filter(Boolean).map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]))
  : undefined;
const HANDLER_MS = 2;
/** One transaction in this many enqueues a single job with the single-job call. */
const SINGLE_SHARE = 0.15;
const MAX_BATCH = 50;

const RUN_MS = MINUTES * 60_000;
/** The snapshot is held from a third to two thirds of the run (minutes 10 to 20 of 30). */
const PIN_FROM_MS = RUN_MS / 3;
const PIN_TO_MS = (2 * RUN_MS) / 3;
/** A sixth of the run (5 of 30 minutes): the first and last windows, and the time allowed to recover. */
const SIXTH_MS = RUN_MS / 6;
/** Retention keeps finished jobs this long, then the next sweep deletes them: sizes are steady from here. */
const FULL_MS = RETENTION_MS + SWEEP_MS;

for (const [name, v] of Object.entries({ minutes: MINUTES, rate: RATE, concurrency: CONCURRENCY, 'sample-s': SAMPLE_MS, 'sweep-s': SWEEP_MS })) {
  if (!Number.isFinite(v) || v <= 0) throw new Error(`--${name} must be a positive number`);
}
if (!Number.isFinite(RETENTION_MS) || RETENTION_MS < 0) throw new Error('--retention-s must be a number ≥ 0');
if (!Number.isFinite(IDLE_MS) || IDLE_MS < 0) throw new Error('--idle-ms must be a number ≥ 0');
if (!Number.isInteger(CONCURRENCY)) throw new Error('--concurrency must be an integer');
if (PIN_FROM_MS < SAMPLE_MS) throw new Error(`--minutes ${MINUTES} is too short: each third of the run must hold at least one ${SAMPLE_MS / 1000} s sample`);

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, Math.max(0, ms)));

// ---------------------------------------------------------------------------------------------
// The load: the same sequence of transactions for every system (seeded).

/** A job's payload: its index and when the producer called enqueue (performance.now(), ms). */
interface Payload {
  i: number;
  t: number;
}

/** mulberry32: a small seeded generator, so every system gets the same batches in the same order. */
function seeded(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The next transaction: a single-job call, or a bulk call of 1..MAX_BATCH jobs skewed small (mean ≈ 17). */
function nextBatch(rand: () => number): { single: boolean; n: number } {
  if (rand() < SINGLE_SHARE) return { single: true, n: 1 };
  const u = rand();
  return { single: false, n: 1 + Math.floor(u * u * MAX_BATCH) };
}

/** Counters the handlers, the producer and the statement timer fill, taken (and reset) by each sample. */
class Window {
  enqueued = 0;
  finished = 0;
  /** Enqueue-to-start latency of each job started in the window (ms). */
  starts: number[] = [];
  /** Client-side time of each claim statement that resolved in the window (ms). */
  claims: number[] = [];
  maintMs: number[] = [];
  deleted = 0;
  /** Jobs the maintenance itself ran (Postbox's sweep has a drain step). */
  maintRan = 0;
  maintFailed = 0;
  take(): Window {
    const w = Object.assign(new Window(), this);
    Object.assign(this, new Window());
    return w;
  }
}

// ---------------------------------------------------------------------------------------------
// Systems

interface Hooks {
  started(payload: Payload): void;
  finished(): void;
}

interface Running {
  /** One producer transaction: the business INSERT and the enqueue of `payloads`, committed. */
  enqueue(payloads: Payload[], single: boolean): Promise<void>;
  /** One maintenance pass (Postbox: a sweep with retention; graphile-worker: its cleanup). */
  maintain(): Promise<{ deleted?: number; ran?: number }>;
  /** Stops the consumer; what it says about how the jobs ended. */
  stop(): Promise<string>;
  /** Set when the system reported a problem (events, error logs); empty when none. */
  problems(): string[];
}

interface System {
  name: string;
  /** The schema whose tables are measured. */
  schema: string;
  /** How it is driven (results header). */
  note: string;
  /** Whether a named statement is one of the system's claim statements. */
  isClaim(name: string): boolean;
  start(url: string, dbName: string, hooks: Hooks): Promise<Running>;
}

/** A Standard Schema that accepts anything: graphile-worker does not validate either. */
const anyPayload = { '~standard': { version: 1 as const, vendor: 'bench', validate: (value: unknown) => ({ value }) } };

/** The business write each producer transaction carries, as an outbox's caller would. */
const BUSINESS_TABLE = 'bench_order';
const businessInsert = `INSERT INTO ${BUSINESS_TABLE} (items) VALUES ($1)`;

/** The producer's transaction around `enqueue`, on `query` (one session). */
async function transaction(query: (sql: string, values?: unknown[]) => Promise<unknown>, items: number, enqueue: () => Promise<unknown>): Promise<void> {
  await query('BEGIN');
  try {
    await query(businessInsert, [items]);
    await enqueue();
    await query('COMMIT');
  } catch (error) {
    await query('ROLLBACK').catch(() => undefined);
    throw error;
  }
}

const postbox: System = {
  name: 'postbox',
  schema: 'outbox',
  note:
    `\`runConsumer(outbox, { idleMs: ${IDLE_MS} })\`, \`createOutbox({ concurrency: ${CONCURRENCY}, connect: createPgPoolConnector(pool) })\`; ` +
    `\`runSweep(outbox, { retention: { succeededRetentionMs: ${RETENTION_MS} } })\` every ${SWEEP_MS / 1000} s beside it (README, "Running the consumer in Node"); ` +
    'producer: `enqueueMany` per batch, `enqueue` for the single jobs; claim statements: `postbox_settle_then_claim_*` (it carries the settlements too) and `postbox_claim_*`',
  isClaim: (name) => name.startsWith('postbox_settle_then_claim') || name.startsWith('postbox_claim'),
  async start(url, dbName, hooks) {
    const job = defineJob({
      kind: 'bench.soak',
      payload: anyPayload,
      timeoutMs: 60_000,
      async handle(payload) {
        hooks.started(payload as Payload);
        await sleep(HANDLER_MS);
        hooks.finished();
        return ok();
      },
    });
    // The consumer's lane and the sweep each hold a session; two spare.
    const pool = new pg.Pool({ connectionString: url, max: 4 });
    pool.on('error', () => undefined);
    const events = new Map<string, number>();
    const outbox = createOutbox({
      jobs: [job],
      connect: createPgPoolConnector(pool),
      concurrency: CONCURRENCY,
      strictEnqueue: true,
      events: (e: OutboxEvent) => {
        if (e.type === 'job_settled' || e.type === 'retention') return;
        // Which index or table, for the maintenance the sweep did: the report names them.
        const key = e.type === 'index_rebuilt' ? `index_rebuilt ${e.index}` : e.type === 'table_analyzed' ? `table_analyzed ${e.table}` : e.type;
        events.set(key, (events.get(key) ?? 0) + 1);
      },
    });
    const producer = new pg.Client({ connectionString: url });
    countAs(producer, `${dbName}:producer`);
    await producer.connect();
    await migrate(producer);
    const stop = new AbortController();
    const swept: RunReport[] = [];
    const consumer = runConsumer(outbox, { signal: stop.signal, idleMs: IDLE_MS });
    const query = (sql: string, values?: unknown[]) => producer.query(sql, values as unknown[]);
    return {
      enqueue: (payloads, single) =>
        transaction(query, payloads.length, () =>
          single ? outbox.enqueue(producer, job, { payload: payloads[0]! }) : outbox.enqueueMany(producer, job, payloads.map((payload) => ({ payload }))),
        ),
      async maintain() {
        const r = await runSweep(outbox, { retention: { succeededRetentionMs: RETENTION_MS } });
        swept.push(r);
        for (const step of r.failedSteps) events.set(`sweep step ${step} failed`, (events.get(`sweep step ${step} failed`) ?? 0) + 1);
        return { deleted: r.deleted, ran: r.claimed };
      },
      async stop() {
        stop.abort();
        const report = await consumer;
        await producer.end();
        const plans = await preparedPlans(pool);
        await pool.end();
        const all = swept.reduce((a, r) => ({ claimed: a.claimed + r.claimed, succeeded: a.succeeded + r.succeeded, retrying: a.retrying + r.retrying, dead: a.dead + r.dead, recovered: a.recovered + r.recovered }), { claimed: 0, succeeded: 0, retrying: 0, dead: 0, recovered: 0 });
        return (
          `consumer: ${report.claimed} claimed, ${report.succeeded} succeeded, ${report.retrying} retrying, ${report.dead} dead, ${report.released} released at the stop; ` +
          `sweeps (${swept.length}): ${all.claimed} claimed by their drain step, ${all.succeeded} succeeded, ${all.retrying} retrying, ${all.dead} dead, ${all.recovered} recovered; ` +
          `plans of the claim statements at the end (generic / custom, per session): ${plans}`
        );
      },
      problems: () => [...events].map(([type, n]) => `${type} ×${n}`),
    };
  },
};

/**
 * How the server planned the claim statements on each of the pool's sessions
 * (pg_prepared_statements): a count of custom plans that goes on growing means the statement is
 * planned afresh on every call, which costs the server more than running it.
 */
async function preparedPlans(pool: pg.Pool): Promise<string> {
  const clients = await Promise.all(Array.from({ length: pool.totalCount }, () => pool.connect()));
  try {
    const out: string[] = [];
    for (const c of clients) {
      const { rows } = await c.query(
        `SELECT name, generic_plans::int AS generic, custom_plans::int AS custom FROM pg_prepared_statements WHERE name LIKE 'postbox_%claim%' ORDER BY name`,
      );
      out.push(...rows.map((r: { name: string; generic: number; custom: number }) => `${r.name} ${r.generic} / ${r.custom}`));
    }
    return out.length === 0 ? 'none' : out.join(', ');
  } finally {
    for (const c of clients) c.release();
  }
}

function graphileWorker(batched: boolean): System {
  return {
    name: batched ? 'graphile-worker (batched)' : 'graphile-worker',
    schema: 'graphile_worker',
    note:
      `\`run({ pgPool, concurrency: ${CONCURRENCY} })\` (LISTEN/NOTIFY, default pollInterval)${batched ? `, localQueue.size ${CONCURRENCY}, completeJobBatchDelay 0` : ', default settings'}; ` +
      `it deletes a job when it completes, so it has no retention; \`WorkerUtils.cleanup({ tasks: ['GC_JOB_QUEUES', 'DELETE_PERMAFAILED_JOBS'] })\` every ${SWEEP_MS / 1000} s is its maintenance; ` +
      'producer: `addJobs` per batch, `addJob` for the single jobs (a pool of one client, so they share the transaction); claim statements: `get_job*`',
    isClaim: (name) => name.startsWith('get_job'),
    async start(url, dbName, hooks) {
      const errors: string[] = [];
      const logger = new Logger(() => (level, message) => {
        if (level === 'error') errors.push(message.split('\n')[0]!);
      });
      const pool = new pg.Pool({ connectionString: url, max: CONCURRENCY + 2 });
      pool.on('error', () => undefined);
      pool.on('connect', (client) => client.on('error', () => undefined));
      // One client only, so BEGIN, the business INSERT, addJobs and COMMIT share its session.
      const producerPool = new pg.Pool({ connectionString: url, max: 1 });
      producerPool.on('error', () => undefined);
      producerPool.on('connect', (client) => countAs(client, `${dbName}:producer`));
      await runMigrations({ pgPool: pool, logger });
      const producer = await makeWorkerUtils({ pgPool: producerPool, logger });
      const maintenance = await makeWorkerUtils({ pgPool: pool, logger });
      let ran = 0;
      const runner = await run({
        pgPool: pool,
        concurrency: CONCURRENCY,
        noHandleSignals: true,
        logger,
        taskList: {
          soak: async (payload) => {
            hooks.started(payload as Payload);
            await sleep(HANDLER_MS);
            hooks.finished();
            ran++;
          },
        },
        ...(batched ? { preset: { worker: { localQueue: { size: CONCURRENCY }, completeJobBatchDelay: 0 } } } : {}),
      });
      const query = (sql: string, values?: unknown[]) => producerPool.query(sql, values as unknown[]);
      return {
        enqueue: (payloads, single) =>
          transaction(query, payloads.length, () =>
            single ? producer.addJob('soak', payloads[0]!) : producer.addJobs(payloads.map((payload) => ({ identifier: 'soak', payload }))),
          ),
        async maintain() {
          await maintenance.cleanup({ tasks: ['GC_JOB_QUEUES', 'DELETE_PERMAFAILED_JOBS'] });
          return {};
        },
        async stop() {
          await runner.stop();
          await runner.promise.catch(() => undefined);
          await producer.release();
          await maintenance.release();
          await producerPool.end();
          await pool.end();
          return `runner: ${ran} tasks ran`;
        },
        problems: () => (errors.length === 0 ? [] : [`${errors.length} error log lines, first: ${errors[0]}`]),
      };
    },
  };
}

const SYSTEMS: System[] = [postbox, graphileWorker(false), graphileWorker(true)];
/** Without --only: Postbox and graphile-worker with its default settings (the batched variant on request). */
// A name given whole picks that system alone; a prefix (`graphile`) picks every system it starts.
const picked = (s: System, o: string) => s.name === o || (!SYSTEMS.some((x) => x.name === o) && s.name.startsWith(o));
const systems = ONLY.length === 0 ? SYSTEMS.slice(0, 2) : SYSTEMS.filter((s) => ONLY.some((o) => picked(s, o)));

// ---------------------------------------------------------------------------------------------
// One soak

interface IndexStat {
  table: string;
  name: string;
  bytes: number;
}

interface TableStat {
  name: string;
  totalBytes: number;
  heapBytes: number;
  indexBytes: number;
  live: number;
  dead: number;
  autovacuum: number;
  autoanalyze: number;
}

type Phase = 'before' | 'pinned' | 'after';

interface Sample {
  /** Window end and length, from the soak's start (ms). */
  endMs: number;
  windowMs: number;
  /** By the window's midpoint. */
  phase: Phase;
  enqueued: number;
  finished: number;
  /** Enqueued minus finished, since the start. */
  backlog: number;
  starts: number[];
  claims: number[];
  /** The system's queries in the window (not the producer's or the bench's). */
  queries: number;
  tables: TableStat[];
  /** Every index of the schema's tables, by size (pg_relation_size). */
  indexes: IndexStat[];
  /** Autovacuum and autoanalyze runs on the schema's tables since the previous sample. */
  autovacuums: number;
  autoanalyzes: number;
  /** The oldest snapshot any session of the database holds, in transactions (age of backend_xmin). */
  xminAge: number | null;
  dbCpuMs: number | null;
  /** This process's event-loop delay, p99 (ms): producer, consumer and handlers share the loop. */
  loopP99Ms: number;
  maintMs: number[];
  deleted: number;
  maintRan: number;
  maintFailed: number;
}

interface SoakResult {
  system: System;
  samples: Sample[];
  /** Actual pin and release instants (ms from the start), null when no pin was taken. */
  pinnedAtMs: number | null;
  releasedAtMs: number | null;
  enqueuedTotal: number;
  finishedTotal: number;
  stopNote: string;
  problems: string[];
  reloptions: string[];
  error?: string;
}

const TABLES_SQL = `
  SELECT t.table_name AS name,
         pg_total_relation_size(format('%I.%I', t.table_schema, t.table_name)::regclass)::float8 AS "totalBytes",
         pg_relation_size(format('%I.%I', t.table_schema, t.table_name)::regclass)::float8 AS "heapBytes",
         pg_indexes_size(format('%I.%I', t.table_schema, t.table_name)::regclass)::float8 AS "indexBytes",
         coalesce(s.n_live_tup, 0)::float8 AS live, coalesce(s.n_dead_tup, 0)::float8 AS dead,
         coalesce(s.autovacuum_count, 0)::float8 AS autovacuum, coalesce(s.autoanalyze_count, 0)::float8 AS autoanalyze
    FROM information_schema.tables t
    LEFT JOIN pg_stat_user_tables s ON s.schemaname = t.table_schema AND s.relname = t.table_name
   WHERE t.table_schema = $1 AND t.table_type = 'BASE TABLE'
   ORDER BY t.table_name`;

const INDEXES_SQL = `
  SELECT t.relname AS "table", c.relname AS name, pg_relation_size(c.oid)::float8 AS bytes
    FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_class t ON t.oid = i.indrelid
   WHERE t.relnamespace = $1::regnamespace AND t.relkind = 'r'
   ORDER BY t.relname, c.relname`;

async function readTables(monitor: pg.Client, schema: string): Promise<{ tables: TableStat[]; indexes: IndexStat[]; xminAge: number | null }> {
  // Cumulative statistics are cached per transaction; a fresh read each sample.
  await monitor.query('SELECT pg_stat_clear_snapshot()');
  const tables = (await monitor.query(TABLES_SQL, [schema])).rows as TableStat[];
  const indexes = (await monitor.query(INDEXES_SQL, [schema])).rows as IndexStat[];
  const xmin = await monitor.query(`SELECT max(age(backend_xmin))::int AS age FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`);
  return { tables, indexes, xminAge: xmin.rows[0].age ?? null };
}

async function soak(server: PgServer, system: System, seq: number, pm: number | null): Promise<SoakResult> {
  const dbName = `soak_${seq}`;
  const url = await server.createDatabase(dbName);
  const result: SoakResult = { system, samples: [], pinnedAtMs: null, releasedAtMs: null, enqueuedTotal: 0, finishedTotal: 0, stopNote: '', problems: [], reloptions: [] };
  const window = new Window();
  let t0 = performance.now();
  const hooks: Hooks = {
    started: (payload) => void window.starts.push(performance.now() - payload.t),
    finished: () => {
      window.finished++;
      result.finishedTotal++;
    },
  };
  const unwatch = onStatement((name, ms, db) => {
    if (db === dbName && system.isClaim(name)) window.claims.push(ms);
  });
  const bench = (client: pg.Client) => (countAs(client, `${dbName}:bench`), client);
  const monitor = bench(new pg.Client({ connectionString: url }));
  const pin = bench(new pg.Client({ connectionString: url }));
  const loop = monitorEventLoopDelay({ resolution: 5 });
  let running: Running | undefined;
  let stopping = false;
  try {
    await monitor.connect();
    await pin.connect();
    await monitor.query(`CREATE TABLE ${BUSINESS_TABLE} (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, placed_at timestamptz NOT NULL DEFAULT now(), items int NOT NULL)`);
    running = await system.start(url, dbName, hooks);
    const sys = running;
    result.reloptions = (
      await monitor.query(
        `SELECT c.relname, array_to_string(c.reloptions, ', ') AS options FROM pg_class c
          WHERE c.relnamespace = $1::regnamespace AND c.reloptions IS NOT NULL ORDER BY c.relname`,
        [system.schema],
      )
    ).rows.map((r) => `${r.relname}: ${r.options}`);
    let prev = await readTables(monitor, system.schema);
    let prevCpu = pm === null ? null : serverCpuMs(pm);
    let prevQueries = queriesOn(dbName);
    loop.enable();
    t0 = performance.now();

    // The first failure of the producer or the pin ends the soak (at the next sample).
    let failure: unknown;
    const fail = (error: unknown) => void (failure ??= error);
    const producer = (async () => {
      const rand = seeded(SEED);
      let produced = 0;
      for (;;) {
        const { single, n } = nextBatch(rand);
        // Paced by the wall clock: a batch leaves when its last job is due; behind, at once.
        const dueMs = ((produced + n) / RATE) * 1000;
        if (dueMs > RUN_MS) return;
        await sleep(t0 + dueMs - performance.now());
        const t = performance.now();
        await sys.enqueue(Array.from({ length: n }, (_, k) => ({ i: produced + k, t })), single);
        produced += n;
        window.enqueued += n;
        result.enqueuedTotal += n;
      }
    })().catch(fail);

    const maintenance = (async () => {
      while (!stopping) {
        const started = performance.now();
        try {
          const r = await sys.maintain();
          window.deleted += r.deleted ?? 0;
          window.maintRan += r.ran ?? 0;
        } catch {
          window.maintFailed++;
        }
        window.maintMs.push(performance.now() - started);
        await sleep(started + SWEEP_MS - performance.now());
      }
    })();

    const pinning = (async () => {
      await sleep(t0 + PIN_FROM_MS - performance.now());
      await pin.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
      await pin.query(`SELECT 1 FROM ${BUSINESS_TABLE} LIMIT 1`);
      result.pinnedAtMs = performance.now() - t0;
      process.stderr.write(`  ${fmtS(result.pinnedAtMs)} snapshot pinned (idle in transaction)\n`);
      await sleep(t0 + PIN_TO_MS - performance.now());
      await pin.query('COMMIT');
      result.releasedAtMs = performance.now() - t0;
      process.stderr.write(`  ${fmtS(result.releasedAtMs)} snapshot released\n`);
    })().catch(fail);

    let lastEnd = 0;
    for (let k = 1; k * SAMPLE_MS <= RUN_MS; k++) {
      await sleep(t0 + k * SAMPLE_MS - performance.now());
      if (failure !== undefined) throw failure;
      const endMs = performance.now() - t0;
      const w = window.take();
      const cpu = pm === null ? null : serverCpuMs(pm);
      const queries = queriesOn(dbName);
      const now = await readTables(monitor, system.schema);
      const sum = (tables: TableStat[], f: (t: TableStat) => number) => tables.reduce((a, t) => a + f(t), 0);
      const mid = (lastEnd + endMs) / 2;
      const s: Sample = {
        endMs,
        windowMs: endMs - lastEnd,
        phase: mid < PIN_FROM_MS ? 'before' : mid < PIN_TO_MS ? 'pinned' : 'after',
        enqueued: w.enqueued,
        finished: w.finished,
        backlog: result.enqueuedTotal - result.finishedTotal,
        starts: w.starts,
        claims: w.claims,
        queries: queries - prevQueries,
        tables: now.tables,
        indexes: now.indexes,
        autovacuums: sum(now.tables, (t) => t.autovacuum) - sum(prev.tables, (t) => t.autovacuum),
        autoanalyzes: sum(now.tables, (t) => t.autoanalyze) - sum(prev.tables, (t) => t.autoanalyze),
        xminAge: now.xminAge,
        dbCpuMs: cpu === null || prevCpu === null ? null : cpu - prevCpu,
        loopP99Ms: loop.percentile(99) / 1e6,
        maintMs: w.maintMs,
        deleted: w.deleted,
        maintRan: w.maintRan,
        maintFailed: w.maintFailed,
      };
      result.samples.push(s);
      prev = now;
      prevCpu = cpu;
      prevQueries = queries;
      lastEnd = endMs;
      loop.reset();
      process.stderr.write(`  ${sampleLine(s)}\n`);
    }
    await producer;
    await pinning;
    if (failure !== undefined) throw failure;
    stopping = true;
    await maintenance;
  } catch (error) {
    result.error = error instanceof Error ? error.message.split('\n')[0] : String(error);
    process.stderr.write(`FAILED: ${result.error}\n`);
  } finally {
    stopping = true;
    loop.disable();
    unwatch();
    if (running) {
      result.stopNote = await running.stop().catch((e) => `stop failed: ${e instanceof Error ? e.message : String(e)}`);
      result.problems = running.problems();
    }
    await pin.end().catch(() => undefined);
    await monitor.end().catch(() => undefined);
    // Dropped once measured, so its dead rows give autovacuum nothing to do during the next system.
    await withClient(server.url, (c) => c.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`)).catch(() => undefined);
  }
  return result;
}

// ---------------------------------------------------------------------------------------------
// Reading the samples

const sumOf = <T>(xs: readonly T[], f: (x: T) => number) => xs.reduce((a, x) => a + f(x), 0);
const meanOf = <T>(xs: readonly T[], f: (x: T) => number) => (xs.length === 0 ? NaN : sumOf(xs, f) / xs.length);

/** Nearest-rank percentile (q in 0..1) of unsorted values; NaN when there are none. */
function percentile(values: readonly number[], q: number): number {
  if (values.length === 0) return NaN;
  const sorted = Float64Array.from(values).sort();
  return sorted[Math.max(0, Math.ceil(q * sorted.length) - 1)]!;
}

const MIB = 2 ** 20;
const totalBytes = (s: Sample) => sumOf(s.tables, (t) => t.totalBytes);

interface Metric {
  label: string;
  digits: number;
  /** Sizes and tuples: compared from the time the retention window is full (FULL_MS) on. */
  steady?: boolean;
  of(samples: readonly Sample[]): number;
}

const allStarts = (ss: readonly Sample[]) => ss.flatMap((s) => s.starts);
const allClaims = (ss: readonly Sample[]) => ss.flatMap((s) => s.claims);
const perS = (ss: readonly Sample[], f: (s: Sample) => number) => sumOf(ss, f) / (sumOf(ss, (s) => s.windowMs) / 1000);

const METRICS: Metric[] = [
  { label: 'throughput, jobs/s', digits: 0, of: (ss) => perS(ss, (s) => s.finished) },
  { label: 'enqueue rate achieved, jobs/s', digits: 0, of: (ss) => perS(ss, (s) => s.enqueued) },
  { label: 'enqueue → start p50, ms', digits: 1, of: (ss) => percentile(allStarts(ss), 0.5) },
  { label: 'enqueue → start p99, ms', digits: 1, of: (ss) => percentile(allStarts(ss), 0.99) },
  { label: 'claim statement p50, ms', digits: 2, of: (ss) => percentile(allClaims(ss), 0.5) },
  { label: 'claim statement p99, ms', digits: 2, of: (ss) => percentile(allClaims(ss), 0.99) },
  { label: 'round trips / job', digits: 2, of: (ss) => sumOf(ss, (s) => s.queries) / sumOf(ss, (s) => s.finished) },
  { label: 'tables + indexes, MiB', digits: 1, steady: true, of: (ss) => meanOf(ss, totalBytes) / MIB },
  { label: 'indexes, MiB', digits: 1, steady: true, of: (ss) => meanOf(ss, (s) => sumOf(s.tables, (t) => t.indexBytes)) / MIB },
  { label: 'live tuples', digits: 0, steady: true, of: (ss) => meanOf(ss, (s) => sumOf(s.tables, (t) => t.live)) },
  { label: 'dead tuples', digits: 0, steady: true, of: (ss) => meanOf(ss, (s) => sumOf(s.tables, (t) => t.dead)) },
  { label: 'autovacuum runs / min', digits: 1, of: (ss) => perS(ss, (s) => s.autovacuums) * 60 },
  { label: 'DB server CPU, % of a core', digits: 0, of: (ss) => (sumOf(ss, (s) => s.dbCpuMs ?? NaN) / sumOf(ss, (s) => s.windowMs)) * 100 },
  { label: 'DB server CPU / job, µs', digits: 0, of: (ss) => (sumOf(ss, (s) => s.dbCpuMs ?? NaN) * 1000) / sumOf(ss, (s) => s.finished) },
  { label: 'event-loop delay p99 (worst sample), ms', digits: 1, of: (ss) => (ss.length === 0 ? NaN : Math.max(...ss.map((s) => s.loopP99Ms))) },
];
const metric = (label: string) => METRICS.find((m) => m.label.startsWith(label))!;

const midOf = (s: Sample) => s.endMs - s.windowMs / 2;

/** The windows a metric is compared over (see the README's "Soak"). */
function windowsOf(samples: readonly Sample[], steady: boolean) {
  const from = steady ? FULL_MS : 0;
  const within = (lo: number, hi: number) => samples.filter((s) => midOf(s) >= lo && midOf(s) <= hi);
  const firstW = within(from, from + SIXTH_MS);
  const lastW = within(RUN_MS - SIXTH_MS, RUN_MS);
  const fallbackFirst = samples.find((s) => midOf(s) >= from) ?? samples.at(-1);
  const before = samples.filter((s) => s.phase === 'before');
  const unpinned = before.filter((s) => midOf(s) >= from);
  return {
    first: firstW.length > 0 ? firstW : fallbackFirst ? [fallbackFirst] : [],
    last: lastW.length > 0 ? lastW : samples.slice(-1),
    unpinned: unpinned.length > 0 ? unpinned : before,
    pinned: samples.filter((s) => s.phase === 'pinned'),
  };
}

interface MetricRow {
  metric: Metric;
  first: number;
  last: number;
  unpinned: number;
  pinned: number;
}

function metricRows(r: SoakResult): MetricRow[] {
  return METRICS.map((m) => {
    const w = windowsOf(r.samples, m.steady ?? false);
    return { metric: m, first: m.of(w.first), last: m.of(w.last), unpinned: m.of(w.unpinned), pinned: m.of(w.pinned) };
  });
}

/**
 * How long after the release a sample first meets `ok` (ms from the release to that sample's
 * end); null when none does before the run ends.
 */
function recovery(r: SoakResult, ok: (s: Sample) => boolean): number | null {
  if (r.releasedAtMs === null) return null;
  const after = r.samples.filter((s) => s.phase === 'after');
  const hit = after.find(ok);
  return hit ? hit.endMs - r.releasedAtMs : null;
}

interface Target {
  label: string;
  value: string;
  pass: boolean | null;
}

function targets(r: SoakResult, rows: MetricRow[]): Target[] {
  const row = (label: string) => rows.find((x) => x.metric.label.startsWith(label))!;
  const ratio = (x: MetricRow) => x.last / x.first;
  const verdict = (ok: boolean, value: number) => (Number.isFinite(value) ? ok : null);
  // Per table too, for tables of at least 1 MiB in either window (a tiny table doubling is noise).
  const w = windowsOf(r.samples, true);
  const sizeOf = (ss: readonly Sample[], name: string) => meanOf(ss, (s) => s.tables.find((t) => t.name === name)?.totalBytes ?? 0);
  const names = [...new Set(r.samples.flatMap((s) => s.tables.map((t) => t.name)))];
  const perTable = names
    .map((name) => ({ name, first: sizeOf(w.first, name), last: sizeOf(w.last, name) }))
    .filter((t) => Math.max(t.first, t.last) >= MIB)
    .map((t) => ({ name: t.name, ratio: t.last / t.first }))
    .sort((a, b) => b.ratio - a.ratio);
  const size = ratio(row('tables + indexes'));
  const worst = perTable[0];
  const startP99 = ratio(row('enqueue → start p99'));
  const claimP99 = ratio(row('claim statement p99'));
  const thr = row('throughput');
  const pinnedShare = thr.pinned / thr.unpinned;
  const startBase = row('enqueue → start p99').unpinned;
  const backThroughput = recovery(r, (s) => s.finished / (s.windowMs / 1000) >= 0.9 * thr.unpinned);
  const backLatency = recovery(r, (s) => percentile(s.starts, 0.99) <= 1.2 * startBase);
  const backClaim = recovery(r, (s) => percentile(s.claims, 0.99) <= 1.2 * row('claim statement p99').unpinned);
  const within = (ms: number | null) => ms !== null && ms <= SIXTH_MS;
  // The end of the first sample that meets it: recovery came at that time or earlier.
  const fmtBack = (ms: number | null) => (ms === null ? 'not within the run' : `≤ ${fmtS(ms)}`);
  return [
    {
      label: 'tables + indexes, last ÷ first ≤ 1.5 (from the time the retention window is full)',
      value: `total ${fmtRatio(size)}${worst ? `; highest table ${worst.name} ${fmtRatio(worst.ratio)}` : ''}`,
      pass: verdict(size <= 1.5 && (worst === undefined || worst.ratio <= 1.5), size),
    },
    { label: 'enqueue → start p99, last ÷ first ≤ 1.2', value: fmtRatio(startP99), pass: verdict(startP99 <= 1.2, startP99) },
    { label: 'claim statement p99, last ÷ first ≤ 1.2', value: fmtRatio(claimP99), pass: verdict(claimP99 <= 1.2, claimP99) },
    { label: 'throughput pinned ≥ 90 % of unpinned', value: `${(pinnedShare * 100).toFixed(1)} %`, pass: verdict(pinnedShare >= 0.9, pinnedShare) },
    {
      label: `back to baseline ≤ ${fmtS(SIXTH_MS)} after the release (throughput ≥ 90 %, start p99 ≤ 1.2× unpinned)`,
      value: `throughput ${fmtBack(backThroughput)}, start p99 ${fmtBack(backLatency)} (claim p99 ${fmtBack(backClaim)})`,
      pass: r.releasedAtMs === null ? null : within(backThroughput) && within(backLatency),
    },
  ];
}

// ---------------------------------------------------------------------------------------------
// Report

const fmt = (n: number, d: number) => (Number.isFinite(n) ? n.toLocaleString('en-US', { minimumFractionDigits: d, maximumFractionDigits: d }) : '—');
const fmtRatio = (n: number) => (Number.isFinite(n) ? `${n.toFixed(2)}×` : '—');
function fmtS(ms: number): string {
  const s = Math.round(ms / 1000);
  return s < 60 ? `${s} s` : `${Math.floor(s / 60)}:${String(s % 60).padStart(2, '0')}`;
}
const passCell = (p: boolean | null) => (p === null ? 'n/a' : p ? 'pass' : 'FAIL');
const mib = (bytes: number) => fmt(bytes / MIB, 1);

function sampleLine(s: Sample): string {
  const ws = s.windowMs / 1000;
  return (
    `${fmtS(s.endMs).padStart(5)} ${s.phase.padEnd(6)} enq ${fmt(s.enqueued / ws, 0)}/s done ${fmt(s.finished / ws, 0)}/s backlog ${s.backlog} ` +
    `start p50/p99 ${fmt(percentile(s.starts, 0.5), 1)}/${fmt(percentile(s.starts, 0.99), 1)} ms claim p99 ${fmt(percentile(s.claims, 0.99), 2)} ms ` +
    `size ${mib(totalBytes(s))} MiB dead ${fmt(sumOf(s.tables, (t) => t.dead), 0)} xmin age ${s.xminAge ?? '—'}`
  );
}

const SAMPLE_HEAD = [
  '| t | phase | enqueued /s | done /s | backlog | start p50 / p99 ms | claim p50 / p99 ms | RT / job | tables + idx MiB (idx) | live | dead | autovac / analyze | maintenance: max ms, deleted, ran | oldest xmin age | DB CPU % | loop delay p99 ms |',
  '|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|',
];

function sampleRow(s: Sample): string {
  const ws = s.windowMs / 1000;
  const maint = s.maintMs.length === 0 ? '—' : `${fmt(Math.max(...s.maintMs), 0)}, ${fmt(s.deleted, 0)}, ${fmt(s.maintRan, 0)}${s.maintFailed ? `, ${s.maintFailed} failed` : ''}`;
  return `| ${fmtS(s.endMs)} | ${s.phase} | ${fmt(s.enqueued / ws, 0)} | ${fmt(s.finished / ws, 0)} | ${fmt(s.backlog, 0)} | ${fmt(percentile(s.starts, 0.5), 1)} / ${fmt(percentile(s.starts, 0.99), 1)} | ${fmt(percentile(s.claims, 0.5), 2)} / ${fmt(percentile(s.claims, 0.99), 2)} | ${fmt(s.queries / s.finished, 2)} | ${mib(totalBytes(s))} (${mib(sumOf(s.tables, (t) => t.indexBytes))}) | ${fmt(sumOf(s.tables, (t) => t.live), 0)} | ${fmt(sumOf(s.tables, (t) => t.dead), 0)} | ${s.autovacuums} / ${s.autoanalyzes} | ${maint} | ${s.xminAge === null ? '—' : fmt(s.xminAge, 0)} | ${s.dbCpuMs === null ? '—' : fmt((s.dbCpuMs / s.windowMs) * 100, 0)} | ${fmt(s.loopP99Ms, 1)} |`;
}

/** Four moments of a run: the retention window full, just before the pin, at its end, the last sample. */
function moments(r: SoakResult): [string, Sample][] {
  const at = (ms: number) => r.samples.find((s) => s.endMs >= ms - 1) ?? r.samples.at(-1)!;
  const lastBefore = (ms: number) => [...r.samples].reverse().find((s) => s.endMs <= ms + 1) ?? r.samples[0]!;
  return (
    [
      ['retention full', at(FULL_MS)],
      ['pin', lastBefore(r.pinnedAtMs ?? PIN_FROM_MS)],
      ['release', lastBefore(r.releasedAtMs ?? PIN_TO_MS)],
      ['end', r.samples.at(-1)!],
    ] as [string, Sample][]
  ).sort((a, b) => a[1].endMs - b[1].endMs);
}

/** Per index at the four moments, and end ÷ pin: what the held horizon left behind. */
function indexRows(r: SoakResult): string[] {
  const when = moments(r);
  const pin = when.find(([label]) => label === 'pin')![1];
  const last = r.samples.at(-1)!;
  const lines = [
    `| index | ${when.map(([label, s]) => `MiB at ${label} (${fmtS(s.endMs)})`).join(' | ')} | end ÷ pin |`,
    `|---|${when.map(() => '---:').join('|')}|---:|`,
  ];
  for (const ix of last.indexes) {
    const of = (s: Sample) => s.indexes.find((i) => i.table === ix.table && i.name === ix.name)?.bytes;
    const before = of(pin);
    lines.push(`| ${ix.table}.${ix.name} | ${when.map(([, s]) => (of(s) === undefined ? '—' : mib(of(s)!))).join(' | ')} | ${before ? `${fmt(ix.bytes / before, 2)}×` : '—'} |`);
  }
  return lines;
}

/** Per table, at four moments (see moments). */
function tableRows(r: SoakResult): string[] {
  const when = moments(r);
  const names = r.samples.at(-1)!.tables.map((t) => t.name);
  const head = when.map(([label, s]) => `${label} (${fmtS(s.endMs)})`);
  const lines = [
    `| table | ${head.map((h) => `MiB (idx) at ${h}`).join(' | ')} | ${head.map((h) => `live / dead at ${h}`).join(' | ')} |`,
    `|---|${when.map(() => '---:').join('|')}|${when.map(() => '---:').join('|')}|`,
  ];
  for (const name of names) {
    const of = (s: Sample) => s.tables.find((t) => t.name === name);
    const size = when.map(([, s]) => (of(s) ? `${mib(of(s)!.totalBytes)} (${mib(of(s)!.indexBytes)})` : '—'));
    const tuples = when.map(([, s]) => (of(s) ? `${fmt(of(s)!.live, 0)} / ${fmt(of(s)!.dead, 0)}` : '—'));
    lines.push(`| ${name} | ${size.join(' | ')} | ${tuples.join(' | ')} |`);
  }
  return lines;
}

function render(results: SoakResult[], server: PgServer, settings: string[], autovacuum: string[]): string {
  const lines = [
    `# Postbox soak — ${new Date().toISOString()}`,
    '',
    machineLine(),
    `- PostgreSQL ${server.serverVersion} (${FLAVOR}, local TCP), Node ${process.version}; peers: graphile-worker ${pkgVersion('graphile-worker')}, pg ${pkgVersion('pg')}`,
    `- server settings: ${settings.join(', ')}`,
    `- autovacuum: ${autovacuum.join(', ')}`,
    `- load: ${MINUTES} min per system, ${fmt(RATE, 0)} jobs/s paced by the wall clock (seed ${SEED}); a transaction per batch: an INSERT into \`${BUSINESS_TABLE}\` and the enqueue; ${SINGLE_SHARE * 100} % of transactions enqueue one job with the single-job call, the rest 1–${MAX_BATCH} jobs (skewed small, mean ≈ 17) with the bulk call; payload \`{ i, t }\`, t = when the producer called (before BEGIN)`,
    `- drain: ${CONCURRENCY} handlers at a time, handler = ${HANDLER_MS} ms sleep; maintenance every ${SWEEP_MS / 1000} s; Postbox retention ${RETENTION_MS / 1000} s for succeeded jobs`,
    `- snapshot pinned from ${fmtS(PIN_FROM_MS)} to ${fmtS(PIN_TO_MS)}: another session of the same database runs \`BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 1 FROM ${BUSINESS_TABLE} LIMIT 1\` and stays idle in transaction, then COMMITs`,
    `- a sample every ${SAMPLE_MS / 1000} s; phase by the window's midpoint; first / last = the first / last ${fmtS(SIXTH_MS)} (sizes and tuples: the first ${fmtS(SIXTH_MS)} from ${fmtS(FULL_MS)}, when retention has started deleting), unpinned = before the pin (sizes and tuples: from ${fmtS(FULL_MS)}); rates and CPU over a window are its totals ÷ its time, percentiles over every value in it, sizes and tuples the mean of its samples`,
    '- start = enqueue → the handler starting (same process, performance.now()); claim = the client-side time of each claim statement (wrapped `pg.Client#query`); RT / job = the system\'s pg queries (the consumer, its maintenance; not the producer\'s, not the bench\'s) ÷ jobs finished; sizes = pg_total_relation_size (heap, TOAST, indexes) of every base table of the system\'s schema, idx = pg_indexes_size; live / dead = pg_stat_user_tables after pg_stat_clear_snapshot(); oldest xmin age = age(backend_xmin) of the database\'s other sessions; DB CPU = the server\'s processes (postmaster, backends, autovacuum), from /proc; loop delay = this process\'s event-loop delay (producer, consumer and handlers share one Node thread: a late timer shows up in every latency)',
    '',
  ];
  const rowsBy = new Map<SoakResult, MetricRow[]>();
  const targetsBy = new Map<SoakResult, Target[]>();
  for (const r of results) {
    lines.push(`## ${r.system.name}`, '', `- ${r.system.note}`);
    if (r.error) lines.push(`- **failed**: ${r.error}`);
    lines.push(
      `- enqueued ${fmt(r.enqueuedTotal, 0)} (${fmt(r.enqueuedTotal / (RUN_MS / 1000), 0)} jobs/s achieved), handlers finished ${fmt(r.finishedTotal, 0)}; ${r.stopNote}`,
      `- pinned at ${r.pinnedAtMs === null ? '—' : fmtS(r.pinnedAtMs)}, released at ${r.releasedAtMs === null ? '—' : fmtS(r.releasedAtMs)}; problems reported: ${r.problems.length === 0 ? 'none' : r.problems.join('; ')}`,
      `- table storage options: ${r.reloptions.length === 0 ? 'none (server defaults)' : r.reloptions.join('; ')}`,
      '',
    );
    if (r.samples.length === 0) continue;
    lines.push(...SAMPLE_HEAD, ...r.samples.map(sampleRow), '', ...tableRows(r), '', ...indexRows(r), '');
    const rows = metricRows(r);
    rowsBy.set(r, rows);
    lines.push('| metric | first | last | last ÷ first | unpinned | pinned | pinned ÷ unpinned |', '|---|---:|---:|---:|---:|---:|---:|');
    for (const x of rows) {
      const d = x.metric.digits;
      lines.push(`| ${x.metric.label} | ${fmt(x.first, d)} | ${fmt(x.last, d)} | ${fmtRatio(x.last / x.first)} | ${fmt(x.unpinned, d)} | ${fmt(x.pinned, d)} | ${fmtRatio(x.pinned / x.unpinned)} |`);
    }
    const t = targets(r, rows);
    targetsBy.set(r, t);
    lines.push('', '| target | value | |', '|---|---|---|', ...t.map((x) => `| ${x.label} | ${x.value} | ${passCell(x.pass)} |`), '');
  }
  const measured = results.filter((r) => rowsBy.has(r));
  if (measured.length > 1) {
    lines.push('## Side by side', '', `| metric | ${measured.map((r) => `${r.system.name}: last · last ÷ first · pinned ÷ unpinned`).join(' | ')} |`, `|---|${measured.map(() => '---:').join('|')}|`);
    for (const [i, m] of METRICS.entries()) {
      const cells = measured.map((r) => {
        const x = rowsBy.get(r)![i]!;
        return `${fmt(x.last, m.digits)} · ${fmtRatio(x.last / x.first)} · ${fmtRatio(x.pinned / x.unpinned)}`;
      });
      lines.push(`| ${m.label} | ${cells.join(' | ')} |`);
    }
    lines.push('', `| target | ${measured.map((r) => r.system.name).join(' | ')} |`, `|---|${measured.map(() => '---').join('|')}|`);
    for (const [i, t] of targetsBy.get(measured[0]!)!.entries()) {
      lines.push(`| ${t.label} | ${measured.map((r) => { const x = targetsBy.get(r)![i]!; return `${passCell(x.pass)}: ${x.value}`; }).join(' | ')} |`);
    }
    lines.push('');
  }
  return lines.join('\n');
}

async function showSettings(url: string, names: string[]): Promise<string[]> {
  return withClient(url, async (c) => {
    const { rows } = await c.query(`SELECT name, setting, unit FROM pg_settings WHERE name = ANY($1) ORDER BY array_position($1, name)`, [names]);
    return rows.map((r) => `${r.name}=${r.setting}${r.unit ? ` ${r.unit}` : ''}`);
  });
}

async function main(): Promise<void> {
  if (systems.length === 0) throw new Error(`--only ${ONLY.join(',')} matches none of: ${SYSTEMS.map((s) => s.name).join(', ')}`);
  process.stderr.write(`soak: ${systems.map((s) => s.name).join(', ')}, ${MINUTES} min each (about ${Math.ceil(MINUTES * systems.length)} min in all), ${RATE} jobs/s\n`);
  const server = await startPostgres({ flavor: FLAVOR, settings: PG_SETTINGS });
  const results: SoakResult[] = [];
  let settings: string[] = [];
  let autovacuum: string[] = [];
  try {
    settings = await showSettings(server.url, ['fsync', 'synchronous_commit', 'full_page_writes', 'shared_buffers', 'max_wal_size', 'max_connections']);
    autovacuum = await showSettings(server.url, [
      'autovacuum', 'track_counts', 'autovacuum_max_workers', 'autovacuum_naptime',
      'autovacuum_vacuum_threshold', 'autovacuum_vacuum_scale_factor', 'autovacuum_vacuum_insert_threshold', 'autovacuum_vacuum_insert_scale_factor',
      'autovacuum_analyze_threshold', 'autovacuum_analyze_scale_factor', 'autovacuum_vacuum_cost_delay', 'autovacuum_vacuum_cost_limit',
    ]);
    if (!autovacuum.includes('autovacuum=on')) throw new Error(`autovacuum is off on this server (${autovacuum.join(', ')}): the soak needs it on`);
    const pm = await postmasterPidOf(server.url);
    for (const [i, system] of systems.entries()) {
      process.stderr.write(`… ${system.name}: ${MINUTES} min at ${RATE} jobs/s\n`);
      results.push(await soak(server, system, i + 1, pm));
    }
  } finally {
    await server.stop();
  }
  const report = render(results, server, settings, autovacuum);
  process.stdout.write(report);
  if (WRITE) await writeResults('soak', 0, report);
  if (results.some((r) => r.error)) process.exitCode = 1;
}

await main();
