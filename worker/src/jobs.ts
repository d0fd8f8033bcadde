// The reference app's jobs. Each "provider" is a table in the same database, so a run's effect
// is visible with plain SQL; swap the INSERTs for real API calls in a real app.
import { defineJob, fail, ok, retry } from 'postbox';
import { z } from 'zod';

/** Sends the welcome email. Idempotent: a re-run of the same job sends nothing new. */
export const welcomeEmail = defineJob({
  kind: 'email.welcome',
  payload: z.object({ userId: z.string().uuid(), email: z.string().email() }),
  timeoutMs: 10_000,
  async handle({ userId, email }, ctx) {
    // ctx.idempotencyKey is stable across retries: the provider (here, a unique column) dedupes.
    await ctx.db.query(
      `INSERT INTO public.sent_email (idempotency_key, user_id, to_email, template)
       VALUES ($1, $2, $3, 'welcome')
       ON CONFLICT (idempotency_key) DO NOTHING`,
      [ctx.idempotencyKey, userId, email],
    );
    return ok();
  },
});

/** How many attempts the fake CRM refuses before it answers. */
export const CRM_OUTAGE_ATTEMPTS = 2;

/** Copies the user to the CRM, which is "down" for the first attempts: transient failures, retried. */
export const crmSync = defineJob({
  kind: 'crm.sync',
  payload: z.object({ userId: z.string().uuid(), email: z.string() }),
  timeoutMs: 10_000,
  // Short backoff so the demo shows a retry within seconds (production would keep the default).
  retry: { maxAttempts: 5, backoff: { baseMs: 1_000, maxMs: 4_000 } },
  async handle({ userId, email }, ctx) {
    if (ctx.attempt <= CRM_OUTAGE_ATTEMPTS) return retry({ code: 'crm_unavailable' });
    await ctx.db.query(
      `INSERT INTO public.crm_contact (user_id, email) VALUES ($1, $2)
       ON CONFLICT (user_id) DO UPDATE SET email = EXCLUDED.email, synced_at = now()`,
      [userId, email],
    );
    return ok();
  },
});

/** Delivers a webhook. A receiver that answers 4xx will never accept it: dead-letter at once. */
export const webhookDeliver = defineJob({
  kind: 'webhook.deliver',
  payload: z.object({ event: z.string(), userId: z.string().uuid(), bad: z.boolean().default(false) }),
  timeoutMs: 10_000,
  async handle({ event, userId, bad }, ctx) {
    // `bad` stands for a receiver that rejects the request (HTTP 400): retrying cannot help.
    if (bad) return fail({ code: 'http_4xx' });
    await ctx.db.query(
      `INSERT INTO public.webhook_delivery (idempotency_key, event, user_id) VALUES ($1, $2, $3)
       ON CONFLICT (idempotency_key) DO NOTHING`,
      [ctx.idempotencyKey, event, userId],
    );
    return ok();
  },
});

export const jobs = [welcomeEmail, crmSync, webhookDeliver] as const;
