// OpenTelemetry inside workerd against a real PostgreSQL (tests/shim/fixtures/otel-worker.ts):
// with the SDK's in-memory exporters registered, an outbox given `openTelemetry()` records a
// producer span per enqueue (a child of the request's span), a consumer span per attempt with
// the messaging attributes and its outcome, spans for claim statements, and the attempt,
// retry, dead-letter and enqueue counters and the attempt-duration histogram with the values
// the drain produced.
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import { metrics, trace } from '@opentelemetry/api';
import { BasicTracerProvider } from '@opentelemetry/sdk-trace-base';
import { MeterProvider } from '@opentelemetry/sdk-metrics';
import { openTelemetry } from 'postbox/otel';
import { useMigratedDb } from '../support/migrated-db.ts';
import { startWorker, type TestWorker } from '../support/worker.ts';

const fixtures = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures');
const db = useMigratedDb('otel');
let worker: TestWorker;


interface SpanView {
  name: string;
  kind: number;
  traceId: string;
  spanId: string;
  parentSpanId: string | null;
  links: { traceId: string; spanId: string }[];
  attributes: Record<string, string | number>;
  status: { code: number; message?: string };
}
interface MetricView {
  name: string;
  points: { attributes: Record<string, string>; value: number | { count: number } }[];
}

/** The Worker's JSON answer; anything else fails the test with what it said. */
async function json(res: Response): Promise<any> {
  const text = await res.text();
  assert.equal(res.status, 200, text);
  return JSON.parse(text);
}
const post = async (p: string, body?: unknown) => json(await worker.fetch(p, { method: 'POST', body: JSON.stringify(body ?? {}) }));
const telemetry = async (): Promise<{ spans: SpanView[]; metrics: MetricView[] }> => json(await worker.fetch('/telemetry'));
const points = (metrics: MetricView[], name: string) => metrics.find((m) => m.name === name)?.points ?? [];
const sum = (metrics: MetricView[], name: string, match: Record<string, string>) =>
  points(metrics, name)
    .filter((p) => Object.entries(match).every(([k, v]) => p.attributes[k] === v))
    .reduce((n, p) => n + (typeof p.value === 'number' ? p.value : p.value.count), 0);

describe('postbox/otel inside workerd', () => {
  // In a describe: its hook runs after the file's database is migrated.
  before(async () => {
    worker = await startWorker({ entry: path.join(fixtures, 'otel-worker.ts'), databaseUrl: db.url });
  });
  after(async () => {
    await worker?.dispose();
  });

  test('enqueues, attempts and claims are spans, and the drain\'s numbers are metrics', async () => {
    const enq = (await post('/enqueue', { items: [{ to: 'a', mode: 'ok' }, { to: 'b', mode: 'flaky' }, { to: 'c', mode: 'fail' }] })) as {
      results: { status: string; id: string }[];
      traceId: string;
      spanId: string;
    };
    assert.deepEqual(enq.results.map((r) => r.status), ['created', 'created', 'created']);
    const report = (await post('/drain')) as { succeeded: number; dead: number; retrying: number };
    assert.deepEqual([report.succeeded, report.dead, report.retrying], [2, 1, 1]);

    const { spans, metrics } = await telemetry();
    // The producer span is the request's child, in its trace.
    const send = spans.filter((s) => s.name === 'send otel.mail');
    assert.equal(send.length, 1);
    assert.equal(send[0]!.kind, 3 /* PRODUCER */);
    assert.equal(send[0]!.traceId, enq.traceId);
    assert.equal(send[0]!.parentSpanId, enq.spanId);
    assert.deepEqual([send[0]!.attributes['messaging.system'], send[0]!.attributes['messaging.batch.message_count'], send[0]!.attributes['postbox.created']], ['postbox', 3, 3]);

    // One consumer span per attempt: four (the flaky job's two are siblings), each with its outcome.
    const process = spans.filter((s) => s.name === 'process otel.mail');
    assert.equal(process.length, 4);
    for (const s of process) assert.equal(s.kind, 4 /* CONSUMER */);
    const byJob = (id: string) => process.filter((s) => s.attributes['messaging.message.id'] === id).map((s) => [s.attributes['postbox.attempt'], s.attributes['postbox.outcome'], s.attributes['postbox.status'], s.status.code]);
    const [a, b, c] = enq.results.map((r) => r.id) as [string, string, string];
    assert.deepEqual(byJob(a), [[1, 'ok', 'succeeded', 1 /* OK */]]);
    assert.deepEqual(byJob(b), [[1, 'retry', 'retrying', 2 /* ERROR */], [2, 'ok', 'succeeded', 1]]);
    assert.deepEqual(byJob(c), [[1, 'fail', 'dead', 2]]);
    assert.equal(process.find((s) => s.attributes['messaging.message.id'] === c)!.attributes['error.type'], 'bad_address');
    // Each attempt links to the enqueue's span (its trace context is kept with the job), in the request's trace.
    for (const s of process) assert.deepEqual(s.links, [{ traceId: enq.traceId, spanId: send[0]!.spanId }]);
    // The flaky job's two attempts are siblings: neither is the other's parent.
    const [first, second] = process.filter((s) => s.attributes['messaging.message.id'] === b);
    assert.equal(first!.parentSpanId, second!.parentSpanId);
    assert.notEqual(second!.parentSpanId, first!.spanId);
    // Claim statements are spans too, with how many jobs each took.
    const claims = spans.filter((s) => s.name === 'postbox claim');
    assert.ok(claims.length >= 2);
    assert.equal(claims.reduce((n, s) => n + Number(s.attributes['postbox.claimed']), 0), 4);

    assert.equal(sum(metrics, 'postbox.attempts', { 'postbox.outcome': 'ok' }), 2);
    assert.equal(sum(metrics, 'postbox.attempts', { 'postbox.outcome': 'retry', 'postbox.status': 'retrying' }), 1);
    assert.equal(sum(metrics, 'postbox.attempts', {}), 4);
    assert.equal(sum(metrics, 'postbox.retries', { 'error.type': 'provider_down' }), 1);
    assert.equal(sum(metrics, 'postbox.dead_letters', { 'error.type': 'bad_address' }), 1);
    assert.equal(sum(metrics, 'postbox.enqueued', { 'postbox.result': 'created' }), 3);
    assert.equal(sum(metrics, 'postbox.attempt.duration', { 'messaging.destination.name': 'otel.mail' }), 4, 'one duration per attempt');
    assert.equal(sum(metrics, 'postbox.enqueue_to_start', { 'messaging.destination.name': 'otel.mail' }), 3, 'one wait per job: its first attempt');
  });

  test('a refused item and a dedupe hit are counted by result', async () => {
    const before = (await telemetry()).metrics;
    await post('/enqueue', { items: [{ to: 'x', mode: 'nope' }] });
    const after = (await telemetry()).metrics;
    assert.equal(sum(after, 'postbox.enqueued', { 'postbox.result': 'refused' }) - sum(before, 'postbox.enqueued', { 'postbox.result': 'refused' }), 1);
  });

  test('a sweep counts the backlog by kind, lane and status for the postbox.backlog gauge; a drained backlog reads 0', async () => {
    const pending = { 'messaging.destination.name': 'otel.mail', 'postbox.lane': 'default', 'postbox.status': 'pending' };
    await post('/enqueue', { items: [{ to: 'd', mode: 'ok' }, { to: 'e', mode: 'ok' }], delayMs: 3_600_000 });
    // Before any sweep (each request's outbox is a new one): no value yet.
    assert.deepEqual(points((await telemetry()).metrics, 'postbox.backlog'), []);
    await post('/sweep');
    const counted = points((await telemetry()).metrics, 'postbox.backlog');
    assert.deepEqual(counted.map((p) => [p.attributes, p.value]), [[pending, 2]], 'the two delayed jobs, nothing else unfinished');
    await post('/drain');
    await post('/sweep');
    assert.deepEqual(points((await telemetry()).metrics, 'postbox.backlog').map((p) => [p.attributes, p.value]), [[pending, 0]]);
  });
});

describe('exporting to a collector over OTLP/HTTP from inside workerd', () => {
  const received: { name: string; traceId: string; links: string[] }[] = [];
  let collector: http.Server;
  let worker: TestWorker;
  before(async () => {
    // The test's collector: OTLP/HTTP with JSON bodies, as the exporter sends from a Worker.
    collector = http.createServer((req, res) => {
      let body = '';
      req.on('data', (chunk) => (body += chunk));
      req.on('end', () => {
        if (req.url === '/v1/traces') {
          for (const rs of JSON.parse(body).resourceSpans ?? []) {
            for (const ss of rs.scopeSpans ?? []) {
              for (const s of ss.spans ?? []) received.push({ name: s.name, traceId: s.traceId, links: (s.links ?? []).map((l: { traceId: string }) => l.traceId) });
            }
          }
        }
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
      });
    });
    await new Promise<void>((resolve) => collector.listen(0, '127.0.0.1', resolve));
    const { port } = collector.address() as AddressInfo;
    worker = await startWorker({ entry: path.join(fixtures, 'otel-collector-worker.ts'), databaseUrl: db.url, vars: { COLLECTOR: `http://127.0.0.1:${port}` } });
  });
  after(async () => {
    await worker?.dispose();
    collector?.close();
  });

  test('a request\'s enqueue and its jobs\' attempts reach the collector, the attempts linked to the request\'s trace', async () => {
    const { traceId, succeeded } = await json(await worker.fetch('/run', { method: 'POST' }));
    assert.equal(succeeded, 2);
    const deadline = performance.now() + 10_000;
    while (received.filter((s) => s.name === 'process otlp.welcome').length < 2 && performance.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    assert.ok(received.some((s) => s.name === 'POST /signup' && s.traceId === traceId), 'the request\'s own span');
    assert.equal(received.filter((s) => s.name === 'send otlp.welcome' && s.traceId === traceId).length, 2, 'an enqueue span per enqueue, in the request\'s trace');
    const attempts = received.filter((s) => s.name === 'process otlp.welcome');
    assert.equal(attempts.length, 2);
    for (const a of attempts) assert.deepEqual(a.links, [traceId], 'each attempt links to the request\'s trace');
  });
});

test('without an SDK or a tracer or meter of its own, openTelemetry() is undefined: the outbox does no telemetry work at all', async () => {
  // This Node process has no SDK registered: the worker's is inside workerd.
  assert.equal(openTelemetry(), undefined);
  assert.equal(openTelemetry({ tracer: trace.getTracer('mine') })?.needsJobContext, true, 'a tracer of your own');
  metrics.setGlobalMeterProvider(new MeterProvider());
  assert.equal(openTelemetry()?.needsJobContext, true, 'a metrics SDK alone (the wait histogram needs the enqueue time)');
  metrics.disable();
  trace.setGlobalTracerProvider(new BasicTracerProvider());
  assert.equal(openTelemetry()?.needsJobContext, true, 'a tracing SDK');
  trace.disable();
  assert.equal(openTelemetry(), undefined, 'and none again');
});
