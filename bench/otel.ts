/**
 * What OpenTelemetry costs a drain: the same outbox, jobs and server, without telemetry
 * (`none`), with `openTelemetry()` and no SDK registered (`api`: it is then undefined, so the
 * outbox does no telemetry work; the row checks that it costs nothing), and
 * with the SDK registered, spans and metrics kept in memory (`sdk`). One process, one
 * PostgreSQL; the modes take turns each round (none, api, sdk, then the next round in another
 * order), so warm-up and the machine's drift fall on all of them alike. The SDK is registered
 * globally for its turns and unregistered after (the API's `disable`).
 *
 *   node --expose-gc --import tsx bench/otel.ts [--jobs 8000] [--concurrency 32] [--handler-ms 2] [--rounds 8] [--no-write]
 */
import { metrics, trace } from '@opentelemetry/api';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { AggregationTemporality, InMemoryMetricExporter, MeterProvider, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics';
import { createOutbox, defineJob, ok, type Telemetry } from 'postbox';
import { openTelemetry } from 'postbox/otel';
import { createPgConnector } from 'postbox/pg';
import { migrate } from 'postbox/sql';
import { startPostgres, withClient } from '../tests/support/postgres.ts';
import { arg, machineLine, pkgVersion, postmasterPidOf, timedDrain, writeResults } from './common.ts';

const JOBS = Number(arg('jobs') ?? 8000);
const CONCURRENCY = Number(arg('concurrency') ?? 32);
const HANDLER_MS = Number(arg('handler-ms') ?? 2);
const ROUNDS = Number(arg('rounds') ?? 8);
const WRITE = !process.argv.includes('--no-write');

type Mode = 'none' | 'api' | 'sdk';
const anyPayload = { '~standard': { version: 1 as const, vendor: 'bench', validate: (value: unknown) => ({ value }) } };
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};
// The SDK's turns leave spans behind for the collector: collected between turns (run with --expose-gc), not in the next turn's drain.
const collect = (globalThis as { gc?: () => void }).gc ?? (() => undefined);

/** Registers the SDK globally (in-memory exporters) for one turn; returns its removal. */
function registerSdk(): () => Promise<void> {
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(new InMemorySpanExporter())] });
  const meterProvider = new MeterProvider({ readers: [new PeriodicExportingMetricReader({ exporter: new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE), exportIntervalMillis: 60_000 })] });
  trace.setGlobalTracerProvider(tracerProvider);
  metrics.setGlobalMeterProvider(meterProvider);
  return async () => {
    trace.disable();
    metrics.disable();
    await tracerProvider.shutdown();
    await meterProvider.shutdown();
  };
}

const server = await startPostgres();
try {
  const url = await server.createDatabase('otel');
  const job = defineJob({ kind: 'bench.sleep', payload: anyPayload, timeoutMs: 60_000, handle: async () => (await sleep(HANDLER_MS), ok()) });
  const outboxOf = (telemetry: Telemetry | undefined) => createOutbox({ jobs: [job], connect: createPgConnector(url), concurrency: CONCURRENCY, telemetry });
  await withClient(url, (c) => migrate(c));
  const pm = await postmasterPidOf(url);
  const results: Record<Mode, { wall: number[]; client: number[]; db: number[] }> = { none: { wall: [], client: [], db: [] }, api: { wall: [], client: [], db: [] }, sdk: { wall: [], client: [], db: [] } };

  const turn = async (mode: Mode) => {
    const unregister = mode === 'sdk' ? registerSdk() : null;
    try {
      // The outbox is made per turn, as per invocation in a Worker: the API's tracer is looked up then.
      const outbox = outboxOf(mode === 'none' ? undefined : openTelemetry());
      await withClient(url, async (c) => {
        await c.query('TRUNCATE outbox.job');
        for (let i = 0; i < JOBS; i += 1000) await outbox.enqueueMany(c, job, Array.from({ length: Math.min(1000, JOBS - i) }, (_, k) => ({ payload: { i: i + k } })));
        await c.query('VACUUM ANALYZE outbox.job');
      });
      const { claimed, wallMs: wall, clientCpuUs, dbCpuMs } = await timedDrain(outbox, pm);
      if (claimed !== JOBS) throw new Error(`${mode}: drained ${claimed} of ${JOBS}`);
      results[mode].wall.push(wall);
      results[mode].client.push(clientCpuUs / claimed);
      if (dbCpuMs !== null) results[mode].db.push((dbCpuMs * 1000) / claimed);
      process.stderr.write(`${mode}: ${(wall / 1000).toFixed(2)} s, client ${(clientCpuUs / claimed).toFixed(0)} µs/job\n`);
    } finally {
      await unregister?.();
      collect();
    }
  };

  const orders: Mode[][] = [['none', 'api', 'sdk'], ['api', 'sdk', 'none'], ['sdk', 'none', 'api']];
  for (let r = 0; r < ROUNDS; r++) for (const mode of orders[r % orders.length]!) await turn(mode);

  const base = median(results.none.wall);
  const row = (mode: Mode) => {
    const m = results[mode];
    const wall = median(m.wall);
    return `| ${mode} | ${(JOBS / (wall / 1000)).toFixed(0)}/s | ${(wall / base).toFixed(3)}× | ${median(m.client).toFixed(0)} µs | ${m.db.length ? median(m.db).toFixed(0) : '?'} µs |`;
  };
  const report = [
    `# OpenTelemetry's cost on a drain (${new Date().toISOString().slice(0, 10)})`,
    '',
    `- command: \`node --expose-gc --import tsx bench/otel.ts --jobs ${JOBS} --concurrency ${CONCURRENCY} --handler-ms ${HANDLER_MS} --rounds ${ROUNDS}\``,
    `- ${JOBS} jobs of ${HANDLER_MS} ms drained at c=${CONCURRENCY} on one connection, ${ROUNDS} turns per mode, medians; @opentelemetry/api ${pkgVersion('@opentelemetry/api')}, sdk-trace-base ${pkgVersion('@opentelemetry/sdk-trace-base')}, sdk-metrics ${pkgVersion('@opentelemetry/sdk-metrics')}`,
    machineLine(),
    '- none: no `telemetry`; api: `openTelemetry()` with no SDK registered (undefined: no telemetry work); sdk: the SDK registered, spans to an in-memory exporter (one per attempt, claim and enqueue), metrics to an in-memory reader',
    '',
    '| mode | jobs/s | wall ÷ none | client CPU / job | db CPU / job |',
    '| --- | ---: | ---: | ---: | ---: |',
    row('none'),
    row('api'),
    row('sdk'),
    '',
    `Every turn (wall s): ${(['none', 'api', 'sdk'] as Mode[]).map((m) => `${m} ${results[m].wall.map((w) => (w / 1000).toFixed(2)).join(' ')}`).join('; ')}`,
    '',
  ].join('\n');
  process.stdout.write(report);
  if (WRITE) await writeResults('otel', 0, report);
} finally {
  await server.stop();
}
