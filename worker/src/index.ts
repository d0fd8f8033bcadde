// Postbox reference Worker: a signup endpoint whose side effects (welcome email, CRM sync,
// webhook) are jobs enqueued in the same transaction as the user row.
//
//   POST /signup {email, badWebhook?}  → 201 {user, jobs}; 409 on a duplicate email (nothing enqueued)
//   GET  /jobs?limit=N                 → recent rows of outbox.job
//   GET  /health                       → 200 once the database answers
//   /dashboard/…                       → the operator dashboard (postbox/dashboard)
//
// Queue `postbox` delivers nudges to the runner; `postbox-dlq` only reports. The cron sweep
// runs due retries and recovers crashed attempts.
import { createOutbox, type OutboxEvent } from 'postbox';
import { createDlqHandler, createQueueHandler, createScheduledHandler } from 'postbox/cloudflare';
import { createDashboard } from 'postbox/dashboard';
import { createPgConnector } from 'postbox/pg';
import pg from 'pg';
import { crmSync, jobs, webhookDeliver, welcomeEmail } from './jobs.js';

export interface Env {
  OUTBOX_DB: Hyperdrive;
  OUTBOX_QUEUE: Queue;
  CF_VERSION_METADATA?: WorkerVersionMetadata;
  /** Signs the dashboard's CSRF tokens when set (e.g. in .dev.vars or as a secret). */
  DASHBOARD_CSRF_SECRET?: string;
}

/** Structured events go to the log as one JSON line each (Workers Logs indexes them). */
const logEvent = (event: OutboxEvent): void => console.log(JSON.stringify(event));


/** One outbox per invocation: it is cheap, and connects lazily. */
export const outboxFor = (env: Env) =>
  createOutbox({
    jobs,
    connect: createPgConnector(env.OUTBOX_DB.connectionString),
    queue: env.OUTBOX_QUEUE,
    ...(env.CF_VERSION_METADATA ? { version: env.CF_VERSION_METADATA } : {}),
    events: logEvent,
  });

const consume = createQueueHandler(outboxFor);
const reportDeadLetters = createDlqHandler({ events: logEvent });
const sweep = createScheduledHandler(outboxFor);

/**
 * The operator dashboard at /dashboard. This Worker only ever runs locally (`npm run dev`), so
 * `authorize` lets every request in; a deployed Worker must check the caller here, e.g. the
 * identity Cloudflare Access puts in front of it, and may return { tenantKey } or
 * { readOnly: true } to narrow what it grants.
 */
const dashboard = createDashboard(outboxFor, {
  basePath: '/dashboard',
  authorize: () => true,
  csrfSecret: (env) => env.DASHBOARD_CSRF_SECRET,
});

const json = (value: unknown, status = 200): Response =>
  new Response(JSON.stringify(value, null, 2), { status, headers: { 'content-type': 'application/json' } });

/** A client per request (Hyperdrive's rule); closed after the response is sent. */
async function withClient<T>(env: Env, ctx: ExecutionContext, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: env.OUTBOX_DB.connectionString });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    ctx.waitUntil(client.end().catch(() => undefined));
  }
}

interface SignupBody {
  email?: unknown;
  /** Demo switch: the user's webhook receiver rejects the event, so its job dead-letters. */
  badWebhook?: unknown;
}

interface AppUser {
  id: string;
  email: string;
  created_at: string;
}

async function signup(request: Request, env: Env, ctx: ExecutionContext): Promise<Response> {
  const body = (await request.json().catch(() => null)) as SignupBody | null;
  const email = typeof body?.email === 'string' ? body.email.trim().toLowerCase() : '';
  if (!/^[^@\s]+@[^@\s]+$/.test(email)) return json({ error: 'invalid_email' }, 400);
  const userId = crypto.randomUUID();
  const outbox = outboxFor(env);
  try {
    const result = await withClient(env, ctx, (client) =>
      // The user row and its jobs commit together, or not at all; the queue is nudged after COMMIT.
      outbox.transaction(client, async (tx: pg.Client, enqueue) => {
        const welcome = await enqueue(welcomeEmail, { payload: { userId, email }, dedupeKey: `welcome:${userId}` });
        const crm = await enqueue(crmSync, { payload: { userId, email }, dedupeKey: `crm:${userId}` });
        const webhook = await enqueue(webhookDeliver, {
          payload: { event: 'user.created', userId, bad: body?.badWebhook === true },
          dedupeKey: `webhook:user.created:${userId}`,
        });
        // Written last on purpose: a duplicate email aborts the transaction after the jobs were
        // enqueued, and the rollback takes them with it.
        const { rows } = await tx.query<AppUser>(
          'INSERT INTO public.app_user (id, email) VALUES ($1, $2) RETURNING id, email, created_at',
          [userId, email],
        );
        return { user: rows[0]!, jobs: { welcome, crm, webhook } };
      }),
    );
    return json(result, 201);
  } catch (error) {
    if ((error as { code?: string }).code === '23505') return json({ error: 'email_taken', email }, 409);
    throw error;
  }
}

/** A row of GET /jobs (also read by the dev script and the e2e test). */
export interface JobRow {
  id: string;
  kind: string;
  status: string;
  attempts: number;
  last_error_code: string | null;
  due_at: string;
  created_at: string;
  finished_at: string | null;
}

async function listJobs(url: URL, env: Env, ctx: ExecutionContext): Promise<Response> {
  const limit = Math.min(Math.max(Number(url.searchParams.get('limit') ?? 50) || 50, 1), 500);
  const rows = await withClient(env, ctx, async (client) =>
    (
      await client.query<JobRow>(
        `SELECT id, kind, status, attempts, last_error_code, due_at, created_at, finished_at
           FROM outbox.job ORDER BY created_at DESC, id DESC LIMIT $1`,
        [limit],
      )
    ).rows,
  );
  return json({ jobs: rows });
}

async function health(env: Env, ctx: ExecutionContext): Promise<Response> {
  try {
    await withClient(env, ctx, (client) => client.query('SELECT 1'));
    return json({ ok: true, version: env.CF_VERSION_METADATA ?? null });
  } catch (error) {
    return json({ ok: false, error: String(error) }, 503);
  }
}

export default {
  async fetch(request, env, ctx): Promise<Response> {
    const url = new URL(request.url);
    try {
      if (url.pathname === '/signup' && request.method === 'POST') return await signup(request, env, ctx);
      if (url.pathname === '/jobs' && request.method === 'GET') return await listJobs(url, env, ctx);
      if (url.pathname === '/health' && request.method === 'GET') return await health(env, ctx);
      if (url.pathname === '/dashboard' || url.pathname.startsWith('/dashboard/')) return await dashboard(request, env, ctx);
      return json({ error: 'not_found' }, 404);
    } catch (error) {
      console.error(JSON.stringify({ type: 'request_failed', path: url.pathname, error: String(error) }));
      return json({ error: 'internal', message: String(error) }, 500);
    }
  },

  async queue(batch, env, ctx): Promise<void> {
    if (batch.queue === 'postbox-dlq') return reportDeadLetters(batch);
    await consume(batch, env, ctx);
  },

  async scheduled(controller, env, ctx): Promise<void> {
    await sweep(controller, env, ctx);
  },
} satisfies ExportedHandler<Env>;
