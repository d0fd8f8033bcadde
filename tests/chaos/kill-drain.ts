/**
 * Kill-drain: a crash-and-restart run of the pipelined drain, proving it loses no job and
 * applies no stale settle.
 *
 *   node --import tsx tests/chaos/kill-drain.ts [--jobs 1500] [--kills 4] [--restarts 1]
 *                                               [--workers 3] [--pg embedded|debian15] [--seed N]
 *
 * 1. Starts PostgreSQL, migrates, enqueues N `chaos.work` jobs in one transaction, one in ten
 *    depending on the two before it (dependsOn), in batches of 100 with a completion job each.
 * 2. Runs `--workers` worker processes (kill-drain-worker.ts: the real engine, concurrency 8,
 *    a sweep whenever a drain finds nothing due). At random points of progress it SIGKILLs a
 *    random worker (and starts a replacement), or restarts PostgreSQL (fast shutdown, same data
 *    directory and port). After every such event but the last it moves the workers' shared
 *    clock past every lease: the dead worker's attempts become recoverable, and so do the live
 *    workers' in-flight ones, as if those workers had stalled past their leases; their late
 *    settles must then be refused (the attempt_seq fence).
 * 3. Once no job is due, stops the workers and recovers in this process: the clock past every
 *    lease, a sweep, then drains until no job is pending, running or retrying.
 * 4. Verifies every job and attempt (see verify(): also that no child ran before both its
 *    parents had succeeded, and that each batch's completion ran after all its members had ended,
 *    counting all of them), prints the summary (the last line is
 *    `KILL-DRAIN-SUMMARY {json}`) and exits 1 on any violation, naming the job.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { createOutbox, runSweep, type RunReport } from 'postbox';
import { createPgConnector } from 'postbox/pg';
import { migrate } from 'postbox/sql';
import { createTestClock, runUntilIdle } from 'postbox/testing';
import { ATTEMPTS } from '../support/ledger.ts';
import { startPostgres, withClient, type PgFlavor, type PgServer } from '../support/postgres.ts';
import {
  BATCH_SIZE, COMPLETIONS_TABLE, CONCURRENCY, DONE_KIND, KIND, LEASE_MS, RUNS_TABLE, SWEEP_OPTIONS, batchDoneJob, chaosJob, hasParents, type FromWorker, type ToWorker,
} from './kill-drain-job.ts';

// ---------------------------------------------------------------------------------------------
// Options

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  if (i >= 0) return process.argv[i + 1];
  return process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
}
function intArg(name: string, fallback: number, min: number): number {
  const value = Number(arg(name) ?? fallback);
  if (!Number.isInteger(value) || value < min) throw new Error(`--${name} must be an integer ≥ ${min}`);
  return value;
}

const JOBS = intArg('jobs', 1500, 1);
const KILLS = intArg('kills', 4, 0);
const RESTARTS = intArg('restarts', 1, 0);
const WORKERS = intArg('workers', 3, 1);
const SEED = intArg('seed', Math.floor(Math.random() * 2 ** 31), 0);
const FLAVOR = (arg('pg') ?? process.env.POSTBOX_PG ?? 'embedded') as PgFlavor;
/** A job is crashed at most once per jump plus once by the final recovery; keep that under maxCrashes. */
if (KILLS + RESTARTS + 10 > chaosJob.policy.maxCrashes) throw new Error(`--kills + --restarts must stay below ${chaosJob.policy.maxCrashes - 10}`);

const WORKER_SCRIPT = path.join(path.dirname(fileURLToPath(import.meta.url)), 'kill-drain-worker.ts');
/** A worker that ignores `stop` this long is a hang. */
const STOP_TIMEOUT_MS = 20_000;
/** After the last event: how long the counts must stand still before the workers are stopped. */
const QUIET_MS = 2_000;
/** Bound on waiting for the workers to drain after the last event. */
const SETTLE_TIMEOUT_MS = 120_000;

// Seeded, so a failing schedule can be replayed (timing still varies from run to run).
let rngState = SEED >>> 0;
function random(): number {
  rngState = (rngState + 0x6d2b79f5) >>> 0;
  let t = rngState;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}

const startedAt = performance.now();
const log = (message: string): void => {
  process.stderr.write(`[${((performance.now() - startedAt) / 1000).toFixed(1).padStart(5)}s] ${message}\n`);
};

// ---------------------------------------------------------------------------------------------
// Workers

interface Worker {
  id: number;
  child: ChildProcess;
  ready: boolean;
  killed: boolean;
  counts: Record<string, number>;
  output: string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

const workers: Worker[] = [];
/** The workers' clock is real time plus this; it only grows. */
let offsetMs = 0;

function spawnWorker(dbUrl: string): Worker {
  const child = spawn(process.execPath, ['--import', 'tsx', WORKER_SCRIPT], {
    env: { ...process.env, CHAOS_DB_URL: dbUrl, CHAOS_CLOCK_OFFSET_MS: String(offsetMs) },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  const worker: Worker = {
    id: workers.length + 1,
    child,
    ready: false,
    killed: false,
    counts: {},
    output: '',
    exited: new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal }))),
  };
  const keep = (chunk: Buffer): void => {
    worker.output = (worker.output + chunk.toString('utf8')).slice(-4000);
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  child.on('message', (message: FromWorker) => {
    if (message.type === 'counts') worker.counts = message.counts;
    else if (message.type === 'ready') {
      worker.ready = true;
      // It may have been spawned before the latest jump.
      tell(worker, { type: 'clock', offsetMs });
    }
  });
  workers.push(worker);
  return worker;
}

function tell(worker: Worker, message: ToWorker): void {
  if (worker.child.connected) worker.child.send(message, () => undefined);
}

const live = (): Worker[] => workers.filter((w) => !w.killed && w.child.exitCode === null && w.child.signalCode === null);

// ---------------------------------------------------------------------------------------------
// Progress, read through a connection that survives the database restart

type Status = Record<'pending' | 'running' | 'retrying' | 'succeeded' | 'dead' | 'cancelled' | 'waiting', number>;

class Monitor {
  #client: pg.Client | null = null;
  last: Status = { pending: 0, running: 0, retrying: 0, succeeded: 0, dead: 0, cancelled: 0, waiting: 0 };
  constructor(readonly url: string) {}

  /** The job counts by status; the last known ones while the database is away. */
  async read(): Promise<Status> {
    try {
      if (!this.#client) {
        const client = new pg.Client({ connectionString: this.url, connectionTimeoutMillis: 2_000 });
        client.on('error', () => undefined);
        this.#client = client;
        await client.connect();
      }
      const { rows } = await this.#client.query(`SELECT status, count(*)::int AS n FROM outbox.job GROUP BY status`);
      const status: Status = { pending: 0, running: 0, retrying: 0, succeeded: 0, dead: 0, cancelled: 0, waiting: 0 };
      for (const row of rows as { status: keyof Status; n: number }[]) status[row.status] = row.n;
      this.last = status;
    } catch {
      const client = this.#client;
      this.#client = null;
      void client?.end().catch(() => undefined);
    }
    return this.last;
  }

  async close(): Promise<void> {
    await this.#client?.end().catch(() => undefined);
    this.#client = null;
  }
}

// ---------------------------------------------------------------------------------------------
// The run

type ChaosEvent = { at: number; type: 'kill' | 'restart' };
interface Fired {
  type: 'kill' | 'restart';
  at: number;
  succeeded: number;
  running: number;
  worker?: number;
  ms?: number;
}

async function main(): Promise<number> {
  log(`kill-drain: ${JOBS} jobs, ${WORKERS} workers × concurrency ${CONCURRENCY}, ${KILLS} kills, ${RESTARTS} restarts, pg ${FLAVOR}, seed ${SEED}`);
  const server = await startPostgres({ flavor: FLAVOR });
  let monitor: Monitor | undefined;
  try {
    const dbUrl = await server.createDatabase('chaos');
    monitor = new Monitor(dbUrl);
    await setUp(dbUrl);
    log(`enqueued ${JOBS} jobs on PostgreSQL ${server.serverVersion}`);

    for (let i = 0; i < WORKERS; i++) spawnWorker(dbUrl);
    const fired = await unleash(server, dbUrl, monitor);
    const stopTimeouts = await settleAndStop(monitor);
    const lostByLiveWorkers = await openSinceLastEvent(dbUrl);
    const recovery = await recoverInParent(dbUrl);
    const result = await verify(dbUrl);

    const problems = [...stopTimeouts, ...unexpectedExits(), ...lostByLiveWorkers, ...result.violations];
    const summary = {
      ok: problems.length === 0,
      jobs: JOBS,
      seed: SEED,
      pg: FLAVOR,
      workers: workers.length,
      kills: fired.filter((f) => f.type === 'kill').length,
      restarts: fired.filter((f) => f.type === 'restart').length,
      jumps,
      recoveredMidRun: midRunRecovered,
      ...result.stats,
      recoveredByParent: recovery,
      workerEvents: workerTotals(),
      violations: problems.length,
      seconds: Math.round((performance.now() - startedAt) / 100) / 10,
    };
    for (const f of fired) {
      const what = f.type === 'kill' ? `killed worker ${f.worker}` : `restarted PostgreSQL (${f.ms} ms)`;
      console.log(`event at ${(f.at * 100).toFixed(0)}%: ${what} with ${f.succeeded} succeeded, ${f.running} running`);
    }
    console.log(`attempt outcomes: ${Object.entries(result.stats.outcomes).map(([k, n]) => `${k} ${n}`).join(', ')}`);
    console.log(`duplicates (at least once): ${result.stats.duplicateJobs} jobs ran more than once, ${result.stats.extraRuns} extra runs, at most ${result.stats.maxRuns} runs of one job`);
    console.log(`recovered by the parent: ${JSON.stringify(recovery)}`);
    for (const p of problems.slice(0, 50)) console.log(`VIOLATION ${p}`);
    if (problems.length > 50) console.log(`… and ${problems.length - 50} more violations`);
    console.log(`KILL-DRAIN-SUMMARY ${JSON.stringify(summary)}`);
    return problems.length === 0 ? 0 : 1;
  } finally {
    for (const w of live()) w.child.kill('SIGKILL');
    await monitor?.close();
    await server.stop();
  }
}

async function setUp(dbUrl: string): Promise<void> {
  const outbox = createOutbox({ jobs: [chaosJob, batchDoneJob], connect: createPgConnector(dbUrl) });
  await withClient(dbUrl, async (c) => {
    await migrate(c);
    await c.query(RUNS_TABLE);
    await c.query(COMPLETIONS_TABLE);
    await c.query('BEGIN');
    const ids: string[] = [];
    // In batches of BATCH_SIZE, each with a completion job (a dependency's parent may sit in the batch before).
    for (let start = 0; start < JOBS; start += BATCH_SIZE) {
      await outbox.batch(c, { onComplete: { job: batchDoneJob, payload: { batch: start / BATCH_SIZE } } }, async (m) => {
        for (let i = start; i < Math.min(JOBS, start + BATCH_SIZE); i++) {
          const parents = hasParents(i) && i >= 2 ? { dependsOn: [ids[i - 1]!, ids[i - 2]!] } : {};
          const r = await m.enqueue(chaosJob, { payload: { i }, ...parents });
          if (r.status !== 'created') throw new Error(`enqueue ${i}: ${JSON.stringify(r)}`);
          ids.push(r.id);
        }
      });
    }
    await c.query('COMMIT');
  });
}

let jumps = 0;
let midRunRecovered = 0;
/** The workers' clock when the last event had done its damage (worker kills and restarts only). */
let lastEventAt = 0;

/** Fires the kills and restarts at random points of progress. */
async function unleash(server: PgServer, dbUrl: string, monitor: Monitor): Promise<Fired[]> {
  // A sweep whose invocation has no time left to run a job: it recovers expired leases only
  // (the drain step plans no kind whose timeout outlives the deadline).
  const recoveryOnly = createOutbox({ jobs: [chaosJob, batchDoneJob], connect: createPgConnector(dbUrl), clock: { now: () => Date.now() + offsetMs } });
  const events: ChaosEvent[] = [
    ...Array.from({ length: KILLS }, (): ChaosEvent => ({ at: 0.05 + 0.85 * random(), type: 'kill' })),
    ...Array.from({ length: RESTARTS }, (): ChaosEvent => ({ at: 0.3 + 0.4 * random(), type: 'restart' })),
  ].sort((a, b) => a.at - b.at);
  const fired: Fired[] = [];
  for (const [i, event] of events.entries()) {
    const status = await progressTo(monitor, Math.ceil(event.at * JOBS));
    await sleep(50 * random());
    if (event.type === 'kill') {
      // A worker still booting holds no claim: kill one that drains, when there is one.
      const candidates = live().filter((w) => w.ready).length > 0 ? live().filter((w) => w.ready) : live();
      const victim = candidates[Math.floor(random() * candidates.length)]!;
      victim.killed = true;
      victim.child.kill('SIGKILL');
      await victim.exited;
      const replacement = spawnWorker(dbUrl);
      log(`killed worker ${victim.id} at ${status.succeeded}/${JOBS} succeeded (${status.running} running); worker ${replacement.id} replaces it`);
      fired.push({ type: 'kill', at: event.at, succeeded: status.succeeded, running: status.running, worker: victim.id });
      lastEventAt = Date.now() + offsetMs;
    } else {
      const t0 = performance.now();
      await server.restart();
      const ms = Math.round(performance.now() - t0);
      log(`restarted PostgreSQL in ${ms} ms at ${status.succeeded}/${JOBS} succeeded (${status.running} running)`);
      fired.push({ type: 'restart', at: event.at, succeeded: status.succeeded, running: status.running, ms });
      lastEventAt = Date.now() + offsetMs;
    }
    // The last event's stranded attempts are left to the recovery in this process.
    if (i < events.length - 1) {
      await sleep(50 + 250 * random());
      offsetMs += LEASE_MS + 1_000;
      jumps++;
      for (const w of live()) if (w.ready) tell(w, { type: 'clock', offsetMs });
      // Recovery at once, racing the live workers' running handlers: their settles come late.
      const swept = await runSweep(recoveryOnly, { ...SWEEP_OPTIONS, invocationBudgetMs: 1 });
      midRunRecovered += swept.recovered;
      const failed = swept.failedSteps.length > 0 ? ` (failed steps: ${swept.failedSteps.join(', ')})` : '';
      log(`clock +${LEASE_MS + 1_000} ms: every lease taken so far has expired; a sweep recovered ${swept.recovered} attempts${failed}`);
    }
  }
  return fired;
}

/**
 * Waits until `succeeded` reaches `target` and some attempt is in flight (right after a burst of
 * kills every worker may still be booting: an event then would hit no work), or until progress
 * stalls for 3 s.
 */
async function progressTo(monitor: Monitor, target: number): Promise<Status> {
  let status = await monitor.read();
  let seen = status.succeeded;
  let since = performance.now();
  while (status.succeeded < target || (status.running === 0 && status.succeeded < JOBS)) {
    if (performance.now() - since > 3_000) {
      log(`progress stalled at ${status.succeeded}/${JOBS}; firing the next event anyway`);
      break;
    }
    await sleep(20);
    status = await monitor.read();
    if (status.succeeded !== seen) {
      seen = status.succeeded;
      since = performance.now();
    }
  }
  return status;
}

/** Lets the workers drain what is due, then stops them. Returns problems (workers that would not stop). */
async function settleAndStop(monitor: Monitor): Promise<string[]> {
  const deadline = performance.now() + SETTLE_TIMEOUT_MS;
  let previous = '';
  let quietSince = performance.now();
  for (;;) {
    const s = await monitor.read();
    // Every job and every batch's completion.
    if (s.succeeded === JOBS + Math.ceil(JOBS / BATCH_SIZE)) break;
    const key = `${s.succeeded}/${s.running}/${s.pending}/${s.retrying}`;
    if (key !== previous) {
      previous = key;
      quietSince = performance.now();
    } else if (s.pending + s.retrying === 0 && performance.now() - quietSince > QUIET_MS) break;
    if (performance.now() > deadline) {
      log(`workers still busy after ${SETTLE_TIMEOUT_MS / 1000} s (${key}); stopping them`);
      break;
    }
    await sleep(100);
  }
  const s = monitor.last;
  log(`workers done: ${s.succeeded} succeeded, ${s.running} running (stranded), ${s.pending + s.retrying} due; stopping ${live().length} workers`);
  const problems: string[] = [];
  await Promise.all(
    live().map(async (w) => {
      tell(w, { type: 'stop' });
      const timer = sleep(STOP_TIMEOUT_MS).then(() => 'timeout' as const);
      if ((await Promise.race([w.exited, timer])) === 'timeout') {
        problems.push(`worker ${w.id} did not stop within ${STOP_TIMEOUT_MS / 1000} s: ${w.output.trim().split('\n').slice(-3).join(' | ')}`);
        w.killed = true;
        w.child.kill('SIGKILL');
        await w.exited;
      }
    }),
  );
  return problems;
}

/**
 * Attempts left open by workers that were stopped, not killed. After the last event no clock
 * moves and no worker dies, so an attempt claimed after it must have been settled by the time
 * its worker stopped: one still open was lost by a live drain (and would only have come back
 * through the lease's expiry).
 */
async function openSinceLastEvent(dbUrl: string): Promise<string[]> {
  return withClient(dbUrl, async (c) => {
    const { rows } = await c.query(
      // A running attempt is its job's (its attempt row is written when it ends).
      `SELECT id AS job_id, attempt_seq AS seq, (extract(epoch from started_at) * 1000)::bigint AS started_ms,
              (extract(epoch from started_at) * 1000)::bigint > $1 AS after_last
         FROM outbox.job WHERE status = 'running' ORDER BY started_at`,
      [lastEventAt],
    );
    const after = (rows as { job_id: string; seq: number; started_ms: string; after_last: boolean }[]).filter((r) => r.after_last);
    log(`after the workers stopped: ${rows.length} attempts open (stranded by the last event), ${after.length} of them claimed after it`);
    return after.map((r) => `job ${r.job_id}: attempt ${r.seq}, claimed ${Number(r.started_ms) - lastEventAt} ms after the last event by a live worker, was never settled`);
  });
}

/** Workers that died on their own (not by our SIGKILL) or exited non-zero, or kept database sockets open after their last session closed. */
function unexpectedExits(): string[] {
  const exits = workers
    .filter((w) => !w.killed && w.child.exitCode !== 0)
    .map((w) => `worker ${w.id} exited ${w.child.exitCode ?? w.child.signalCode}: ${w.output.trim().split('\n').slice(-5).join(' | ')}`);
  const leaks = workers
    .filter((w) => (w.counts['leak.sockets'] ?? 0) > 0)
    .map((w) => `worker ${w.id} still had ${w.counts['leak.sockets']} database socket(s) open after its last session closed (a leaked connection)`);
  return [...exits, ...leaks];
}

function workerTotals(): Record<string, number> {
  const totals: Record<string, number> = {};
  const keep = ['event.stale_settle', 'event.claim_late', 'event.recovered', 'event.settle_failed', 'event.infra_error', 'drain.released', 'drain.stale', 'sweep.recovered', 'loop.errors'];
  for (const w of workers) for (const key of keep) totals[key.replace(/^event\./, '')] = (totals[key.replace(/^event\./, '')] ?? 0) + (w.counts[key] ?? 0);
  return totals;
}

/** The recovery a cron sweep would do once every lease has run out, until nothing is left to run. */
async function recoverInParent(dbUrl: string): Promise<{ passes: number; recovered: number; succeeded: number; stale: number }> {
  const clock = createTestClock(Date.now() + offsetMs + LEASE_MS + 1_000);
  const outbox = createOutbox({ jobs: [chaosJob, batchDoneJob], connect: createPgConnector(dbUrl), concurrency: CONCURRENCY, clock });
  const total: RunReport & { passes: number } = { passes: 0, claimed: 0, succeeded: 0, retrying: 0, dead: 0, cancelled: 0, pending: 0, claimLate: 0, released: 0, stale: 0, recovered: 0, throttled: 0 };
  const add = (r: RunReport): void => {
    for (const key of Object.keys(r) as (keyof RunReport)[]) if (typeof r[key] === 'number' && key in total) total[key] += r[key];
  };
  await withClient(dbUrl, async (db) => {
    for (let pass = 1; pass <= 10; pass++) {
      total.passes = pass;
      add(await runSweep(outbox, SWEEP_OPTIONS));
      add(await runUntilIdle(outbox, { clock, db, maxRounds: 10_000 }));
      const { rows } = await db.query(`SELECT count(*)::int AS n FROM outbox.job WHERE status IN ('pending', 'running', 'retrying', 'waiting')`);
      if (rows[0].n === 0) break;
      clock.advance(LEASE_MS + 1_000);
    }
  });
  log(`parent recovery: ${total.recovered} recovered, ${total.succeeded} succeeded in ${total.passes} pass(es)`);
  return { passes: total.passes, recovered: total.recovered, succeeded: total.succeeded, stale: total.stale };
}

// ---------------------------------------------------------------------------------------------
// Verification

interface JobFacts {
  id: string;
  status: string;
  attempt_seq: number;
  last_error_code: string | null;
  n_attempts: number;
  min_seq: number | null;
  max_seq: number | null;
  open: number;
  oks: number;
  ok_seq: number | null;
  /** Attempts that started a handler and did not win: a run of theirs is a legal duplicate. */
  lost_started: number;
  crashed: number;
  runs: number;
}

/**
 * Per job: it succeeded; its attempt rows are numbered 1..attempt_seq and all closed; exactly one
 * is `ok` and it is the last (a stale settle that won would leave an older ok, or the final
 * attempt open); its handler ran at least once, and every run beyond the winning one belongs to
 * an attempt that started and lost (crash, retry, timeout, hook_failed): released and
 * claim_late attempts never start a handler, so they explain no duplicate.
 */
async function verify(dbUrl: string) {
  return withClient(dbUrl, async (c) => {
    const { rows } = await c.query(`
      SELECT j.id, j.status, j.attempt_seq, j.last_error_code,
             count(a.seq)::int AS n_attempts, min(a.seq) AS min_seq, max(a.seq) AS max_seq,
             count(a.seq) FILTER (WHERE a.outcome IS NULL OR a.finished_at IS NULL)::int AS open,
             count(a.seq) FILTER (WHERE a.outcome = 'ok')::int AS oks,
             max(a.seq) FILTER (WHERE a.outcome = 'ok') AS ok_seq,
             count(a.seq) FILTER (WHERE a.outcome IN ('crash', 'retry', 'timeout', 'hook_failed'))::int AS lost_started,
             count(a.seq) FILTER (WHERE a.outcome = 'crash')::int AS crashed,
             (SELECT count(*)::int FROM public.runs r WHERE r.job_id = j.id) AS runs
        FROM outbox.job j LEFT JOIN ${ATTEMPTS} a ON a.job_id = j.id
       WHERE j.kind = $1
       GROUP BY j.id`, [KIND]);
    const jobs = rows as JobFacts[];
    const violations: string[] = [];
    if (jobs.length !== JOBS) violations.push(`${jobs.length} jobs in outbox.job, ${JOBS} enqueued`);
    let duplicateJobs = 0;
    let duplicatesWithCrash = 0;
    let extraRuns = 0;
    let maxRuns = 0;
    for (const j of jobs) {
      if (j.status !== 'succeeded') violations.push(`job ${j.id} ended ${j.status}${j.last_error_code ? ` (${j.last_error_code})` : ''}`);
      if (j.open > 0) violations.push(`job ${j.id}: ${j.open} attempt(s) never closed (attempt_seq ${j.attempt_seq})`);
      if (j.n_attempts !== j.attempt_seq || j.min_seq !== 1 || j.max_seq !== j.attempt_seq) {
        violations.push(`job ${j.id}: ${j.n_attempts} attempt rows (seq ${j.min_seq}..${j.max_seq}) for attempt_seq ${j.attempt_seq}`);
      }
      if (j.oks !== 1) violations.push(`job ${j.id}: ${j.oks} attempts settled ok`);
      else if (j.ok_seq !== j.attempt_seq) violations.push(`job ${j.id}: attempt ${j.ok_seq} settled ok but the last attempt is ${j.attempt_seq} (a stale settle won)`);
      if (j.runs < 1) violations.push(`job ${j.id} never ran (${j.n_attempts} attempts)`);
      if (j.runs > 1 + j.lost_started) {
        violations.push(`job ${j.id} ran ${j.runs} times, but only ${1 + j.lost_started} of its ${j.n_attempts} attempts started a handler`);
      }
      if (j.runs > 1) {
        duplicateJobs++;
        extraRuns += j.runs - 1;
        if (j.crashed > 0) duplicatesWithCrash++;
      }
      maxRuns = Math.max(maxRuns, j.runs);
    }
    // Dependencies: every child ran only once both its parents had succeeded, and ran (every job succeeded, above).
    const early = (await c.query(`SELECT job_id, attempt, open_parents FROM public.runs WHERE open_parents > 0 LIMIT 20`)).rows;
    for (const r of early) violations.push(`job ${r.job_id}: attempt ${r.attempt} ran with ${r.open_parents} parent(s) not yet succeeded`);
    const edges = (await c.query(`SELECT count(*)::int AS n FROM outbox.job_edge`)).rows[0].n as number;
    const expectedEdges = 2 * Array.from({ length: JOBS }, (_, i) => i).filter((i) => hasParents(i) && i >= 2).length + JOBS;
    if (edges !== expectedEdges) violations.push(`${edges} dependency edges, ${expectedEdges} enqueued`);
    // Batches: one completion job each, succeeded; every run of it began after all its members had
    // ended and was told of all of them, succeeded (every member succeeds here).
    const done = (await c.query(`
      SELECT j.id, j.status, count(r.job_id)::int AS runs,
             count(r.job_id) FILTER (WHERE r.open_members > 0 OR r.succeeded <> r.total
                                  OR r.total <> (SELECT count(*) FROM outbox.job_edge e WHERE e.child_id = j.id))::int AS wrong
        FROM outbox.job j LEFT JOIN public.completions r ON r.job_id = j.id
       WHERE j.kind = $1 GROUP BY j.id`, [DONE_KIND])).rows as { id: string; status: string; runs: number; wrong: number }[];
    const batches = Math.ceil(JOBS / BATCH_SIZE);
    if (done.length !== batches) violations.push(`${done.length} batch completion jobs, ${batches} batches enqueued`);
    for (const d of done) {
      if (d.status !== 'succeeded') violations.push(`batch completion ${d.id} ended ${d.status}`);
      if (d.runs < 1) violations.push(`batch completion ${d.id} never ran`);
      if (d.wrong > 0) violations.push(`batch completion ${d.id}: ${d.wrong} run(s) began with members not ended or miscounted`);
    }
    const orphans = (await c.query(`SELECT count(*)::int AS n FROM public.runs r WHERE NOT EXISTS (SELECT 1 FROM outbox.job j WHERE j.id = r.job_id)`)).rows[0].n as number;
    if (orphans > 0) violations.push(`${orphans} runs of jobs that do not exist`);
    const outcomes: Record<string, number> = {};
    for (const row of (await c.query(`SELECT COALESCE(outcome, '(open)') AS outcome, count(*)::int AS n FROM ${ATTEMPTS} a GROUP BY 1 ORDER BY 2 DESC`)).rows) {
      outcomes[row.outcome as string] = row.n as number;
    }
    const runs = (await c.query(`SELECT count(*)::int AS n FROM public.runs`)).rows[0].n as number;
    const stats = {
      succeeded: jobs.filter((j) => j.status === 'succeeded').length,
      attempts: jobs.reduce((n, j) => n + j.n_attempts, 0),
      runs,
      outcomes,
      jobsWithCrash: jobs.filter((j) => j.crashed > 0).length,
      batches: done.filter((d) => d.status === 'succeeded' && d.runs >= 1 && d.wrong === 0).length,
      duplicateJobs,
      duplicatesWithCrash,
      extraRuns,
      maxRuns,
    };
    return { violations, stats };
  });
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(error);
    process.exit(2);
  },
);
