// A Durable Object that owns its accounts and their outbox in one SQLite database: a signup
// writes the user row and enqueues the welcome job in ONE storage transaction, and the object's
// alarm() stands in for the cron sweep (recover expired leases, run due jobs, retention).
import { DurableObject } from 'cloudflare:workers';
import { defineJob, ok, retry } from 'postbox';
import { createDurableObjectOutboxStore, createSqliteOutbox } from 'postbox/durable-object';
import { z } from 'zod';

interface Env {
  ACCOUNTS: DurableObjectNamespace<Accounts>;
}

/** The sweep's period when nothing is due sooner: what a `*\/1 * * * *` cron would give. */
const SWEEP_EVERY_MS = 60_000;

const welcomeEmail = defineJob({
  kind: 'email.welcome',
  payload: z.object({ userId: z.string(), email: z.string() }),
  timeoutMs: 10_000,
  async handle({ userId, email }, ctx) {
    const { sql } = ctx.deps as { sql: SqlStorage };
    // A stand-in for a mail provider that is down on a first try for "flaky" addresses.
    if (email.startsWith('flaky') && ctx.attempt === 1) return retry({ code: 'provider_down', after: 1_000 });
    sql.exec('UPDATE users SET welcomed_at = ? WHERE id = ?', Date.now(), userId);
    return ok();
  },
});

export class Accounts extends DurableObject<Env> {
  readonly #outbox;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.#outbox = createSqliteOutbox({ store: createDurableObjectOutboxStore(), jobs: [welcomeEmail], deps: { sql: ctx.storage.sql } });
    ctx.blockConcurrencyWhile(async () => {
      ctx.storage.sql.exec('CREATE TABLE IF NOT EXISTS users (id TEXT PRIMARY KEY, email TEXT NOT NULL UNIQUE, welcomed_at INTEGER)');
      await this.#outbox.store.migrate(ctx.storage);
    });
  }

  override async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    const storage = this.ctx.storage;
    if (request.method === 'POST' && url.pathname === '/signup') {
      const { email } = (await request.json()) as { email?: unknown };
      if (typeof email !== 'string' || !email.includes('@')) return Response.json({ error: 'email required' }, { status: 400 });
      const id = crypto.randomUUID();
      let job;
      try {
        job = await this.#outbox.store.transaction(storage, async (tx) => {
          tx.sql.exec('INSERT INTO users (id, email) VALUES (?, ?)', id, email);
          return this.#outbox.enqueue(tx, welcomeEmail, { payload: { userId: id, email }, dedupeKey: `welcome:${id}` });
        });
      } catch (error) {
        // A taken email fails the transaction: no user and no job.
        return Response.json({ error: String(error) }, { status: 409 });
      }
      // The nudge: an alarm now runs the job within moments instead of at the next sweep.
      await storage.setAlarm(Date.now());
      return Response.json({ user: { id, email }, job }, { status: 201 });
    }
    if (url.pathname === '/jobs') return Response.json((await this.#outbox.store.listJobs(storage, { limit: 100 })).jobs);
    if (url.pathname === '/users') return Response.json(storage.sql.exec('SELECT id, email, welcomed_at FROM users ORDER BY email').toArray());
    return new Response('not found', { status: 404 });
  }

  /** The sweep, then the next alarm: when the next job falls due, and never later than a sweep period. */
  override async alarm(): Promise<void> {
    await this.#outbox.sweep(this.ctx.storage);
    const next = await this.#outbox.nextDueAt(this.ctx.storage);
    await this.ctx.storage.setAlarm(Math.min(next ?? Infinity, Date.now() + SWEEP_EVERY_MS));
  }
}

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    // One object holds every account here; shard by tenant with idFromName(tenant) in a real app.
    return env.ACCOUNTS.get(env.ACCOUNTS.idFromName('accounts')).fetch(request);
  },
} satisfies ExportedHandler<Env>;
