// Atomic completion: the handler makes its external call, then returns its bookkeeping as
// `ok({ commit })`, which runs in the same transaction as the `succeeded` transition. An
// outbox-wide `onTransition` flags users whose job dead-letters, also inside that transaction.
// `defineJobFor` types `ctx.deps`; `strictEnqueue` turns refusals into throws that roll back.
import { createOutbox, defineJobFor, EnqueueRefusedError, fail, ok, retry } from 'postbox';
import { createQueueHandler } from 'postbox/cloudflare';
import { createPgConnector } from 'postbox/pg';
import pg from 'pg';
import { z } from 'zod';

interface Env {
  OUTBOX_DB: Hyperdrive;
  OUTBOX_QUEUE: Queue;
  MAIL_API_KEY: string;
}

interface Mailer {
  send(to: string, opts: { signal: AbortSignal; idempotencyKey: string }): Promise<{ status: number; retryAfterMs?: number }>;
}

const defineJob = defineJobFor<{ mailer: Mailer }>();

const welcome = defineJob({
  kind: 'email.welcome',
  payload: z.object({ userId: z.string(), email: z.string().email() }),
  timeoutMs: 30_000,
  async handle({ userId, email }, ctx) {
    const res = await ctx.deps.mailer.send(email, { signal: ctx.signal, idempotencyKey: ctx.idempotencyKey });
    if (res.status === 429) return retry(res.retryAfterMs === undefined ? { code: 'rate_limited' } : { code: 'rate_limited', after: res.retryAfterMs });
    if (res.status >= 400) return fail({ code: `http_${res.status}` });
    return ok({ commit: (tx) => tx.query('UPDATE app_user SET welcomed_at = now() WHERE id = $1', [userId]) });
  },
});

const mailerFor = (env: Env): Mailer => ({
  async send(to, { signal, idempotencyKey }) {
    const res = await fetch('https://mail.example.com/send', {
      method: 'POST',
      signal,
      headers: { authorization: `Bearer ${env.MAIL_API_KEY}`, 'idempotency-key': idempotencyKey },
      body: JSON.stringify({ to, template: 'welcome' }),
    });
    return { status: res.status };
  },
});

const outboxFor = (env: Env) =>
  createOutbox({
    jobs: [welcome],
    deps: { mailer: mailerFor(env) }, // required and type-checked: the job declared it
    connect: createPgConnector(env.OUTBOX_DB.connectionString),
    queue: env.OUTBOX_QUEUE,
    strictEnqueue: true,
    onTransition: async (tx, { job, transition }) => {
      if (transition.to === 'dead') await tx.query('UPDATE app_user SET needs_attention = true WHERE welcome_job = $1', [job.id]);
    },
  });

export default {
  async fetch(request: Request, env: Env, ctx: ExecutionContext): Promise<Response> {
    const { email } = (await request.json()) as { email: string };
    const client = new pg.Client({ connectionString: env.OUTBOX_DB.connectionString });
    await client.connect();
    try {
      const user = await outboxFor(env).transaction(client, async (tx: pg.Client, enqueue) => {
        const { rows } = await tx.query<{ id: string }>('INSERT INTO app_user (email) VALUES ($1) RETURNING id', [email]);
        const job = await enqueue(welcome, { payload: { userId: rows[0]!.id, email }, dedupeKey: `welcome:${rows[0]!.id}` });
        await tx.query('UPDATE app_user SET welcome_job = $1 WHERE id = $2', [job.id, rows[0]!.id]);
        return rows[0]!;
      });
      return Response.json(user, { status: 201 });
    } catch (error) {
      // A refused enqueue threw and rolled the user back with it.
      if (error instanceof EnqueueRefusedError) return Response.json(error.result, { status: 400 });
      throw error;
    } finally {
      ctx.waitUntil(client.end());
    }
  },
  queue: createQueueHandler(outboxFor),
};
