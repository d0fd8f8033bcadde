// The SQLite bench's Worker: createSqliteOutbox on Miniflare's D1 and on a SQLite-backed Durable
// Object. `/<flavor>/seed?run=R&jobs=N&ms=M` enqueues N jobs (untimed); `/<flavor>/drain?run=R`
// drains them. The caller times the drain from outside: inside workerd the clock only moves
// across I/O.
import { DurableObject } from 'cloudflare:workers';
import type { D1Database, DurableObjectNamespace } from '@cloudflare/workers-types';
import { z } from 'zod';
import { defineJob, ok } from 'postbox';
import { createD1OutboxStore, createSqliteOutbox } from 'postbox/d1';
import { createDurableObjectOutboxStore, type DurableObjectStorageLike } from 'postbox/durable-object';

interface Env {
  DB: D1Database;
  BENCH_OBJECT: DurableObjectNamespace;
}

const work = defineJob({
  kind: 'bench.sqlite',
  payload: z.object({ n: z.number(), ms: z.number() }),
  timeoutMs: 30_000,
  async handle({ ms }) {
    if (ms > 0) await new Promise((r) => setTimeout(r, ms));
    return ok();
  },
});

const CHUNK = 500;

/** Seeds or drains one run on `store` over `db`. */
async function act<Db, Tx>(store: Parameters<typeof createSqliteOutbox<Db, Tx, never>>[0]['store'], db: Db, url: URL): Promise<Response> {
  const outbox = createSqliteOutbox({ store, jobs: [work], concurrency: Number(url.searchParams.get('concurrency') ?? 8) });
  if (url.pathname.endsWith('/seed')) {
    const jobs = Number(url.searchParams.get('jobs') ?? 1000);
    const ms = Number(url.searchParams.get('ms') ?? 0);
    for (let i = 0; i < jobs; i += CHUNK) {
      const items = Array.from({ length: Math.min(CHUNK, jobs - i) }, (_, k) => ({ payload: { n: i + k, ms } }));
      await store.transaction(db, (tx) => outbox.enqueueMany(tx, work, items));
    }
    return Response.json({ seeded: jobs });
  }
  const report = await outbox.drain(db);
  return Response.json(report);
}

export class BenchObject extends DurableObject {
  override async fetch(request: Request): Promise<Response> {
    const storage = (this.ctx as unknown as { storage: DurableObjectStorageLike }).storage;
    const store = createDurableObjectOutboxStore();
    await store.migrate(storage);
    return act(store as never, storage, new URL(request.url));
  }
}

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const url = new URL(request.url);
    const run = url.searchParams.get('run') ?? 'r';
    if (url.pathname.startsWith('/durable-object/')) {
      return env.BENCH_OBJECT.get(env.BENCH_OBJECT.idFromName(run)).fetch(request.url) as unknown as Response;
    }
    const store = createD1OutboxStore({ name: `bench_${run}` });
    await store.migrate(env.DB);
    return act(store as never, env.DB, url);
  },
};
