/**
 * A CPU profile of one Postbox drain and nothing else (no enqueue, no peers): where the client's
 * time goes per job. Prints wall time and CPU per job (client and database server); with --profile FILE also
 * writes a .cpuprofile of the drain (open it in Chrome DevTools).
 *
 *   node --import tsx bench/probe-drain.ts [--jobs 8000] [--concurrency 32] [--handler-ms 2] [--profile /tmp/drain.cpuprofile]  [--statements] [--pg-setting name=value] [--sql STATEMENT] [--pause MS] [--telemetry none|api|sdk] [--fair] [--tenants N] [--cold]
 *
 * After the enqueue the database is vacuumed and analyzed, as bench/throughput.ts does (a running
 * outbox's tables have statistics: autovacuum's, or the sweep's compact step's). --cold skips it:
 * the drain then plans on never-analyzed tables, as on a fresh install.
 *
 * --fair drains with `fairShare: true`; --tenants N spreads the jobs over N tenant keys, round
 * robin (default none: every job without a tenant).
 *
 * --telemetry gives the outbox `openTelemetry()` from postbox/otel: `api` with no SDK registered
 * (OpenTelemetry's no-op API, what an outbox costs with telemetry wired and nothing exporting),
 * `sdk` with the SDK's tracer and meter providers registered, spans going to an in-memory exporter.
 *
 * --sql STATEMENT (repeatable) runs after the migrations, before the enqueue: a schema change to
 * try (an index dropped, a fillfactor) without a migration.
 *
 * --pause MS waits that long before the drain, after printing the postmaster's pid: time to
 * attach a profiler to the server's processes (`perf record -p $(pgrep -d, postgres)`).
 *
 * --statements loads pg_stat_statements (with planning tracked) and prints, per statement of
 * the drain: calls, rows, and the server's mean planning and execution time.
 */
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { createOutbox, defineJob, ok } from 'postbox';
import { createPgConnector } from 'postbox/pg';
import { migrate } from 'postbox/sql';
import { startPostgres, withClient } from '../tests/support/postgres.ts';
import { arg, postmasterPidOf, serverCpuByProcess, timedDrain } from './common.ts';

const JOBS = Number(arg('jobs') ?? 8000);
const CONCURRENCY = Number(arg('concurrency') ?? 32);
const HANDLER_MS = Number(arg('handler-ms') ?? 2);
const OUT = arg('profile');
const STATEMENTS = process.argv.includes('--statements');
const TELEMETRY = arg('telemetry') ?? 'none';
const FAIR = process.argv.includes('--fair');
const TENANTS = Number(arg('tenants') ?? 0);
const COLD = process.argv.includes('--cold');
const PAUSE_MS = Number(arg('pause') ?? 0);
if (!['none', 'api', 'sdk'].includes(TELEMETRY)) throw new Error('--telemetry: none, api or sdk');
if (TELEMETRY === 'sdk') {
  const { trace, metrics } = await import('@opentelemetry/api');
  const { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } = await import('@opentelemetry/sdk-trace-base');
  const { MeterProvider, PeriodicExportingMetricReader, InMemoryMetricExporter, AggregationTemporality } = await import('@opentelemetry/sdk-metrics');
  trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(new InMemorySpanExporter())] }));
  const exporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  metrics.setGlobalMeterProvider(new MeterProvider({ readers: [new PeriodicExportingMetricReader({ exporter, exportIntervalMillis: 60_000 })] }));
}
const telemetry = TELEMETRY === 'none' ? undefined : (await import('postbox/otel')).openTelemetry();

const anyPayload = { '~standard': { version: 1 as const, vendor: 'bench', validate: (value: unknown) => ({ value }) } };
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

// --pg-setting name=value (repeatable): a server setting to try, e.g. plan_cache_mode=force_generic_plan.
const schemaTrials = process.argv.flatMap((a, i) => (process.argv[i - 1] === '--sql' ? [a] : []));
const extra = Object.fromEntries(process.argv.flatMap((a, i) => (process.argv[i - 1] === '--pg-setting' ? [a.split('=') as [string, string]] : [])));
const server = await startPostgres({
  settings: { ...extra, ...(STATEMENTS ? { shared_preload_libraries: 'pg_stat_statements', 'pg_stat_statements.track_planning': 'on' } : {}) },
});
try {
  const url = await server.createDatabase('probe');
  const job = defineJob({ kind: 'bench.sleep', payload: anyPayload, timeoutMs: 60_000, handle: async () => (await sleep(HANDLER_MS), ok()) });
  const outbox = createOutbox({ jobs: [job], connect: createPgConnector(url), concurrency: CONCURRENCY, telemetry, fairShare: FAIR });
  await withClient(url, async (c) => {
    await migrate(c);
    for (const text of schemaTrials) await c.query(text);
    if (STATEMENTS) await c.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
    for (let i = 0; i < JOBS; i += 1000) {
      await outbox.enqueueMany(c, job, Array.from({ length: Math.min(1000, JOBS - i) }, (_, k) => ({ payload: { i: i + k }, ...(TENANTS > 0 ? { tenantKey: `t${(i + k) % TENANTS}` } : {}) })));
    }
    if (!COLD) await c.query('VACUUM ANALYZE');
  });
  const pm = await postmasterPidOf(url);
  if (PAUSE_MS > 0) {
    console.log(`server processes: ${pm}; the drain starts in ${PAUSE_MS} ms`);
    await sleep(PAUSE_MS);
  }
  const session = new Session();
  if (OUT) {
    session.connect();
    await session.post('Profiler.enable');
    await session.post('Profiler.setSamplingInterval', { interval: 100 });
    await session.post('Profiler.start');
  }
  if (STATEMENTS) await withClient(url, (c) => c.query('SELECT pg_stat_statements_reset()'));
  const byProcess0 = pm === null ? new Map<string, number>() : serverCpuByProcess(pm);
  const { claimed, wallMs: wall, clientCpuUs, dbCpuMs } = await timedDrain(outbox, pm);
  const byProcess1 = pm === null ? new Map<string, number>() : serverCpuByProcess(pm);
  if (OUT) writeFileSync(OUT, JSON.stringify((await session.post('Profiler.stop')).profile));
  const perJob = (us: number) => (us / claimed).toFixed(0);
  console.log(
    `${claimed} jobs, c=${CONCURRENCY}, ${HANDLER_MS} ms: ${(wall / 1000).toFixed(2)} s, ${(claimed / (wall / 1000)).toFixed(0)} jobs/s; ` +
      `CPU per job: client ${perJob(clientCpuUs)} µs, db ${dbCpuMs === null ? '?' : perJob(dbCpuMs * 1000)} µs${OUT ? `; profile ${OUT}` : ''}`,
  );
  const split = [...byProcess1].map(([k, v]) => [k, v - (byProcess0.get(k) ?? 0)] as const).filter(([, v]) => v > 0);
  console.log(`server CPU by process (µs per job; ended processes not listed): ${split.map(([k, v]) => `${k} ${perJob(v * 1000)}`).join(', ')}`);
  if (STATEMENTS) {
    const { rows } = await withClient(url, (c) =>
      c.query(`SELECT calls, plans, rows, round(mean_plan_time::numeric * 1000) AS plan_us, round(mean_exec_time::numeric * 1000) AS exec_us,
                      left(regexp_replace(query, '\\s+', ' ', 'g'), 90) AS query
                 FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
                ORDER BY total_exec_time + total_plan_time DESC LIMIT 12`),
    );
    console.log('calls\tplans\trows\tplan µs\texec µs\tstatement');
    for (const r of rows) console.log(`${r.calls}\t${r.plans}\t${r.rows}\t${r.plan_us}\t${r.exec_us}\t${r.query}`);
  }
} finally {
  await server.stop();
}
