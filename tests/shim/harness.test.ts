// Smoke test of the integration harness: real Postgres + the Worker in workerd (Miniflare).
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { startPostgres, type PgServer } from '../support/postgres.ts';
import { startWorker, type TestWorker } from '../support/worker.ts';

const fixtures = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures');

let server: PgServer;
let dbUrl: string;
let worker: TestWorker;

before(async () => {
  mkdirSync(path.join(fixtures, 'build'), { recursive: true });
  execFileSync('wat2wasm', [path.join(fixtures, 'add.wat'), '-o', path.join(fixtures, 'build', 'add.wasm')]);
  server = await startPostgres();
  dbUrl = await server.createDatabase('harness');
  await query('CREATE TABLE harness_event (id serial PRIMARY KEY, source text NOT NULL, body jsonb NOT NULL)');
  worker = await startWorker({
    entry: path.join(fixtures, 'harness-worker.ts'),
    databaseUrl: dbUrl,
    queues: {
      producers: { NUDGES: 'postbox-nudges' },
      consumers: [{ queue: 'postbox-nudges', maxBatchSize: 10, maxBatchTimeout: 0, maxRetries: 2 }],
    },
    vars: { GREETING: 'hello' },
  });
});

after(async () => {
  await worker?.dispose();
  await server?.stop();
});

async function query(text: string, values?: unknown[]): Promise<any[]> {
  const client = new pg.Client({ connectionString: dbUrl });
  await client.connect();
  try {
    return (await client.query(text, values)).rows;
  } finally {
    await client.end();
  }
}

async function poll<T>(fn: () => Promise<T | undefined>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`nothing after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

test('fetch runs SQL through pg over the Hyperdrive binding', async () => {
  const res = await worker.fetch('/version');
  assert.equal(res.status, 200);
  const body = (await res.json()) as { version: string; greeting: string };
  assert.match(body.version, new RegExp(`^PostgreSQL ${server.serverVersion.split(' ')[0]!.replace('.', '\\.')}`));
  assert.equal(body.greeting, 'hello');
  // A second request gets its own client.
  const again = await worker.fetch('/version');
  assert.equal(again.status, 200);
  await again.arrayBuffer();
});

test('a Queue message sent by fetch reaches the real consumer, which writes to Postgres', async () => {
  const marker = `m-${Date.now()}`;
  const res = await worker.fetch(`/send?marker=${marker}`, { method: 'POST' });
  assert.equal(res.status, 202);
  const row = await poll(async () => (await query("SELECT source, body FROM harness_event WHERE body->'body'->>'marker' = $1", [marker]))[0]);
  assert.equal(row.source, 'queue:postbox-nudges');
  assert.equal(row.body.attempts, 1);
});

test('queue() dispatches a batch directly', async () => {
  const result = await worker.queue('direct-queue', [
    { id: 'msg-1', body: { marker: 'direct-1' } },
    { id: 'msg-2', body: { marker: 'direct-2' }, attempts: 3 },
  ]);
  assert.equal(result.outcome, 'ok');
  assert.deepEqual([...result.explicitAcks].sort(), ['msg-1', 'msg-2']);
  const rows = await query("SELECT body FROM harness_event WHERE source = 'queue:direct-queue' ORDER BY id");
  assert.deepEqual(rows.map((r) => [r.body.id, r.body.attempts, r.body.body.marker]), [
    ['msg-1', 1, 'direct-1'],
    ['msg-2', 3, 'direct-2'],
  ]);
});

test('scheduled() runs the cron handler with the given cron and time', async () => {
  const scheduledTime = Date.UTC(2026, 0, 1, 12, 5);
  const result = await worker.scheduled({ cron: '*/5 * * * *', scheduledTime });
  assert.equal(result.outcome, 'ok');
  const rows = await query("SELECT body FROM harness_event WHERE source = 'scheduled'");
  assert.deepEqual(rows.map((r) => r.body), [{ cron: '*/5 * * * *', scheduledTime }]);
});

test('an imported .wasm is a WebAssembly.Module that instantiates synchronously', async () => {
  const res = await worker.fetch('/wasm');
  assert.equal(res.status, 200);
  assert.deepEqual(await res.json(), { isModule: true, sum: 42 });
});
