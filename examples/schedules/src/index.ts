// Schedules: a weekly newsletter (one job per tick, keyed by the tick's time, so a tick
// delivered twice enqueues nothing new) and a nightly fan-out that enqueues one job per shop
// in one transaction with enqueueMany (one statement per list). List both crons in
// wrangler.jsonc `triggers.crons` so each runs on its minute; a missed tick is caught up by the
// next one (outbox.schedule_run remembers each schedule's last occurrence).
import { createOutbox, defineJob, ok } from 'postbox';
import { createScheduledHandler, defineSchedule } from 'postbox/cloudflare';
import { createPgConnector } from 'postbox/pg';
import { z } from 'zod';

interface Env {
  OUTBOX_DB: Hyperdrive;
  OUTBOX_QUEUE: Queue;
}

const newsletter = defineJob({
  kind: 'newsletter.weekly',
  payload: z.object({ week: z.string() }),
  timeoutMs: 120_000,
  handle: async () => ok(),
});

const insightsSync = defineJob({
  kind: 'insights.sync',
  payload: z.object({ shopId: z.string(), day: z.string() }),
  timeoutMs: 60_000,
  handle: async () => ok(),
});

const outboxFor = (env: Env) =>
  createOutbox({
    jobs: [newsletter, insightsSync],
    connect: createPgConnector(env.OUTBOX_DB.connectionString),
    queue: env.OUTBOX_QUEUE,
  });

export default {
  scheduled: createScheduledHandler(outboxFor, {
    schedules: [
      // Cloudflare's cron: UTC, weekdays 1-7 with 1 = SUN; names work too.
      defineSchedule({
        cron: '0 9 * * MON',
        job: newsletter,
        payload: ({ scheduledAt }) => ({ week: scheduledAt.toISOString().slice(0, 10) }),
      }),
      defineSchedule({
        cron: '0 2 * * *',
        name: 'insights',
        async run({ scheduledAt, tx, enqueueMany }) {
          const day = scheduledAt.toISOString().slice(0, 10);
          const { rows } = await tx.query('SELECT id FROM shop');
          // One statement per 5000 shops (enqueueMany's cap), each job keyed by shop and day.
          const shops = rows as { id: string }[];
          for (let i = 0; i < shops.length; i += 5000) {
            await enqueueMany(
              insightsSync,
              shops.slice(i, i + 5000).map((shop) => ({ payload: { shopId: shop.id, day }, dedupeKey: `insights:${shop.id}:${day}`, tenantKey: shop.id })),
            );
          }
        },
      }),
    ],
  }),
};
