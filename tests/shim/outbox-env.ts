// Shared set-up of the outbox integration tests: one real PostgreSQL server and one Worker
// (tests/shim/fixtures/outbox-worker.ts) in workerd per test file, a fresh schema per test.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, beforeEach } from 'node:test';
import pg from 'pg';
import { migrate } from '../../js-shim/src/sql/index.ts';
import { startPostgres, type PgServer } from '../support/postgres.ts';
import { startWorker, type TestWorker } from '../support/worker.ts';

const fixtures = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures');

export interface OutboxEnv {
  server: PgServer;
  dbUrl: string;
  worker: TestWorker;
  sql(text: string, values?: unknown[]): Promise<any[]>;
  post(pathname: string, body: unknown): Promise<{ status: number; body: any }>;
  events(): Promise<any[]>;
  /** The sendBatch calls the outbox made since the last call (and reset). */
  sent(): Promise<{ queue: string; messages: { body: any; delaySeconds?: number }[] }[]>;
  job(id: string): Promise<any>;
  reset(): Promise<void>;
  stop(): Promise<void>;
}

export async function startOutboxEnv(opts: { databaseUrl?: string; vars?: Record<string, string>; entry?: string } = {}): Promise<OutboxEnv> {
  const server = await startPostgres();
  const dbUrl = await server.createDatabase('outbox_test');
  const client = new pg.Client({ connectionString: dbUrl });
  await client.connect();
  await migrate(client);
  await client.query('CREATE TABLE public.sink (id serial PRIMARY KEY, key text NOT NULL, note text NOT NULL, attempt int NOT NULL)');
  await client.query('CREATE TABLE public.app_row (id serial PRIMARY KEY, note text NOT NULL)');
  const worker = await startWorker({
    entry: path.join(fixtures, opts.entry ?? 'outbox-worker.ts'),
    databaseUrl: opts.databaseUrl ?? dbUrl,
    queues: {
      producers: { OUTBOX_QUEUE: 'postbox', BULK_QUEUE: 'postbox-bulk' },
      consumers: [
        { queue: 'postbox', maxBatchSize: 10, maxBatchTimeout: 0, maxRetries: 2, deadLetterQueue: 'postbox-dlq' },
        { queue: 'postbox-bulk', maxBatchSize: 10, maxBatchTimeout: 0 },
      ],
    },
    ...(opts.vars ? { vars: opts.vars } : {}),
  });
  const sql = async (text: string, values?: unknown[]) => (await client.query(text, values)).rows;
  const post = async (pathname: string, body: unknown) => {
    const res = await worker.fetch(pathname, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
    return { status: res.status, body: await res.json() };
  };
  return {
    server,
    dbUrl,
    worker,
    sql,
    post,
    events: async () => (await (await worker.fetch('/events')).json()) as any[],
    sent: async () => (await (await worker.fetch('/sent')).json()) as any[],
    job: async (id) => (await sql('SELECT * FROM outbox.job WHERE id = $1', [id]))[0],
    async reset() {
      await sql('DELETE FROM outbox.job; DELETE FROM outbox.schedule_run; DELETE FROM public.sink; DELETE FROM public.app_row');
      await post('/clock', { offsetMs: 0 });
      await post('/hook', { mode: 'off' });
      await post('/version', { timestamp: null });
      await post('/break', { statement: null });
      await post('/queue-down', { down: false });
      await post('/single-queue', { on: false });
      await post('/options', {});
      await worker.fetch('/nudge-writes');
      await worker.fetch('/events');
      await worker.fetch('/sent');
    },
    async stop() {
      await worker.dispose();
      await client.end();
      await server.stop();
    },
  };
}

/** Makes a job look like its isolate died mid-attempt: claimed, lease already expired. */
export async function crashWhileRunning(env: Pick<OutboxEnv, 'sql'>, id: string): Promise<void> {
  await env.sql(`UPDATE outbox.job SET status = 'running', attempt_seq = attempt_seq + 1,
                  lease_expires_at = now() - interval '1 second' WHERE id = $1`, [id]);
  await env.sql(`INSERT INTO outbox.attempt (job_id, seq, kind, started_at, lease_expires_at)
                 SELECT id, attempt_seq, kind, now() - interval '1 minute', lease_expires_at FROM outbox.job WHERE id = $1`, [id]);
}

/**
 * This test file's environment: started before its tests, reset before each test, stopped
 * after them. The object is filled in when the file's `before` hook has run.
 */
export function useOutboxEnv(opts: Parameters<typeof startOutboxEnv>[0] = {}): OutboxEnv {
  const env = {} as OutboxEnv;
  before(async () => {
    Object.assign(env, await startOutboxEnv(opts));
  });
  after(async () => {
    await env.stop?.();
  });
  beforeEach(async () => {
    await env.reset();
  });
  return env;
}

/** Polls until `fn` returns something other than undefined. */
export async function until<T>(fn: () => Promise<T | undefined | null | false>, timeoutMs = 15_000): Promise<T> {
  // Monotonic: a wall-clock step on the machine (NTP at boot) must not cut the wait short.
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = await fn();
    if (value !== undefined && value !== null && value !== false) return value as T;
    if (performance.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
