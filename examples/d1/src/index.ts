// The outbox on D1. D1 has no interactive transactions; its atomic unit is db.batch([...]). So a
// signup is ONE batch: the user's INSERT followed by the enqueue's statements. Either both rows
// commit or neither does. Once it has, a Queue nudge runs the job (the queue consumer is
// createQueueHandler, as for a PostgreSQL outbox), and the Cron Trigger's tick (the same
// createScheduledHandler) picks up retries and anything a lost nudge missed.
import { defineJob, ok, retry, type QueueProducer } from 'postbox';
import { createQueueHandler, createScheduledHandler } from 'postbox/cloudflare';
import { createD1OutboxStore, createSqliteOutbox } from 'postbox/d1';
import { z } from 'zod';

interface Env {
  DB: D1Database;
  OUTBOX_QUEUE: QueueProducer;
}

const welcomeEmail = defineJob({
  kind: 'email.welcome',
  payload: z.object({ userId: z.string(), email: z.string() }),
  timeoutMs: 10_000,
  async handle({ userId, email }, ctx) {
    const { db } = ctx.deps as { db: D1Database };
    // A stand-in for a mail provider that is down on a first try for "flaky" addresses.
    if (email.startsWith('flaky') && ctx.attempt === 1) return retry({ code: 'provider_down', after: 1_000 });
    await db.prepare('UPDATE users SET welcomed_at = ?1 WHERE id = ?2').bind(Date.now(), userId).run();
    return ok();
  },
});

const store = createD1OutboxStore();
const outboxFor = (env: Env) => createSqliteOutbox({ store, jobs: [welcomeEmail], deps: { db: env.DB }, queue: env.OUTBOX_QUEUE });
/** The outbox on this Worker's database, as the queue consumer and the Cron Trigger drive it. */
const bound = (env: Env) => outboxFor(env).bind(env.DB);
const consume = createQueueHandler(bound);
const tick = createScheduledHandler(bound);

/** The app's table and the outbox's, once per isolate (both idempotent). */
let migrated: Promise<unknown> | undefined;
const migrate = (env: Env) =>
  (migrated ??= env.DB.exec('CREATE TABLE IF NOT EXISTS users (id TEXT PRIMARY KEY, email TEXT NOT NULL UNIQUE, welcomed_at INTEGER)')
    .then(() => store.migrate(env.DB))
    .catch((error) => {
      migrated = undefined;
      throw error;
    }));

export default {
  async fetch(request, env, ctx) {
    await migrate(env);
    const outbox = outboxFor(env);
    const url = new URL(request.url);
    if (request.method === 'POST' && url.pathname === '/signup') {
      const { email } = (await request.json()) as { email?: unknown };
      if (typeof email !== 'string' || !email.includes('@')) return Response.json({ error: 'email required' }, { status: 400 });
      const id = crypto.randomUUID();
      const enqueue = await outbox.enqueueStatements(env.DB, welcomeEmail, [{ payload: { userId: id, email }, dedupeKey: `welcome:${id}` }]);
      const insertUser = env.DB.prepare('INSERT INTO users (id, email) VALUES (?1, ?2)').bind(id, email);
      let results: D1Result[];
      try {
        results = await env.DB.batch([insertUser, ...(enqueue.statements as D1PreparedStatement[])]);
      } catch (error) {
        // A taken email fails the batch: no user and no job.
        return Response.json({ error: String(error) }, { status: 409 });
      }
      const [job] = enqueue.read(results.slice(1));
      // Committed: nudge the queue (never throws; a lost nudge waits for the next tick).
      if (job?.status === 'created') ctx.waitUntil(outbox.nudge([job]));
      return Response.json({ user: { id, email }, job }, { status: 201 });
    }
    if (url.pathname === '/jobs') return Response.json((await store.listJobs(env.DB, { limit: 100 })).jobs);
    if (url.pathname === '/users') return Response.json((await env.DB.prepare('SELECT id, email, welcomed_at FROM users ORDER BY email').all()).results);
    return new Response('not found', { status: 404 });
  },

  async queue(batch, env) {
    await migrate(env);
    await consume(batch, env);
  },

  async scheduled(controller, env) {
    await migrate(env);
    await tick(controller, env);
  },
} satisfies ExportedHandler<Env>;
