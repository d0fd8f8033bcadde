// Lanes: five-minute exports run on their own queue ("bulk"), so they never delay welcome
// emails on "default". The sweep reserves a budget for the fast kind before its catch-all drain;
// exports (lease longer than the sweep's 180 s) are handed to their lane's queue instead.
import { createOutbox, defineJob, ok } from 'postbox';
import { createDlqHandler, createQueueHandler, createScheduledHandler, type QueueBatch } from 'postbox/cloudflare';
import { createPgConnector } from 'postbox/pg';
import { z } from 'zod';

interface Env {
  OUTBOX_DB: Hyperdrive;
  OUTBOX_QUEUE: Queue;
  OUTBOX_BULK_QUEUE: Queue;
}

const welcome = defineJob({
  kind: 'email.welcome',
  payload: z.object({ userId: z.string() }),
  timeoutMs: 15_000,
  handle: async () => ok(),
});

const orgExport = defineJob({
  kind: 'org.export',
  lane: 'bulk',
  payload: z.object({ orgId: z.string() }),
  timeoutMs: 300_000,
  retry: { maxAttempts: 5 },
  async handle({ orgId }, ctx) {
    await ctx.db.query('UPDATE org SET exported_at = now() WHERE id = $1', [orgId]);
    return ok();
  },
});

const outboxFor = (env: Env) =>
  createOutbox({
    jobs: [welcome, orgExport],
    connect: createPgConnector(env.OUTBOX_DB.connectionString),
    queue: { default: env.OUTBOX_QUEUE, bulk: env.OUTBOX_BULK_QUEUE },
    concurrency: 8,
  });

const mail = createQueueHandler(outboxFor);
const bulk = createQueueHandler(outboxFor, { lane: 'bulk' });
const dlq = createDlqHandler({ events: (e) => console.log(JSON.stringify(e)) });

export default {
  async queue(batch: QueueBatch, env: Env): Promise<void> {
    if (batch.queue.endsWith('-dlq')) return dlq(batch);
    await (batch.queue === 'outbox-bulk' ? bulk : mail)(batch, env);
  },
  scheduled: createScheduledHandler(outboxFor, {
    reserved: [{ name: 'mail', kinds: ['email.welcome'], budget: { maxJobs: 50, deadlineMs: 45_000 } }],
    retention: { succeededRetentionMs: 3 * 86_400_000 },
  }),
};
