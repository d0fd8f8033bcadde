// Type-level tests of several outboxes (createOutboxes): keys are typed from `databases`, the
// default must be one of them, deps are checked as for createOutbox, and the Cloudflare handlers
// answer a fleet's factory with the fleet's reports.
import { createOutbox, createOutboxes, defineJob, defineJobFor, ok, type Connector, type EnqueueAccepted, type OutboxFleet, type RunReport } from 'postbox';
import {
  createQueueHandler,
  createScheduledHandler,
  type FleetQueueReport,
  type FleetScheduledReport,
  type QueueBatch,
  type ScheduledReport,
} from 'postbox/cloudflare';
import { z } from 'zod';

declare const connect: Connector;
declare const batch: QueueBatch;

const plain = defineJob({ kind: 'plain', payload: z.object({ n: z.number() }), timeoutMs: 1_000, handle: async () => ok() });
const mailing = defineJobFor<{ mailer: { send(to: string): Promise<void> } }>()({
  kind: 'mailing',
  payload: z.object({ to: z.string() }),
  timeoutMs: 1_000,
  handle: async () => ok(),
});

const fleet = createOutboxes({ jobs: [plain], databases: { eu: connect, us: { connect, concurrency: 2 } }, default: 'eu' });
const both: OutboxFleet<'eu' | 'us'> = fleet;
void both;
fleet.eu.enqueue(null, plain, { payload: { n: 1 } });
// @ts-expect-error no such database
void fleet.ap;
// @ts-expect-error the default must be one of the keys
createOutboxes({ jobs: [plain], databases: { eu: connect }, default: 'us' });
// @ts-expect-error a payload of the wrong shape
fleet.us.enqueue(null, plain, { payload: { n: 'one' } });
// @ts-expect-error deps missing
createOutboxes({ jobs: [mailing], databases: { eu: connect } });
createOutboxes({ jobs: [mailing], databases: { eu: connect }, deps: { mailer: { send: async () => undefined } } });
// @ts-expect-error connect is shared by no database: each brings its own
createOutboxes({ jobs: [plain], connect, databases: { eu: connect } });

// strictEnqueue: every outbox's results are accepted ones.
const strict = createOutboxes({ jobs: [plain], databases: { eu: connect }, strictEnqueue: true });
const accepted: Promise<EnqueueAccepted> = strict.eu.enqueue(null, plain, { payload: { n: 1 } });
void accepted;

// The handlers: a fleet's factory gets the fleet's reports, a lone outbox's the usual ones.
const fleetQueue: Promise<FleetQueueReport> = createQueueHandler(() => fleet)(batch, {});
const loneQueue: Promise<RunReport> = createQueueHandler(() => createOutbox({ jobs: [plain], connect }))(batch, {});
const fleetTick: Promise<FleetScheduledReport> = createScheduledHandler(() => fleet, { schedules: { eu: [] } })({ cron: '*/5 * * * *', scheduledTime: 0 }, {});
const loneTick: Promise<ScheduledReport> = createScheduledHandler(() => createOutbox({ jobs: [plain], connect }))({ cron: '*/5 * * * *', scheduledTime: 0 }, {});
void fleetQueue;
void loneQueue;
void fleetTick;
void loneTick;
